//! Reading a session file without losing or changing anything, and saying what is wrong with it.
//!
//! nanobot's classic loader gives up on the whole file at the first line that is not JSON (and its next save
//! then destroys the file). nanogate keeps every line it can use, remembers the others byte for byte so the
//! first write can move them to the `.damaged` sidecar (see `persist`), and reports each problem with its line.
//! Reading never writes.

use std::path::{Path, PathBuf};

use super::data::Session;
use super::log::MessageLog;
use super::persist::{DamagedLine, DiskState};
use super::{SessionError, key, python_space, timestamp};
use crate::json::{Json, LineShape, Object, validate};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How nanobot starts every metadata line; such lines are always checked at load.
const METADATA_PREFIX: &str = "{\"_type\": \"metadata\"";

/// Something wrong with a session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line number (`0` for the file as a whole).
    pub line: usize,
    /// What is wrong and what nanogate does about it.
    pub message: String,
}

/// A session read from disk, with the problems found in its file.
#[derive(Debug)]
pub struct Loaded {
    /// The session, with every usable line.
    pub session: Session,
    /// Problems, in line order; empty for a clean file.
    pub problems: Vec<Problem>,
}

/// Reads the session file at `path` and checks every line; `None` when it does not exist. `key_hint` is the
/// key asking for it, used when line 1 is missing or names no key. This is what `sessions check` and `list` use.
pub fn load_file(path: &Path, key_hint: Option<&str>) -> Result<Option<Loaded>, SessionError> {
    load(path, key_hint, Check::Full)
}

/// Like [`load_file`], but message lines that look like JSON objects are only checked before the first write
/// (or never, for a session that is only read). Loading then costs little more than reading the file, which is
/// what the store needs for long sessions; the model only ever reads the last few hundred lines, and
/// [`Session::history`] leaves out any line in its window that turns out not to be a message.
pub fn load_file_deferred(
    path: &Path,
    key_hint: Option<&str>,
) -> Result<Option<Loaded>, SessionError> {
    load(path, key_hint, Check::Deferred)
}

/// How much of a file is checked while loading.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Every line now.
    Full,
    /// Message lines before the first write.
    Deferred,
}

fn load(path: &Path, key_hint: Option<&str>, check: Check) -> Result<Option<Loaded>, SessionError> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SessionError::read(path, e)),
    };
    let read =
        |file: &mut std::fs::File| -> std::io::Result<(Vec<u8>, Option<std::time::SystemTime>)> {
            let meta = file.metadata()?;
            let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
            std::io::Read::read_to_end(file, &mut bytes)?;
            Ok((bytes, meta.modified().ok()))
        };
    let (bytes, modified) = read(&mut file).map_err(|e| SessionError::read(path, e))?;
    let mut loaded = parse_file(bytes, path.to_path_buf(), key_hint, check);
    loaded.session.disk.modified = modified;
    Ok(Some(loaded))
}

/// Moves the message lines a deferred load did not check, and that turn out not to be messages, into the
/// damaged list (so the next write puts them in the sidecar). Called before the first write.
pub(crate) fn check_deferred(s: &mut Session) {
    let Some(lines) = s.disk.deferred_lines.take() else {
        return;
    };
    let checked = lines.len().min(s.messages.len());
    let mut bad = Vec::new();
    for (i, text) in s.messages.texts_from(0).take(checked).enumerate() {
        if let Some(reason) = not_a_message(validate(text)) {
            bad.push((
                i,
                DamagedLine {
                    line: lines[i] as usize,
                    bytes: text.as_bytes().to_vec(),
                    reason,
                },
            ));
        }
    }
    if bad.is_empty() {
        return;
    }
    let mut log = MessageLog::default();
    let mut next_bad = bad.iter().map(|(i, _)| *i).peekable();
    for (i, text) in s.messages.texts_from(0).enumerate() {
        if next_bad.peek() == Some(&i) {
            next_bad.next();
        } else {
            log.push_text(text);
        }
    }
    s.messages = log;
    s.last_consolidated = s.last_consolidated.min(s.messages.len());
    s.disk.damaged.extend(bad.into_iter().map(|(_, d)| d));
    s.disk.damaged.sort_by_key(|d| d.line);
    s.disk.rewrite = true;
}

/// Why a checked line is not a message, or `None` when it is one.
fn not_a_message(shape: Result<LineShape, crate::json::ParseError>) -> Option<String> {
    match shape {
        Ok(LineShape::Message) => None,
        Ok(LineShape::Metadata) => Some("is an extra metadata line among the messages".into()),
        Ok(LineShape::NotObject) => Some("is JSON but not an object".into()),
        Ok(LineShape::ObjectWithoutRole) => {
            Some("is an object without a string \"role\", so it is not a message".into())
        }
        Err(e) => Some(format!("is not valid JSON ({e})")),
    }
}

/// A header line seen while scanning: its line number, its text span, and the raw bytes of the line.
struct HeaderLine {
    line: usize,
    span: (usize, usize),
    raw: Vec<u8>,
}

/// Scans the whole file; never fails: whatever cannot be used becomes a [`Problem`] and, where it holds bytes,
/// a [`DamagedLine`].
fn parse_file(bytes: Vec<u8>, path: PathBuf, key_hint: Option<&str>, check: Check) -> Loaded {
    let file_len = bytes.len() as u64;
    let mut problems = Vec::new();
    let mut damaged: Vec<DamagedLine> = Vec::new();
    let mut rewrite = false;
    let mut body_start = 0;
    if bytes.starts_with(BOM) {
        body_start = BOM.len();
        rewrite = true;
        problems.push(Problem {
            line: 1,
            message: "starts with a UTF-8 byte-order mark, which nanobot cannot read; removed at the next write".into(),
        });
    }
    // Most files are valid UTF-8 as a whole: then the message spans point into the file's own buffer and
    // nothing is copied. Otherwise each line is checked on its own.
    let (whole, raw) = match String::from_utf8(bytes) {
        Ok(s) => (Some(s), Vec::new()),
        Err(e) => (None, e.into_bytes()),
    };
    let b: &[u8] = whole.as_deref().map_or(&raw, str::as_bytes);

    // A NUL byte makes a line invalid JSON anyway, so a deferred check finds it later; a full check looks once
    // over the whole file, which is much cheaper than a search per line (files almost never hold a NUL).
    let has_nul = check == Check::Full && memchr::memchr(0, b).is_some();
    let mut spans = Vec::new();
    // Line numbers of the message lines, kept while their check is deferred (for the warnings that name them).
    let mut deferred_lines: Vec<u32> = Vec::new();
    let mut headers: Vec<HeaderLine> = Vec::new();
    let mut pos = body_start;
    let mut line_no = 0;
    while pos < b.len() {
        line_no += 1;
        let (end, next, terminated) = match memchr::memchr(b'\n', &b[pos..]) {
            Some(i) => (pos + i, pos + i + 1, true),
            None => (b.len(), b.len(), false),
        };
        let line_bytes = &b[pos..end];
        let start = pos;
        pos = next;
        let mut content_end = end;
        if content_end > start && b[content_end - 1] == b'\r' {
            content_end -= 1;
            rewrite = true;
        }
        let mut bad = |reason: String| {
            damaged.push(DamagedLine {
                line: line_no,
                bytes: line_bytes.to_vec(),
                reason,
            });
        };
        let content = &b[start..content_end];
        if has_nul && memchr::memchr(0, content).is_some() {
            bad("contains a NUL byte".into());
            continue;
        }
        // In a file that is valid UTF-8 as a whole, `start..content_end` lies next to ASCII bytes: whole chars.
        let line_text = match &whole {
            Some(w) => Ok(&w[start..content_end]),
            None => std::str::from_utf8(content),
        };
        let text = match line_text {
            Ok(t) => t,
            Err(e) => {
                bad(format!(
                    "is not valid UTF-8 (at byte {})",
                    e.valid_up_to() + 1
                ));
                continue;
            }
        };
        let trimmed = text.trim_matches(python_space);
        if trimmed.is_empty() {
            rewrite = true;
            continue;
        }
        let offset = start + (trimmed.as_ptr() as usize - text.as_ptr() as usize);
        let span = (offset, offset + trimmed.len());
        if trimmed.len() != text.len() || !terminated {
            rewrite = true;
        }
        let looks_like_message = trimmed.starts_with('{')
            && trimmed.ends_with('}')
            && !trimmed.starts_with(METADATA_PREFIX);
        let shape = if check == Check::Deferred && terminated && looks_like_message {
            Ok(LineShape::Message)
        } else {
            validate(trimmed)
        };
        if check == Check::Deferred && matches!(shape, Ok(LineShape::Message)) {
            deferred_lines.push(u32::try_from(line_no).unwrap_or(u32::MAX));
        }
        match shape {
            Ok(LineShape::Message) => spans.push(span),
            Ok(LineShape::Metadata) => {
                if line_no != 1 {
                    rewrite = true;
                }
                headers.push(HeaderLine {
                    line: line_no,
                    span,
                    raw: line_bytes.to_vec(),
                });
            }
            Err(e) if !terminated => bad(format!(
                "is cut off: the last line has no newline and is not valid JSON ({e}); the write was interrupted"
            )),
            other => bad(not_a_message(other).unwrap_or_default()),
        }
    }

    let header = headers.pop();
    for old in headers {
        let last = header.as_ref().map_or(0, |h| h.line);
        damaged.push(DamagedLine {
            line: old.line,
            bytes: old.raw,
            reason: format!("is an older metadata line; line {last} is used, as nanobot does"),
        });
    }
    let header_text: Option<String> = header
        .as_ref()
        .and_then(|h| std::str::from_utf8(&b[h.span.0..h.span.1]).ok())
        .map(str::to_owned);
    let header_obj = header_text.as_deref().and_then(|t| Json::parse(t).ok());

    let messages = match whole {
        Some(buf) => MessageLog::from_spans(buf, spans),
        None => {
            let mut log = MessageLog::default();
            for (s, e) in spans {
                log.push_text(std::str::from_utf8(&raw[s..e]).unwrap_or_default());
            }
            log
        }
    };

    let fallback_key = key_hint.map_or_else(
        || key::key_from_file_name(&path.file_name().unwrap_or_default().to_string_lossy()),
        str::to_owned,
    );
    let mut h = HeaderFields::salvage(header_obj.and_then(|j| match j {
        Json::Object(o) => Some(o),
        _ => None,
    }));
    let header_line = header.as_ref().map_or(0, |x| x.line);
    match (&header, h.broken.is_empty()) {
        (None, _) => {
            rewrite = true;
            let what = if file_len == 0 {
                "the file is empty"
            } else {
                "there is no metadata line"
            };
            problems.push(Problem {
                line: 1,
                message: format!(
                    "{what}; line 1 is rebuilt from the file name and defaults at the next write"
                ),
            });
        }
        (Some(hl), false) => {
            rewrite = true;
            damaged.push(DamagedLine {
                line: hl.line,
                bytes: hl.raw.clone(),
                reason: format!(
                    "is a broken metadata line ({}); rebuilt from the file name and defaults, original kept",
                    h.broken.join(", ")
                ),
            });
        }
        (Some(_), true) => {}
    }
    // Only a lost line 1 needs the messages' own times.
    let message_ts = |i: usize| {
        messages
            .get(i)
            .and_then(Result::ok)
            .and_then(|m| timestamp_of(&m))
    };
    let created_at = h
        .created_at
        .take()
        .or_else(|| message_ts(0))
        .unwrap_or_else(timestamp::now_iso);
    let updated_at = h
        .updated_at
        .take()
        .or_else(|| messages.len().checked_sub(1).and_then(message_ts))
        .unwrap_or_else(|| created_at.clone());
    let mut last_consolidated = h.last_consolidated;
    if last_consolidated > messages.len() {
        problems.push(Problem {
            line: header_line.max(1),
            message: format!(
                "last_consolidated is {last_consolidated} but there are only {} messages; using {}",
                messages.len(),
                messages.len()
            ),
        });
        last_consolidated = messages.len();
    }

    if !damaged.is_empty() {
        rewrite = true;
    }
    for d in &damaged {
        problems.push(Problem {
            line: d.line,
            message: format!(
                "{}; moved to the .damaged sidecar at the next write",
                d.reason
            ),
        });
    }
    problems.sort_by_key(|p| p.line);
    damaged.sort_by_key(|d| d.line);

    let disk_header = if rewrite {
        String::new()
    } else {
        header_text.unwrap_or_default()
    };
    let persisted = messages.len();
    let session = Session {
        key: h.key.unwrap_or(fallback_key),
        created_at,
        updated_at,
        metadata: h.metadata,
        last_consolidated,
        extra_header: h.extra,
        messages,
        disk: DiskState {
            path,
            exists: true,
            persisted,
            header: disk_header,
            file_len,
            modified: None,
            rewrite,
            canonical_unknown: true,
            deferred_lines: (check == Check::Deferred).then_some(deferred_lines),
            damaged,
        },
    };
    Loaded { session, problems }
}

fn timestamp_of(m: &Json) -> Option<String> {
    let t = m.as_object()?.get("timestamp")?.as_str()?;
    timestamp::is_valid_iso(t).then(|| t.to_owned())
}

/// The fields of line 1, each taken when usable; `broken` names the ones that were not.
struct HeaderFields {
    key: Option<String>,
    created_at: Option<String>,
    updated_at: Option<String>,
    metadata: Object,
    last_consolidated: usize,
    extra: Object,
    broken: Vec<&'static str>,
}

impl HeaderFields {
    fn salvage(obj: Option<Object>) -> Self {
        let mut f = HeaderFields {
            key: None,
            created_at: None,
            updated_at: None,
            metadata: Object::new(),
            last_consolidated: 0,
            extra: Object::new(),
            broken: Vec::new(),
        };
        let Some(obj) = obj else { return f };
        for (k, v) in obj {
            match k.as_str() {
                "_type" => {}
                "key" => match v {
                    Json::String(s) if !s.is_empty() => f.key = Some(s),
                    _ => f.broken.push("key is not a string"),
                },
                "created_at" => match v {
                    Json::String(s) if timestamp::is_valid_iso(&s) => f.created_at = Some(s),
                    _ => f.broken.push("created_at is not an ISO date-time"),
                },
                "updated_at" => match v {
                    Json::String(s) => f.updated_at = Some(s),
                    _ => f.broken.push("updated_at is not a string"),
                },
                "metadata" => match v {
                    Json::Object(o) => f.metadata = o,
                    _ => f.broken.push("metadata is not an object"),
                },
                "last_consolidated" => match v.as_u64() {
                    Some(n) => f.last_consolidated = usize::try_from(n).unwrap_or(usize::MAX),
                    None => f
                        .broken
                        .push("last_consolidated is not a non-negative integer"),
                },
                _ => f.extra.insert(k, v),
            }
        }
        if f.key.is_none() && !f.broken.contains(&"key is not a string") {
            f.broken.push("no key");
        }
        f
    }
}
