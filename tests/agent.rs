//! The agent against a fake OpenAI-compatible server on 127.0.0.1: tool loops, errors, lanes, commands.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::fake_openai::{FakeOpenAi, FakeResponse, error_body};
use nanogate::agent::{Agent, Router};
use nanogate::bus::Inbound;
use nanogate::config::Config;
use nanogate::json::Json;
use nanogate::session::load_file;

struct Setup {
    router: Router,
    ws: tempfile::TempDir,
}

fn config(fake: &FakeOpenAi, tweak: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    c.provider.api_base = fake.base_url();
    c.provider.api_key = Some("sk-test-secret".into());
    c.provider.max_retries = 2;
    c.provider.request_timeout_secs = 30;
    tweak(&mut c);
    c
}

fn setup_in(ws: tempfile::TempDir, fake: &FakeOpenAi, tweak: impl FnOnce(&mut Config)) -> Setup {
    Setup {
        router: Router::new(common::agent(ws.path(), config(fake, tweak))),
        ws,
    }
}

fn setup(fake: &FakeOpenAi) -> Setup {
    setup_in(tempfile::tempdir().expect("tmp"), fake, |_| {})
}

fn msg(key: &str, text: &str) -> Inbound {
    let (channel, chat) = key.split_once(':').expect("key");
    Inbound::text(channel, chat, text)
}

fn session_lines(ws: &Path, file: &str) -> Vec<Json> {
    let text = std::fs::read_to_string(ws.join("sessions").join(file)).expect("session file");
    text.lines()
        .map(|l| Json::parse(l).expect("json line"))
        .collect()
}

fn field<'a>(m: &'a Json, k: &str) -> Option<&'a Json> {
    m.as_object().and_then(|o| o.get(k))
}

fn keys_of(m: &Json) -> Vec<String> {
    m.as_object()
        .expect("object")
        .iter()
        .map(|(k, _)| k.to_owned())
        .collect()
}

#[tokio::test]
async fn a_tool_loop_runs_and_is_saved_in_nanobots_shape() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    std::fs::write(s.ws.path().join("notes.txt"), "tea at five").expect("write");
    fake.push_tool_calls(vec![("call_1", "read_file", r#"{"path": "notes.txt"}"#)]);
    fake.push_text("You have tea at five.");
    let reply = s
        .router
        .ask(msg("telegram:42", "what's in my notes?"))
        .await
        .expect("reply");
    assert_eq!(reply.text, "You have tea at five.");
    assert!(!reply.error);

    // The second request carried the tool result after the assistant's call.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let second = field(&reqs[1], "messages")
        .and_then(Json::as_array)
        .expect("messages");
    let last = second.last().expect("last");
    assert_eq!(field(last, "role"), Some(&Json::str("tool")));
    assert_eq!(field(last, "content"), Some(&Json::str("tea at five")));
    assert_eq!(field(&second[0], "role"), Some(&Json::str("system")));
    assert!(
        field(&reqs[0], "tools")
            .and_then(Json::as_array)
            .is_some_and(|t| t.len() >= 7)
    );

    let lines = session_lines(s.ws.path(), "telegram_42.jsonl");
    assert_eq!(
        lines.len(),
        5,
        "header, user, assistant with call, tool, answer"
    );
    assert_eq!(keys_of(&lines[1]), ["role", "content", "timestamp"]);
    assert_eq!(
        keys_of(&lines[2]),
        ["role", "content", "tool_calls", "timestamp"]
    );
    assert_eq!(
        keys_of(&lines[3]),
        ["role", "tool_call_id", "name", "content", "timestamp"]
    );
    assert_eq!(keys_of(&lines[4]), ["role", "content", "timestamp"]);
    assert_eq!(
        field(&lines[4], "content"),
        Some(&Json::str("You have tea at five."))
    );
    let call = field(&lines[2], "tool_calls")
        .and_then(Json::as_array)
        .expect("calls")[0]
        .to_python();
    assert_eq!(
        call,
        r#"{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}}"#
    );
}

#[tokio::test]
async fn parallel_tool_calls_all_get_results_in_order() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    std::fs::write(s.ws.path().join("a.txt"), "AAA").expect("write");
    std::fs::write(s.ws.path().join("b.txt"), "BBB").expect("write");
    fake.push_tool_calls(vec![
        ("c1", "read_file", r#"{"path": "a.txt"}"#),
        ("c2", "read_file", r#"{"path": "b.txt"}"#),
        ("c3", "exec", r#"{"command": "echo hi"}"#),
    ]);
    fake.push_text("done");
    s.router
        .ask(msg("cli:direct", "read both"))
        .await
        .expect("reply");
    let reqs = fake.requests();
    let sent = field(&reqs[1], "messages")
        .and_then(Json::as_array)
        .expect("messages");
    let tools: Vec<(String, String)> = sent
        .iter()
        .filter(|m| field(m, "role") == Some(&Json::str("tool")))
        .map(|m| {
            let id = field(m, "tool_call_id")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned();
            (
                id,
                field(m, "content")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("c1".into(), "AAA".into()),
            ("c2".into(), "BBB".into()),
            ("c3".into(), "hi".into())
        ]
    );
}

#[tokio::test]
async fn unparsable_arguments_become_a_tool_error_the_model_sees() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    fake.push_tool_calls(vec![
        ("c1", "read_file", r#"{"path": "a.txt""#),
        ("c2", "no_such_tool", "{}"),
    ]);
    fake.push_text("sorry");
    let reply = s.router.ask(msg("cli:direct", "go")).await.expect("reply");
    assert_eq!(reply.text, "sorry");
    let reqs = fake.requests();
    let sent = field(&reqs[1], "messages")
        .and_then(Json::as_array)
        .expect("messages");
    let results: Vec<&str> = sent
        .iter()
        .filter(|m| field(m, "role") == Some(&Json::str("tool")))
        .filter_map(|m| field(m, "content").and_then(Json::as_str))
        .collect();
    assert!(
        results[0].starts_with("Error: invalid arguments: not valid JSON"),
        "{}",
        results[0]
    );
    assert!(
        results[1].starts_with("Error: unknown tool \"no_such_tool\""),
        "{}",
        results[1]
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limited_then_success_honours_retry_after() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    fake.push_status_with_headers(
        429,
        &[("retry-after", "3")],
        error_body("slow down", "rate_limit", "rate_limit"),
    );
    fake.push_text("fine now");
    let start = tokio::time::Instant::now();
    let reply = s.router.ask(msg("cli:direct", "hi")).await.expect("reply");
    assert_eq!(reply.text, "fine now");
    assert!(start.elapsed() >= Duration::from_secs(3));
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_model_that_keeps_failing_gets_an_error_reply_and_the_message_is_kept() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    fake.set_default(FakeResponse::status(
        503,
        error_body("overloaded", "server_error", "overloaded"),
    ));
    let reply = s
        .router
        .ask(msg("telegram:7", "are you there?"))
        .await
        .expect("reply");
    assert!(reply.error);
    assert!(
        reply.text.contains("Sorry") && reply.text.contains("503"),
        "{}",
        reply.text
    );
    assert!(!reply.text.contains("sk-test-secret"));
    assert_eq!(fake.request_count(), 3, "first try plus max_retries = 2");
    let lines = session_lines(s.ws.path(), "telegram_7.jsonl");
    assert_eq!(lines.len(), 2);
    assert_eq!(
        field(&lines[1], "content"),
        Some(&Json::str("are you there?"))
    );
}

#[tokio::test]
async fn too_many_tool_rounds_end_with_a_clear_message() {
    let fake = FakeOpenAi::start().await;
    let s = setup_in(tempfile::tempdir().expect("tmp"), &fake, |c| {
        c.agent.max_tool_iterations = 3
    });
    fake.set_default(FakeResponse::ok(
        common::fake_openai::tool_calls_completion(&[("c", "list_dir", r#"{"path": "."}"#)]),
    ));
    let reply = s
        .router
        .ask(msg("cli:direct", "loop forever"))
        .await
        .expect("reply");
    assert!(
        reply.text.contains("3 rounds") && reply.text.contains("max_tool_iterations"),
        "{}",
        reply.text
    );
    assert_eq!(fake.request_count(), 3);
    // The saved turn still pairs every call with its result.
    let lines = session_lines(s.ws.path(), "cli_direct.jsonl");
    let history = load_file(&s.ws.path().join("sessions/cli_direct.jsonl"), None)
        .expect("read")
        .expect("file")
        .session;
    assert_eq!(lines.len(), 1 + 1 + 3 * 2 + 1);
    assert_eq!(history.history(500).len(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_messages_to_one_key_are_answered_in_order_and_never_interleave() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    for i in 0..20 {
        fake.push_text(&format!("answer {i}"));
    }
    fake.set_delay(Duration::from_millis(5));
    let router = &s.router;
    let mut waits = Vec::new();
    for i in 0..20 {
        // Queued in call order; each reply is awaited on its own task.
        waits.push(tokio::spawn(
            router.ask(msg("telegram:1", &format!("question {i}"))),
        ));
    }
    for (i, wait) in waits.into_iter().enumerate() {
        let reply = wait.await.expect("task").expect("reply");
        assert_eq!(reply.text, format!("answer {i}"));
    }
    let lines = session_lines(s.ws.path(), "telegram_1.jsonl");
    let contents: Vec<String> = lines[1..]
        .iter()
        .map(|m| {
            field(m, "content")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let want: Vec<String> = (0..20)
        .flat_map(|i| [format!("question {i}"), format!("answer {i}")])
        .collect();
    assert_eq!(contents, want);
}

async fn run_keys(cap: usize, keys: usize, model_latency: Duration) -> usize {
    let fake = FakeOpenAi::start().await;
    let s = setup_in(tempfile::tempdir().expect("tmp"), &fake, |c| {
        c.agent.max_concurrent_turns = cap
    });
    fake.set_delay(model_latency);
    let tasks: Vec<_> = (0..keys)
        .map(|i| tokio::spawn(s.router.ask(msg(&format!("telegram:{i}"), "hi"))))
        .collect();
    for t in tasks {
        assert!(t.await.expect("task").is_some());
    }
    fake.max_in_flight()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn different_keys_run_in_parallel_up_to_the_cap() {
    // With the cap above the number of keys every turn runs at once (about one model latency in all);
    // with the default cap of 4 they run four at a time (about eight latencies for 30 keys).
    // (A longer latency for the first case leaves room for a slow machine to get all 30 requests out.)
    assert_eq!(run_keys(32, 30, Duration::from_millis(1000)).await, 30);
    assert_eq!(run_keys(4, 30, Duration::from_millis(300)).await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_a_slow_turn_and_what_is_queued() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    fake.set_delay(Duration::from_secs(600));
    let r1 = tokio::spawn(s.router.ask(msg("telegram:5", "slow one")));
    let r2 = tokio::spawn(s.router.ask(msg("telegram:5", "queued behind it")));
    while fake.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stop = s
        .router
        .ask(msg("telegram:5", "/stop"))
        .await
        .expect("reply");
    assert_eq!(stop.text, "Stopped 2 task(s).");
    assert!(r1.await.expect("task").is_none());
    assert!(r2.await.expect("task").is_none());
    assert_eq!(
        fake.request_count(),
        1,
        "the queued message never reached the model"
    );
    let again = s
        .router
        .ask(msg("telegram:5", "/stop"))
        .await
        .expect("reply");
    assert_eq!(again.text, "No active task to stop.");
    // The chat works again afterwards.
    fake.set_delay(Duration::from_millis(0));
    fake.push_text("back");
    assert_eq!(
        s.router
            .ask(msg("telegram:5", "hello?"))
            .await
            .expect("reply")
            .text,
        "back"
    );
}

#[tokio::test]
async fn new_clears_help_and_status_answer_and_commands_are_not_saved() {
    let fake = FakeOpenAi::start().await;
    let s = setup(&fake);
    fake.push_text("hi there");
    s.router
        .ask(msg("discord:9", "hello"))
        .await
        .expect("reply");
    let help = s
        .router
        .ask(msg("discord:9", "/help"))
        .await
        .expect("reply");
    assert!(
        help.text.contains("/new") && help.text.contains("/stop") && help.text.contains("/status")
    );
    let status = s
        .router
        .ask(msg("discord:9", "/status"))
        .await
        .expect("reply");
    assert!(
        status.text.contains("Model: gpt-4o-mini") && status.text.contains("Messages: 2"),
        "{}",
        status.text
    );
    assert!(
        status.text.contains("tokens") && status.text.contains("Uptime"),
        "{}",
        status.text
    );
    assert_eq!(
        session_lines(s.ws.path(), "discord_9.jsonl").len(),
        3,
        "commands are not written"
    );
    // /new first moves the conversation into memory (one save_memory call), then clears.
    fake.push_tool_calls(vec![(
        "c1",
        "save_memory",
        r#"{"history_entry": "[2026-01-01 10:00] Said hi.", "memory_update": "- says hi"}"#,
    )]);
    let new = s.router.ask(msg("discord:9", "/new")).await.expect("reply");
    assert_eq!(new.text, "New session started.");
    assert_eq!(session_lines(s.ws.path(), "discord_9.jsonl").len(), 1);
    assert_eq!(
        std::fs::read_dir(s.ws.path().join("sessions/archive"))
            .expect("archive")
            .count(),
        1
    );
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn a_turn_appended_to_a_fixture_session_keeps_every_earlier_byte() {
    let fake = FakeOpenAi::start().await;
    let ws = common::copy_fixture_dir("nanobot-0.1.4/workspace");
    let path = ws.path().join("sessions/telegram_12345678.jsonl");
    let before = std::fs::read(&path).expect("read");
    let s = setup_in(ws, &fake, |_| {});
    fake.push_text("Still here, again.");
    s.router
        .ask(msg("telegram:12345678", "ping again"))
        .await
        .expect("reply");
    let after = std::fs::read(&path).expect("read");
    let nl = before.iter().position(|&b| b == b'\n').expect("line 1");
    assert_eq!(after[nl..before.len()], before[nl..]);
    // The model saw the unconsolidated history after the watermark (7), repaired and in order.
    let reqs = fake.requests();
    let sent = field(&reqs[0], "messages")
        .and_then(Json::as_array)
        .expect("messages");
    let contents: Vec<&str> = sent[1..]
        .iter()
        .filter_map(|m| field(m, "content").and_then(Json::as_str))
        .collect();
    assert_eq!(
        contents,
        [
            "Answer to everything?",
            "42.",
            "ping",
            "Still here.",
            "ping again"
        ]
    );
}

#[tokio::test]
async fn idle_lanes_exit_and_come_back() {
    let fake = FakeOpenAi::start().await;
    let s = setup_in(tempfile::tempdir().expect("tmp"), &fake, |c| {
        c.agent.lane_idle_secs = 1
    });
    s.router.ask(msg("cli:direct", "one")).await.expect("reply");
    assert_eq!(s.router.lanes(), 1);
    for _ in 0..400 {
        if s.router.lanes() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.router.lanes(), 0);
    assert!(s.router.ask(msg("cli:direct", "two")).await.is_some());
}

#[tokio::test]
async fn the_system_prompt_carries_workspace_files_and_memory() {
    let fake = FakeOpenAi::start().await;
    let ws = tempfile::tempdir().expect("tmp");
    std::fs::write(ws.path().join("USER.md"), "The user is called Ada.").expect("write");
    std::fs::create_dir_all(ws.path().join("memory")).expect("mkdir");
    std::fs::write(ws.path().join("memory/MEMORY.md"), "Ada likes tea.").expect("write");
    let s = setup_in(ws, &fake, |_| {});
    s.router.ask(msg("telegram:3", "hi")).await.expect("reply");
    let reqs = fake.requests();
    let system = field(&reqs[0], "messages")
        .and_then(Json::as_array)
        .expect("messages")[0]
        .clone();
    let text = field(&system, "content")
        .and_then(Json::as_str)
        .expect("text")
        .to_owned();
    assert!(
        text.contains("Channel: telegram") && text.contains("Chat ID: 3"),
        "{text}"
    );
    assert!(
        text.contains("The user is called Ada.") && text.contains("Ada likes tea."),
        "{text}"
    );
}

#[test]
fn the_agent_is_shareable() {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Arc<Agent>>();
    is_send_sync::<Router>();
}

#[tokio::test]
async fn a_model_with_vision_gets_photos_as_image_parts_and_the_session_keeps_the_path() {
    let fake = FakeOpenAi::start().await;
    let s = setup_in(tempfile::tempdir().expect("tmp"), &fake, |c| {
        c.provider.vision = true;
    });
    let photo = s.ws.path().join("media/cat.png");
    std::fs::create_dir_all(photo.parent().expect("dir")).expect("mkdir");
    std::fs::write(&photo, [0x89, b'P', b'N', b'G', 1, 2, 3]).expect("write");
    let mut inbound = msg("telegram:5", "what is this?");
    inbound.media = vec![photo.clone(), s.ws.path().join("media/notes.pdf")];
    s.router.ask(inbound.clone()).await.expect("reply");

    let req = fake.last_request().expect("request").body;
    let messages = field(&req, "messages")
        .and_then(Json::as_array)
        .expect("messages");
    let user = messages.last().expect("user");
    let parts = field(user, "content")
        .and_then(Json::as_array)
        .expect("parts");
    assert_eq!(
        parts.len(),
        2,
        "text and the one image (the pdf is not an image)"
    );
    let text = field(&parts[0], "text")
        .and_then(Json::as_str)
        .expect("text");
    assert!(
        text.starts_with("what is this?\n[image: ") && text.contains("[file: "),
        "{text}"
    );
    let url = field(&parts[1], "image_url")
        .and_then(|u| field(u, "url"))
        .and_then(Json::as_str)
        .expect("url");
    assert_eq!(url, "data:image/png;base64,iVBORwECAw==");

    // The session stores the text with the path, never the image.
    let lines = session_lines(s.ws.path(), "telegram_5.jsonl");
    let stored = field(&lines[1], "content")
        .and_then(Json::as_str)
        .expect("stored text");
    assert_eq!(stored, text);

    // An image that cannot be read stays a path reference: the turn still runs.
    let mut inbound = msg("telegram:5", "and this?");
    inbound.media = vec![s.ws.path().join("media/gone.png")];
    s.router.ask(inbound).await.expect("reply");
    let req = fake.last_request().expect("request").body;
    let user = field(&req, "messages")
        .and_then(Json::as_array)
        .and_then(|m| m.last().cloned())
        .expect("user");
    let text = field(&user, "content")
        .and_then(Json::as_str)
        .expect("plain text");
    assert!(
        text.starts_with("and this?\n[image: ") && text.ends_with("gone.png]"),
        "{text}"
    );

    // Without vision the model gets the same text, as a plain string.
    let plain = setup(&fake);
    let mut inbound = msg("telegram:6", "what is this?");
    inbound.media = vec![photo];
    plain.router.ask(inbound).await.expect("reply");
    let req = fake.last_request().expect("request").body;
    let user = field(&req, "messages")
        .and_then(Json::as_array)
        .and_then(|m| m.last().cloned())
        .expect("user");
    assert!(
        field(&user, "content")
            .and_then(Json::as_str)
            .is_some_and(|t| t.contains("[image: "))
    );
}
