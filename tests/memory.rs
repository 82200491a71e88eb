//! Memory consolidation against a scripted fake model on 127.0.0.1: the classic MEMORY.md / HISTORY.md
//! update, the watermark, the structured summary (seed 001 S7.13–S7.18), failures, `/new`, the token budget
//! and the idle reset.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fake_openai::{
    FakeOpenAi, FakeResponse, error_body, text_completion, tool_calls_completion,
};
use nanogate::agent::Router;
use nanogate::bus::Inbound;
use nanogate::config::Config;
use nanogate::json::{Json, Object};
use nanogate::session::{Durability, load_file};

const KEY: &str = "telegram:7";
const FILE: &str = "telegram_7.jsonl";

fn config(fake: &FakeOpenAi, tweak: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    c.provider.api_base = fake.base_url();
    c.provider.api_key = Some("sk-test".into());
    c.provider.max_retries = 0;
    c.session.durability = Durability::Os;
    c.agent.memory_window = 10;
    tweak(&mut c);
    c
}

fn router(ws: &Path, c: Config) -> Router {
    Router::new(common::agent(ws, c))
}

async fn say(r: &Router, text: &str) -> String {
    let (channel, chat) = KEY.split_once(':').unwrap();
    r.ask(Inbound::text(channel, chat, text))
        .await
        .expect("a reply")
        .text
}

/// Waits (on real time, bounded) until background consolidations are done.
async fn settle(r: &Router) {
    assert!(
        r.agent().memory.wait_idle(Duration::from_secs(20)).await,
        "consolidation still running"
    );
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref()).unwrap_or_default()
}

/// `(watermark, messages, metadata)` as the file on disk says.
fn on_disk(ws: &Path) -> (usize, usize, Object) {
    let loaded = load_file(&ws.join("sessions").join(FILE), None)
        .expect("readable")
        .expect("exists");
    let s = loaded.session;
    (s.last_consolidated(), s.len(), s.metadata().clone())
}

fn content_of(m: &Json) -> &str {
    m.as_object()
        .and_then(|o| o.get("content"))
        .and_then(Json::as_str)
        .unwrap_or_default()
}

fn messages_of(body: &Json) -> &[Json] {
    body.as_object()
        .and_then(|o| o.get("messages"))
        .and_then(Json::as_array)
        .unwrap_or_default()
}

fn is_save_memory(body: &Json) -> bool {
    body.as_object()
        .and_then(|o| o.get("tools"))
        .is_some_and(|t| t.to_python().contains("\"save_memory\""))
}

fn is_summary(body: &Json) -> bool {
    messages_of(body)
        .first()
        .is_some_and(|m| content_of(m).starts_with("You write context summaries"))
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

/// The conversation lines of a save_memory request.
fn archived_lines(body: &Json) -> Vec<String> {
    let user = content_of(&messages_of(body)[1]);
    user.split_once("## Conversation to Process\n")
        .map(|(_, rest)| rest.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A model that does its job faithfully: `save_memory` keeps every fact and adds each line that says
/// "always" or "remember"; the summary keeps the previous constraints and adds new ones; a turn answers "ok".
fn faithful(body: &Json) -> Option<FakeResponse> {
    if is_save_memory(body) {
        let user = content_of(&messages_of(body)[1]);
        let current = between(
            user,
            "## Current Long-term Memory\n",
            "\n\n## Conversation to Process",
        )
        .unwrap_or_default();
        let mut memory = if current == "(empty)" {
            String::new()
        } else {
            current.to_owned()
        };
        let lines = archived_lines(body);
        for line in &lines {
            let Some((_, said)) = line.split_once("USER: ") else {
                continue;
            };
            if (said.contains("always") || said.contains("remember")) && !memory.contains(said) {
                memory.push_str(&format!("- {said}\n"));
            }
        }
        if memory.is_empty() {
            memory = "- nothing yet\n".into();
        }
        let mut args = Object::new();
        args.insert(
            "history_entry",
            Json::String(format!("[2026-11-22 10:00] Talked; {} lines.", lines.len())),
        );
        args.insert("memory_update", Json::String(memory));
        let args = Json::Object(args).to_python();
        return Some(FakeResponse::ok(tool_calls_completion(&[(
            "c1",
            "save_memory",
            &args,
        )])));
    }
    if is_summary(body) {
        let user = content_of(&messages_of(body)[1]);
        let transcript = between(user, "<transcript>\n", "\n</transcript>").unwrap_or_default();
        let mut constraints: Vec<String> =
            between(user, "<previous-summary>\n", "\n</previous-summary>")
                .map(|p| {
                    p.lines()
                        .filter(|l| l.starts_with("- "))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
        for line in transcript.lines() {
            if let Some(said) = line.strip_prefix("[User]: ")
                && said.contains("always")
                && !constraints.iter().any(|c| c.contains(said))
            {
                constraints.push(format!("- {said}"));
            }
        }
        let text = format!(
            "## Goal\nChat.\n\n## Constraints & Preferences\n{}\n\n## Progress\n### Done\n- [x] talked\n\n\
             ## Key Decisions\n(none)\n\n## Next Steps\n1. more\n\n## Critical Context\n(none)",
            constraints.join("\n")
        );
        return Some(FakeResponse::ok(text_completion(&text)));
    }
    None
}

/// The last request of a turn (not a consolidation).
fn last_turn(fake: &FakeOpenAi) -> Json {
    fake.requests()
        .into_iter()
        .rev()
        .find(|b| !is_save_memory(b) && !is_summary(b))
        .expect("a turn request")
}

fn requests_where(fake: &FakeOpenAi, f: impl Fn(&Json) -> bool) -> Vec<Json> {
    fake.requests().into_iter().filter(|b| f(b)).collect()
}

#[tokio::test]
async fn consolidation_writes_memory_history_watermark_and_summary() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(faithful);
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |_| {}));
    say(&r, "remember: my cat is called Miso").await;
    for i in 0..4 {
        say(&r, &format!("message {i}")).await;
    }
    // 5 turns = 10 messages = memory_window: consolidation runs after the fifth reply.
    settle(&r).await;
    let saves = requests_where(&fake, is_save_memory);
    assert_eq!(saves.len(), 1);
    // messages[0 : 10 - 5] were archived: the cut moves from index 5 (an assistant answer, valid) — 5 lines.
    let lines = archived_lines(&saves[0]);
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(
        lines[0].ends_with("] USER: remember: my cat is called Miso"),
        "{}",
        lines[0]
    );
    assert!(lines[0].starts_with('[') && lines[0].as_bytes()[11] == b'T');
    // The tool was asked for by name.
    let choice = saves[0]
        .as_object()
        .unwrap()
        .get("tool_choice")
        .unwrap()
        .to_python();
    assert!(choice.contains("save_memory"), "{choice}");

    let memory = ws.path().join("memory");
    assert_eq!(
        read(memory.join("HISTORY.md")),
        "[2026-11-22 10:00] Talked; 5 lines.\n\n"
    );
    assert_eq!(
        read(memory.join("MEMORY.md")),
        "- remember: my cat is called Miso\n"
    );
    let (watermark, len, metadata) = on_disk(ws.path());
    assert_eq!((watermark, len), (5, 10));
    let summary = metadata
        .get("nanogate_summary")
        .and_then(Json::as_object)
        .expect("summary");
    assert!(
        summary
            .get("text")
            .and_then(Json::as_str)
            .unwrap()
            .starts_with("## Goal")
    );

    // The next turn sees the summary right after the system prompt, and only the unconsolidated history.
    say(&r, "and now?").await;
    let turn = last_turn(&fake);
    let msgs = messages_of(&turn);
    let system = content_of(&msgs[0]);
    assert!(
        system.contains("# Summary of the earlier conversation\n\nThe older part"),
        "{system}"
    );
    assert!(system.contains("## Goal\nChat."));
    assert!(system.find("# Memory").unwrap() < system.find("# Summary of the earlier").unwrap());
    assert!(
        !msgs.iter().any(
            |m| content_of(m).contains("my cat is called Miso") && !content_of(m).contains('#')
        )
    );
}

#[tokio::test]
async fn a_cut_never_separates_a_tool_call_from_its_result() {
    // S7.13. Turns with a tool call are 4 messages (user, assistant call, tool result, answer); with a window of
    // 12 the classic target (len - 6) falls on a tool result, and the cut must move on.
    let fake = FakeOpenAi::start().await;
    fake.set_responder(move |body| {
        if let Some(r) = faithful(body) {
            return Some(r);
        }
        let last = messages_of(body).last().unwrap();
        let role = last
            .as_object()
            .unwrap()
            .get("role")
            .unwrap()
            .as_str()
            .unwrap();
        if role == "user" {
            return Some(FakeResponse::ok(tool_calls_completion(&[(
                "call_x",
                "list_dir",
                r#"{"path": "."}"#,
            )])));
        }
        Some(FakeResponse::ok(text_completion("listed")))
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.agent.memory_window = 12));
    for i in 0..3 {
        say(&r, &format!("list {i}")).await;
    }
    settle(&r).await;
    let (watermark, len, _) = on_disk(ws.path());
    assert_eq!(len, 12);
    // Target 12 - 6 = 6 is the tool result of the second turn; the cut moves on to its answer (7).
    assert_eq!(watermark, 7);
    let text = read(ws.path().join("sessions").join(FILE));
    let kept: Vec<Json> = text
        .lines()
        .skip(1 + watermark)
        .map(|l| Json::parse(l).unwrap())
        .collect();
    let role = kept[0]
        .as_object()
        .unwrap()
        .get("role")
        .unwrap()
        .as_str()
        .unwrap();
    assert_ne!(role, "tool");
}

fn tool_call_turns(
    read_path: &'static str,
    write_path: &'static str,
) -> impl Fn(&Json) -> Option<FakeResponse> {
    move |body| {
        let last = messages_of(body).last().unwrap();
        let role = last
            .as_object()
            .unwrap()
            .get("role")
            .unwrap()
            .as_str()
            .unwrap();
        let text = content_of(last);
        if role == "user" && text.starts_with("read") {
            let args = format!(r#"{{"path": "{read_path}"}}"#);
            return Some(FakeResponse::ok(tool_calls_completion(&[(
                "r1",
                "read_file",
                &args,
            )])));
        }
        if role == "user" && text.starts_with("write") {
            let args = format!(r#"{{"path": "{write_path}", "content": "x"}}"#);
            return Some(FakeResponse::ok(tool_calls_completion(&[(
                "w1",
                "write_file",
                &args,
            )])));
        }
        None
    }
}

#[tokio::test]
async fn summaries_are_structured_updated_and_track_files_cumulatively() {
    // S7.14–S7.18.
    let fake = FakeOpenAi::start().await;
    let phase = Arc::new(Mutex::new(("a.md", "b.md")));
    let p = phase.clone();
    fake.set_responder(move |body| {
        if let Some(r) = faithful(body) {
            return Some(r);
        }
        let (read_path, write_path) = *p.lock().unwrap();
        tool_call_turns(read_path, write_path)(body)
    });
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.md"), "A").unwrap();
    std::fs::write(ws.path().join("c.md"), "C").unwrap();
    let r = router(ws.path(), config(&fake, |c| c.agent.memory_window = 8));
    // Each turn waits for the consolidation it triggers, so the slices are known: [0,6) holds the constraint
    // and the read of a.md, [6,10) the write of b.md, [10,14) the read of c.md, [14,18) the write of a.md.
    for text in ["always use metric units", "read it", "write it"] {
        say(&r, text).await;
        settle(&r).await;
    }
    *phase.lock().unwrap() = ("c.md", "a.md");
    for text in ["read again", "write again", "fine", "ok"] {
        say(&r, text).await;
        settle(&r).await;
    }

    let summaries = requests_where(&fake, is_summary);
    assert!(summaries.len() >= 2, "{}", summaries.len());
    // S7.18: flat text in one user message, not a chat to continue.
    let first = &summaries[0];
    assert_eq!(messages_of(first).len(), 2);
    let user = content_of(&messages_of(first)[1]);
    assert!(
        user.contains(
            "[User]: read it\n[Assistant tool calls]: read_file(path=\"a.md\")\n[Tool result]: A\n"
        ),
        "{user}"
    );
    assert!(!user.contains("<previous-summary>"));
    // S7.14: the structured format is asked for.
    for section in [
        "## Goal",
        "## Constraints & Preferences",
        "### Done",
        "### In Progress",
        "### Blocked",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ] {
        assert!(user.contains(section), "{section}");
    }
    // S7.17: the update prompt carries the previous summary.
    let second = content_of(&messages_of(&summaries[1])[1]);
    assert!(
        second.contains("<previous-summary>\n## Goal\nChat."),
        "{second}"
    );
    assert!(second.contains("- always use metric units"));

    // S7.15 / S7.16: cumulative files, modified wins.
    let (_, _, metadata) = on_disk(ws.path());
    let s = metadata
        .get("nanogate_summary")
        .and_then(Json::as_object)
        .unwrap();
    let list = |k: &str| -> Vec<String> {
        s.get(k)
            .and_then(Json::as_array)
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(list("read_files"), ["c.md"]);
    assert_eq!(list("modified_files"), ["a.md", "b.md"]);
    let text = s.get("text").and_then(Json::as_str).unwrap();
    assert!(text.contains("- always use metric units"), "{text}");
}

#[tokio::test]
async fn consolidation_racing_new_messages_skips_none_and_repeats_none() {
    let fake = FakeOpenAi::start().await;
    // Consolidation is slow: several turns complete while it runs.
    fake.set_responder(|body| {
        faithful(body).map(|r| {
            if is_save_memory(body) {
                r.delayed(Duration::from_millis(400))
            } else {
                r
            }
        })
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.memory.summary = false));
    let total = 40;
    for i in 0..total {
        say(&r, &format!("note {i:02}")).await;
    }
    settle(&r).await;
    // Every consolidation that is due runs; then a last one would be due only at 10 unconsolidated.
    let mut seen: Vec<String> = requests_where(&fake, is_save_memory)
        .iter()
        .flat_map(archived_lines)
        .filter_map(|l| l.split_once("USER: ").map(|(_, t)| t.to_owned()))
        .collect();
    let (watermark, len, _) = on_disk(ws.path());
    assert_eq!(len, 2 * total);
    let archived_users = seen.len();
    assert_eq!(
        archived_users,
        watermark.div_ceil(2),
        "each archived user message exactly once"
    );
    let expected: Vec<String> = (0..archived_users)
        .map(|i| format!("note {i:02}"))
        .collect();
    seen.dedup();
    assert_eq!(seen, expected, "in order, none skipped, none twice");
    let saves = requests_where(&fake, is_save_memory).len();
    assert!(
        saves >= 2,
        "messages arrived during a consolidation and were consolidated after it: {saves}"
    );
    assert!(
        len - watermark < 10,
        "consolidation caught up: watermark {watermark} of {len}"
    );
}

#[tokio::test]
async fn a_restart_after_consolidation_does_not_consolidate_again() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(faithful);
    let ws = tempfile::tempdir().unwrap();
    {
        let r = router(ws.path(), config(&fake, |c| c.agent.lane_idle_secs = 1));
        for i in 0..5 {
            say(&r, &format!("m{i}")).await;
        }
        settle(&r).await;
        // The lanes hold the store (and its workspace lock) until they go idle.
        for _ in 0..100 {
            if r.lanes() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(requests_where(&fake, is_save_memory).len(), 1);
    let r = router(ws.path(), config(&fake, |_| {}));
    say(&r, "after restart").await;
    settle(&r).await;
    assert_eq!(
        requests_where(&fake, is_save_memory).len(),
        1,
        "no second consolidation"
    );
    assert_eq!(on_disk(ws.path()).0, 5);
}

#[tokio::test]
async fn a_refused_forced_tool_choice_falls_back_to_auto() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(|body| {
        if is_save_memory(body) {
            let choice = body.as_object().unwrap().get("tool_choice").unwrap();
            if choice.as_str() != Some("auto") {
                return Some(FakeResponse::status(
                    400,
                    error_body(
                        "tool_choice object is not supported",
                        "invalid_request_error",
                        "bad_tool_choice",
                    ),
                ));
            }
        }
        faithful(body)
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.memory.summary = false));
    for i in 0..5 {
        say(&r, &format!("m{i}")).await;
    }
    settle(&r).await;
    let saves = requests_where(&fake, is_save_memory);
    assert_eq!(saves.len(), 2);
    assert_eq!(
        saves[1].as_object().unwrap().get("tool_choice"),
        Some(&Json::str("auto"))
    );
    assert_eq!(on_disk(ws.path()).0, 5);
    assert!(read(ws.path().join("memory/HISTORY.md")).starts_with("[2026-11-22 10:00] Talked"));
}

#[tokio::test]
async fn three_failures_in_a_row_archive_the_lines_raw() {
    let fake = FakeOpenAi::start().await;
    // The model never calls save_memory.
    fake.set_responder(|body| {
        if is_save_memory(body) {
            return Some(FakeResponse::ok(text_completion("I would rather chat.")));
        }
        faithful(body)
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.memory.summary = false));
    for i in 0..5 {
        say(&r, &format!("m{i}")).await;
    }
    settle(&r).await;
    assert_eq!(on_disk(ws.path()).0, 0, "first failure: nothing moves");
    assert!(read(ws.path().join("memory/HISTORY.md")).is_empty());
    say(&r, "m5").await;
    settle(&r).await;
    assert_eq!(on_disk(ws.path()).0, 0, "second failure");
    say(&r, "m6").await;
    settle(&r).await;
    assert_eq!(requests_where(&fake, is_save_memory).len(), 3);
    let history = read(ws.path().join("memory/HISTORY.md"));
    assert!(history.contains("] [RAW] "), "{history}");
    for i in 0..5 {
        assert!(history.contains(&format!("USER: m{i}\n")), "{history}");
    }
    assert!(history.ends_with("\n\n"));
    let (watermark, len, _) = on_disk(ws.path());
    assert_eq!((watermark, len), (9, 14));
    // And the next trigger is a fresh start: no loop.
    say(&r, "m7").await;
    settle(&r).await;
    assert_eq!(requests_where(&fake, is_save_memory).len(), 3);
}

#[tokio::test]
async fn new_archives_first_and_keeps_the_session_when_that_fails() {
    let fake = FakeOpenAi::start().await;
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let f = fail.clone();
    fake.set_responder(move |body| {
        if is_save_memory(body) && f.load(Ordering::SeqCst) {
            return Some(FakeResponse::status(
                500,
                error_body("boom", "server_error", "boom"),
            ));
        }
        faithful(body)
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.agent.memory_window = 100));
    say(&r, "remember: the code is 4711").await;
    say(&r, "second").await;
    let before = read(ws.path().join("sessions").join(FILE));
    assert_eq!(
        say(&r, "/new").await,
        "Memory archival failed, session not cleared. Please try again."
    );
    assert_eq!(
        read(ws.path().join("sessions").join(FILE)),
        before,
        "session kept byte for byte"
    );
    assert!(!ws.path().join("sessions/archive").exists());

    fail.store(false, Ordering::SeqCst);
    assert_eq!(say(&r, "/new").await, "New session started.");
    let saves = requests_where(&fake, is_save_memory);
    let lines = archived_lines(saves.last().unwrap());
    assert_eq!(lines.len(), 4, "everything unconsolidated: {lines:?}");
    assert_eq!(
        read(ws.path().join("memory/MEMORY.md")),
        "- remember: the code is 4711\n"
    );
    let archived: Vec<_> = std::fs::read_dir(ws.path().join("sessions/archive"))
        .unwrap()
        .collect();
    assert_eq!(archived.len(), 1);
    // The archived transcript is the old file, with its watermark moved to the end: all of it is in memory.
    assert_eq!(
        read(archived[0].as_ref().unwrap().path()),
        before.replacen("\"last_consolidated\": 0}", "\"last_consolidated\": 4}", 1)
    );
    let (watermark, len, metadata) = on_disk(ws.path());
    assert_eq!((watermark, len), (0, 0));
    assert!(metadata.get("nanogate_summary").is_none());
}

#[tokio::test]
async fn messages_queued_before_new_are_answered_in_the_old_session() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(|body| {
        faithful(body).or_else(|| {
            Some(FakeResponse::ok(text_completion("ok")).delayed(Duration::from_millis(50)))
        })
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.agent.memory_window = 100));
    let (channel, chat) = KEY.split_once(':').unwrap();
    let a = r.ask(Inbound::text(channel, chat, "before 1"));
    let b = r.ask(Inbound::text(channel, chat, "before 2"));
    let n = r.ask(Inbound::text(channel, chat, "/new"));
    let c = r.ask(Inbound::text(channel, chat, "after"));
    let (_, _, n, _) = tokio::join!(a, b, n, c);
    assert_eq!(n.unwrap().text, "New session started.");
    let archived = std::fs::read_dir(ws.path().join("sessions/archive"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let old = read(&archived);
    assert!(old.contains("before 1") && old.contains("before 2") && !old.contains("after"));
    let live = read(ws.path().join("sessions").join(FILE));
    assert!(live.contains("\"after\"") && !live.contains("before"));
}

/// The token estimate the agent uses: characters / 4 over the messages and the tools.
fn request_tokens(body: &Json) -> usize {
    let o = body.as_object().unwrap();
    let chars: usize = messages_of(body)
        .iter()
        .map(|m| m.to_python().chars().count())
        .sum::<usize>()
        + o.get("tools").map_or(0, |t| t.to_python().chars().count());
    chars.div_ceil(4)
}

#[tokio::test]
async fn a_long_conversation_under_a_small_window_never_sends_an_oversized_request() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(|body| {
        faithful(body).or_else(|| Some(FakeResponse::ok(text_completion(&"answer ".repeat(40)))))
    });
    let ws = tempfile::tempdir().unwrap();
    let (window, reserve) = (6_000, 1_000);
    let r = router(
        ws.path(),
        config(&fake, |c| {
            c.agent.context_window = window;
            c.agent.reserve_tokens = reserve;
            c.agent.memory_window = 1_000;
        }),
    );
    for i in 0..300 {
        let reply = say(&r, &format!("turn {i}: {}", "words ".repeat(60))).await;
        assert!(reply.starts_with("answer"), "turn {i}: {reply}");
    }
    settle(&r).await;
    let turns = requests_where(&fake, |b| !is_save_memory(b) && !is_summary(b));
    assert_eq!(turns.len(), 300);
    let biggest = turns.iter().map(request_tokens).max().unwrap();
    assert!(
        biggest <= window - reserve,
        "a request of ~{biggest} tokens passed the budget {}",
        window - reserve
    );
    assert!(
        !requests_where(&fake, is_save_memory).is_empty(),
        "the budget made consolidation run"
    );
    // Nothing lost: every message is in the file, and the watermark is where the history starts.
    let (watermark, len, _) = on_disk(ws.path());
    assert_eq!(len, 600);
    assert!(watermark > 0);
}

#[tokio::test]
async fn a_context_length_error_consolidates_and_retries_once_then_tells_the_user() {
    let fake = FakeOpenAi::start().await;
    let too_long = Arc::new(AtomicUsize::new(1));
    let t = too_long.clone();
    fake.set_responder(move |body| {
        if let Some(r) = faithful(body) {
            return Some(r);
        }
        let last = content_of(messages_of(body).last().unwrap());
        if last.starts_with("big") && t.load(Ordering::SeqCst) > 0 {
            t.fetch_sub(1, Ordering::SeqCst);
            return Some(FakeResponse::status(
                400,
                error_body(
                    "This model's maximum context length is 8192 tokens.",
                    "invalid_request_error",
                    "context_length_exceeded",
                ),
            ));
        }
        None
    });
    let ws = tempfile::tempdir().unwrap();
    let r = router(
        ws.path(),
        config(&fake, |c| {
            c.agent.memory_window = 100;
            c.memory.summary = false;
        }),
    );
    for i in 0..6 {
        say(&r, &format!("m{i}")).await;
    }
    assert_eq!(say(&r, "big one").await, "ok");
    assert_eq!(
        requests_where(&fake, is_save_memory).len(),
        1,
        "consolidated before the retry"
    );
    assert!(on_disk(ws.path()).0 > 0);

    too_long.store(usize::MAX / 2, Ordering::SeqCst);
    let reply = say(&r, "big again").await;
    assert!(
        reply.contains("too long for the model's context window"),
        "{reply}"
    );
    assert!(reply.contains("/new"));
}

#[tokio::test]
async fn a_planted_instruction_survives_five_consolidations() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(faithful);
    let ws = tempfile::tempdir().unwrap();
    let r = router(ws.path(), config(&fake, |c| c.agent.memory_window = 6));
    say(&r, "Please always answer in French.").await;
    let mut i = 0;
    while requests_where(&fake, is_save_memory).len() < 5 {
        say(&r, &format!("chat {i}")).await;
        settle(&r).await;
        i += 1;
        assert!(i < 100, "consolidation did not run five times");
    }
    let memory = read(ws.path().join("memory/MEMORY.md"));
    let (_, _, metadata) = on_disk(ws.path());
    let summary = metadata.get("nanogate_summary").unwrap().to_python();
    assert!(memory.contains("always answer in French"), "{memory}");
    assert!(summary.contains("always answer in French"), "{summary}");
    // And the model is told: in the system prompt (memory and summary) of the next turn.
    say(&r, "bonjour").await;
    let turn = last_turn(&fake);
    assert!(content_of(&messages_of(&turn)[0]).contains("always answer in French"));
}

#[tokio::test]
async fn a_silent_session_restarts_and_recent_conversations_are_shown() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(faithful);
    let ws = tempfile::tempdir().unwrap();
    // A session last touched two hours ago.
    let old = (chrono::Local::now() - chrono::Duration::hours(2)).naive_local();
    let stamp = old.format("%Y-%m-%dT%H:%M:%S%.6f").to_string();
    std::fs::create_dir_all(ws.path().join("sessions")).unwrap();
    std::fs::write(
        ws.path().join("sessions").join(FILE),
        format!(
            "{{\"_type\": \"metadata\", \"key\": \"{KEY}\", \"created_at\": \"{stamp}\", \"updated_at\": \"{stamp}\", \"metadata\": {{}}, \"last_consolidated\": 0}}\n\
             {{\"role\": \"user\", \"content\": \"plan the trip to Porto\", \"timestamp\": \"{stamp}\"}}\n\
             {{\"role\": \"assistant\", \"content\": \"Sure.\", \"timestamp\": \"{stamp}\"}}\n"
        ),
    )
    .unwrap();
    let today = chrono::Local::now().format("%Y-%m-%d %H:%M");
    std::fs::create_dir_all(ws.path().join("memory")).unwrap();
    std::fs::write(
        ws.path().join("memory/HISTORY.md"),
        format!("[{today}] Earlier: booked a dentist.\n\n"),
    )
    .unwrap();
    let r = router(
        ws.path(),
        config(&fake, |c| c.session.idle_reset_minutes = 60),
    );
    say(&r, "hello again").await;
    // The old conversation went to memory and the archive; the new one holds only this turn.
    let saves = requests_where(&fake, is_save_memory);
    assert_eq!(saves.len(), 1);
    assert_eq!(archived_lines(&saves[0]).len(), 2);
    assert!(
        std::fs::read_dir(ws.path().join("sessions/archive"))
            .unwrap()
            .count()
            == 1
    );
    let (watermark, len, _) = on_disk(ws.path());
    assert_eq!((watermark, len), (0, 2));
    let turn = last_turn(&fake);
    let system = content_of(&messages_of(&turn)[0]);
    let recent = system
        .split_once("# Recent conversations\n\n")
        .expect("recent conversations")
        .1;
    assert!(
        recent.starts_with(&format!(
            "[{today}] Earlier: booked a dentist.\n\n[2026-11-22 10:00] Talked; 2 lines."
        )),
        "{recent}"
    );
    // A session that was not silent long enough is left alone.
    say(&r, "still here").await;
    assert_eq!(on_disk(ws.path()).1, 4);
}

#[tokio::test]
async fn with_memory_off_no_model_call_reads_the_conversation_for_memory() {
    let fake = FakeOpenAi::start().await;
    fake.set_responder(faithful);
    let ws = tempfile::tempdir().unwrap();
    let r = router(
        ws.path(),
        config(&fake, |c| {
            c.memory.enabled = false;
            c.agent.context_window = 1_500;
            c.agent.reserve_tokens = 200;
        }),
    );
    for i in 0..12 {
        say(&r, &format!("m{i} {}", "padding ".repeat(40))).await;
    }
    settle(&r).await;
    assert_eq!(say(&r, "/new").await, "New session started.");
    assert!(requests_where(&fake, |b| is_save_memory(b) || is_summary(b)).is_empty());
    assert!(!ws.path().join("memory/HISTORY.md").exists());
    // The transcript is archived whole, and requests were still kept under the budget by trimming.
    let archived = std::fs::read_dir(ws.path().join("sessions/archive"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(read(archived).lines().count(), 1 + 24);
    let biggest = fake.requests().iter().map(request_tokens).max().unwrap();
    assert!(biggest <= 1_300, "{biggest}");
}
