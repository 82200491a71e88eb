//! Session upkeep: sessions untouched for `session.max_age_days` end, and their files move to the archive.
//!
//! A session is *untouched* when its file has not been modified for that long (every added message, clear and
//! consolidation writes the file, so the modification time is the last sign of life; it needs no parsing and
//! works for files nanobot wrote). Ending one is `/new` without the fresh start:
//!
//! 1. every unconsolidated message is archived into memory (`HISTORY.md`, `MEMORY.md`) through the model, the
//!    same step `/new` runs; if it fails the session is left exactly as it was, a warning is logged, and the
//!    next sweep tries again — an old conversation is never archived without its memory;
//! 2. the file moves to `sessions/archive/<file name>.<UTC time>.jsonl` and no live file remains, so
//!    `sessions list` (and nanobot) no longer show the key; a new message on that key starts a new session.
//!
//! Nothing is ever deleted. A session in use (a turn holds it) or one that changed during step 1 is skipped
//! until the next sweep. [`spawn_daily_sweep`] runs [`sweep`] a minute after start-up and then once a day.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::Agent;
use super::memory::Scope;
use crate::session::{self, Retired};

/// Delay before the first sweep, so start-up (channels connecting) is not slowed by it.
pub const FIRST_SWEEP_DELAY: Duration = Duration::from_secs(60);
/// Time between sweeps.
pub const SWEEP_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Sessions ended: key and archive path.
    pub archived: Vec<(String, PathBuf)>,
    /// Old sessions left alone this time: key and reason.
    pub skipped: Vec<(String, String)>,
}

/// Ends every session whose file was last modified more than `session.max_age_days` before `now`. Does
/// nothing when `max_age_days` is 0. Errors on one session are reported in the result, never abort the sweep;
/// only an unreadable sessions directory is an error.
pub async fn sweep(
    agent: &Arc<Agent>,
    now: SystemTime,
) -> Result<SweepReport, session::SessionError> {
    let days = agent.config.session.max_age_days;
    let mut report = SweepReport::default();
    if days == 0 {
        return Ok(report);
    }
    let max_age = Duration::from_secs(days.saturating_mul(24 * 60 * 60));
    let list = agent.store.list().await?;
    for info in list {
        let modified = match std::fs::metadata(&info.path).and_then(|m| m.modified()) {
            Ok(t) => t,
            Err(e) => {
                report
                    .skipped
                    .push((info.key, format!("cannot read its modification time: {e}")));
                continue;
            }
        };
        // A modification time in the future (clock changes) counts as fresh.
        if now.duration_since(modified).unwrap_or_default() <= max_age {
            continue;
        }
        let key = info.key;
        match end_session(agent, &key).await {
            Ok(Retired::Archived(path)) => report.archived.push((key, path)),
            Ok(Retired::NoFile) => {}
            Ok(Retired::InUse) => {
                report.skipped.push((key, "in use; next sweep".into()));
            }
            Ok(Retired::Changed) => {
                report
                    .skipped
                    .push((key, "received a message meanwhile".into()));
            }
            Err(reason) => {
                warn!(session = %key, "session upkeep: left the session alone: {reason}");
                report.skipped.push((key, reason));
            }
        }
    }
    info!(
        archived = report.archived.len(),
        skipped = report.skipped.len(),
        max_age_days = days,
        "session upkeep done"
    );
    Ok(report)
}

/// Archives `key`'s unconsolidated messages into memory, then retires its file.
async fn end_session(agent: &Arc<Agent>, key: &str) -> Result<Retired, String> {
    let handle = agent.store.get(key).await.map_err(|e| e.to_string())?;
    agent
        .memory
        .consolidate_now(agent, &handle, Scope::All)
        .await
        .map_err(|e| format!("memory archival failed: {e}"))?;
    let updated_at = handle.lock().updated_at().to_owned();
    drop(handle);
    agent
        .store
        .retire(key, &updated_at, true)
        .await
        .map_err(|e| e.to_string())
}

/// Runs [`sweep`] [`FIRST_SWEEP_DELAY`] after start-up and then every [`SWEEP_PERIOD`], for the life of the
/// daemon (abort the handle to stop it). Returns a finished task when `session.max_age_days` is 0.
pub fn spawn_daily_sweep(agent: Arc<Agent>) -> JoinHandle<()> {
    tokio::spawn(async move {
        if agent.config.session.max_age_days == 0 {
            return;
        }
        let start = tokio::time::Instant::now() + FIRST_SWEEP_DELAY;
        let mut tick = tokio::time::interval_at(start, SWEEP_PERIOD);
        // A suspended machine wakes up to one sweep, not a burst of missed ones.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = sweep(&agent, SystemTime::now()).await {
                warn!("session upkeep failed: {e}");
            }
        }
    })
}
