//! The messages of a session as raw JSON lines.
//!
//! A session with 100,000 messages is loaded for the few hundred the model will see. Keeping each message as
//! its line of text and parsing it only when asked makes loading cost little more than reading the file, and
//! writing a line back costs nothing: it is the same text.
//!
//! The lines read from the file stay in the file's own buffer (`base`), untouched; lines added later go to a
//! second buffer (`tail`). Appending to the file's buffer instead would copy the whole file the first time it
//! grows, which for a 30 MB session is a 30 ms stall on the first turn after a load.

use crate::json::{Json, ParseError};

/// Message lines stored back to back, each a `(start, end)` span; spans at or past `base.len()` are in `tail`.
#[derive(Debug, Clone, Default)]
pub struct MessageLog {
    base: String,
    tail: String,
    spans: Vec<(usize, usize)>,
}

impl MessageLog {
    /// A log over `buf` whose lines are the given `(start, end)` byte spans.
    pub(crate) fn from_spans(buf: String, spans: Vec<(usize, usize)>) -> Self {
        MessageLog {
            base: buf,
            tail: String::new(),
            spans,
        }
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn slice(&self, (s, e): (usize, usize)) -> &str {
        let b = self.base.len();
        if s >= b {
            &self.tail[s - b..e - b]
        } else {
            &self.base[s..e]
        }
    }

    /// The JSON text of message `i`, without its newline.
    pub fn text(&self, i: usize) -> Option<&str> {
        self.spans.get(i).map(|&span| self.slice(span))
    }

    /// Message `i`, parsed.
    pub fn get(&self, i: usize) -> Option<Result<Json, ParseError>> {
        self.text(i).map(Json::parse)
    }

    /// Appends one line of JSON text (a message object, already encoded).
    pub(crate) fn push_text(&mut self, line: &str) {
        let start = self.base.len() + self.tail.len();
        self.tail.push_str(line);
        self.spans.push((start, start + line.len()));
    }

    /// Removes every message.
    pub(crate) fn clear(&mut self) {
        *self = MessageLog::default();
    }

    /// The lines from `from` on, each as text.
    pub fn texts_from(&self, from: usize) -> impl Iterator<Item = &str> {
        self.spans
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(|&span| self.slice(span))
    }
}

#[cfg(test)]
mod tests {
    use super::MessageLog;

    #[test]
    fn lines_from_the_file_and_added_lines_read_back() {
        let mut log =
            MessageLog::from_spans("{\"a\": 1}\n{\"b\": 2}\n".into(), vec![(0, 8), (9, 17)]);
        log.push_text("{\"c\": 3}");
        log.push_text("{\"d\": 4}");
        let all: Vec<&str> = log.texts_from(0).collect();
        assert_eq!(
            all,
            ["{\"a\": 1}", "{\"b\": 2}", "{\"c\": 3}", "{\"d\": 4}"]
        );
        assert_eq!(log.text(3), Some("{\"d\": 4}"));
        assert_eq!(log.texts_from(2).count(), 2);
        log.clear();
        assert!(log.is_empty());
    }
}
