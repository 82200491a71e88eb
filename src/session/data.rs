//! `Session`: one conversation, as nanobot keeps it, plus what nanogate knows about its file on disk.

use std::path::PathBuf;

use super::log::MessageLog;
use super::persist::DiskState;
use super::timestamp::now_iso;
use crate::json::{Json, Object, ParseError};

/// One conversation: line 1 of its file (key, times, free `metadata`, watermark) and its messages.
///
/// Messages are never removed except by [`Session::clear`]; `last_consolidated` only moves where the model's
/// view ([`Session::history`]) starts. Changes stay in memory until the store commits them.
#[derive(Debug)]
pub struct Session {
    pub(crate) key: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) metadata: Object,
    pub(crate) last_consolidated: usize,
    /// Keys of line 1 that nanobot does not know, carried unchanged after the known ones.
    pub(crate) extra_header: Object,
    pub(crate) messages: MessageLog,
    pub(crate) disk: DiskState,
}

impl Session {
    /// A new, empty session that will be written to `path` on its first commit.
    pub fn new(key: impl Into<String>, path: PathBuf) -> Self {
        let now = now_iso();
        Session {
            key: key.into(),
            created_at: now.clone(),
            updated_at: now,
            metadata: Object::new(),
            last_consolidated: 0,
            extra_header: Object::new(),
            messages: MessageLog::default(),
            disk: DiskState::new_file(path),
        }
    }

    /// The session key, e.g. `telegram:12345678`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The file this session is stored in.
    pub fn path(&self) -> &std::path::Path {
        &self.disk.path
    }

    /// `created_at` from line 1, as written there.
    pub fn created_at(&self) -> &str {
        &self.created_at
    }

    /// `updated_at` from line 1: the time of the last added message or clear.
    pub fn updated_at(&self) -> &str {
        &self.updated_at
    }

    /// The free `metadata` object of line 1 (nanobot carries it unchanged).
    pub fn metadata(&self) -> &Object {
        &self.metadata
    }

    /// The `metadata` object, to change; the change is written at the next commit.
    pub fn metadata_mut(&mut self) -> &mut Object {
        &mut self.metadata
    }

    /// How many leading messages are already archived into memory.
    pub fn last_consolidated(&self) -> usize {
        self.last_consolidated
    }

    /// Moves the watermark; clamped to the number of messages.
    pub fn set_last_consolidated(&mut self, n: usize) {
        self.last_consolidated = n.min(self.messages.len());
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the session has no messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Messages not yet consolidated into memory.
    pub fn unconsolidated(&self) -> usize {
        self.messages.len() - self.last_consolidated
    }

    /// The raw lines of the messages.
    pub fn messages(&self) -> &MessageLog {
        &self.messages
    }

    /// Message `i`, parsed.
    pub fn message(&self, i: usize) -> Option<Result<Json, ParseError>> {
        self.messages.get(i)
    }

    /// Appends a message object exactly as given (key order kept) and sets `updated_at`, as nanobot's agent
    /// loop does when it saves a turn.
    pub fn push(&mut self, message: Object) {
        self.messages.push_text(&Json::Object(message).to_python());
        self.updated_at = now_iso();
    }

    /// nanobot's `Session.add_message(role, content, **kwargs)`: `role`, `content`, `timestamp` (now), then the
    /// extra fields in order; an extra `timestamp` replaces the value but keeps the position.
    pub fn add_message(&mut self, role: &str, content: impl Into<Json>, extra: Object) {
        let mut msg = Object::new();
        msg.insert("role", Json::str(role));
        msg.insert("content", content.into());
        msg.insert("timestamp", Json::str(now_iso()));
        for (k, v) in extra {
            msg.insert(k, v);
        }
        self.push(msg);
    }

    /// nanobot's `Session.clear()`: no messages, watermark 0, `updated_at` now; `created_at` and `metadata` stay.
    /// The store archives the old file before committing a cleared session.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.last_consolidated = 0;
        self.updated_at = now_iso();
        self.disk.rewrite = true;
    }

    /// Line 1 as nanobot writes it: `_type`, `key`, `created_at`, `updated_at`, `metadata`,
    /// `last_consolidated`, then any extra keys the file had.
    pub fn header_line(&self) -> String {
        let mut h = Object::new();
        h.insert("_type", Json::str("metadata"));
        h.insert("key", Json::str(self.key.as_str()));
        h.insert("created_at", Json::str(self.created_at.as_str()));
        h.insert("updated_at", Json::str(self.updated_at.as_str()));
        h.insert("metadata", Json::Object(self.metadata.clone()));
        h.insert("last_consolidated", Json::from(self.last_consolidated));
        for (k, v) in self.extra_header.iter() {
            h.insert(k, v.clone());
        }
        Json::Object(h).to_python()
    }

    /// Whether there is anything the next commit would write.
    pub fn is_dirty(&self) -> bool {
        self.differs_from_disk(&self.header_line())
    }

    /// [`Session::is_dirty`] for a line 1 the caller has already encoded.
    pub(crate) fn differs_from_disk(&self, header: &str) -> bool {
        self.disk.rewrite
            || !self.disk.exists
            || self.disk.persisted != self.messages.len()
            || self.disk.header != header
    }

    /// Whether dropping this session from memory would lose anything: it is dirty, and it is not merely a new
    /// session nobody has written to.
    pub fn has_unsaved_data(&self) -> bool {
        self.is_dirty() && (self.disk.exists || !self.is_empty() || !self.metadata.is_empty())
    }

    /// Sets `updated_at` explicitly (for importers and tests that must reproduce a given file).
    pub fn set_updated_at(&mut self, t: impl Into<String>) {
        self.updated_at = t.into();
    }
}
