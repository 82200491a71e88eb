//! The Telegram channel end to end: teloxide talks to a fake Bot API on 127.0.0.1, the agent to a fake model.
//! In-process gateways for the message rules; the real binary for restart and SIGTERM.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::fake_openai::{FakeOpenAi, text_completion};
use common::fake_telegram::{BOT_USERNAME, FakeTelegram};
use common::{start_gateway, user_texts};
use nanogate::config::{Config, GroupPolicy};
use serde_json::json;

const TOKEN: &str = "123456:SECRET-TEST-TOKEN";

fn telegram(tg: &FakeTelegram) -> impl FnOnce(&mut Config) {
    let url = tg.url();
    move |c: &mut Config| {
        c.channels.telegram.enabled = true;
        c.channels.telegram.token = Some(TOKEN.into());
        c.channels.telegram.api_url = url;
        c.channels.telegram.allow_from = vec!["42".into(), "@Alice".into()];
        c.channels.telegram.poll_timeout_secs = 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_message_is_answered_through_the_real_client() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    model.push_text("Hello **there**");
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    let id = tg.push_private(42, "alice", "hi bot");
    tg.wait_for("the reply", |t| !t.sent().is_empty()).await;
    let sent = tg.sent();
    assert_eq!(sent[0].chat_id, 42);
    assert_eq!(sent[0].text, "Hello <b>there</b>");
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(user_texts(&model), vec!["hi bot"]);
    assert!(!tg.calls("sendchataction").is_empty(), "typing indicator");
    assert_eq!(tg.calls("setmycommands").len(), 1);
    tg.wait_for("the offset to move past the update", |t| {
        t.offsets().last() == Some(&(id as i64 + 1))
    })
    .await;
    gw.shutdown().await.unwrap();
    assert!(ws.path().join("sessions/telegram_42.jsonl").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("state/telegram_offset"))
            .unwrap()
            .trim(),
        (id + 1).to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn senders_outside_allow_from_are_refused() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_private(99, "mallory", "let me in");
    tg.push_private(7, "ALICE", "by username");
    tg.wait_for("the reply to alice", |t| !t.sent().is_empty())
        .await;
    gw.shutdown().await.unwrap();
    let sent = tg.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].chat_id, 7);
    assert_eq!(user_texts(&model), vec!["by username"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10000_character_reply_is_split_in_order_with_the_code_block_intact() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    let mut reply = String::from("Here is the code:\n\n```rust\n");
    let mut i = 0;
    while reply.len() < 9_000 {
        reply.push_str(&format!("let line_{i:04} = a < b && c;\n"));
        i += 1;
    }
    reply.push_str("```\n\nThat's all.");
    while reply.chars().count() < 10_000 {
        reply.push_str(" More words follow here.");
    }
    model.push_text(&reply);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_private(42, "alice", "code please");
    tg.wait_for("the last part", |t| {
        t.sent()
            .last()
            .is_some_and(|s| s.text.ends_with("More words follow here."))
    })
    .await;
    gw.shutdown().await.unwrap();
    let sent = tg.sent();
    assert!(sent.len() >= 3, "{} parts", sent.len());
    for part in &sent {
        assert!(part.text.encode_utf16().count() <= 4096);
        assert_eq!(part.parse_mode.as_deref(), Some("HTML"));
        assert_eq!(
            part.text.matches("<pre>").count(),
            part.text.matches("</pre>").count(),
            "balanced code block in {}",
            part.text
        );
    }
    assert!(sent[0].text.starts_with("Here is the code:"));
    assert!(
        sent[1]
            .text
            .starts_with("<pre><code class=\"language-rust\">")
    );
    let all: String = sent.iter().map(|s| s.text.as_str()).collect();
    let mut last = 0;
    for n in 0..i {
        let pos = all
            .find(&format!("let line_{n:04} = a &lt; b &amp;&amp; c;"))
            .unwrap_or_else(|| panic!("line {n} missing"));
        assert!(pos >= last, "line {n} out of order");
        last = pos;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_telegram_rejects_is_resent_as_plain_text() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    model.push_text("**bold** and <weird>");
    tg.reject_html(1);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_private(42, "alice", "hi");
    tg.wait_for("the plain reply", |t| !t.sent().is_empty())
        .await;
    gw.shutdown().await.unwrap();
    let sent = tg.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].parse_mode, None);
    assert_eq!(sent[0].text, "**bold** and <weird>");
    assert_eq!(tg.calls("sendmessage").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_waits_retry_after_and_sends_again() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    tg.rate_limit(&[1]);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_private(42, "alice", "hi");
    tg.wait_for("the retried reply", |t| !t.sent().is_empty())
        .await;
    gw.shutdown().await.unwrap();
    assert_eq!(tg.calls("sendmessage").len(), 2, "one 429, one success");
    assert_eq!(tg.sent()[0].text, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_answer_mentions_and_replies_only() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_group(-100_123, 42, "just chatting", false);
    tg.push_group(
        -100_123,
        42,
        &format!("@{BOT_USERNAME} what time is it"),
        false,
    );
    tg.push_group(-100_123, 42, "and tomorrow?", true);
    tg.wait_for("two replies", |t| t.sent().len() == 2).await;
    gw.shutdown().await.unwrap();
    assert_eq!(user_texts(&model), vec!["what time is it", "and tomorrow?"]);
    assert!(tg.sent().iter().all(|s| s.chat_id == -100_123));
    // One session for the group.
    assert!(ws.path().join("sessions/telegram_-100123.jsonl").exists());

    // With group_policy = "all", every message is answered.
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let base = telegram(&tg);
    let gw = start_gateway(ws.path(), &model, |c| {
        base(c);
        c.channels.telegram.group_policy = GroupPolicy::All;
    })
    .await;
    tg.push_group(-5, 42, "just chatting", false);
    tg.wait_for("a reply", |t| t.sent().len() == 1).await;
    gw.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photos_are_downloaded_to_the_workspace_and_referenced() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    tg.add_file("PHOTO1", "photos/file_1.jpg", b"\xFF\xD8fakejpeg".to_vec());
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_message(json!({
        "chat": {"id": 42, "type": "private", "first_name": "A"},
        "from": {"id": 42, "is_bot": false, "first_name": "A"},
        "photo": [{"file_id": "PHOTO1", "file_unique_id": "uPHOTO1", "width": 10, "height": 10, "file_size": 10}],
        "caption": "what is this?",
    }));
    tg.wait_for("the reply", |t| !t.sent().is_empty()).await;
    gw.shutdown().await.unwrap();
    let path = ws.path().join("media/telegram_uPHOTO1.jpg");
    assert_eq!(std::fs::read(&path).unwrap(), b"\xFF\xD8fakejpeg");
    assert_eq!(
        user_texts(&model),
        vec![format!("what is this?\n[image: {}]", path.display())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_delivered_twice_is_answered_once() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    let msg = json!({
        "message_id": 5,
        "chat": {"id": 42, "type": "private", "first_name": "A"},
        "from": {"id": 42, "is_bot": false, "first_name": "A"},
        "text": "once",
    });
    tg.push_message(msg.clone());
    tg.push_message(msg);
    tg.push_private(42, "alice", "twice");
    tg.wait_for("two replies", |t| t.sent().len() == 2).await;
    gw.shutdown().await.unwrap();
    assert_eq!(user_texts(&model), vec!["once", "twice"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_survives_a_409_conflict() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    tg.conflict(1);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, telegram(&tg)).await;
    tg.push_private(42, "alice", "still there?");
    tg.wait_for("the reply after the conflict", |t| !t.sent().is_empty())
        .await;
    gw.shutdown().await.unwrap();
    assert!(tg.calls("getupdates").len() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_restarts_a_stuck_poll() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    tg.hang(1);
    let ws = tempfile::tempdir().unwrap();
    let base = telegram(&tg);
    let gw = start_gateway(ws.path(), &model, |c| {
        base(c);
        c.channels.telegram.poll_timeout_secs = 0;
        // The floor is poll_timeout_secs + 5: the watchdog fires 5 s into the stuck call.
        c.channels.telegram.watchdog_secs = 1;
    })
    .await;
    tg.wait_for("the stuck poll", |t| !t.calls("getupdates-hung").is_empty())
        .await;
    tg.push_private(42, "alice", "anyone?");
    tg.wait_for("the reply after the restart", |t| !t.sent().is_empty())
        .await;
    gw.shutdown().await.unwrap();
    assert_eq!(user_texts(&model), vec!["anyone?"]);
}

// ---- the real binary ----

fn write_config(
    dir: &Path,
    model: &FakeOpenAi,
    tg: &FakeTelegram,
    grace: u64,
) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[provider]\napi_base = \"{}\"\napi_key = \"sk-test\"\nmax_retries = 0\n\n\
             [gateway]\nshutdown_grace_secs = {grace}\n\n\
             [channels.telegram]\nenabled = true\ntoken_env = \"TEST_TG_TOKEN\"\napi_url = \"{}\"\n\
             allow_from = [\"42\"]\npoll_timeout_secs = 1\n",
            model.base_url(),
            tg.url()
        ),
    )
    .unwrap();
    path
}

struct Daemon {
    child: tokio::process::Child,
}

impl Daemon {
    fn spawn(home: &Path, ws: &Path, config: &Path) -> Daemon {
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_nanogate"))
            .args(["gateway", "--workspace"])
            .arg(ws)
            .arg("--config")
            .arg(config)
            .env("HOME", home)
            .env("TEST_TG_TOKEN", TOKEN)
            .env("RUST_LOG", "info")
            .env_remove("NANOGATE_WORKSPACE")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run nanogate gateway");
        Daemon { child }
    }

    fn signal(&self, sig: i32) {
        let pid = self.child.id().expect("pid") as i32;
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Waits for exit; returns (code, stderr).
    async fn finish(self) -> (Option<i32>, String) {
        let out = tokio::time::timeout(Duration::from_secs(30), self.child.wait_with_output())
            .await
            .expect("the daemon exits")
            .expect("wait");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_turn_lets_it_finish_then_exits_0() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    model.push(
        common::fake_openai::FakeResponse::ok(text_completion("finished anyway"))
            .delayed(Duration::from_millis(1500)),
    );
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    let config = write_config(home.path(), &model, &tg, 20);
    let daemon = Daemon::spawn(home.path(), &ws, &config);
    tg.wait_for("polling", |t| !t.offsets().is_empty()).await;
    tg.push_private(42, "alice", "slow question");
    tg.wait_for("the turn to start", |_| model.in_flight() == 1)
        .await;
    daemon.signal(libc::SIGTERM);
    let (code, stderr) = daemon.finish().await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(tg.sent().len(), 1, "{stderr}");
    assert_eq!(tg.sent()[0].text, "finished anyway");
    assert!(stderr.contains("ready"), "{stderr}");
    assert!(stderr.contains("telegram connected"), "{stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    assert!(
        !stderr.contains("SECRET-TEST-TOKEN"),
        "token leaked: {stderr}"
    );
    let session = std::fs::read_to_string(ws.join("sessions/telegram_42.jsonl")).unwrap();
    assert!(session.contains("finished anyway"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_does_not_answer_old_updates_again() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    let config = write_config(home.path(), &model, &tg, 10);

    let daemon = Daemon::spawn(home.path(), &ws, &config);
    let id = tg.push_private(42, "alice", "first");
    tg.wait_for("the reply", |t| t.sent().len() == 1).await;
    daemon.signal(libc::SIGINT);
    let (code, stderr) = daemon.finish().await;
    assert_eq!(code, Some(0), "{stderr}");

    let polls_before = tg.offsets().len();
    let daemon = Daemon::spawn(home.path(), &ws, &config);
    tg.wait_for("the restarted daemon to poll twice", |t| {
        t.offsets().len() >= polls_before + 2
    })
    .await;
    assert_eq!(
        tg.offsets()[polls_before],
        id as i64 + 1,
        "offset persisted"
    );
    daemon.signal(libc::SIGTERM);
    let (code, stderr) = daemon.finish().await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(tg.sent().len(), 1, "the old update was answered again");
    assert_eq!(model.request_count(), 1);
    assert_eq!(
        tg.calls("setmycommands").len(),
        1,
        "commands registered once"
    );
}

#[test]
fn a_missing_token_is_a_clear_startup_error() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        "[provider]\napi_base = \"http://127.0.0.1:9/v1\"\n\n[channels.telegram]\nenabled = true\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nanogate"))
        .args(["gateway", "--workspace"])
        .arg(home.path().join("ws"))
        .arg("--config")
        .arg(&config)
        .env("HOME", home.path())
        .env_remove("NANOGATE_WORKSPACE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("channels.telegram.token"), "{stderr}");
}
