//! Chat commands. They are answered by nanogate itself and never written to the session.

use tracing::{error, info, warn};

use super::memory::Summary;
use super::{Agent, Reply, context};

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

/// `/new`: move the unconsolidated messages into memory, archive the transcript and start afresh. When the
/// memory step fails, the session stays as it was.
pub async fn new_session(agent: &Agent, key: &str) -> Reply {
    match agent.memory.archive_and_clear(agent, key).await {
        Ok(archive) => {
            info!(session = %key, archive = ?archive, "new session started");
            Reply::ok("New session started.".into())
        }
        Err(e) => {
            error!(session = %key, "/new: memory archival failed, session kept: {e}");
            Reply::error("Memory archival failed, session not cleared. Please try again.".into())
        }
    }
}

/// `session.idle_reset_minutes`: when the session has been silent that long, it ends as if `/new` had been
/// sent, silently. A failure is logged and the conversation simply continues.
pub async fn idle_reset(agent: &Agent, key: &str) {
    let minutes = agent.config.session.idle_reset_minutes;
    if minutes == 0 {
        return;
    }
    let Ok(handle) = agent.store.get(key).await else {
        return;
    };
    let last = {
        let s = handle.lock();
        if s.is_empty() {
            return;
        }
        chrono::NaiveDateTime::parse_from_str(s.updated_at(), "%Y-%m-%dT%H:%M:%S%.f").ok()
    };
    let Some(last) = last else { return };
    let silent = chrono::Local::now().naive_local() - last;
    if silent < chrono::Duration::minutes(i64::try_from(minutes).unwrap_or(i64::MAX)) {
        return;
    }
    match agent.memory.archive_and_clear(agent, key).await {
        Ok(archive) => info!(
            session = %key,
            silent_minutes = silent.num_minutes(),
            archive = ?archive,
            "session ended after silence; a new one starts"
        ),
        Err(e) => warn!(session = %key, "idle reset skipped: memory archival failed: {e}"),
    }
}

/// `/status`: model, messages, unconsolidated messages, estimated context tokens, uptime.
pub async fn status(agent: &Agent, key: &str, channel: &str, chat_id: &str) -> Reply {
    let (messages, unconsolidated, history, summary) = match agent.store.get(key).await {
        Ok(h) => {
            let s = h.lock();
            (
                s.len(),
                s.unconsolidated(),
                s.history(agent.config.agent.memory_window),
                Summary::from_metadata(s.metadata()).filter(|_| agent.config.memory.summary),
            )
        }
        Err(e) => return Reply::error(format!("Could not read this conversation: {e}")),
    };
    let mut request = vec![context::system_message(
        agent,
        channel,
        chat_id,
        summary.as_ref(),
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
