//! The request body, written directly as text so messages from session files go out byte for byte (key order,
//! number text, non-ASCII characters unescaped) and a long history is not copied into a second tree.

use super::ChatRequest;
use crate::json::Json;

/// `{"model", "messages", "max_tokens", "temperature", "tools"?, "tool_choice"?}` as compact JSON.
///
/// `tools` is left out when absent or empty (OpenAI rejects `"tools": []`), and `tool_choice` with it, since a
/// tool choice without tools is rejected too. A non-finite temperature (which JSON cannot carry) is left out,
/// so the server's default applies.
pub(crate) fn body(
    model: &str,
    request: &ChatRequest,
    default_max_tokens: u32,
    default_temperature: f64,
) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("{\"model\": ");
    Json::str(model).write_python(&mut out);
    out.push_str(", \"messages\": [");
    for (i, message) in request.messages.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        message.write_python(&mut out);
    }
    out.push_str("], \"max_tokens\": ");
    Json::from(u64::from(request.max_tokens.unwrap_or(default_max_tokens))).write_python(&mut out);
    let temperature = request.temperature.unwrap_or(default_temperature);
    if temperature.is_finite() {
        out.push_str(", \"temperature\": ");
        Json::from(temperature).write_python(&mut out);
    }
    let tools = request
        .tools
        .as_ref()
        .filter(|t| !matches!(t, Json::Array(a) if a.is_empty()) && !matches!(t, Json::Null));
    if let Some(tools) = tools {
        out.push_str(", \"tools\": ");
        tools.write_python(&mut out);
        if let Some(choice) = &request.tool_choice {
            out.push_str(", \"tool_choice\": ");
            choice.write_python(&mut out);
        }
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: &[&str], tools: Option<&str>) -> ChatRequest {
        ChatRequest {
            messages: messages.iter().map(|m| Json::parse(m).unwrap()).collect(),
            tools: tools.map(|t| Json::parse(t).unwrap()),
            tool_choice: Some(Json::str("auto")),
            max_tokens: None,
            temperature: None,
        }
    }

    #[test]
    fn shape_and_bytes() {
        let r = request(
            &[r#"{"role": "user", "content": "é 😀 \"q\"", "x": 1.10, "y": 1e-05}"#],
            Some(r#"[{"type": "function"}]"#),
        );
        let text = body("m", &r, 100, 0.7);
        assert_eq!(
            text,
            r#"{"model": "m", "messages": [{"role": "user", "content": "é 😀 \"q\"", "x": 1.10, "y": 1e-05}], "max_tokens": 100, "temperature": 0.7, "tools": [{"type": "function"}], "tool_choice": "auto"}"#
        );
        assert!(Json::parse(&text).is_ok());
    }

    #[test]
    fn empty_tools_and_overrides() {
        let mut r = request(&[], Some("[]"));
        r.max_tokens = Some(5);
        r.temperature = Some(f64::NAN);
        assert_eq!(
            body("m", &r, 100, 0.7),
            r#"{"model": "m", "messages": [], "max_tokens": 5}"#
        );
    }
}
