//! Errors of the session store, each saying what went wrong and what to do.

use std::path::PathBuf;

use super::KeyError;

/// Anything the session store can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The key cannot name a file.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A session file or directory could not be read.
    #[error("could not read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A session file could not be written; the previous file is unchanged.
    #[error("could not write {path}: {source} (the previous version of the file is unchanged)")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// Another process holds the workspace lock.
    #[error(
        "workspace {workspace} is already in use by another nanogate process{holder} (lock file {lock}); \
         stop that process first (for a service: `systemctl stop nanogate`) or use another --workspace"
    )]
    Locked {
        /// The workspace directory.
        workspace: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// ` (pid N)` when the holder wrote its pid.
        holder: String,
    },
    /// Both the nanobot file name and the alternate name of a key are owned by other keys.
    #[error(
        "cannot store session {key:?}: {path} already holds session {owner:?}; rename or archive that file"
    )]
    Collision {
        /// The key asked for.
        key: String,
        /// The file that is taken.
        path: PathBuf,
        /// The key written on its line 1.
        owner: String,
    },
    /// A background file task panicked or was cancelled.
    #[error("session file task for {key:?} did not finish: {reason}")]
    Task {
        /// The session key.
        key: String,
        /// What the runtime reported.
        reason: String,
    },
}

impl SessionError {
    pub(crate) fn read(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Read {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Write {
            path: path.into(),
            source,
        }
    }
}
