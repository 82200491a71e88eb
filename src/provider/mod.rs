//! The model: a client for OpenAI-compatible chat-completions APIs (OpenAI, OpenRouter, vLLM, llama.cpp,
//! Ollama, …).
//!
//! - [`Provider::chat`] sends one non-streaming request and reads `choices[0]`;
//! - `request` writes the body as text, so messages from session files go out byte for byte;
//! - `response` reads the answer leniently (servers differ in the details);
//! - `retry` decides how long to wait after a 429, a 5xx or a network failure;
//! - `error` turns failures into [`ProviderError`]s a person can act on.
//!
//! The API key never appears in an error, a log line or `Debug` output.

mod error;
mod request;
mod response;
pub mod retry;

use std::time::Duration;

use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT,
};
use tracing::{debug, warn};

use error::ErrorContext;
pub use error::ProviderError;

use crate::config::ProviderConfig;
use crate::json::Json;

/// One request to the model.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The conversation, each message sent exactly as given.
    pub messages: Vec<Json>,
    /// The tools array (OpenAI function-tool schemas); left out of the request when empty.
    pub tools: Option<Json>,
    /// `tool_choice` (`"auto"`, `"none"`, `"required"` or an object); sent only together with tools.
    pub tool_choice: Option<Json>,
    /// Overrides `provider.max_tokens`.
    pub max_tokens: Option<u32>,
    /// Overrides `provider.temperature`.
    pub temperature: Option<f64>,
}

/// The model's answer (`choices[0]`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    /// The text, if any (parts of a multi-part content are joined).
    pub content: Option<String>,
    /// Tool calls to run, in the order the model gave them.
    pub tool_calls: Vec<ToolCall>,
    /// The model's reasoning (`reasoning_content`, or `reasoning`), if it sent any.
    pub reasoning_content: Option<String>,
    /// Why generation stopped (`stop`, `tool_calls`, `length`, …).
    pub finish_reason: Option<String>,
    /// Token counts, when the server reports them.
    pub usage: Option<Usage>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call id (generated as `call_<n>` when the server sent none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as raw JSON text, exactly as sent; may be unparsable, which the agent reports to the model.
    pub arguments: String,
}

/// Token counts of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens in the answer.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

/// A chat-completions client for one configured endpoint and model. Cheap to share behind an `Arc`; the HTTP
/// connection pool is reused across requests.
pub struct Provider {
    client: reqwest::Client,
    /// `{api_base}/chat/completions`, as called.
    endpoint: String,
    /// The API base for messages: trailing `/` trimmed, any `user:password@` removed.
    display_base: String,
    /// `{display_base}/chat/completions`.
    display_endpoint: String,
    model: String,
    max_tokens: u32,
    temperature: f64,
    timeout_secs: u64,
    max_retries: u32,
    /// Kept only to scrub it from server messages that echo it.
    key: Option<String>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("api_base", &self.display_base)
            .field("model", &self.model)
            .field("has_key", &self.key.is_some())
            .field("timeout_secs", &self.timeout_secs)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

/// A failed attempt: the error, and how long the server asked us to wait before the next one.
struct Failure {
    error: ProviderError,
    retry_after: Option<Duration>,
}

impl Provider {
    /// Resolves the API key (`api_key`, or the variable `api_key_env` names) and builds the HTTP client: rustls,
    /// `request_timeout_secs` per attempt (0 means no limit), `User-Agent: nanogate/<version>`,
    /// `Authorization: Bearer <key>` when there is a key, and `extra_headers` (which win over the defaults).
    pub fn new(config: &ProviderConfig) -> Result<Provider, ProviderError> {
        let key = config.resolve_api_key()?;
        let base = config.api_base.trim().trim_end_matches('/');
        let setting = |key: &str, message: String| ProviderError::Setting {
            key: key.to_owned(),
            message,
        };
        let url = reqwest::Url::parse(base).map_err(|e| {
            setting(
                "api_base",
                format!("{e} (expected e.g. {})", crate::config::DEFAULT_API_BASE),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(setting(
                "api_base",
                format!("the scheme must be http or https, not {}", url.scheme()),
            ));
        }
        let display_base = if url.username().is_empty() && url.password().is_none() {
            base.to_owned()
        } else {
            let mut clean = url.clone();
            // Cannot fail for http(s) URLs, which always have a host.
            let _ = clean.set_username("");
            let _ = clean.set_password(None);
            clean.as_str().trim_end_matches('/').to_owned()
        };

        let mut headers = HeaderMap::new();
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("nanogate/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(k) = &key {
            let mut value = HeaderValue::from_str(&format!("Bearer {k}")).map_err(|_| {
                setting(
                    "api_key",
                    "contains characters that cannot be sent in an HTTP header".into(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &config.extra_headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                setting(
                    "extra_headers",
                    format!("`{name}` is not a valid header name"),
                )
            })?;
            // The value is not quoted: extra headers often carry credentials (`api-key`, `x-api-key`).
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                setting(
                    "extra_headers",
                    format!("the value of `{name}` is not a valid header value"),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }

        let mut builder = reqwest::Client::builder().default_headers(headers);
        if config.request_timeout_secs > 0 {
            builder = builder.timeout(Duration::from_secs(config.request_timeout_secs));
        }
        if is_loopback(&url) {
            // A local server (llama.cpp, Ollama, vLLM) is never reached through an HTTP(S)_PROXY.
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|e| setting("api_base", format!("cannot build an HTTP client: {e}")))?;
        Ok(Provider {
            client,
            endpoint: format!("{base}/chat/completions"),
            display_endpoint: format!("{display_base}/chat/completions"),
            display_base,
            model: config.model.clone(),
            max_tokens: config.max_tokens,
            temperature: config.temperature,
            timeout_secs: config.request_timeout_secs,
            max_retries: config.max_retries,
            key,
        })
    }

    /// The configured model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The API base, without credentials, for messages and `/status`.
    pub fn api_base(&self) -> &str {
        &self.display_base
    }

    /// Whether the API answers: a `GET {api_base}/models` with the configured key, within `timeout`. `Ok` with
    /// what it said when any HTTP answer came back (a rejected key is still an answer), `Err` with the reason
    /// when nothing did. Used by `nanogate status`; it costs no tokens.
    pub async fn check(&self, timeout: Duration) -> Result<String, String> {
        let url = format!(
            "{}/models",
            self.endpoint.trim_end_matches("/chat/completions")
        );
        let sent = self.client.get(&url).timeout(timeout).send().await;
        match sent {
            Ok(r) => Ok(match r.status().as_u16() {
                200..=299 => "answers".to_owned(),
                401 | 403 => format!(
                    "answers, but rejects the API key (HTTP {})",
                    r.status().as_u16()
                ),
                code => format!("answers (HTTP {code} for /models)"),
            }),
            Err(e) if e.is_timeout() => Err(format!("no answer within {} s", timeout.as_secs())),
            Err(e) if e.is_connect() => Err(format!("cannot connect to {}", self.display_base)),
            Err(_) => Err(format!("cannot reach {}", self.display_base)),
        }
    }

    /// Sends `request` and returns `choices[0]`. A 429, a 5xx, a timeout or a network failure is retried up to
    /// `max_retries` times, waiting as `Retry-After` asks (up to 60 s) or with exponential backoff and jitter.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let started = std::time::Instant::now();
        let result = self.chat_with_retries(request).await;
        crate::metrics::model_request(
            started.elapsed(),
            result.as_ref().err().map(ProviderError::kind),
        );
        result
    }

    async fn chat_with_retries(
        &self,
        request: &ChatRequest,
    ) -> Result<ChatResponse, ProviderError> {
        let body = request::body(&self.model, request, self.max_tokens, self.temperature);
        debug!(model = %self.model, messages = request.messages.len(), bytes = body.len(), "chat request");
        let attempts = self.max_retries.saturating_add(1);
        let mut attempt = 1;
        loop {
            let failure = match self.attempt(body.clone()).await {
                Ok(response) => {
                    if let Some(u) = &response.usage {
                        debug!(
                            prompt_tokens = u.prompt_tokens,
                            completion_tokens = u.completion_tokens,
                            "chat answer"
                        );
                    }
                    return Ok(response);
                }
                Err(failure) => failure,
            };
            if !failure.error.is_retryable() {
                return Err(failure.error);
            }
            if attempt >= attempts {
                return Err(if attempt == 1 {
                    failure.error
                } else {
                    ProviderError::Unavailable {
                        api_base: self.display_base.clone(),
                        attempts: attempt,
                        last: Box::new(failure.error),
                    }
                });
            }
            let wait = failure
                .retry_after
                .unwrap_or_else(|| retry::backoff(attempt));
            warn!(
                api_base = %self.display_base,
                status = failure.error.status().map_or_else(|| "none".to_owned(), |s| s.to_string()),
                attempt,
                of = attempts,
                wait_ms = wait.as_millis() as u64,
                "model request failed, retrying: {}",
                failure.error
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// One HTTP round trip.
    async fn attempt(&self, body: String) -> Result<ChatResponse, Failure> {
        let ctx = self.error_context();
        let transport = |e: reqwest::Error| Failure {
            error: ctx.transport_error(&e, self.timeout_secs),
            retry_after: None,
        };
        let response = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry::parse_retry_after(v, chrono::Utc::now()));
        let text = response.text().await.map_err(transport)?;
        if !(200..300).contains(&status) {
            return Err(Failure {
                error: ctx.status_error(status, &text),
                retry_after,
            });
        }
        response::parse(&text, &ctx).map_err(|error| Failure {
            // A 200 carrying an error object may still be retryable (see `response::error_in_success`).
            error,
            retry_after: None,
        })
    }

    fn error_context(&self) -> ErrorContext<'_> {
        ErrorContext {
            api_base: &self.display_base,
            model: &self.model,
            url: &self.display_endpoint,
            key: self.key.as_deref(),
        }
    }
}

/// Whether the URL names this machine.
fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
