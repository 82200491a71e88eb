//! The heartbeat: every `heartbeat.interval_minutes`, the agent looks at `HEARTBEAT.md` and works on the tasks
//! listed there.
//!
//! The file is read at each beat (so edits apply at the next one). When it lists no active task, the beat is
//! skipped without calling the model, which is the common case and costs nothing. An active task is a list
//! item (`- `, `* `, `+ ` or `1. `) with some text, outside HTML comments and outside a section headed
//! "Completed" or "Done"; an empty checkbox (`- [ ]`), a ticked one (`- [x] …`), headings, prose and blank
//! lines are not tasks. (nanobot 0.1.4.post3 asks the model at every beat whether a non-empty file has
//! active tasks, so even its own template costs a model call every half hour; deciding from the list items,
//! which is what the template asks for, costs nothing.)
//!
//! When there are tasks, they run as one turn on session key `heartbeat`, with the tasks in the message. The
//! reply goes to the most recently active chat: the session with the latest `updated_at` whose channel is a
//! real chat (not `cron`, `heartbeat`, `cli` or `system`). A reply containing `HEARTBEAT_OK` means nothing
//! needed attention and is not delivered (nanobot's convention).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::ServiceHandle;
use crate::agent::Router;
use crate::bus::{Inbound, Outbound, split_key};
use crate::session::SessionStore;

/// The session key heartbeat turns run in.
pub const SESSION_KEY: &str = "heartbeat";

/// What the model answers when nothing needs attention; such a reply is not delivered.
pub const OK_TOKEN: &str = "HEARTBEAT_OK";

/// Channels that are not a person's chat, so never the "most recently active chat".
const NOT_CHATS: [&str; 4] = ["cron", "heartbeat", "cli", "system"];

/// The active tasks of a `HEARTBEAT.md` text, each without its list marker.
pub fn active_tasks(text: &str) -> Vec<String> {
    let mut tasks = Vec::new();
    let mut in_comment = false;
    let mut done_section = false;
    for raw in text.lines() {
        let mut line = raw.trim().to_owned();
        // Drop HTML comments, including ones spanning lines.
        let mut visible = String::new();
        let mut rest = line.as_str();
        loop {
            if in_comment {
                match rest.find("-->") {
                    Some(end) => {
                        rest = &rest[end + 3..];
                        in_comment = false;
                    }
                    None => break,
                }
            } else {
                match rest.find("<!--") {
                    Some(start) => {
                        visible.push_str(&rest[..start]);
                        rest = &rest[start + 4..];
                        in_comment = true;
                    }
                    None => {
                        visible.push_str(rest);
                        break;
                    }
                }
            }
        }
        line = visible.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        if let Some(heading) = line.strip_prefix('#') {
            let title = heading.trim_start_matches('#').trim().to_lowercase();
            done_section = matches!(title.as_str(), "completed" | "done" | "completed tasks");
            continue;
        }
        if done_section {
            continue;
        }
        let Some(item) = list_item(&line) else {
            continue;
        };
        let item = if let Some(rest) = item.strip_prefix("[ ]").or_else(|| item.strip_prefix("[]"))
        {
            rest.trim()
        } else if item.starts_with("[x]") || item.starts_with("[X]") {
            continue;
        } else {
            item
        };
        if !item.is_empty() {
            tasks.push(item.to_owned());
        }
    }
    tasks
}

/// The text of a list item line (`- a`, `* a`, `+ a`, `1. a`, `1) a`), or `None` for any other line.
fn list_item(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest.trim());
        }
    }
    if matches!(line, "-" | "*" | "+") {
        return Some("");
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        let rest = &line[digits..];
        if let Some(item) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(item.trim());
        }
    }
    None
}

/// The message a heartbeat turn sends for these tasks.
pub fn prompt(tasks: &[String]) -> String {
    let mut text = String::from(
        "Heartbeat: a periodic check. These are the active tasks in HEARTBEAT.md in your workspace:\n\n",
    );
    for t in tasks {
        text.push_str("- ");
        text.push_str(t);
        text.push('\n');
    }
    text.push_str("\nFollow them now. If nothing needs attention, reply with just: HEARTBEAT_OK");
    text
}

/// The most recently active chat, `(channel, chat_id)`: the session updated last whose channel is a real
/// chat. `None` when there is none (or the sessions cannot be listed; that is logged).
pub async fn last_active_chat(sessions: &SessionStore) -> Option<(String, String)> {
    let list = match sessions.list_recent().await {
        Ok(l) => l,
        Err(e) => {
            warn!("heartbeat: cannot list sessions to find the last active chat: {e}");
            return None;
        }
    };
    // `list` is newest first.
    list.iter().find_map(|s| {
        let (channel, chat) = split_key(&s.key)?;
        (!NOT_CHATS.contains(&channel) && !chat.is_empty())
            .then(|| (channel.to_owned(), chat.to_owned()))
    })
}

/// What one beat did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beat {
    /// No `HEARTBEAT.md`, or no active task in it: the model was not called.
    Idle,
    /// The tasks ran; the reply was sent to this chat.
    Delivered(String, String),
    /// The tasks ran; nothing to deliver (the reply was `HEARTBEAT_OK`, empty, an error, or no chat is known).
    Ran,
}

/// One beat: reads `<workspace>/HEARTBEAT.md` and, if it has active tasks, runs them and delivers the reply.
pub async fn beat(
    workspace: &Path,
    router: &Router,
    sessions: &SessionStore,
    outbound: Option<&mpsc::UnboundedSender<Outbound>>,
) -> Beat {
    let path = workspace.join("HEARTBEAT.md");
    let read = tokio::task::spawn_blocking({
        let path = path.clone();
        move || std::fs::read_to_string(path)
    })
    .await;
    let text = match read {
        Ok(Ok(t)) => t,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return Beat::Idle,
        Ok(Err(e)) => {
            warn!(file = %path.display(), "heartbeat: cannot read: {e}");
            return Beat::Idle;
        }
        Err(_) => return Beat::Idle,
    };
    let tasks = active_tasks(&text);
    if tasks.is_empty() {
        debug!("heartbeat: no active tasks; skipped");
        return Beat::Idle;
    }
    let target = last_active_chat(sessions).await;
    info!(tasks = tasks.len(), target = ?target, "heartbeat: running tasks");
    // The turn runs in the target chat's context (so the `message` tool and the prompt name it), on its own key.
    let (channel, chat_id) = target
        .clone()
        .unwrap_or_else(|| ("heartbeat".to_owned(), "heartbeat".to_owned()));
    let inbound = Inbound {
        channel,
        chat_id,
        sender: "heartbeat".into(),
        text: prompt(&tasks),
        media: Vec::new(),
        session_key: Some(SESSION_KEY.into()),
    };
    let reply = match router.ask(inbound).await {
        Some(r) if !r.error => r.text,
        Some(r) => {
            warn!("heartbeat: the turn failed: {}", r.text);
            return Beat::Ran;
        }
        None => return Beat::Ran,
    };
    if reply.trim().is_empty() || reply.contains(OK_TOKEN) {
        debug!("heartbeat: nothing needed attention");
        return Beat::Ran;
    }
    let (Some((channel, chat_id)), Some(out)) = (target, outbound) else {
        info!("heartbeat: no chat to deliver the reply to");
        return Beat::Ran;
    };
    let msg = Outbound {
        channel: channel.clone(),
        chat_id: chat_id.clone(),
        text: reply,
    };
    if out.send(msg).is_err() {
        warn!("heartbeat: reply dropped: the outbound queue is closed");
        return Beat::Ran;
    }
    Beat::Delivered(channel, chat_id)
}

/// The running heartbeat. Shutting it down waits for a beat in progress to finish.
pub type HeartbeatHandle = ServiceHandle;

/// Starts the heartbeat: a beat every `interval` (the first one `interval` after now). `None` when the interval
/// is zero (off).
pub fn spawn(
    workspace: PathBuf,
    router: Router,
    sessions: SessionStore,
    outbound: Option<mpsc::UnboundedSender<Outbound>>,
    interval: Duration,
) -> Option<HeartbeatHandle> {
    if interval.is_zero() {
        info!("heartbeat is off (heartbeat.interval_minutes = 0)");
        return None;
    }
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        // After a long turn or a suspend, beat once, not once per missed interval.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = token.cancelled() => break,
            }
            tokio::select! {
                _ = beat(&workspace, &router, &sessions, outbound.as_ref()) => {}
                _ = token.cancelled() => break,
            }
        }
    });
    info!(minutes = interval.as_secs() / 60, "heartbeat started");
    Some(ServiceHandle::new("heartbeat", cancel, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_have_no_tasks() {
        let ours = include_str!("../../workspace/HEARTBEAT.md");
        assert!(active_tasks(ours).is_empty());
        let nanobots = "# Heartbeat Tasks\n\nThis file is checked every 30 minutes by your nanobot agent.\n\
            Add tasks below that you want the agent to work on periodically.\n\n\
            If this file has no tasks (only headers and comments), the agent will skip the heartbeat.\n\n\
            ## Active Tasks\n\n<!-- Add your periodic tasks below this line -->\n\n\n## Completed\n\n\
            <!-- Move completed tasks here or delete them -->\n";
        assert!(active_tasks(nanobots).is_empty());
        assert!(
            active_tasks("- [ ]\n* [ ]\n- \n<!--\n- hidden\n-->\n- [x] done already\n").is_empty()
        );
        assert!(active_tasks("").is_empty());
    }

    #[test]
    fn list_items_are_tasks() {
        let text = "# Heartbeat\n\nSome prose.\n\n- Check the weather\n- [ ] Water the plants\n\
                    1. Read the news <!-- daily -->\n\n## Completed\n\n- Old task\n";
        assert_eq!(
            active_tasks(text),
            ["Check the weather", "Water the plants", "Read the news"]
        );
    }
}
