//! What can go wrong with jobs: an unreadable or corrupt `jobs.json`, a failed write, an invalid schedule.

use std::path::PathBuf;

/// A scheduler, store or schedule error. Every variant that concerns a file names it.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// The jobs file exists but cannot be read.
    #[error("cannot read the jobs file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The jobs file is not JSON, or not in nanobot's shape. It is never overwritten in that state.
    #[error(
        "the jobs file {path} is corrupt: {message} at {location}; no job runs until it is fixed (the file was left untouched)"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where it broke: `line L, column C` for a syntax error, a JSON path such as `jobs[1].schedule.kind`
        /// for a value of the wrong shape.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The jobs file (or its lock or temporary file) cannot be written.
    #[error("cannot write the jobs file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A schedule that cannot run: a bad cron expression, an unknown time zone, a zero interval, ….
    #[error("{0}")]
    InvalidSchedule(String),
    /// No job has this id.
    #[error("no job with id {0:?}")]
    NotFound(String),
}
