//! Memory: the background consolidation of old messages into `memory/MEMORY.md` and `memory/HISTORY.md`
//! (nanobot's classic algorithm, so nanobot reads the result), plus the structured summary nanogate adds.
//!
//! - `cut`: where a consolidation stops (never between a tool call and its result).
//! - `transcript`: archived messages as nanobot's lines, as flat text for the summary, and the files touched.
//! - `consolidate`: the `save_memory` and summary model calls.
//! - `summary`: the structured summary kept in the session's metadata.
//! - `files`: MEMORY.md (atomic replace, versions kept), HISTORY.md (append), recent entries.
//!
//! Rules. At most one consolidation runs per key (a per-key async mutex); the one started after a turn runs in
//! the background and never delays a reply. The slice `[watermark, end)` is chosen when the consolidation
//! starts, and the watermark moves to exactly `end` and is written to disk at once, so messages that arrive
//! meanwhile are neither skipped nor archived twice, and a restart does not consolidate again. MEMORY.md is
//! shared by every session, so the read–model–write of `save_memory` is serialised across keys (a lost update
//! would silently drop facts). After [`MAX_FAILURES`] failures in a row for a key, the archived lines go to
//! HISTORY.md as a `[RAW]` entry and the watermark advances: nothing is lost and nothing loops.

mod consolidate;
mod cut;
mod files;
pub mod summary;
pub mod transcript;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

pub use consolidate::{ConsolidationError, SaveMemory};
pub use files::{KEEP_VERSIONS, MemoryFiles};
pub use summary::Summary;

use super::Agent;
use crate::json::Json;
use crate::session::SessionHandle;
use crate::session::timestamp::now_iso;

/// Failed consolidations in a row, for one key, before its messages are archived raw.
pub const MAX_FAILURES: u32 = 3;

/// Which messages a consolidation archives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// nanobot's rule: everything but the last `memory_window / 2` messages, once
    /// `memory_window` messages are unconsolidated.
    Classic,
    /// Enough old messages that the newest ones left take at most this many tokens.
    Budget {
        /// Tokens the kept messages may use.
        keep_tokens: usize,
    },
    /// Every unconsolidated message (`/new`, idle reset).
    All,
}

/// What a finished consolidation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consolidated {
    /// Messages archived.
    pub messages: usize,
    /// The new watermark.
    pub watermark: usize,
}

#[derive(Default)]
struct KeyState {
    lock: Arc<tokio::sync::Mutex<()>>,
    failures: AtomicU32,
}

/// Runs consolidations: one at a time per key, in the background after turns or awaited before a turn that
/// would overflow the context, and on `/new`.
pub struct Memory {
    files: MemoryFiles,
    keys: Mutex<HashMap<String, Arc<KeyState>>>,
    memory_file: tokio::sync::Mutex<()>,
    tasks: TaskTracker,
}

impl Memory {
    /// The memory of `workspace`; `durable` fsyncs each write.
    pub fn new(workspace: &std::path::Path, durable: bool) -> Self {
        Memory {
            files: MemoryFiles::new(workspace, durable),
            keys: Mutex::new(HashMap::new()),
            memory_file: tokio::sync::Mutex::new(()),
            tasks: TaskTracker::new(),
        }
    }

    /// The memory files.
    pub fn files(&self) -> &MemoryFiles {
        &self.files
    }

    fn key_state(&self, key: &str) -> Arc<KeyState> {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_owned())
            .or_default()
            .clone()
    }

    /// Forgets the state of `key` when nothing uses it and it has no failures to remember.
    fn release_key(&self, key: &str) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if keys.get(key).is_some_and(|s| {
            Arc::strong_count(s) == 1
                && Arc::strong_count(&s.lock) == 1
                && s.failures.load(Ordering::SeqCst) == 0
        }) {
            keys.remove(key);
        }
    }

    /// After a turn: when `memory_window` messages are unconsolidated and no consolidation of `key` is running,
    /// starts one in the background. Returns at once.
    pub fn after_turn(agent: &Arc<Agent>, handle: &SessionHandle) {
        let window = agent.config.agent.memory_window;
        if !agent.config.memory.enabled || window == 0 || handle.lock().unconsolidated() < window {
            return;
        }
        let key = handle.key().to_owned();
        let state = agent.memory.key_state(&key);
        let Ok(guard) = state.lock.clone().try_lock_owned() else {
            return;
        };
        let (agent, handle) = (agent.clone(), handle.clone());
        agent.memory.tasks.clone().spawn(async move {
            // Messages that arrived meanwhile may make the next consolidation due already: run it now rather
            // than at the next turn, which may be days away.
            loop {
                match agent
                    .memory
                    .run(&agent, &handle, &state, Scope::Classic)
                    .await
                {
                    Ok(Some(_)) if handle.lock().unconsolidated() >= window => continue,
                    Ok(_) => break,
                    Err(e) => {
                        error!(session = %key, "memory consolidation failed: {e}");
                        break;
                    }
                }
            }
            drop(guard);
            drop(state);
            agent.memory.release_key(&key);
        });
    }

    /// Consolidates `key` now, waiting for a running consolidation of it first. Failures count towards the
    /// `[RAW]` fallback like background ones.
    pub async fn consolidate_now(
        &self,
        agent: &Agent,
        handle: &SessionHandle,
        scope: Scope,
    ) -> Result<Option<Consolidated>, ConsolidationError> {
        if !agent.config.memory.enabled {
            return Ok(None);
        }
        let state = self.key_state(handle.key());
        let guard = state.lock.lock().await;
        let result = self.run(agent, handle, &state, scope).await;
        drop(guard);
        drop(state);
        self.release_key(handle.key());
        result
    }

    /// `/new` and the idle reset: archives every unconsolidated message into memory (unless `memory.enabled` is
    /// off), then clears the session (the transcript moves to `sessions/archive/`). When archiving fails, the
    /// session is left as it was.
    /// Returns the archive path.
    pub async fn archive_and_clear(
        &self,
        agent: &Agent,
        key: &str,
    ) -> Result<Option<PathBuf>, ConsolidationError> {
        let handle = agent.store.get(key).await?;
        let state = self.key_state(key);
        let guard = state.lock.lock().await;
        let result = async {
            if agent.config.memory.enabled {
                self.run(agent, &handle, &state, Scope::All).await?;
            }
            handle.lock().metadata_mut().remove(summary::METADATA_KEY);
            Ok(agent.store.clear(key).await?)
        }
        .await;
        drop(guard);
        state.failures.store(0, Ordering::SeqCst);
        drop(state);
        self.release_key(key);
        result
    }

    /// Waits up to `limit` for running consolidations (before the process exits); false when some are still
    /// running.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        if self.tasks.is_empty() {
            return true;
        }
        info!(
            running = self.tasks.len(),
            "waiting for memory consolidation to finish"
        );
        self.tasks.close();
        let done = tokio::time::timeout(limit, self.tasks.wait()).await.is_ok();
        self.tasks.reopen();
        if !done {
            warn!("memory consolidation still running at exit; it will run again next time");
        }
        done
    }

    /// One consolidation of `handle`; the caller holds `state`'s lock.
    async fn run(
        &self,
        agent: &Agent,
        handle: &SessionHandle,
        state: &KeyState,
        scope: Scope,
    ) -> Result<Option<Consolidated>, ConsolidationError> {
        let key = handle.key().to_owned();
        let Some(plan) = plan(handle, scope, agent.config.agent.memory_window) else {
            return Ok(None);
        };
        match self.consolidate(agent, handle, &plan, scope).await {
            Ok(done) => {
                crate::metrics::consolidation("ok");
                state.failures.store(0, Ordering::SeqCst);
                info!(
                    session = %key,
                    messages = done.messages,
                    watermark = done.watermark,
                    "memory consolidated"
                );
                Ok(Some(done))
            }
            Err(e) if scope == Scope::All => {
                crate::metrics::consolidation("failed");
                Err(e)
            }
            Err(e) => {
                crate::metrics::consolidation("failed");
                let failures = state.failures.fetch_add(1, Ordering::SeqCst) + 1;
                if failures < MAX_FAILURES {
                    warn!(session = %key, failures, "memory consolidation failed, will retry at the next trigger: {e}");
                    return Err(e);
                }
                warn!(session = %key, failures, "memory consolidation failed {failures} times in a row; archiving the messages raw: {e}");
                let done = self.archive_raw(handle, &plan).await?;
                crate::metrics::consolidation("raw");
                state.failures.store(0, Ordering::SeqCst);
                Ok(Some(done))
            }
        }
    }

    async fn consolidate(
        &self,
        agent: &Agent,
        handle: &SessionHandle,
        plan: &Plan,
        scope: Scope,
    ) -> Result<Consolidated, ConsolidationError> {
        let lines = transcript::archive_lines(&plan.messages);
        let mut summary = None;
        if agent.config.memory.summary && scope != Scope::All {
            let mut s = plan.previous_summary.clone().unwrap_or_default();
            let previous = plan.previous_summary.as_ref().map(|p| p.text.as_str());
            s.text = consolidate::summarize(&agent.provider, previous, &plan.messages).await?;
            let (read, modified) = transcript::file_operations(&plan.messages);
            s.add_files(read, modified);
            s.updated_at = now_iso();
            summary = Some(s);
        }
        if !lines.is_empty() {
            let _one_writer = self.memory_file.lock().await;
            let files = self.files.clone();
            let current = run_blocking(move || files.read_memory()).await?;
            let saved = consolidate::save_memory(&agent.provider, &current, &lines).await?;
            let files = self.files.clone();
            run_blocking(move || {
                files.append_history(&saved.history_entry)?;
                files.replace_memory(&current, &saved.memory_update)
            })
            .await?;
        }
        advance(handle, plan, summary).await?;
        Ok(Consolidated {
            messages: plan.end - plan.start,
            watermark: plan.end,
        })
    }

    /// The fallback after repeated failures: the archive lines go to HISTORY.md as they are.
    async fn archive_raw(
        &self,
        handle: &SessionHandle,
        plan: &Plan,
    ) -> Result<Consolidated, ConsolidationError> {
        let lines = transcript::archive_lines(&plan.messages);
        if !lines.is_empty() {
            let entry = format!(
                "[{}] [RAW] {} messages\n{}",
                chrono::Local::now().format("%Y-%m-%d %H:%M"),
                plan.messages.len(),
                lines.join("\n")
            );
            let _one_writer = self.memory_file.lock().await;
            let files = self.files.clone();
            run_blocking(move || files.append_history(&entry)).await?;
        }
        advance(handle, plan, None).await?;
        Ok(Consolidated {
            messages: plan.end - plan.start,
            watermark: plan.end,
        })
    }
}

/// The slice a consolidation archives, chosen when it starts.
struct Plan {
    start: usize,
    end: usize,
    messages: Vec<Json>,
    previous_summary: Option<Summary>,
}

/// Chooses `[watermark, end)` for `scope`; `None` when there is nothing to archive.
fn plan(handle: &SessionHandle, scope: Scope, memory_window: usize) -> Option<Plan> {
    let s = handle.lock();
    let start = s.last_consolidated().min(s.len());
    let texts: Vec<&str> = (start..s.len())
        .filter_map(|i| s.messages().text(i))
        .collect();
    let parsed: Vec<Json> = texts
        .iter()
        .map(|t| Json::parse(t).unwrap_or(Json::Null))
        .collect();
    let roles: Vec<&str> = parsed
        .iter()
        .map(|m| {
            m.as_object()
                .and_then(|o| o.get("role"))
                .and_then(Json::as_str)
                .unwrap_or("")
        })
        .collect();
    let relative_end = match scope {
        Scope::All => (!roles.is_empty()).then_some(roles.len()),
        Scope::Classic => {
            if roles.len() < memory_window.max(1) {
                None
            } else {
                cut::classic_end(&roles, memory_window)
            }
        }
        Scope::Budget { keep_tokens } => {
            let tokens: Vec<usize> = texts
                .iter()
                .map(|t| t.chars().count().div_ceil(4))
                .collect();
            cut::budget_end(&roles, &tokens, keep_tokens)
        }
    }?;
    let messages = parsed.into_iter().take(relative_end).collect();
    Some(Plan {
        start,
        end: start + relative_end,
        messages,
        previous_summary: Summary::from_metadata(s.metadata()),
    })
}

/// Moves the watermark to the plan's end (never backwards, never past the messages), stores the summary, and
/// writes line 1 at once.
async fn advance(
    handle: &SessionHandle,
    plan: &Plan,
    summary: Option<Summary>,
) -> Result<(), ConsolidationError> {
    {
        let mut s = handle.lock();
        if s.last_consolidated() != plan.start || s.len() < plan.end {
            warn!(session = %handle.key(), "the session changed during consolidation; watermark left alone");
            return Ok(());
        }
        s.set_last_consolidated(plan.end);
        if let Some(summary) = summary {
            s.metadata_mut()
                .insert(summary::METADATA_KEY, summary.to_json());
        }
    }
    handle.commit().await?;
    Ok(())
}

async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ConsolidationError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .map_err(ConsolidationError::from)
}
