//! Tools the model can call: the [`Tool`] trait, the context a call runs in, and the [`ToolRegistry`].
//!
//! A tool gets its arguments as a parsed JSON object and returns text for the model. A failure is not a crash:
//! the registry turns any [`ToolError`] into an `Error: …` result the model sees and can react to.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::bus::Outbound;
use crate::config::ToolsConfig;
use crate::json::{Json, Object};

pub mod cron;
pub mod exec;
pub mod files;
pub mod message;
pub mod path;
pub mod web;

pub use cron::CronTool;
pub use exec::Exec;
pub use files::{EditFile, ListDir, ReadFile, WriteFile};
pub use message::Message;
pub use web::WebFetch;

/// A registry with the built-in tools: `read_file`, `write_file`, `edit_file`, `list_dir`, `exec`, `web_fetch`
/// and `message`. They take everything call-specific from the [`ToolContext`], so one registry serves all chats.
pub fn default_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(ReadFile));
    registry.register(Arc::new(WriteFile));
    registry.register(Arc::new(EditFile));
    registry.register(Arc::new(ListDir));
    registry.register(Arc::new(Exec));
    registry.register(Arc::new(WebFetch::new()));
    registry.register(Arc::new(Message));
    registry
}

/// The future a tool call returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'a>>;

/// What a tool call may use: the workspace, the chat it runs for, where to send messages, and settings.
#[derive(Clone)]
pub struct ToolContext {
    /// The workspace; relative paths are resolved against it.
    pub workspace: PathBuf,
    /// Channel of the current chat (`telegram`, `cli`, …).
    pub channel: String,
    /// Chat id of the current chat.
    pub chat_id: String,
    /// Where the `message` tool sends (the gateway's outbound queue).
    pub outbound: Option<mpsc::UnboundedSender<Outbound>>,
    /// `[tools]` settings.
    pub config: Arc<ToolsConfig>,
}

/// Why a tool call failed; shown to the model as `Error: <message>`.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the schema.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The call was understood but could not be done.
    #[error("{0}")]
    Failed(String),
}

/// One tool.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &'static str;
    /// One or two sentences for the model.
    fn description(&self) -> &'static str;
    /// JSON schema of the arguments (an object schema).
    fn parameters(&self) -> Json;
    /// Runs the tool.
    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

/// The tools offered to the model.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool (a later tool with the same name replaces the earlier one).
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// Names of the registered tools.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The `tools` array of a chat-completions request.
    pub fn schemas(&self) -> Json {
        Json::Array(
            self.tools
                .iter()
                .map(|t| {
                    let mut f = Object::new();
                    f.insert("name", Json::str(t.name()));
                    f.insert("description", Json::str(t.description()));
                    f.insert("parameters", t.parameters());
                    let mut o = Object::new();
                    o.insert("type", Json::str("function"));
                    o.insert("function", Json::Object(f));
                    Json::Object(o)
                })
                .collect(),
        )
    }

    /// Runs tool `name` with `arguments` (the JSON text the model sent). Every failure, including an unknown
    /// tool and unparsable arguments, comes back as an `Error: …` text for the model, with `ok = false`.
    pub async fn execute(&self, name: &str, arguments: &str, ctx: &ToolContext) -> ToolOutcome {
        let Some(tool) = self.tools.iter().find(|t| t.name() == name) else {
            // Not labelled with the name: a model can invent any number of them.
            crate::metrics::tool_call("unknown", false);
            return ToolOutcome::error(format!(
                "unknown tool {name:?}; available: {}",
                self.names().join(", ")
            ));
        };
        let args = if arguments.trim().is_empty() {
            Ok(Json::Object(Object::new()))
        } else {
            Json::parse(arguments)
        };
        let outcome = match args {
            Ok(Json::Object(args)) => match tool.call(&args, ctx).await {
                Ok(text) => ToolOutcome { text, ok: true },
                Err(e) => ToolOutcome::error(e.to_string()),
            },
            Ok(_) => ToolOutcome::error("invalid arguments: expected a JSON object".into()),
            Err(e) => ToolOutcome::error(format!("invalid arguments: not valid JSON ({e})")),
        };
        crate::metrics::tool_call(tool.name(), outcome.ok);
        outcome
    }
}

/// The result of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The text returned to the model.
    pub text: String,
    /// Whether the tool succeeded.
    pub ok: bool,
}

impl ToolOutcome {
    fn error(message: String) -> Self {
        ToolOutcome {
            text: format!("Error: {message}"),
            ok: false,
        }
    }
}

/// An object schema for tool arguments: `(name, JSON type, description)` per property, and the required names.
pub fn object_schema(properties: &[(&str, &str, &str)], required: &[&str]) -> Json {
    let mut props = Object::new();
    for (name, ty, description) in properties {
        let mut p = Object::new();
        p.insert("type", Json::str(*ty));
        p.insert("description", Json::str(*description));
        props.insert(*name, Json::Object(p));
    }
    let mut schema = Object::new();
    schema.insert("type", Json::str("object"));
    schema.insert("properties", Json::Object(props));
    schema.insert(
        "required",
        Json::Array(required.iter().map(|r| Json::str(*r)).collect()),
    );
    Json::Object(schema)
}

/// `text` cut to at most `max` characters (on a character boundary), followed by
/// `\n... (truncated, N more chars)` when anything was cut. `beyond` counts characters known to exist after
/// `text` that were never kept (output that was only counted).
pub fn truncate_chars(text: &str, max: usize, beyond: usize) -> String {
    let (kept, cut) = match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], text[at..].chars().count() + beyond),
        None => (text, beyond),
    };
    if cut == 0 {
        return kept.to_owned();
    }
    format!("{kept}\n... (truncated, {cut} more chars)")
}

/// Helpers for reading arguments.
pub mod args {
    use super::ToolError;
    use crate::json::{Json, Object};

    /// A required string argument.
    pub fn string<'a>(args: &'a Object, name: &str) -> Result<&'a str, ToolError> {
        match args.get(name) {
            Some(Json::String(s)) => Ok(s),
            Some(_) => Err(ToolError::InvalidArguments(format!(
                "`{name}` must be a string"
            ))),
            None => Err(ToolError::InvalidArguments(format!("`{name}` is required"))),
        }
    }

    /// An optional string argument.
    pub fn opt_string<'a>(args: &'a Object, name: &str) -> Result<Option<&'a str>, ToolError> {
        match args.get(name) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => Ok(Some(s)),
            Some(_) => Err(ToolError::InvalidArguments(format!(
                "`{name}` must be a string"
            ))),
        }
    }

    /// An optional non-negative integer argument.
    pub fn opt_u64(args: &Object, name: &str) -> Result<Option<u64>, ToolError> {
        match args.get(name) {
            None | Some(Json::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                        .map(|f| f as u64)
                })
                .map(Some)
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!("`{name}` must be a non-negative integer"))
                }),
        }
    }
}
