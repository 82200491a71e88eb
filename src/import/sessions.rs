//! Sessions: 0.3.x files become classic files; classic files are copied as they are.
//!
//! A 0.3.x file (`<base64url(key) without padding>.jsonl`) is converted line by line:
//! - the `{"_type": "metadata", …}` record becomes classic line 1 with nanobot 0.1.4's keys in its order
//!   (`_type, key, created_at, updated_at, metadata, last_consolidated`), the watermark taken from
//!   `last_archived` (same meaning) and clamped to the number of messages; other header keys are dropped
//!   and listed;
//! - a `{"_type": "provider_state", …}` record (the provider's conversation state, useless to another
//!   program) is dropped, and the report says so;
//! - every message is kept as its JSON value, extra fields (`latency_ms`, `_channel_delivery`, `media`, …)
//!   included, in the form `json.dumps` writes (nanobot 0.1.4 carries unknown keys too);
//! - a line that is not a JSON object with a string `role` cannot be a classic message: it goes, byte for
//!   byte, to `<file name>.damaged` beside the imported file (what `sessions repair` does), and the report
//!   counts it. A file that is not UTF-8, has no key, or whose key cannot name a file is skipped.
//!
//! File names follow the store's rule for keys nanobot would mix: the key on line 1 of an existing file owns
//! the nanobot name; another key that maps there gets the stable alternate name.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use super::{Item, Kind, Options, Outcome, Source, create_new, read_text};
use crate::json::{Json, Object};
use crate::session::{key as session_key, python_space, timestamp};

/// The sessions part of the import.
pub fn import(source: &Source, opts: &Options) -> Vec<Item> {
    let mut items = Vec::new();
    let target_dir = opts.workspace.join("sessions");
    // File name → key, for files this run writes (a dry run writes nothing but must plan the same names).
    let mut planned: HashMap<String, String> = HashMap::new();
    let mut seen_keys: HashMap<String, PathBuf> = HashMap::new();

    for file in new_layout_files(source, &mut items) {
        let what = display(&source.root, &file);
        let converted = match convert(&file) {
            Ok(c) => c,
            Err(reason) => {
                items.push(Item::skipped(Kind::Session, what, reason));
                continue;
            }
        };
        if let Some(first) = seen_keys.get(&converted.key) {
            items.push(Item::skipped(
                Kind::Session,
                what,
                format!(
                    "session {:?} was already imported from {}",
                    converted.key,
                    display(&source.root, first)
                ),
            ));
            continue;
        }
        seen_keys.insert(converted.key.clone(), file.clone());
        let target = match target_name(&target_dir, &converted.key, &planned) {
            Ok(t) => t,
            Err(reason) => {
                items.push(Item::skipped(Kind::Session, what, reason));
                continue;
            }
        };
        let label = format!("{:?} ({what})", converted.key);
        let mut item = match target {
            Target::Exists(path) => {
                Item::new(Kind::Session, label, Outcome::Exists { target: path })
            }
            Target::Free(path) => {
                let name = file_name(&path);
                planned.insert(name, converted.key.clone());
                write(&path, &converted, opts.apply, label)
            }
        };
        item.details.extend(converted.notes);
        items.push(item);
    }

    // Classic files (0.1.x layout) in nanobot's workspace: copied byte for byte.
    let classic_dir = source.workspace.join("sessions");
    if classic_dir.is_dir() && !same_dir(&classic_dir, &target_dir) {
        for file in jsonl_files(&classic_dir) {
            let what = display(&source.root, &file);
            let name = file_name(&file);
            let target = target_dir.join(&name);
            let key = first_line_key(&file);
            if target.exists() || planned.contains_key(&name) {
                let same = fs::read(&file).ok() == fs::read(&target).ok();
                items.push(if same || key.is_some() && key == first_line_key(&target) {
                    Item::new(Kind::Session, what, Outcome::Exists { target })
                } else {
                    Item::skipped(
                        Kind::Session,
                        what,
                        format!(
                            "{} exists and holds another conversation (never overwritten)",
                            target.display()
                        ),
                    )
                });
                continue;
            }
            if let Some(k) = &key
                && seen_keys.contains_key(k)
            {
                items.push(Item::skipped(
                    Kind::Session,
                    what,
                    format!("session {k:?} was already imported from the newer 0.3.x file"),
                ));
                continue;
            }
            let bytes = match fs::read(&file) {
                Ok(b) => b,
                Err(e) => {
                    items.push(Item::skipped(
                        Kind::Session,
                        what,
                        format!("cannot read it: {e}"),
                    ));
                    continue;
                }
            };
            planned.insert(name, key.unwrap_or_default());
            let outcome = if !opts.apply {
                Outcome::Import { target }
            } else {
                match create_new(&target, &bytes) {
                    Ok(true) => Outcome::Import { target },
                    Ok(false) => Outcome::Exists { target },
                    Err(e) => Outcome::Skipped {
                        reason: format!("cannot write {}: {e}", target.display()),
                    },
                }
            };
            items.push(
                Item::new(Kind::Session, what, outcome).detail("classic file, copied as it is"),
            );
        }
    }
    items
}

/// A converted 0.3.x session.
#[derive(Debug)]
pub struct Converted {
    /// The session key.
    pub key: String,
    /// The classic file's text.
    pub text: String,
    /// Lines that cannot be classic messages, byte for byte, for the `.damaged` sidecar.
    pub damaged: Vec<String>,
    /// What was dropped or changed.
    pub notes: Vec<String>,
}

/// Converts one 0.3.x session file.
pub fn convert(path: &Path) -> Result<Converted, String> {
    let text = read_text(path)?;
    let mut header: Option<Object> = None;
    let mut messages: Vec<Json> = Vec::new();
    let mut damaged = Vec::new();
    let mut notes = Vec::new();
    let mut provider_state = 0;
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim_matches(python_space);
        if line.is_empty() {
            continue;
        }
        let value = match Json::parse(line) {
            Ok(v) => v,
            Err(e) => {
                damaged.push(raw.to_owned());
                notes.push(format!(
                    "line {}: not valid JSON ({e}); kept in the .damaged sidecar",
                    i + 1
                ));
                continue;
            }
        };
        let Json::Object(obj) = value else {
            damaged.push(raw.to_owned());
            notes.push(format!(
                "line {}: not a JSON object; kept in the .damaged sidecar",
                i + 1
            ));
            continue;
        };
        match obj.get("_type").and_then(Json::as_str) {
            Some("metadata") => header = Some(obj),
            Some("provider_state") => provider_state += 1,
            Some(other) => {
                damaged.push(raw.to_owned());
                notes.push(format!(
                    "line {}: unknown record {other:?}; kept in the .damaged sidecar",
                    i + 1
                ));
            }
            None if obj.get("role").and_then(Json::as_str).is_some() => {
                messages.push(Json::Object(obj))
            }
            None => {
                damaged.push(raw.to_owned());
                notes.push(format!(
                    "line {}: a message without a role; kept in the .damaged sidecar",
                    i + 1
                ));
            }
        }
    }
    if provider_state > 0 {
        notes.push(
            "provider state line dropped (the provider's own resume state; nanobot 0.1.x has none)"
                .into(),
        );
    }
    let header = header.unwrap_or_default();
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let key = match header.get("key").and_then(Json::as_str) {
        Some(k) => k.to_owned(),
        None => match decode_base64url(&stem).and_then(|b| String::from_utf8(b).ok()) {
            Some(k) => {
                notes.push("no metadata line: key taken from the file name".into());
                k
            }
            None => {
                return Err(
                    "no metadata line and the file name is not a base64url session key".into(),
                );
            }
        },
    };
    session_key::file_name(&key).map_err(|e| format!("key {key:?} cannot name a file: {e}"))?;
    let first_timestamp = messages
        .first()
        .and_then(Json::as_object)
        .and_then(|m| m.get("timestamp"))
        .and_then(Json::as_str)
        .map(str::to_owned);
    let time = |name: &str| -> String {
        header
            .get(name)
            .and_then(Json::as_str)
            .map(str::to_owned)
            .or_else(|| first_timestamp.clone())
            .unwrap_or_else(timestamp::now_iso)
    };
    let watermark = header
        .get("last_archived")
        .or_else(|| header.get("last_consolidated"))
        .and_then(Json::as_u64)
        .unwrap_or(0);
    let clamped = usize::try_from(watermark)
        .unwrap_or(usize::MAX)
        .min(messages.len());
    if watermark as usize != clamped {
        notes.push(format!(
            "watermark {watermark} clamped to the {clamped} messages"
        ));
    }
    let dropped: BTreeSet<&str> = header
        .iter()
        .map(|(k, _)| k)
        .filter(|k| {
            !matches!(
                *k,
                "_type"
                    | "key"
                    | "created_at"
                    | "updated_at"
                    | "metadata"
                    | "last_consolidated"
                    | "last_archived"
            )
        })
        .collect();
    if !dropped.is_empty() {
        notes.push(format!(
            "line-1 field(s) without a classic equivalent dropped: {}",
            dropped.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut line1 = Object::new();
    line1.insert("_type", Json::str("metadata"));
    line1.insert("key", Json::str(key.clone()));
    line1.insert("created_at", Json::str(time("created_at")));
    line1.insert("updated_at", Json::str(time("updated_at")));
    line1.insert(
        "metadata",
        header
            .get("metadata")
            .filter(|m| m.as_object().is_some())
            .cloned()
            .unwrap_or(Json::Object(Object::new())),
    );
    line1.insert("last_consolidated", Json::from(clamped));
    let mut out = Json::Object(line1).to_python();
    out.push('\n');
    for m in &messages {
        m.write_python(&mut out);
        out.push('\n');
    }
    notes.insert(
        0,
        format!("{} messages, {clamped} consolidated", messages.len()),
    );
    Ok(Converted {
        key,
        text: out,
        damaged,
        notes,
    })
}

enum Target {
    Free(PathBuf),
    Exists(PathBuf),
}

/// Where `key` goes: its nanobot name, unless that holds (or will hold) another key, then its alternate name.
fn target_name(dir: &Path, key: &str, planned: &HashMap<String, String>) -> Result<Target, String> {
    let bad = |e: session_key::KeyError| format!("key {key:?} cannot name a file: {e}");
    for name in [
        session_key::file_name(key).map_err(bad)?,
        session_key::alternate_file_name(key).map_err(bad)?,
    ] {
        let path = dir.join(&name);
        let owner = match planned.get(&name) {
            Some(k) => Some(k.clone()),
            None if path.exists() => Some(first_line_key(&path).unwrap_or_default()),
            None => None,
        };
        match owner {
            None => return Ok(Target::Free(path)),
            Some(k) if k == key => return Ok(Target::Exists(path)),
            Some(_) => continue,
        }
    }
    Err(format!(
        "both {} and its alternate name hold other sessions",
        session_key::file_name(key).unwrap_or_default()
    ))
}

fn write(path: &Path, c: &Converted, apply: bool, label: String) -> Item {
    let side = crate::session::sidecar_path(path);
    let imported = |label| {
        Item::new(
            Kind::Session,
            label,
            Outcome::Import {
                target: path.to_path_buf(),
            },
        )
    };
    let mut item = if !apply {
        imported(label)
    } else {
        match write_both(path, &side, c) {
            Ok(true) => imported(label),
            Ok(false) => Item::new(
                Kind::Session,
                label,
                Outcome::Exists {
                    target: path.to_path_buf(),
                },
            ),
            Err(reason) => Item::skipped(Kind::Session, label, reason),
        }
    };
    if !c.damaged.is_empty() {
        item = item.detail(format!(
            "{} unusable line(s) go to {} (inspect, then delete)",
            c.damaged.len(),
            side.display()
        ));
    }
    item
}

/// Writes the sidecar (when there are unusable lines), then the session. The sidecar goes first so no line
/// can be lost; if the session then cannot be written, the new sidecar is removed again, so a failed import
/// leaves nothing behind. `Ok(false)`: the session file appeared meanwhile.
fn write_both(path: &Path, side: &Path, c: &Converted) -> Result<bool, String> {
    let wrote_side = if c.damaged.is_empty() {
        false
    } else {
        let mut bytes = c.damaged.join("\n");
        bytes.push('\n');
        match create_new(side, bytes.as_bytes()) {
            Ok(true) => true,
            Ok(false) => {
                return Err(format!(
                    "{} exists; move it away and run again",
                    side.display()
                ));
            }
            Err(e) => return Err(format!("cannot write {}: {e}", side.display())),
        }
    };
    let result = create_new(path, c.text.as_bytes());
    if wrote_side && !matches!(result, Ok(true)) {
        let _ = fs::remove_file(side);
    }
    result.map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The 0.3.x session files: `<root>/sessions/*.jsonl`, then each `<root>/sessions/<workspace-id>/`.
fn new_layout_files(source: &Source, items: &mut Vec<Item>) -> Vec<PathBuf> {
    let dir = source.root.join("sessions");
    if !dir.is_dir() || same_dir(&dir, &source.workspace.join("sessions")) {
        return Vec::new();
    }
    let own_id = fs::read_to_string(source.workspace.join(".nanobot/workspace-id"))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let mut files = jsonl_files(&dir);
    let mut subdirs: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    subdirs.sort();
    for sub in subdirs {
        let id = file_name(&sub);
        if id == "archive" {
            continue;
        }
        match &own_id {
            Some(own) if *own != id => items.push(Item::skipped(
                Kind::Session,
                display(&source.root, &sub),
                format!("sessions of another nanobot workspace (this one is {own})"),
            )),
            _ => files.extend(jsonl_files(&sub)),
        }
    }
    files
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                // Temporary files (`.<name>.tmp-<pid>`) do not end in `.jsonl`; `.._x.jsonl` is a real key.
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The key on line 1 of a session file, if it has one.
fn first_line_key(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let first = text.lines().next()?;
    let Json::Object(o) = Json::parse(first.trim()).ok()? else {
        return None;
    };
    o.get("key").and_then(Json::as_str).map(str::to_owned)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn display(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// Decodes unpadded (or padded) base64url, as nanobot 0.3.x names session files.
pub fn decode_base64url(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover character (6 bits) cannot come from any byte string.
    if s.len() % 4 == 1 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_session_write_takes_its_new_sidecar_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.jsonl");
        let side = crate::session::sidecar_path(&path);
        let c = Converted {
            key: "k".into(),
            text: "x\n".into(),
            damaged: vec!["{bad".into()],
            notes: Vec::new(),
        };
        // The session appears between the plan and the write: nothing of ours stays.
        fs::write(&path, "theirs").unwrap();
        assert_eq!(write_both(&path, &side, &c), Ok(false));
        assert!(!side.exists());
        assert_eq!(fs::read_to_string(&path).unwrap(), "theirs");
        fs::remove_file(&path).unwrap();
        assert_eq!(write_both(&path, &side, &c), Ok(true));
        assert_eq!(fs::read_to_string(&side).unwrap(), "{bad\n");
    }

    #[test]
    fn base64url() {
        assert_eq!(decode_base64url("eA").unwrap(), b"x");
        assert_eq!(decode_base64url("eHk").unwrap(), b"xy");
        assert_eq!(decode_base64url("eHl6").unwrap(), b"xyz");
        assert_eq!(
            decode_base64url("d2ViP3NvY2tldD5-fg").unwrap(),
            b"web?socket>~~"
        );
        assert_eq!(
            decode_base64url("YWxsPHVuc2FmZT46ImNoYXJzInw_Klw").unwrap(),
            b"all<unsafe>:\"chars\"|?*\\"
        );
        assert!(decode_base64url("a").is_none());
        assert!(decode_base64url("a+b").is_none());
    }
}
