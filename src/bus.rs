//! Messages between channels and the agent: what arrives ([`Inbound`]) and what is sent back ([`Outbound`]).
//!
//! Channel adapters know nothing about sessions or models; they turn platform events into `Inbound` and deliver
//! `Outbound`. The session key of a message is `channel:chat_id` (a cron job uses `cron:<job id>`).

use std::path::PathBuf;

/// A message from a person (or a scheduled job) to the agent.
#[derive(Debug, Clone, Default)]
pub struct Inbound {
    /// `telegram`, `discord`, `cli`, `cron`, `api`, …
    pub channel: String,
    /// The chat within the channel; with `channel` it names the session.
    pub chat_id: String,
    /// Who sent it (platform user id or name), for logs and allow-lists.
    pub sender: String,
    /// The text; commands start with `/`.
    pub text: String,
    /// Files that came with the message, already saved in the workspace.
    pub media: Vec<PathBuf>,
    /// Overrides the session key (`channel:chat_id` otherwise), e.g. `cron:<id>` delivering to a chat.
    pub session_key: Option<String>,
}

impl Inbound {
    /// A plain text message.
    pub fn text(channel: &str, chat_id: &str, text: &str) -> Self {
        Inbound {
            channel: channel.into(),
            chat_id: chat_id.into(),
            text: text.into(),
            ..Default::default()
        }
    }

    /// The session this message belongs to.
    pub fn session_key(&self) -> String {
        match &self.session_key {
            Some(k) => k.clone(),
            None => session_key(&self.channel, &self.chat_id),
        }
    }
}

/// `channel:chat_id`.
pub fn session_key(channel: &str, chat_id: &str) -> String {
    format!("{channel}:{chat_id}")
}

/// Splits `channel:chat_id` at the first `:`; `None` when there is no `:`.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(':')
}

/// A message from the agent to a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// The channel to send through.
    pub channel: String,
    /// The chat to send to.
    pub chat_id: String,
    /// The text (markdown as the model wrote it; channels convert it).
    pub text: String,
}
