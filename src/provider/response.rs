//! Reading a chat-completions answer, leniently: servers that call themselves OpenAI-compatible differ in the
//! details (content as a list of parts, arguments as an object, `reasoning` instead of `reasoning_content`,
//! tool calls without ids).

use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{ErrorContext, ProviderError};
use super::{ChatResponse, ToolCall, Usage};
use crate::json::{Json, Object};

/// Characters of an unusable body quoted in an error.
const PREVIEW_CHARS: usize = 200;

/// Parses the body of a successful (2xx) answer.
pub(crate) fn parse(body: &str, ctx: &ErrorContext<'_>) -> Result<ChatResponse, ProviderError> {
    let json = Json::parse(body)
        .map_err(|e| ctx.invalid(format!("the body is not JSON ({e}): {}", preview(body))))?;
    let Some(root) = json.as_object() else {
        return Err(ctx.invalid(format!("expected a JSON object, got {}", preview(body))));
    };
    let Some(choice) = root
        .get("choices")
        .and_then(Json::as_array)
        .and_then(<[Json]>::first)
    else {
        return Err(match root.get("error") {
            Some(error) => error_in_success(error, body, ctx),
            None => ctx.invalid(format!("the answer has no choices: {}", preview(body))),
        });
    };
    let Some(message) = choice
        .as_object()
        .and_then(|c| c.get("message"))
        .and_then(Json::as_object)
    else {
        return Err(ctx.invalid("choices[0] has no message object"));
    };
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| message.get(k).and_then(Json::as_str))
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    Ok(ChatResponse {
        content: content(message, ctx)?,
        tool_calls: tool_calls(message, ctx)?,
        reasoning_content: reasoning,
        finish_reason: choice
            .as_object()
            .and_then(|c| c.get("finish_reason"))
            .and_then(Json::as_str)
            .map(str::to_owned),
        usage: root.get("usage").and_then(Json::as_object).map(usage),
    })
}

/// A 200 answer that carries `{"error": …}` instead of choices, as some gateways (OpenRouter) send when the
/// upstream model fails. A numeric `error.code` is treated as the HTTP status, so a 502 there is retried.
fn error_in_success(error: &Json, body: &str, ctx: &ErrorContext<'_>) -> ProviderError {
    let code = error
        .as_object()
        .and_then(|e| e.get("code"))
        .and_then(Json::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c));
    match code {
        Some(status) => ctx.status_error(status, body),
        None => ctx.invalid(format!(
            "the server reported an error: {}",
            ctx.server_message(200, body)
        )),
    }
}

/// `message.content`: a string, null, or a list of parts whose `text` is joined.
fn content(message: &Object, ctx: &ErrorContext<'_>) -> Result<Option<String>, ProviderError> {
    match message.get("content") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(Json::Array(parts)) => {
            // Only text parts: others ("thinking", images) are not part of the answer.
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(Json::as_object)
                .filter(|p| {
                    p.get("type")
                        .and_then(Json::as_str)
                        .is_none_or(|t| t == "text")
                })
                .filter_map(|p| p.get("text").and_then(Json::as_str))
                .collect();
            Ok((!texts.is_empty()).then(|| texts.concat()))
        }
        Some(other) => Err(ctx.invalid(format!(
            "message.content is neither text nor a list of parts: {}",
            preview(&other.to_python())
        ))),
    }
}

/// `message.tool_calls`, in order.
fn tool_calls(message: &Object, ctx: &ErrorContext<'_>) -> Result<Vec<ToolCall>, ProviderError> {
    let calls = match message.get("tool_calls") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(calls)) => calls,
        Some(_) => return Err(ctx.invalid("message.tool_calls is not a list")),
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let function = call
                .as_object()
                .and_then(|c| c.get("function"))
                .and_then(Json::as_object)
                .ok_or_else(|| ctx.invalid(format!("tool_calls[{i}] has no function object")))?;
            let name = function
                .get("name")
                .and_then(Json::as_str)
                .ok_or_else(|| ctx.invalid(format!("tool_calls[{i}] has no function name")))?;
            let id = call
                .as_object()
                .and_then(|c| c.get("id"))
                .and_then(Json::as_str)
                .filter(|id| !id.is_empty())
                .map_or_else(generated_id, str::to_owned);
            Ok(ToolCall {
                id,
                name: name.to_owned(),
                arguments: arguments(function.get("arguments")),
            })
        })
        .collect()
}

/// The arguments as text: a string exactly as sent (even when it is not valid JSON, so the agent can tell the
/// model), an object re-encoded, nothing as `{}`.
fn arguments(value: Option<&Json>) -> String {
    match value {
        Some(Json::String(s)) => s.clone(),
        None | Some(Json::Null) => "{}".to_owned(),
        Some(other) => other.to_python(),
    }
}

/// `call_<n>` for servers that send tool calls without ids; unique within this process.
fn generated_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("call_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Token counts; missing numbers are 0, a missing total is the sum.
fn usage(u: &Object) -> Usage {
    let count = |k: &str| {
        u.get(k)
            .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64)))
    };
    let prompt_tokens = count("prompt_tokens").unwrap_or(0);
    let completion_tokens = count("completion_tokens").unwrap_or(0);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: count("total_tokens").unwrap_or(prompt_tokens + completion_tokens),
    }
}

/// The start of a body, on one line, for an error message.
fn preview(body: &str) -> String {
    if body.trim().is_empty() {
        return "(empty body)".to_owned();
    }
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ErrorContext<'static> {
        ErrorContext {
            api_base: "http://h/v1",
            model: "m",
            url: "http://h/v1/chat/completions",
            key: None,
        }
    }

    #[test]
    fn content_parts_are_joined() {
        let r = parse(
            r#"{"choices": [{"message": {"content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "a"}, {"text": "b"}]}}]}"#,
            &ctx(),
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("ab"));
        assert_eq!(r.usage, None);
        assert_eq!(r.finish_reason, None);
    }

    #[test]
    fn missing_ids_and_arguments() {
        let r = parse(
            r#"{"choices": [{"message": {"content": null, "tool_calls": [{"function": {"name": "a"}}, {"id": "", "function": {"name": "b", "arguments": null}}]}}]}"#,
            &ctx(),
        )
        .unwrap();
        assert_eq!(r.content, None);
        assert!(r.tool_calls[0].id.starts_with("call_"));
        assert_ne!(r.tool_calls[0].id, r.tool_calls[1].id);
        assert_eq!(r.tool_calls[1].arguments, "{}");
    }

    #[test]
    fn errors_in_success_bodies() {
        let e = parse(
            r#"{"error": {"message": "upstream down", "code": 502}}"#,
            &ctx(),
        )
        .unwrap_err();
        assert!(
            matches!(e, ProviderError::Server { status: 502, .. }),
            "{e}"
        );
        assert!(e.is_retryable());
        let e = parse(r#"{"error": {"message": "odd"}}"#, &ctx()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid response from http://h/v1: the server reported an error: odd"
        );
        let e = parse(r#"{"choices": []}"#, &ctx()).unwrap_err();
        assert!(e.to_string().contains("no choices"), "{e}");
        let e = parse("", &ctx()).unwrap_err();
        assert!(e.to_string().contains("(empty body)"), "{e}");
        let e = parse(
            r#"{"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]}"#,
            &ctx(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("tool_calls[0] has no function"),
            "{e}"
        );
    }

    #[test]
    fn usage_total_defaults_to_sum() {
        let r = parse(
            r#"{"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}"#,
            &ctx(),
        )
        .unwrap();
        assert_eq!(
            r.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 4,
                total_tokens: 7
            })
        );
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }
}
