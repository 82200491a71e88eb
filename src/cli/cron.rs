//! `nanogate cron …`: list, add, remove, enable/disable and run scheduled jobs.
//!
//! Every change goes through the jobs file's lock with a re-read (see `cron::store`), so these commands are
//! safe while the daemon runs: it picks the change up within a second and keeps its own run records.
//! `cron run` runs the job through an agent, like `agent -m`, so it needs the workspace to itself.

use anyhow::{Context as _, Result, bail};
use clap::Subcommand;
use tokio::sync::mpsc;

use super::Context;
use super::agent::build_agent;
use crate::agent::Router;
use crate::cron::{
    self, JobStore, Payload, Schedule, ScheduleKind, clock::system_now_ms, runner, schedule,
};
use crate::tools::cron::parse_local_datetime;

/// `nanogate cron` subcommands.
#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// List jobs (enabled ones, or all with --all).
    List {
        /// Include disabled jobs.
        #[arg(long)]
        all: bool,
    },
    /// Add a job.
    Add {
        /// A short name.
        #[arg(long)]
        name: String,
        /// What the agent is told when the job fires.
        #[arg(long)]
        message: String,
        /// Run every SECONDS seconds.
        #[arg(long, value_name = "SECONDS", group = "when")]
        every: Option<u64>,
        /// A cron expression: 5 fields, 6 with seconds first, or @daily and the like.
        #[arg(long = "cron", value_name = "EXPR", group = "when")]
        cron_expr: Option<String>,
        /// IANA time zone for --cron [default: the local zone].
        #[arg(long, requires = "cron_expr")]
        tz: Option<String>,
        /// Run once at this ISO date-time (local time unless it has an offset).
        #[arg(long, value_name = "ISO", group = "when")]
        at: Option<String>,
        /// Send the reply to --channel/--to.
        #[arg(long, requires_all = ["channel", "to"])]
        deliver: bool,
        /// The channel to deliver to (telegram, discord, …).
        #[arg(long)]
        channel: Option<String>,
        /// The chat id to deliver to.
        #[arg(long)]
        to: Option<String>,
    },
    /// Remove a job.
    Remove {
        /// The job id.
        id: String,
    },
    /// Enable a job (or disable it with --disable).
    Enable {
        /// The job id.
        id: String,
        /// Disable instead.
        #[arg(long)]
        disable: bool,
    },
    /// Run a job now through the agent and print the reply.
    Run {
        /// The job id.
        id: String,
        /// Run it even when it is disabled.
        #[arg(long)]
        force: bool,
    },
}

/// Runs `nanogate cron …`.
pub async fn run(ctx: &Context, cmd: CronCommand) -> Result<i32> {
    let store = JobStore::new(ctx.config.cron.store_path()?);
    match cmd {
        CronCommand::List { all } => list(&store, all),
        CronCommand::Add {
            name,
            message,
            every,
            cron_expr,
            tz,
            at,
            deliver,
            channel,
            to,
        } => {
            let now = system_now_ms();
            let (sched, delete_after_run) = match (every, cron_expr, at) {
                (Some(0), _, _) => bail!("--every must be at least 1 second"),
                (Some(secs), _, _) => (
                    Schedule::every(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)),
                    false,
                ),
                (_, Some(expr), _) => (Schedule::cron(&expr, tz.as_deref()), false),
                (_, _, Some(at)) => (Schedule::at(parse_local_datetime(&at)?), false),
                _ => bail!("give one of --every SECONDS, --cron EXPR or --at ISO"),
            };
            let payload = Payload::agent_turn(&message, deliver, channel, to);
            let job = cron::add_job(&store, &name, sched, payload, delete_after_run, now)?;
            println!(
                "Added job '{}' ({}), next run {}",
                job.name,
                job.id,
                job.state
                    .next_run_at_ms
                    .map_or_else(|| "-".into(), schedule::local_time)
            );
            Ok(0)
        }
        CronCommand::Remove { id } => {
            cron::remove_job(&store, &id)?;
            println!("Removed job {id}");
            Ok(0)
        }
        CronCommand::Enable { id, disable } => {
            let job = cron::set_enabled(&store, &id, !disable, system_now_ms())?;
            println!(
                "Job '{}' ({}) {}",
                job.name,
                job.id,
                if disable { "disabled" } else { "enabled" }
            );
            Ok(0)
        }
        CronCommand::Run { id, force } => run_now(ctx, &store, &id, force).await,
    }
}

fn list(store: &JobStore, all: bool) -> Result<i32> {
    let file = store.load()?;
    let mut jobs: Vec<_> = file.jobs.iter().filter(|j| all || j.enabled).collect();
    // Soonest first (nanobot's order); jobs without a next run last.
    jobs.sort_by_key(|j| j.state.next_run_at_ms.unwrap_or(i64::MAX));
    if jobs.is_empty() {
        println!("No scheduled jobs.");
        return Ok(0);
    }
    let rows: Vec<[String; 7]> = jobs
        .iter()
        .map(|j| {
            let tz = match j.schedule.kind {
                ScheduleKind::Cron => j.schedule.tz.clone().unwrap_or_else(|| "local".into()),
                _ => "-".into(),
            };
            [
                j.id.clone(),
                j.name.clone(),
                schedule::describe(&j.schedule),
                tz,
                if j.enabled { "yes" } else { "no" }.into(),
                j.state
                    .next_run_at_ms
                    .map_or_else(|| "-".into(), schedule::local_time),
                j.state.last_status.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let header = [
        "ID", "NAME", "SCHEDULE", "TIMEZONE", "ENABLED", "NEXT RUN", "LAST",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    Ok(0)
}

async fn run_now(ctx: &Context, store: &JobStore, id: &str, force: bool) -> Result<i32> {
    let file = store.load()?;
    let Some(job) = file.get(id).cloned() else {
        bail!("no job with id {id:?} in {}", store.path().display());
    };
    if !job.enabled && !force {
        bail!("job {id} is disabled; use --force to run it anyway");
    }
    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let agent = build_agent(ctx, Some(out_tx)).context(
        "`cron run` runs the job in this process, so it needs the workspace to itself (stop the daemon, or wait \
         for the job's next run there)",
    )?;
    let router = Router::new(agent);
    let printer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            println!("[message to {}:{}] {}", m.channel, m.chat_id, m.text);
        }
    });
    let started = system_now_ms();
    let outcome = runner::execute(&router, &job).await;
    printer.abort();
    let recorded = outcome.clone();
    let job_id = job.id.clone();
    store
        .update(|f| {
            if let Some(j) = f.get_mut(&job_id) {
                j.state.last_run_at_ms = Some(started);
            }
            runner::record(f, &job_id, &recorded, system_now_ms());
            Ok(())
        })
        .with_context(|| format!("recording the run of job {id}"))?;
    match (&outcome.reply, &outcome.error) {
        (Some(reply), _) => {
            if let Some((channel, to)) = job.delivery() {
                // The chat channels live in the gateway; this command can only show the reply.
                println!("(for {channel}:{to}; delivery needs the gateway)");
            }
            println!("{reply}");
            Ok(0)
        }
        (None, Some(e)) => {
            eprintln!("error: {e}");
            Ok(1)
        }
        (None, None) => Ok(1),
    }
}
