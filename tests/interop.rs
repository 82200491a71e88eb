//! Interop with real nanobot (nanobot-ai 0.1.4.post3): its `SessionManager` reads what nanogate writes and
//! gets the same history; nanogate continues sessions nanobot wrote and produces exactly nanobot's bytes.
//!
//! The venv is made by `tests/interop/make_venv.py` under cargo's target dir and reused. Without access to the
//! package index the test prints `SKIPPED: …` on stderr (uncaptured, so it shows) and passes.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use nanogate::json::{Json, Object};
use nanogate::session::{SessionStore, StoreOptions, key};

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn nanobot_python() -> Option<String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let out = Command::new("python3")
        .arg(interop_dir().join("make_venv.py"))
        .arg(&venv)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "make_venv.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_owned();
    if last.starts_with("SKIPPED") || last.is_empty() {
        // Written straight to the stderr handle: libtest does not capture that, so it is seen.
        let _ = writeln!(std::io::stderr(), "\n*** nanobot interop {last} ***\n");
        return None;
    }
    Some(last)
}

fn nanobot_side(python: &str, args: &[&Path]) -> String {
    let out = Command::new(python)
        .arg(interop_dir().join("nanobot_side.py"))
        .args(args)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "nanobot_side.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A small deterministic generator, so a failure can be reproduced.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }
}

const TEXTS: &[&str] = &[
    "hello",
    "quotes \" and \\ backslashes \\n not a newline",
    "control \u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f} chars",
    "lines\nand\r\ncarriage\ttabs",
    "RTL مرحبا שלום, CJK 你好, emoji 🙂👋🏽, astral 𝄞",
    "separators \u{2028} and \u{2029}, BOM \u{feff}, nbsp \u{a0}",
    "",
    "  leading and trailing spaces  ",
];

fn content(g: &mut Gen) -> Json {
    match g.next() % 6 {
        0 => Json::Null,
        1 => Json::parse(r#"[{"type": "text", "text": "part one"}, {"type": "image_url", "image_url": {"url": "file:///tmp/a.png"}}]"#)
            .expect("json"),
        _ => Json::str(*g.pick(TEXTS)),
    }
}

fn timestamp(g: &mut Gen, i: usize) -> Json {
    // isoformat omits the fraction when the microsecond is 0: cover both forms.
    let micro = if g.next().is_multiple_of(4) {
        String::new()
    } else {
        format!(".{:06}", g.next() % 1_000_000)
    };
    Json::str(format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}{micro}",
        1 + i % 28,
        i % 24,
        (i * 7) % 60,
        (i * 13) % 60
    ))
}

/// One message: role, content, extra fields in order.
type Message = (String, Json, Object);

/// One turn: its messages and the `updated_at` nanobot is given after it.
type Turn = (Vec<Message>, String);

fn message(g: &mut Gen, i: usize) -> Message {
    let mut extra = Object::new();
    let role = *g.pick(&["user", "assistant", "assistant", "tool"]);
    match role {
        "assistant" if g.next().is_multiple_of(2) => {
            let calls = Json::parse(&format!(
                r#"[{{"id": "call_{i}", "type": "function", "function": {{"name": "exec", "arguments": "{{\"cmd\": \"ls -la\", \"n\": {i}}}"}}}}]"#
            ))
            .expect("json");
            extra.insert("tool_calls", calls);
            if g.next().is_multiple_of(2) {
                extra.insert("reasoning_content", Json::str("thinking… \"hard\""));
                extra.insert(
                    "thinking_blocks",
                    Json::parse(r#"[{"type": "thinking", "thinking": "t", "signature": "s"}]"#)
                        .expect("json"),
                );
            }
        }
        "tool" => {
            extra.insert("tool_call_id", Json::str(format!("call_{i}")));
            extra.insert("name", Json::str("exec"));
        }
        _ => {}
    }
    if g.next().is_multiple_of(3) {
        let v = Json::parse(r#"{"float": 1.5, "small": 1e-05, "big": 1e+16, "int": 123456789012345678901234567890, "neg": -0.0, "nested": {"z": [true, null]}}"#)
            .expect("json");
        extra.insert("x_unknown_field", v);
    }
    extra.insert("timestamp", timestamp(g, i));
    (role.to_owned(), content(g), extra)
}

const KEYS: &[&str] = &[
    "telegram:12345678",
    "discord:987654321",
    "cli:direct",
    "cron:f33398eb",
    "a/b/c",
    "key with spaces. and.dots",
    "ключ:中文:🙂",
    "  padded  ",
    "telegram:-1001234567890",
    "api:long",
];

struct SessionSpec {
    key: String,
    created_at: String,
    metadata: Object,
    last_consolidated: usize,
    turns: Vec<Turn>,
}

fn specs(seed: u64) -> Vec<SessionSpec> {
    let mut g = Gen(seed);
    let mut n = 0;
    KEYS.iter()
        .enumerate()
        .map(|(k, key)| {
            let turns = (0..3 + k % 4)
                .map(|t| {
                    let count = if *key == "api:long" {
                        6
                    } else {
                        1 + (g.next() % 4) as usize
                    };
                    let msgs = (0..count)
                        .map(|_| {
                            n += 1;
                            message(&mut g, n)
                        })
                        .collect();
                    (
                        msgs,
                        format!(
                            "2026-11-22T10:{:02}:{:02}.{:06}",
                            k,
                            t,
                            g.next() % 1_000_000
                        ),
                    )
                })
                .collect();
            let mut metadata = Object::new();
            if k % 2 == 0 {
                metadata.insert("summary", Json::str("Goal: keep files compatible 🙂"));
                metadata.insert("n", Json::parse("1e+16").expect("json"));
            }
            SessionSpec {
                key: (*key).to_owned(),
                created_at: format!(
                    "2026-11-2{}T08:00:00{}",
                    k % 9,
                    if k % 3 == 0 { "" } else { ".000001" }
                ),
                metadata,
                // "api:long" crosses from 9 to 10+ messages: line 1 changes length, so a rewrite happens.
                last_consolidated: if *key == "api:long" { 12 } else { k % 3 },
                turns,
            }
        })
        .collect()
}

fn spec_json(specs: &[SessionSpec]) -> String {
    let sessions: Vec<Json> = specs
        .iter()
        .map(|s| {
            let mut o = Object::new();
            o.insert("key", Json::str(s.key.as_str()));
            o.insert("created_at", Json::str(s.created_at.as_str()));
            o.insert("metadata", Json::Object(s.metadata.clone()));
            o.insert("last_consolidated", Json::from(s.last_consolidated));
            let turns = s
                .turns
                .iter()
                .map(|(msgs, updated)| {
                    let mut t = Object::new();
                    let msgs = msgs
                        .iter()
                        .map(|(role, content, extra)| {
                            let mut m = Object::new();
                            m.insert("role", Json::str(role.as_str()));
                            m.insert("content", content.clone());
                            m.insert("extra", Json::Object(extra.clone()));
                            Json::Object(m)
                        })
                        .collect();
                    t.insert("messages", Json::Array(msgs));
                    t.insert("updated_at", Json::str(updated.as_str()));
                    Json::Object(t)
                })
                .collect();
            o.insert("turns", Json::Array(turns));
            Json::Object(o)
        })
        .collect();
    let mut root = Object::new();
    root.insert("sessions", Json::Array(sessions));
    Json::Object(root).to_python()
}

fn nanobot_view(python: &str, ws: &Path, keys: &[&str]) -> Json {
    let keys_file = ws.join("keys.json");
    std::fs::write(
        &keys_file,
        Json::Array(keys.iter().map(|k| Json::str(*k)).collect()).to_python(),
    )
    .expect("write");
    Json::parse(&nanobot_side(python, &[Path::new("read"), ws, &keys_file]))
        .expect("nanobot's report is JSON")
}

#[test]
fn nanogate_and_nanobot_read_and_write_each_others_sessions() {
    let Some(python) = nanobot_python() else {
        return;
    };
    let specs = specs(0x5eed);
    let rt = tokio::runtime::Runtime::new().expect("runtime");

    // nanobot writes every session; nanogate continues each from nanobot's file after turn 1.
    let nb = tempfile::tempdir().expect("tmp");
    let spec_file = nb.path().join("spec.json");
    std::fs::write(&spec_file, spec_json(&specs)).expect("write spec");
    nanobot_side(&python, &[Path::new("write"), nb.path(), &spec_file]);
    let ours = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(ours.path().join("sessions")).expect("mkdir");
    for s in &specs {
        let name = key::file_name(&s.key).expect("name");
        std::fs::copy(
            nb.path().join("sessions").join(format!("{name}.turn1")),
            ours.path().join("sessions").join(&name),
        )
        .expect("copy turn 1");
    }
    {
        let store = SessionStore::open(ours.path(), StoreOptions::default()).expect("open");
        for s in &specs {
            let h = rt.block_on(store.get(&s.key)).expect("get");
            for (msgs, updated) in &s.turns[1..] {
                {
                    let mut session = h.lock();
                    for (role, content, extra) in msgs {
                        session.add_message(role, content.clone(), extra.clone());
                    }
                    session.set_updated_at(updated.as_str());
                    session.set_last_consolidated(s.last_consolidated);
                }
                rt.block_on(h.commit()).expect("commit");
            }
        }
    }
    for s in &specs {
        let name = key::file_name(&s.key).expect("name");
        let theirs = std::fs::read(nb.path().join("sessions").join(&name)).expect("nanobot's file");
        let mine =
            std::fs::read(ours.path().join("sessions").join(&name)).expect("nanogate's file");
        assert!(
            theirs == mine,
            "{}: nanogate's bytes differ from nanobot's\n--- nanobot\n{}\n--- nanogate\n{}",
            s.key,
            String::from_utf8_lossy(&theirs),
            String::from_utf8_lossy(&mine)
        );
    }

    // nanogate writes sessions of its own (appends, line 1 patches, rewrites, a clear, a repair); nanobot loads
    // them, sees the same history, and would save exactly the same bytes.
    let ws = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(ws.path().join("sessions")).expect("mkdir");
    std::fs::write(
        ws.path().join("sessions/repair_me.jsonl"),
        "{\"role\": \"user\", \"content\": \"kept\", \"timestamp\": \"2026-11-22T10:00:00\"}\n{broken\n",
    )
    .expect("write damaged");
    let mut keys: Vec<&str> = specs.iter().map(|s| s.key.as_str()).collect();
    keys.push("repair:me");
    let store = SessionStore::open(ws.path(), StoreOptions::default()).expect("open");
    for s in &specs {
        let h = rt.block_on(store.get(&s.key)).expect("get");
        for (i, (msgs, _)) in s.turns.iter().enumerate() {
            {
                let mut session = h.lock();
                for (role, content, extra) in msgs {
                    session.add_message(role, content.clone(), extra.clone());
                }
                session.set_last_consolidated(s.last_consolidated);
                if i == 1 {
                    *session.metadata_mut() = s.metadata.clone();
                }
            }
            rt.block_on(h.commit()).expect("commit");
            if s.key == "cli:direct" && i == 1 {
                rt.block_on(store.clear(&s.key)).expect("clear");
            }
        }
    }
    let h = rt.block_on(store.get("repair:me")).expect("get");
    h.lock()
        .add_message("assistant", Json::str("repaired"), Object::new());
    rt.block_on(h.commit()).expect("commit");

    let view = nanobot_view(&python, ws.path(), &keys);
    for k in &keys {
        let theirs = view
            .as_object()
            .and_then(|v| v.get(k))
            .and_then(Json::as_object)
            .expect("nanobot saw the key");
        let h = rt.block_on(store.get(k)).expect("get");
        let s = h.lock();
        assert_eq!(
            theirs.get("count").and_then(Json::as_u64),
            Some(s.len() as u64),
            "{k}"
        );
        assert_eq!(
            theirs.get("last_consolidated").and_then(Json::as_u64),
            Some(s.last_consolidated() as u64),
            "{k}"
        );
        assert_eq!(
            theirs.get("history"),
            Some(&Json::Array(s.history(500))),
            "{k}"
        );
        assert_eq!(
            theirs.get("history6"),
            Some(&Json::Array(s.history(6))),
            "{k}"
        );
        assert_eq!(
            theirs.get("resave_identical"),
            Some(&Json::Bool(true)),
            "{k}: nanobot would write other bytes"
        );
    }
    let after_clear: usize = specs[2].turns[2..].iter().map(|(msgs, _)| msgs.len()).sum();
    assert_eq!(
        rt.block_on(store.get("cli:direct"))
            .expect("get")
            .lock()
            .len(),
        after_clear
    );
}

/// After nanogate consolidates (watermark moved, summary in the metadata), nanobot loads the session, starts its
/// history at the watermark, and would save the same bytes.
#[test]
fn nanobot_reads_a_session_nanogate_consolidated() {
    use common::fake_openai::{FakeOpenAi, FakeResponse, text_completion, tool_calls_completion};
    use nanogate::agent::Router;
    use nanogate::bus::Inbound;

    let Some(python) = nanobot_python() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let ws = tempfile::tempdir().expect("tmp");
    let watermark = rt.block_on(async {
        let fake = FakeOpenAi::start().await;
        fake.set_responder(|body| {
            let text = body.to_python();
            if text.contains("\"save_memory\"") {
                let args = r#"{"history_entry": "[2026-11-22 10:00] Chatted.", "memory_update": "- chats"}"#;
                return Some(FakeResponse::ok(tool_calls_completion(&[("c", "save_memory", args)])));
            }
            if text.contains("You write context summaries") {
                return Some(FakeResponse::ok(text_completion("## Goal\nChat.")));
            }
            None
        });
        let mut c = nanogate::config::Config::default();
        c.provider.api_base = fake.base_url();
        c.provider.api_key = Some("sk-test".into());
        c.agent.memory_window = 6;
        let agent = common::agent(ws.path(), c);
        let router = Router::new(agent.clone());
        for i in 0..4 {
            router
                .ask(Inbound::text("telegram", "5", &format!("hello {i}")))
                .await
                .expect("reply");
        }
        assert!(agent.memory.wait_idle(std::time::Duration::from_secs(20)).await);
        let h = agent.store.get("telegram:5").await.expect("session");
        let s = h.lock();
        assert!(s.metadata().contains_key("nanogate_summary"));
        (s.last_consolidated(), Json::Array(s.history(500)))
    });
    let (watermark, ours) = watermark;
    assert!(watermark > 0);
    let view = nanobot_view(&python, ws.path(), &["telegram:5"]);
    let theirs = view
        .as_object()
        .and_then(|o| o.get("telegram:5"))
        .and_then(Json::as_object)
        .expect("nanobot's view");
    assert_eq!(
        theirs.get("last_consolidated"),
        Some(&Json::from(watermark))
    );
    assert_eq!(theirs.get("history"), Some(&ours));
    let first = ours.as_array().and_then(|h| h.first()).expect("history");
    assert_eq!(
        first.as_object().and_then(|o| o.get("content")),
        Some(&Json::str("hello 2")),
        "history starts at the watermark"
    );
    assert_eq!(theirs.get("resave_identical"), Some(&Json::Bool(true)));
}

/// nanobot's `CronService` loads a `jobs.json` nanogate wrote (every schedule kind, unicode, run records) and
/// saves it back to the same bytes, so the two can share one jobs file.
#[test]
fn nanobot_reads_and_rewrites_nanogates_jobs_file_byte_for_byte() {
    use nanogate::cron::{self, JobStore, Payload, Schedule};
    let Some(python) = nanobot_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tmp");
    let ours = dir.path().join("jobs.json");
    let store = JobStore::new(&ours);
    let now = 1_795_341_026_242;
    let tg = || {
        Payload::agent_turn(
            "Trink Wasser 💧",
            true,
            Some("telegram".into()),
            Some("42".into()),
        )
    };
    cron::add_job(&store, "every", Schedule::every(90_500), tg(), false, now).expect("every");
    cron::add_job(
        &store,
        "werktags",
        Schedule::cron("0 9 * * 1-5", Some("Europe/Berlin")),
        Payload::agent_turn("Morning \"briefing\"\n", false, None, None),
        false,
        now,
    )
    .expect("cron");
    let at =
        cron::add_job(&store, "once", Schedule::at(now + 60_000), tg(), true, now).expect("at");
    store
        .update(|f| {
            let j = f.get_mut(&at.id).expect("job");
            j.state.last_run_at_ms = Some(now + 60_001);
            j.state.last_status = Some("error".into());
            j.state.last_error = Some("model unreachable".into());
            Ok(())
        })
        .expect("record");

    let theirs = dir.path().join("resaved.json");
    let script = "import sys\nfrom pathlib import Path\nfrom nanobot.cron.service import CronService\n\
                  svc = CronService(Path(sys.argv[1]))\n\
                  jobs = svc._load_store().jobs\n\
                  svc.store_path = Path(sys.argv[2])\n\
                  svc._save_store()\n\
                  print(len(jobs))\n";
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&ours)
        .arg(&theirs)
        .output()
        .expect("run nanobot");
    assert!(
        out.status.success(),
        "nanobot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
    assert_eq!(
        std::fs::read(&theirs).expect("nanobot's file"),
        std::fs::read(&ours).expect("ours"),
        "nanobot would write other bytes"
    );
}
