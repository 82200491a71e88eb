//! A fake OpenAI-compatible chat-completions server on 127.0.0.1 for integration tests.
//!
//! Tests push a script of answers; each `POST /v1/chat/completions` takes the next one (or the default answer,
//! content "ok", when the script is empty) and every request is recorded: its path, headers and body. Any other
//! path answers 404 `404 page not found`, as a Go server does, and is recorded too.
//!
//! ```ignore
//! let server = FakeOpenAi::start().await;
//! server.push_tool_calls(vec![("call_1", "read_file", r#"{"path": "a"}"#)]);
//! server.push_text("done");
//! // … point provider.api_base at server.base_url() …
//! assert_eq!(server.request_count(), 2);
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use nanogate::json::{Json, Object};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct FakeResponse {
    /// HTTP status.
    pub status: u16,
    /// Extra headers (`content-type: application/json` is added unless given here).
    pub headers: Vec<(String, String)>,
    /// The body, sent as is.
    pub body: String,
    /// Waits this long before answering (overrides the server-wide delay).
    pub delay: Option<Duration>,
}

impl FakeResponse {
    /// A 200 answer with this body.
    pub fn ok(body: impl ToString) -> Self {
        Self::status(200, body)
    }

    /// An answer with this status and body.
    pub fn status(status: u16, body: impl ToString) -> Self {
        FakeResponse {
            status,
            headers: Vec::new(),
            body: body.to_string(),
            delay: None,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Delays this answer.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

/// One received request.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, …
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers with lower-case names, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body exactly as received.
    pub body_text: String,
    /// The body parsed (`Json::Null` if it is not JSON).
    pub body: Json,
}

impl RecordedRequest {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Answers a request from its body; `None` leaves it to the script.
pub type Responder = Arc<dyn Fn(&Json) -> Option<FakeResponse> + Send + Sync>;

#[derive(Default)]
struct Shared {
    responder: Mutex<Option<Responder>>,
    script: Mutex<VecDeque<FakeResponse>>,
    default: Mutex<Option<FakeResponse>>,
    delay: Mutex<Option<Duration>>,
    requests: Mutex<Vec<RecordedRequest>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// Counts a request as in flight until dropped (also when the client goes away mid-answer).
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The running server; stops when dropped.
pub struct FakeOpenAi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    /// Starts a server on 127.0.0.1 with an ephemeral port, on the current tokio runtime.
    pub async fn start() -> FakeOpenAi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route(
                "/v1/chat/completions",
                axum::routing::post(chat_completions),
            )
            .fallback(unknown_route)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake server");
        });
        FakeOpenAi { addr, shared, task }
    }

    /// `http://127.0.0.1:<port>/v1`, the value for `provider.api_base`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues an answer.
    pub fn push(&self, response: FakeResponse) {
        self.shared.script.lock().unwrap().push_back(response);
    }

    /// Queues an answer with this status and body (any text: a `&str`, a `String` or a `Json`).
    pub fn push_json(&self, status: u16, body: impl ToString) {
        self.push(FakeResponse::status(status, body));
    }

    /// Queues a 200 completion whose message content is `content` (finish_reason `stop`, with usage).
    pub fn push_text(&self, content: &str) {
        self.push(FakeResponse::ok(text_completion(content)));
    }

    /// Queues a 200 completion with these tool calls, `(id, name, arguments)` (finish_reason `tool_calls`).
    pub fn push_tool_calls(&self, calls: Vec<(&str, &str, &str)>) {
        self.push(FakeResponse::ok(tool_calls_completion(&calls)));
    }

    /// Queues an answer with this status, extra headers and body.
    pub fn push_status_with_headers(
        &self,
        status: u16,
        headers: &[(&str, &str)],
        body: impl ToString,
    ) {
        let mut r = FakeResponse::status(status, body);
        for (n, v) in headers {
            r = r.header(n, v);
        }
        self.push(r);
    }

    /// Answers each request with `f(body)` when it returns an answer, before the script is consulted: for a
    /// model that must answer by what it is asked (a background consolidation beside a turn, say).
    pub fn set_responder(&self, f: impl Fn(&Json) -> Option<FakeResponse> + Send + Sync + 'static) {
        *self.shared.responder.lock().unwrap() = Some(Arc::new(f));
    }

    /// Number of answers still queued.
    pub fn pending(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }

    /// Sets the answer used when the script is empty (default: a text completion "ok").
    pub fn set_default(&self, response: FakeResponse) {
        *self.shared.default.lock().unwrap() = Some(response);
    }

    /// Waits this long before every answer (tokio time, so a paused clock skips it).
    pub fn set_delay(&self, delay: Duration) {
        *self.shared.delay.lock().unwrap() = Some(delay);
    }

    /// Every request body received, parsed, in order.
    pub fn requests(&self) -> Vec<Json> {
        self.recorded().into_iter().map(|r| r.body).collect()
    }

    /// Every request received, in order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The last request received.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.shared.requests.lock().unwrap().last().cloned()
    }

    /// Chat requests being answered right now (received, answer not yet sent).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// The most chat requests that were ever being answered at the same time (use with `set_delay` to observe
    /// concurrency).
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Number of requests received.
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }
}

/// A chat completion answering `content`.
pub fn text_completion(content: &str) -> String {
    let mut message = Object::new();
    message.insert("role", Json::str("assistant"));
    message.insert("content", Json::str(content));
    completion(message, "stop").to_python()
}

/// A chat completion with tool calls `(id, name, arguments)` and null content.
pub fn tool_calls_completion(calls: &[(&str, &str, &str)]) -> String {
    let calls = calls
        .iter()
        .map(|(id, name, arguments)| {
            let mut function = Object::new();
            function.insert("name", Json::str(*name));
            function.insert("arguments", Json::str(*arguments));
            let mut call = Object::new();
            call.insert("id", Json::str(*id));
            call.insert("type", Json::str("function"));
            call.insert("function", Json::Object(function));
            Json::Object(call)
        })
        .collect();
    let mut message = Object::new();
    message.insert("role", Json::str("assistant"));
    message.insert("content", Json::Null);
    message.insert("tool_calls", Json::Array(calls));
    completion(message, "tool_calls").to_python()
}

/// An error body as OpenAI sends it: `{"error": {"message", "type", "code"}}`.
pub fn error_body(message: &str, kind: &str, code: &str) -> String {
    let mut error = Object::new();
    error.insert("message", Json::str(message));
    error.insert("type", Json::str(kind));
    error.insert("code", Json::str(code));
    let mut root = Object::new();
    root.insert("error", Json::Object(error));
    Json::Object(root).to_python()
}

/// `{"id", "object", "created", "model", "choices": [{"index", "message", "finish_reason"}], "usage"}`.
fn completion(message: Object, finish_reason: &str) -> Json {
    let mut choice = Object::new();
    choice.insert("index", Json::from(0u64));
    choice.insert("message", Json::Object(message));
    choice.insert("finish_reason", Json::str(finish_reason));
    let mut usage = Object::new();
    usage.insert("prompt_tokens", Json::from(10u64));
    usage.insert("completion_tokens", Json::from(5u64));
    usage.insert("total_tokens", Json::from(15u64));
    let mut root = Object::new();
    root.insert("id", Json::str("chatcmpl-fake"));
    root.insert("object", Json::str("chat.completion"));
    root.insert("created", Json::from(1_700_000_000u64));
    root.insert("model", Json::str("fake-model"));
    root.insert("choices", Json::Array(vec![Json::Object(choice)]));
    root.insert("usage", Json::Object(usage));
    Json::Object(root)
}

fn record(shared: &Shared, method: &Method, uri: &Uri, headers: &HeaderMap, body: String) {
    let headers = headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let parsed = Json::parse(&body).unwrap_or(Json::Null);
    shared.requests.lock().unwrap().push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        headers,
        body_text: body,
        body: parsed,
    });
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let parsed = Json::parse(&body).unwrap_or(Json::Null);
    record(&shared, &method, &uri, &headers, body);
    let responder = shared.responder.lock().unwrap().clone();
    let scripted = responder
        .and_then(|f| f(&parsed))
        .or_else(|| shared.script.lock().unwrap().pop_front());
    let response = scripted
        .or_else(|| shared.default.lock().unwrap().clone())
        .unwrap_or_else(|| FakeResponse::ok(text_completion("ok")));
    let delay = response.delay.or(*shared.delay.lock().unwrap());
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    let mut map = HeaderMap::new();
    map.insert("content-type", HeaderValue::from_static("application/json"));
    for (n, v) in &response.headers {
        map.insert(
            HeaderName::from_bytes(n.as_bytes()).expect("header name"),
            HeaderValue::from_str(v).expect("header value"),
        );
    }
    let status = StatusCode::from_u16(response.status).expect("status");
    (status, map, response.body).into_response()
}

async fn unknown_route(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    record(&shared, &method, &uri, &headers, body);
    (StatusCode::NOT_FOUND, "404 page not found").into_response()
}
