//! Session store benchmarks (criterion); `bench/run.sh` compares them with nanobot's own `SessionManager`.
//!
//! - `session_load/load_file/N`: [`load_file`] of an N-message file: read, split lines, validate every line,
//!   parse line 1. The target is N = 10,000, at least 20x faster than nanobot.
//! - `session_load/load_file_deferred/N`: [`load_file_deferred`], the store's load: message lines are only
//!   checked before the first write (that cost shows in `os_first_after_load` below).
//! - `session_load/load_file_deferred+history500/10000`: the same, then `history(500)`, the window a turn hands
//!   the model (nanobot parses every line at load; nanogate parses only this window).
//! - `session_load/store_get/N`: [`SessionStore::get`] after `invalidate`: the gateway's own path on a cache
//!   miss (a hop to tokio's blocking pool, key checks, the alternate file name probe, the deferred load).
//! - `session_append_turn/{os,fsync}/N`: on a session of N messages, `add_message` (user) + `add_message`
//!   (assistant) + `commit_blocking()`. `os` leaves flushing to the OS, as nanobot does (plain open/write);
//!   `fsync` is nanogate's default (`sync_data` before the commit returns). The target: a turn at 100,000
//!   messages costs at most 2x a turn at 100. Each timed commit must append exactly 2 lines; any other outcome
//!   (a full rewrite) is counted and printed after the benchmark with the `updated_at` it wrote.
//! - `session_append_turn/os_first_after_load/N`: the same single turn (`os`) right after the store loaded the
//!   session from its file (the load is untimed): the first turn after a cache miss or a restart, which also
//!   pays the deferred check of every message line.
//!
//! Input files: with `NANOGATE_BENCH_SESSIONS=DIR`, `DIR/session-<N>.jsonl` as written by
//! `bench/nanobot_sessions.py generate` (so nanobot and nanogate read identical bytes); without it, the same
//! files are generated here into a temporary directory. Both generators must produce the same bytes; when the
//! variable is set, the files are compared with this generator's output and a difference is reported.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{NaiveDate, NaiveDateTime, TimeDelta};
use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use nanogate::json::{Json, Object};
use nanogate::session::{
    CommitOutcome, Durability, SessionHandle, SessionStore, StoreOptions, load_file,
    load_file_deferred, timestamp,
};
use tempfile::TempDir;
use tokio::runtime::Runtime;

const KEY: &str = "telegram:42";
/// nanobot's file name for [`KEY`] (`:` becomes `_`).
const FILE_NAME: &str = "telegram_42.jsonl";
const SIZES: [usize; 3] = [100, 10_000, 100_000];
const FILES_ENV: &str = "NANOGATE_BENCH_SESSIONS";

// ---------------------------------------------------------------------------------------------------------------
// The generator: a line-for-line copy of `messages()` and `write_session()` in bench/nanobot_sessions.py.
// ---------------------------------------------------------------------------------------------------------------

const USER_TEXTS: [&str; 13] = [
    "Hi! Can you list the files in my workspace?",
    "Wie wird das Wetter morgen in München? Ich muss um 7:30 los und weiß nicht, ob ich das Rad nehmen kann.",
    "Remind me to call the dentist tomorrow at 9am, please.",
    "Peux-tu résumer le dernier article que je t'ai envoyé ? Surtout la partie sur les coûts énergétiques.",
    "明日の東京の天気を教えてください。傘は必要ですか？",
    "What's in notes/todo.md? I think I left a few open items there last week.",
    "Translate to Spanish: \"The meeting has been moved to Thursday afternoon.\"",
    "Привет! Напомни, пожалуйста, что я планировал на выходные?",
    "ok thanks 👍",
    "Write a short haiku about the sea, then save it to poems/sea.txt",
    "Can you check whether the backup script at ~/bin/backup.sh still uses rsync with --delete? I don't want it to wipe the NAS again.",
    "Was hast du gestern über die Stromrechnung herausgefunden? Die Nachzahlung kam mir zu hoch vor – 312,40 €.",
    "Forwarding this from Anna: \"Hi! For the trip: the train leaves München Hbf at 08:12 on Saturday, we change in Würzburg and arrive in Köln at 13:05. Can you bring the tent and the small gas stove? I'll take care of food for the first evening. Also, my cousin might join on Sunday – is that ok for you?\" Can you add the train times to my calendar and put the tent and the stove on my packing list?",
];

const ASSISTANT_TEXTS: [&str; 14] = [
    "Here is what I found in your workspace:\n\n- `notes/` – 14 files, mostly meeting notes\n- `poems/` – 3 files\n- `bin/backup.sh` – the backup script\n- `HEARTBEAT.md` – your periodic tasks\n\nWant me to open any of them?",
    "Morgen in München: vormittags bewölkt, ab etwa 14 Uhr Regen, Höchstwert 11 °C. Um 7:30 ist es noch trocken, das Rad geht also – aber nimm sicherheitshalber eine Regenjacke mit. ☂️",
    "Done! I'll remind you tomorrow at 09:00 to call the dentist.",
    "Résumé : l'article compare le coût énergétique de l'entraînement et de l'inférence des grands modèles. Points clés :\n1. l'inférence dépasse l'entraînement après quelques mois d'usage ;\n2. le refroidissement représente 30 à 40 % de la consommation ;\n3. les auteurs recommandent des modèles plus petits et spécialisés.",
    "明日の東京は晴れのち曇り、降水確率は20%です。傘はたぶん要りませんが、折りたたみ傘があると安心です。",
    "Your todo list has 3 open items:\n- [ ] renew passport (due 12/03)\n- [ ] fix the \"flaky\" test in ci.yml\n- [ ] reply to Anna about the trip\n\nShould I mark any of them as done?",
    "\"La reunión se ha trasladado al jueves por la tarde.\"",
    "На выходные ты планировал: в субботу — велосипедная прогулка вдоль реки, в воскресенье — ужин у родителей в 18:00.",
    "You're welcome! 😊",
    "Saved to poems/sea.txt:\n\n    Grey waves fold and break\n    salt wind carries gull voices\n    the tide keeps its time",
    "Yes — line 12 still runs `rsync -a --delete /home/me/ /mnt/nas/backup/`. If the source path is ever empty, `--delete` would remove everything on the NAS. I'd suggest adding `--max-delete=100` or checking that the source exists first. Want me to patch it?",
    "Die Nachzahlung von 312,40 € ergibt sich aus 1.130 kWh Mehrverbrauch gegenüber dem Vorjahr (der Abschlag war zu niedrig angesetzt). Der Arbeitspreis ist mit 0,32 €/kWh korrekt abgerechnet.",
    "Here's a plan for the week, based on your calendar and the todo list:\n\n**Monday** – renew the passport online (takes ~20 min, you need the biometric photo from last year)\n**Tuesday** – fix the flaky test: it fails when the test runner's clock crosses midnight, so freezing the time in the fixture should be enough\n**Wednesday** – reply to Anna; she asked about the train times to Köln and whether you can bring the tent\n**Thursday** – meeting moved to the afternoon, keep the morning free for deep work\n**Friday** – backup check, and the NAS firmware update if the changelog looks safe\n\nShall I put these into your calendar as reminders?",
    "I looked through HISTORY.md for anything about the heating: on 3 October you noted that the thermostat in the living room resets to 16 °C every night at 02:00, and on 9 October the technician said the schedule was stored twice in the controller. Nothing after that, so it may still be open. Do you want me to add a reminder to call the landlord, or draft an e-mail to the technician describing the problem again?",
];

/// (tool name, `arguments` as the model sent them, the tool's result).
const TOOLS: [(&str, &str, &str); 6] = [
    (
        "list_dir",
        "{\"path\": \".\"}",
        "📁 archive\n📁 bin\n📁 memory\n📁 notes\n📁 photos\n📁 poems\n📁 projects\n📁 skills\n📄 AGENTS.md\n📄 HEARTBEAT.md\n📄 SOUL.md\n📄 TOOLS.md\n📄 USER.md\n📄 einkaufsliste.txt\n📄 packliste-köln.md\n📄 rezepte.md\n📄 steuer-2025.pdf\n📄 todo.md",
    ),
    (
        "read_file",
        "{\"path\": \"notes/todo.md\"}",
        "# TODO\n\n- [ ] renew passport (due 12/03)\n- [x] buy cat food\n- [ ] fix the \"flaky\" test in ci.yml\n- [ ] reply to Anna about the trip\n- [x] book train to Köln\n- [x] return library books\n- [ ] ask the landlord about the thermostat (resets to 16 °C at night)\n- [ ] Steuererklärung: Belege für Arbeitszimmer sammeln\n- [x] cancel the old phone contract\n\n## Someday\n- learn to make ramen from scratch\n- repaint the balcony railing\n",
    ),
    (
        "web_search",
        "{\"query\": \"Wetter M\\u00fcnchen morgen\", \"count\": 3}",
        "Results for: Wetter München morgen\n\n1. Wetter München – 14-Tage-Vorhersage\n   https://example.com/wetter/muenchen\n   Morgen: bewölkt, ab 14 Uhr Regen, 6–11 °C.\n2. München: Regen am Nachmittag\n   https://example.org/muenchen/regen\n   Niederschlagswahrscheinlichkeit 80 % ab 14 Uhr.\n3. Pollenflug und UV-Index\n   https://example.net/pollen\n   Geringe Belastung.",
    ),
    (
        "exec",
        "{\"command\": \"grep -n -C3 rsync ~/bin/backup.sh\"}",
        "9-# nightly backup to the NAS, started by cron at 02:30\n10-set -euo pipefail\n11-mount | grep -q /mnt/nas || exit 1\n12:rsync -a --delete /home/me/ /mnt/nas/backup/\n13-echo \"$(date -Is) backup ok\" >> ~/backup.log\n14-\n15-# TODO: prune old snapshots\n\nExit code: 0",
    ),
    (
        "web_fetch",
        "{\"url\": \"https://example.com/articles/energy-cost-of-ai\", \"maxChars\": 5000}",
        "{\"url\": \"https://example.com/articles/energy-cost-of-ai\", \"status\": 200, \"extractor\": \"readability\", \"text\": \"# The energy cost of AI\\n\\nTraining a large model takes weeks on thousands of accelerators, but the bill does not stop there. Once deployed, every request costs energy again, and popular services answer billions of them. Our estimates suggest that inference overtakes training within months. Cooling adds 30 to 40 percent on top, depending on the climate and the data centre design. Smaller, specialised models cut the cost of a\n... (truncated)",
    ),
    (
        "cron",
        "{\"action\": \"add\", \"message\": \"Call the dentist\", \"at\": \"2026-11-23T09:00:00\"}",
        "Created job 'Call the dentist' (id: 3f9c2a71)\nNext run: 2026-11-23 09:00 (Europe/Berlin)\nDelivery: telegram:42\nOther jobs: 'Heartbeat' every 30 min (id: 0b1e77d4), 'Wochenrückblick' Sundays 18:00 (id: 9d02c5ee)",
    ),
];

/// The turn appended by the append benchmark, on both sides.
const TURN_USER: &str = "Und übermorgen? Lohnt sich eine Radtour an den Starnberger See? 🚲";
const TURN_ASSISTANT: &str = "Übermorgen wird es sonnig bei bis zu 14 °C, kaum Wind – gute Bedingungen für die Radtour. Plane für die knapp 30 km etwa zwei Stunden ein und nimm eine Jacke mit, am See ist es abends frisch.";

/// 2026-11-22T09:50:26.226704, the first message's time.
fn base_time() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2026, 11, 22)
        .and_then(|d| d.and_hms_micro_opt(9, 50, 26, 226_704))
        .expect("valid base time")
}

/// Message `i`'s timestamp: 53 s apart plus a varying fraction, as Python's `isoformat()` writes it.
fn message_time(i: usize) -> String {
    let i = i64::try_from(i).expect("message index fits i64");
    let t =
        base_time() + TimeDelta::seconds(53 * i) + TimeDelta::microseconds(7919 * i % 1_000_000);
    timestamp::iso(t)
}

fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Object {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The first `n` messages: turns of user + assistant, two turns in three with a tool call in between.
fn messages(n: usize) -> Vec<Object> {
    let mut out = Vec::with_capacity(n);
    let (mut turn, mut calls) = (0usize, 0usize);
    while out.len() < n {
        let mut msgs = vec![obj([
            ("role", Json::str("user")),
            (
                "content",
                Json::str(USER_TEXTS[(7 * turn + 3) % USER_TEXTS.len()]),
            ),
        ])];
        if turn % 3 != 0 {
            let (name, args, result) = TOOLS[calls % TOOLS.len()];
            let call_id = format!("call_{:08x}", (turn as u64 * 2_654_435_761) % (1 << 32));
            let content = if calls % 2 == 0 {
                Json::Null
            } else {
                Json::str("Let me check that for you.")
            };
            calls += 1;
            let function = obj([("name", Json::str(name)), ("arguments", Json::str(args))]);
            let call = obj([
                ("id", Json::str(call_id.as_str())),
                ("type", Json::str("function")),
                ("function", Json::Object(function)),
            ]);
            msgs.push(obj([
                ("role", Json::str("assistant")),
                ("content", content),
                ("tool_calls", Json::Array(vec![Json::Object(call)])),
            ]));
            msgs.push(obj([
                ("role", Json::str("tool")),
                ("tool_call_id", Json::str(call_id)),
                ("name", Json::str(name)),
                ("content", Json::str(result)),
            ]));
        }
        msgs.push(obj([
            ("role", Json::str("assistant")),
            (
                "content",
                Json::str(ASSISTANT_TEXTS[(5 * turn + 1) % ASSISTANT_TEXTS.len()]),
            ),
        ]));
        for mut m in msgs.into_iter().take(n - out.len()) {
            m.insert("timestamp", Json::str(message_time(out.len())));
            out.push(m);
        }
        turn += 1;
    }
    out
}

/// Where nanobot's consolidation would have left the watermark (it keeps 50 to 100 messages unconsolidated).
fn last_consolidated(n: usize) -> usize {
    if n < 50 { 0 } else { (n - 50) / 50 * 50 }
}

/// The whole session file for `n` messages, as `json.dumps(obj, ensure_ascii=False)` lines.
fn generate(n: usize) -> String {
    let header = obj([
        ("_type", Json::str("metadata")),
        ("key", Json::str(KEY)),
        ("created_at", Json::str(message_time(0))),
        ("updated_at", Json::str(message_time(n.saturating_sub(1)))),
        ("metadata", Json::Object(Object::new())),
        ("last_consolidated", Json::from(last_consolidated(n))),
    ]);
    let mut out = String::with_capacity(n * 300 + 200);
    Json::Object(header).write_python(&mut out);
    out.push('\n');
    for m in messages(n) {
        Json::Object(m).write_python(&mut out);
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------------------------

/// The input files, one per size.
struct Corpus {
    dir: PathBuf,
    _tmp: Option<TempDir>,
}

impl Corpus {
    fn new() -> Self {
        let corpus = match std::env::var_os(FILES_ENV) {
            Some(dir) => {
                let corpus = Corpus {
                    dir: PathBuf::from(dir),
                    _tmp: None,
                };
                for n in SIZES {
                    let path = corpus.path(n);
                    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
                        panic!(
                            "{FILES_ENV}: cannot read {} ({e}); write it with `bench/nanobot_sessions.py generate`",
                            path.display()
                        )
                    });
                    if bytes != generate(n).as_bytes() {
                        eprintln!(
                            "warning: {} is not what benches/sessions.rs generates for {n} messages; the Rust and \
                             Python generators have drifted apart (the benchmark still uses the file)",
                            path.display()
                        );
                    }
                }
                corpus
            }
            None => {
                let tmp = tempfile::tempdir().expect("temporary directory for the session files");
                let corpus = Corpus {
                    dir: tmp.path().to_path_buf(),
                    _tmp: Some(tmp),
                };
                for n in SIZES {
                    std::fs::write(corpus.path(n), generate(n))
                        .expect("write a generated session file");
                }
                corpus
            }
        };
        for n in SIZES {
            let loaded = load_file(&corpus.path(n), Some(KEY))
                .expect("load a benchmark file")
                .expect("benchmark file exists");
            assert!(
                loaded.problems.is_empty(),
                "{}: {:?}",
                corpus.path(n).display(),
                loaded.problems
            );
            assert_eq!(loaded.session.len(), n, "{}", corpus.path(n).display());
        }
        corpus
    }

    fn path(&self, n: usize) -> PathBuf {
        self.dir.join(format!("session-{n}.jsonl"))
    }

    fn size(&self, n: usize) -> u64 {
        std::fs::metadata(self.path(n))
            .expect("benchmark file exists")
            .len()
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A temporary workspace holding a copy of one input file as `sessions/telegram_42.jsonl`, opened as a store.
struct Workspace {
    _dir: TempDir,
    source: PathBuf,
    live: PathBuf,
    durability: Durability,
    store: SessionStore,
}

impl Workspace {
    fn new(source: &Path, durability: Durability) -> Self {
        let dir = tempfile::tempdir().expect("temporary workspace");
        let live = dir.path().join("sessions").join(FILE_NAME);
        let store = SessionStore::open(
            dir.path(),
            StoreOptions {
                durability,
                cache_idle: Duration::ZERO,
            },
        )
        .expect("open the store");
        let ws = Workspace {
            _dir: dir,
            source: source.to_path_buf(),
            live,
            durability,
            store,
        };
        ws.restore();
        ws
    }

    /// Puts the original file back. With `Fsync` the copy is synced here, untimed, so that the next timed
    /// commit's `sync_data` does not pay for writing the whole copied file.
    fn restore(&self) {
        std::fs::copy(&self.source, &self.live).expect("copy the session file into the workspace");
        if self.durability == Durability::Fsync {
            std::fs::File::open(&self.live)
                .and_then(|f| f.sync_all())
                .expect("sync the copied session file");
        }
    }
}

/// One turn: the user's message and the reply, then the commit.
fn add_turn(h: &SessionHandle) -> CommitOutcome {
    {
        let mut s = h.lock();
        s.add_message("user", Json::str(TURN_USER), Object::new());
        s.add_message("assistant", Json::str(TURN_ASSISTANT), Object::new());
    }
    h.commit_blocking().expect("commit a turn")
}

/// Appends turns to one session; keeps its size between `base` and `base + slack` messages by putting the
/// original file back (untimed) whenever it has grown past that. The first turn after each (re)load is untimed:
/// it pays one-time costs (the deferred line check) that `os_first_after_load` measures on its own.
struct AppendFixture {
    ws: Workspace,
    handle: SessionHandle,
    base: usize,
    slack: usize,
    /// Commits that did more than append the turn, with the `updated_at` they wrote.
    unexpected: Vec<(CommitOutcome, String)>,
}

impl AppendFixture {
    fn new(rt: &Runtime, source: &Path, n: usize, durability: Durability) -> Self {
        let ws = Workspace::new(source, durability);
        let handle = rt.block_on(ws.store.get(KEY)).expect("load the session");
        assert_eq!(handle.lock().len(), n);
        add_turn(&handle);
        AppendFixture {
            ws,
            handle,
            base: n,
            slack: (n / 10).max(20),
            unexpected: Vec::new(),
        }
    }

    fn reset(&mut self, rt: &Runtime) {
        self.ws.store.invalidate(KEY);
        self.ws.restore();
        self.handle = rt
            .block_on(self.ws.store.get(KEY))
            .expect("reload the session");
        add_turn(&self.handle);
    }

    /// Runs `iters` turns and returns the time spent in them only.
    fn run(&mut self, rt: &Runtime, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            if self.handle.lock().len() + 2 > self.base + self.slack {
                self.reset(rt);
            }
            let start = Instant::now();
            let outcome = add_turn(&self.handle);
            total += start.elapsed();
            if outcome != (CommitOutcome::Appended { lines: 2 }) {
                let updated_at = self.handle.lock().updated_at().to_owned();
                self.unexpected.push((outcome, updated_at));
            }
        }
        total
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Benchmarks
// ---------------------------------------------------------------------------------------------------------------

fn session_load(c: &mut Criterion, corpus: &Corpus, rt: &Runtime) {
    let mut g = c.benchmark_group("session_load");
    // Flat sampling: the large files take tens of milliseconds, too slow for criterion's linear sampling.
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(20);
    for n in SIZES {
        let path = corpus.path(n);
        g.throughput(Throughput::Bytes(corpus.size(n)));
        // Outputs are dropped outside the timed part, as nanobot's previous session is freed before its timed
        // load.
        g.bench_with_input(BenchmarkId::new("load_file", n), &path, |b, path| {
            b.iter_batched(
                || (),
                |()| load_file(black_box(path), Some(KEY)),
                BatchSize::PerIteration,
            )
        });
        g.bench_with_input(
            BenchmarkId::new("load_file_deferred", n),
            &path,
            |b, path| {
                b.iter_batched(
                    || (),
                    |()| load_file_deferred(black_box(path), Some(KEY)),
                    BatchSize::PerIteration,
                )
            },
        );
        if n == 10_000 {
            g.bench_with_input(
                BenchmarkId::new("load_file_deferred+history500", n),
                &path,
                |b, path| {
                    b.iter_batched(
                        || (),
                        |()| {
                            let loaded = load_file_deferred(black_box(path), Some(KEY))
                                .expect("load")
                                .expect("file exists");
                            let history = loaded.session.history(500);
                            (loaded, history)
                        },
                        BatchSize::PerIteration,
                    )
                },
            );
        }
        let mut ws: Option<Workspace> = None;
        g.bench_function(BenchmarkId::new("store_get", n), |b| {
            let ws = ws.get_or_insert_with(|| Workspace::new(&path, Durability::Os));
            b.iter_batched(
                || ws.store.invalidate(KEY),
                |()| rt.block_on(ws.store.get(KEY)).expect("get"),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn session_append_turn(c: &mut Criterion, corpus: &Corpus, rt: &Runtime) {
    let mut g = c.benchmark_group("session_append_turn");
    for (mode, durability, samples) in
        [("os", Durability::Os, 50), ("fsync", Durability::Fsync, 20)]
    {
        g.sample_size(samples);
        for n in SIZES {
            let mut fixture: Option<AppendFixture> = None;
            g.bench_function(BenchmarkId::new(mode, n), |b| {
                let fx = fixture
                    .get_or_insert_with(|| AppendFixture::new(rt, &corpus.path(n), n, durability));
                b.iter_custom(|iters| fx.run(rt, iters))
            });
            if let Some(fx) = fixture.filter(|fx| !fx.unexpected.is_empty()) {
                eprintln!(
                    "note: session_append_turn/{mode}/{n}: {} commits did not simply append 2 lines (outcome, updated_at): {:?}",
                    fx.unexpected.len(),
                    &fx.unexpected[..fx.unexpected.len().min(5)]
                );
            }
        }
    }
    g.finish();

    // The first turn after a load (Os): the session was just read from its file (untimed), as after a cache miss
    // or a restart. Criterion sizes `iter_batched` runs by wall time, the untimed reload included, so this
    // takes about warm-up + measurement time per size whatever the file size.
    let mut g = c.benchmark_group("session_append_turn");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(2));
    for n in SIZES {
        let mut ws: Option<Workspace> = None;
        g.bench_function(BenchmarkId::new("os_first_after_load", n), |b| {
            let ws = ws.get_or_insert_with(|| Workspace::new(&corpus.path(n), Durability::Os));
            b.iter_batched(
                || {
                    ws.store.invalidate(KEY);
                    ws.restore();
                    rt.block_on(ws.store.get(KEY)).expect("load the session")
                },
                |h| add_turn(&h),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn all(c: &mut Criterion) {
    let corpus = Corpus::new();
    let rt = runtime();
    session_load(c, &corpus, &rt);
    session_append_turn(c, &corpus, &rt);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .without_plots();
    targets = all
}
criterion_main!(benches);
