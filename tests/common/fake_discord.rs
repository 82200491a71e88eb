//! A fake Discord on 127.0.0.1: REST (axum) and the gateway websocket (tokio-tungstenite).
//!
//! serenity reaches the REST side as its HTTP proxy (`api_url`), asks it for the gateway URL
//! (`GET /api/v10/gateway`, recorded so a test can prove the fake, not discord.com, was used) and connects to
//! the websocket: HELLO → IDENTIFY (recorded) → READY, heartbeats are ACKed, RESUME (recorded) → RESUMED. The
//! test injects MESSAGE_CREATE events and can close the connection with a code (4000 → serenity resumes).
//! `POST /api/v10/channels/<id>/messages` records each sent message; the test can make the next ones answer 429.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The bot's user id.
pub const BOT_ID: u64 = 888;

enum Cmd {
    Dispatch(&'static str, Value),
    Close(u16),
}

#[derive(Default)]
struct Inner {
    rest_calls: Vec<(String, String, Value)>,
    gateway_frames: Vec<Value>,
    connections: usize,
    conn: Option<mpsc::UnboundedSender<Cmd>>,
    rate_limits: usize,
    next_id: u64,
    files: Vec<(String, Vec<u8>)>,
}

struct Shared {
    inner: Mutex<Inner>,
    ws_url: String,
    rest_url: String,
}

/// The fake servers.
pub struct FakeDiscord {
    rest: SocketAddr,
    shared: Arc<Shared>,
}

/// One message the bot sent.
#[derive(Debug, Clone)]
pub struct Sent {
    pub channel_id: String,
    pub content: String,
}

impl FakeDiscord {
    /// Starts REST and gateway on ephemeral ports of 127.0.0.1.
    pub async fn start() -> FakeDiscord {
        let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind ws");
        let ws_addr = ws_listener.local_addr().expect("addr");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let rest_addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next_id: 5000,
                ..Default::default()
            }),
            ws_url: format!("ws://{ws_addr}"),
            rest_url: format!("http://{rest_addr}"),
        });
        let sh = shared.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = ws_listener.accept().await {
                tokio::spawn(connection(sh.clone(), stream));
            }
        });
        let app = Router::new().fallback(rest).with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeDiscord {
            rest: rest_addr,
            shared,
        }
    }

    /// The REST base for `channels.discord.api_url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.rest)
    }

    /// Sends MESSAGE_CREATE on the live connection. `guild`: a server channel (else a DM); `mention_bot` adds
    /// the bot to `mentions` and `<@id>` to the text.
    pub fn send_message(
        &self,
        channel: u64,
        author: u64,
        name: &str,
        text: &str,
        guild: bool,
        mention_bot: bool,
    ) {
        let mut g = self.shared.inner.lock().unwrap();
        g.next_id += 1;
        let id = g.next_id;
        let content = if mention_bot {
            format!("<@{BOT_ID}> {text}")
        } else {
            text.to_owned()
        };
        let mentions = if mention_bot {
            json!([user(BOT_ID, "nanobot", true)])
        } else {
            json!([])
        };
        let mut m = message(id, channel, user(author, name, false), &content);
        m["mentions"] = mentions;
        if guild {
            m["guild_id"] = json!("4242");
        }
        if let Some(tx) = &g.conn {
            let _ = tx.send(Cmd::Dispatch("MESSAGE_CREATE", m));
        }
    }

    /// Sends a DM with one attachment, served by the fake at `/attachments/...`.
    pub fn send_attachment(
        &self,
        channel: u64,
        author: u64,
        text: &str,
        filename: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) {
        let mut g = self.shared.inner.lock().unwrap();
        g.next_id += 1;
        let id = g.next_id;
        let path = format!("/attachments/{channel}/{id}/{filename}");
        let size = bytes.len();
        g.files.push((path.clone(), bytes));
        let mut m = message(id, channel, user(author, "dave", false), text);
        m["attachments"] = json!([{
            "id": id.to_string(), "filename": filename, "size": size,
            "url": format!("{}{path}", self.shared.rest_url),
            "proxy_url": format!("{}{path}", self.shared.rest_url),
            "content_type": content_type,
        }]);
        if let Some(tx) = &g.conn {
            let _ = tx.send(Cmd::Dispatch("MESSAGE_CREATE", m));
        }
    }

    /// Closes the live gateway connection with `code`.
    pub fn close(&self, code: u16) {
        if let Some(tx) = &self.shared.inner.lock().unwrap().conn {
            let _ = tx.send(Cmd::Close(code));
        }
    }

    /// The next `n` message sends answer 429.
    pub fn rate_limit(&self, n: usize) {
        self.shared.inner.lock().unwrap().rate_limits = n;
    }

    /// Messages sent through REST, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared
            .inner
            .lock()
            .unwrap()
            .rest_calls
            .iter()
            .filter(|(m, p, b)| m == "POST" && p.ends_with("/messages") && b.get("__ok").is_some())
            .map(|(_, p, b)| Sent {
                channel_id: p.split('/').nth(4).unwrap_or_default().to_owned(),
                content: b["content"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }

    /// `METHOD path` of every REST call.
    pub fn rest_calls(&self) -> Vec<String> {
        self.shared
            .inner
            .lock()
            .unwrap()
            .rest_calls
            .iter()
            .map(|(m, p, _)| format!("{m} {p}"))
            .collect()
    }

    /// Frames the client sent on the gateway (heartbeats excluded).
    pub fn frames(&self) -> Vec<Value> {
        self.shared.inner.lock().unwrap().gateway_frames.clone()
    }

    /// Websocket connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.inner.lock().unwrap().connections
    }

    /// Whether a connection is live and has been sent READY or RESUMED.
    pub fn connected(&self) -> bool {
        self.shared.inner.lock().unwrap().conn.is_some()
    }

    /// Waits (up to 20 s, a safety net) until `cond` holds.
    pub async fn wait_for(&self, what: &str, cond: impl Fn(&FakeDiscord) -> bool) {
        let state = || format!("rest: {:?}; frames: {:?}", self.rest_calls(), self.frames());
        super::wait_until(what, || cond(self), state).await;
    }
}

fn user(id: u64, name: &str, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": name, "discriminator": "0", "global_name": null,
           "avatar": null, "bot": bot})
}

fn message(id: u64, channel: u64, author: Value, content: &str) -> Value {
    json!({
        "id": id.to_string(), "channel_id": channel.to_string(), "author": author, "content": content,
        "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "type": 0,
    })
}

async fn rest(State(sh): State<Arc<Shared>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let mut args: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    if !args.is_object() {
        args = json!({});
    }
    let mut g = sh.inner.lock().unwrap();
    let m = method.as_str().to_owned();
    if let Some((_, bytes)) = g.files.iter().find(|(p, _)| *p == path) {
        return bytes.clone().into_response();
    }
    if m == "GET" && (path == "/api/v10/gateway" || path == "/api/v10/gateway/bot") {
        g.rest_calls.push((m, path, args));
        return axum::Json(json!({
            "url": sh.ws_url, "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
        }))
        .into_response();
    }
    if m == "POST" && path.ends_with("/messages") {
        if g.rate_limits > 0 {
            g.rate_limits -= 1;
            g.rest_calls.push((m, path, args));
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "1"), ("x-ratelimit-scope", "user")],
                axum::Json(
                    json!({"message": "You are being rate limited.", "retry_after": 0.5,
                                  "global": false, "code": 0}),
                ),
            )
                .into_response();
        }
        let channel: u64 = path
            .split('/')
            .nth(4)
            .and_then(|c| c.parse().ok())
            .unwrap_or_default();
        g.next_id += 1;
        let id = g.next_id;
        let content = args["content"].as_str().unwrap_or_default().to_owned();
        let mut recorded = args;
        recorded["__ok"] = json!(true);
        g.rest_calls.push((m, path, recorded));
        return axum::Json(message(
            id,
            channel,
            user(BOT_ID, "nanobot", true),
            &content,
        ))
        .into_response();
    }
    g.rest_calls.push((m, path.clone(), args));
    if path.ends_with("/typing") {
        return StatusCode::NO_CONTENT.into_response();
    }
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"message": "404: Not Found", "code": 0})),
    )
        .into_response()
}

async fn connection(sh: Arc<Shared>, stream: tokio::net::TcpStream) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    sh.inner.lock().unwrap().connections += 1;
    let hello = json!({"op": 10, "d": {"heartbeat_interval": 41250}, "s": null, "t": null});
    if ws.send(Ws::text(hello.to_string())).await.is_err() {
        return;
    }
    let mut seq = 0u64;
    loop {
        tokio::select! {
            frame = ws.next() => {
                let Some(Ok(frame)) = frame else { break };
                let Ok(text) = frame.to_text() else { continue };
                let Ok(v) = serde_json::from_str::<Value>(text) else { continue };
                match v["op"].as_u64() {
                    Some(1) => {
                        let _ = ws.send(Ws::text(json!({"op": 11, "d": null}).to_string())).await;
                    }
                    Some(2) => {
                        sh.inner.lock().unwrap().gateway_frames.push(v);
                        seq += 1;
                        let ready = json!({"op": 0, "s": seq, "t": "READY", "d": {
                            "v": 10, "user": user(BOT_ID, "nanobot", true), "guilds": [],
                            "session_id": "fake-session", "resume_gateway_url": sh.ws_url,
                            "shard": [0, 1], "application": {"id": "999", "flags": 0},
                        }});
                        if ws.send(Ws::text(ready.to_string())).await.is_err() { break; }
                        sh.inner.lock().unwrap().conn = Some(tx.clone());
                    }
                    Some(6) => {
                        seq = v["d"]["seq"].as_u64().unwrap_or(seq);
                        sh.inner.lock().unwrap().gateway_frames.push(v);
                        seq += 1;
                        let resumed = json!({"op": 0, "s": seq, "t": "RESUMED", "d": {}});
                        if ws.send(Ws::text(resumed.to_string())).await.is_err() { break; }
                        sh.inner.lock().unwrap().conn = Some(tx.clone());
                    }
                    _ => sh.inner.lock().unwrap().gateway_frames.push(v),
                }
            }
            cmd = rx.recv() => match cmd {
                Some(Cmd::Dispatch(t, d)) => {
                    seq += 1;
                    let ev = json!({"op": 0, "s": seq, "t": t, "d": d});
                    if ws.send(Ws::text(ev.to_string())).await.is_err() { break; }
                }
                Some(Cmd::Close(code)) => {
                    sh.inner.lock().unwrap().conn = None;
                    let _ = ws.send(Ws::Close(Some(CloseFrame {
                        code: CloseCode::from(code),
                        reason: "fake close".into(),
                    }))).await;
                    // Let the client see the close before the TCP stream goes away.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    break;
                }
                None => break,
            },
        }
    }
}
