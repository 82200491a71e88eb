//! Sessions: nanobot-compatible JSONL files, loaded once, cached, and written crash-safely.
//!
//! - `key`: session key → file name, exactly as nanobot, plus a separate name for keys nanobot would mix.
//! - `load`: reading a file without losing a line, and the list of problems found.
//! - `data` and `log`: the [`Session`] type, whose messages stay raw JSON lines until someone asks for them.
//! - `history`: the model's view, nanobot's `get_history`.
//! - `persist`: appends, in-place line 1 patches, atomic rewrites, the `.damaged` sidecar, archives.
//! - `store`: the [`SessionStore`], a cache with one shared session per key, idle eviction, list and clear.
//! - `lock`: one process per workspace.
//! - `scan`: every file of a sessions directory, for `sessions list` and `sessions check`.
//!
//! Nothing outside this module reads or writes session files.

mod data;
mod error;
mod history;
pub mod key;
mod load;
mod lock;
mod log;
mod persist;
mod scan;
mod store;
pub mod timestamp;

pub use data::Session;
pub use error::SessionError;
pub use key::KeyError;
pub use load::{Loaded, Problem, load_file, load_file_deferred};
pub use lock::WorkspaceLock;
pub use log::MessageLog;
pub use persist::{CommitOutcome, Durability, sidecar_path, write_atomic};
pub use scan::{
    FileReport, SessionInfo, SessionStamp, check_dir, find_session, list_recent, list_sessions,
};
pub use store::{Retired, SessionHandle, SessionStore, StoreOptions};

/// Python's `str.isspace()`, which `str.strip()` (used by nanobot on keys and lines) strips: Unicode white
/// space plus the ASCII information separators U+001C..U+001F.
pub(crate) fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}
