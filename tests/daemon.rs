//! The whole daemon as systemd runs it: `nanogate gateway` with Telegram (a fake Bot API), the admin API, a
//! cron job that delivers to the chat, `sd_notify` over a real `NOTIFY_SOCKET`, and SIGTERM.

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::fake_openai::{FakeOpenAi, FakeResponse, text_completion};
use common::fake_telegram::FakeTelegram;

const TOKEN: &str = "123456:SECRET-DAEMON-TOKEN";
const ADMIN_TOKEN: &str = "admin-daemon-token";

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

async fn nanogate(home: &Path, config: &Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_nanogate"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env("HOME", home)
        .env_remove("NANOGATE_WORKSPACE")
        .output()
        .await
        .expect("run nanogate")
}

/// Starts `nanogate gateway` with this config and extra environment; stderr is captured.
fn spawn_gateway(
    home: &Path,
    config: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_nanogate"));
    cmd.arg("--config")
        .arg(config)
        .arg("gateway")
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .env_remove("NANOGATE_WORKSPACE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("run nanogate gateway")
}

/// SIGTERM, then the exit code and stderr.
async fn stop(child: tokio::process::Child) -> (Option<i32>, String) {
    let pid = child.id().expect("pid") as i32;
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the daemon exits")
        .expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What arrived on the notify socket so far.
fn notifications(sock: &UnixDatagram) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    while let Ok(n) = sock.recv(&mut buf) {
        out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_serves_chats_cron_admin_and_systemd_together() {
    let (tg, model) = (FakeTelegram::start().await, FakeOpenAi::start().await);
    model.set_responder(|body| {
        let text = body.to_python();
        text.contains("water the plants")
            .then(|| FakeResponse::ok(text_completion("Time to water the plants!")))
    });
    let home = tempfile::tempdir().expect("tmp");
    let ws = home.path().join("ws");
    let port = free_port();
    let config = home.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "workspace = \"{ws}\"\n\n[provider]\napi_base = \"{model}\"\napi_key = \"sk-test\"\nmax_retries = 0\n\n\
             [channels.telegram]\nenabled = true\ntoken_env = \"TEST_TG_TOKEN\"\napi_url = \"{tg}\"\n\
             allow_from = [\"42\"]\npoll_timeout_secs = 1\n\n\
             [cron]\nstore = \"{home}/jobs.json\"\n\n\
             [admin]\nenabled = true\nlisten = \"127.0.0.1:{port}\"\ntoken_env = \"TEST_ADMIN_TOKEN\"\n",
            ws = ws.display(),
            model = model.base_url(),
            tg = tg.url(),
            home = home.path().display(),
        ),
    )
    .expect("config");
    // A job that delivers to the Telegram chat, added with the command line before the daemon starts.
    let o = nanogate(
        home.path(),
        &config,
        &[
            "cron",
            "add",
            "--name",
            "plants",
            "--message",
            "water the plants",
            "--every",
            "1",
            "--deliver",
            "--channel",
            "telegram",
            "--to",
            "42",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let notify_path = home.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("notify socket");
    notify.set_nonblocking(true).expect("nonblocking");
    let child = spawn_gateway(
        home.path(),
        &config,
        &[
            ("TEST_TG_TOKEN", TOKEN.as_ref()),
            ("TEST_ADMIN_TOKEN", ADMIN_TOKEN.as_ref()),
            ("NOTIFY_SOCKET", notify_path.as_os_str()),
        ],
    );

    // The job fires and its reply reaches the chat.
    tg.wait_for("the cron reply", |t| {
        t.sent()
            .iter()
            .any(|s| s.chat_id == 42 && s.text == "Time to water the plants!")
    })
    .await;
    // A chat message is answered too.
    tg.push_private(42, "alice", "hello");
    tg.wait_for("the chat reply", |t| {
        t.sent().iter().any(|s| s.text == "ok")
    })
    .await;

    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let ready = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    let status = ready.status().as_u16();
    let body = ready.text().await.expect("body");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"telegram\": true"), "{body}");
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
    assert!(
        metrics.contains("nanogate_cron_runs_total{status=\"ok\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("nanogate_turns_total{channel=\"telegram\",outcome=\"ok\"}"),
        "{metrics}"
    );
    assert_eq!(
        client
            .get(format!("{base}/sessions"))
            .send()
            .await
            .expect("sessions")
            .status()
            .as_u16(),
        401
    );

    let (code, stderr) = stop(child).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("scheduler started"), "{stderr}");
    assert!(stderr.contains("admin API listening"), "{stderr}");
    assert!(
        !stderr.contains("SECRET-DAEMON-TOKEN") && !stderr.contains(ADMIN_TOKEN),
        "{stderr}"
    );
    let said = notifications(&notify);
    assert!(said.iter().any(|s| s.contains("READY=1")), "{said:?}");
    assert!(said.iter().any(|s| s.contains("STOPPING=1")), "{said:?}");
    // The job's session and its run record are on disk.
    assert!(ws.join("sessions").read_dir().expect("sessions").any(|e| {
        e.expect("entry")
            .file_name()
            .to_string_lossy()
            .starts_with("cron_")
    }));
    let jobs = std::fs::read_to_string(home.path().join("jobs.json")).expect("jobs");
    assert!(jobs.contains("\"lastStatus\": \"ok\""), "{jobs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_jobs_file_leaves_the_chats_running_and_an_admin_api_without_a_token_stops_the_start()
 {
    let model = FakeOpenAi::start().await;
    let home = tempfile::tempdir().expect("tmp");
    let jobs = home.path().join("jobs.json");
    let corrupt = "{\"version\": 1, \"jobs\": [{\"id\": ";
    std::fs::write(&jobs, corrupt).expect("jobs");
    let port = free_port();
    let config = home.path().join("config.toml");
    let write_config = |admin_token: &str| {
        std::fs::write(
            &config,
            format!(
                "[provider]\napi_base = \"{}\"\napi_key = \"sk-test\"\n\n[cron]\nstore = \"{}\"\n\n\
                 [admin]\nenabled = true\nlisten = \"127.0.0.1:{port}\"\n{admin_token}",
                model.base_url(),
                jobs.display()
            ),
        )
        .expect("config");
    };

    // No admin token: the daemon refuses to start and says what to set.
    write_config("");
    let o = nanogate(home.path(), &config, &["gateway"]).await;
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("admin.token"), "{stderr}");

    // With a token it runs; the broken jobs file is reported and left as it was.
    write_config(&format!("token = \"{ADMIN_TOKEN}\"\n"));
    let child = spawn_gateway(home.path(), &config, &[]);
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..400 {
        if let Ok(r) = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            && r.status().is_success()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(up, "the admin API never answered");
    // Chats still work: a message through the admin API gets the model's answer.
    let reply = client
        .post(format!("http://127.0.0.1:{port}/messages"))
        .bearer_auth(ADMIN_TOKEN)
        .body(r#"{"session": "t", "text": "hi"}"#)
        .send()
        .await
        .expect("message")
        .text()
        .await
        .expect("body");
    assert!(reply.contains("\"reply\": \"ok\""), "{reply}");
    let (code, stderr) = stop(child).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("cron jobs will not run") && stderr.contains("jobs.json"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&jobs).expect("jobs"), corrupt);
}
