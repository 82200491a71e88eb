//! Agent throughput benchmark: turns per second through the router's lanes against a local fake model.
//! `bench/run_agent.sh` runs it next to nanobot 0.1.4's `AgentLoop` (`bench/nanobot_agent.py`) and prints a table.
//!
//! Scenarios (each measured on a fresh temporary workspace with the repository's `workspace/` templates, for
//! `Durability::Fsync`, nanogate's default, and `Durability::Os`, which like nanobot never fsyncs):
//!
//! - `1key`: 200 turns, one after the other, on one session key (`bench:1`); turns per second. From turn 51 on
//!   the model gets the full 100-message history window (`agent.memory_window`).
//! - `100keys`: 100 keys, 5 turns each (500 turns); every key sends its next message as soon as its previous
//!   reply arrived, all keys at once; turns per second. Default concurrency cap (`agent.max_concurrent_turns`).
//! - `100keys_200ms`: 100 keys, one turn each, all at once, the model answering after 200 ms,
//!   `agent.max_concurrent_turns = 100`; total wall time divided by one model latency (target: at most 2).
//!
//! A turn is `Router::ask`: lane, concurrency permit, session load, system prompt from the workspace files,
//! `POST /v1/chat/completions` over HTTP to the fake, two lines appended to `sessions/bench_<n>.jsonl` and
//! committed, reply. Every reply is checked (not an error, the fake's text) and the fake counts its requests,
//! so a run that did anything but one model call per turn fails loudly. Each measurement is preceded by 20
//! untimed warm-up turns on another key (2 with the slow model) and repeated 5 times; the median is reported.
//! Nothing asserts on time.
//!
//! The fake model is a minimal HTTP server in this file (axum on 127.0.0.1, its own thread and single-threaded
//! runtime): it reads the request body, does not parse it, and answers one fixed chat completion;
//! `/delay/<ms>/v1/chat/completions` answers after `<ms>` milliseconds. `--serve-fake` runs only that server
//! (printing its base URL, serving until standard input closes) so that nanobot talks to the very same fake.
//!
//! Arguments (after `cargo bench --bench agent --`): `--out FILE` writes the medians as JSON; `--serve-fake`
//! as above; any other word keeps only the measurements whose id (`1key/fsync`, `100keys/os`, ...) contains
//! it. Without `--bench` (as `cargo test --benches` runs it) it does a few turns per scenario as a smoke
//! test. Environment: `NANOGATE_AGENT_BENCH_TMP` is the directory for the temporary workspaces (default: the
//! system temporary directory; fsync numbers depend on its file system).

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::IntoResponse;
use nanogate::agent::{Agent, Router};
use nanogate::bus::Inbound;
use nanogate::config::Config;
use nanogate::provider::Provider;
use nanogate::session::{Durability, SessionStore, StoreOptions};
use nanogate::tools::default_registry;
use tempfile::TempDir;
use tokio::sync::oneshot;

/// The fake model's answer (also in bench/nanobot_agent.py's checks).
const ANSWER: &str = "Sure, noted. 👍";
/// The model latency of the third scenario.
const SLOW_MS: u64 = 200;
/// Untimed turns before each measurement (instant model).
const WARMUP_TURNS: usize = 20;

/// The fixed chat completion the fake sends.
fn completion_body() -> String {
    format!(
        concat!(
            r#"{{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"fake-model","#,
            r#""choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}],"#,
            r#""usage":{{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}}}"#
        ),
        ANSWER
    )
}

/// The user's text for turn `i` (the same on nanobot's side).
fn user_text(i: usize) -> String {
    format!("Message {i}: what is on my list for today? Please keep it short.")
}

// ---------------------------------------------------------------------------------------------------------------
// The fake model
// ---------------------------------------------------------------------------------------------------------------

#[derive(Default)]
struct FakeStats {
    requests: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

struct FakeState {
    body: Bytes,
    stats: FakeStats,
}

/// The fake server, on its own thread; stops when dropped.
struct Fake {
    addr: SocketAddr,
    state: Arc<FakeState>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Fake {
    fn start() -> Fake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(FakeState {
            body: Bytes::from(completion_body()),
            stats: FakeStats::default(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(instant))
            .route(
                "/delay/{ms}/v1/chat/completions",
                axum::routing::post(delayed),
            )
            .route("/stats", axum::routing::get(stats))
            .with_state(state.clone());
        let thread = std::thread::Builder::new()
            .name("fake-model".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake server runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    axum::serve(listener, app)
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        })
                        .await
                        .expect("fake server");
                });
            })
            .expect("spawn the fake server thread");
        Fake {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>/v1`, or with `/delay/<ms>` in front of `/v1`.
    fn base_url(&self, delay_ms: u64) -> String {
        if delay_ms == 0 {
            format!("http://{}/v1", self.addr)
        } else {
            format!("http://{}/delay/{delay_ms}/v1", self.addr)
        }
    }

    fn requests(&self) -> u64 {
        self.state.stats.requests.load(Ordering::SeqCst)
    }

    /// The most requests answered at once since the last call; resets the mark.
    fn take_max_in_flight(&self) -> u64 {
        self.state.stats.max_in_flight.swap(0, Ordering::SeqCst)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn answer(state: &FakeState, delay_ms: u64) -> impl IntoResponse + use<> {
    let stats = &state.stats;
    stats.requests.fetch_add(1, Ordering::SeqCst);
    let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
    if delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.body.clone(),
    )
}

async fn instant(State(state): State<Arc<FakeState>>, _body: Bytes) -> impl IntoResponse {
    answer(&state, 0).await
}

async fn delayed(
    State(state): State<Arc<FakeState>>,
    UrlPath(ms): UrlPath<u64>,
    _body: Bytes,
) -> impl IntoResponse {
    answer(&state, ms).await
}

async fn stats(State(state): State<Arc<FakeState>>) -> impl IntoResponse {
    let s = &state.stats;
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!(
            r#"{{"requests":{},"in_flight":{},"max_in_flight":{}}}"#,
            s.requests.load(Ordering::SeqCst),
            s.in_flight.load(Ordering::SeqCst),
            s.max_in_flight.swap(0, Ordering::SeqCst)
        ),
    )
}

/// `--serve-fake`: prints the base URL, serves until standard input closes.
fn serve_fake() {
    let fake = Fake::start();
    println!("{}", fake.base_url(0));
    std::io::stdout().flush().expect("flush stdout");
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        if line.is_err() {
            break;
        }
    }
    drop(fake);
}

// ---------------------------------------------------------------------------------------------------------------
// The agent side
// ---------------------------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    keys: usize,
    turns_per_key: usize,
    delay_ms: u64,
    /// `None`: the default `agent.max_concurrent_turns`.
    cap: Option<usize>,
}

struct Sizes {
    repeats: usize,
    scenarios: [Scenario; 3],
}

fn sizes(full: bool) -> Sizes {
    let (one, many, repeats) = if full { (200, 5, 5) } else { (10, 1, 1) };
    Sizes {
        repeats,
        scenarios: [
            Scenario {
                name: "1key",
                keys: 1,
                turns_per_key: one,
                delay_ms: 0,
                cap: None,
            },
            Scenario {
                name: "100keys",
                keys: 100,
                turns_per_key: many,
                delay_ms: 0,
                cap: None,
            },
            Scenario {
                name: "100keys_200ms",
                keys: 100,
                turns_per_key: 1,
                delay_ms: SLOW_MS,
                cap: Some(100),
            },
        ],
    }
}

/// Copies the repository's workspace templates (the same files nanobot's side gets).
fn copy_templates(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read the workspace templates") {
        let entry = entry.expect("workspace template entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create a template directory");
            copy_templates(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a workspace template");
        }
    }
}

fn temp_root() -> PathBuf {
    std::env::var_os("NANOGATE_AGENT_BENCH_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn templates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("workspace")
}

/// A fresh workspace and a router over it.
fn setup(base_url: &str, durability: Durability, cap: Option<usize>) -> (TempDir, Router) {
    let dir = tempfile::Builder::new()
        .prefix("nanogate-agent-bench-")
        .tempdir_in(temp_root())
        .expect("temporary workspace");
    let ws = dir.path().to_path_buf();
    copy_templates(&templates(), &ws);
    let mut config = Config::default();
    config.provider.api_base = base_url.to_owned();
    config.provider.api_key = Some("bench-key".into());
    config.session.durability = durability;
    // nanobot's side replaces its consolidation with a no-op (see bench/nanobot_agent.py); so does this one.
    config.memory.enabled = false;
    if let Some(cap) = cap {
        config.agent.max_concurrent_turns = cap;
    }
    let store = SessionStore::open(
        &ws,
        StoreOptions {
            durability,
            ..StoreOptions::default()
        },
    )
    .expect("open the session store");
    let provider = Provider::new(&config.provider).expect("provider");
    let agent = Agent::new(config, ws, store, provider, default_registry(), None);
    (dir, Router::new(agent))
}

async fn one_turn(router: &Router, chat_id: &str, i: usize) {
    let reply = router
        .ask(Inbound::text("bench", chat_id, &user_text(i)))
        .await
        .expect("a reply (the turn was not stopped)");
    assert!(!reply.error, "the turn failed: {}", reply.text);
    assert_eq!(reply.text, ANSWER, "unexpected reply");
}

/// Runs `keys` x `turns_per_key` turns (keys in parallel, each key's turns in order); returns the wall time.
async fn drive(router: &Router, keys: usize, turns_per_key: usize) -> Duration {
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 1..=keys {
        let router = router.clone();
        tasks.spawn(async move {
            let chat_id = k.to_string();
            for i in 0..turns_per_key {
                one_turn(&router, &chat_id, i).await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a key's task panicked");
    }
    start.elapsed()
}

struct Measured {
    wall: Duration,
    turns: usize,
    max_in_flight: u64,
}

fn measure(
    rt: &tokio::runtime::Runtime,
    fake: &Fake,
    s: Scenario,
    durability: Durability,
) -> Measured {
    let (dir, router) = setup(&fake.base_url(s.delay_ms), durability, s.cap);
    // Warm-up on another key (a slow model gets fewer: they only need to open a connection and touch every
    // lazily built thing once).
    let warmup = if s.delay_ms == 0 { WARMUP_TURNS } else { 2 };
    let turns = s.keys * s.turns_per_key;
    let measured = rt.block_on(async {
        for i in 0..warmup {
            one_turn(&router, "warmup", i).await;
        }
        let before = fake.requests();
        fake.take_max_in_flight();
        let wall = drive(&router, s.keys, s.turns_per_key).await;
        let calls = fake.requests() - before;
        assert_eq!(calls, turns as u64, "one model call per turn");
        Measured {
            wall,
            turns,
            max_in_flight: fake.take_max_in_flight(),
        }
    });
    drop(router);
    drop(dir);
    measured
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--serve-fake") {
        serve_fake();
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    // Other arguments filter the measurements by name (`1key/os`, `100keys`, ...), as criterion's do.
    let filters: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--out"))
        .map(|(_, a)| a)
        .collect();
    let sizes = sizes(full);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let fake = Fake::start();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "agent bench: {} tokio workers, workspaces under {}, {} repeat(s), median",
        workers,
        temp_root().display(),
        sizes.repeats
    );
    let mut json = Vec::new();
    for s in sizes.scenarios {
        for (dname, durability) in [("fsync", Durability::Fsync), ("os", Durability::Os)] {
            let id = format!("{}/{dname}", s.name);
            if !filters.is_empty() && !filters.iter().any(|f| id.contains(f.as_str())) {
                continue;
            }
            let mut walls = Vec::new();
            let mut peak = 0;
            let mut turns = 0;
            for _ in 0..sizes.repeats {
                let m = measure(&rt, &fake, s, durability);
                walls.push(m.wall.as_secs_f64());
                peak = peak.max(m.max_in_flight);
                turns = m.turns;
            }
            let wall = median(walls);
            let tps = turns as f64 / wall;
            let cap = s
                .cap
                .map_or_else(|| "default".to_owned(), |c| c.to_string());
            if s.delay_ms == 0 {
                println!(
                    "{:<14} {:<5} {:>6} turns  {:>9.3} s  {:>9.0} turns/s  ({:.3} ms/turn, cap {cap})",
                    s.name,
                    dname,
                    turns,
                    wall,
                    tps,
                    wall * 1000.0 / turns as f64,
                );
            } else {
                println!(
                    "{:<14} {:<5} {:>6} turns  {:>9.3} s  = {:.2} x {} ms model latency  (cap {cap}, peak {peak} model calls at once)",
                    s.name,
                    dname,
                    turns,
                    wall,
                    wall * 1000.0 / s.delay_ms as f64,
                    s.delay_ms,
                );
            }
            json.push(format!(
                r#"{{"scenario":"{}","durability":"{}","keys":{},"turns":{},"delay_ms":{},"wall_s":{},"turns_per_s":{},"peak_in_flight":{}}}"#,
                s.name, dname, s.keys, turns, s.delay_ms, wall, tps, peak
            ));
        }
    }
    if let Some(out) = out {
        let text = format!("{{\"results\":[\n{}\n]}}\n", json.join(",\n"));
        std::fs::write(&out, text).expect("write the results file");
        println!("results written to {}", out.display());
    }
}
