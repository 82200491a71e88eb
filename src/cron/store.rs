//! `jobs.json` on disk: strict loading, atomic writes, and a lock so the daemon and `nanogate cron …` never
//! lose each other's changes.
//!
//! Every change is a read-modify-write under an exclusive lock on `<file>.lock` beside the file
//! ([`JobStore::update`]): take the lock (`File::lock`, flock on Unix; released by the OS if the process
//! dies), read the file as it is now, change it, write it to a temporary file, fsync, rename it over the
//! old one, fsync the directory. Because the file is re-read under the lock, a job added by the command
//! line while the daemon runs is kept when the daemon next records a run, and the daemon's run records
//! are kept when the command line next edits the file. Readers need no lock: a rename is atomic, so they
//! see the old file or the new one. nanobot does not know the lock, so don't run nanobot's own scheduler
//! on the same file.
//!
//! A file that cannot be parsed is never written: [`JobStore::load`] and [`JobStore::update`] fail with an
//! error naming the file and where it broke (line and column, or the JSON path of a bad value), and the
//! scheduler runs nothing until it is fixed. nanobot, in the same situation, starts over with an empty list
//! and overwrites the file at its next save. A missing file is an empty list and is created at the first
//! write.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::error::CronError;
use super::job::JobsFile;
use crate::json::Json;

/// Enough of a file's metadata to notice that it changed: size, modification time, inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

/// The jobs file at one path.
#[derive(Debug, Clone)]
pub struct JobStore {
    path: PathBuf,
}

impl JobStore {
    /// The store at `path` (nothing is read or created yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JobStore { path: path.into() }
    }

    /// The jobs file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file beside it: `<file>.lock`.
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.path.with_file_name(name)
    }

    /// The file's stamp now (`None` when it does not exist or cannot be read).
    pub fn stamp(&self) -> Option<FileStamp> {
        let meta = fs::metadata(&self.path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }

    /// Reads the file (no lock needed: writes are atomic renames). A missing file is an empty list.
    pub fn load(&self) -> Result<JobsFile, CronError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JobsFile::default()),
            Err(source) => {
                return Err(CronError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        parse(&self.path, &text)
    }

    /// Changes the file under the lock: re-reads it, applies `change`, and writes it back atomically when the
    /// text differs. `change` must be quick: the command line waits for the lock while it runs. Blocking;
    /// call it from `spawn_blocking` in async code.
    pub fn update<R>(
        &self,
        change: impl FnOnce(&mut JobsFile) -> Result<R, CronError>,
    ) -> Result<R, CronError> {
        let _lock = self.lock()?;
        let before = self.load()?;
        let mut file = before.clone();
        let result = change(&mut file)?;
        if file != before {
            self.write(&file)?;
        }
        Ok(result)
    }

    /// Writes `file` atomically, replacing whatever is there. Callers hold the lock (see [`JobStore::update`]).
    fn write(&self, file: &JobsFile) -> Result<(), CronError> {
        let werr = |source| CronError::Write {
            path: self.path.clone(),
            source,
        };
        crate::atomic_write::write_atomic(&self.path, &[file.to_text().as_bytes()], true)
            .map_err(werr)
    }

    /// Takes the exclusive lock, waiting for another holder (the daemon or another command) to finish.
    fn lock(&self) -> Result<File, CronError> {
        let werr = |source| CronError::Write {
            path: self.lock_path(),
            source,
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(werr)?;
        }
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.lock_path())
            .map_err(werr)?;
        f.lock().map_err(werr)?;
        Ok(f)
    }
}

/// Parses the text of a jobs file, naming `path` and the place it broke on failure.
pub fn parse(path: &Path, text: &str) -> Result<JobsFile, CronError> {
    let corrupt = |location: String, message: String| CronError::Corrupt {
        path: path.to_path_buf(),
        location,
        message,
    };
    let doc = Json::parse(text).map_err(|e| {
        let (line, column) = line_and_column(text, e.column);
        corrupt(format!("line {line}, column {column}"), e.message.clone())
    })?;
    JobsFile::from_json(doc).map_err(|e| corrupt(e.path, e.message))
}

/// Turns the parser's 1-based character offset into the document into a 1-based line and column.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for c in text.chars().take(offset.saturating_sub(1)) {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_name_line_and_column() {
        let e = parse(
            Path::new("/x/jobs.json"),
            "{\n  \"version\": 1,\n  \"jobs\": [,]\n}",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/x/jobs.json") && e.contains("line 3, column 12"),
            "{e}"
        );
    }

    #[test]
    fn missing_file_is_empty_and_created_on_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = JobStore::new(dir.path().join("cron/jobs.json"));
        assert!(store.load().unwrap().jobs.is_empty());
        assert!(store.stamp().is_none());
        store.update(|_| Ok(())).unwrap();
        assert!(store.stamp().is_none(), "no change, no write");
        store
            .update(|f| {
                f.extra.insert("note", Json::str("x"));
                Ok(())
            })
            .unwrap();
        let text = fs::read_to_string(store.path()).unwrap();
        assert_eq!(
            text,
            "{\n  \"version\": 1,\n  \"jobs\": [],\n  \"note\": \"x\"\n}"
        );
        assert!(store.lock_path().ends_with("jobs.json.lock"));
    }
}
