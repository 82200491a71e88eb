//! Repairs the outgoing copy of the history before it is sent (the session file is never changed).
//!
//! Three rules, so a request never contains a tool call without its result (which OpenAI-compatible APIs
//! reject) and old tool output does not crowd out the conversation:
//! 1. a tool result whose call is not in the history is dropped (its call was consolidated away, for example);
//! 2. a tool call without a result gets a synthetic error result right after the other results of its message;
//! 3. tool results larger than [`LARGE_TOOL_RESULT_CHARS`] are shortened to `[<tool>: truncated, was N chars]`,
//!    except the last two tool results, which stay whole.

use crate::json::{Json, Object};

/// Tool results above this size count as large for rule 3.
pub const LARGE_TOOL_RESULT_CHARS: usize = 2_000;

/// Text of the synthetic result for a call that has none.
pub const MISSING_RESULT: &str =
    "Error: no result was recorded for this tool call (the turn was interrupted).";

fn role(m: &Json) -> Option<&str> {
    m.as_object()?.get("role")?.as_str()
}

/// `(id, function name)` of each tool call of an assistant message.
fn calls(m: &Json) -> Vec<(String, String)> {
    let Some(calls) = m
        .as_object()
        .and_then(|o| o.get("tool_calls"))
        .and_then(Json::as_array)
    else {
        return Vec::new();
    };
    calls
        .iter()
        .filter_map(|c| {
            let c = c.as_object()?;
            let id = c.get("id")?.as_str()?.to_owned();
            let name = c
                .get("function")
                .and_then(Json::as_object)
                .and_then(|f| f.get("name"))
                .and_then(Json::as_str);
            Some((id, name.unwrap_or("tool").to_owned()))
        })
        .collect()
}

fn result_id(m: &Json) -> Option<&str> {
    m.as_object()?.get("tool_call_id")?.as_str()
}

/// Applies the three rules to `history` (messages in the `get_history` shape).
pub fn repair(history: Vec<Json>) -> Vec<Json> {
    let mut out: Vec<Json> = Vec::with_capacity(history.len());
    // Calls of the latest assistant message still waiting for a result, with their tool names.
    let mut pending: Vec<(String, String)> = Vec::new();
    for m in history {
        if role(&m) == Some("tool") {
            let id = result_id(&m).unwrap_or_default().to_owned();
            if let Some(pos) = pending.iter().position(|(p, _)| *p == id) {
                pending.remove(pos);
                out.push(m);
            }
            continue;
        }
        flush_missing(&mut out, &mut pending);
        if role(&m) == Some("assistant") {
            pending = calls(&m);
        }
        out.push(m);
    }
    flush_missing(&mut out, &mut pending);
    shorten_old_results(&mut out);
    out
}

fn flush_missing(out: &mut Vec<Json>, pending: &mut Vec<(String, String)>) {
    for (id, name) in pending.drain(..) {
        out.push(tool_result(&id, &name, MISSING_RESULT));
    }
}

/// A tool message in nanobot's key order: `role`, `tool_call_id`, `name`, `content`.
pub fn tool_result(id: &str, name: &str, content: &str) -> Json {
    let mut o = Object::new();
    o.insert("role", Json::str("tool"));
    o.insert("tool_call_id", Json::str(id));
    o.insert("name", Json::str(name));
    o.insert("content", Json::str(content));
    Json::Object(o)
}

fn shorten_old_results(messages: &mut [Json]) {
    let tool_positions: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| role(m) == Some("tool"))
        .map(|(i, _)| i)
        .collect();
    let keep_from = tool_positions.len().saturating_sub(2);
    for &i in &tool_positions[..keep_from] {
        let Some(o) = messages[i].as_object_mut() else {
            continue;
        };
        let len = o
            .get("content")
            .and_then(Json::as_str)
            .map_or(0, |c| c.chars().count());
        if len > LARGE_TOOL_RESULT_CHARS {
            let name = o
                .get("name")
                .and_then(Json::as_str)
                .unwrap_or("tool")
                .to_owned();
            o.insert(
                "content",
                Json::str(format!("[{name}: truncated, was {len} chars]")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(s: &str) -> Json {
        Json::parse(s).unwrap()
    }

    fn call(id: &str) -> String {
        format!(
            r#"{{"id": "{id}", "type": "function", "function": {{"name": "exec", "arguments": "{{}}"}}}}"#
        )
    }

    #[test]
    fn orphan_results_are_dropped_and_missing_results_added() {
        let h = vec![
            j(r#"{"role": "tool", "tool_call_id": "gone", "name": "exec", "content": "old"}"#),
            j(r#"{"role": "user", "content": "go"}"#),
            j(&format!(
                r#"{{"role": "assistant", "content": "", "tool_calls": [{}, {}]}}"#,
                call("a"),
                call("b")
            )),
            j(r#"{"role": "tool", "tool_call_id": "b", "name": "exec", "content": "B"}"#),
            j(r#"{"role": "user", "content": "next"}"#),
            j(&format!(
                r#"{{"role": "assistant", "content": "", "tool_calls": [{}]}}"#,
                call("c")
            )),
        ];
        let out = repair(h);
        let roles: Vec<String> = out
            .iter()
            .map(|m| format!("{}:{}", role(m).unwrap(), result_id(m).unwrap_or("")))
            .collect();
        assert_eq!(
            roles,
            [
                "user:",
                "assistant:",
                "tool:b",
                "tool:a",
                "user:",
                "assistant:",
                "tool:c"
            ]
        );
        assert_eq!(
            out[3].as_object().unwrap().get("content"),
            Some(&Json::str(MISSING_RESULT))
        );
    }

    #[test]
    fn old_large_results_are_shortened_but_the_last_two_stay() {
        let big = "x".repeat(LARGE_TOOL_RESULT_CHARS + 1);
        let mut h = vec![j(r#"{"role": "user", "content": "go"}"#)];
        for id in ["a", "b", "c"] {
            h.push(j(&format!(
                r#"{{"role": "assistant", "content": "", "tool_calls": [{}]}}"#,
                call(id)
            )));
            h.push(j(&format!(
                r#"{{"role": "tool", "tool_call_id": "{id}", "name": "exec", "content": "{big}"}}"#
            )));
        }
        let out = repair(h);
        let contents: Vec<usize> = out
            .iter()
            .filter(|m| role(m) == Some("tool"))
            .map(|m| {
                m.as_object()
                    .unwrap()
                    .get("content")
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .len()
            })
            .collect();
        assert_eq!(
            contents,
            [
                format!("[exec: truncated, was {} chars]", big.len()).len(),
                big.len(),
                big.len()
            ]
        );
    }
}
