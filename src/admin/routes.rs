//! The admin API's routes and handlers.

use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::AdminState;
use crate::bus::{Inbound, split_key};
use crate::json::{Json, Object};
use crate::metrics;
use crate::session::key;

pub(super) fn app(state: AdminState) -> axum::Router {
    let protected = axum::Router::new()
        .route("/metrics", get(metrics_text))
        .route("/sessions", get(list_sessions))
        .route("/sessions/{key}", get(show_session))
        .route("/sessions/{key}/clear", post(clear_session))
        .route("/messages", post(post_message))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(protected)
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
        .with_state(state)
}

/// A JSON response.
fn json(status: StatusCode, body: Json) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_python(),
    )
        .into_response()
}

/// `{"error": message}` with `status`.
fn error(status: StatusCode, message: &str) -> Response {
    let mut o = Object::new();
    o.insert("error", Json::str(message));
    json(status, Json::Object(o))
}

async fn require_token(State(state): State<AdminState>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) if constant_time_eq(t.as_bytes(), state.token.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => error(StatusCode::UNAUTHORIZED, "wrong token"),
        None => {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "missing token: send Authorization: Bearer <admin.token>",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
    }
}

/// Compares without stopping at the first difference, so timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let channels = state.readiness.channels();
    let sessions = state.router.agent().workspace.join("sessions");
    let writable = tokio::task::spawn_blocking(move || store_writable(&sessions))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    let mut problems: Vec<String> = channels
        .iter()
        .filter(|(_, up)| !**up)
        .map(|(name, _)| format!("channel {name} is not connected"))
        .collect();
    if let Err(e) = &writable {
        problems.push(format!("session store is not writable: {e}"));
    }
    let mut o = Object::new();
    o.insert("ready", Json::Bool(problems.is_empty()));
    o.insert(
        "channels",
        Json::Object(
            channels
                .into_iter()
                .map(|(k, v)| (k, Json::Bool(v)))
                .collect(),
        ),
    );
    o.insert("store_writable", Json::Bool(writable.is_ok()));
    o.insert(
        "problems",
        Json::Array(problems.iter().map(|p| Json::str(p.as_str())).collect()),
    );
    let status = if problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, Json::Object(o))
}

/// Creates and removes a file in the sessions directory.
fn store_writable(dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let probe = dir.join(format!(".nanogate-ready-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| e.to_string())?;
    std::fs::remove_file(&probe).map_err(|e| e.to_string())
}

async fn metrics_text(State(state): State<AdminState>) -> Response {
    let agent = state.router.agent();
    let text = metrics::render(metrics::Gauges {
        lane_queue_depth: state.router.queue_depth(),
        lanes: state.router.lanes(),
        sessions_cached: agent.store.cached(),
    });
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

async fn list_sessions(State(state): State<AdminState>) -> Response {
    match state.router.agent().store.list().await {
        Ok(list) => json(
            StatusCode::OK,
            Json::Array(
                list.into_iter()
                    .map(|s| {
                        let mut o = Object::new();
                        o.insert("key", Json::str(s.key));
                        o.insert(
                            "file",
                            Json::str(
                                s.path
                                    .file_name()
                                    .map(|n| n.to_string_lossy().into_owned())
                                    .unwrap_or_default(),
                            ),
                        );
                        o.insert("messages", Json::from(s.messages));
                        o.insert("unconsolidated", Json::from(s.unconsolidated));
                        o.insert("created_at", Json::str(s.created_at));
                        o.insert("updated_at", Json::str(s.updated_at));
                        Json::Object(o)
                    })
                    .collect(),
            ),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// A key from a path, validated as the store would; the 400 answer when it is unusable.
fn invalid_key(k: &str) -> Option<Response> {
    key::file_name(k)
        .err()
        .map(|e| error(StatusCode::BAD_REQUEST, &e.to_string()))
}

async fn show_session(State(state): State<AdminState>, Path(k): Path<String>) -> Response {
    if let Some(r) = invalid_key(&k) {
        return r;
    }
    let agent = state.router.agent();
    let handle = match agent.store.get(&k).await {
        Ok(h) => h,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let s = handle.lock();
    if s.is_empty() && !s.path().exists() {
        return error(StatusCode::NOT_FOUND, &format!("no session {k:?}"));
    }
    let mut o = Object::new();
    o.insert("key", Json::str(s.key()));
    o.insert("messages", Json::from(s.len()));
    o.insert("last_consolidated", Json::from(s.last_consolidated()));
    o.insert("created_at", Json::str(s.created_at()));
    o.insert("updated_at", Json::str(s.updated_at()));
    o.insert(
        "history",
        Json::Array(s.history(agent.config.agent.memory_window)),
    );
    json(StatusCode::OK, Json::Object(o))
}

async fn clear_session(State(state): State<AdminState>, Path(k): Path<String>) -> Response {
    if let Some(r) = invalid_key(&k) {
        return r;
    }
    let agent = state.router.agent();
    let exists = match agent.store.get(&k).await {
        Ok(h) => {
            let s = h.lock();
            !s.is_empty() || s.path().exists()
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if !exists {
        return error(StatusCode::NOT_FOUND, &format!("no session {k:?}"));
    }
    // Through the lane, as a `/new` from the chat would be: a running turn finishes first.
    let (channel, chat_id) = split_key(&k).unwrap_or(("api", k.as_str()));
    let inbound = Inbound {
        channel: channel.to_owned(),
        chat_id: chat_id.to_owned(),
        sender: "admin".into(),
        text: "/new".into(),
        media: Vec::new(),
        session_key: Some(k.clone()),
    };
    match state.router.ask(inbound).await {
        Some(r) if !r.error => {
            let mut o = Object::new();
            o.insert("key", Json::str(k));
            o.insert("cleared", Json::Bool(true));
            o.insert("message", Json::str(r.text));
            json(StatusCode::OK, Json::Object(o))
        }
        Some(r) => error(StatusCode::INTERNAL_SERVER_ERROR, &r.text),
        None => error(StatusCode::CONFLICT, "stopped before it finished"),
    }
}

async fn post_message(State(state): State<AdminState>, body: String) -> Response {
    let parsed = match Json::parse(&body) {
        Ok(Json::Object(o)) => o,
        Ok(_) => return error(StatusCode::BAD_REQUEST, "the body must be a JSON object"),
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("the body is not JSON: {e}"),
            );
        }
    };
    let field = |name: &str| -> Result<String, String> {
        match parsed.get(name) {
            Some(Json::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(Json::String(_)) => Err(format!("{name:?} is empty")),
            Some(_) => Err(format!("{name:?} must be a string")),
            None => Err(format!("{name:?} is missing")),
        }
    };
    let (id, text) = match (field("session"), field("text")) {
        (Ok(id), Ok(text)) => (id, text),
        (Err(e), _) | (_, Err(e)) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let k = format!("api:{id}");
    if let Some(r) = invalid_key(&k) {
        return r;
    }
    let inbound = Inbound {
        channel: "api".into(),
        chat_id: id,
        sender: "admin".into(),
        text,
        media: Vec::new(),
        session_key: Some(k.clone()),
    };
    let mut o = Object::new();
    o.insert("session", Json::str(k));
    match state.router.ask(inbound).await {
        Some(r) => {
            o.insert("reply", Json::str(r.text));
            o.insert("error", Json::Bool(r.error));
            json(StatusCode::OK, Json::Object(o))
        }
        None => {
            o.insert("reply", Json::Null);
            o.insert("stopped", Json::Bool(true));
            json(StatusCode::CONFLICT, Json::Object(o))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
