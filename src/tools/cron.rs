//! `cron`: the agent schedules reminders and recurring tasks (nanobot's tool and parameters).
//!
//! `add` binds the job to the chat the tool runs in (`deliver = true`, `channel`, `to` = the chat id), so the
//! reply of each run comes back to that chat. Exactly one of `every_seconds`, `cron_expr` (with an optional
//! IANA `tz`) and `at` (an ISO date-time, local time unless it carries an offset; the job is deleted after
//! its run) is needed. The job is written to `jobs.json` under its lock; a running scheduler picks it up
//! within a second.

use std::path::PathBuf;

use chrono::{DateTime, Local, NaiveDateTime, TimeZone};

use super::{Tool, ToolContext, ToolError, ToolFuture, args};
use crate::cron::{self, Clock, CronError, JobStore, Payload, Schedule, schedule};
use crate::json::{Json, Object};

/// The `cron` tool over one jobs file.
pub struct CronTool {
    store: JobStore,
    clock: Clock,
}

impl CronTool {
    /// The tool for the jobs file at `path`, on the system clock.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_clock(path, Clock::system())
    }

    /// The tool on a given clock (tests share the scheduler's simulated clock).
    pub fn with_clock(path: impl Into<PathBuf>, clock: Clock) -> Self {
        CronTool {
            store: JobStore::new(path),
            clock,
        }
    }
}

fn prop(ty: &str, description: &str) -> Json {
    let mut p = Object::new();
    p.insert("type", Json::str(ty));
    p.insert("description", Json::str(description));
    Json::Object(p)
}

impl Tool for CronTool {
    fn name(&self) -> &'static str {
        "cron"
    }

    fn description(&self) -> &'static str {
        "Schedule reminders and recurring tasks. Actions: add, list, remove."
    }

    fn parameters(&self) -> Json {
        let mut action = Object::new();
        action.insert("type", Json::str("string"));
        action.insert(
            "enum",
            Json::Array(vec![
                Json::str("add"),
                Json::str("list"),
                Json::str("remove"),
            ]),
        );
        action.insert("description", Json::str("Action to perform"));
        let mut props = Object::new();
        props.insert("action", Json::Object(action));
        props.insert("message", prop("string", "Reminder message (for add)"));
        props.insert(
            "every_seconds",
            prop("integer", "Interval in seconds (for recurring tasks)"),
        );
        props.insert(
            "cron_expr",
            prop(
                "string",
                "Cron expression like '0 9 * * *' (for scheduled tasks)",
            ),
        );
        props.insert(
            "tz",
            prop(
                "string",
                "IANA timezone for cron expressions (e.g. 'America/Vancouver')",
            ),
        );
        props.insert(
            "at",
            prop(
                "string",
                "ISO datetime for one-time execution (e.g. '2026-02-12T10:30:00')",
            ),
        );
        props.insert("job_id", prop("string", "Job ID (for remove)"));
        let mut schema = Object::new();
        schema.insert("type", Json::str("object"));
        schema.insert("properties", Json::Object(props));
        schema.insert("required", Json::Array(vec![Json::str("action")]));
        Json::Object(schema)
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let action = args::string(args, "action")?.to_owned();
            let request = match action.as_str() {
                "add" => Request::Add(add_request(args, ctx, self.clock.now_ms())?),
                "list" => Request::List,
                "remove" => match args::opt_string(args, "job_id")? {
                    Some(id) if !id.trim().is_empty() => Request::Remove(id.trim().to_owned()),
                    _ => {
                        return Err(ToolError::InvalidArguments(
                            "`job_id` is required for remove".into(),
                        ));
                    }
                },
                other => {
                    return Err(ToolError::InvalidArguments(format!(
                        "unknown action {other:?}; use add, list or remove"
                    )));
                }
            };
            let store = self.store.clone();
            let now = self.clock.now_ms();
            // The store takes a file lock and does small blocking I/O.
            tokio::task::spawn_blocking(move || run(&store, request, now))
                .await
                .map_err(|e| ToolError::Failed(format!("the cron tool panicked: {e}")))?
        })
    }
}

enum Request {
    Add(AddRequest),
    List,
    Remove(String),
}

struct AddRequest {
    message: String,
    schedule: Schedule,
    delete_after_run: bool,
    channel: String,
    chat_id: String,
}

fn add_request(args: &Object, ctx: &ToolContext, now_ms: i64) -> Result<AddRequest, ToolError> {
    let invalid = |m: &str| ToolError::InvalidArguments(m.to_owned());
    let message = args::opt_string(args, "message")?
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| invalid("`message` is required for add"))?;
    if ctx.channel.is_empty() || ctx.chat_id.is_empty() {
        return Err(ToolError::Failed(
            "no chat to bind the job to (channel/chat_id unknown)".into(),
        ));
    }
    let every = args::opt_u64(args, "every_seconds")?;
    let expr = args::opt_string(args, "cron_expr")?.filter(|e| !e.trim().is_empty());
    let tz = args::opt_string(args, "tz")?.filter(|t| !t.trim().is_empty());
    let at = args::opt_string(args, "at")?.filter(|a| !a.trim().is_empty());
    if tz.is_some() && expr.is_none() {
        return Err(invalid("`tz` can only be used with `cron_expr`"));
    }
    let given = [every.is_some(), expr.is_some(), at.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given != 1 {
        return Err(invalid(
            "give exactly one of `every_seconds`, `cron_expr` or `at`",
        ));
    }
    let (sched, delete_after_run) = if let Some(secs) = every {
        if secs == 0 {
            return Err(invalid("`every_seconds` must be at least 1"));
        }
        let ms = i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        (Schedule::every(ms), false)
    } else if let Some(expr) = expr {
        (Schedule::cron(expr.trim(), tz.map(str::trim)), false)
    } else {
        let at = at.unwrap_or_default();
        let at_ms =
            parse_local_datetime(at).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        if at_ms <= now_ms {
            return Err(ToolError::InvalidArguments(format!(
                "`at` {at:?} is in the past (now is {})",
                schedule::local_time(now_ms)
            )));
        }
        (Schedule::at(at_ms), true)
    };
    schedule::validate(&sched).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
    Ok(AddRequest {
        message: message.to_owned(),
        schedule: sched,
        delete_after_run,
        channel: ctx.channel.clone(),
        chat_id: ctx.chat_id.clone(),
    })
}

fn run(store: &JobStore, request: Request, now: i64) -> Result<String, ToolError> {
    let failed = |e: CronError| ToolError::Failed(e.to_string());
    match request {
        Request::Add(r) => {
            let name = cron::job::name_from_message(&r.message);
            let payload = Payload::agent_turn(&r.message, true, Some(r.channel), Some(r.chat_id));
            let job = cron::add_job(store, &name, r.schedule, payload, r.delete_after_run, now)
                .map_err(failed)?;
            Ok(format!("Created job '{}' (id: {})", job.name, job.id))
        }
        Request::List => {
            let file = store.load().map_err(failed)?;
            let mut jobs: Vec<_> = file.jobs.iter().filter(|j| j.enabled).collect();
            // nanobot's order: soonest first, jobs without a next run last.
            jobs.sort_by_key(|j| j.state.next_run_at_ms.unwrap_or(i64::MAX));
            if jobs.is_empty() {
                return Ok("No scheduled jobs.".into());
            }
            let lines: Vec<String> = jobs
                .iter()
                .map(|j| {
                    format!(
                        "- {} (id: {}, {})",
                        j.name,
                        j.id,
                        schedule::describe(&j.schedule)
                    )
                })
                .collect();
            Ok(format!("Scheduled jobs:\n{}", lines.join("\n")))
        }
        Request::Remove(id) => match cron::remove_job(store, &id) {
            Ok(()) => Ok(format!("Removed job {id}")),
            Err(CronError::NotFound(_)) => Ok(format!("Job {id} not found")),
            Err(e) => Err(failed(e)),
        },
    }
}

/// An ISO 8601 date-time as epoch milliseconds: with an offset (`2026-02-12T10:30:00+01:00`, `…Z`) as given,
/// without one in the local zone (as Python's `datetime.fromisoformat(...).timestamp()` does). A local time
/// that does not exist (a DST gap) is an error; one that exists twice means the first.
pub fn parse_local_datetime(text: &str) -> Result<i64, CronError> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
    .or_else(|| {
        chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .ok_or_else(|| {
        CronError::InvalidSchedule(format!(
            "cannot read {text:?} as a date and time; use ISO format like 2026-02-12T10:30:00"
        ))
    })?;
    Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.timestamp_millis())
        .ok_or_else(|| {
            CronError::InvalidSchedule(format!(
                "{text:?} does not exist in the local time zone (the clock skips it for daylight saving)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_with_and_without_offset() {
        assert_eq!(
            parse_local_datetime("2026-02-12T10:30:00Z").unwrap(),
            1_770_892_200_000
        );
        assert_eq!(
            parse_local_datetime("2026-02-12T11:30:00+01:00").unwrap(),
            1_770_892_200_000
        );
        assert!(parse_local_datetime("2026-02-12T10:30:00").is_ok());
        assert!(parse_local_datetime("2026-02-12 10:30").is_ok());
        let e = parse_local_datetime("tomorrow").unwrap_err().to_string();
        assert!(e.contains("ISO"), "{e}");
    }
}
