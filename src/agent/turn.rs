//! One turn: context → model ⇄ tools → persist → reply.
//!
//! The turn's messages are written to the session in nanobot's shape and key order: the user message, each
//! assistant message (`role`, `content`, `tool_calls`, `reasoning_content`), each tool result (`role`,
//! `tool_call_id`, `name`, `content`), and the final answer, each with a `timestamp`. The commit (fsync by
//! default) happens before the reply is returned. When the model fails, the user's message is still saved and
//! the reply names the cause; a cancelled turn (`/stop`) saves the user's message and nothing else.
//!
//! Every request is kept under `agent.context_window - agent.reserve_tokens` estimated tokens: the session is
//! consolidated first when it would not fit, then the oldest history is left out of the request, then older
//! tool results of this turn are shortened. A "context length exceeded" answer consolidates and retries once.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::memory::{Memory, Scope, Summary};
use super::{Agent, Reply, context, repair};
use crate::bus::Inbound;
use crate::json::{Json, Object};
use crate::provider::{ChatRequest, ChatResponse, ProviderError, ToolCall};
use crate::session::SessionHandle;
use crate::session::timestamp::now_iso;
use crate::tools::truncate_chars;

/// How a turn ended, before it is persisted.
enum Ending {
    /// The final answer.
    Answer(String),
    /// The model failed after retries.
    ModelError(ProviderError),
    /// `/stop`.
    Cancelled,
}

/// Runs one turn for `inbound`; returns the reply, or `None` when the turn was cancelled. After the turn is
/// saved, a background consolidation starts if enough messages have piled up.
pub async fn run(
    agent: &Arc<Agent>,
    inbound: &Inbound,
    cancel: &CancellationToken,
) -> Option<Reply> {
    let key = inbound.session_key();
    let handle = match agent.store.get(&key).await {
        Ok(h) => h,
        Err(e) => {
            error!(session = %key, "cannot open the session: {e}");
            return Some(Reply::error(format!(
                "Sorry, I could not open this conversation: {e}"
            )));
        }
    };
    let user_content = context::user_content(inbound);
    let for_model = context::request_user_content(inbound, agent.config.provider.vision).await;
    let mut current = vec![context::message("user", for_model)];
    let mut produced: Vec<Object> = Vec::new();
    let mut stats = TurnStats::default();
    let ending = model_loop(
        agent,
        inbound,
        &handle,
        &mut current,
        &mut produced,
        &mut stats,
        cancel,
    )
    .await;
    info!(
        session = %key,
        model_calls = stats.model_calls,
        tool_calls = stats.tool_calls,
        prompt_tokens = stats.prompt_tokens,
        completion_tokens = stats.completion_tokens,
        "turn finished"
    );

    crate::metrics::turn(
        &inbound.channel,
        match &ending {
            Ending::Answer(_) => "ok",
            Ending::ModelError(_) => "error",
            Ending::Cancelled => "cancelled",
        },
    );
    let (reply, saved) = match ending {
        Ending::Answer(text) => (Some(Reply::ok(text)), produced),
        Ending::ModelError(ProviderError::ContextLength(message)) => {
            error!(session = %key, "the conversation does not fit the model's context even after consolidation: {message}");
            (Some(Reply::error(TOO_LONG.to_owned())), Vec::new())
        }
        Ending::ModelError(e) => {
            error!(session = %key, "model error: {e}");
            (
                Some(Reply::error(format!(
                    "Sorry, I could not get an answer from the model: {}",
                    e.short()
                ))),
                Vec::new(),
            )
        }
        Ending::Cancelled => {
            info!(session = %key, "turn stopped");
            (None, Vec::new())
        }
    };
    {
        let mut s = handle.lock();
        let mut user = Object::new();
        user.insert("role", Json::str("user"));
        user.insert("content", user_content);
        user.insert("timestamp", Json::str(now_iso()));
        s.push(user);
        for mut m in saved {
            m.insert("timestamp", Json::str(now_iso()));
            s.push(m);
        }
    }
    let reply = match handle.commit().await {
        Ok(_) => reply,
        Err(e) => {
            error!(session = %key, "could not save the turn: {e}");
            let text = reply.map(|r| r.text).unwrap_or_default();
            Some(Reply::error(format!(
                "{text}\n\n(Warning: this exchange could not be saved: {e})"
            )))
        }
    };
    Memory::after_turn(agent, &handle);
    reply
}

/// The reply when even a consolidated conversation does not fit the model.
const TOO_LONG: &str = "Sorry, this conversation is too long for the model's context window, even after moving \
older messages to memory. Send /new to start a new conversation, or set agent.context_window to the model's real \
window.";

/// What a turn used, for the log line that ends it.
#[derive(Default)]
struct TurnStats {
    model_calls: u32,
    tool_calls: usize,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// The part of a request that comes from the session: the system message (with the summary) and the history.
struct Prefix {
    system: Json,
    history: Vec<Json>,
    system_tokens: usize,
    history_tokens: Vec<usize>,
}

impl Prefix {
    fn build(agent: &Agent, inbound: &Inbound, handle: &SessionHandle) -> Prefix {
        let (history, summary) = {
            let s = handle.lock();
            (
                s.history(agent.config.agent.memory_window),
                Summary::from_metadata(s.metadata()).filter(|_| agent.config.memory.summary),
            )
        };
        let system =
            context::system_message(agent, &inbound.channel, &inbound.chat_id, summary.as_ref());
        let history = repair::repair(history);
        Prefix {
            system_tokens: context::estimate_tokens(std::slice::from_ref(&system), None),
            history_tokens: history
                .iter()
                .map(|m| context::estimate_tokens(std::slice::from_ref(m), None))
                .collect(),
            system,
            history,
        }
    }

    fn tokens(&self) -> usize {
        self.system_tokens + self.history_tokens.iter().sum::<usize>()
    }

    /// The request's messages, kept within `budget` tokens when possible: the oldest history goes first (the
    /// kept part starts at a user message, so no tool call loses its result), then the current turn's older
    /// tool results are shortened.
    fn fit(&self, current: &[Json], budget: usize) -> Vec<Json> {
        let current_tokens = context::estimate_tokens(current, None);
        let mut total = self.tokens() + current_tokens;
        let mut skip = 0;
        while total > budget && skip < self.history.len() {
            total -= self.history_tokens[skip];
            skip += 1;
            while skip < self.history.len() && role(&self.history[skip]) != Some("user") {
                total -= self.history_tokens[skip];
                skip += 1;
            }
        }
        let mut messages = Vec::with_capacity(1 + self.history.len() - skip + current.len());
        messages.push(self.system.clone());
        messages.extend(self.history[skip..].iter().cloned());
        let first_current = messages.len();
        messages.extend(current.iter().cloned());
        if total > budget {
            let last_tool = messages.iter().rposition(|m| role(m) == Some("tool"));
            for (i, m) in messages.iter_mut().enumerate().skip(first_current) {
                if total <= budget {
                    break;
                }
                if role(m) != Some("tool") || Some(i) == last_tool {
                    continue;
                }
                let before = context::estimate_tokens(std::slice::from_ref(m), None);
                if let Some(Json::String(text)) =
                    m.as_object_mut().and_then(|o| o.get_mut("content"))
                {
                    *text = truncate_chars(text, SHORTENED_TOOL_RESULT_CHARS, 0);
                }
                let after = context::estimate_tokens(std::slice::from_ref(m), None);
                total -= before.saturating_sub(after);
            }
        }
        if skip > 0 {
            warn!(dropped = skip, "history cut to fit agent.context_window");
        }
        messages
    }
}

/// Length tool results of the current turn are cut to when the request would not fit otherwise.
const SHORTENED_TOOL_RESULT_CHARS: usize = 1_000;

fn role(m: &Json) -> Option<&str> {
    m.as_object()?.get("role")?.as_str()
}

async fn model_loop(
    agent: &Arc<Agent>,
    inbound: &Inbound,
    handle: &SessionHandle,
    current: &mut Vec<Json>,
    produced: &mut Vec<Object>,
    stats: &mut TurnStats,
    cancel: &CancellationToken,
) -> Ending {
    let tools = agent.tool_schemas();
    let tools_tokens = context::estimate_tokens(&[], Some(tools));
    let limits = &agent.config.agent;
    let budget = limits
        .context_window
        .saturating_sub(limits.reserve_tokens)
        .saturating_sub(tools_tokens)
        .max(1);
    let max_rounds = limits.max_tool_iterations.max(1);
    let mut prefix = Prefix::build(agent, inbound, handle);
    let mut retried_context = false;
    let mut consolidation_failed = false;
    let mut rounds = 0;
    while rounds < max_rounds {
        let current_tokens = context::estimate_tokens(current, None);
        if prefix.tokens() + current_tokens > budget && !consolidation_failed {
            let keep_tokens = budget.saturating_sub(prefix.system_tokens + current_tokens) / 2;
            let consolidated = tokio::select! {
                r = consolidate(agent, handle, keep_tokens) => r,
                _ = cancel.cancelled() => return Ending::Cancelled,
            };
            match consolidated {
                Ok(true) => prefix = Prefix::build(agent, inbound, handle),
                Ok(false) => {}
                Err(()) => consolidation_failed = true,
            }
        }
        let request = ChatRequest {
            messages: prefix.fit(current, budget),
            tools: Some(tools.clone()),
            tool_choice: None,
            max_tokens: None,
            temperature: None,
        };
        let response = tokio::select! {
            r = agent.provider.chat(&request) => r,
            _ = cancel.cancelled() => return Ending::Cancelled,
        };
        let response = match response {
            Ok(r) => r,
            Err(ProviderError::ContextLength(message)) if !retried_context => {
                retried_context = true;
                warn!(session = %handle.key(), "the model says the request is too long; consolidating and trying once more: {message}");
                let keep_tokens = prefix.history_tokens.iter().sum::<usize>() / 2;
                let consolidated = tokio::select! {
                    r = consolidate(agent, handle, keep_tokens) => r,
                    _ = cancel.cancelled() => return Ending::Cancelled,
                };
                if consolidated == Ok(true) {
                    prefix = Prefix::build(agent, inbound, handle);
                }
                continue;
            }
            Err(e) => return Ending::ModelError(e),
        };
        rounds += 1;
        stats.model_calls += 1;
        stats.tool_calls += response.tool_calls.len();
        if let Some(u) = &response.usage {
            stats.prompt_tokens += u.prompt_tokens;
            stats.completion_tokens += u.completion_tokens;
        }
        if response.tool_calls.is_empty() {
            let text = response.content.clone().unwrap_or_default();
            if !text.is_empty() || response.reasoning_content.is_some() {
                produced.push(assistant_message(&response));
            }
            return Ending::Answer(if text.trim().is_empty() {
                "I have finished, but I have nothing to add.".into()
            } else {
                text
            });
        }
        let assistant = assistant_message(&response);
        current.push(Json::Object(assistant.clone()));
        produced.push(assistant);
        let results = tokio::select! {
            r = run_tools(agent, inbound, &response.tool_calls) => r,
            _ = cancel.cancelled() => return Ending::Cancelled,
        };
        for (call, text) in response.tool_calls.iter().zip(results) {
            let result = repair::tool_result(&call.id, &call.name, &text);
            current.push(result.clone());
            if let Json::Object(o) = result {
                produced.push(o);
            }
        }
    }
    let text = format!(
        "I stopped after {max_rounds} rounds of tool calls without finishing (agent.max_tool_iterations). \
         Tell me to continue, or break the task into smaller steps."
    );
    let mut last = Object::new();
    last.insert("role", Json::str("assistant"));
    last.insert("content", Json::str(text.as_str()));
    produced.push(last);
    Ending::Answer(text)
}

/// Consolidates before a request that would not fit, keeping about `keep_tokens` of recent history; whether
/// anything moved (the failure is logged here).
async fn consolidate(
    agent: &Agent,
    handle: &SessionHandle,
    keep_tokens: usize,
) -> Result<bool, ()> {
    match agent
        .memory
        .consolidate_now(agent, handle, Scope::Budget { keep_tokens })
        .await
    {
        Ok(done) => Ok(done.is_some()),
        Err(e) => {
            warn!(session = %handle.key(), "consolidation before the request failed: {e}");
            Err(())
        }
    }
}

/// An assistant message in nanobot's key order.
fn assistant_message(r: &ChatResponse) -> Object {
    let mut m = Object::new();
    m.insert("role", Json::str("assistant"));
    m.insert(
        "content",
        r.content.clone().map_or(Json::Null, Json::String),
    );
    if !r.tool_calls.is_empty() {
        let calls = r
            .tool_calls
            .iter()
            .map(|c| {
                let mut f = Object::new();
                f.insert("name", Json::str(c.name.as_str()));
                f.insert("arguments", Json::str(c.arguments.as_str()));
                let mut o = Object::new();
                o.insert("id", Json::str(c.id.as_str()));
                o.insert("type", Json::str("function"));
                o.insert("function", Json::Object(f));
                Json::Object(o)
            })
            .collect();
        m.insert("tool_calls", Json::Array(calls));
    }
    if let Some(r) = &r.reasoning_content {
        m.insert("reasoning_content", Json::str(r.as_str()));
    }
    m
}

/// Runs the calls of one assistant message concurrently; results come back in call order, each already cut to
/// `tools.max_result_chars`.
async fn run_tools(agent: &Agent, inbound: &Inbound, calls: &[ToolCall]) -> Vec<String> {
    let ctx = agent.tool_context(&inbound.channel, &inbound.chat_id);
    let max = agent.config.tools.max_result_chars;
    let mut set = JoinSet::new();
    for (i, call) in calls.iter().enumerate() {
        let (tools, ctx, call) = (agent.tools.clone(), ctx.clone(), call.clone());
        let key = inbound.session_key();
        set.spawn(async move {
            let outcome = tools.execute(&call.name, &call.arguments, &ctx).await;
            if !outcome.ok {
                warn!(session = %key, tool = %call.name, "tool failed: {}", first_line(&outcome.text));
            }
            (i, truncate_chars(&outcome.text, max, 0))
        });
    }
    let mut results: Vec<Option<String>> = vec![None; calls.len()];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, text)) => results[i] = Some(text),
            Err(e) => warn!("a tool task failed: {e}"),
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| "Error: the tool crashed before returning a result.".into()))
        .collect()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}
