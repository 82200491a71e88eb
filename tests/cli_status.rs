//! `nanogate status` as a user runs it, against a fake model on 127.0.0.1.

mod common;

use common::fake_openai::FakeOpenAi;
use common::run_nanogate as nanogate;

#[tokio::test]
async fn status_reports_each_part_and_never_prints_a_secret() {
    let fake = FakeOpenAi::start().await;
    let home = tempfile::tempdir().expect("tmp");
    let ws = home.path().join("ws");
    std::fs::create_dir_all(ws.join("sessions")).expect("mkdir");
    std::fs::write(ws.join("sessions/telegram_1.jsonl"), "").expect("write");
    std::fs::write(ws.join("sessions/cli_direct.jsonl"), "").expect("write");
    let jobs = home.path().join("jobs.json");
    std::fs::copy(common::fixture("nanobot-0.1.4/cron/jobs.json"), &jobs).expect("copy jobs");
    let base = fake.base_url();
    let env = [
        ("NANOGATE_PROVIDER__API_BASE", base.as_str()),
        ("NANOGATE_PROVIDER__API_KEY", "sk-very-secret-key"),
        ("NANOGATE_CRON__STORE", jobs.to_str().expect("p")),
        ("NANOGATE_ADMIN__ENABLED", "true"),
        ("NANOGATE_ADMIN__TOKEN", "admin-secret-token"),
        ("NANOGATE_CHANNELS__TELEGRAM__ENABLED", "true"),
        ("NANOGATE_CHANNELS__TELEGRAM__TOKEN", "123:tg-secret"),
    ];
    let o = nanogate(
        home.path(),
        &["--workspace", ws.to_str().expect("p"), "status"],
        &env,
    )
    .await;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("(not found: defaults in use"), "{out}");
    assert!(out.contains("(2 sessions)"), "{out}");
    assert!(
        out.contains(&format!("gpt-4o-mini at {base}: answers")),
        "{out}"
    );
    assert!(out.contains("api key     set"), "{out}");
    assert!(out.contains(" jobs (") && out.contains(", next: "), "{out}");
    assert!(out.contains("http://127.0.0.1:18790 (token set)"), "{out}");
    assert!(
        out.contains("telegram    enabled, token set, allow_from is empty: nobody can talk to it"),
        "{out}"
    );
    assert!(out.contains("discord     off"), "{out}");
    for secret in ["sk-very-secret-key", "admin-secret-token", "tg-secret"] {
        assert!(!out.contains(secret), "{secret} printed");
    }
    // The model was asked with the key, at /models.
    let req = fake.last_request().expect("a request");
    assert_eq!(req.path, "/v1/models");
    assert_eq!(
        req.header("authorization"),
        Some("Bearer sk-very-secret-key")
    );
}

#[tokio::test]
async fn status_says_what_needs_attention_and_exits_1() {
    let home = tempfile::tempdir().expect("tmp");
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}/v1", closed.local_addr().expect("addr"));
    drop(closed);
    let jobs = home.path().join("jobs.json");
    std::fs::write(&jobs, "{\"version\": 1, \"jobs\": [").expect("write");
    let env = [
        ("NANOGATE_PROVIDER__API_BASE", base.as_str()),
        ("NANOGATE_CRON__STORE", jobs.to_str().expect("p")),
        ("NANOGATE_ADMIN__ENABLED", "true"),
        ("NANOGATE_CHANNELS__DISCORD__ENABLED", "true"),
    ];
    let o = nanogate(home.path(), &["status"], &env).await;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("does not answer: cannot connect to"), "{out}");
    assert!(out.contains("api key     not set"), "{out}");
    assert!(
        out.contains("cron        cannot be used:") && out.contains("jobs.json"),
        "{out}"
    );
    assert!(out.contains("NO TOKEN"), "{out}");
    assert!(
        out.contains("discord     enabled, NO TOKEN (channels.discord.token is not set"),
        "{out}"
    );
}
