//! What can go wrong talking to the model, in words a person can act on, and which failures are worth retrying.

use crate::config::ConfigError;
use crate::json::Json;

/// Longest server message quoted in an error; HTML error pages can be huge.
const MAX_MESSAGE_CHARS: usize = 300;

/// A failed chat request. Never contains the API key: server messages are redacted before they are stored.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The API key could not be resolved (`api_key_env` names an unset variable).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A `[provider]` setting cannot be used (bad URL, bad header).
    #[error("invalid provider.{key}: {message}")]
    Setting {
        /// The setting, e.g. `extra_headers`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// HTTP 401 or 403.
    #[error("the API key was rejected by {api_base} (HTTP {status}): {message}")]
    Auth {
        /// The configured API base.
        api_base: String,
        /// 401 or 403.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// HTTP 404: the model, or the whole route, is unknown to the server.
    #[error("model {model} not found at {api_base} (HTTP 404): {message}{}", route_hint(.url, .route_unknown))]
    ModelNotFound {
        /// The configured model.
        model: String,
        /// The configured API base.
        api_base: String,
        /// The URL that was called.
        url: String,
        /// Whether the server did not mention the model, so the URL itself is probably wrong.
        route_unknown: bool,
        /// The server's message.
        message: String,
    },
    /// The conversation does not fit the model's context window; the caller can shorten it and try again.
    #[error("the conversation is too long for the model's context window: {0}")]
    ContextLength(String),
    /// HTTP 429: rate limited (after retries, or with retries disabled).
    #[error("{api_base} is rate limiting requests (HTTP 429): {message}")]
    RateLimited {
        /// The configured API base.
        api_base: String,
        /// The server's message.
        message: String,
    },
    /// Any other 4xx: the server will not accept this request as it is.
    #[error("{api_base} refused the request (HTTP {status}): {message}")]
    Refused {
        /// The configured API base.
        api_base: String,
        /// The status code.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// A 5xx: the server failed.
    #[error("{api_base} failed (HTTP {status}): {message}")]
    Server {
        /// The configured API base.
        api_base: String,
        /// The status code.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The request timed out (`request_timeout_secs`).
    #[error("no answer from {api_base} within {secs} s")]
    Timeout {
        /// The configured API base.
        api_base: String,
        /// The configured timeout.
        secs: u64,
    },
    /// No connection could be made.
    #[error("cannot reach {api_base}: {cause}; is the server running?")]
    Connect {
        /// The configured API base.
        api_base: String,
        /// The operating system's or TLS library's reason.
        cause: String,
    },
    /// The connection broke while sending the request or reading the answer.
    #[error("the connection to {api_base} failed: {cause}")]
    Transport {
        /// The configured API base.
        api_base: String,
        /// The underlying reason.
        cause: String,
    },
    /// The answer is not the JSON an OpenAI-compatible server sends.
    #[error("invalid response from {api_base}: {detail}")]
    InvalidResponse {
        /// The configured API base.
        api_base: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Every attempt failed with a transient error.
    #[error("{api_base} is unavailable after {attempts} attempts: {last}")]
    Unavailable {
        /// The configured API base.
        api_base: String,
        /// Attempts made (the first one plus retries).
        attempts: u32,
        /// The last attempt's error.
        last: Box<ProviderError>,
    },
}

/// The tail of a 404 message when the URL itself looks wrong.
fn route_hint(url: &str, route_unknown: &bool) -> String {
    if *route_unknown {
        format!(" (called POST {url}; is provider.api_base right?)")
    } else {
        String::new()
    }
}

impl ProviderError {
    /// Whether the failure is transient (rate limit, server error, timeout, network), so the same request may
    /// succeed later. `chat` already retries these; an [`Unavailable`](Self::Unavailable) error is transient
    /// too, only the retries ran out.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::RateLimited { .. }
            | ProviderError::Server { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::Connect { .. }
            | ProviderError::Transport { .. }
            | ProviderError::Unavailable { .. } => true,
            ProviderError::Refused { status, .. } => *status == 408,
            _ => false,
        }
    }

    /// The HTTP status behind the error, if the server answered (for an exhausted retry: the last one's).
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Auth { status, .. }
            | ProviderError::Refused { status, .. }
            | ProviderError::Server { status, .. } => Some(*status),
            ProviderError::ModelNotFound { .. } => Some(404),
            ProviderError::RateLimited { .. } => Some(429),
            ProviderError::Unavailable { last, .. } => last.status(),
            _ => None,
        }
    }

    /// A short name of the failure kind, for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Config(_) | ProviderError::Setting { .. } => "config",
            ProviderError::Auth { .. } => "auth",
            ProviderError::ModelNotFound { .. } => "model_not_found",
            ProviderError::ContextLength(_) => "context_length",
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Refused { .. } => "refused",
            ProviderError::Server { .. } => "server",
            ProviderError::Timeout { .. } => "timeout",
            ProviderError::Connect { .. } => "connect",
            ProviderError::Transport { .. } => "transport",
            ProviderError::InvalidResponse { .. } => "invalid_response",
            ProviderError::Unavailable { .. } => "unavailable",
        }
    }

    /// One line for a chat reply: what failed, without URLs, server messages or secrets (those go to the log).
    pub fn short(&self) -> String {
        match self {
            ProviderError::Config(_) | ProviderError::Setting { .. } => {
                "the model provider is not configured correctly (see the log)".into()
            }
            ProviderError::Auth { status, .. } => {
                format!("the model provider rejected the API key (HTTP {status})")
            }
            ProviderError::ModelNotFound { model, .. } => {
                format!("the model {model} was not found (HTTP 404)")
            }
            ProviderError::ContextLength(_) => {
                "the conversation is too long for the model's context window".into()
            }
            ProviderError::RateLimited { .. } => {
                "the model provider is rate limiting requests (HTTP 429)".into()
            }
            ProviderError::Refused { status, .. } => {
                format!("the model provider refused the request (HTTP {status})")
            }
            ProviderError::Server { status, .. } => {
                format!("the model provider failed (HTTP {status})")
            }
            ProviderError::Timeout { secs, .. } => {
                format!("the model did not answer within {secs} s")
            }
            ProviderError::Connect { .. } => "cannot reach the model provider".into(),
            ProviderError::Transport { .. } => "the connection to the model provider broke".into(),
            ProviderError::InvalidResponse { .. } => {
                "the model provider sent an invalid response".into()
            }
            ProviderError::Unavailable { attempts, last, .. } => {
                format!("{} (gave up after {attempts} attempts)", last.short())
            }
        }
    }
}

/// Facts about the provider that error messages need.
pub(crate) struct ErrorContext<'a> {
    /// The API base as shown to people (no credentials).
    pub api_base: &'a str,
    /// The model.
    pub model: &'a str,
    /// The endpoint URL as shown to people.
    pub url: &'a str,
    /// The API key, to scrub from server messages.
    pub key: Option<&'a str>,
}

impl ErrorContext<'_> {
    /// The error for a non-success HTTP status with this body.
    pub fn status_error(&self, status: u16, body: &str) -> ProviderError {
        let message = self.server_message(status, body);
        let api_base = self.api_base.to_owned();
        match status {
            401 | 403 => ProviderError::Auth {
                api_base,
                status,
                message,
            },
            404 => ProviderError::ModelNotFound {
                model: self.model.to_owned(),
                api_base,
                url: self.url.to_owned(),
                route_unknown: !mentions_model(&message, self.model),
                message,
            },
            // OpenAI answers 429 when the account is out of credit; waiting will not help.
            429 if body.contains("insufficient_quota") => ProviderError::Refused {
                api_base,
                status,
                message,
            },
            429 => ProviderError::RateLimited { api_base, message },
            400..=499 if is_context_length(body) => ProviderError::ContextLength(message),
            500..=599 => ProviderError::Server {
                api_base,
                status,
                message,
            },
            _ => ProviderError::Refused {
                api_base,
                status,
                message,
            },
        }
    }

    /// An answer that cannot be used.
    pub fn invalid(&self, detail: impl Into<String>) -> ProviderError {
        ProviderError::InvalidResponse {
            api_base: self.api_base.to_owned(),
            detail: self.redact(&detail.into()),
        }
    }

    /// A transport-level failure from reqwest.
    pub fn transport_error(&self, e: &reqwest::Error, timeout_secs: u64) -> ProviderError {
        let api_base = self.api_base.to_owned();
        let cause = self.redact(&root_cause(e));
        // A connect timeout is both; "cannot reach" is the more useful reading.
        if e.is_connect() {
            ProviderError::Connect { api_base, cause }
        } else if e.is_timeout() {
            ProviderError::Timeout {
                api_base,
                secs: timeout_secs,
            }
        } else {
            ProviderError::Transport { api_base, cause }
        }
    }

    /// The server's own explanation: `error.message` (OpenAI), `error` as a string, `message` or `detail`
    /// (FastAPI), else the body's first characters, else the status's name. One line, key redacted.
    pub fn server_message(&self, status: u16, body: &str) -> String {
        let from_json = Json::parse(body).ok().and_then(|j| {
            let o = j.as_object()?;
            let text = match o.get("error") {
                Some(Json::Object(e)) => e.get("message").and_then(Json::as_str),
                Some(Json::String(s)) => Some(s.as_str()),
                _ => None,
            };
            text.or_else(|| o.get("message").and_then(Json::as_str))
                .or_else(|| o.get("detail").and_then(Json::as_str))
                .map(str::to_owned)
        });
        let text = from_json.unwrap_or_else(|| body.to_owned());
        let text = one_line(&text);
        if text.is_empty() {
            return reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("no message")
                .to_owned();
        }
        self.redact(&text)
    }

    /// Replaces the API key, should a server echo it, with `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        match self.key {
            Some(k) if !k.is_empty() && text.contains(k) => text.replace(k, "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

/// Whether a 4xx body says the prompt does not fit the context window (OpenAI, vLLM, llama.cpp, OpenRouter).
fn is_context_length(body: &str) -> bool {
    let lower = body.to_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "too many tokens",
        "exceed_context_size",
        "exceeds the available context size",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

/// Whether a 404 message is about the model (rather than an unknown route).
fn mentions_model(message: &str, model: &str) -> bool {
    let lower = message.to_lowercase();
    (!model.is_empty() && lower.contains(&model.to_lowercase())) || lower.contains("model")
}

/// Whitespace runs collapsed to one space, cut to [`MAX_MESSAGE_CHARS`] characters.
fn one_line(text: &str) -> String {
    let mut out = String::new();
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    match out.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &out[..cut]),
        None => out,
    }
}

/// The innermost cause of an error chain ("Connection refused (os error 111)"), without reqwest's outer text,
/// which repeats the URL.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ErrorContext<'static> {
        ErrorContext {
            api_base: "http://h/v1",
            model: "m1",
            url: "http://h/v1/chat/completions",
            key: Some("sk-secret"),
        }
    }

    #[test]
    fn messages_are_extracted() {
        let c = ctx();
        let e = c.status_error(401, r#"{"error": {"message": "bad key sk-secret"}}"#);
        assert_eq!(
            e.to_string(),
            "the API key was rejected by http://h/v1 (HTTP 401): bad key [redacted]"
        );
        let e = c.status_error(400, r#"{"detail": "nope"}"#);
        assert_eq!(
            e.to_string(),
            "http://h/v1 refused the request (HTTP 400): nope"
        );
        let e = c.status_error(502, "");
        assert_eq!(e.to_string(), "http://h/v1 failed (HTTP 502): Bad Gateway");
        let e = c.status_error(500, &format!("<html>\n{}</html>", "x".repeat(1000)));
        assert!(e.to_string().len() < 400, "{e}");
    }

    #[test]
    fn not_found_names_model_or_url() {
        let c = ctx();
        let e = c.status_error(
            404,
            r#"{"error": {"message": "The model `m1` does not exist"}}"#,
        );
        assert!(!e.to_string().contains("called POST"), "{e}");
        let e = c.status_error(404, "404 page not found");
        assert_eq!(
            e.to_string(),
            "model m1 not found at http://h/v1 (HTTP 404): 404 page not found \
             (called POST http://h/v1/chat/completions; is provider.api_base right?)"
        );
    }

    #[test]
    fn quota_is_not_retried() {
        let e = ctx().status_error(
            429,
            r#"{"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}"#,
        );
        assert!(!e.is_retryable(), "{e:?}");
        assert_eq!(e.status(), Some(429));
        let e = ctx().status_error(429, r#"{"error": {"message": "slow down"}}"#);
        assert!(e.is_retryable(), "{e:?}");
    }

    #[test]
    fn context_length() {
        let e = ctx().status_error(
            400,
            r#"{"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}}"#,
        );
        assert!(matches!(e, ProviderError::ContextLength(ref m) if m.contains("8192")));
        assert!(!e.is_retryable());
    }
}
