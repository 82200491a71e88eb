//! The `nanogate` binary as a user runs it: `sessions list | show | check | repair`, config errors, the lock.

mod common;

use std::process::Command;

use common::{copy_fixture_dir, fixture, nanogate, stderr, stdout};
use nanogate::json::Json;
use nanogate::session::{SessionStore, StoreOptions};

#[test]
fn list_shows_every_session_newest_first() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = fixture("nanobot-0.1.4/workspace");
    let o = nanogate(
        home.path(),
        &[
            "sessions",
            "list",
            "--workspace",
            ws.to_str().expect("path"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("KEY")
            && lines[0].contains("UNCONSOLIDATED")
            && lines[0].contains("SIZE")
    );
    assert_eq!(lines.len(), 13);
    let tg = lines
        .iter()
        .find(|l| l.starts_with("telegram:12345678 "))
        .expect("telegram row");
    let cols: Vec<&str> = tg.split_whitespace().collect();
    assert_eq!(&cols[1..3], ["12", "5"]);
}

#[test]
fn list_of_an_empty_workspace_says_so() {
    let home = tempfile::tempdir().expect("tmp");
    let o = nanogate(home.path(), &["sessions", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(".nanogate/workspace/sessions"),
        "default workspace under HOME: {}",
        stdout(&o)
    );
}

#[test]
fn show_json_prints_nanobots_get_history() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = fixture("nanobot-0.1.4/workspace");
    let expected = Json::parse(
        &std::fs::read_to_string(fixture("nanobot-0.1.4/history.json")).expect("fixture"),
    )
    .expect("json");
    for (k, max, variant) in [
        ("telegram:12345678", None, "get_history()"),
        (
            "discord:987654321",
            Some("6"),
            "get_history(max_messages=6)",
        ),
        ("ключ:中文:🙂", None, "get_history()"),
    ] {
        let mut args = vec![
            "--workspace",
            ws.to_str().expect("path"),
            "sessions",
            "show",
            k,
            "--json",
        ];
        if let Some(m) = max {
            args.extend(["--max", m]);
        }
        let o = nanogate(home.path(), &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let ours = Json::parse(stdout(&o).trim_end()).expect("JSON array");
        let want = expected
            .as_object()
            .and_then(|e| e.get(k))
            .and_then(|e| e.as_object())
            .and_then(|e| e.get(variant));
        assert_eq!(Some(&ours), want, "{k}");
        // Printed as Python's json.dumps(indent=2) would.
        assert_eq!(stdout(&o).trim_end(), ours.to_python_indent(2));
    }
}

#[test]
fn show_prints_a_readable_transcript() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    // Move the watermark back so the tool call is in view.
    let path = ws.path().join("sessions/telegram_12345678.jsonl");
    let text = std::fs::read_to_string(&path)
        .expect("read")
        .replace("\"last_consolidated\": 7", "\"last_consolidated\": 0");
    std::fs::write(&path, text).expect("write");
    let o = nanogate(
        home.path(),
        &[
            "--workspace",
            ws.path().to_str().expect("p"),
            "sessions",
            "show",
            "telegram:12345678",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("telegram:12345678 — 12 messages, 0 consolidated"),
        "{out}"
    );
    assert!(out.contains("[user] What's in my workspace?"), "{out}");
    assert!(out.contains("→ list_dir({\"path\": \".\"})"), "{out}");
    assert!(out.contains("[tool list_dir]"), "{out}");
}

#[test]
fn show_of_an_unknown_key_fails_with_a_hint() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = fixture("nanobot-0.1.4/workspace");
    let o = nanogate(
        home.path(),
        &[
            "--workspace",
            ws.to_str().expect("p"),
            "sessions",
            "show",
            "telegram:nobody",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no session \"telegram:nobody\"")
            && stderr(&o).contains("sessions list"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn check_reports_problems_with_file_and_line_and_repair_fixes_them() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let w = ws.path().to_str().expect("p");
    let path = ws.path().join("sessions/discord_987654321.jsonl");
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.insert_str(text.find('\n').expect("line 1") + 1, "{oops\n");
    std::fs::write(&path, &text).expect("write");

    let o = nanogate(home.path(), &["--workspace", w, "sessions", "check"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!("{}:2: is not valid JSON", path.display())),
        "{out}"
    );
    assert!(
        out.contains("12 session file(s) checked") && out.contains("1 with problems"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        text,
        "check never writes"
    );

    let o = nanogate(home.path(), &["--workspace", w, "sessions", "repair"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("1 file(s) repaired"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("moved it to the sidecar"),
        "a warning names the line: {}",
        stderr(&o)
    );

    let o = nanogate(home.path(), &["--workspace", w, "sessions", "check"]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("discord_987654321.jsonl.damaged: sidecar holding 1 line(s)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("sessions/discord_987654321.jsonl.damaged"))
            .expect("sidecar"),
        "{oops\n"
    );
}

#[test]
fn repair_is_refused_while_another_process_holds_the_workspace() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = tempfile::tempdir().expect("tmp");
    let _held = SessionStore::open(ws.path(), StoreOptions::default()).expect("open");
    let o = nanogate(
        home.path(),
        &[
            "--workspace",
            ws.path().to_str().expect("p"),
            "sessions",
            "repair",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("already in use by another nanogate process") && err.contains("pid"),
        "{err}"
    );
}

#[test]
fn config_file_and_environment_choose_the_workspace() {
    let home = tempfile::tempdir().expect("tmp");
    let ws = fixture("nanobot-0.1.4/workspace");
    let cfg = home.path().join("my.toml");
    std::fs::write(&cfg, format!("workspace = {:?}\n", ws.to_str().expect("p"))).expect("write");
    let o = nanogate(
        home.path(),
        &["--config", cfg.to_str().expect("p"), "sessions", "list"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("telegram:12345678"));

    let o = Command::new(env!("CARGO_BIN_EXE_nanogate"))
        .args(["sessions", "list"])
        .env("HOME", home.path())
        .env("NANOGATE_WORKSPACE", &ws)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("cli:direct"));
}

#[test]
fn a_bad_config_names_the_key_and_the_file() {
    let home = tempfile::tempdir().expect("tmp");
    let cfg = home.path().join("config.toml");
    std::fs::write(&cfg, "[session]\ndurabilty = \"os\"\n").expect("write");
    let o = nanogate(
        home.path(),
        &["--config", cfg.to_str().expect("p"), "sessions", "list"],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("durabilty") && err.contains(cfg.to_str().expect("p")),
        "{err}"
    );

    let o = nanogate(
        home.path(),
        &["--config", "/nonexistent/nanogate.toml", "sessions", "list"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot read config file /nonexistent/nanogate.toml"),
        "{}",
        stderr(&o)
    );
}
