//! Writing JSON exactly as Python's `json.dumps(obj, ensure_ascii=False[, indent=N])` does.

use super::Json;

/// `json.dumps(v, ensure_ascii=False)`: `", "` between items, `": "` after keys, no other whitespace.
pub(super) fn write_compact(v: &Json, out: &mut String) {
    match v {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_compact(item, out);
            }
            out.push(']');
        }
        Json::Object(obj) => {
            out.push('{');
            for (i, (k, item)) in obj.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(k, out);
                out.push_str(": ");
                write_compact(item, out);
            }
            out.push('}');
        }
        scalar => write_scalar(scalar, out),
    }
}

/// `json.dumps(v, ensure_ascii=False, indent=n)`: items on their own lines, `","` at line ends, empty
/// containers as `[]` and `{}`.
pub(super) fn write_indented(v: &Json, indent: usize, level: usize, out: &mut String) {
    let newline = |out: &mut String, level: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', indent * level));
    };
    match v {
        Json::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, level + 1);
                write_indented(item, indent, level + 1, out);
            }
            newline(out, level);
            out.push(']');
        }
        Json::Object(obj) if !obj.is_empty() => {
            out.push('{');
            for (i, (k, item)) in obj.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, level + 1);
                write_str(k, out);
                out.push_str(": ");
                write_indented(item, indent, level + 1, out);
            }
            newline(out, level);
            out.push('}');
        }
        other => write_compact(other, out),
    }
}

fn write_scalar(v: &Json, out: &mut String) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => out.push_str(n.as_str()),
        Json::String(s) => write_str(s, out),
        Json::Array(_) | Json::Object(_) => write_compact(v, out),
    }
}

/// A string with Python's escapes: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other controls as `\u00xx`
/// (lowercase hex); everything else, non-ASCII and U+2028/U+2029 included, as raw UTF-8.
fn write_str(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use crate::json::Json;

    #[test]
    fn escapes_like_python() {
        let v = Json::str("a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{1f}j\u{7f}k/\u{2028}\u{2029}🙂");
        assert_eq!(
            v.to_python(),
            "\"a\\\"b\\\\c\\nd\\re\\tf\\bg\\fh\\u0001i\\u001fj\u{7f}k/\u{2028}\u{2029}🙂\""
        );
    }

    #[test]
    fn indent_like_python() {
        let v = Json::parse(r#"{"a": [], "b": {}, "c": [1, {"d": null}]}"#).unwrap();
        assert_eq!(
            v.to_python_indent(2),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": null\n    }\n  ]\n}"
        );
    }
}
