//! Archived messages as text: nanobot's one-line-per-message form (for `save_memory` and `[RAW]` entries), the
//! flat `[User]: …` form the summary model reads, and the files the tools touched.

use std::collections::BTreeSet;

use crate::json::Json;

/// Longest tool result quoted in the summary transcript; the summary needs the gist, not whole files.
const MAX_TOOL_RESULT_CHARS: usize = 2_000;

/// nanobot's archive lines: `[<timestamp first 16 chars>] ROLE [tools: a, b]: content`, one per message that
/// has content.
pub fn archive_lines(messages: &[Json]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| {
            let m = m.as_object()?;
            let content = content_text(m.get("content")?);
            if content.is_empty() {
                return None;
            }
            let stamp: String = m
                .get("timestamp")
                .and_then(Json::as_str)
                .unwrap_or("?")
                .chars()
                .take(16)
                .collect();
            let role = m.get("role").and_then(Json::as_str).unwrap_or("?");
            let tools = m
                .get("tools_used")
                .and_then(Json::as_array)
                .filter(|t| !t.is_empty())
                .map(|t| {
                    let names: Vec<&str> = t.iter().filter_map(Json::as_str).collect();
                    format!(" [tools: {}]", names.join(", "))
                })
                .unwrap_or_default();
            Some(format!(
                "[{stamp}] {}{tools}: {content}",
                role.to_uppercase()
            ))
        })
        .collect()
}

/// The flat transcript the summary model reads: `[User]: …`, `[Assistant]: …`, `[Assistant tool calls]:
/// name(args)`, `[Tool result]: …`, so it summarises instead of continuing the conversation.
pub fn flat_text(messages: &[Json]) -> String {
    let mut out = Vec::new();
    for m in messages.iter().filter_map(Json::as_object) {
        let content = m.get("content").map(content_text).unwrap_or_default();
        match m.get("role").and_then(Json::as_str) {
            Some("user") => out.push(format!("[User]: {content}")),
            Some("assistant") => {
                if !content.is_empty() {
                    out.push(format!("[Assistant]: {content}"));
                }
                let calls: Vec<String> = tool_calls(m.get("tool_calls"))
                    .map(|(name, args)| format!("{name}({})", call_arguments(args)))
                    .collect();
                if !calls.is_empty() {
                    out.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("tool") => out.push(format!(
                "[Tool result]: {}",
                crate::tools::truncate_chars(&content, MAX_TOOL_RESULT_CHARS, 0)
            )),
            Some("system") => out.push(format!("[System]: {content}")),
            _ => {}
        }
    }
    out.join("\n")
}

/// Files the tools read and wrote in these messages: `(read, modified)`, from the `path` argument of
/// `read_file` (read) and `write_file` / `edit_file` (modified).
pub fn file_operations(messages: &[Json]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut read, mut modified) = (BTreeSet::new(), BTreeSet::new());
    for m in messages.iter().filter_map(Json::as_object) {
        for (name, args) in tool_calls(m.get("tool_calls")) {
            let Some(path) = Json::parse(args)
                .ok()
                .and_then(|a| a.as_object()?.get("path")?.as_str().map(str::to_owned))
            else {
                continue;
            };
            match name {
                "read_file" => read.insert(path),
                "write_file" | "edit_file" => modified.insert(path),
                _ => false,
            };
        }
    }
    (read, modified)
}

/// `(name, arguments text)` of each call in a `tool_calls` array.
fn tool_calls(calls: Option<&Json>) -> impl Iterator<Item = (&str, &str)> {
    calls
        .and_then(Json::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| {
            let f = c.as_object()?.get("function")?.as_object()?;
            let name = f.get("name")?.as_str()?;
            let args = f.get("arguments").and_then(Json::as_str).unwrap_or("{}");
            Some((name, args))
        })
}

/// `key=value, …` for a JSON object of arguments (values as JSON), else the text as it came.
fn call_arguments(args: &str) -> String {
    match Json::parse(args) {
        Ok(Json::Object(o)) => o
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_python()))
            .collect::<Vec<_>>()
            .join(", "),
        _ => args.to_owned(),
    }
}

/// The text of a message's content: a string as is, the text parts of a multimodal list (images as
/// `[image]`), nothing for `null`.
pub fn content_text(content: &Json) -> String {
    match content {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        Json::Array(parts) => parts
            .iter()
            .filter_map(|p| {
                let p = p.as_object()?;
                match p.get("type").and_then(Json::as_str) {
                    Some("text") => p.get("text").and_then(Json::as_str).map(str::to_owned),
                    Some("image_url") => Some("[image]".to_owned()),
                    _ => None,
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_python(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(lines: &[&str]) -> Vec<Json> {
        lines.iter().map(|l| Json::parse(l).unwrap()).collect()
    }

    #[test]
    fn archive_lines_match_nanobot() {
        let m = parse_all(&[
            r#"{"role": "user", "content": "hi there", "timestamp": "2026-02-01T10:00:00.123456"}"#,
            r#"{"role": "assistant", "content": null, "tool_calls": []}"#,
            r#"{"role": "assistant", "content": "done", "timestamp": "2026-02-01T10:00:05.1", "tools_used": ["exec", "read_file"]}"#,
            r#"{"role": "tool", "content": "", "timestamp": "2026-02-01T10:00:06.1"}"#,
        ]);
        assert_eq!(
            archive_lines(&m),
            [
                "[2026-02-01T10:00] USER: hi there",
                "[2026-02-01T10:00] ASSISTANT [tools: exec, read_file]: done"
            ]
        );
    }

    #[test]
    fn flat_text_is_not_a_chat() {
        let m = parse_all(&[
            r#"{"role": "user", "content": "What pods are running?"}"#,
            r#"{"role": "assistant", "content": "Let me check.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{\"command\": \"kubectl get pods\"}"}}]}"#,
            r#"{"role": "tool", "tool_call_id": "c1", "name": "exec", "content": "NAME READY\nnginx 1/1"}"#,
            r#"{"role": "assistant", "content": "One pod: nginx."}"#,
        ]);
        assert_eq!(
            flat_text(&m),
            "[User]: What pods are running?\n[Assistant]: Let me check.\n\
             [Assistant tool calls]: exec(command=\"kubectl get pods\")\n\
             [Tool result]: NAME READY\nnginx 1/1\n[Assistant]: One pod: nginx."
        );
    }

    #[test]
    fn file_operations_come_from_tool_calls() {
        let call = |name: &str, path: &str| {
            format!(
                r#"{{"role": "assistant", "content": null, "tool_calls": [{{"id": "x", "type": "function", "function": {{"name": "{name}", "arguments": "{{\"path\": \"{path}\"}}"}}}}]}}"#
            )
        };
        let lines = [
            call("read_file", "a.md"),
            call("edit_file", "b.md"),
            call("write_file", "c.md"),
            call("list_dir", "d"),
        ];
        let m: Vec<Json> = lines.iter().map(|l| Json::parse(l).unwrap()).collect();
        let (read, modified) = file_operations(&m);
        assert_eq!(read.into_iter().collect::<Vec<_>>(), ["a.md"]);
        assert_eq!(modified.into_iter().collect::<Vec<_>>(), ["b.md", "c.md"]);
    }
}
