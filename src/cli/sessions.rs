//! `nanogate sessions list | show | check | repair | fork`.

use anyhow::{Result, bail};
use clap::Subcommand;

use super::Context;
use crate::json::Json;
use crate::session::{self, SessionStore};

/// Session subcommands.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, newest first: key, messages, unconsolidated messages, created, updated, size.
    List,
    /// Show the model's view of a session (nanobot's get_history).
    Show {
        /// The session key, e.g. telegram:12345678.
        key: String,
        /// How many recent unconsolidated messages (0 = all).
        #[arg(long, default_value_t = 500)]
        max: usize,
        /// Print the view as a JSON array instead of a transcript.
        #[arg(long)]
        json: bool,
    },
    /// Check every session file; print each problem with file and line; exit 1 if any.
    Check,
    /// Repair damaged session files: unusable lines move to <file>.damaged, the file becomes readable again.
    Repair,
    /// Copy the first N messages of a session into a new session (to try another path from an earlier turn).
    Fork {
        /// The session to copy from.
        key: String,
        /// How many leading messages to copy (0..=the number of messages).
        #[arg(long, value_name = "N")]
        at: usize,
        /// The new session's key; it must not exist yet.
        #[arg(long, value_name = "NEWKEY")]
        to: String,
    },
}

/// Runs one sessions subcommand; returns the exit code.
pub async fn run(ctx: &Context, cmd: SessionsCommand) -> Result<i32> {
    let dir = ctx.sessions_dir();
    match cmd {
        SessionsCommand::List => {
            let list = session::list_sessions(&dir)?;
            if list.is_empty() {
                println!("no sessions in {}", dir.display());
                return Ok(0);
            }
            let width = list
                .iter()
                .map(|s| s.key.chars().count())
                .max()
                .unwrap_or(3)
                .max(3);
            println!(
                "{:<width$}  {:>8}  {:>14}  {:<16}  {:<16}  {:>8}",
                "KEY", "MESSAGES", "UNCONSOLIDATED", "CREATED", "UPDATED", "SIZE"
            );
            for s in list {
                println!(
                    "{:<width$}  {:>8}  {:>14}  {:<16}  {:<16}  {:>8}{}",
                    s.key,
                    s.messages,
                    s.unconsolidated,
                    short_time(&s.created_at),
                    short_time(&s.updated_at),
                    human_size(s.size),
                    if s.problems > 0 {
                        "  (needs repair: run `nanogate sessions check`)"
                    } else {
                        ""
                    }
                );
            }
            Ok(0)
        }
        SessionsCommand::Show { key, max, json } => {
            let Some(loaded) = session::find_session(&dir, &key)? else {
                bail!(
                    "no session {key:?} in {} (`nanogate sessions list` shows the keys)",
                    dir.display()
                );
            };
            let history = loaded.session.history(max);
            if json {
                println!("{}", Json::Array(history).to_python_indent(2));
            } else {
                let s = &loaded.session;
                println!(
                    "{} — {} messages, {} consolidated; showing {} (updated {})",
                    s.key(),
                    s.len(),
                    s.last_consolidated(),
                    history.len(),
                    short_time(s.updated_at())
                );
                for m in &history {
                    println!("{}", transcript_entry(m));
                }
            }
            Ok(0)
        }
        SessionsCommand::Check => {
            let reports = session::check_dir(&dir)?;
            let (mut bad, mut files) = (0, 0);
            for r in &reports {
                match r.sidecar_lines {
                    Some(n) => println!(
                        "{}: sidecar holding {n} line(s) moved out of a damaged session; inspect it, then delete it",
                        r.path.display()
                    ),
                    None => {
                        files += 1;
                        if !r.problems.is_empty() {
                            bad += 1;
                        }
                        for p in &r.problems {
                            println!("{}:{}: {}", r.path.display(), p.line, p.message);
                        }
                    }
                }
            }
            println!(
                "{files} session file(s) checked in {}, {bad} with problems",
                dir.display()
            );
            if bad > 0 {
                println!("run `nanogate sessions repair` to repair them now (nothing is deleted)");
                return Ok(1);
            }
            Ok(0)
        }
        SessionsCommand::Repair => {
            let store = SessionStore::open(&ctx.workspace, ctx.config.session.store_options())?;
            let repaired = store.repair_all().await?;
            for (path, problems) in &repaired {
                println!(
                    "repaired {} ({} problem(s))",
                    path.display(),
                    problems.len()
                );
            }
            println!("{} file(s) repaired", repaired.len());
            Ok(0)
        }
        SessionsCommand::Fork { key, at, to } => fork(ctx, &key, at, &to).await,
    }
}

/// `sessions fork`: a new session holding a copy of the first `at` messages of `key` (seed 003's fork, as a
/// file nanobot reads). Its watermark is `min(source watermark, at)`, so what was already in memory is not
/// archived twice; `metadata` is copied; `created_at` is now. The source is never written.
async fn fork(ctx: &Context, key: &str, at: usize, to: &str) -> Result<i32> {
    let dir = ctx.sessions_dir();
    if key == to {
        bail!("the new key must differ from {key:?}");
    }
    session::key::file_name(to).map_err(|e| anyhow::anyhow!("cannot use {to:?} as a key: {e}"))?;
    // The lock keeps a running daemon from writing either session meanwhile.
    let store = SessionStore::open(&ctx.workspace, ctx.config.session.store_options())?;
    let Some(source) = session::find_session(&dir, key)? else {
        bail!(
            "no session {key:?} in {} (`nanogate sessions list` shows the keys)",
            dir.display()
        );
    };
    if session::find_session(&dir, to)?.is_some() {
        bail!("session {to:?} already exists; choose another key (nothing was written)");
    }
    let src = &source.session;
    if at > src.len() {
        bail!(
            "{key:?} has {} messages; --at must be at most that (nothing was written)",
            src.len()
        );
    }
    let mut messages = Vec::with_capacity(at);
    for i in 0..at {
        match src.message(i) {
            Some(Ok(Json::Object(o))) => messages.push(o),
            Some(Ok(_)) | None => bail!(
                "message {} of {key:?} is not an object; run `nanogate sessions repair` first",
                i + 1
            ),
            Some(Err(e)) => bail!(
                "message {} of {key:?} is damaged ({e}); run `nanogate sessions repair` first",
                i + 1
            ),
        }
    }
    let handle = store.get(to).await?;
    {
        let mut s = handle.lock();
        if !s.is_empty() {
            bail!("session {to:?} already exists; choose another key (nothing was written)");
        }
        *s.metadata_mut() = src.metadata().clone();
        for m in messages {
            s.push(m);
        }
        s.set_last_consolidated(src.last_consolidated().min(at));
    }
    handle.commit().await?;
    let s = handle.lock();
    println!(
        "forked {key:?} at {at} into {to:?} ({} messages, {} consolidated) → {}",
        s.len(),
        s.last_consolidated(),
        s.path().display()
    );
    Ok(0)
}

/// `2026-11-22T09:50:26.226704` → `2026-11-22 09:50`.
fn short_time(t: &str) -> String {
    t.chars().take(16).collect::<String>().replacen('T', " ", 1)
}

fn human_size(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KB", n as f64 / 1024.0),
        _ => format!("{:.1} MB", n as f64 / 1_048_576.0),
    }
}

/// One history entry as a line of a readable transcript.
fn transcript_entry(m: &Json) -> String {
    let Some(o) = m.as_object() else {
        return m.to_python();
    };
    let role = o.get("role").and_then(Json::as_str).unwrap_or("?");
    let mut text = match o.get("content") {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Array(parts)) => parts
            .iter()
            .map(|p| match p.as_object() {
                Some(po) if po.get("type").and_then(Json::as_str) == Some("text") => po
                    .get("text")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                Some(po) => format!(
                    "[{}]",
                    po.get("type").and_then(Json::as_str).unwrap_or("part")
                ),
                None => p.to_python(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_python(),
    };
    if let Some(calls) = o.get("tool_calls").and_then(Json::as_array) {
        for c in calls {
            let f = c
                .as_object()
                .and_then(|c| c.get("function"))
                .and_then(Json::as_object);
            let name = f
                .and_then(|f| f.get("name"))
                .and_then(Json::as_str)
                .unwrap_or("?");
            let args = f
                .and_then(|f| f.get("arguments"))
                .and_then(Json::as_str)
                .unwrap_or("");
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("  → {name}({args})"));
        }
    }
    let label = match (role, o.get("name").and_then(Json::as_str)) {
        ("tool", Some(n)) => format!("tool {n}"),
        _ => role.to_owned(),
    };
    format!("[{label}] {text}")
}
