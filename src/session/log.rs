//! The messages of a session as raw JSON lines in one buffer.
//!
//! A session with 100,000 messages is loaded for the few hundred the model will see. Keeping each message as
//! its line of text (already checked to be a JSON object with a `role`) and parsing it only when asked makes
//! loading cost little more than reading the file, and writing a line back costs nothing: it is the same text.

use crate::json::{Json, ParseError};

/// Message lines stored back to back in one string, with the end offset of each.
#[derive(Debug, Clone, Default)]
pub struct MessageLog {
    buf: String,
    spans: Vec<(usize, usize)>,
}

impl MessageLog {
    /// A log over `buf` whose lines are the given `(start, end)` byte spans, all already validated.
    pub(crate) fn from_spans(buf: String, spans: Vec<(usize, usize)>) -> Self {
        MessageLog { buf, spans }
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The JSON text of message `i`, without its newline.
    pub fn text(&self, i: usize) -> Option<&str> {
        self.spans.get(i).map(|&(s, e)| &self.buf[s..e])
    }

    /// Message `i`, parsed.
    pub fn get(&self, i: usize) -> Option<Result<Json, ParseError>> {
        self.text(i).map(Json::parse)
    }

    /// Appends one line of JSON text (a message object, already encoded).
    pub(crate) fn push_text(&mut self, line: &str) {
        let start = self.buf.len();
        self.buf.push_str(line);
        self.spans.push((start, self.buf.len()));
    }

    /// Removes every message.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
    }

    /// The lines from `from` on, each as text.
    pub fn texts_from(&self, from: usize) -> impl Iterator<Item = &str> {
        self.spans
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(|&(s, e)| &self.buf[s..e])
    }
}
