//! `memory/MEMORY.md` and `memory/HISTORY.md`, written the way nanobot reads them, plus the version history
//! nanobot does not keep.
//!
//! MEMORY.md is replaced atomically (temporary file, rename), and the version it replaces is first copied to
//! `memory/.versions/MEMORY.<UTC time>.md`; the newest [`KEEP_VERSIONS`] are kept, so a bad consolidation can
//! always be undone by hand. HISTORY.md is append-only: each entry is `entry.rstrip() + "\n\n"`.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::atomic_write::write_atomic;

/// Old versions of MEMORY.md kept under `memory/.versions/`.
pub const KEEP_VERSIONS: usize = 20;

/// The memory files of one workspace.
#[derive(Debug, Clone)]
pub struct MemoryFiles {
    dir: PathBuf,
    durable: bool,
}

impl MemoryFiles {
    /// The files under `<workspace>/memory`; `durable` fsyncs each write.
    pub fn new(workspace: &Path, durable: bool) -> Self {
        MemoryFiles {
            dir: workspace.join("memory"),
            durable,
        }
    }

    /// `memory/MEMORY.md`.
    pub fn memory_path(&self) -> PathBuf {
        self.dir.join("MEMORY.md")
    }

    /// `memory/HISTORY.md`.
    pub fn history_path(&self) -> PathBuf {
        self.dir.join("HISTORY.md")
    }

    /// The long-term memory; empty when the file does not exist.
    pub fn read_memory(&self) -> io::Result<String> {
        match fs::read_to_string(self.memory_path()) {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e),
        }
    }

    /// Replaces MEMORY.md with `text` when it differs from `previous` (what the file held when the
    /// consolidation read it); the previous version goes to `.versions/` first. Returns whether it wrote.
    pub fn replace_memory(&self, previous: &str, text: &str) -> io::Result<bool> {
        if previous == text {
            return Ok(false);
        }
        fs::create_dir_all(&self.dir)?;
        if !previous.is_empty() {
            self.keep_version(previous)?;
        }
        write_atomic(&self.memory_path(), &[text.as_bytes()], self.durable)?;
        Ok(true)
    }

    /// Appends `entry.rstrip() + "\n\n"` to HISTORY.md, as nanobot does.
    pub fn append_history(&self, entry: &str) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.history_path())?;
        f.write_all(format!("{}\n\n", entry.trim_end()).as_bytes())?;
        if self.durable {
            f.sync_data()?;
        }
        Ok(())
    }

    /// Copies `text` to `.versions/MEMORY.<UTC time>.md` and drops all but the newest [`KEEP_VERSIONS`].
    fn keep_version(&self, text: &str) -> io::Result<()> {
        let dir = self.dir.join(".versions");
        fs::create_dir_all(&dir)?;
        // Names sort by time; the clock's nanoseconds make a clash unlikely and the loop makes it impossible.
        let path = loop {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.9fZ");
            let p = dir.join(format!("MEMORY.{stamp}.md"));
            if !p.exists() {
                break p;
            }
        };
        fs::write(path, text)?;
        let mut versions: Vec<PathBuf> = fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("MEMORY.") && n.ends_with(".md"))
            })
            .collect();
        versions.sort();
        let excess = versions.len().saturating_sub(KEEP_VERSIONS);
        for old in &versions[..excess] {
            fs::remove_file(old)?;
        }
        Ok(())
    }

    /// The last `n` HISTORY.md entries stamped within `days` days before `now` (oldest first). Reads only the
    /// file's tail, since HISTORY.md grows forever.
    pub fn recent_entries(
        &self,
        n: usize,
        days: i64,
        now: chrono::NaiveDateTime,
    ) -> io::Result<Vec<String>> {
        const TAIL_BYTES: u64 = 64 * 1024;
        let text = match read_tail(&self.history_path(), TAIL_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let cutoff = now - chrono::Duration::days(days);
        let mut entries: Vec<String> = split_entries(&text)
            .into_iter()
            .filter(|e| entry_time(e).is_some_and(|t| t >= cutoff))
            .collect();
        let skip = entries.len().saturating_sub(n);
        Ok(entries.drain(skip..).collect())
    }
}

/// The last `bytes` of a file as text, starting at a line boundary.
fn read_tail(path: &Path, bytes: u64) -> io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(bytes);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Ok(if start > 0 {
        text.split_once('\n')
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or_default()
    } else {
        text
    })
}

/// HISTORY.md entries: paragraphs that start with `[YYYY-MM-DD`, each running until the next such paragraph
/// (an entry may itself contain blank lines).
fn split_entries(text: &str) -> Vec<String> {
    let mut entries: Vec<String> = Vec::new();
    let mut after_blank = true;
    for line in text.lines() {
        if after_blank && entry_time(line).is_some() {
            entries.push(line.to_owned());
        } else if let Some(last) = entries.last_mut() {
            last.push('\n');
            last.push_str(line);
        }
        after_blank = line.trim().is_empty();
    }
    entries.iter().map(|e| e.trim_end().to_owned()).collect()
}

/// The `[YYYY-MM-DD HH:MM]` (or `[YYYY-MM-DD]`) stamp an entry starts with.
fn entry_time(entry: &str) -> Option<chrono::NaiveDateTime> {
    let inner = entry.strip_prefix('[')?.split(']').next()?;
    let inner = inner.get(..16.min(inner.len()))?;
    chrono::NaiveDateTime::parse_from_str(inner, "%Y-%m-%d %H:%M")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(inner, "%Y-%m-%dT%H:%M"))
        .ok()
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(inner.get(..10)?, "%Y-%m-%d")
                .ok()?
                .and_hms_opt(0, 0, 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_appended_as_nanobot_does() {
        let ws = tempfile::tempdir().unwrap();
        let m = MemoryFiles::new(ws.path(), false);
        m.append_history("[2026-01-01 10:00] One.  \n\n").unwrap();
        m.append_history("[2026-01-02 10:00] Two.").unwrap();
        assert_eq!(
            fs::read_to_string(m.history_path()).unwrap(),
            "[2026-01-01 10:00] One.\n\n[2026-01-02 10:00] Two.\n\n"
        );
    }

    #[test]
    fn memory_versions_are_kept_and_pruned() {
        let ws = tempfile::tempdir().unwrap();
        let m = MemoryFiles::new(ws.path(), false);
        assert!(!m.replace_memory("", "").unwrap());
        let mut prev = String::new();
        for i in 0..25 {
            let next = format!("fact {i}");
            assert!(m.replace_memory(&prev, &next).unwrap());
            prev = next;
        }
        assert_eq!(m.read_memory().unwrap(), "fact 24");
        let mut versions: Vec<String> = fs::read_dir(ws.path().join("memory/.versions"))
            .unwrap()
            .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        versions.sort_by_key(|v| v[5..].parse::<u32>().unwrap());
        assert_eq!(versions.len(), KEEP_VERSIONS);
        assert_eq!(versions.first().unwrap(), "fact 4");
        assert_eq!(versions.last().unwrap(), "fact 23");
        assert!(!m.replace_memory("fact 24", "fact 24").unwrap());
    }

    #[test]
    fn recent_entries_are_the_last_within_the_window() {
        let ws = tempfile::tempdir().unwrap();
        let m = MemoryFiles::new(ws.path(), false);
        for e in [
            "[2026-01-01 10:00] Too old.",
            "[2026-03-01 09:00] First.\n\nWith a second paragraph.",
            "[2026-03-02 09:00] Second.",
            "[2026-03-03 09:00] Third.",
            "[2026-03-04 09:00] Fourth.",
        ] {
            m.append_history(e).unwrap();
        }
        let now = chrono::NaiveDate::from_ymd_opt(2026, 3, 10)
            .unwrap()
            .and_hms_opt(12, 0, 0)
            .unwrap();
        let got = m.recent_entries(3, 14, now).unwrap();
        assert_eq!(
            got,
            [
                "[2026-03-02 09:00] Second.",
                "[2026-03-03 09:00] Third.",
                "[2026-03-04 09:00] Fourth."
            ]
        );
        let got = m.recent_entries(10, 14, now).unwrap();
        assert_eq!(
            got[0],
            "[2026-03-01 09:00] First.\n\nWith a second paragraph."
        );
        assert_eq!(got.len(), 4);
    }
}
