//! The agent: lanes that run each session's messages in order, one turn of model and tools, chat commands.
//!
//! - `lanes`: the [`Router`]. One lane (a task with a queue) per session key runs that key's messages strictly
//!   one at a time, in arrival order; different keys run in parallel, up to `agent.max_concurrent_turns` turns
//!   at once. Idle lanes exit. `/stop` is handled before the queue.
//! - `turn`: one turn: build the context, call the model, run the tools it asks for, repeat up to
//!   `agent.max_tool_iterations`, persist the turn in nanobot's shape, reply.
//! - `context`: the system prompt and the messages the model sees.
//! - `repair`: fixes the outgoing copy of the history (tool calls always paired with results).
//! - `commands`: `/new`, `/help`, `/status` (and `/stop`, which the router handles).
//! - `memory`: consolidation into `memory/MEMORY.md` and `memory/HISTORY.md`, and the structured summary.
//! - `upkeep`: the daily sweep that ends sessions untouched for `session.max_age_days`.

mod commands;
pub mod context;
mod lanes;
pub mod memory;
pub mod repair;
mod turn;
pub mod upkeep;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

pub use lanes::Router;

use crate::bus::Outbound;
use crate::config::{Config, ToolsConfig};
use crate::json::Json;
use crate::provider::Provider;
use crate::session::SessionStore;
use crate::tools::{ToolContext, ToolRegistry};

/// A reply to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The text for the user.
    pub text: String,
    /// Whether it reports a failure (the model could not be reached, the session could not be saved, …).
    pub error: bool,
}

impl Reply {
    /// A normal reply.
    pub fn ok(text: String) -> Self {
        Reply { text, error: false }
    }

    /// A reply that reports a failure.
    pub fn error(text: String) -> Self {
        Reply { text, error: true }
    }
}

/// Everything a turn needs, shared by all lanes.
pub struct Agent {
    /// The configuration.
    pub config: Config,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The session store.
    pub store: SessionStore,
    /// The model.
    pub provider: Provider,
    /// Tools offered to the model.
    pub tools: ToolRegistry,
    /// Consolidation of old messages into MEMORY.md and HISTORY.md.
    pub memory: memory::Memory,
    /// Where replies and `message` tool sends go when the caller does not wait for the reply itself.
    pub outbound: Option<mpsc::UnboundedSender<Outbound>>,
    /// The `tools` array sent with every request, built once.
    tool_schemas: Json,
    /// `[tools]` settings shared by every tool call.
    tool_config: Arc<ToolsConfig>,
    turn_permits: Semaphore,
    started: Instant,
}

impl Agent {
    /// Builds the agent.
    pub fn new(
        config: Config,
        workspace: PathBuf,
        store: SessionStore,
        provider: Provider,
        tools: ToolRegistry,
        outbound: Option<mpsc::UnboundedSender<Outbound>>,
    ) -> Arc<Agent> {
        let permits = config.agent.max_concurrent_turns.max(1);
        let tool_schemas = tools.schemas();
        let tool_config = Arc::new(config.tools.clone());
        let durable = config.session.durability == crate::session::Durability::Fsync;
        Arc::new(Agent {
            memory: memory::Memory::new(&workspace, durable),
            config,
            workspace,
            store,
            provider,
            tools,
            outbound,
            tool_schemas,
            tool_config,
            turn_permits: Semaphore::new(permits),
            started: Instant::now(),
        })
    }

    /// The `tools` array of a chat-completions request.
    pub fn tool_schemas(&self) -> &Json {
        &self.tool_schemas
    }

    /// The context tools run in for a chat.
    pub fn tool_context(&self, channel: &str, chat_id: &str) -> ToolContext {
        ToolContext {
            workspace: self.workspace.clone(),
            channel: channel.to_owned(),
            chat_id: chat_id.to_owned(),
            outbound: self.outbound.clone(),
            config: self.tool_config.clone(),
        }
    }
}
