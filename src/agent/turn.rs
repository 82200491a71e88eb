//! One turn: context → model ⇄ tools → persist → reply.
//!
//! The turn's messages are written to the session in nanobot's shape and key order: the user message, each
//! assistant message (`role`, `content`, `tool_calls`, `reasoning_content`), each tool result (`role`,
//! `tool_call_id`, `name`, `content`), and the final answer, each with a `timestamp`. The commit (fsync by
//! default) happens before the reply is returned. When the model fails, the user's message is still saved and
//! the reply names the cause; a cancelled turn (`/stop`) saves the user's message and nothing else.

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{Agent, Reply, context, repair};
use crate::bus::Inbound;
use crate::json::{Json, Object};
use crate::provider::{ChatRequest, ChatResponse, ProviderError, ToolCall};
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

/// Runs one turn for `inbound`; returns the reply, or `None` when the turn was cancelled.
pub async fn run(agent: &Agent, inbound: &Inbound, cancel: &CancellationToken) -> Option<Reply> {
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
    let history = handle.lock().history(agent.config.agent.memory_window);
    let user_content = context::user_content(inbound);
    let mut messages = vec![context::message(
        "system",
        Json::String(context::system_prompt(
            &agent.workspace,
            &inbound.channel,
            &inbound.chat_id,
        )),
    )];
    messages.extend(repair::repair(history));
    messages.push(context::message("user", user_content.clone()));

    let mut produced: Vec<Object> = Vec::new();
    let mut stats = TurnStats::default();
    let ending = model_loop(
        agent,
        inbound,
        &mut messages,
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

    let (reply, saved) = match ending {
        Ending::Answer(text) => (Some(Reply::ok(text)), produced),
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
    match handle.commit().await {
        Ok(_) => reply,
        Err(e) => {
            error!(session = %key, "could not save the turn: {e}");
            let text = reply.map(|r| r.text).unwrap_or_default();
            Some(Reply::error(format!(
                "{text}\n\n(Warning: this exchange could not be saved: {e})"
            )))
        }
    }
}

/// What a turn used, for the log line that ends it.
#[derive(Default)]
struct TurnStats {
    model_calls: u32,
    tool_calls: usize,
    prompt_tokens: u64,
    completion_tokens: u64,
}

async fn model_loop(
    agent: &Agent,
    inbound: &Inbound,
    messages: &mut Vec<Json>,
    produced: &mut Vec<Object>,
    stats: &mut TurnStats,
    cancel: &CancellationToken,
) -> Ending {
    let tools = agent.tool_schemas();
    let max_rounds = agent.config.agent.max_tool_iterations.max(1);
    for _ in 0..max_rounds {
        let request = ChatRequest {
            messages: messages.clone(),
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
            Err(e) => return Ending::ModelError(e),
        };
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
        messages.push(Json::Object(assistant.clone()));
        produced.push(assistant);
        let results = tokio::select! {
            r = run_tools(agent, inbound, &response.tool_calls) => r,
            _ = cancel.cancelled() => return Ending::Cancelled,
        };
        for (call, text) in response.tool_calls.iter().zip(results) {
            let result = repair::tool_result(&call.id, &call.name, &text);
            messages.push(result.clone());
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
