//! Every session file of a directory: the listing for `sessions list` and the report for `sessions check`.

use std::path::{Path, PathBuf};

use super::{Problem, SessionError, key, load_file, persist::sidecar_path};

/// One line of `sessions list`.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The key on line 1 (or guessed from the file name).
    pub key: String,
    /// The file.
    pub path: PathBuf,
    /// Number of messages.
    pub messages: usize,
    /// Messages after the watermark.
    pub unconsolidated: usize,
    /// `created_at` of line 1.
    pub created_at: String,
    /// `updated_at` of line 1.
    pub updated_at: String,
    /// File size in bytes.
    pub size: u64,
    /// Number of problems found in the file.
    pub problems: usize,
}

/// A session as line 1 of its file describes it, for listings that need no message counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStamp {
    /// The key on line 1 (or guessed from the file name).
    pub key: String,
    /// `updated_at` of line 1; empty when line 1 has none.
    pub updated_at: String,
}

/// The check of one session file, or of a sidecar.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Problems, in line order; empty when the file is fine.
    pub problems: Vec<Problem>,
    /// For a `.damaged` sidecar: how many lines it holds.
    pub sidecar_lines: Option<usize>,
}

fn session_files(dir: &Path) -> Result<Vec<PathBuf>, SessionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::read(dir, e)),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}

/// Every session in `dir`, newest `updated_at` first (as nanobot's `list_sessions`).
pub fn list_sessions(dir: &Path) -> Result<Vec<SessionInfo>, SessionError> {
    let mut out = Vec::new();
    for path in session_files(dir)? {
        let Some(loaded) = load_file(&path, None)? else {
            continue;
        };
        let s = &loaded.session;
        out.push(SessionInfo {
            key: s.key().to_owned(),
            messages: s.len(),
            unconsolidated: s.unconsolidated(),
            created_at: s.created_at().to_owned(),
            updated_at: s.updated_at().to_owned(),
            size: s.disk.file_len,
            problems: loaded.problems.len(),
            path,
        });
    }
    out.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.key.cmp(&b.key))
    });
    Ok(out)
}

/// Every session in `dir` by key and `updated_at`, newest first, reading only the first line of each file: the
/// store keeps line 1 current at every commit, so this costs the same for a day-old chat and for a year of one
/// (the heartbeat's "last active chat"). A file that cannot be read is left out and logged.
pub fn list_recent(dir: &Path) -> Result<Vec<SessionStamp>, SessionError> {
    let mut out = Vec::new();
    for path in session_files(dir)? {
        let mut line = String::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| std::io::BufRead::read_line(&mut std::io::BufReader::new(f), &mut line));
        if let Err(e) = read {
            tracing::warn!(file = %path.display(), "cannot read the session file's first line: {e}");
            continue;
        }
        let header = crate::json::Json::parse(line.trim_end())
            .ok()
            .and_then(|j| j.as_object().cloned());
        let field = |name: &str| {
            header
                .as_ref()
                .and_then(|h| h.get(name)?.as_str().map(str::to_owned))
                .filter(|v| !v.is_empty())
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        out.push(SessionStamp {
            key: field("key").unwrap_or_else(|| key::key_from_file_name(&name)),
            updated_at: field("updated_at").unwrap_or_default(),
        });
    }
    out.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.key.cmp(&b.key))
    });
    Ok(out)
}

/// Checks every session file in `dir` and lists the `.damaged` sidecars. Reads only.
pub fn check_dir(dir: &Path) -> Result<Vec<FileReport>, SessionError> {
    let mut reports = Vec::new();
    for path in session_files(dir)? {
        let Some(loaded) = load_file(&path, None)? else {
            continue;
        };
        let mut problems = loaded.problems;
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let k = loaded.session.key();
        let expected = [key::file_name(k), key::alternate_file_name(k)];
        if !expected.iter().any(|e| e.as_deref() == Ok(name.as_str())) {
            let want = expected[0].as_deref().unwrap_or("(no valid file name)");
            problems.push(Problem {
                line: 1,
                message: format!("holds session {k:?}, whose file name is {want}: nanobot and nanogate look there, not here"),
            });
        }
        let side = sidecar_path(&path);
        reports.push(FileReport {
            path,
            problems,
            sidecar_lines: None,
        });
        if let Ok(bytes) = std::fs::read(&side) {
            let lines = memchr::memchr_iter(b'\n', &bytes).count();
            reports.push(FileReport {
                path: side,
                problems: Vec::new(),
                sidecar_lines: Some(lines),
            });
        }
    }
    Ok(reports)
}

/// The session stored for `key` in `dir`, read-only: its own alternate file if it has one, else the nanobot
/// file name when line 1 names this key (or names none). `None` when the key has no session.
pub fn find_session(dir: &Path, k: &str) -> Result<Option<super::Loaded>, SessionError> {
    let alt = dir.join(key::alternate_file_name(k)?);
    if let Some(l) = load_file(&alt, Some(k))?.filter(|l| l.session.key() == k) {
        return Ok(Some(l));
    }
    let primary = dir.join(key::file_name(k)?);
    Ok(load_file(&primary, Some(k))?.filter(|l| l.session.key() == k))
}
