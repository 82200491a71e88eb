//! Gateway benchmark (ignored by `cargo test`; run by `bench/gateway.sh`): the real `nanogate gateway` binary
//! connected to the fake Telegram Bot API, the fake Discord REST + gateway and an instant fake model, all on
//! 127.0.0.1. Measures startup to the "ready" line, idle RSS, messages per second through Telegram for 10,000
//! different chats (one message each), RSS right after, and RSS once the session cache, the lanes and the send
//! queues have gone idle and been evicted. Prints a markdown table.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::fake_discord::FakeDiscord;
use common::fake_openai::FakeOpenAi;
use common::fake_telegram::FakeTelegram;
use tokio::io::{AsyncBufReadExt, BufReader};

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Resident kB by kind of mapping (the main heap, other anonymous memory such as thread arenas and stacks,
/// files), to tell allocator retention from code and libraries.
fn rss_breakdown(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut heap, mut anon, mut file, mut kind) = (0u64, 0u64, 0u64, 0u8);
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        match (f.next(), f.next()) {
            (Some("Rss:"), Some(kb)) => {
                let kb: u64 = kb.parse().unwrap_or(0);
                *[&mut heap, &mut anon, &mut file][kind as usize] += kb;
            }
            (Some(first), _) if first.contains('-') && !first.ends_with(':') => {
                let name = line.split_whitespace().nth(5).unwrap_or("");
                kind = match name {
                    "[heap]" => 0,
                    "" | "[stack]" => 1,
                    _ => 2,
                };
            }
            _ => {}
        }
    }
    format!(
        "main heap {}, other anonymous {}, files {}",
        mb(heap),
        mb(anon),
        mb(file)
    )
}

fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

fn config(
    dir: &Path,
    model: &FakeOpenAi,
    tg: &FakeTelegram,
    dc: &FakeDiscord,
) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[provider]\napi_base = \"{}\"\napi_key = \"sk-bench\"\n\n\
             [session]\ncache_idle_minutes = 1\n\n\
             [agent]\nlane_idle_secs = 1\n\n\
             [channels.telegram]\nenabled = true\ntoken = \"1:BENCH\"\napi_url = \"{}\"\nallow_from = [\"*\"]\n\n\
             [channels.discord]\nenabled = true\ntoken = \"BENCH\"\napi_url = \"{}\"\nallow_from = [\"*\"]\n",
            model.base_url(),
            tg.url(),
            dc.url()
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run bench/gateway.sh"]
async fn gateway_benchmark() {
    let chats: i64 = std::env::var("BENCH_CHATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let (tg, dc, model) = (
        FakeTelegram::start().await,
        FakeDiscord::start().await,
        FakeOpenAi::start().await,
    );
    let home = tempfile::tempdir().unwrap();
    let cfg = config(home.path(), &model, &tg, &dc);
    let started = Instant::now();
    // BENCH_BIN compares another build of the binary (another profile, say) on the same harness.
    let bin =
        std::env::var("BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_nanogate").to_owned());
    let mut child = tokio::process::Command::new(bin)
        .args(["gateway", "--workspace"])
        .arg(home.path().join("ws"))
        .arg("--config")
        .arg(&cfg)
        .env("HOME", home.path())
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run nanogate gateway");
    let pid = child.id().expect("pid");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let ready = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .expect("the gateway logs ready");
        if line.contains(" ready") {
            break started.elapsed();
        }
    };
    // Keep draining stderr so the daemon never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    dc.wait_for("discord READY", |d| d.connected()).await;
    tg.wait_for("telegram polling", |t| !t.offsets().is_empty())
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = rss_kb(pid);
    let idle_breakdown = rss_breakdown(pid);

    let t0 = Instant::now();
    // Chat ids far from the fake bot's own id (777), whose messages the gateway ignores.
    for chat in 100_000..100_000 + chats {
        tg.push_private(chat, &format!("user{chat}"), "hello");
    }
    while (tg.sent().len() as i64) < chats {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = t0.elapsed();
    let after = rss_kb(pid);
    // Session cache idle 1 min (evictor every 30 s), lanes 1 s, send queues 60 s, pooled connections 90 s; the
    // heap is trimmed once a minute for 3 minutes after the cache last changed size.
    let idle_secs: u64 = std::env::var("BENCH_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    tokio::time::sleep(Duration::from_secs(idle_secs)).await;
    let evicted = rss_kb(pid);
    let breakdown = rss_breakdown(pid);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = child.wait().await.expect("wait");

    println!("\n| measure | value | target |");
    println!("|---|---:|---|");
    println!(
        "| startup to \"ready\" (both channels connected) | {} ms | < 100 ms |",
        ready.as_millis()
    );
    println!(
        "| idle RSS, connected to Telegram and Discord | {} | < 15 MB |",
        mb(idle)
    );
    println!("| of which | {idle_breakdown} | |");
    println!(
        "| {chats} Telegram chats, one message each, instant model | {:.0} msgs/s ({:.2} s) | |",
        chats as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!("| RSS right after the {chats} chats | {} | |", mb(after));
    println!(
        "| RSS after idle eviction ({idle_secs} s later) | {} | < 30 MB |",
        mb(evicted)
    );
    println!("| of which | {breakdown} | |");
    println!("| exit status after SIGTERM | {status} | 0 |");
}
