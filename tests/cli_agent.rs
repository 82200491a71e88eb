//! `nanogate onboard` and `nanogate agent -m` as a user runs them, against a fake model on 127.0.0.1.

mod common;

use common::fake_openai::{FakeOpenAi, FakeResponse, error_body};
use common::run_nanogate as nanogate;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test]
async fn onboard_writes_config_and_templates_and_never_overwrites_without_force() {
    let home = tempfile::tempdir().expect("tmp");
    let o = nanogate(home.path(), &["onboard"], &[]).await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    let base = home.path().join(".nanogate");
    for f in [
        "config.toml",
        "workspace/AGENTS.md",
        "workspace/SOUL.md",
        "workspace/USER.md",
        "workspace/HEARTBEAT.md",
        "workspace/memory/MEMORY.md",
    ] {
        assert!(base.join(f).is_file(), "{f} missing");
    }
    assert!(
        text(&o.stdout).contains("api_key"),
        "tells the user the one line to add: {}",
        text(&o.stdout)
    );
    // The written config is valid and complete.
    let o = nanogate(home.path(), &["sessions", "list"], &[]).await;
    assert!(o.status.success(), "{}", text(&o.stderr));

    std::fs::write(base.join("workspace/SOUL.md"), "mine").expect("write");
    let o = nanogate(home.path(), &["onboard"], &[]).await;
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("kept"));
    assert_eq!(
        std::fs::read_to_string(base.join("workspace/SOUL.md")).expect("read"),
        "mine"
    );
    let o = nanogate(home.path(), &["onboard", "--force"], &[]).await;
    assert!(o.status.success());
    assert_ne!(
        std::fs::read_to_string(base.join("workspace/SOUL.md")).expect("read"),
        "mine"
    );
}

#[tokio::test]
async fn onboard_with_an_explicit_new_config_path_creates_it() {
    let home = tempfile::tempdir().expect("tmp");
    let cfg = home.path().join("etc/nanogate.toml");
    let ws = home.path().join("ws");
    let o = nanogate(
        home.path(),
        &[
            "--config",
            cfg.to_str().expect("p"),
            "--workspace",
            ws.to_str().expect("p"),
            "onboard",
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(cfg.is_file() && ws.join("AGENTS.md").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_m_answers_once_and_saves_the_session() {
    let fake = FakeOpenAi::start().await;
    fake.push_text("Hello from the model.");
    let home = tempfile::tempdir().expect("tmp");
    let base = fake.base_url();
    let o = nanogate(
        home.path(),
        &["agent", "-m", "hi there"],
        &[
            ("NANOGATE_PROVIDER__API_BASE", &base),
            ("NANOGATE_PROVIDER__API_KEY", "sk-secret-key"),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "Hello from the model.");
    let req = fake.last_request().expect("request");
    assert_eq!(req.header("authorization"), Some("Bearer sk-secret-key"));
    let session = std::fs::read_to_string(
        home.path()
            .join(".nanogate/workspace/sessions/cli_direct.jsonl"),
    )
    .expect("session");
    assert_eq!(session.lines().count(), 3);
    assert!(
        !text(&o.stderr).contains("sk-secret-key"),
        "the key never appears in logs"
    );

    // --session picks another key.
    fake.push_text("second");
    let o = nanogate(
        home.path(),
        &["agent", "-m", "again", "--session", "telegram:99"],
        &[
            ("NANOGATE_PROVIDER__API_BASE", &base),
            ("NANOGATE_PROVIDER__API_KEY", "k"),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        home.path()
            .join(".nanogate/workspace/sessions/telegram_99.jsonl")
            .is_file()
    );
}

#[tokio::test]
async fn agent_m_without_a_provider_says_what_to_configure() {
    let home = tempfile::tempdir().expect("tmp");
    let o = nanogate(home.path(), &["agent", "-m", "hi"], &[]).await;
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("no model provider is configured") && err.contains("api_key"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_m_exits_non_zero_when_the_model_cannot_be_reached() {
    let home = tempfile::tempdir().expect("tmp");
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let o = nanogate(
        home.path(),
        &["agent", "-m", "hi"],
        &[
            ("NANOGATE_PROVIDER__API_BASE", &base),
            ("NANOGATE_PROVIDER__MAX_RETRIES", "0"),
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("cannot reach") && err.contains(&base), "{err}");
    // The user's message is kept even though the model failed.
    let session = std::fs::read_to_string(
        home.path()
            .join(".nanogate/workspace/sessions/cli_direct.jsonl"),
    )
    .expect("session");
    assert!(session.contains("\"content\": \"hi\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_m_reports_a_rejected_key() {
    let fake = FakeOpenAi::start().await;
    fake.set_default(FakeResponse::status(
        401,
        error_body(
            "Incorrect API key provided",
            "invalid_request_error",
            "invalid_api_key",
        ),
    ));
    let home = tempfile::tempdir().expect("tmp");
    let base = fake.base_url();
    let o = nanogate(
        home.path(),
        &["agent", "-m", "hi"],
        &[
            ("NANOGATE_PROVIDER__API_BASE", &base),
            ("NANOGATE_PROVIDER__API_KEY", "sk-wrong-key-123"),
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("rejected") && err.contains(&base), "{err}");
    assert!(!err.contains("sk-wrong-key-123"));
}

#[tokio::test]
async fn a_one_shot_message_waits_for_the_consolidation_it_started() {
    let fake = FakeOpenAi::start().await;
    // The consolidation answer is slow: the process must not exit before it is written.
    fake.set_responder(|body| {
        body.to_python().contains("\"save_memory\"").then(|| {
            let args = r#"{"history_entry": "[2026-11-22 10:00] Planned a trip.", "memory_update": "- likes trains"}"#;
            FakeResponse::ok(common::fake_openai::tool_calls_completion(&[("c", "save_memory", args)]))
                .delayed(std::time::Duration::from_millis(800))
        })
    });
    let home = tempfile::tempdir().expect("tmp");
    let ws = home.path().join("ws");
    let base = fake.base_url();
    let env = [
        ("NANOGATE_PROVIDER__API_BASE", base.as_str()),
        ("NANOGATE_PROVIDER__API_KEY", "sk-test"),
        ("NANOGATE_AGENT__MEMORY_WINDOW", "4"),
        ("NANOGATE_MEMORY__SUMMARY", "false"),
    ];
    let args = ["--workspace", ws.to_str().expect("p"), "agent", "-m"];
    for text in ["one", "two"] {
        let mut a = args.to_vec();
        a.push(text);
        let o = nanogate(home.path(), &a, &env).await;
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The second run made 4 messages: consolidation started after the reply and finished before the exit.
    assert_eq!(
        std::fs::read_to_string(ws.join("memory/HISTORY.md"))
            .expect("HISTORY.md written before exit"),
        "[2026-11-22 10:00] Planned a trip.\n\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("memory/MEMORY.md")).expect("MEMORY.md"),
        "- likes trains"
    );
    let session = std::fs::read_to_string(ws.join("sessions/cli_direct.jsonl")).expect("session");
    assert!(
        session
            .lines()
            .next()
            .expect("line 1")
            .ends_with("\"last_consolidated\": 2}"),
        "{session}"
    );
}
