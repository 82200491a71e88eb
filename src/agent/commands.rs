//! Chat commands. They are answered by nanogate itself and never written to the session.

use tracing::{error, info};

use super::{Agent, Reply, context};
use crate::json::Json;

/// The reply to `/help`.
pub const HELP: &str = "nanogate commands:\n\
/new — start a new conversation (the old one is archived)\n\
/stop — stop what I am doing for this chat\n\
/status — model, conversation size, uptime\n\
/help — this list";

/// The command in a message, lower-cased and without a `@botname` suffix (`/new@my_bot` → `/new`); `None` for
/// a message that is not one of ours.
pub fn parse(text: &str) -> Option<&'static str> {
    let word = text.trim();
    let word = word
        .split_once('@')
        .map_or(word, |(w, _)| w)
        .to_ascii_lowercase();
    ["/new", "/help", "/stop", "/status"]
        .into_iter()
        .find(|c| *c == word)
}

/// `/new`: archive the transcript and start afresh.
pub async fn new_session(agent: &Agent, key: &str) -> Reply {
    match agent.store.clear(key).await {
        Ok(archive) => {
            info!(session = %key, archive = ?archive, "new session started");
            Reply::ok("New session started.".into())
        }
        Err(e) => {
            error!(session = %key, "could not clear session: {e}");
            Reply::error(format!("Could not start a new session: {e}"))
        }
    }
}

/// `/status`: model, messages, unconsolidated messages, estimated context tokens, uptime.
pub async fn status(agent: &Agent, key: &str, channel: &str, chat_id: &str) -> Reply {
    let (messages, unconsolidated, history) = match agent.store.get(key).await {
        Ok(h) => {
            let s = h.lock();
            (
                s.len(),
                s.unconsolidated(),
                s.history(agent.config.agent.memory_window),
            )
        }
        Err(e) => return Reply::error(format!("Could not read this conversation: {e}")),
    };
    let mut request = vec![context::message(
        "system",
        Json::String(context::system_prompt(&agent.workspace, channel, chat_id)),
    )];
    request.extend(history);
    let tools = agent.tool_schemas();
    let tokens = context::estimate_tokens(&request, Some(tools));
    let up = agent.started.elapsed().as_secs();
    Reply::ok(format!(
        "Model: {}\nMessages: {messages} ({unconsolidated} not yet consolidated)\nContext: ~{tokens} tokens\n\
         Uptime: {}h {:02}m {:02}s",
        agent.provider.model(),
        up / 3600,
        up / 60 % 60,
        up % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn commands_are_recognised() {
        assert_eq!(parse(" /NEW "), Some("/new"));
        assert_eq!(parse("/stop@my_bot"), Some("/stop"));
        assert_eq!(parse("/newer"), None);
        assert_eq!(parse("hello /new"), None);
    }
}
