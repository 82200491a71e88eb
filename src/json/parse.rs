//! Reading JSON text the way Python's `json.loads` does.
//!
//! One recursive-descent parser serves two purposes: building a [`Json`] value, and (with `BUILD = false`)
//! checking a line without allocating, which is what loading a large session file needs.

use super::{Json, Number, Object};

/// Deepest nesting accepted; Python stops near its recursion limit (1000), and we must not overflow a stack.
const MAX_DEPTH: usize = 512;

/// Why a text is not a JSON document, and where (a 1-based character column within the line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at column {column}")]
pub struct ParseError {
    /// What the parser expected or found.
    pub message: String,
    /// 1-based character column.
    pub column: usize,
}

/// What a checked line holds, as far as a session file cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineShape {
    /// An object with `"_type": "metadata"`: a session header.
    Metadata,
    /// An object with a string `role`: a message.
    Message,
    /// An object that is neither.
    ObjectWithoutRole,
    /// Valid JSON that is not an object.
    NotObject,
}

/// Parses a whole document.
pub(super) fn parse(text: &str) -> Result<Json, ParseError> {
    let mut p = Parser::new(text.as_bytes());
    p.ws();
    let v = p.value::<true>()?;
    p.ws();
    p.end()?;
    Ok(v)
}

/// Checks that `text` is one JSON document and says what shape it has, without building it.
pub fn validate(text: &str) -> Result<LineShape, ParseError> {
    let mut p = Parser::new(text.as_bytes());
    p.ws();
    let shape = if p.peek() == Some(b'{') {
        p.top_level_object()?
    } else {
        p.value::<false>()?;
        LineShape::NotObject
    };
    p.ws();
    p.end()?;
    Ok(shape)
}

struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(b: &'a [u8]) -> Self {
        Parser {
            b,
            pos: 0,
            depth: 0,
        }
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        // Report a character column, not a byte offset: that is what a person counts in an editor.
        let upto = &self.b[..self.pos.min(self.b.len())];
        let column = String::from_utf8_lossy(upto).chars().count() + 1;
        ParseError {
            message: message.into(),
            column,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn end(&self) -> Result<(), ParseError> {
        if self.pos == self.b.len() {
            Ok(())
        } else {
            Err(self.err("extra data after the JSON value"))
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), ParseError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format!("expected {what}")))
        }
    }

    fn literal(&mut self, word: &str) -> bool {
        if self.b[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn value<const BUILD: bool>(&mut self) -> Result<Json, ParseError> {
        match self.peek() {
            Some(b'{') => self.object::<BUILD>(),
            Some(b'[') => self.array::<BUILD>(),
            Some(b'"') => {
                if BUILD {
                    let mut s = String::new();
                    self.string(Some(&mut s))?;
                    Ok(Json::String(s))
                } else {
                    self.string(None)?;
                    Ok(Json::Null)
                }
            }
            Some(b'-' | b'0'..=b'9' | b'N' | b'I') => {
                let text = self.number()?;
                Ok(if BUILD {
                    Json::Number(Number::from_checked_text(text))
                } else {
                    Json::Null
                })
            }
            Some(b't') if self.literal("true") => Ok(Json::Bool(true)),
            Some(b'f') if self.literal("false") => Ok(Json::Bool(false)),
            Some(b'n') if self.literal("null") => Ok(Json::Null),
            None => Err(self.err("expected a value, found the end of the line")),
            Some(_) => Err(self.err("expected a value")),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn object<const BUILD: bool>(&mut self) -> Result<Json, ParseError> {
        self.enter()?;
        self.pos += 1;
        let mut obj = Object::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                if self.peek() != Some(b'"') {
                    return Err(self.err("expected a property name in double quotes"));
                }
                let mut key = String::new();
                self.string(BUILD.then_some(&mut key))?;
                self.ws();
                self.expect(b':', "':' after a property name")?;
                self.ws();
                let v = self.value::<BUILD>()?;
                if BUILD {
                    obj.insert(key, v);
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or '}'")),
                }
            }
        }
        self.depth -= 1;
        Ok(if BUILD { Json::Object(obj) } else { Json::Null })
    }

    fn array<const BUILD: bool>(&mut self) -> Result<Json, ParseError> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                let v = self.value::<BUILD>()?;
                if BUILD {
                    items.push(v);
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or ']'")),
                }
            }
        }
        self.depth -= 1;
        Ok(if BUILD {
            Json::Array(items)
        } else {
            Json::Null
        })
    }

    /// The top level of a line being checked: like `object::<false>`, but notes `_type` and `role`.
    fn top_level_object(&mut self) -> Result<LineShape, ParseError> {
        self.enter()?;
        self.pos += 1;
        let (mut metadata, mut role) = (false, false);
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                if self.peek() != Some(b'"') {
                    return Err(self.err("expected a property name in double quotes"));
                }
                let key = self.string_cow()?;
                self.ws();
                self.expect(b':', "':' after a property name")?;
                self.ws();
                match (&*key, self.peek()) {
                    ("_type", Some(b'"')) => metadata = self.string_cow()? == "metadata",
                    ("_type", _) => {
                        metadata = false;
                        self.value::<false>()?;
                    }
                    ("role", next) => {
                        role = next == Some(b'"');
                        self.value::<false>()?;
                    }
                    _ => {
                        self.value::<false>()?;
                    }
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or '}'")),
                }
            }
        }
        self.depth -= 1;
        Ok(if metadata {
            LineShape::Metadata
        } else if role {
            LineShape::Message
        } else {
            LineShape::ObjectWithoutRole
        })
    }

    /// A string as borrowed text when it has no escapes, decoded otherwise.
    fn string_cow(&mut self) -> Result<std::borrow::Cow<'a, str>, ParseError> {
        let start = self.pos + 1;
        let plain = self.string(None)?;
        if plain {
            let raw = &self.b[start..self.pos - 1];
            // The input came from a &str and the run has no escapes, so it is valid UTF-8.
            return Ok(std::borrow::Cow::Borrowed(
                std::str::from_utf8(raw).unwrap_or_default(),
            ));
        }
        self.pos = start - 1;
        let mut s = String::new();
        self.string(Some(&mut s))?;
        Ok(std::borrow::Cow::Owned(s))
    }

    /// Reads a string starting at its opening quote; decodes into `out` when given.
    /// Returns whether the string had no escapes.
    fn string(&mut self, mut out: Option<&mut String>) -> Result<bool, ParseError> {
        self.pos += 1;
        let mut plain = true;
        loop {
            let rest = &self.b[self.pos..];
            let Some(i) = find_special(rest) else {
                return Err(self.err("unterminated string"));
            };
            if let Some(o) = out.as_deref_mut() {
                // `rest[..i]` is whole characters: it ends before an ASCII byte of the original &str.
                o.push_str(std::str::from_utf8(&rest[..i]).unwrap_or_default());
            }
            self.pos += i;
            match rest[i] {
                b'"' => {
                    self.pos += 1;
                    return Ok(plain);
                }
                b'\\' => {
                    plain = false;
                    self.escape(out.as_deref_mut())?;
                }
                _ => return Err(self.err("control character inside a string (must be escaped)")),
            }
        }
    }

    fn escape(&mut self, out: Option<&mut String>) -> Result<(), ParseError> {
        let c = match self.b.get(self.pos + 1) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 2;
                let hi = self.hex4()?;
                let c = if (0xD800..0xDC00).contains(&hi) {
                    if !(self.b[self.pos..].starts_with(b"\\u")) {
                        return Err(self.err("lone UTF-16 surrogate in \\u escape"));
                    }
                    self.pos += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return Err(self.err("lone UTF-16 surrogate in \\u escape"));
                    }
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else if (0xDC00..0xE000).contains(&hi) {
                    return Err(self.err("lone UTF-16 surrogate in \\u escape"));
                } else {
                    hi
                };
                let ch = char::from_u32(c).ok_or_else(|| self.err("invalid \\u escape"))?;
                if let Some(o) = out {
                    o.push(ch);
                }
                return Ok(());
            }
            _ => return Err(self.err("invalid escape")),
        };
        self.pos += 2;
        if let Some(o) = out {
            o.push(c);
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self
            .b
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("invalid \\u escape"))?;
        let mut v = 0u32;
        for &d in digits {
            let n = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.err("invalid \\u escape"))?;
            v = v * 16 + n;
        }
        self.pos += 4;
        Ok(v)
    }

    /// A number by JSON's grammar, or Python's extra `NaN`, `Infinity` and `-Infinity`.
    fn number(&mut self) -> Result<&'a str, ParseError> {
        let start = self.pos;
        for word in ["NaN", "Infinity", "-Infinity"] {
            if self.literal(word) {
                return Ok(self.text_from(start));
            }
        }
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("expected a value")),
        }
        if self.peek() == Some(b'.') && matches!(self.b.get(self.pos + 1), Some(b'0'..=b'9')) {
            self.pos += 1;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            let save = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if matches!(self.peek(), Some(b'0'..=b'9')) {
                self.digits();
            } else {
                // Python's scanner stops before an exponent without digits; the caller then sees extra data.
                self.pos = save;
            }
        }
        Ok(self.text_from(start))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn text_from(&self, start: usize) -> &'a str {
        // Only ASCII bytes were consumed since `start`.
        std::str::from_utf8(&self.b[start..self.pos]).unwrap_or_default()
    }
}

/// The first byte that ends a run of plain string content: `"`, `\\` or a control character (< 0x20).
///
/// Strings are most of a session line, so this is the validator's inner loop. It looks at eight bytes at a
/// time (SWAR): for each target, a byte-wise "is zero" / "is less than" test on a `u64`. The lowest flagged
/// byte is always a real match (borrows only propagate upwards), so its index is exact.
fn find_special(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while i + 8 <= b.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&b[i..i + 8]);
        let v = u64::from_le_bytes(word);
        let quote = v ^ (ONES * u64::from(b'"'));
        let backslash = v ^ (ONES * u64::from(b'\\'));
        let hits = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (v.wrapping_sub(ONES * 0x20) & !v);
        let hits = hits & HIGHS;
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| i + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_special_agrees_with_the_plain_loop() {
        let samples: [&[u8]; 6] = [
            b"plain text without specials at all, long enough",
            b"abcdefg\"hij",
            "ünïcödé 🙂 text \\ more".as_bytes(),
            b"\x1fcontrol first",
            b"1234567\x7f\x80\xff\"",
            b"",
        ];
        for s in samples {
            for start in 0..s.len().min(9) {
                let slow = s[start..]
                    .iter()
                    .position(|&c| c == b'"' || c == b'\\' || c < 0x20);
                assert_eq!(find_special(&s[start..]), slow, "{s:?} from {start}");
            }
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(
            validate(r#"{"_type": "metadata", "key": "k"}"#),
            Ok(LineShape::Metadata)
        );
        assert_eq!(
            validate(r#"{"role": "user", "content": "x"}"#),
            Ok(LineShape::Message)
        );
        assert_eq!(validate(r#"{"\u0072ole": "user"}"#), Ok(LineShape::Message));
        assert_eq!(validate(r#"{"role": 3}"#), Ok(LineShape::ObjectWithoutRole));
        assert_eq!(
            validate(r#"{"content": "x"}"#),
            Ok(LineShape::ObjectWithoutRole)
        );
        assert_eq!(validate("[1, 2, 3]"), Ok(LineShape::NotObject));
        assert!(validate("{this is not json").is_err());
        assert!(validate(r#"{"a": 1} x"#).is_err());
    }

    #[test]
    fn rejects_what_python_rejects() {
        for bad in [
            "",
            "01",
            "1.",
            ".5",
            "+1",
            "[1,]",
            "{\"a\":1,}",
            "\"\u{1}\"",
            "\"\\x\"",
            "tru",
            "[",
            "{\"a\"}",
        ] {
            assert!(Json::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn accepts_what_python_accepts() {
        for good in [
            "NaN",
            "-Infinity",
            "1E5",
            "-0",
            "1e-05",
            "[]",
            "{}",
            " {\"a\" : [1 , 2]} ",
            "\"\\ud83d\\ude00\"",
        ] {
            assert!(Json::parse(good).is_ok(), "{good:?} should parse");
        }
    }

    #[test]
    fn lone_surrogates_are_refused() {
        assert!(Json::parse(r#""\ud83d""#).is_err());
        assert!(Json::parse(r#""\ude00x""#).is_err());
    }

    #[test]
    fn duplicate_keys_keep_first_position_and_last_value() {
        let v = Json::parse(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        assert_eq!(v.to_python(), r#"{"a": 3, "b": 2}"#);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(10_000);
        assert!(Json::parse(&deep).is_err());
        assert!(validate(&deep).is_err());
    }

    #[test]
    fn error_column_counts_characters() {
        let e = Json::parse("{\"é\": x}").unwrap_err();
        assert_eq!(e.column, 7);
    }
}
