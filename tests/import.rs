//! `nanogate import-nanobot` on files real nanobot wrote (0.3.5 and 0.1.4), and on hand-made configs.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{copy_dir, fixture, nanogate, stdout};
use nanogate::config::Config;
use nanogate::import::{self, Kind, Options, Outcome, Report};
use nanogate::json::Json;
use nanogate::session::{self, key};

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    walk(dir, &mut out);
    out
}

fn options(home: &Path, from: &Path, apply: bool) -> Options {
    Options {
        from: from.to_path_buf(),
        config_path: home.join(".nanogate/config.toml"),
        workspace: home.join(".nanogate/workspace"),
        cron_store: home.join(".nanogate/cron/jobs.json"),
        apply,
    }
}

fn session_items(r: &Report) -> Vec<&import::Item> {
    r.items.iter().filter(|i| i.kind == Kind::Session).collect()
}

#[test]
fn dry_run_writes_nothing_and_apply_imports_every_0_3_5_session() {
    let home = tempfile::tempdir().unwrap();
    let from = fixture("nanobot-0.3.5");
    let before_src = snapshot(&from);

    let dry = import::run(&options(home.path(), &from, false)).unwrap();
    assert!(
        snapshot(home.path()).is_empty(),
        "a dry run must write nothing"
    );
    assert!(dry.render().contains("nothing was written"));

    let report = import::run(&options(home.path(), &from, true)).unwrap();
    assert_eq!(snapshot(&from), before_src, "the source must never change");
    // The dry run planned exactly what the real run did.
    assert_eq!(dry.imported(), report.imported());
    assert_eq!(report.skipped(), 0, "{}", report.render());

    let expected =
        Json::parse(&std::fs::read_to_string(from.join("history.json")).unwrap()).unwrap();
    let expected = expected.as_object().unwrap();
    let sessions_dir = home.path().join(".nanogate/workspace/sessions");
    assert_eq!(session_items(&report).len(), expected.len());
    for (k, want) in expected.iter() {
        let want = want.as_object().unwrap();
        let path = sessions_dir.join(key::file_name(k).unwrap());
        let loaded = session::load_file(&path, None)
            .unwrap()
            .unwrap_or_else(|| panic!("{k:?} not imported"));
        assert!(loaded.problems.is_empty(), "{k:?}: {:?}", loaded.problems);
        let s = &loaded.session;
        assert_eq!(s.key(), k);
        assert_eq!(
            s.len() as u64,
            want.get("message_count").unwrap().as_u64().unwrap(),
            "{k:?}"
        );
        assert_eq!(
            s.last_consolidated() as u64,
            want.get("last_archived").unwrap().as_u64().unwrap(),
            "{k:?}"
        );
        // Every line is what Python's json.dumps writes, and line 1 has the classic keys in the classic order.
        let text = std::fs::read_to_string(&path).unwrap();
        let first = Json::parse(text.lines().next().unwrap()).unwrap();
        let keys: Vec<&str> = first.as_object().unwrap().iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "_type",
                "key",
                "created_at",
                "updated_at",
                "metadata",
                "last_consolidated"
            ]
        );
        for line in text.lines() {
            assert_eq!(Json::parse(line).unwrap().to_python(), line);
            assert!(!line.contains("provider_state"), "{k:?}");
        }
    }

    // Line 1 and messages keep their values; extra message fields survive.
    let cli = std::fs::read_to_string(sessions_dir.join("cli_direct.jsonl")).unwrap();
    let src = std::fs::read_to_string(from.join("sessions/Y2xpOmRpcmVjdA.jsonl")).unwrap();
    let src_lines: Vec<&str> = src.lines().collect();
    let lines: Vec<&str> = cli.lines().collect();
    assert_eq!(
        lines[0],
        src_lines[0].replace("\"last_archived\": 0, ", ""),
        "classic line 1 = 0.3.x line 1 without last_archived"
    );
    assert_eq!(&lines[1..], &src_lines[1..], "messages byte for byte");
    assert!(cli.contains("\"latency_ms\": 147"));

    // The damaged fixture: good messages imported, bad lines kept byte for byte in the sidecar.
    let side = sessions_dir.join("repair_bad-lines.jsonl.damaged");
    assert_eq!(
        std::fs::read_to_string(side).unwrap(),
        "{this is not json\n[1, 2, 3]\n"
    );

    // Memory and cron.
    let history =
        std::fs::read_to_string(home.path().join(".nanogate/workspace/memory/HISTORY.md")).unwrap();
    assert!(history.starts_with("[2026-11-22 09:50] - [ephemeral] Active objective"));
    assert!(history.ends_with("Europe/Berlin\n\n"));
    assert_eq!(history.matches("[2026-11-22 09:50]").count(), 2);
    assert_eq!(
        std::fs::read(home.path().join(".nanogate/workspace/memory/MEMORY.md")).unwrap(),
        std::fs::read(from.join("workspace/memory/MEMORY.md")).unwrap()
    );
    let jobs_text = std::fs::read_to_string(home.path().join(".nanogate/cron/jobs.json")).unwrap();
    assert!(!jobs_text.ends_with('\n'));
    let jobs = Json::parse(&jobs_text).unwrap();
    assert_eq!(jobs.to_python_indent(2), jobs_text);
    let list = jobs
        .as_object()
        .unwrap()
        .get("jobs")
        .unwrap()
        .as_array()
        .unwrap();
    let ids: Vec<&str> = list
        .iter()
        .map(|j| j.as_object().unwrap().get("id").unwrap().as_str().unwrap())
        .collect();
    assert_eq!(ids, ["2b09d371", "314b5f9c", "25082a58", "dceef709"]);
    let water = list[0].as_object().unwrap();
    let keys: Vec<&str> = water.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "enabled",
            "schedule",
            "payload",
            "state",
            "createdAtMs",
            "updatedAtMs",
            "deleteAfterRun"
        ]
    );
    let payload = water.get("payload").unwrap().as_object().unwrap();
    assert_eq!(
        payload.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        ["kind", "message", "deliver", "channel", "to"]
    );
    assert!(!jobs_text.contains("runHistory"));

    // A second run changes nothing and says so.
    let after = snapshot(home.path());
    let again = import::run(&options(home.path(), &from, true)).unwrap();
    assert_eq!(again.imported(), 0, "{}", again.render());
    assert_eq!(again.skipped(), 0, "{}", again.render());
    assert!(
        again
            .render()
            .contains("nothing to do: everything already exists")
    );
    assert_eq!(snapshot(home.path()), after);
}

#[test]
fn imported_sessions_give_nanobots_history() {
    // The model's view of each imported session equals what nanobot 0.3.5 computed for the simple sessions
    // (no orphan tool results or checkpoints, which 0.3.5 treats differently from the classic get_history).
    let home = tempfile::tempdir().unwrap();
    let from = fixture("nanobot-0.3.5");
    import::run(&options(home.path(), &from, true)).unwrap();
    let expected =
        Json::parse(&std::fs::read_to_string(from.join("history.json")).unwrap()).unwrap();
    let dir = home.path().join(".nanogate/workspace/sessions");
    for k in [
        "cli:direct",
        "api:watermark",
        "x",
        "a/b/c",
        "  padded  ",
        "repair:bad-lines",
    ] {
        let want = expected
            .as_object()
            .unwrap()
            .get(k)
            .unwrap()
            .as_object()
            .unwrap()
            .get("get_history()")
            .unwrap()
            .clone();
        let loaded = session::find_session(&dir, k).unwrap().unwrap();
        assert_eq!(Json::Array(loaded.session.history(500)), want, "{k:?}");
    }
}

#[test]
fn classic_0_1_4_files_are_copied_as_they_are() {
    let home = tempfile::tempdir().unwrap();
    let from = fixture("nanobot-0.1.4");
    let report = import::run(&options(home.path(), &from, true)).unwrap();
    assert_eq!(report.skipped(), 0, "{}", report.render());
    let src = from.join("workspace/sessions");
    let dst = home.path().join(".nanogate/workspace/sessions");
    let mut n = 0;
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        assert_eq!(
            std::fs::read(&p).unwrap(),
            std::fs::read(dst.join(name)).unwrap()
        );
        n += 1;
    }
    assert_eq!(session_items(&report).len(), n);
    // A classic store converts to itself.
    assert_eq!(
        std::fs::read(from.join("cron/jobs.json")).unwrap(),
        std::fs::read(home.path().join(".nanogate/cron/jobs.json")).unwrap()
    );
    assert_eq!(
        std::fs::read(from.join("workspace/memory/HISTORY.md")).unwrap(),
        std::fs::read(home.path().join(".nanogate/workspace/memory/HISTORY.md")).unwrap()
    );
    let again = import::run(&options(home.path(), &from, true)).unwrap();
    assert_eq!(
        (again.imported(), again.skipped()),
        (0, 0),
        "{}",
        again.render()
    );
}

#[test]
fn bad_inputs_are_skipped_with_a_reason_and_nothing_is_overwritten() {
    let home = tempfile::tempdir().unwrap();
    let from = tempfile::tempdir().unwrap();
    let sessions = from.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    // Not UTF-8.
    std::fs::write(
        sessions.join("eA.jsonl"),
        b"{\"_type\": \"metadata\", \"key\": \"x\"}\n\xff\xfe\n",
    )
    .unwrap();
    // No metadata line and a name that is not base64url.
    std::fs::write(
        sessions.join("not+base64.jsonl"),
        "{\"role\": \"user\", \"content\": \"hi\"}\n",
    )
    .unwrap();
    // A good one whose target already exists with another conversation under the same key.
    std::fs::write(
        sessions.join("eHk.jsonl"),
        "{\"_type\": \"metadata\", \"key\": \"xy\", \"created_at\": \"2026-01-01T00:00:00\", \"updated_at\": \"2026-01-01T00:00:00\", \"metadata\": {}, \"last_archived\": 9, \"last_consolidated\": 9}\n{\"role\": \"user\", \"content\": \"new\"}\n",
    )
    .unwrap();
    let dst = home.path().join(".nanogate/workspace/sessions");
    std::fs::create_dir_all(&dst).unwrap();
    let theirs = "{\"_type\": \"metadata\", \"key\": \"xy\", \"created_at\": \"x\", \"updated_at\": \"x\", \"metadata\": {}, \"last_consolidated\": 0}\n";
    std::fs::write(dst.join("xy.jsonl"), theirs).unwrap();
    // A broken history.jsonl line and a broken jobs.json.
    std::fs::create_dir_all(from.path().join("workspace/memory")).unwrap();
    std::fs::write(
        from.path().join("workspace/memory/history.jsonl"),
        "{\"cursor\": 1, \"timestamp\": \"2026-01-01 10:00\", \"content\": \"met Bob\"}\nnot json\n",
    )
    .unwrap();
    std::fs::create_dir_all(from.path().join("cron")).unwrap();
    std::fs::write(
        from.path().join("cron/jobs.json"),
        "{\"version\": 1, \"jobs\": [",
    )
    .unwrap();
    // An existing HISTORY.md that already holds the entry.
    let mem = home.path().join(".nanogate/workspace/memory");
    std::fs::create_dir_all(&mem).unwrap();
    std::fs::write(mem.join("HISTORY.md"), "[2026-01-01 10:00] met Bob\n\n").unwrap();

    let report = import::run(&options(home.path(), from.path(), true)).unwrap();
    let text = report.render();
    let reason = |what: &str| {
        report
            .items
            .iter()
            .find(|i| i.what.contains(what))
            .map(|i| i.outcome.clone())
            .unwrap_or_else(|| panic!("{what} not reported:\n{text}"))
    };
    assert!(matches!(reason("eA.jsonl"), Outcome::Skipped { reason } if reason.contains("UTF-8")));
    assert!(
        matches!(reason("not+base64"), Outcome::Skipped { reason } if reason.contains("base64"))
    );
    assert!(matches!(reason("eHk.jsonl"), Outcome::Exists { .. }));
    assert!(
        matches!(reason("cron/jobs.json"), Outcome::Skipped { reason } if reason.contains("JSON"))
    );
    assert!(matches!(reason("history.jsonl"), Outcome::Exists { .. }));
    assert!(text.contains("line 2: not a JSON object"));
    // Nothing overwritten, nothing half-written.
    assert_eq!(
        std::fs::read_to_string(dst.join("xy.jsonl")).unwrap(),
        theirs
    );
    assert_eq!(
        std::fs::read_to_string(mem.join("HISTORY.md")).unwrap(),
        "[2026-01-01 10:00] met Bob\n\n"
    );
    assert!(!dst.join("x.jsonl").exists());
    assert!(!home.path().join(".nanogate/cron").exists());
    let names: Vec<String> = std::fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["xy.jsonl"], "no temporary files left");
}

#[test]
fn history_gets_only_the_missing_entries() {
    let home = tempfile::tempdir().unwrap();
    let from = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(from.path().join("workspace/memory")).unwrap();
    std::fs::write(
        from.path().join("workspace/memory/history.jsonl"),
        "{\"cursor\": 1, \"timestamp\": \"2026-01-01 10:00\", \"content\": \"met Bob\"}\n\
         {\"cursor\": 2, \"timestamp\": \"2026-01-02 11:00\", \"content\": \"planned a trip  \\n\"}\n",
    )
    .unwrap();
    let mem = home.path().join(".nanogate/workspace/memory");
    std::fs::create_dir_all(&mem).unwrap();
    std::fs::write(
        mem.join("HISTORY.md"),
        "[2025-12-31 09:00] older\n\n[2026-01-01 10:00] met Bob\n\n",
    )
    .unwrap();
    import::run(&options(home.path(), from.path(), true)).unwrap();
    let want = "[2025-12-31 09:00] older\n\n[2026-01-01 10:00] met Bob\n\n[2026-01-02 11:00] planned a trip\n\n";
    assert_eq!(
        std::fs::read_to_string(mem.join("HISTORY.md")).unwrap(),
        want
    );
    import::run(&options(home.path(), from.path(), true)).unwrap();
    assert_eq!(
        std::fs::read_to_string(mem.join("HISTORY.md")).unwrap(),
        want
    );
}

const CAMEL: &str = r#"{
  "agents": {"defaults": {"workspace": "~/.nanobot/workspace", "model": "anthropic/claude-opus-4-5",
                          "maxTokens": 8192, "temperature": 0.1, "maxToolIterations": 20, "memoryWindow": 50,
                          "reasoningEffort": "high"}},
  "channels": {"sendProgress": true,
               "telegram": {"enabled": true, "token": "123:SECRET-TG", "allowFrom": ["42", "alice"], "proxy": null},
               "discord": {"enabled": false, "token": "SECRET-DC", "allowFrom": [], "intents": 37377},
               "slack": {"enabled": true, "botToken": "xoxb"}},
  "providers": {"anthropic": {"apiKey": ""}, "openrouter": {"apiKey": "sk-or-SECRET", "apiBase": null},
                "openai": {"apiKey": "sk-SECRET-2"}},
  "gateway": {"host": "0.0.0.0", "port": 18790, "heartbeat": {"enabled": true, "intervalS": 1800}},
  "tools": {"web": {"search": {"apiKey": "", "maxResults": 5}}, "exec": {"timeout": 120, "pathAppend": ""},
            "restrictToWorkspace": false, "mcpServers": {}}
}"#;

const SNAKE: &str = r#"{
  "agents": {"defaults": {"model": "openai/gpt-4o", "max_tokens": 1000, "temperature": 0.5,
                          "max_tool_iterations": 7, "memory_window": 30, "provider": "openai"}},
  "providers": {"openai": {"api_key": "sk-SNAKE-SECRET", "extra_headers": {"X-A": "b"}}},
  "channels": {"discord": {"enabled": true, "token": "tok \"quoted\" \\ back", "allow_from": ["1"]}},
  "tools": {"exec": {"timeout": 5}, "restrict_to_workspace": true}
}"#;

/// Parses the generated config: the whole text as TOML, and the part our `Config` knows (channels, cron and
/// heartbeat belong to the gateway and scheduler branches) with our own loader.
fn parse_config(text: &str) -> (toml::Table, Config) {
    let table: toml::Table = toml::from_str(text).unwrap();
    let mut ours = table.clone();
    for s in ["channels", "cron", "heartbeat"] {
        ours.remove(s);
    }
    let config = Config::from_toml(
        &toml::to_string(&ours).unwrap(),
        std::iter::empty(),
        Path::new("config.toml"),
    )
    .unwrap();
    (table, config)
}

#[test]
fn camel_case_config_becomes_config_toml_without_printing_secrets() {
    let home = tempfile::tempdir().unwrap();
    let from = tempfile::tempdir().unwrap();
    std::fs::write(from.path().join("config.json"), CAMEL).unwrap();
    let from_s = from.path().to_str().unwrap();
    let dry = nanogate(home.path(), &["import-nanobot", "--from", from_s]);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(
        snapshot(home.path()).is_empty(),
        "a dry run must write nothing"
    );
    let o = nanogate(
        home.path(),
        &["import-nanobot", "--from", from_s, "--apply"],
    );
    assert!(o.status.success());
    let out = stdout(&o) + &stdout(&dry);
    for secret in ["SECRET", "xoxb"] {
        assert!(!out.contains(secret), "secret printed:\n{out}");
    }
    assert!(out.contains("provider.api_key: set"));
    assert!(out.contains("channels.telegram.token: set"));
    assert!(out.contains("skipped `channels.slack`"));
    assert!(out.contains("skipped `agents.defaults.reasoningEffort`"));
    assert!(out.contains("skipped `providers.openai`"));
    assert!(out.contains("skipped `gateway.host`"));

    let text = std::fs::read_to_string(home.path().join(".nanogate/config.toml")).unwrap();
    let (table, config) = parse_config(&text);
    assert_eq!(config.provider.api_key.as_deref(), Some("sk-or-SECRET"));
    assert_eq!(config.provider.api_base, "https://openrouter.ai/api/v1");
    // OpenRouter routes vendor/model names itself: the prefix stays.
    assert_eq!(config.provider.model, "anthropic/claude-opus-4-5");
    assert_eq!(config.provider.max_tokens, 8192);
    assert_eq!(config.provider.temperature, 0.1);
    assert_eq!(config.agent.max_tool_iterations, 20);
    assert_eq!(config.agent.memory_window, 50);
    assert!(!config.tools.restrict_to_workspace);
    assert_eq!(config.tools.exec.timeout_secs, 120);
    assert_eq!(
        config.workspace.as_deref(),
        Some(home.path().join(".nanogate/workspace").as_path())
    );
    let tg = table["channels"]["telegram"].as_table().unwrap();
    assert_eq!(tg["enabled"].as_bool(), Some(true));
    assert_eq!(tg["token"].as_str(), Some("123:SECRET-TG"));
    assert_eq!(
        tg["allow_from"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<Vec<_>>(),
        ["42", "alice"]
    );
    let dc = table["channels"]["discord"].as_table().unwrap();
    assert_eq!(dc["enabled"].as_bool(), Some(false));
    assert_eq!(
        table["heartbeat"]["interval_minutes"].as_integer(),
        Some(30)
    );
    assert_eq!(
        table["cron"]["store"].as_str().map(PathBuf::from),
        Some(home.path().join(".nanogate/cron/jobs.json"))
    );

    // Run again: the config is the one this import wrote, so there is nothing to do.
    let again = nanogate(
        home.path(),
        &["import-nanobot", "--from", from_s, "--apply"],
    );
    assert!(
        stdout(&again).contains("nothing to do"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join(".nanogate/config.toml")).unwrap(),
        text
    );
    // A config of the user's own is left alone, and the report says what would have been set.
    std::fs::write(home.path().join(".nanogate/config.toml"), "# mine\n").unwrap();
    let again = nanogate(
        home.path(),
        &["import-nanobot", "--from", from_s, "--apply"],
    );
    let out = stdout(&again);
    assert!(out.contains("exists (never overwritten)"), "{out}");
    assert!(out.contains("provider.api_key: set") && !out.contains("SECRET"));
    assert_eq!(
        std::fs::read_to_string(home.path().join(".nanogate/config.toml")).unwrap(),
        "# mine\n"
    );
}

#[test]
fn snake_case_config_with_a_forced_provider() {
    let home = tempfile::tempdir().unwrap();
    let from = tempfile::tempdir().unwrap();
    std::fs::write(from.path().join("config.json"), SNAKE).unwrap();
    let report = import::run(&options(home.path(), from.path(), true)).unwrap();
    assert_eq!(report.imported(), 1, "{}", report.render());
    let text = std::fs::read_to_string(home.path().join(".nanogate/config.toml")).unwrap();
    let (table, config) = parse_config(&text);
    assert_eq!(config.provider.api_base, "https://api.openai.com/v1");
    assert_eq!(
        config.provider.model, "gpt-4o",
        "litellm's openai/ prefix removed"
    );
    assert_eq!(config.provider.api_key.as_deref(), Some("sk-SNAKE-SECRET"));
    assert_eq!(
        config.provider.extra_headers.get("X-A").map(String::as_str),
        Some("b")
    );
    assert_eq!(
        (config.provider.max_tokens, config.agent.memory_window),
        (1000, 30)
    );
    assert_eq!(config.agent.max_tool_iterations, 7);
    assert_eq!(config.tools.exec.timeout_secs, 5);
    assert_eq!(
        table["channels"]["discord"]["token"].as_str(),
        Some("tok \"quoted\" \\ back"),
        "escaped correctly"
    );
    assert!(!report.render().contains("SNAKE-SECRET"));
}

#[test]
fn sessions_of_another_workspace_are_left_out() {
    let home = tempfile::tempdir().unwrap();
    let from = tempfile::tempdir().unwrap();
    let src = fixture("nanobot-0.3.5/sessions");
    copy_dir(
        &src,
        &from
            .path()
            .join("sessions/0123456789abcdef0123456789abcdef"),
    );
    copy_dir(
        &src,
        &from
            .path()
            .join("sessions/ffffffffffffffffffffffffffffffff"),
    );
    std::fs::create_dir_all(from.path().join("workspace/.nanobot")).unwrap();
    std::fs::write(
        from.path().join("workspace/.nanobot/workspace-id"),
        "0123456789abcdef0123456789abcdef\n",
    )
    .unwrap();
    let report = import::run(&options(home.path(), from.path(), true)).unwrap();
    let n = std::fs::read_dir(&src).unwrap().count();
    assert_eq!(report.imported(), n, "{}", report.render());
    assert_eq!(report.skipped(), 1);
    assert!(
        report
            .render()
            .contains("sessions of another nanobot workspace")
    );
}

/// nanobot 0.1.4 (the classic generation) reads every imported session, gets the same history as nanogate,
/// and saving it changes no byte. Skipped (with a note) when the interop venv cannot be built offline.
#[test]
fn nanobot_0_1_4_reads_the_imported_sessions() {
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let out = Command::new("python3")
        .arg(interop.join("make_venv.py"))
        .arg(&venv)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    if last.is_empty() || last.starts_with("SKIPPED") {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\n*** nanobot interop {last} ***\n");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let from = fixture("nanobot-0.3.5");
    import::run(&options(home.path(), &from, true)).unwrap();
    let ws = home.path().join(".nanogate/workspace");
    let expected =
        Json::parse(&std::fs::read_to_string(from.join("history.json")).unwrap()).unwrap();
    let keys: Vec<Json> = expected
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, _)| Json::str(k))
        .collect();
    let keys_file = home.path().join("keys.json");
    std::fs::write(&keys_file, Json::Array(keys.clone()).to_python()).unwrap();
    let out = Command::new(&last)
        .arg(interop.join("nanobot_side.py"))
        .arg("read")
        .arg(&ws)
        .arg(&keys_file)
        .output()
        .expect("run nanobot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view = Json::parse(&String::from_utf8(out.stdout).unwrap()).unwrap();
    for k in keys.iter().map(|k| k.as_str().unwrap()) {
        let theirs = view
            .as_object()
            .unwrap()
            .get(k)
            .and_then(Json::as_object)
            .expect(k);
        let ours = find_session_in(&ws, k);
        assert_eq!(theirs.get("count"), Some(&Json::from(ours.len())), "{k:?}");
        assert_eq!(
            theirs.get("last_consolidated"),
            Some(&Json::from(ours.last_consolidated())),
            "{k:?}"
        );
        assert_eq!(
            theirs.get("history"),
            Some(&Json::Array(ours.history(500))),
            "{k:?}"
        );
        assert_eq!(
            theirs.get("resave_identical"),
            Some(&Json::Bool(true)),
            "{k:?}"
        );
    }
}

fn find_session_in(ws: &Path, k: &str) -> session::Session {
    session::find_session(&ws.join("sessions"), k)
        .unwrap()
        .unwrap()
        .session
}
