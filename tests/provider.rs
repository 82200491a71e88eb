//! The chat-completions client against a fake OpenAI server on 127.0.0.1: answers, request shape, retries and
//! errors.

mod common;

use std::cell::RefCell;
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use common::fake_openai::{FakeOpenAi, error_body};
use nanogate::config::ProviderConfig;
use nanogate::json::Json;
use nanogate::provider::{ChatRequest, Provider, ProviderError, ToolCall, Usage};
use tokio::time::Instant;

const KEY: &str = "sk-test-SECRET-0123456789";

fn config(api_base: &str) -> ProviderConfig {
    capture_logs();
    ProviderConfig {
        api_base: api_base.to_owned(),
        api_key: Some(KEY.to_owned()),
        model: "test-model".to_owned(),
        max_tokens: 1000,
        temperature: 0.5,
        request_timeout_secs: 30,
        max_retries: 2,
        ..ProviderConfig::default()
    }
}

fn provider(server: &FakeOpenAi) -> Provider {
    Provider::new(&config(&server.base_url())).unwrap()
}

fn user(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Json::parse(&format!(
                "{{\"role\": \"user\", \"content\": {}}}",
                Json::str(text)
            ))
            .unwrap(),
        ],
        ..ChatRequest::default()
    }
}

/// Asserts the key appears nowhere in an error's `Display`, `Debug` or `short()`.
fn assert_no_key(e: &ProviderError) {
    for text in [e.to_string(), format!("{e:?}"), e.short()] {
        assert!(!text.contains(KEY), "the key leaked: {text}");
    }
}

#[tokio::test]
async fn text_reply_with_usage() {
    let server = FakeOpenAi::start().await;
    server.push_text("Hello there");
    let r = provider(&server).chat(&user("hi")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("Hello there"));
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(r.reasoning_content, None);
    assert_eq!(
        r.usage,
        Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15
        })
    );
    // The script is empty now: the default answer is "ok".
    let r = provider(&server).chat(&user("again")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("ok"));
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn parallel_tool_calls_keep_raw_arguments() {
    let server = FakeOpenAi::start().await;
    server.push_tool_calls(vec![
        ("call_a", "read_file", r#"{"path": "notes/é.md"}"#),
        ("call_b", "exec", r#"{"command": "ls"#),
    ]);
    let r = provider(&server).chat(&user("go")).await.unwrap();
    assert_eq!(r.content, None);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        r.tool_calls,
        vec![
            ToolCall {
                id: "call_a".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "notes/é.md"}"#.into()
            },
            // Unparsable arguments come through untouched; the agent tells the model.
            ToolCall {
                id: "call_b".into(),
                name: "exec".into(),
                arguments: r#"{"command": "ls"#.into()
            },
        ]
    );
}

#[tokio::test]
async fn arguments_sent_as_an_object_are_re_encoded() {
    let server = FakeOpenAi::start().await;
    server.push_json(
        200,
        r#"{"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "web_fetch", "arguments": {"url": "https://x.test", "max": 1.50}}},
            {"type": "function", "function": {"name": "list_dir", "arguments": {}}}
        ]}, "finish_reason": "tool_calls"}]}"#,
    );
    let r = provider(&server).chat(&user("go")).await.unwrap();
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].name, "web_fetch");
    assert_eq!(
        r.tool_calls[0].arguments,
        r#"{"url": "https://x.test", "max": 1.50}"#
    );
    assert_eq!(r.tool_calls[1].arguments, "{}");
    // Missing ids are generated, and distinct.
    assert!(r.tool_calls.iter().all(|c| c.id.starts_with("call_")));
    assert_ne!(r.tool_calls[0].id, r.tool_calls[1].id);
    assert_eq!(r.usage, None);
}

#[tokio::test]
async fn reasoning_is_kept() {
    let server = FakeOpenAi::start().await;
    server.push_json(
        200,
        r#"{"choices": [{"message": {"content": "42", "reasoning_content": "6 × 7 …"}, "finish_reason": "stop"}]}"#,
    );
    server.push_json(
        200,
        r#"{"choices": [{"message": {"content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}], "reasoning": "short"}}]}"#,
    );
    let p = provider(&server);
    let r = p.chat(&user("q")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("42"));
    assert_eq!(r.reasoning_content.as_deref(), Some("6 × 7 …"));
    let r = p.chat(&user("q")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("42"));
    assert_eq!(r.reasoning_content.as_deref(), Some("short"));
}

#[tokio::test]
async fn request_shape() {
    let server = FakeOpenAi::start().await;
    let mut cfg = config(&format!("{}/", server.base_url()));
    cfg.extra_headers
        .insert("HTTP-Referer".into(), "https://nanogate.test".into());
    let p = Provider::new(&cfg).unwrap();
    assert_eq!(p.model(), "test-model");
    let messages = [
        r#"{"role": "system", "content": "Tu es un assistant. 日本語も話せます。"}"#,
        r#"{"role": "user", "content": "Grüße 👋 \"quoted\" \\ back\nslash", "timestamp": "2025-01-01T00:00:00", "weight": 1.10, "tiny": 1e-05}"#,
        r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\"a\": 1}"}}]}"#,
        r#"{"role": "tool", "tool_call_id": "c1", "name": "t", "content": "résultat"}"#,
    ];
    let tools = r#"[{"type": "function", "function": {"name": "t", "description": "A tool", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]"#;
    let request = ChatRequest {
        messages: messages.iter().map(|m| Json::parse(m).unwrap()).collect(),
        tools: Some(Json::parse(tools).unwrap()),
        tool_choice: Some(Json::str("auto")),
        max_tokens: Some(77),
        temperature: None,
    };
    p.chat(&request).await.unwrap();

    let sent = server.last_request().unwrap();
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    // Messages go out byte for byte: key order, number text, non-ASCII unescaped.
    let expected = format!(
        r#"{{"model": "test-model", "messages": [{}], "max_tokens": 77, "temperature": 0.5, "tools": {tools}, "tool_choice": "auto"}}"#,
        messages.join(", ")
    );
    assert_eq!(sent.body_text, expected);
    let body = sent.body.as_object().unwrap();
    assert_eq!(body.get("model").and_then(Json::as_str), Some("test-model"));
    assert_eq!(
        body.get("messages")
            .and_then(Json::as_array)
            .map(<[Json]>::len),
        Some(4)
    );

    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("http-referer"), Some("https://nanogate.test"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert!(
        sent.header("user-agent").unwrap().starts_with("nanogate/"),
        "{:?}",
        sent.header("user-agent")
    );

    // Defaults from the config, and no tools → neither tools nor tool_choice.
    let mut no_tools = user("x");
    no_tools.tool_choice = Some(Json::str("auto"));
    no_tools.tools = Some(Json::Array(Vec::new()));
    p.chat(&no_tools).await.unwrap();
    assert_eq!(
        server.last_request().unwrap().body_text,
        r#"{"model": "test-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1000, "temperature": 0.5}"#
    );
}

#[tokio::test]
async fn no_key_sends_no_authorization() {
    let server = FakeOpenAi::start().await;
    let mut cfg = config(&server.base_url());
    cfg.api_key = None;
    let p = Provider::new(&cfg).unwrap();
    p.chat(&user("hi")).await.unwrap();
    assert_eq!(server.last_request().unwrap().header("authorization"), None);
}

#[tokio::test(start_paused = true)]
async fn rate_limit_honours_retry_after() {
    let server = FakeOpenAi::start().await;
    server.push_status_with_headers(
        429,
        &[("retry-after", "2")],
        error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
    );
    server.push_text("after the wait");
    let start = Instant::now();
    let r = provider(&server).chat(&user("hi")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("after the wait"));
    assert_eq!(server.request_count(), 2);
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn server_errors_until_retries_run_out() {
    let server = FakeOpenAi::start().await;
    for status in [500, 502, 529] {
        server.push_json(
            status,
            error_body("The server is overloaded", "server_error", "overloaded"),
        );
    }
    let start = Instant::now();
    let e = provider(&server).chat(&user("hi")).await.unwrap_err();
    assert_eq!(server.request_count(), 3);
    assert!(
        matches!(e, ProviderError::Unavailable { attempts: 3, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{0} is unavailable after 3 attempts: {0} failed (HTTP 529): The server is overloaded",
            server.base_url()
        )
    );
    assert!(e.is_retryable());
    assert_eq!(
        e.short(),
        "the model provider failed (HTTP 529) (gave up after 3 attempts)"
    );
    // Backoff 1 s then 2 s, each ±25 %.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(2250) && waited <= Duration::from_millis(3750),
        "{waited:?}"
    );
}

#[tokio::test]
async fn rejected_key_names_api_base_and_hides_key() {
    let server = FakeOpenAi::start().await;
    // Servers sometimes quote the key back.
    server.push_json(
        401,
        error_body(
            &format!("Incorrect API key provided: {KEY}"),
            "invalid_request_error",
            "invalid_api_key",
        ),
    );
    let p = provider(&server);
    let e = p.chat(&user("hi")).await.unwrap_err();
    assert_eq!(server.request_count(), 1, "a 401 is not retried");
    assert_eq!(
        e.to_string(),
        format!(
            "the API key was rejected by {} (HTTP 401): Incorrect API key provided: [redacted]",
            server.base_url()
        )
    );
    assert!(!e.is_retryable());
    assert_no_key(&e);
    assert!(!format!("{p:?}").contains(KEY));
}

#[tokio::test(start_paused = true)]
async fn logs_never_contain_the_key() {
    capture_logs();
    take_logs();

    let server = FakeOpenAi::start().await;
    server.push_json(
        503,
        error_body(&format!("overloaded, key {KEY}"), "server_error", "x"),
    );
    server.push_json(
        403,
        error_body(&format!("forbidden for {KEY}"), "auth", "x"),
    );
    let e = provider(&server).chat(&user("hi")).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::Auth { status: 403, .. }),
        "{e:?}"
    );
    assert_no_key(&e);

    let logs = take_logs();
    assert!(
        logs.contains("retrying") && logs.contains("503") && logs.contains("attempt=1"),
        "{logs}"
    );
    assert!(!logs.contains(KEY), "{logs}");
}

#[tokio::test]
async fn not_found_names_the_model() {
    let server = FakeOpenAi::start().await;
    server.push_json(
        404,
        error_body(
            "The model `test-model` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
    );
    let e = provider(&server).chat(&user("hi")).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "model test-model not found at {} (HTTP 404): The model `test-model` does not exist or you do not have access to it.",
            server.base_url()
        )
    );
    assert_eq!(e.short(), "the model test-model was not found (HTTP 404)");

    // api_base without `/v1`: the route itself is unknown, so the message names the URL called.
    let base = format!("http://{}", server.addr());
    let e = Provider::new(&config(&base))
        .unwrap()
        .chat(&user("hi"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "model test-model not found at {base} (HTTP 404): 404 page not found \
             (called POST {base}/chat/completions; is provider.api_base right?)"
        )
    );
    assert_eq!(server.last_request().unwrap().path, "/chat/completions");
}

#[tokio::test]
async fn context_length_is_its_own_error() {
    let server = FakeOpenAi::start().await;
    server.push_json(
        400,
        error_body(
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
    );
    let e = provider(&server).chat(&user("hi")).await.unwrap_err();
    match &e {
        ProviderError::ContextLength(m) => assert!(m.contains("8192"), "{m}"),
        other => panic!("expected ContextLength, got {other:?}"),
    }
    assert!(!e.is_retryable());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn other_client_errors_are_refused() {
    let server = FakeOpenAi::start().await;
    server.push_json(422, r#"{"detail": "messages: field required"}"#);
    let e = provider(&server).chat(&user("hi")).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} refused the request (HTTP 422): messages: field required",
            server.base_url()
        )
    );
    assert_eq!(server.request_count(), 1);
}

/// A port nothing listens on: bind one, then drop the listener.
fn closed_port_base() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn connection_refused() {
    let base = closed_port_base();
    let mut cfg = config(&base);
    cfg.max_retries = 0;
    let e = Provider::new(&cfg)
        .unwrap()
        .chat(&user("hi"))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("cannot reach {base}: ")),
        "{text}"
    );
    assert!(text.ends_with("; is the server running?"), "{text}");
    assert!(e.is_retryable());
    assert_eq!(e.short(), "cannot reach the model provider");
}

#[tokio::test(start_paused = true)]
async fn connection_refused_is_retried() {
    let base = closed_port_base();
    let mut cfg = config(&base);
    cfg.max_retries = 1;
    let e = Provider::new(&cfg)
        .unwrap()
        .chat(&user("hi"))
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "{base} is unavailable after 2 attempts: cannot reach {base}"
        )),
        "{e}"
    );
}

#[tokio::test]
async fn slow_server_times_out() {
    let server = FakeOpenAi::start().await;
    server.set_delay(Duration::from_secs(3));
    let mut cfg = config(&server.base_url());
    cfg.request_timeout_secs = 1;
    cfg.max_retries = 0;
    let start = std::time::Instant::now();
    let e = Provider::new(&cfg)
        .unwrap()
        .chat(&user("hi"))
        .await
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_millis(2500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        e.to_string(),
        format!("no answer from {} within 1 s", server.base_url())
    );
    assert!(e.is_retryable());
    assert_eq!(e.short(), "the model did not answer within 1 s");
}

#[tokio::test]
async fn invalid_json_is_a_clear_error() {
    let server = FakeOpenAi::start().await;
    server.push_json(200, "<html>Bad gateway</html>");
    server.push_json(200, r#"{"object": "list", "data": []}"#);
    let p = provider(&server);
    let e = p.chat(&user("hi")).await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "invalid response from {}: the body is not JSON",
            server.base_url()
        )),
        "{text}"
    );
    assert!(text.contains("<html>Bad gateway</html>"), "{text}");
    assert!(!e.is_retryable());
    let e = p.chat(&user("hi")).await.unwrap_err();
    assert!(e.to_string().contains("the answer has no choices"), "{e}");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn configuration_errors_at_new() {
    let mut cfg = config("http://127.0.0.1:1/v1");
    cfg.api_key = None;
    cfg.api_key_env = Some("NANOGATE_TEST_PROVIDER_KEY_SURELY_UNSET".into());
    let e = Provider::new(&cfg).unwrap_err();
    assert!(matches!(e, ProviderError::Config(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains("NANOGATE_TEST_PROVIDER_KEY_SURELY_UNSET"),
        "{e}"
    );

    let mut cfg = config("http://127.0.0.1:1/v1");
    cfg.extra_headers
        .insert("X-Api-Key".into(), format!("{KEY}\n"));
    let e = Provider::new(&cfg).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid provider.extra_headers: the value of `X-Api-Key` is not a valid header value"
    );
    assert_no_key(&e);

    let e = Provider::new(&config("localhost:8080")).unwrap_err();
    assert!(
        e.to_string().starts_with("invalid provider.api_base"),
        "{e}"
    );

    // Credentials in the URL are not repeated in messages.
    let p = Provider::new(&config("https://user:pw@proxy.test/v1/")).unwrap();
    assert_eq!(p.api_base(), "https://proxy.test/v1");
    assert!(!format!("{p:?}").contains("pw"));
}

/// Sends every log event, at every level, to a buffer of the thread that emitted it, for the whole test binary.
///
/// A global subscriber installed before any test reaches a log call site, rather than a scoped one in the one
/// test that reads logs: tracing caches each call site's interest globally, and a call site first reached by a
/// concurrent test without a subscriber could stay disabled. Every test calls this (through `config`), and each
/// runs on its own current-thread runtime, so a test's buffer holds its own client's and server's events.
fn capture_logs() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ThreadLog)
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    });
}

thread_local! {
    static LOG: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Takes this thread's captured log output.
fn take_logs() -> String {
    String::from_utf8_lossy(&LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))).into_owned()
}

/// Appends to this thread's log buffer.
struct ThreadLog;

impl Write for ThreadLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.with(|l| l.borrow_mut().extend_from_slice(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
