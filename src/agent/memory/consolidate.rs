//! The two model calls of a consolidation: `save_memory` (nanobot's classic memory update) and the structured
//! summary.

use tracing::{debug, warn};

use super::summary;
use super::transcript;
use crate::json::{Json, Object};
use crate::provider::{ChatRequest, Provider, ProviderError};

/// Why a consolidation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ConsolidationError {
    /// The model could not be reached or refused the request.
    #[error("the model failed: {0}")]
    Model(#[from] ProviderError),
    /// The model answered without calling `save_memory`.
    #[error("the model did not call save_memory")]
    NoToolCall,
    /// `save_memory` was called with unusable arguments.
    #[error("save_memory was called with bad arguments: {0}")]
    BadArguments(String),
    /// The model returned an empty summary.
    #[error("the model returned an empty summary")]
    EmptySummary,
    /// A memory file could not be read or written.
    #[error("memory file error: {0}")]
    Io(#[from] std::io::Error),
    /// The session could not be read or saved.
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
}

/// What `save_memory` was called with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveMemory {
    /// The paragraph appended to HISTORY.md.
    pub history_entry: String,
    /// The whole new MEMORY.md.
    pub memory_update: String,
}

/// The `save_memory` tool, as nanobot defines it.
fn save_memory_tool() -> Json {
    let prop = |description: &str| {
        let mut o = Object::new();
        o.insert("type", Json::str("string"));
        o.insert("description", Json::str(description));
        Json::Object(o)
    };
    let mut properties = Object::new();
    properties.insert(
        "history_entry",
        prop(
            "A paragraph (2-5 sentences) summarizing key events/decisions/topics. Start with [YYYY-MM-DD HH:MM]. \
             Include detail useful for grep search.",
        ),
    );
    properties.insert(
        "memory_update",
        prop(
            "Full updated long-term memory as markdown. Include all existing facts plus new ones. Return \
             unchanged if nothing new.",
        ),
    );
    let mut parameters = Object::new();
    parameters.insert("type", Json::str("object"));
    parameters.insert("properties", Json::Object(properties));
    parameters.insert(
        "required",
        Json::Array(vec![Json::str("history_entry"), Json::str("memory_update")]),
    );
    let mut function = Object::new();
    function.insert("name", Json::str("save_memory"));
    function.insert(
        "description",
        Json::str("Save the memory consolidation result to persistent storage."),
    );
    function.insert("parameters", Json::Object(parameters));
    let mut tool = Object::new();
    tool.insert("type", Json::str("function"));
    tool.insert("function", Json::Object(function));
    Json::Array(vec![Json::Object(tool)])
}

/// `tool_choice` naming `save_memory`.
fn forced_choice() -> Json {
    let mut f = Object::new();
    f.insert("name", Json::str("save_memory"));
    let mut o = Object::new();
    o.insert("type", Json::str("function"));
    o.insert("function", Json::Object(f));
    Json::Object(o)
}

/// Asks the model for `save_memory(history_entry, memory_update)` over nanobot's archive `lines`. The tool is
/// requested by name; a provider that refuses a forced tool choice is asked again with `auto`.
pub async fn save_memory(
    provider: &Provider,
    current_memory: &str,
    lines: &[String],
) -> Result<SaveMemory, ConsolidationError> {
    let prompt = format!(
        "Process this conversation and call the save_memory tool with your consolidation.\n\n\
         ## Current Long-term Memory\n{}\n\n## Conversation to Process\n{}",
        if current_memory.is_empty() {
            "(empty)"
        } else {
            current_memory
        },
        lines.join("\n")
    );
    let mut request = ChatRequest {
        messages: vec![
            super::super::context::message(
                "system",
                Json::str(
                    "You are a memory consolidation agent. Call the save_memory tool with your consolidation \
                     of the conversation.",
                ),
            ),
            super::super::context::message("user", Json::String(prompt)),
        ],
        tools: Some(save_memory_tool()),
        tool_choice: Some(forced_choice()),
        ..ChatRequest::default()
    };
    let response = match provider.chat(&request).await {
        Err(ProviderError::Refused {
            status, message, ..
        }) => {
            debug!(
                status,
                "the provider refused a forced tool choice ({message}); trying auto"
            );
            request.tool_choice = Some(Json::str("auto"));
            provider.chat(&request).await?
        }
        other => other?,
    };
    let call = response
        .tool_calls
        .iter()
        .find(|c| c.name == "save_memory")
        .ok_or(ConsolidationError::NoToolCall)?;
    parse_arguments(&call.arguments)
}

/// Both arguments must be non-empty strings.
fn parse_arguments(arguments: &str) -> Result<SaveMemory, ConsolidationError> {
    let bad = |m: &str| ConsolidationError::BadArguments(m.to_owned());
    let args = Json::parse(arguments).map_err(|e| bad(&format!("not JSON ({e})")))?;
    let args = args.as_object().ok_or_else(|| bad("not an object"))?;
    let field = |name: &str| -> Result<String, ConsolidationError> {
        match args.get(name) {
            Some(Json::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(Json::String(_)) => Err(bad(&format!("{name} is empty"))),
            Some(_) => Err(bad(&format!("{name} is not a string"))),
            None => Err(bad(&format!("{name} is missing"))),
        }
    };
    Ok(SaveMemory {
        history_entry: field("history_entry")?,
        memory_update: field("memory_update")?,
    })
}

/// Asks the model for the structured summary of `messages`, updating `previous` when there is one.
pub async fn summarize(
    provider: &Provider,
    previous: Option<&str>,
    messages: &[Json],
) -> Result<String, ConsolidationError> {
    let request = ChatRequest {
        messages: summary::request(previous, &transcript::flat_text(messages)),
        ..ChatRequest::default()
    };
    let response = provider.chat(&request).await?;
    let text = response.content.unwrap_or_default();
    if text.trim().is_empty() {
        warn!("the model returned an empty summary");
        return Err(ConsolidationError::EmptySummary);
    }
    Ok(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_validated() {
        let ok = parse_arguments(
            r#"{"history_entry": "[2026-01-01 10:00] Met.", "memory_update": "- tea"}"#,
        )
        .unwrap();
        assert_eq!(ok.memory_update, "- tea");
        for (args, want) in [
            ("[1]", "not an object"),
            ("nope", "not JSON"),
            (r#"{"history_entry": "x"}"#, "memory_update is missing"),
            (
                r#"{"history_entry": " ", "memory_update": "m"}"#,
                "history_entry is empty",
            ),
            (
                r#"{"history_entry": "x", "memory_update": {"a": 1}}"#,
                "memory_update is not a string",
            ),
        ] {
            let e = parse_arguments(args).unwrap_err().to_string();
            assert!(e.contains(want), "{args}: {e}");
        }
    }
}
