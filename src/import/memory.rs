//! Memory: `MEMORY.md` copied, `history.jsonl` (0.3.x) turned into `HISTORY.md` entries.
//!
//! Each `history.jsonl` line `{"cursor", "timestamp": "YYYY-MM-DD HH:MM", "content", …}` becomes the classic
//! entry `[timestamp] content`, appended as `entry.rstrip() + "\n\n"` like every consolidation does. Entries
//! already in our `HISTORY.md` are not appended again, so a second import adds nothing. The new file content
//! (old text + new entries) is written atomically, so an interrupted import leaves the old file whole.
//! A classic `HISTORY.md` in nanobot's workspace is copied when we have none.

use std::fs;

use super::{Item, Kind, Options, Outcome, Source, create_new, read_text};
use crate::json::Json;
use crate::session::write_atomic;

/// The memory part of the import.
pub fn import(source: &Source, opts: &Options) -> Vec<Item> {
    let mut items = Vec::new();
    let src = source.workspace.join("memory");
    let dst = opts.workspace.join("memory");
    if !src.is_dir() {
        return items;
    }
    for name in ["MEMORY.md", "HISTORY.md"] {
        let from = src.join(name);
        if from.is_file() {
            items.push(copy_file(&from, &dst.join(name), opts.apply, source));
        }
    }
    let jsonl = src.join("history.jsonl");
    if jsonl.is_file() {
        items.push(history(&jsonl, &dst.join("HISTORY.md"), opts.apply, source));
    }
    items
}

fn what(source: &Source, p: &std::path::Path) -> String {
    p.strip_prefix(&source.root)
        .unwrap_or(p)
        .display()
        .to_string()
}

fn copy_file(from: &std::path::Path, to: &std::path::Path, apply: bool, source: &Source) -> Item {
    let label = what(source, from);
    let bytes = match fs::read(from) {
        Ok(b) => b,
        Err(e) => return Item::skipped(Kind::Memory, label, format!("cannot read it: {e}")),
    };
    if to.exists() {
        if fs::read(to).ok().as_deref() == Some(&bytes[..]) {
            return Item::new(
                Kind::Memory,
                label,
                Outcome::Exists {
                    target: to.to_path_buf(),
                },
            );
        }
        return Item::skipped(
            Kind::Memory,
            label,
            format!(
                "{} exists with other content (never overwritten; merge by hand)",
                to.display()
            ),
        );
    }
    if !apply {
        return Item::new(
            Kind::Memory,
            label,
            Outcome::Import {
                target: to.to_path_buf(),
            },
        );
    }
    match create_new(to, &bytes) {
        Ok(true) => Item::new(
            Kind::Memory,
            label,
            Outcome::Import {
                target: to.to_path_buf(),
            },
        ),
        Ok(false) => Item::new(
            Kind::Memory,
            label,
            Outcome::Exists {
                target: to.to_path_buf(),
            },
        ),
        Err(e) => Item::skipped(
            Kind::Memory,
            label,
            format!("cannot write {}: {e}", to.display()),
        ),
    }
}

/// The classic entries of a `history.jsonl` text, and a note per unusable line.
pub fn entries(text: &str) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let parsed = Json::parse(line);
        let Some(obj) = parsed.as_ref().ok().and_then(Json::as_object) else {
            notes.push(format!("line {}: not a JSON object; not imported", i + 1));
            continue;
        };
        let (Some(ts), Some(content)) = (
            obj.get("timestamp").and_then(Json::as_str),
            obj.get("content").and_then(Json::as_str),
        ) else {
            notes.push(format!(
                "line {}: no timestamp or content string; not imported",
                i + 1
            ));
            continue;
        };
        if content.trim().is_empty() {
            continue;
        }
        out.push(format!("[{ts}] {}\n\n", content.trim_end()));
    }
    (out, notes)
}

fn history(
    jsonl: &std::path::Path,
    target: &std::path::Path,
    apply: bool,
    source: &Source,
) -> Item {
    let label = what(source, jsonl);
    let text = match read_text(jsonl) {
        Ok(t) => t,
        Err(reason) => return Item::skipped(Kind::Memory, label, reason),
    };
    let (all, notes) = entries(&text);
    // In a dry run after a HISTORY.md copy that has not happened yet, compare with the source's copy.
    let existing = match fs::read(target) {
        Ok(b) => match String::from_utf8(b) {
            Ok(s) => s,
            Err(_) => {
                return Item::skipped(
                    Kind::Memory,
                    label,
                    format!(
                        "{} is not UTF-8 text; not appending to it",
                        target.display()
                    ),
                );
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Item::skipped(
                Kind::Memory,
                label,
                format!("cannot read {}: {e}", target.display()),
            );
        }
    };
    let mut added = String::new();
    let mut count = 0;
    for e in &all {
        // Two equal entries in the source are both kept (nanobot wrote both); an entry already in our file is
        // not appended again, which makes a second import a no-op.
        if !existing.contains(e.as_str()) {
            added.push_str(e);
            count += 1;
        }
    }
    let mut item = if count == 0 {
        Item::new(
            Kind::Memory,
            label,
            Outcome::Exists {
                target: target.to_path_buf(),
            },
        )
        .detail(format!(
            "all {} entries are already in HISTORY.md",
            all.len()
        ))
    } else if !apply {
        Item::new(
            Kind::Memory,
            label,
            Outcome::Import {
                target: target.to_path_buf(),
            },
        )
        .detail(format!("{count} of {} entries to append", all.len()))
    } else {
        let mut whole = existing.clone();
        // Keep the blank line between entries even if the old file lacks its final one.
        if !whole.is_empty() && !whole.ends_with("\n\n") {
            whole.push_str(if whole.ends_with('\n') { "\n" } else { "\n\n" });
        }
        whole.push_str(&added);
        let result = match target.parent() {
            Some(d) => fs::create_dir_all(d).map_err(|e| e.to_string()),
            None => Ok(()),
        }
        .and_then(|_| write_atomic(target, &[whole.as_bytes()], true).map_err(|e| e.to_string()));
        match result {
            Ok(()) => Item::new(
                Kind::Memory,
                label,
                Outcome::Import {
                    target: target.to_path_buf(),
                },
            )
            .detail(format!("{count} of {} entries appended", all.len())),
            Err(e) => Item::skipped(Kind::Memory, label, e),
        }
    };
    item.details.extend(notes);
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_classic_paragraphs() {
        let text = "{\"cursor\": 1, \"timestamp\": \"2026-11-22 09:50\", \"content\": \"a\\nb  \\n\"}\n\nnot json\n{\"cursor\": 2}\n";
        let (e, notes) = entries(text);
        assert_eq!(e, vec!["[2026-11-22 09:50] a\nb\n\n".to_string()]);
        assert_eq!(notes.len(), 2);
    }
}
