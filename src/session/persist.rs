//! Writing a session to its file: append when possible, rewrite atomically when not, never lose a line.
//!
//! A commit that only adds messages appends their lines at the end of the file and, when line 1 changed but
//! kept its byte length (the usual case: a new `updated_at`), overwrites line 1 in place. The new lines go first,
//! so a crash between the two steps leaves the new messages under the old line 1, which loads fine. Anything
//! else (a cleared session, a line 1 of another length, a damaged file being repaired) writes the whole file to
//! a temporary file, fsyncs it, renames it over the old one and fsyncs the directory. With
//! `session.durability = "fsync"` (the default) a commit returns only once its bytes are on disk.
//!
//! Repairs move every unusable line, byte for byte, into `<file name>.damaged` (appended to, fsynced) *before*
//! the repaired file replaces the old one, so a crash at any point leaves each line in at least one place.
//! If the file changed on disk behind nanogate's back (its size is not what nanogate last wrote), it is kept as
//! `<file name>.conflict-<UTC time>` rather than overwritten.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;
use tracing::warn;

use super::SessionError;
use super::data::Session;
use super::log::MessageLog;
use crate::json::Json;

/// How hard a commit works to get its bytes onto the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// fsync before a commit returns (and the directory after a rename): a reply is never sent for a turn that a
    /// power cut could lose.
    #[default]
    Fsync,
    /// Leave flushing to the operating system: faster on slow SD cards, but the last seconds can be lost on a
    /// power cut (never on a crash of nanogate itself).
    Os,
}

/// A line that could not be used, kept byte for byte until a write moves it to the sidecar.
#[derive(Debug, Clone)]
pub(crate) struct DamagedLine {
    pub line: usize,
    pub bytes: Vec<u8>,
    pub reason: String,
}

/// What nanogate last wrote to (or read from) a session's file.
#[derive(Debug)]
pub(crate) struct DiskState {
    pub path: PathBuf,
    /// Whether the file exists as far as nanogate knows.
    pub exists: bool,
    /// How many of the session's messages are in the file.
    pub persisted: usize,
    /// Line 1 as it is in the file ("" when it must be rewritten anyway).
    pub header: String,
    /// The file's size after the last read or write.
    pub file_len: u64,
    /// The file's modification time after the last read or write (with the size: "is it still ours?").
    pub modified: Option<SystemTime>,
    /// The next commit must rewrite the whole file (damage, a clear, odd formatting).
    pub rewrite: bool,
    /// Lines came from the file and were not yet checked for Python's canonical form.
    pub canonical_unknown: bool,
    /// Unusable lines waiting to go to the sidecar.
    pub damaged: Vec<DamagedLine>,
    /// Line numbers of message lines a deferred load has not checked yet (see `load::check_deferred`).
    pub deferred_lines: Option<Vec<u32>>,
}

impl DiskState {
    pub(crate) fn new_file(path: PathBuf) -> Self {
        DiskState {
            path,
            exists: false,
            persisted: 0,
            header: String::new(),
            file_len: 0,
            modified: None,
            rewrite: false,
            canonical_unknown: false,
            damaged: Vec::new(),
            deferred_lines: None,
        }
    }
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Nothing had changed.
    Unchanged,
    /// New lines were appended (and line 1 patched in place when it changed).
    Appended {
        /// Message lines appended.
        lines: usize,
    },
    /// The whole file was written anew and renamed into place.
    Rewritten,
}

/// Writes what changed in `s` since its last commit.
pub(crate) fn commit(
    s: &mut Session,
    durability: Durability,
) -> Result<CommitOutcome, SessionError> {
    let header = s.header_line();
    if !s.differs_from_disk(&header) {
        return Ok(CommitOutcome::Unchanged);
    }
    // A damaged line found only now must reach the sidecar with this write; dropping it may clamp the watermark,
    // so line 1 is encoded again.
    super::load::check_deferred(s);
    let header = s.header_line();
    check_file_unchanged(s)?;
    let d = &s.disk;
    if d.rewrite || !d.exists || d.persisted > s.messages.len() || header.len() != d.header.len() {
        rewrite(s, header, durability)?;
        return Ok(CommitOutcome::Rewritten);
    }
    let lines = append(s, header, durability)?;
    Ok(CommitOutcome::Appended { lines })
}

fn sync(durability: Durability) -> bool {
    durability == Durability::Fsync
}

/// Keeps a file that changed since nanogate last touched it, instead of overwriting it.
fn check_file_unchanged(s: &mut Session) -> Result<(), SessionError> {
    let path = &s.disk.path;
    match fs::metadata(path) {
        Ok(m)
            if s.disk.exists
                && m.len() == s.disk.file_len
                && m.modified().ok() == s.disk.modified =>
        {
            Ok(())
        }
        Ok(_) => {
            let backup = unique_sibling(path, &format!("conflict-{}", utc_stamp()));
            fs::rename(path, &backup).map_err(|e| SessionError::write(path, e))?;
            warn!(
                session = %s.key,
                file = %path.display(),
                kept = %backup.display(),
                "session file was changed by another program since nanogate read it; kept that version and wrote nanogate's"
            );
            s.disk.exists = false;
            s.disk.rewrite = true;
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if s.disk.exists {
                warn!(session = %s.key, file = %path.display(), "session file was deleted by another program; writing it again");
                s.disk.exists = false;
                s.disk.rewrite = true;
            }
            Ok(())
        }
        Err(e) => Err(SessionError::read(path, e)),
    }
}

fn append(s: &mut Session, header: String, durability: Durability) -> Result<usize, SessionError> {
    let path = s.disk.path.clone();
    let mut buf = String::new();
    for line in s.messages.texts_from(s.disk.persisted) {
        buf.push_str(line);
        buf.push('\n');
    }
    let lines = s.messages.len() - s.disk.persisted;
    let io = |e| SessionError::write(&path, e);
    let mut f = OpenOptions::new().write(true).open(&path).map_err(io)?;
    f.seek(SeekFrom::Start(s.disk.file_len)).map_err(io)?;
    f.write_all(buf.as_bytes()).map_err(io)?;
    if header != s.disk.header {
        f.seek(SeekFrom::Start(0)).map_err(io)?;
        f.write_all(header.as_bytes()).map_err(io)?;
    }
    if sync(durability) {
        f.sync_data().map_err(io)?;
    }
    s.disk.modified = f.metadata().and_then(|m| m.modified()).ok();
    s.disk.file_len += buf.len() as u64;
    s.disk.persisted = s.messages.len();
    s.disk.header = header;
    Ok(lines)
}

fn rewrite(s: &mut Session, header: String, durability: Durability) -> Result<(), SessionError> {
    let path = s.disk.path.clone();
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| SessionError::write(dir, e))?;
    }
    if !s.disk.damaged.is_empty() {
        move_to_sidecar(s, durability)?;
    }
    // Lines read from a file are written back in Python's canonical form, as nanobot's own save would; lines
    // nanogate added are canonical already, so this costs a parse only on the first rewrite after a load.
    let mut body = String::with_capacity(s.messages.texts_from(0).map(|t| t.len() + 1).sum());
    let mut spans = Vec::with_capacity(s.messages.len());
    for text in s.messages.texts_from(0) {
        let start = body.len();
        match Json::parse(text) {
            Ok(v) if s.disk.canonical_unknown => v.write_python(&mut body),
            _ => body.push_str(text),
        }
        spans.push((start, body.len()));
        body.push('\n');
    }
    write_atomic(
        &path,
        &[header.as_bytes(), b"\n", body.as_bytes()],
        sync(durability),
    )?;
    s.disk = DiskState {
        exists: true,
        persisted: spans.len(),
        file_len: (header.len() + 1 + body.len()) as u64,
        modified: fs::metadata(&path).and_then(|m| m.modified()).ok(),
        path,
        header,
        rewrite: false,
        canonical_unknown: false,
        damaged: Vec::new(),
        deferred_lines: None,
    };
    s.messages = MessageLog::from_spans(body, spans);
    Ok(())
}

/// The sidecar for a session file: `<file name>.damaged`.
pub fn sidecar_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".damaged");
    path.with_file_name(name)
}

fn move_to_sidecar(s: &mut Session, durability: Durability) -> Result<(), SessionError> {
    let side = sidecar_path(&s.disk.path);
    let io = |e| SessionError::write(&side, e);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&side)
        .map_err(io)?;
    let mut buf = Vec::new();
    for d in &s.disk.damaged {
        buf.extend_from_slice(&d.bytes);
        buf.push(b'\n');
    }
    f.write_all(&buf).map_err(io)?;
    if sync(durability) {
        f.sync_data().map_err(io)?;
    }
    for d in &s.disk.damaged {
        warn!(
            session = %s.key,
            file = %s.disk.path.display(),
            line = d.line,
            sidecar = %side.display(),
            "line {} {}; moved it to the sidecar", d.line, d.reason
        );
    }
    Ok(())
}

/// [`crate::atomic_write::write_atomic`], with the error naming the session file.
pub fn write_atomic(path: &Path, parts: &[&[u8]], durable: bool) -> Result<(), SessionError> {
    crate::atomic_write::write_atomic(path, parts, durable)
        .map_err(|e| SessionError::write(path, e))
}

/// Moves the file to `archive/<file name>.<UTC time>.jsonl` in its directory (nanobot never looks there) and
/// returns the new path; `None` when there is no file.
pub(crate) fn archive_file(
    path: &Path,
    durability: Durability,
) -> Result<Option<PathBuf>, SessionError> {
    if !path.exists() {
        return Ok(None);
    }
    let dir = path.parent().unwrap_or(Path::new(".")).join("archive");
    fs::create_dir_all(&dir).map_err(|e| SessionError::write(&dir, e))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let target = unique_sibling(&dir.join(name.as_ref()), &format!("{}.jsonl", utc_stamp()));
    fs::rename(path, &target).map_err(|e| SessionError::write(&target, e))?;
    if sync(durability) {
        for d in [&dir, &dir.join("..")] {
            File::open(d)
                .and_then(|f| f.sync_all())
                .map_err(|e| SessionError::write(d, e))?;
        }
    }
    Ok(Some(target))
}

/// `<path>.<suffix>`, with `-2`, `-3`, … before the suffix's end until the name is free.
fn unique_sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let candidate = |n: usize| {
        let s = if n == 1 {
            suffix.to_owned()
        } else {
            format!("{n}.{suffix}")
        };
        path.with_file_name(format!("{name}.{s}"))
    };
    (1..)
        .map(candidate)
        .find(|p| !p.exists())
        .unwrap_or_else(|| candidate(1))
}

fn utc_stamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string()
}
