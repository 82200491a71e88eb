//! The scheduler: a tokio task that sleeps until the next due job, fires it through the router, and records
//! the run in `jobs.json`.
//!
//! **The loop.** Each round the runner looks at the file's stamp (size, mtime, inode) and re-reads it when it
//! changed (and at least once a minute regardless), so jobs added, removed or edited by `nanogate cron …` or by the agent's `cron` tool are picked up
//! within one poll interval (1 s) without a restart. It then handles every due job and sleeps until the
//! earliest `nextRunAtMs`, or the next poll, whichever comes first. Time comes from a [`Clock`], so tests
//! drive the runner with tokio's paused clock.
//!
//! **Firing claims the slot first.** Due jobs are handled in one locked read-modify-write of the file
//! ([`JobStore::update`]): for each, the latest slot that has passed is found (several may have passed while
//! the daemon was down; they collapse into one), and then
//! - if `lastRunAtMs` is at or after that slot, the slot already ran: only `nextRunAtMs` moves on;
//! - if the slot is `cron.catch_up_grace_minutes` late or more, it is skipped: `lastStatus` becomes
//!   `skipped`, `lastError` says by how much it was missed, and a warning is logged with the job id;
//! - otherwise the job is claimed: `lastRunAtMs` = now and `nextRunAtMs` = the following slot are written
//!   *before* the turn starts. A crash during the turn therefore never runs the slot twice after a restart
//!   (at most once, which is what a reminder wants).
//!
//! An `at` job is finished when claimed: removed when `deleteAfterRun`, disabled otherwise (nanobot's rule).
//!
//! **A run** is a message on session `cron:<id>` carrying the job's message, queued on the router like any
//! chat message (so the lane runs it in order with everything else on that key). When the job delivers, the
//! message's channel and chat are the delivery target, as nanobot does, so the `message` tool and the system
//! prompt name the chat the user reads; otherwise they are `cron` and the job id. When the turn ends,
//! `lastStatus` (`ok`/`error`), `lastError` and `updatedAtMs` are recorded (again under the lock, on the
//! current file), and then, for a delivering job with a successful reply, the reply is sent as
//! `Outbound { channel, chat_id: to, text }`.
//!
//! **A corrupt file** stops all firing: the error (file, line and column or JSON path) is logged once per
//! version of the file, nothing is written, and the runner resumes by itself when the file is fixed.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::ServiceHandle;
use super::clock::Clock;
use super::error::CronError;
use super::job::{CronJob, JobsFile, STATUS_ERROR, STATUS_OK, STATUS_SKIPPED, ScheduleKind};
use super::schedule;
use super::store::{FileStamp, JobStore};
use crate::agent::Router;
use crate::bus::{Inbound, Outbound};
use crate::config::CronConfig;

/// How often the runner looks for changes to the file when no job is due sooner.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// The file is re-read at least this often even when its stamp looks unchanged: two writes of the same size
/// within one mtime tick, on a reused inode, would otherwise go unnoticed.
const REREAD_MS: i64 = 60_000;

/// A wake-up this late is still "on time", whatever the grace: timers and a busy machine are never exact.
const TIMER_SLACK_MS: i64 = 5_000;

/// How the scheduler runs.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerOptions {
    /// A missed slot runs at start-up (or after any pause) only if it is less than this late.
    pub catch_up_grace: Duration,
    /// How often the file is checked for outside changes.
    pub poll: Duration,
    /// Where "now" comes from.
    pub clock: Clock,
}

impl SchedulerOptions {
    /// The options `[cron]` describes, on the system clock.
    pub fn from_config(config: &CronConfig) -> Self {
        SchedulerOptions {
            catch_up_grace: Duration::from_secs(config.catch_up_grace_minutes.saturating_mul(60)),
            poll: DEFAULT_POLL,
            clock: Clock::system(),
        }
    }
}

/// Starts the scheduler.
pub struct Scheduler;

impl Scheduler {
    /// Loads `store` and starts the runner on the current tokio runtime. Fails, without starting, when the
    /// file cannot be read or parsed (the error names the file and where it broke; the file is untouched).
    /// Replies of delivering jobs go to `outbound`.
    pub async fn start(
        store: JobStore,
        router: Router,
        outbound: Option<mpsc::UnboundedSender<Outbound>>,
        options: SchedulerOptions,
    ) -> Result<SchedulerHandle, CronError> {
        let (file, stamp) = load_blocking(&store).await?;
        let enabled = file.jobs.iter().filter(|j| j.enabled).count();
        info!(
            file = %store.path().display(),
            jobs = file.jobs.len(),
            enabled,
            "scheduler started"
        );
        let cancel = CancellationToken::new();
        let runner = Runner {
            store,
            router,
            outbound,
            opts: options,
            view: Some(file),
            stamp,
            read_at_ms: options.clock.now_ms(),
            tick_error: None,
            runs: JoinSet::new(),
        };
        let task = tokio::spawn(runner.run(cancel.clone()));
        Ok(ServiceHandle::new("scheduler", cancel, task))
    }
}

/// The running scheduler. Shutting it down stops firing jobs, then waits for the runs in progress to finish
/// and be recorded (stopping the router's lanes first makes those runs end at once, recorded as errors).
pub type SchedulerHandle = ServiceHandle;

async fn load_blocking(store: &JobStore) -> Result<(JobsFile, Option<FileStamp>), CronError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        // The stamp first: if the file changes in between, the next round sees a new stamp and re-reads.
        let stamp = store.stamp();
        store.load().map(|f| (f, stamp))
    })
    .await
    .unwrap_or_else(|e| {
        Err(CronError::InvalidSchedule(format!(
            "loading jobs panicked: {e}"
        )))
    })
}

struct Runner {
    store: JobStore,
    router: Router,
    outbound: Option<mpsc::UnboundedSender<Outbound>>,
    opts: SchedulerOptions,
    /// The file as last read; `None` while it is corrupt.
    view: Option<JobsFile>,
    stamp: Option<FileStamp>,
    /// When the file was last read.
    read_at_ms: i64,
    /// The last error updating the file, so a lasting one is logged once.
    tick_error: Option<String>,
    runs: JoinSet<()>,
}

/// A job claimed for a run, as it was when claimed.
struct Fire {
    job: CronJob,
}

impl Runner {
    async fn run(mut self, cancel: CancellationToken) {
        loop {
            while self.runs.try_join_next().is_some() {}
            self.refresh(self.opts.clock.now_ms()).await;
            let now = self.opts.clock.now_ms();
            let handled = !self.any_due(now) || self.tick(now).await;
            let poll_ms = i64::try_from(self.opts.poll.as_millis())
                .unwrap_or(i64::MAX)
                .max(1);
            let mut wake = self
                .next_due()
                .unwrap_or(i64::MAX)
                .min(now.saturating_add(poll_ms));
            if !handled {
                // The file could not be updated: try again at the next poll, not in a busy loop.
                wake = now.saturating_add(poll_ms);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(self.opts.clock.instant_at(wake)) => {}
                _ = cancel.cancelled() => break,
            }
        }
        debug!(running = self.runs.len(), "scheduler stopping");
        while self.runs.join_next().await.is_some() {}
        info!("scheduler stopped");
    }

    /// Re-reads the file when its stamp changed (or it was not read for a while).
    async fn refresh(&mut self, now: i64) {
        let stamp = self.store.stamp();
        let fresh = now.saturating_sub(self.read_at_ms) < REREAD_MS;
        if fresh && stamp == self.stamp && (self.view.is_some() || stamp.is_none()) {
            return;
        }
        self.read_at_ms = now;
        let was_ok = self.view.is_some();
        match load_blocking(&self.store).await {
            Ok((file, stamp)) => {
                if !was_ok {
                    info!(file = %self.store.path().display(), "the jobs file is readable again; scheduling resumes");
                } else {
                    debug!(file = %self.store.path().display(), jobs = file.jobs.len(), "jobs file changed; re-read");
                }
                self.view = Some(file);
                self.stamp = stamp;
            }
            Err(e) => {
                // Logged once per version of the file, not once per poll or re-read.
                if was_ok || stamp != self.stamp {
                    error!("{e}");
                }
                self.view = None;
                self.stamp = stamp;
            }
        }
    }

    fn any_due(&self, now: i64) -> bool {
        self.view.as_ref().is_some_and(|f| {
            f.jobs
                .iter()
                .any(|j| j.enabled && j.state.next_run_at_ms.is_none_or(|n| n <= now))
        })
    }

    fn next_due(&self) -> Option<i64> {
        self.view.as_ref().and_then(|f| {
            f.jobs
                .iter()
                .filter(|j| j.enabled)
                .filter_map(|j| j.state.next_run_at_ms)
                .min()
        })
    }

    /// Handles every due job in one locked read-modify-write, then starts the claimed runs. Returns whether
    /// the file could be updated.
    async fn tick(&mut self, now: i64) -> bool {
        let store = self.store.clone();
        let grace_ms = i64::try_from(self.opts.catch_up_grace.as_millis()).unwrap_or(i64::MAX);
        let result = tokio::task::spawn_blocking(move || {
            let fires = store.update(|file| Ok(claim_due(file, now, grace_ms)))?;
            let stamp = store.stamp();
            store.load().map(|f| (fires, f, stamp))
        })
        .await;
        let (fires, file, stamp) = match result {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                // Logged once per distinct error, not once per poll.
                let text = e.to_string();
                if self.tick_error.as_ref() != Some(&text) {
                    error!("{text}");
                    self.tick_error = Some(text);
                }
                // Re-read next round (the file may be corrupt now; `refresh` stops the scheduler then).
                self.stamp = None;
                return false;
            }
            Err(e) => {
                error!("the scheduler's file update panicked: {e}");
                return false;
            }
        };
        self.tick_error = None;
        self.view = Some(file);
        self.stamp = stamp;
        self.read_at_ms = now;
        for fire in fires {
            let run = run_job(
                self.store.clone(),
                self.router.clone(),
                self.outbound.clone(),
                self.opts.clock,
                fire.job,
            );
            self.runs.spawn(run);
        }
        true
    }
}

/// Decides, for every due job of `file`, whether it runs, was already covered, or is skipped; moves
/// `nextRunAtMs` on; returns the jobs to run. Pure apart from logging, so it is the unit the tests check.
fn claim_due(file: &mut JobsFile, now: i64, grace_ms: i64) -> Vec<Fire> {
    let mut fires = Vec::new();
    let mut finished = Vec::new();
    for job in file.jobs.iter_mut().filter(|j| j.enabled) {
        let slot = match job.state.next_run_at_ms {
            Some(next) if next > now => continue,
            Some(next) => next,
            None => match (job.schedule.kind, job.schedule.at_ms) {
                // An `at` job without a next run: due if its time has come and it never ran.
                (ScheduleKind::At, Some(at)) if at <= now => at,
                _ => {
                    match schedule::next_after(&job.schedule, now) {
                        Ok(Some(next)) => job.state.next_run_at_ms = Some(next),
                        Ok(None) => finished.push(job.id.clone()),
                        Err(e) => broken(job, &e, now),
                    }
                    continue;
                }
            },
        };
        let (latest, next) = match schedule::latest_due(&job.schedule, slot, now)
            .and_then(|l| schedule::next_after_slot(&job.schedule, l, now).map(|n| (l, n)))
        {
            Ok(v) => v,
            Err(e) => {
                broken(job, &e, now);
                continue;
            }
        };
        job.state.next_run_at_ms = next;
        let is_at = job.schedule.kind == ScheduleKind::At;
        let late = now - latest;
        if job.state.last_run_at_ms.is_some_and(|last| last >= latest) {
            debug!(job = %job.id, slot = latest, "slot already ran; not running it again");
        } else if late >= grace_ms && late > TIMER_SLACK_MS {
            let minutes = late / 60_000;
            warn!(job = %job.id, name = %job.name, slot = %schedule::local_time(latest), late_minutes = minutes,
                "missed a run while the scheduler was not running; too late to catch up, skipped");
            crate::metrics::cron_run(STATUS_SKIPPED);
            job.state.last_status = Some(STATUS_SKIPPED.into());
            job.state.last_error = Some(format!(
                "missed the run at {} by {minutes} min (catch-up grace: {} min)",
                schedule::local_time(latest),
                grace_ms / 60_000
            ));
            job.updated_at_ms = now;
        } else {
            if late > TIMER_SLACK_MS {
                info!(job = %job.id, name = %job.name, late_ms = late, "catching up a run missed while the scheduler was not running");
            }
            job.state.last_run_at_ms = Some(now);
            job.updated_at_ms = now;
            fires.push(Fire { job: job.clone() });
        }
        if is_at || next.is_none() {
            finished.push(job.id.clone());
        }
    }
    // Finished one-shot jobs: removed when deleteAfterRun, otherwise disabled (nanobot's rule).
    file.jobs.retain_mut(|j| {
        if !finished.contains(&j.id) {
            return true;
        }
        if j.delete_after_run {
            return false;
        }
        j.enabled = false;
        j.state.next_run_at_ms = None;
        true
    });
    fires
}

/// A job whose schedule cannot be evaluated (a hand-edited expression, say): disabled, with the reason in
/// `lastError`, instead of being retried on every round.
fn broken(job: &mut CronJob, e: &CronError, now: i64) {
    error!(job = %job.id, name = %job.name, "cannot schedule this job, disabling it: {e}");
    job.enabled = false;
    job.state.next_run_at_ms = None;
    job.state.last_status = Some(STATUS_ERROR.into());
    job.state.last_error = Some(e.to_string());
    job.updated_at_ms = now;
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// `ok` or `error`.
    pub status: &'static str,
    /// Why it failed.
    pub error: Option<String>,
    /// The reply, when the turn succeeded.
    pub reply: Option<String>,
}

/// Runs `job` once as a turn on session `cron:<id>` and waits for the reply. Used by the scheduler and by
/// `nanogate cron run`.
pub async fn execute(router: &Router, job: &CronJob) -> RunOutcome {
    let (channel, chat_id) = job
        .delivery()
        .unwrap_or_else(|| ("cron".to_owned(), job.id.clone()));
    let inbound = Inbound {
        channel,
        chat_id,
        sender: "cron".into(),
        text: job.payload.message.clone(),
        media: Vec::new(),
        session_key: Some(job.session_key()),
    };
    match router.ask(inbound).await {
        Some(r) if r.error => RunOutcome {
            status: STATUS_ERROR,
            error: Some(r.text),
            reply: None,
        },
        Some(r) => RunOutcome {
            status: STATUS_OK,
            error: None,
            reply: Some(r.text),
        },
        None => RunOutcome {
            status: STATUS_ERROR,
            error: Some("the run was stopped before it finished".into()),
            reply: None,
        },
    }
}

/// Records a finished run on the job with this id, if it still exists.
pub fn record(file: &mut JobsFile, id: &str, outcome: &RunOutcome, now: i64) {
    crate::metrics::cron_run(outcome.status);
    if let Some(job) = file.get_mut(id) {
        job.state.last_status = Some(outcome.status.into());
        job.state.last_error = outcome.error.clone();
        job.updated_at_ms = now;
    }
}

async fn run_job(
    store: JobStore,
    router: Router,
    outbound: Option<mpsc::UnboundedSender<Outbound>>,
    clock: Clock,
    job: CronJob,
) {
    info!(job = %job.id, name = %job.name, session = %job.session_key(), "running job");
    let outcome = execute(&router, &job).await;
    match &outcome.error {
        Some(e) => error!(job = %job.id, name = %job.name, "job failed: {e}"),
        None => info!(job = %job.id, name = %job.name, "job done"),
    }
    let now = clock.now_ms();
    let id = job.id.clone();
    let recorded = outcome.clone();
    let result = tokio::task::spawn_blocking(move || {
        store.update(|file| {
            record(file, &id, &recorded, now);
            Ok(())
        })
    })
    .await;
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => error!(job = %job.id, "cannot record the run: {e}"),
        Err(e) => error!(job = %job.id, "recording the run panicked: {e}"),
    }
    deliver(outbound.as_ref(), &job, &outcome);
}

fn deliver(
    outbound: Option<&mpsc::UnboundedSender<Outbound>>,
    job: &CronJob,
    outcome: &RunOutcome,
) {
    let (Some((channel, chat_id)), Some(text)) = (job.delivery(), outcome.reply.as_ref()) else {
        return;
    };
    if text.trim().is_empty() {
        return;
    }
    let Some(out) = outbound else {
        warn!(job = %job.id, "no outbound channel; the reply was not delivered");
        return;
    };
    let msg = Outbound {
        channel,
        chat_id,
        text: text.clone(),
    };
    if out.send(msg).is_err() {
        warn!(job = %job.id, "reply dropped: the outbound queue is closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::job::{Payload, Schedule};

    fn job(id: &str, schedule: Schedule, next: Option<i64>, last: Option<i64>) -> CronJob {
        CronJob {
            id: id.into(),
            name: id.into(),
            enabled: true,
            schedule,
            payload: Payload::agent_turn("hi", false, None, None),
            state: crate::cron::job::JobState {
                next_run_at_ms: next,
                last_run_at_ms: last,
                ..Default::default()
            },
            created_at_ms: 0,
            updated_at_ms: 0,
            delete_after_run: false,
            extra: Default::default(),
        }
    }

    const MIN: i64 = 60_000;

    #[test]
    fn inside_the_grace_runs_once_outside_is_skipped() {
        let mut f = JobsFile::default();
        f.jobs
            .push(job("a", Schedule::every(60 * MIN), Some(100 * MIN), None));
        f.jobs
            .push(job("b", Schedule::every(600 * MIN), Some(10 * MIN), None));
        let fires = claim_due(&mut f, 130 * MIN, 60 * MIN);
        assert_eq!(fires.len(), 1);
        assert_eq!(fires[0].job.id, "a");
        let a = f.get("a").unwrap();
        assert_eq!(a.state.last_run_at_ms, Some(130 * MIN));
        assert_eq!(a.state.next_run_at_ms, Some(160 * MIN));
        let b = f.get("b").unwrap();
        assert_eq!(b.state.last_status.as_deref(), Some("skipped"));
        assert_eq!(b.state.next_run_at_ms, Some(610 * MIN));
    }

    #[test]
    fn a_covered_slot_never_runs_again() {
        let mut f = JobsFile::default();
        f.jobs.push(job(
            "a",
            Schedule::every(60 * MIN),
            Some(100 * MIN),
            Some(101 * MIN),
        ));
        assert!(claim_due(&mut f, 110 * MIN, 60 * MIN).is_empty());
        assert_eq!(f.jobs[0].state.next_run_at_ms, Some(160 * MIN));
    }

    #[test]
    fn at_jobs_finish_when_claimed() {
        let mut f = JobsFile::default();
        f.jobs
            .push(job("keep", Schedule::at(5 * MIN), Some(5 * MIN), None));
        let mut gone = job("gone", Schedule::at(5 * MIN), Some(5 * MIN), None);
        gone.delete_after_run = true;
        f.jobs.push(gone);
        assert_eq!(claim_due(&mut f, 5 * MIN, 60 * MIN).len(), 2);
        assert_eq!(f.jobs.len(), 1);
        assert!(!f.jobs[0].enabled);
        assert_eq!(f.jobs[0].state.next_run_at_ms, None);
    }

    #[test]
    fn a_broken_expression_disables_the_job() {
        let mut f = JobsFile::default();
        f.jobs
            .push(job("x", Schedule::cron("nope", None), None, None));
        assert!(claim_due(&mut f, 0, 60 * MIN).is_empty());
        assert!(!f.jobs[0].enabled);
        assert!(
            f.jobs[0]
                .state
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("invalid cron expression"))
        );
    }
}
