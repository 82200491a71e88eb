//! A fake Telegram Bot API on 127.0.0.1, driven by the test, for teloxide pointed at it with `api_url`.
//!
//! Methods are matched case-insensitively (teloxide sends `GetMe`, `GetUpdates`, …). `getUpdates` serves the
//! updates the test pushed whose id is at least the request's offset, long-polling up to one second (well
//! under teloxide's 17 s client timeout). `sendMessage` records each message; the test can make it reject HTML
//! (`can't parse entities`) or answer 429 with `retry_after`. `getFile` and `/file/bot<token>/<path>` serve
//! files the test registered. Every call is recorded by method name (lower case).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The bot's identity in `getMe`.
pub const BOT_ID: u64 = 777;
/// The bot's username.
pub const BOT_USERNAME: &str = "nano_test_bot";

#[derive(Default)]
struct Inner {
    updates: Vec<Value>,
    next_update_id: u64,
    next_message_id: i64,
    calls: Vec<(String, Value)>,
    offsets: Vec<i64>,
    reject_html: usize,
    conflicts: usize,
    hangs: usize,
    rate_limits: Vec<u64>,
    files: HashMap<String, (String, Vec<u8>)>,
}

struct Shared {
    inner: Mutex<Inner>,
    new_update: Notify,
}

/// The fake server.
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

/// One message the bot sent.
#[derive(Debug, Clone)]
pub struct Sent {
    pub chat_id: i64,
    pub text: String,
    pub parse_mode: Option<String>,
}

impl FakeTelegram {
    /// Starts the server on an ephemeral port of 127.0.0.1.
    pub async fn start() -> FakeTelegram {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next_update_id: 1000,
                next_message_id: 1,
                ..Default::default()
            }),
            new_update: Notify::new(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeTelegram { addr, shared }
    }

    /// `http://127.0.0.1:<port>` (teloxide appends `/bot<token>/<Method>`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues an update holding `message` (the `message` object, without `message_id`/`date`, which are added);
    /// returns its update id.
    pub fn push_message(&self, mut message: Value) -> u64 {
        let mut g = self.shared.inner.lock().unwrap();
        let id = g.next_update_id;
        g.next_update_id += 1;
        if message.get("message_id").is_none() {
            message["message_id"] = json!(id);
        }
        message["date"] = json!(1_700_000_000);
        g.updates.push(json!({"update_id": id, "message": message}));
        drop(g);
        self.shared.new_update.notify_waiters();
        id
    }

    /// A private text message from user `from` (id) with username `username`.
    pub fn push_private(&self, from: i64, username: &str, text: &str) -> u64 {
        self.push_message(json!({
            "chat": {"id": from, "type": "private", "first_name": "U", "username": username},
            "from": {"id": from, "is_bot": false, "first_name": "U", "username": username},
            "text": text,
        }))
    }

    /// A group message; `reply_to_bot` makes it a reply to one of the bot's messages.
    pub fn push_group(&self, chat: i64, from: i64, text: &str, reply_to_bot: bool) -> u64 {
        let mut m = json!({
            "chat": {"id": chat, "type": "supergroup", "title": "Group"},
            "from": {"id": from, "is_bot": false, "first_name": "U", "username": format!("user{from}")},
            "text": text,
        });
        if reply_to_bot {
            m["reply_to_message"] = json!({
                "message_id": 1, "date": 1_700_000_000,
                "chat": {"id": chat, "type": "supergroup", "title": "Group"},
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Bot", "username": BOT_USERNAME},
                "text": "earlier answer",
            });
        }
        self.push_message(m)
    }

    /// Registers a file for `getFile` and its download.
    pub fn add_file(&self, file_id: &str, path: &str, bytes: Vec<u8>) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .files
            .insert(file_id.to_owned(), (path.to_owned(), bytes));
    }

    /// The next `n` sendMessage calls with `parse_mode = HTML` are rejected with "can't parse entities".
    pub fn reject_html(&self, n: usize) {
        self.shared.inner.lock().unwrap().reject_html = n;
    }

    /// The next `n` getUpdates calls never answer (a stuck connection).
    pub fn hang(&self, n: usize) {
        self.shared.inner.lock().unwrap().hangs = n;
    }

    /// The next `n` getUpdates calls answer 409 (another poller on the token).
    pub fn conflict(&self, n: usize) {
        self.shared.inner.lock().unwrap().conflicts = n;
    }

    /// The next sendMessage calls answer 429 with these `retry_after` values, one each.
    pub fn rate_limit(&self, retry_after: &[u64]) {
        self.shared.inner.lock().unwrap().rate_limits = retry_after.to_vec();
    }

    /// Messages the bot sent successfully, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.calls("sendmessage")
            .into_iter()
            .filter(|b| b.get("__accepted").is_some())
            .map(|b| Sent {
                chat_id: b["chat_id"].as_i64().unwrap_or_default(),
                text: b["text"].as_str().unwrap_or_default().to_owned(),
                parse_mode: b["parse_mode"].as_str().map(str::to_owned),
            })
            .collect()
    }

    /// Bodies of the calls of `method` (lower case), in order.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared
            .inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Offsets of every getUpdates call.
    pub fn offsets(&self) -> Vec<i64> {
        self.shared.inner.lock().unwrap().offsets.clone()
    }

    /// Waits (up to 20 s, as a safety net, not a timing assertion) until `cond` holds.
    pub async fn wait_for(&self, what: &str, cond: impl Fn(&FakeTelegram) -> bool) {
        let calls = || {
            let inner = self.shared.inner.lock().unwrap();
            let calls: Vec<String> = inner
                .calls
                .iter()
                .map(|(m, b)| format!("{m} {b}"))
                .collect();
            format!("calls: {calls:?}")
        };
        super::wait_until(what, || cond(self), calls).await;
    }
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn fail(status: u16, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": status, "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        axum::Json(body),
    )
        .into_response()
}

async fn handle(State(sh): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let path = uri.path();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        // teloxide pushes the file path as one URL segment, so its `/` arrives as `%2F`.
        let file_path = rest
            .split_once('/')
            .map(|(_, p)| p.replace("%2F", "/").replace("%2f", "/"))
            .unwrap_or_default();
        let g = sh.inner.lock().unwrap();
        return match g.files.values().find(|(p, _)| *p == file_path) {
            Some((_, bytes)) => bytes.clone().into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        };
    }
    let method = path.rsplit('/').next().unwrap_or_default().to_lowercase();
    let mut args: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    if !args.is_object() {
        args = json!({});
    }
    match method.as_str() {
        "getme" => {
            record(&sh, &method, &args);
            ok(json!({
                "id": BOT_ID, "is_bot": true, "first_name": "Nano", "username": BOT_USERNAME,
                "can_join_groups": true, "can_read_all_group_messages": false,
                "supports_inline_queries": false, "can_connect_to_business": false,
                "has_main_web_app": false,
            }))
        }
        "getupdates" => {
            let offset = args["offset"].as_i64().unwrap_or(0);
            let hang = {
                let mut g = sh.inner.lock().unwrap();
                let hang = g.hangs > 0;
                g.hangs = g.hangs.saturating_sub(1);
                hang
            };
            if hang {
                record(&sh, "getupdates-hung", &args);
                tokio::time::sleep(Duration::from_secs(600)).await;
            }
            {
                let mut g = sh.inner.lock().unwrap();
                if g.conflicts > 0 {
                    g.conflicts -= 1;
                    g.calls.push((method, args));
                    return fail(
                        409,
                        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                        None,
                    );
                }
            }
            let wait = args["timeout"].as_u64().unwrap_or(0).min(1);
            sh.inner.lock().unwrap().offsets.push(offset);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(wait);
            loop {
                let notified = sh.new_update.notified();
                let batch: Vec<Value> = sh
                    .inner
                    .lock()
                    .unwrap()
                    .updates
                    .iter()
                    .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                    .take(100)
                    .cloned()
                    .collect();
                if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
                    record(&sh, &method, &args);
                    return ok(Value::Array(batch));
                }
                let _ = tokio::time::timeout_at(deadline, notified).await;
            }
        }
        "sendmessage" => {
            let mut g = sh.inner.lock().unwrap();
            if !g.rate_limits.is_empty() {
                let after = g.rate_limits.remove(0);
                g.calls.push((method, args));
                return fail(
                    429,
                    &format!("Too Many Requests: retry after {after}"),
                    Some(json!({"retry_after": after})),
                );
            }
            if g.reject_html > 0 && args["parse_mode"].as_str() == Some("HTML") {
                g.reject_html -= 1;
                g.calls.push((method, args));
                return fail(
                    400,
                    "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0",
                    None,
                );
            }
            let id = g.next_message_id;
            g.next_message_id += 1;
            let chat_id = args["chat_id"].clone();
            let text = args["text"].clone();
            let mut recorded = args;
            recorded["__accepted"] = json!(true);
            g.calls.push((method, recorded));
            ok(json!({
                "message_id": id, "date": 1_700_000_000,
                "chat": {"id": chat_id, "type": "private", "first_name": "U"},
                "from": {"id": BOT_ID, "is_bot": true, "first_name": "Nano", "username": BOT_USERNAME},
                "text": text,
            }))
        }
        "sendchataction" | "setmycommands" => {
            record(&sh, &method, &args);
            ok(json!(true))
        }
        "getfile" => {
            record(&sh, &method, &args);
            let id = args["file_id"].as_str().unwrap_or_default().to_owned();
            let g = sh.inner.lock().unwrap();
            match g.files.get(&id) {
                Some((path, bytes)) => ok(json!({
                    "file_id": id, "file_unique_id": format!("u{id}"),
                    "file_size": bytes.len(), "file_path": path,
                })),
                None => fail(400, "Bad Request: invalid file_id", None),
            }
        }
        _ => {
            record(&sh, &method, &args);
            fail(404, "Not Found: method not found", None)
        }
    }
}

fn record(sh: &Shared, method: &str, args: &Value) {
    sh.inner
        .lock()
        .unwrap()
        .calls
        .push((method.to_owned(), args.clone()));
}
