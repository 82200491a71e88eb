//! One process per workspace: an advisory lock on `<workspace>/.nanogate.lock`.
//!
//! Two daemons appending to the same session files would interleave turns and undo each other's line 1. The
//! lock is taken with `File::try_lock` (flock on Unix), so it disappears with the process, even on a crash,
//! and never needs cleaning up.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::SessionError;

/// Held for as long as this process may write the workspace.
#[derive(Debug)]
pub struct WorkspaceLock {
    _file: File,
}

impl WorkspaceLock {
    /// Takes the lock, or says which process holds it.
    pub fn acquire(workspace: &Path) -> Result<Self, SessionError> {
        std::fs::create_dir_all(workspace).map_err(|e| SessionError::write(workspace, e))?;
        let path = workspace.join(".nanogate.lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| SessionError::write(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                let holder = if pid.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {pid})")
                };
                return Err(SessionError::Locked {
                    workspace: workspace.to_path_buf(),
                    lock: path,
                    holder,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(SessionError::write(&path, e)),
        }
        // Best effort: the pid only makes the error message of a second process more helpful.
        let _ = file
            .set_len(0)
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .and_then(|_| write!(file, "{}", std::process::id()));
        Ok(WorkspaceLock { _file: file })
    }
}
