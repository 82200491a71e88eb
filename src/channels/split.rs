//! Splitting a long reply into messages a platform accepts.
//!
//! Telegram takes 4096 UTF-16 units per message, Discord 2000 characters. A reply is cut at a line break when
//! one fits, else at a space, else inside a word (never inside a character). A fenced code block that is cut
//! is closed at the end of one part and reopened with the same fence line (language included) at the start of
//! the next, so every part renders as the model meant it. The limit is measured by the caller's function, so
//! the same code serves both units.

/// Length in UTF-16 code units (Telegram's measure).
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Length in Unicode scalar values (Discord's measure).
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

const CLOSE: &str = "\n```";

/// Splits `text` into parts of at most `limit` units as measured by `len`, keeping fenced code blocks balanced.
/// Empty and whitespace-only parts are dropped; a text that fits is returned as one part, unchanged.
pub fn split_message(text: &str, limit: usize, len: fn(&str) -> usize) -> Vec<String> {
    let text = text.trim_end();
    if len(text) <= limit {
        return if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    let mut s = Splitter {
        parts: Vec::new(),
        cur: String::new(),
        fence: None,
        limit: limit.max(16),
        len,
    };
    for line in text.split_inclusive('\n') {
        s.push_line(line);
    }
    s.flush();
    s.parts
}

struct Splitter {
    parts: Vec<String>,
    cur: String,
    /// The opening fence line (without newline) while inside a code block.
    fence: Option<String>,
    limit: usize,
    len: fn(&str) -> usize,
}

impl Splitter {
    /// Room left in the current part for content, keeping space to close an open fence.
    fn room(&self) -> usize {
        let reserve = if self.fence.is_some() {
            (self.len)(CLOSE)
        } else {
            0
        };
        self.limit
            .saturating_sub((self.len)(&self.cur))
            .saturating_sub(reserve)
    }

    fn push_line(&mut self, line: &str) {
        let is_fence = line.trim_start().starts_with("```");
        // A fence line changes the state after it; closing needs no reserve of its own.
        if (self.len)(line) > self.room() {
            self.flush();
        }
        if (self.len)(line) > self.room() {
            // Still too long for an empty part: cut it into pieces.
            let mut rest = line;
            while !rest.is_empty() {
                let room = self.room().max(1);
                let piece = cut(rest, room, self.len);
                self.cur.push_str(piece);
                rest = &rest[piece.len()..];
                if !rest.is_empty() {
                    self.flush();
                }
            }
        } else {
            self.cur.push_str(line);
        }
        if is_fence {
            self.fence = match self.fence {
                Some(_) => None,
                None => Some(line.trim_end().to_owned()),
            };
        }
    }

    /// Ends the current part (closing an open fence) and starts the next (reopening it).
    fn flush(&mut self) {
        let mut part = std::mem::take(&mut self.cur);
        let only_fence = self
            .fence
            .as_deref()
            .is_some_and(|f| part.trim() == f.trim());
        if let Some(fence) = &self.fence {
            if !only_fence {
                let body = part.trim_end_matches('\n').len();
                part.truncate(body);
                part.push_str(CLOSE);
            }
            self.cur = format!("{fence}\n");
        }
        if only_fence {
            // Nothing but the opening fence: carry it over instead of sending an empty block.
            return;
        }
        let trimmed = part.trim_end();
        if !trimmed.trim().is_empty() {
            self.parts.push(trimmed.to_owned());
        }
    }
}

/// The longest prefix of `s` that fits `room`, preferring to end after a space; at least one character.
fn cut(s: &str, room: usize, len: fn(&str) -> usize) -> &str {
    let mut end = 0;
    let mut last_space = None;
    for (i, c) in s.char_indices() {
        let next = i + c.len_utf8();
        if len(&s[..next]) > room {
            break;
        }
        end = next;
        if c == ' ' {
            last_space = Some(next);
        }
    }
    if end == 0 {
        // Not even one character fits the room: take one anyway so the loop always advances.
        end = s.chars().next().map_or(s.len(), char::len_utf8);
        return &s[..end];
    }
    if end < s.len()
        && let Some(sp) = last_space.filter(|&sp| sp > end / 2)
    {
        return &s[..sp];
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(parts: &[String], limit: usize, len: fn(&str) -> usize) {
        for p in parts {
            assert!(len(p) <= limit, "part of {} > {limit}", len(p));
            assert_eq!(
                p.lines()
                    .filter(|l| l.trim_start().starts_with("```"))
                    .count()
                    % 2,
                0,
                "unbalanced fences in {p:?}"
            );
        }
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split_message("hi", 10, char_len), vec!["hi"]);
        assert!(split_message("  \n", 10, char_len).is_empty());
    }

    #[test]
    fn splits_on_lines_then_words() {
        let text = "aaaa bbbb cccc\ndddd eeee\nffff";
        let parts = split_message(text, 16, char_len);
        check(&parts, 16, char_len);
        assert_eq!(parts.join(" ").split_whitespace().count(), 6);
        assert_eq!(parts[0], "aaaa bbbb cccc");
    }

    #[test]
    fn code_blocks_stay_balanced_and_keep_their_language() {
        let mut text = String::from("intro\n```rust\n");
        for i in 0..200 {
            text.push_str(&format!("let x{i} = {i};\n"));
        }
        text.push_str("```\nafter");
        let parts = split_message(&text, 300, char_len);
        check(&parts, 300, char_len);
        assert!(parts.len() > 5);
        for p in &parts[1..parts.len() - 1] {
            assert!(p.starts_with("```rust\n"), "{p}");
        }
        let all: String = parts.concat();
        let mut last = -1i64;
        for i in 0..200 {
            let pos = all.find(&format!("let x{i} = {i};")).expect("line kept") as i64;
            assert!(pos > last);
            last = pos;
        }
    }

    #[test]
    fn utf16_limit_counts_emoji_as_two() {
        let text = "🙂".repeat(100);
        let parts = split_message(&text, 50, utf16_len);
        check(&parts, 50, utf16_len);
        assert_eq!(parts.len(), 4);
        assert_eq!(parts.concat(), text);
    }
}
