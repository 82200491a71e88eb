//! Scheduled jobs (nanobot's `jobs.json`) and the heartbeat.
//!
//! - `job`: the jobs and their nanobot JSON form, written byte for byte as nanobot writes it.
//! - `store`: `jobs.json` on disk: strict loading (a corrupt file is reported and never overwritten), atomic
//!   writes, and a lock with a re-read before every write so the daemon and `nanogate cron …` never lose each
//!   other's changes.
//! - `schedule`: next-run computation for `at`, `every` and `cron` (croner + chrono-tz), daylight saving.
//! - `clock`: "now" for the runner, tied to tokio time so tests can drive it with the paused clock.
//! - `runner`: the [`Scheduler`]: a tokio task that sleeps until the next due job, claims its slot, runs it
//!   through the router on session `cron:<id>`, records the run and delivers the reply; catch-up after a
//!   restart within `cron.catch_up_grace_minutes`.
//! - `heartbeat`: every `heartbeat.interval_minutes`, the active tasks of `HEARTBEAT.md` run as a turn whose
//!   reply goes to the most recently active chat.
//!
//! Why croner and not tokio-cron-scheduler (which the design card named): tokio-cron-scheduler rejects
//! 5-field expressions, requires day-of-month and day-of-week to both match (`0 12 1 * MON` fires on the
//! wrong days), freezes the UTC offset when a job is created (times drift after a DST change), polls the
//! real clock every 500 ms (tokio's paused clock cannot drive it, so it cannot be tested deterministically)
//! and truncates intervals to seconds. croner only evaluates expressions, correctly across DST; the small
//! loop in `runner` does the rest.

pub mod clock;
pub mod error;
pub mod heartbeat;
pub mod job;
pub mod runner;
pub mod schedule;
pub mod store;

pub use clock::Clock;
pub use error::CronError;
pub use job::{CronJob, JobState, JobsFile, Payload, Schedule, ScheduleKind};
pub use runner::{RunOutcome, Scheduler, SchedulerHandle, SchedulerOptions};
pub use store::JobStore;

use tokio_util::sync::CancellationToken;

/// A background task of this module (the scheduler, the heartbeat) that stops when told and is waited for.
pub struct ServiceHandle {
    name: &'static str,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ServiceHandle {
    fn new(
        name: &'static str,
        cancel: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    ) -> Self {
        ServiceHandle { name, cancel, task }
    }

    /// Tells the task to stop and waits until it has: work in progress finishes first.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        if let Err(e) = self.task.await {
            tracing::warn!("the {} task ended abnormally: {e}", self.name);
        }
    }

    /// Whether the task has stopped.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// Adds a job to the store bound to `now_ms`: validates the schedule, gives it a fresh id and its first
/// `nextRunAtMs`, and returns it. `at` jobs in the past are refused.
pub fn add_job(
    store: &JobStore,
    name: &str,
    schedule: Schedule,
    payload: Payload,
    delete_after_run: bool,
    now_ms: i64,
) -> Result<CronJob, CronError> {
    schedule::validate(&schedule)?;
    let next = schedule::next_after(&schedule, now_ms)?;
    if next.is_none() {
        return Err(CronError::InvalidSchedule(format!(
            "the time {} has already passed",
            schedule
                .at_ms
                .map_or_else(String::new, schedule::local_time)
        )));
    }
    store.update(|file| {
        let job = CronJob {
            id: job::new_id(&file.jobs),
            name: name.to_owned(),
            enabled: true,
            schedule,
            payload,
            state: JobState {
                next_run_at_ms: next,
                ..Default::default()
            },
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            delete_after_run,
            extra: Default::default(),
        };
        file.jobs.push(job.clone());
        Ok(job)
    })
}

/// Removes the job with this id.
pub fn remove_job(store: &JobStore, id: &str) -> Result<(), CronError> {
    store.update(|file| {
        if file.remove(id) {
            Ok(())
        } else {
            Err(CronError::NotFound(id.to_owned()))
        }
    })
}

/// Enables or disables the job with this id; enabling computes a fresh `nextRunAtMs` from `now_ms` (nanobot's
/// rule), disabling clears it. Returns the job as saved.
pub fn set_enabled(
    store: &JobStore,
    id: &str,
    enabled: bool,
    now_ms: i64,
) -> Result<CronJob, CronError> {
    store.update(|file| {
        let job = file
            .get_mut(id)
            .ok_or_else(|| CronError::NotFound(id.to_owned()))?;
        job.enabled = enabled;
        job.updated_at_ms = now_ms;
        job.state.next_run_at_ms = if enabled {
            schedule::next_after(&job.schedule, now_ms)?
        } else {
            None
        };
        Ok(job.clone())
    })
}
