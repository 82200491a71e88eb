//! The admin HTTP API on 127.0.0.1 with the real router and a fake model: auth, probes, metrics, sessions,
//! messages and bad input.

mod common;

use std::sync::Arc;

use common::fake_openai::{FakeOpenAi, FakeResponse, tool_calls_completion};
use nanogate::admin::{self, Readiness};
use nanogate::agent::{Agent, Router};
use nanogate::config::{AdminConfig, Config};
use nanogate::json::Json;
use nanogate::provider::Provider;
use nanogate::session::{SessionStore, StoreOptions};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "test-token-0123456789";

struct Api {
    base: String,
    client: reqwest::Client,
    readiness: Arc<Readiness>,
    ws: tempfile::TempDir,
    _stop: tokio_util::sync::DropGuard,
}

impl Api {
    async fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut r = self.client.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.expect("request");
        (resp.status().as_u16(), resp.text().await.expect("body"))
    }

    async fn post(&self, path: &str, body: &str) -> (u16, Json) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .body(body.to_owned())
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (status, Json::parse(&text).unwrap_or(Json::str(text)))
    }
}

async fn start(fake: &FakeOpenAi) -> Api {
    let ws = tempfile::tempdir().expect("tmp");
    let mut c = Config::default();
    c.provider.api_base = fake.base_url();
    c.provider.api_key = Some("sk-test".into());
    c.provider.max_retries = 0;
    let router = Router::new(common::agent(ws.path(), c));
    let readiness = Arc::new(Readiness::default());
    let stop = CancellationToken::new();
    let config = AdminConfig {
        enabled: true,
        listen: "127.0.0.1:0".into(),
        token: Some(TOKEN.into()),
        token_env: None,
    };
    let (addr, _task) = admin::start(&config, router, readiness.clone(), stop.clone())
        .await
        .expect("admin starts");
    Api {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        readiness,
        ws,
        _stop: stop.drop_guard(),
    }
}

fn get<'a>(j: &'a Json, k: &str) -> &'a Json {
    j.as_object().and_then(|o| o.get(k)).unwrap_or(&Json::Null)
}

#[tokio::test]
async fn it_refuses_to_start_without_a_token_and_with_a_bad_address() {
    let fake = FakeOpenAi::start().await;
    let ws = tempfile::tempdir().expect("tmp");
    let c = Config::default();
    let store = SessionStore::open(ws.path(), StoreOptions::default()).expect("store");
    let agent = Agent::new(
        c,
        ws.path().to_path_buf(),
        store,
        Provider::new(&nanogate::config::ProviderConfig {
            api_base: fake.base_url(),
            ..Default::default()
        })
        .expect("provider"),
        nanogate::tools::default_registry(),
        None,
    );
    let router = Router::new(agent);
    let mut config = AdminConfig {
        enabled: true,
        listen: "0.0.0.0:0".into(),
        ..AdminConfig::default()
    };
    let e = admin::start(
        &config,
        router.clone(),
        Arc::default(),
        CancellationToken::new(),
    )
    .await
    .expect_err("no token")
    .to_string();
    assert!(
        e.contains("admin.token") && e.contains("openssl rand"),
        "{e}"
    );
    config.token = Some("t".into());
    config.listen = "localhost-ish".into();
    let e = admin::start(
        &config,
        router.clone(),
        Arc::default(),
        CancellationToken::new(),
    )
    .await
    .expect_err("bad address")
    .to_string();
    assert!(e.contains("admin.listen"), "{e}");
    // A port someone else holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    config.listen = taken.local_addr().expect("addr").to_string();
    let e = admin::start(&config, router, Arc::default(), CancellationToken::new())
        .await
        .expect_err("port taken")
        .to_string();
    assert!(
        e.contains("cannot listen on") && e.contains("admin.listen"),
        "{e}"
    );
}

#[tokio::test]
async fn probes_are_open_and_everything_else_needs_the_token() {
    let fake = FakeOpenAi::start().await;
    let api = start(&fake).await;
    assert_eq!(api.get("/healthz", None).await, (200, "ok\n".to_owned()));
    let (status, body) = api.get("/metrics", None).await;
    assert_eq!(status, 401);
    assert!(body.contains("missing token"), "{body}");
    assert_eq!(api.get("/sessions", Some("wrong")).await.0, 401);
    assert_eq!(api.get("/metrics", Some(TOKEN)).await.0, 200);
    assert_eq!(api.get("/nope", Some(TOKEN)).await.0, 404);

    // Ready only when every enabled channel is connected.
    let (status, body) = api.get("/readyz", None).await;
    assert_eq!(status, 200, "{body}");
    api.readiness.register("telegram");
    let (status, body) = api.get("/readyz", None).await;
    assert_eq!(status, 503);
    assert!(body.contains("channel telegram is not connected"), "{body}");
    api.readiness.set("telegram", true);
    assert_eq!(api.get("/readyz", None).await.0, 200);
}

#[tokio::test]
async fn messages_sessions_clear_and_metrics() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(|body| {
        let text = body.to_python();
        if text.contains("\"save_memory\"") {
            let args =
                r#"{"history_entry": "[2026-11-22 10:00] Hi.", "memory_update": "- said hi"}"#;
            return Some(FakeResponse::ok(tool_calls_completion(&[(
                "c",
                "save_memory",
                args,
            )])));
        }
        None
    });
    fake.push_text("Hello from the agent.");
    let api = start(&fake).await;

    let (status, reply) = api
        .post("/messages", r#"{"session": "ops-1", "text": "hi"}"#)
        .await;
    assert_eq!(status, 200, "{reply:?}");
    assert_eq!(get(&reply, "reply"), &Json::str("Hello from the agent."));
    assert_eq!(get(&reply, "session"), &Json::str("api:ops-1"));
    assert_eq!(get(&reply, "error"), &Json::Bool(false));

    for (body, want) in [
        ("not json", "not JSON"),
        ("[1]", "JSON object"),
        (r#"{"session": "x"}"#, "\"text\" is missing"),
        (r#"{"session": 5, "text": "hi"}"#, "must be a string"),
        (r#"{"session": " ", "text": "hi"}"#, "\"session\" is empty"),
    ] {
        let (status, j) = api.post("/messages", body).await;
        assert_eq!(status, 400, "{body}");
        let e = get(&j, "error").as_str().unwrap_or_default().to_owned();
        assert!(e.contains(want), "{body}: {e}");
    }

    let (status, list) = api.get("/sessions", Some(TOKEN)).await;
    assert_eq!(status, 200);
    let list = Json::parse(&list).expect("json");
    let first = &list.as_array().expect("array")[0];
    assert_eq!(get(first, "key"), &Json::str("api:ops-1"));
    assert_eq!(get(first, "file"), &Json::str("api_ops-1.jsonl"));
    assert_eq!(get(first, "messages"), &Json::from(2u64));

    // Keys in paths are percent-decoded.
    let (status, one) = api.get("/sessions/api%3Aops-1", Some(TOKEN)).await;
    assert_eq!(status, 200, "{one}");
    let one = Json::parse(&one).expect("json");
    let history = get(&one, "history").as_array().expect("history");
    assert_eq!(history.len(), 2);
    assert_eq!(
        get(&history[1], "content"),
        &Json::str("Hello from the agent.")
    );
    assert_eq!(api.get("/sessions/api%3Anobody", Some(TOKEN)).await.0, 404);
    let (status, body) = api.get("/sessions/%20%20", Some(TOKEN)).await;
    assert_eq!(status, 400);
    assert!(body.contains("empty"), "{body}");

    let (status, cleared) = api.post("/sessions/api%3Aops-1/clear", "").await;
    assert_eq!(status, 200, "{cleared:?}");
    assert_eq!(get(&cleared, "message"), &Json::str("New session started."));
    let archive = api.ws.path().join("sessions/archive");
    assert_eq!(std::fs::read_dir(&archive).expect("archive").count(), 1);
    assert_eq!(
        std::fs::read_to_string(api.ws.path().join("memory/HISTORY.md")).expect("history"),
        "[2026-11-22 10:00] Hi.\n\n"
    );
    assert_eq!(api.post("/sessions/api%3Aghost/clear", "").await.0, 404);

    let (_, metrics) = api.get("/metrics", Some(TOKEN)).await;
    assert!(
        metrics.contains("nanogate_turns_total{channel=\"api\",outcome=\"ok\"} "),
        "{metrics}"
    );
    assert!(
        metrics.contains("nanogate_consolidations_total{outcome=\"ok\"} "),
        "{metrics}"
    );
    assert!(
        metrics.contains("nanogate_model_request_duration_seconds_count "),
        "{metrics}"
    );
    assert!(metrics.contains("nanogate_sessions_cached "), "{metrics}");
}
