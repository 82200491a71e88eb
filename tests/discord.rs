//! The Discord channel end to end: serenity talks to a fake REST API (as its proxy) and a fake gateway
//! websocket on 127.0.0.1; the agent to a fake model.

mod common;

use common::fake_discord::FakeDiscord;
use common::fake_openai::FakeOpenAi;
use common::{start_gateway, user_texts};
use nanogate::config::Config;

fn discord(dc: &FakeDiscord) -> impl FnOnce(&mut Config) {
    let url = dc.url();
    move |c: &mut Config| {
        c.channels.discord.enabled = true;
        c.channels.discord.token = Some("FAKE.DISCORD.TOKEN".into());
        c.channels.discord.api_url = url;
        c.channels.discord.allow_from = vec!["1001".into(), "carol".into()];
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_through_the_fake_gateway_and_rest() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    model.push_text("Hi from the agent");
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, discord(&dc)).await;
    dc.wait_for("READY", |d| d.connected()).await;
    // The gateway URL came from the fake, so serenity never fell back to discord.com.
    assert!(
        dc.rest_calls().contains(&"GET /api/v10/gateway".to_owned()),
        "{:?}",
        dc.rest_calls()
    );
    let identify = &dc.frames()[0];
    assert_eq!(identify["op"], 2);
    let intents = identify["d"]["intents"].as_u64().unwrap();
    let wanted = (1 << 9) | (1 << 12) | (1 << 15); // guild messages, direct messages, message content
    assert_eq!(intents & wanted, wanted, "intents {intents:b}");
    // serenity identifies with the token as configured, prefixed "Bot ".
    assert!(
        identify["d"]["token"]
            .as_str()
            .is_some_and(|t| t.ends_with("FAKE.DISCORD.TOKEN"))
    );

    dc.send_message(55, 1001, "dave", "hello there", false, false);
    dc.wait_for("the reply", |d| !d.sent().is_empty()).await;
    gw.shutdown().await.unwrap();
    let sent = dc.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].channel_id, "55");
    assert_eq!(sent[0].content, "Hi from the agent");
    assert_eq!(user_texts(&model), vec!["hello there"]);
    assert!(
        dc.rest_calls()
            .contains(&"POST /api/v10/channels/55/typing".to_owned())
    );
    assert!(ws.path().join("sessions/discord_55.jsonl").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_need_a_mention_and_strangers_are_refused() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, discord(&dc)).await;
    dc.wait_for("READY", |d| d.connected()).await;
    dc.send_message(70, 1001, "dave", "no mention here", true, false);
    dc.send_message(70, 2002, "eve", "let me in", true, true);
    dc.send_message(70, 3003, "carol", "what's new?", true, true);
    dc.wait_for("one reply", |d| d.sent().len() == 1).await;
    dc.send_message(71, 1001, "dave", "in a DM", false, false);
    dc.wait_for("two replies", |d| d.sent().len() == 2).await;
    gw.shutdown().await.unwrap();
    assert_eq!(user_texts(&model), vec!["what's new?", "in a DM"]);
    let sent = dc.sent();
    assert_eq!(
        (sent[0].channel_id.as_str(), sent[1].channel_id.as_str()),
        ("70", "71")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_split_at_2000_characters_with_code_blocks_balanced() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    let mut reply = String::from("Code:\n```python\n");
    for i in 0..400 {
        reply.push_str(&format!("print('line {i:03}')\n"));
    }
    reply.push_str("```\nDone.");
    model.push_text(&reply);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, discord(&dc)).await;
    dc.wait_for("READY", |d| d.connected()).await;
    dc.send_message(55, 1001, "dave", "code", false, false);
    dc.wait_for("the last part", |d| {
        d.sent()
            .last()
            .is_some_and(|s| s.content.ends_with("Done."))
    })
    .await;
    gw.shutdown().await.unwrap();
    let sent = dc.sent();
    assert!(sent.len() >= 4, "{} parts", sent.len());
    let mut next = 0;
    for part in &sent {
        assert!(part.content.chars().count() <= 2000);
        assert_eq!(
            part.content.matches("```").count() % 2,
            0,
            "{}",
            part.content
        );
        for line in part.content.lines() {
            if let Some(n) = line.strip_prefix("print('line ") {
                assert_eq!(n[..3].parse::<usize>().unwrap(), next, "order");
                next += 1;
            }
        }
    }
    assert_eq!(next, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_close_4000_is_followed_by_a_resume() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, discord(&dc)).await;
    dc.wait_for("READY", |d| d.connected()).await;
    dc.send_message(55, 1001, "dave", "before", false, false);
    dc.wait_for("the first reply", |d| d.sent().len() == 1)
        .await;
    dc.close(4000);
    dc.wait_for("a RESUME", |d| {
        d.frames().iter().any(|f| f["op"] == 6) && d.connected()
    })
    .await;
    let resume = dc.frames().into_iter().find(|f| f["op"] == 6).unwrap();
    assert_eq!(resume["d"]["session_id"], "fake-session");
    assert!(resume["d"]["seq"].as_u64().unwrap() >= 2, "{resume}");
    assert_eq!(dc.connections(), 2);
    assert_eq!(
        dc.frames().iter().filter(|f| f["op"] == 2).count(),
        1,
        "resumed, not identified again"
    );
    dc.send_message(55, 1001, "dave", "after", false, false);
    dc.wait_for("the second reply", |d| d.sent().len() == 2)
        .await;
    gw.shutdown().await.unwrap();
    assert_eq!(user_texts(&model), vec!["before", "after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_from_the_proxy_is_retried() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    dc.rate_limit(1);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, discord(&dc)).await;
    dc.wait_for("READY", |d| d.connected()).await;
    dc.send_message(55, 1001, "dave", "hi", false, false);
    dc.wait_for("the reply", |d| !d.sent().is_empty()).await;
    gw.shutdown().await.unwrap();
    let posts = dc
        .rest_calls()
        .iter()
        .filter(|c| c.as_str() == "POST /api/v10/channels/55/messages")
        .count();
    assert_eq!(posts, 2, "one 429, one success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_that_cannot_connect_does_not_stop_the_others() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    // A port on 127.0.0.1 nobody listens on: Telegram's getMe fails and is retried with backoff.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let ws = tempfile::tempdir().unwrap();
    let base = discord(&dc);
    let gw = start_gateway(ws.path(), &model, |c| {
        base(c);
        c.channels.telegram.enabled = true;
        c.channels.telegram.token = Some("1:T".into());
        c.channels.telegram.api_url = format!("http://{closed}");
    })
    .await;
    dc.wait_for("READY", |d| d.connected()).await;
    dc.send_message(55, 1001, "dave", "still working?", false, false);
    dc.wait_for("the reply", |d| !d.sent().is_empty()).await;
    gw.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_downloaded_to_the_workspace() {
    let (dc, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    let ws = tempfile::tempdir().unwrap();
    let gw = start_gateway(ws.path(), &model, discord(&dc)).await;
    dc.wait_for("READY", |d| d.connected()).await;
    dc.send_attachment(
        55,
        1001,
        "see this",
        "Cat.PNG",
        "image/png",
        b"\x89PNGfake".to_vec(),
    );
    dc.wait_for("the reply", |d| !d.sent().is_empty()).await;
    gw.shutdown().await.unwrap();
    let media: Vec<_> = std::fs::read_dir(ws.path().join("media"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(media.len(), 1);
    assert_eq!(std::fs::read(&media[0]).unwrap(), b"\x89PNGfake");
    assert!(media[0].to_str().unwrap().ends_with(".png"));
    assert_eq!(
        user_texts(&model),
        vec![format!("see this\n[image: {}]", media[0].display())]
    );
}
