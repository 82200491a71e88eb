//! The scheduler against tokio's paused clock and a fake model on 127.0.0.1: schedule kinds and DST, restarts
//! and catch-up, the jobs file (fixture bytes, corruption, concurrent CLI edits), the `cron` tool, the
//! heartbeat, and the `nanogate cron` command.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use chrono::{NaiveDate, TimeZone, Utc};
use common::fake_openai::FakeOpenAi;
use nanogate::agent::{Agent, Router};
use nanogate::bus::{Inbound, Outbound};
use nanogate::config::Config;
use nanogate::cron::heartbeat::{self, Beat};
use nanogate::cron::{
    self, Clock, CronJob, JobStore, JobsFile, Payload, Schedule, Scheduler, SchedulerHandle,
    SchedulerOptions, clock::system_now_ms,
};
use nanogate::json::Json;
use nanogate::provider::Provider;
use nanogate::session::{SessionStore, StoreOptions, load_file};
use nanogate::tools::{CronTool, default_registry};
use tokio::sync::mpsc;

const SEC: i64 = 1_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
    let t = NaiveDate::from_ymd_opt(y, mo, d)
        .and_then(|d| d.and_hms_opt(h, mi, 0))
        .expect("valid date");
    Utc.from_utc_datetime(&t).timestamp_millis()
}

struct Rig {
    fake: FakeOpenAi,
    ws: tempfile::TempDir,
    router: Router,
    sessions: SessionStore,
    store: JobStore,
    clock: Clock,
    out_tx: mpsc::UnboundedSender<Outbound>,
    out_rx: mpsc::UnboundedReceiver<Outbound>,
}

impl Rig {
    /// An agent on a fake model, a jobs file in a temp dir, and a simulated clock reading `now_ms`.
    async fn new(now_ms: i64) -> Rig {
        let fake = FakeOpenAi::start().await;
        let ws = tempfile::tempdir().expect("tmp");
        let mut c = Config::default();
        c.provider.api_base = fake.base_url();
        c.provider.api_key = Some("sk-test".into());
        c.provider.max_retries = 0;
        let clock = Clock::simulated(now_ms);
        let jobs_path = ws.path().join("cron/jobs.json");
        // The agent's `cron` tool shares the scheduler's clock.
        let mut tools = default_registry();
        tools.register(Arc::new(CronTool::with_clock(&jobs_path, clock)));
        let sessions = SessionStore::open(ws.path(), StoreOptions::default()).expect("store");
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let agent = Agent::new(
            c.clone(),
            ws.path().to_path_buf(),
            sessions.clone(),
            Provider::new(&c.provider).expect("provider"),
            tools,
            Some(out_tx.clone()),
        );
        Rig {
            fake,
            router: Router::new(agent),
            sessions,
            store: JobStore::new(jobs_path),
            clock,
            ws,
            out_tx,
            out_rx,
        }
    }

    fn options(&self, poll: Duration) -> SchedulerOptions {
        SchedulerOptions {
            catch_up_grace: Duration::from_secs(60 * 60),
            poll,
            clock: self.clock,
        }
    }

    async fn start(&self) -> SchedulerHandle {
        self.start_with(self.options(Duration::from_secs(1))).await
    }

    async fn start_with(&self, opts: SchedulerOptions) -> SchedulerHandle {
        Scheduler::start(
            self.store.clone(),
            self.router.clone(),
            Some(self.out_tx.clone()),
            opts,
        )
        .await
        .expect("scheduler starts")
    }

    /// Adds a job delivering to telegram:42 at the rig's "now".
    fn add(&self, schedule: Schedule, message: &str) -> CronJob {
        let payload =
            Payload::agent_turn(message, true, Some("telegram".into()), Some("42".into()));
        cron::add_job(
            &self.store,
            message,
            schedule,
            payload,
            false,
            self.clock.now_ms(),
        )
        .expect("add job")
    }

    /// The next delivered reply (simulated time runs meanwhile).
    async fn delivered(&mut self) -> Outbound {
        tokio::time::timeout(Duration::from_secs(72 * 3600), self.out_rx.recv())
            .await
            .expect("a reply within 72 simulated hours")
            .expect("outbound open")
    }

    /// Lets simulated time run until the clock reads `ms`.
    async fn sleep_until(&self, ms: i64) {
        tokio::time::sleep_until(self.clock.instant_at(ms)).await;
    }

    fn job(&self, id: &str) -> CronJob {
        self.store
            .load()
            .expect("load")
            .get(id)
            .cloned()
            .expect("job exists")
    }

    fn no_reply_yet(&mut self) {
        assert!(
            self.out_rx.try_recv().is_err(),
            "nothing should have been delivered"
        );
    }
}

fn last_user_text(request: &Json) -> String {
    let messages = request
        .as_object()
        .and_then(|o| o.get("messages"))
        .and_then(Json::as_array)
        .expect("messages");
    messages
        .iter()
        .rev()
        .find(|m| {
            m.as_object()
                .and_then(|o| o.get("role"))
                .and_then(Json::as_str)
                == Some("user")
        })
        .and_then(|m| m.as_object()?.get("content")?.as_str().map(str::to_owned))
        .expect("a user message")
}

#[tokio::test(start_paused = true)]
async fn every_fires_on_its_grid_to_the_millisecond() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::every(1_500), "tick");
    assert_eq!(job.state.next_run_at_ms, Some(t0 + 1_500));
    let handle = rig.start().await;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let out = rig.delivered().await;
        assert_eq!(
            out,
            Outbound {
                channel: "telegram".into(),
                chat_id: "42".into(),
                text: "ok".into()
            }
        );
        let j = rig.job(&job.id);
        assert_eq!(j.state.last_status.as_deref(), Some("ok"));
        runs.push(j.state.last_run_at_ms.expect("ran") - t0);
    }
    assert_eq!(runs, [1_500, 3_000, 4_500]);
    handle.shutdown().await;
    // Every run was a turn on cron:<id> with the job's message.
    assert!(
        rig.fake
            .requests()
            .iter()
            .all(|r| last_user_text(r) == "tick")
    );
    let session = load_file(
        &rig.ws
            .path()
            .join(format!("sessions/cron_{}.jsonl", job.id)),
        None,
    )
    .expect("read")
    .expect("session file");
    assert_eq!(session.session.key(), format!("cron:{}", job.id));
}

#[tokio::test(start_paused = true)]
async fn at_fires_once_then_the_job_is_disabled_or_deleted() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let keep = rig.add(Schedule::at(t0 + 90 * MIN), "keep me");
    let gone = cron::add_job(
        &rig.store,
        "gone",
        Schedule::at(t0 + 2 * HOUR),
        Payload::agent_turn("gone", true, Some("telegram".into()), Some("42".into())),
        true,
        t0,
    )
    .expect("add");
    let handle = rig.start().await;
    rig.delivered().await;
    let k = rig.job(&keep.id);
    assert_eq!(k.state.last_run_at_ms, Some(t0 + 90 * MIN));
    assert!(!k.enabled);
    assert_eq!(k.state.next_run_at_ms, None);
    rig.delivered().await;
    let file = rig.store.load().expect("load");
    assert!(file.get(&gone.id).is_none(), "deleteAfterRun removes it");
    rig.sleep_until(t0 + 48 * HOUR).await;
    rig.no_reply_yet();
    assert_eq!(rig.fake.request_count(), 2);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn cron_in_berlin_spring_forward_runs_at_the_first_valid_instant() {
    // 29 March 2026, Berlin: 02:00 CET jumps to 03:00 CEST (01:00 UTC); 02:30 does not exist that day.
    let t0 = utc(2026, 3, 28, 23, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::cron("30 2 * * *", Some("Europe/Berlin")), "night");
    assert_eq!(job.state.next_run_at_ms, Some(utc(2026, 3, 29, 1, 0)));
    let handle = rig.start_with(rig.options(Duration::from_secs(600))).await;
    rig.sleep_until(utc(2026, 3, 29, 0, 59)).await;
    rig.no_reply_yet();
    rig.delivered().await;
    assert_eq!(
        rig.job(&job.id).state.last_run_at_ms,
        Some(utc(2026, 3, 29, 1, 0))
    );
    rig.delivered().await;
    let j = rig.job(&job.id);
    assert_eq!(
        j.state.last_run_at_ms,
        Some(utc(2026, 3, 30, 0, 30)),
        "02:30 CEST"
    );
    assert_eq!(rig.fake.request_count(), 2);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn cron_in_berlin_fall_back_runs_a_doubled_time_once() {
    // 25 October 2026, Berlin: 03:00 CEST goes back to 02:00 CET; 02:30 is 00:30 UTC and again 01:30 UTC.
    let t0 = utc(2026, 10, 24, 22, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::cron("30 2 * * *", Some("Europe/Berlin")), "night");
    let handle = rig.start_with(rig.options(Duration::from_secs(600))).await;
    rig.delivered().await;
    let j = rig.job(&job.id);
    assert_eq!(j.state.last_run_at_ms, Some(utc(2026, 10, 25, 0, 30)));
    assert_eq!(
        j.state.next_run_at_ms,
        Some(utc(2026, 10, 26, 1, 30)),
        "the second 02:30 is not a new slot"
    );
    rig.sleep_until(utc(2026, 10, 25, 12, 0)).await;
    rig.no_reply_yet();
    assert_eq!(rig.fake.request_count(), 1);
    rig.delivered().await;
    assert_eq!(
        rig.job(&job.id).state.last_run_at_ms,
        Some(utc(2026, 10, 26, 1, 30))
    );
    handle.shutdown().await;
}

/// Sets a job's persisted state, as a daemon that stopped would have left it.
fn set_state(store: &JobStore, id: &str, next: Option<i64>, last: Option<i64>) {
    store
        .update(|f| {
            let j = f.get_mut(id).expect("job");
            j.state.next_run_at_ms = next;
            j.state.last_run_at_ms = last;
            Ok(())
        })
        .expect("update");
}

#[tokio::test(start_paused = true)]
async fn a_restart_inside_the_grace_catches_up_once() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::every(HOUR), "hourly");
    // The daemon was down: the slot 40 minutes ago (and the one before it) were missed.
    set_state(
        &rig.store,
        &job.id,
        Some(t0 - 100 * MIN),
        Some(t0 - 160 * MIN),
    );
    let handle = rig.start().await;
    rig.delivered().await;
    let j = rig.job(&job.id);
    assert_eq!(j.state.last_run_at_ms, Some(t0), "ran at start-up");
    assert_eq!(
        j.state.next_run_at_ms,
        Some(t0 + 20 * MIN),
        "back on its grid"
    );
    rig.sleep_until(t0 + 19 * MIN).await;
    rig.no_reply_yet();
    assert_eq!(
        rig.fake.request_count(),
        1,
        "the missed slots ran once, together"
    );
    rig.delivered().await;
    assert_eq!(rig.job(&job.id).state.last_run_at_ms, Some(t0 + 20 * MIN));
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_outside_the_grace_skips_and_says_so() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::cron("0 6 * * *", Some("UTC")), "morning");
    // The 06:00 slot passed two hours ago while the daemon was down.
    set_state(&rig.store, &job.id, Some(utc(2026, 5, 1, 6, 0)), None);
    let handle = rig.start().await;
    rig.sleep_until(t0 + 10 * MIN).await;
    rig.no_reply_yet();
    assert_eq!(rig.fake.request_count(), 0);
    let j = rig.job(&job.id);
    assert_eq!(j.state.last_status.as_deref(), Some("skipped"));
    assert!(
        j.state
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("120 min")),
        "{:?}",
        j.state.last_error
    );
    assert_eq!(j.state.last_run_at_ms, None);
    assert_eq!(j.state.next_run_at_ms, Some(utc(2026, 5, 2, 6, 0)));
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn no_double_fire_after_a_restart() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::every(HOUR), "hourly");
    let first = rig.start().await;
    rig.delivered().await;
    first.shutdown().await;
    assert_eq!(rig.job(&job.id).state.next_run_at_ms, Some(t0 + 2 * HOUR));

    // Restarted at once: nothing is due.
    let second = rig.start().await;
    rig.sleep_until(t0 + HOUR + 50 * MIN).await;
    rig.no_reply_yet();
    second.shutdown().await;

    // A file whose next run still points at a slot that already ran (a crash between the two writes of an
    // older daemon, or nanobot): the slot is covered by lastRunAtMs and does not run again.
    set_state(&rig.store, &job.id, Some(t0 + HOUR), Some(t0 + HOUR + 5));
    let third = rig.start().await;
    rig.sleep_until(t0 + HOUR + 55 * MIN).await;
    rig.no_reply_yet();
    assert_eq!(rig.fake.request_count(), 1);
    assert_eq!(rig.job(&job.id).state.next_run_at_ms, Some(t0 + 2 * HOUR));
    rig.delivered().await;
    assert_eq!(rig.fake.request_count(), 2);
    third.shutdown().await;
}

#[test]
fn the_fixture_round_trips_byte_for_byte() {
    let path = common::fixture("nanobot-0.1.4/cron/jobs.json");
    let bytes = std::fs::read(&path).expect("fixture");
    let store = JobStore::new(&path);
    let file = store.load().expect("parses");
    assert_eq!(file.jobs.len(), 3);
    assert_eq!(file.to_text().as_bytes(), bytes.as_slice());
    let weekday = file.get("b10c7931").expect("job");
    assert_eq!(weekday.schedule.expr.as_deref(), Some("0 9 * * 1-5"));
    assert_eq!(weekday.schedule.tz.as_deref(), Some("Europe/Berlin"));

    // A change to one job leaves every other byte as nanobot wrote it.
    let dir = tempfile::tempdir().expect("tmp");
    let copy = dir.path().join("jobs.json");
    std::fs::copy(&path, &copy).expect("copy");
    let store = JobStore::new(&copy);
    cron::set_enabled(&store, "f33398eb", false, 1_795_341_026_371).expect("disable");
    let text = std::fs::read_to_string(&copy).expect("read");
    let expected = String::from_utf8(bytes)
        .expect("utf-8")
        .replacen("\"enabled\": true", "\"enabled\": false", 1)
        .replacen("\"nextRunAtMs\": 1795344626371", "\"nextRunAtMs\": null", 1);
    assert_eq!(text, expected);
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_file_is_reported_and_left_untouched() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    std::fs::create_dir_all(rig.store.path().parent().expect("dir")).expect("mkdir");
    let broken = "{\n  \"version\": 1,\n  \"jobs\": [\n    {\"id\": \"a\",, }\n  ]\n}";
    std::fs::write(rig.store.path(), broken).expect("write");
    let err = Scheduler::start(
        rig.store.clone(),
        rig.router.clone(),
        Some(rig.out_tx.clone()),
        rig.options(Duration::from_secs(1)),
    )
    .await
    .err()
    .expect("refuses to start")
    .to_string();
    assert!(
        err.contains(&rig.store.path().display().to_string()) && err.contains("line 4, column"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(rig.store.path()).expect("read"),
        broken
    );
    // The command line refuses to edit it too.
    let e = cron::remove_job(&rig.store, "a").unwrap_err().to_string();
    assert!(e.contains("corrupt"), "{e}");
    assert_eq!(
        std::fs::read_to_string(rig.store.path()).expect("read"),
        broken
    );

    // Broken while running: nothing fires and nothing is written; fixed: it resumes.
    std::fs::remove_file(rig.store.path()).expect("rm");
    let job = rig.add(Schedule::every(10 * MIN), "water");
    let handle = rig.start().await;
    rig.sleep_until(t0 + 2 * SEC).await;
    let good = std::fs::read_to_string(rig.store.path()).expect("read");
    let bad = good.replacen("\"everyMs\": 600000", "\"everyMs\": \"10m\"", 1);
    std::fs::write(rig.store.path(), &bad).expect("corrupt it");
    rig.sleep_until(t0 + 30 * MIN).await;
    rig.no_reply_yet();
    assert_eq!(
        std::fs::read_to_string(rig.store.path()).expect("read"),
        bad
    );
    std::fs::write(rig.store.path(), &good).expect("fix it");
    // The missed slots (10 and 20 minutes) are within the grace: one catch-up run.
    rig.delivered().await;
    let ran = rig.job(&job.id).state.last_run_at_ms.expect("ran");
    // Within one poll of the fix (the 30-minute slot is due by then).
    assert!(
        (t0 + 30 * MIN..=t0 + 30 * MIN + SEC).contains(&ran),
        "{}",
        ran - t0
    );
    assert_eq!(rig.fake.request_count(), 1);
    handle.shutdown().await;
}

/// Runs the real binary with a temp HOME, pointing `cron.store` at `store`.
fn nanogate(home: &Path, store: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let store = store.to_str().expect("utf-8 path");
    let mut cmd = common::nanogate_command(home, args, env);
    cmd.env("NANOGATE_CRON__STORE", store);
    cmd.output().expect("run nanogate")
}

fn text(o: &Output) -> (String, String) {
    (common::stdout(o), common::stderr(o))
}

#[tokio::test(start_paused = true)]
async fn a_cli_add_while_the_daemon_runs_is_picked_up_and_nothing_is_lost() {
    // The simulated clock starts at the real time, since the command line computes its next run from it.
    let t0 = system_now_ms();
    let mut rig = Rig::new(t0).await;
    let a = rig.add(Schedule::every(10 * SEC), "job a");
    let handle = rig.start().await;
    rig.delivered().await;

    let home = tempfile::tempdir().expect("home");
    let o = nanogate(
        home.path(),
        rig.store.path(),
        &[
            "cron",
            "add",
            "--name",
            "job b",
            "--message",
            "job b",
            "--every",
            "5",
            "--deliver",
            "--channel",
            "discord",
            "--to",
            "7",
        ],
        &[],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("Added job 'job b'"), "{out}");

    // Job b fires in the daemon; job a keeps firing; both jobs' records survive each other's writes.
    let mut seen_b = false;
    for _ in 0..6 {
        let out = rig.delivered().await;
        seen_b |= out.channel == "discord" && out.chat_id == "7";
    }
    assert!(seen_b, "the daemon picked up the job added by the CLI");
    let file = rig.store.load().expect("load");
    assert_eq!(file.jobs.len(), 2);
    let ja = file.get(&a.id).expect("a");
    assert_eq!(ja.state.last_status.as_deref(), Some("ok"));
    let jb = file
        .jobs
        .iter()
        .find(|j| j.name == "job b")
        .expect("b kept");
    assert_eq!(jb.state.last_status.as_deref(), Some("ok"));
    assert_eq!(jb.schedule.every_ms, Some(5_000));

    // A CLI disable while the daemon runs sticks, and the daemon's next record does not undo it.
    let o = nanogate(
        home.path(),
        rig.store.path(),
        &["cron", "enable", &jb.id, "--disable"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let before = rig.fake.request_count();
    rig.delivered().await; // job a again
    rig.sleep_until(rig.clock.now_ms() + 30 * SEC).await;
    while rig.out_rx.try_recv().is_ok() {}
    let file = rig.store.load().expect("load");
    assert!(!file.get(&jb.id).expect("b").enabled);
    let a_runs = rig.fake.request_count() - before;
    assert!(a_runs >= 3, "job a kept running ({a_runs})");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_tool_adds_a_job_bound_to_the_chat_and_it_fires_into_its_session() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let handle = rig.start().await;
    rig.fake.push_tool_calls(vec![(
        "call_1",
        "cron",
        r#"{"action": "add", "message": "Time to drink a glass of water, please", "every_seconds": 60}"#,
    )]);
    rig.fake.push_text("Done, every minute.");
    let reply = rig
        .router
        .ask(Inbound::text(
            "telegram",
            "42",
            "remind me to drink water every minute",
        ))
        .await
        .expect("reply");
    assert_eq!(reply.text, "Done, every minute.");
    let file = rig.store.load().expect("load");
    assert_eq!(file.jobs.len(), 1);
    let job = file.jobs[0].clone();
    assert_eq!(job.name, "Time to drink a glass of water");
    assert!(job.payload.deliver);
    assert_eq!(job.payload.channel.as_deref(), Some("telegram"));
    assert_eq!(job.payload.to.as_deref(), Some("42"));
    assert_eq!(job.state.next_run_at_ms, Some(t0 + MIN));
    // The model saw nanobot's answer.
    let tool_result = rig.fake.requests()[1].to_python();
    assert!(
        tool_result.contains(&format!(
            "Created job 'Time to drink a glass of water' (id: {})",
            job.id
        )),
        "{tool_result}"
    );

    rig.fake.push_text("Drink some water!");
    let out = rig.delivered().await;
    assert_eq!(
        out,
        Outbound {
            channel: "telegram".into(),
            chat_id: "42".into(),
            text: "Drink some water!".into()
        }
    );
    assert_eq!(rig.job(&job.id).state.last_run_at_ms, Some(t0 + MIN));
    let path = rig
        .ws
        .path()
        .join(format!("sessions/cron_{}.jsonl", job.id));
    let session = load_file(&path, None).expect("read").expect("file").session;
    assert_eq!(session.key(), format!("cron:{}", job.id));
    let history = session.history(10);
    assert_eq!(history.len(), 2);
    assert_eq!(
        last_user_text(&rig.fake.requests()[2]),
        "Time to drink a glass of water, please"
    );

    // Listing and removing through the tool.
    rig.fake.push_tool_calls(vec![
        ("c1", "cron", r#"{"action": "list"}"#),
        (
            "c2",
            "cron",
            &format!(r#"{{"action": "remove", "job_id": "{}"}}"#, job.id),
        ),
        (
            "c3",
            "cron",
            r#"{"action": "add", "message": "x", "cron_expr": "0 25 * * *"}"#,
        ),
        (
            "c4",
            "cron",
            r#"{"action": "add", "message": "x", "cron_expr": "0 9 * * *", "tz": "Mars/Base"}"#,
        ),
    ]);
    rig.fake.push_text("ok");
    rig.router
        .ask(Inbound::text(
            "telegram",
            "42",
            "list, remove, and two bad ones",
        ))
        .await
        .expect("reply");
    let body = rig.fake.requests().last().expect("request").to_python();
    assert!(
        body.contains("Scheduled jobs:\\n- Time to drink a glass of water"),
        "{body}"
    );
    assert!(body.contains(&format!("Removed job {}", job.id)), "{body}");
    assert!(
        body.contains("invalid cron expression \\\"0 25 * * *\\\""),
        "{body}"
    );
    assert!(
        body.contains("unknown time zone \\\"Mars/Base\\\""),
        "{body}"
    );
    assert!(rig.store.load().expect("load").jobs.is_empty());
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_empty_heartbeat_makes_no_model_call() {
    let rig = Rig::new(utc(2026, 5, 1, 8, 0)).await;
    let template = include_str!("../workspace/HEARTBEAT.md");
    std::fs::write(rig.ws.path().join("HEARTBEAT.md"), template).expect("write");
    let beat = heartbeat::beat(rig.ws.path(), &rig.router, &rig.sessions, Some(&rig.out_tx)).await;
    assert_eq!(beat, Beat::Idle);
    let handle = heartbeat::spawn(
        rig.ws.path().to_path_buf(),
        rig.router.clone(),
        rig.sessions.clone(),
        Some(rig.out_tx.clone()),
        Duration::from_secs(30 * 60),
    )
    .expect("on");
    tokio::time::sleep(Duration::from_secs(5 * 3600)).await;
    std::fs::remove_file(rig.ws.path().join("HEARTBEAT.md")).expect("rm");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(rig.fake.request_count(), 0);
    handle.shutdown().await;
    assert!(
        heartbeat::spawn(
            rig.ws.path().to_path_buf(),
            rig.router.clone(),
            rig.sessions.clone(),
            None,
            Duration::ZERO
        )
        .is_none(),
        "0 turns it off"
    );
}

#[tokio::test(start_paused = true)]
async fn an_active_heartbeat_runs_and_delivers_to_the_last_active_chat() {
    let mut rig = Rig::new(utc(2026, 5, 1, 8, 0)).await;
    // Three sessions: an older chat, the last real chat, and a cron session after it (not a chat).
    for (channel, chat, key) in [
        ("discord", "9", None),
        ("telegram", "42", None),
        ("telegram", "42", Some("cron:abcd1234")),
    ] {
        let mut m = Inbound::text(channel, chat, "hello");
        m.session_key = key.map(str::to_owned);
        rig.router.ask(m).await.expect("reply");
    }
    std::fs::write(
        rig.ws.path().join("HEARTBEAT.md"),
        "# Heartbeat\n\n- Check that the backup ran\n- [x] done already\n",
    )
    .expect("write");
    let handle = heartbeat::spawn(
        rig.ws.path().to_path_buf(),
        rig.router.clone(),
        rig.sessions.clone(),
        Some(rig.out_tx.clone()),
        Duration::from_secs(30 * 60),
    )
    .expect("on");
    rig.fake.push_text("The backup did not run last night.");
    let started = tokio::time::Instant::now();
    let out = rig.delivered().await;
    // The first beat comes one interval after the start (simulated time).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(30 * 60) && waited < Duration::from_secs(31 * 60),
        "{waited:?}"
    );
    assert_eq!(
        out,
        Outbound {
            channel: "telegram".into(),
            chat_id: "42".into(),
            text: "The backup did not run last night.".into()
        }
    );
    assert_eq!(rig.fake.request_count(), 4);
    let prompt = last_user_text(&rig.fake.requests()[3]);
    assert!(
        prompt.contains("- Check that the backup ran") && !prompt.contains("done already"),
        "{prompt}"
    );
    assert!(rig.ws.path().join("sessions/heartbeat.jsonl").exists());

    // HEARTBEAT_OK is not delivered.
    rig.fake.push_text("HEARTBEAT_OK");
    tokio::time::sleep(Duration::from_secs(30 * 60 + 1)).await;
    assert_eq!(rig.fake.request_count(), 5);
    rig.no_reply_yet();
    handle.shutdown().await;
}

fn cli_store() -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().expect("home");
    let store = home.path().join("jobs.json");
    (home, store)
}

#[test]
fn cli_add_list_enable_remove() {
    let (home, store) = cli_store();
    let run = |args: &[&str]| nanogate(home.path(), &store, args, &[]);
    let o = run(&[
        "cron",
        "add",
        "--name",
        "weekday",
        "--message",
        "Morning briefing",
        "--cron",
        "0 9 * * 1-5",
        "--tz",
        "Europe/Berlin",
        "--deliver",
        "--channel",
        "telegram",
        "--to",
        "42",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = run(&[
        "cron",
        "add",
        "--name",
        "water",
        "--message",
        "Drink",
        "--every",
        "3600",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = run(&["cron", "list"]);
    let (out, _) = text(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("ID")
            && lines[0].contains("NEXT RUN")
            && lines[0].contains("TIMEZONE"),
        "{out}"
    );
    assert_eq!(lines.len(), 3, "{out}");
    let weekday = lines.iter().find(|l| l.contains("weekday")).expect("row");
    assert!(
        weekday.contains("cron 0 9 * * 1-5") && weekday.contains("Europe/Berlin"),
        "{weekday}"
    );
    assert!(lines.iter().any(|l| l.contains("every 3600s")), "{out}");

    let file = JobStore::new(&store).load().expect("load");
    let id = file.jobs[0].id.clone();
    assert!(run(&["cron", "enable", &id, "--disable"]).status.success());
    let (out, _) = text(&run(&["cron", "list"]));
    assert_eq!(out.lines().count(), 2, "disabled jobs are hidden: {out}");
    let (out, _) = text(&run(&["cron", "list", "--all"]));
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(run(&["cron", "enable", &id]).status.success());
    assert!(
        JobStore::new(&store).load().expect("load").jobs[0]
            .state
            .next_run_at_ms
            .is_some()
    );
    assert!(run(&["cron", "remove", &id]).status.success());
    let o = run(&["cron", "remove", &id]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("no job with id"), "{}", text(&o).1);
    // The file is nanobot's: indent 2, no trailing newline.
    let raw = std::fs::read_to_string(&store).expect("read");
    assert!(raw.starts_with("{\n  \"version\": 1,\n  \"jobs\": [") && !raw.ends_with('\n'));
}

#[test]
fn cli_rejects_bad_schedules_clearly() {
    let (home, store) = cli_store();
    // The schedule part of `cron add --name x --message x …`, and what the error must say.
    let cases: [(&[&str], &str); 5] = [
        (&["--cron", "0 9 * *"], "invalid cron expression"),
        (
            &["--cron", "0 9 * * *", "--tz", "Europe/Berlinn"],
            "unknown time zone \"Europe/Berlinn\"",
        ),
        (&["--at", "2001-01-01T00:00:00"], "already passed"),
        (&[], "--every"),
        (&["--every", "60", "--deliver", "--to", "42"], "--channel"),
    ];
    for (schedule, expected) in cases {
        let args = [
            &["cron", "add", "--name", "x", "--message", "x"][..],
            schedule,
        ]
        .concat();
        let o = nanogate(home.path(), &store, &args, &[]);
        let err = text(&o).1;
        assert!(!o.status.success(), "{schedule:?} was accepted");
        assert!(err.contains(expected), "{schedule:?}: {err}");
    }
    assert!(!store.exists(), "nothing was written");
}

#[test]
fn cli_list_reads_the_nanobot_fixture() {
    let (home, _) = cli_store();
    let fixture = common::fixture("nanobot-0.1.4/cron/jobs.json");
    let o = nanogate(home.path(), &fixture, &["cron", "list"], &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.contains("f33398eb") && out.contains("Drink water") && out.contains("ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_run_runs_the_job_through_the_agent() {
    let fake = FakeOpenAi::start().await;
    let (home, store) = cli_store();
    let ws = home.path().join("ws");
    let now = system_now_ms();
    let job = cron::add_job(
        &JobStore::new(&store),
        "hello",
        Schedule::every(HOUR),
        Payload::agent_turn(
            "Say hello",
            true,
            Some("telegram".into()),
            Some("42".into()),
        ),
        false,
        now,
    )
    .expect("add");
    cron::set_enabled(&JobStore::new(&store), &job.id, false, now).expect("disable");
    let env = [
        ("NANOGATE_PROVIDER__API_BASE", fake.base_url()),
        ("NANOGATE_PROVIDER__API_KEY", "sk-test".to_owned()),
    ];
    let run = {
        let home = home.path().to_path_buf();
        let store = store.clone();
        let ws = ws.clone();
        move |args: Vec<String>| {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let mut full = args;
            full.extend(["--workspace".to_owned(), ws.display().to_string()]);
            let full: Vec<&str> = full.iter().map(String::as_str).collect();
            nanogate(&home, &store, &full, &env)
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let r = run.clone();
    let a = args(&["cron", "run", &job.id]);
    let o = tokio::task::spawn_blocking(move || r(a))
        .await
        .expect("join");
    assert!(!o.status.success());
    assert!(text(&o).1.contains("disabled"), "{}", text(&o).1);
    assert_eq!(fake.request_count(), 0);

    fake.push_text("Hello from the job");
    let a = args(&["cron", "run", &job.id, "--force"]);
    let o = tokio::task::spawn_blocking(move || run(a))
        .await
        .expect("join");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("Hello from the job"), "{out}");
    assert_eq!(fake.request_count(), 1);
    let j = JobStore::new(&store)
        .load()
        .expect("load")
        .get(&job.id)
        .cloned()
        .expect("job");
    assert_eq!(j.state.last_status.as_deref(), Some("ok"));
    assert!(j.state.last_run_at_ms.is_some());
    assert!(ws.join(format!("sessions/cron_{}.jsonl", job.id)).exists());
}

#[test]
fn jobs_file_default_is_empty_and_versioned() {
    assert_eq!(
        JobsFile::default().to_text(),
        "{\n  \"version\": 1,\n  \"jobs\": []\n}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_file_that_cannot_be_updated_runs_nothing_until_it_can() {
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::every(5 * MIN), "water");
    // A directory where the lock file should be: the slot cannot be claimed, so it must not run.
    std::fs::remove_file(rig.store.lock_path()).expect("rm the lock file");
    std::fs::create_dir(rig.store.lock_path()).expect("mkdir");
    let handle = rig.start().await;
    rig.sleep_until(t0 + 20 * MIN).await;
    rig.no_reply_yet();
    assert_eq!(rig.fake.request_count(), 0);
    std::fs::remove_dir(rig.store.lock_path()).expect("rmdir");
    rig.delivered().await;
    let j = rig.job(&job.id);
    let ran = j.state.last_run_at_ms.expect("ran") - t0;
    assert!((20 * MIN..=20 * MIN + SEC).contains(&ran), "{ran}");
    assert_eq!(rig.fake.request_count(), 1, "the missed slots ran once");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn two_schedulers_on_one_file_run_each_slot_once() {
    // Two daemons (say, two workspaces sharing the default cron.store) claim slots under the file's lock.
    let t0 = utc(2026, 5, 1, 8, 0);
    let mut rig = Rig::new(t0).await;
    let job = rig.add(Schedule::every(10 * MIN), "shared");
    let a = rig.start().await;
    let b = rig.start().await;
    for n in 1..=3 {
        rig.delivered().await;
        assert_eq!(
            rig.job(&job.id).state.last_run_at_ms,
            Some(t0 + n * 10 * MIN)
        );
    }
    rig.sleep_until(t0 + 35 * MIN).await;
    rig.no_reply_yet();
    assert_eq!(rig.fake.request_count(), 3);
    a.shutdown().await;
    b.shutdown().await;
}
