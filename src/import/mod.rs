//! `nanogate import-nanobot`: brings a nanobot installation (`~/.nanobot`, either generation) over.
//!
//! One file per kind of data: [`config`] (`config.json` → `config.toml`), [`sessions`] (0.3.x base64-named files
//! → classic files; classic files copied), [`memory`] (`history.jsonl` → `HISTORY.md` entries, `MEMORY.md`),
//! [`cron`] (`jobs.json` → the classic store). Each produces [`Item`]s: what it found, where it goes, and what
//! happened, so a dry run and a real run print the same plan.
//!
//! Rules that hold for every kind:
//! - **the source is never written**;
//! - **nothing is overwritten**: a target that exists is reported and left alone (`HISTORY.md` is the one
//!   file that grows, by the entries it does not already hold, so a second run adds nothing);
//! - **nothing is half-written**: every file is written to a temporary file, synced, then linked into place
//!   with no-clobber semantics ([`create_new`]), so a crash leaves either the whole file or none;
//! - an input that cannot be read or decoded is skipped **with its reason**, never guessed at;
//! - secrets (API keys, bot tokens) are copied into the config but never printed.
//!
//! Layouts found under `--from` (default `~/.nanobot`):
//! - `config.json`;
//! - the nanobot workspace: `agents.defaults.workspace` from the config when that directory exists, else
//!   `<from>/workspace`; it holds classic `sessions/`, `memory/` and (0.3.x) `cron/jobs.json`;
//! - 0.3.x sessions: `<from>/sessions/*.jsonl` and `<from>/sessions/<workspace-id>/*.jsonl`; when the workspace
//!   names its id (`<workspace>/.nanobot/workspace-id`), sessions of other workspaces are left out;
//! - classic cron jobs: `<from>/cron/jobs.json`.

pub mod config;
pub mod cron;
pub mod memory;
pub mod sessions;

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::json::{Json, Object};

/// Where to read from and write to.
#[derive(Debug, Clone)]
pub struct Options {
    /// nanobot's data directory (`~/.nanobot`).
    pub from: PathBuf,
    /// Our config file (`~/.nanogate/config.toml`).
    pub config_path: PathBuf,
    /// Our workspace.
    pub workspace: PathBuf,
    /// Our cron store (`~/.nanogate/cron/jobs.json`).
    pub cron_store: PathBuf,
    /// Write (true) or only report what would be written (false).
    pub apply: bool,
}

/// What kind of data an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `config.json`.
    Config,
    /// A session file.
    Session,
    /// `MEMORY.md`, `HISTORY.md`, `history.jsonl`.
    Memory,
    /// `cron/jobs.json`.
    Cron,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Config => "config",
            Kind::Session => "session",
            Kind::Memory => "memory",
            Kind::Cron => "cron",
        })
    }
}

/// What happened to one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written (or, in a dry run, would be written) to `target`.
    Import {
        /// The file written.
        target: PathBuf,
    },
    /// The target already exists (with this content, or the entries are already there); nothing to do.
    Exists {
        /// The existing file.
        target: PathBuf,
    },
    /// Not imported, for this reason.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One line of the import report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The kind of data.
    pub kind: Kind,
    /// What it is: a source file, a session key, a config key.
    pub what: String,
    /// What happened.
    pub outcome: Outcome,
    /// Details worth knowing (counts, dropped fields).
    pub details: Vec<String>,
}

impl Item {
    fn new(kind: Kind, what: impl Into<String>, outcome: Outcome) -> Self {
        Item {
            kind,
            what: what.into(),
            outcome,
            details: Vec::new(),
        }
    }

    fn skipped(kind: Kind, what: impl Into<String>, reason: impl Into<String>) -> Self {
        Item::new(
            kind,
            what,
            Outcome::Skipped {
                reason: reason.into(),
            },
        )
    }

    fn detail(mut self, d: impl Into<String>) -> Self {
        self.details.push(d.into());
        self
    }
}

/// The whole import: every item, in the order handled.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Whether files were written.
    pub applied: bool,
    /// Every item.
    pub items: Vec<Item>,
}

impl Report {
    /// Items imported (or to import).
    pub fn imported(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Import { .. }))
    }

    /// Items whose target already exists.
    pub fn existing(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Exists { .. }))
    }

    /// Items skipped.
    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped { .. }))
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.items.iter().filter(|i| f(&i.outcome)).count()
    }

    /// The report as the command prints it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for item in &self.items {
            let (verb, tail) = match &item.outcome {
                Outcome::Import { target } => (
                    if self.applied {
                        "imported"
                    } else {
                        "would import"
                    },
                    format!(" → {}", target.display()),
                ),
                Outcome::Exists { target } => {
                    ("exists", format!(" → {} (left as it is)", target.display()))
                }
                Outcome::Skipped { reason } => ("skipped", format!(": {reason}")),
            };
            out.push_str(&format!(
                "{verb:<12} {:<7} {}{tail}\n",
                item.kind, item.what
            ));
            for d in &item.details {
                out.push_str(&format!("{:<21}- {d}\n", ""));
            }
        }
        let (i, e, s) = (self.imported(), self.existing(), self.skipped());
        if i == 0 && s == 0 {
            out.push_str(&format!(
                "\nnothing to do: everything already exists ({e} item(s))\n"
            ));
        } else if self.applied {
            out.push_str(&format!("\n{i} imported, {e} already there, {s} skipped\n"));
        } else {
            out.push_str(&format!(
                "\ndry run: {i} to import, {e} already there, {s} skipped; nothing was written. Run again with --apply to import.\n"
            ));
        }
        out
    }
}

/// An import that could not run at all (single items that fail are reported in the [`Report`] instead).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The source directory does not exist.
    #[error("{0} does not exist (pass --from with nanobot's data directory, usually ~/.nanobot)")]
    NoSource(PathBuf),
    /// The workspace is in use by a running nanogate.
    #[error(transparent)]
    Locked(#[from] crate::session::SessionError),
}

/// Where the nanobot installation keeps things.
#[derive(Debug, Clone)]
pub struct Source {
    /// `--from`.
    pub root: PathBuf,
    /// nanobot's workspace.
    pub workspace: PathBuf,
    /// `config.json`, parsed, when present and valid.
    pub config: Option<Object>,
}

/// Runs the import (or the dry run) and returns its report.
pub fn run(opts: &Options) -> Result<Report, ImportError> {
    if !opts.from.is_dir() {
        return Err(ImportError::NoSource(opts.from.clone()));
    }
    // A running daemon must not write the sessions or HISTORY.md while we add to them.
    let _lock = if opts.apply {
        fs::create_dir_all(&opts.workspace)
            .map_err(|e| crate::session::SessionError::write(&opts.workspace, e))?;
        Some(crate::session::WorkspaceLock::acquire(&opts.workspace)?)
    } else {
        None
    };
    let mut report = Report {
        applied: opts.apply,
        items: Vec::new(),
    };
    let (source, config_items) = config::read_source(&opts.from);
    report.items.extend(config_items);
    report.items.extend(config::import(&source, opts));
    report.items.extend(sessions::import(&source, opts));
    report.items.extend(memory::import(&source, opts));
    report.items.extend(cron::import(&source, opts));
    Ok(report)
}

/// Creates `path` holding `bytes`, all or nothing, and never over an existing file: the bytes go to a
/// temporary file beside it, are synced, and the temporary file is hard-linked to `path` (which fails if
/// `path` exists), then removed. Returns `Ok(false)` when `path` already exists.
pub fn create_new(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    if fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.import-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        match fs::hard_link(&tmp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        File::open(dir)?.sync_all()?;
        Ok(true)
    })();
    let _ = fs::remove_file(&tmp);
    result
}

/// `obj[name]`, accepting both spellings nanobot's config accepts: snake_case and camelCase.
pub(crate) fn field<'a>(obj: &'a Object, snake: &str) -> Option<&'a Json> {
    obj.get(snake).or_else(|| obj.get(&camel(snake)))
}

/// `max_tool_iterations` → `maxToolIterations` (pydantic's `to_camel`).
pub(crate) fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `maxToolIterations` → `max_tool_iterations`.
pub(crate) fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Reads a file as UTF-8 text, with a reason fit for the report on failure.
pub(crate) fn read_text(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_conversions() {
        assert_eq!(camel("max_tool_iterations"), "maxToolIterations");
        assert_eq!(camel("token"), "token");
        assert_eq!(snake("maxToolIterations"), "max_tool_iterations");
        assert_eq!(snake("allow_from"), "allow_from");
    }

    #[test]
    fn create_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b.txt");
        assert!(create_new(&p, b"one").unwrap());
        assert!(!create_new(&p, b"two").unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"one");
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }
}
