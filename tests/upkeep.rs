//! Session upkeep (`session.max_age_days`): old sessions go to memory, then to `sessions/archive/`; nothing is
//! deleted, and a session whose memory step fails is left alone. Against a fake model on 127.0.0.1.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::fake_openai::{FakeOpenAi, FakeResponse, error_body, tool_calls_completion};
use nanogate::agent::Agent;
use nanogate::agent::upkeep::{self, FIRST_SWEEP_DELAY, SWEEP_PERIOD};
use nanogate::config::Config;
use nanogate::json::{Json, Object};
use nanogate::session::{Durability, load_file};

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn agent(ws: &Path, api_base: String, max_age_days: u64) -> Arc<Agent> {
    let mut c = Config::default();
    c.provider.api_base = api_base;
    c.provider.api_key = Some("sk-test".into());
    c.provider.max_retries = 0;
    c.session.durability = Durability::Os;
    c.session.max_age_days = max_age_days;
    c.memory.summary = false;
    common::agent(ws, c)
}

/// Writes a classic session file with `n` messages and watermark `consolidated`, last modified `age` ago.
fn session_file(ws: &Path, key: &str, n: usize, consolidated: usize, age: Duration) -> PathBuf {
    let dir = ws.join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(nanogate::session::key::file_name(key).unwrap());
    let mut text = format!(
        "{{\"_type\": \"metadata\", \"key\": \"{key}\", \"created_at\": \"2026-01-01T10:00:00\", \"updated_at\": \"2026-01-01T10:00:00\", \"metadata\": {{}}, \"last_consolidated\": {consolidated}}}\n"
    );
    for i in 0..n {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        text.push_str(&format!(
            "{{\"role\": \"{role}\", \"content\": \"message {i} of {key}\", \"timestamp\": \"2026-01-01T10:00:0{}\"}}\n",
            i % 10
        ));
    }
    std::fs::write(&path, text).unwrap();
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
    path
}

fn save_memory_reply() -> FakeResponse {
    let mut args = Object::new();
    args.insert(
        "history_entry",
        Json::str("[2026-01-01 10:00] An old chat about messages."),
    );
    args.insert("memory_update", Json::str("- the user writes messages\n"));
    FakeResponse::ok(tool_calls_completion(&[(
        "c1",
        "save_memory",
        &Json::Object(args).to_python(),
    )]))
}

fn archived(ws: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(ws.join("sessions/archive"))
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[tokio::test]
async fn old_sessions_go_to_memory_then_to_the_archive() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(|_| Some(save_memory_reply()));
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let old = session_file(ws, "telegram:1", 4, 0, 40 * DAY);
    let done = session_file(ws, "telegram:2", 2, 2, 31 * DAY);
    let fresh = session_file(ws, "telegram:3", 2, 0, 29 * DAY);
    let fresh_bytes = std::fs::read(&fresh).unwrap();
    let agent = agent(ws, fake.base_url(), 30);

    let report = upkeep::sweep(&agent, SystemTime::now()).await.unwrap();
    let mut keys: Vec<&str> = report.archived.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["telegram:1", "telegram:2"], "{report:?}");
    assert!(report.skipped.is_empty(), "{report:?}");
    // No live file remains; the archive holds the whole transcript, its watermark at the end.
    assert!(!old.exists() && !done.exists());
    assert_eq!(
        std::fs::read(&fresh).unwrap(),
        fresh_bytes,
        "a fresh session is untouched"
    );
    assert_eq!(archived(ws).len(), 2);
    let archived_old = report
        .archived
        .iter()
        .find(|(k, _)| k == "telegram:1")
        .unwrap()
        .1
        .clone();
    let s = load_file(&archived_old, Some("telegram:1"))
        .unwrap()
        .unwrap()
        .session;
    assert_eq!((s.len(), s.last_consolidated()), (4, 4));
    // One model call: only the session with unconsolidated messages needed memory.
    assert_eq!(fake.request_count(), 1);
    let history = std::fs::read_to_string(ws.join("memory/HISTORY.md")).unwrap();
    assert_eq!(
        history,
        "[2026-01-01 10:00] An old chat about messages.\n\n"
    );
    assert!(
        std::fs::read_to_string(ws.join("memory/MEMORY.md"))
            .unwrap()
            .contains("the user writes messages")
    );
    let listed: Vec<String> = agent
        .store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(listed, ["telegram:3"]);
    // The key starts afresh when a message comes.
    let h = agent.store.get("telegram:1").await.unwrap();
    assert!(h.lock().is_empty());
}

#[tokio::test]
async fn a_failed_memory_step_leaves_the_session_alone() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(|_| {
        Some(FakeResponse::status(
            500,
            error_body("down", "server_error", "x"),
        ))
    });
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let old = session_file(ws, "telegram:1", 4, 1, 40 * DAY);
    let before = std::fs::read(&old).unwrap();
    let agent = agent(ws, fake.base_url(), 30);
    let report = upkeep::sweep(&agent, SystemTime::now()).await.unwrap();
    assert!(report.archived.is_empty());
    assert_eq!(report.skipped.len(), 1);
    assert!(
        report.skipped[0].1.contains("memory archival failed"),
        "{report:?}"
    );
    assert_eq!(std::fs::read(&old).unwrap(), before);
    assert!(archived(ws).is_empty());
    // The next sweep, with the model back, ends it.
    fake.set_responder(|_| Some(save_memory_reply()));
    let report = upkeep::sweep(&agent, SystemTime::now()).await.unwrap();
    assert_eq!(report.archived.len(), 1);
    assert!(!old.exists());
}

#[tokio::test]
async fn zero_keeps_sessions_forever_and_a_session_in_use_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let old = session_file(ws, "telegram:1", 2, 2, 4000 * DAY);
    // Nothing needs the model here; an address nobody listens on proves it is never called.
    let forever = agent(ws, "http://127.0.0.1:9/v1".into(), 0);
    let report = upkeep::sweep(&forever, SystemTime::now()).await.unwrap();
    assert_eq!(report, Default::default());
    assert!(old.exists());
    drop(forever);

    let agent = agent(ws, "http://127.0.0.1:9/v1".into(), 1);
    let held = agent.store.get("telegram:1").await.unwrap();
    let report = upkeep::sweep(&agent, SystemTime::now()).await.unwrap();
    assert_eq!(
        report.skipped,
        [("telegram:1".to_string(), "in use; next sweep".to_string())]
    );
    assert!(old.exists());
    drop(held);
    let report = upkeep::sweep(&agent, SystemTime::now()).await.unwrap();
    assert_eq!(report.archived.len(), 1);
    assert!(!old.exists());
}

#[tokio::test(start_paused = true)]
async fn the_daily_task_sweeps_a_minute_after_start_and_then_daily() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let first = session_file(ws, "telegram:1", 2, 2, 10 * DAY);
    let agent = agent(ws, "http://127.0.0.1:9/v1".into(), 7);
    let start = tokio::time::Instant::now();
    let task = upkeep::spawn_daily_sweep(agent.clone());
    tokio::time::sleep(FIRST_SWEEP_DELAY - Duration::from_secs(1)).await;
    assert!(first.exists(), "not before the first delay");
    wait_until(|| !first.exists()).await;
    // A session that grows old later goes at the next daily sweep.
    let second = session_file(ws, "telegram:2", 2, 2, 10 * DAY);
    tokio::time::sleep_until(start + FIRST_SWEEP_DELAY + SWEEP_PERIOD - Duration::from_secs(1))
        .await;
    assert!(second.exists(), "not before a day has passed");
    wait_until(|| !second.exists()).await;
    assert_eq!(archived(ws).len(), 2);
    task.abort();
}

/// Advances the paused clock a second at a time (bounded) until `done` holds; file work runs on real threads.
async fn wait_until(done: impl Fn() -> bool) {
    for _ in 0..30 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Let the blocking file work of a running sweep finish on real time.
        for _ in 0..50 {
            if done() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
            tokio::task::yield_now().await;
        }
    }
    panic!("condition not reached");
}

#[tokio::test]
async fn retire_refuses_a_session_that_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    let path = session_file(ws, "telegram:1", 2, 1, 40 * DAY);
    let agent = agent(ws, "http://127.0.0.1:9/v1".into(), 30);
    use nanogate::session::Retired;
    // Another updated_at than the caller saw: a message arrived in between.
    let r = agent
        .store
        .retire("telegram:1", "2026-01-02T00:00:00", false)
        .await
        .unwrap();
    assert_eq!(r, Retired::Changed);
    // Unconsolidated messages left while the caller requires none.
    let r = agent
        .store
        .retire("telegram:1", "2026-01-01T10:00:00", true)
        .await
        .unwrap();
    assert_eq!(r, Retired::Changed);
    assert!(path.exists());
    let r = agent
        .store
        .retire("telegram:1", "2026-01-01T10:00:00", false)
        .await
        .unwrap();
    assert!(matches!(r, Retired::Archived(_)));
    assert!(!path.exists());
}
