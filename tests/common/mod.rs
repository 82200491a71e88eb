//! Helpers shared by the integration tests: fixture paths, temp workspaces, Python.
#![allow(dead_code)]

pub mod fake_openai;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// A temp dir holding a copy of `tests/fixtures/<rel>` (a workspace), writable.
pub fn copy_fixture_dir(rel: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    copy_dir(&fixture(rel), tmp.path());
    tmp
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
            let mut perms = std::fs::metadata(&target).expect("meta").permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).expect("chmod");
        }
    }
}

/// Runs `python3 -c script` with `input` on stdin; returns stdout. Panics with stderr on failure.
pub fn python(script: &str, input: &[u8]) -> Vec<u8> {
    python_with("python3", script, input)
}

/// Runs `interpreter -c script` with `input` on stdin; returns stdout.
pub fn python_with(interpreter: &str, script: &str, input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(interpreter)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 must be installed to run this test");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("python output");
    writer
        .join()
        .expect("writer thread")
        .expect("write to python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every `*.jsonl` session file under a directory (not recursive).
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v
}

pub mod fake_discord;
pub mod fake_telegram;

/// Starts `nanogate gateway` in-process over `ws` with the provider at `model` and `tweak` applied, and waits for
/// its "ready" point. Returns the gateway (call `shutdown`).
pub async fn start_gateway(
    ws: &Path,
    model: &fake_openai::FakeOpenAi,
    tweak: impl FnOnce(&mut nanogate::config::Config),
) -> nanogate::gateway::Gateway {
    let mut c = nanogate::config::Config::default();
    c.provider.api_base = model.base_url();
    c.provider.api_key = Some("sk-test-secret".into());
    c.provider.max_retries = 1;
    c.gateway.shutdown_grace_secs = 10;
    tweak(&mut c);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let store =
        nanogate::session::SessionStore::open(ws, c.session.store_options()).expect("store");
    let provider = nanogate::provider::Provider::new(&c.provider).expect("provider");
    let agent = nanogate::agent::Agent::new(
        c,
        ws.to_path_buf(),
        store,
        provider,
        nanogate::tools::default_registry(),
        Some(tx),
    );
    let mut gw = nanogate::gateway::Gateway::start(agent, rx)
        .await
        .expect("gateway starts");
    gw.ready().await;
    gw
}

/// The last user message (`role: user` content) of every chat request the fake model received, in order.
pub fn user_texts(model: &fake_openai::FakeOpenAi) -> Vec<String> {
    model
        .recorded()
        .iter()
        .filter_map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.body_text).ok()?;
            let last = v["messages"]
                .as_array()?
                .iter()
                .rev()
                .find(|m| m["role"] == "user")?
                .clone();
            Some(match &last["content"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        })
        .collect()
}

/// The nanogate binary with HOME in `home`, no `NANOGATE_*` or `RUST_LOG` from the test's own environment, and
/// the given arguments and extra environment.
pub fn nanogate_command(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nanogate"));
    cmd.args(args).env("HOME", home).env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("NANOGATE_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs [`nanogate_command`] from async tests.
pub async fn run_nanogate(
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    tokio::process::Command::from(nanogate_command(home, args, env))
        .output()
        .await
        .expect("run nanogate")
}

/// Runs [`nanogate_command`] with no extra environment, so the user's `~/.nanogate` is never read.
pub fn nanogate(home: &Path, args: &[&str]) -> std::process::Output {
    nanogate_command(home, args, &[])
        .output()
        .expect("run nanogate")
}

/// A command's standard output, as text.
pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An agent on `ws` for `config`, built as the binary builds one (store options from `[session]`, the default
/// tools) but without an outbound queue.
pub fn agent(
    ws: &Path,
    config: nanogate::config::Config,
) -> std::sync::Arc<nanogate::agent::Agent> {
    let store =
        nanogate::session::SessionStore::open(ws, config.session.store_options()).expect("store");
    let provider = nanogate::provider::Provider::new(&config.provider).expect("provider");
    nanogate::agent::Agent::new(
        config,
        ws.to_path_buf(),
        store,
        provider,
        nanogate::tools::default_registry(),
        None,
    )
}

/// Waits until `cond` holds, checking every 10 ms for up to 20 s (a safety net, not a timing assertion); on
/// timeout panics with `what` and the fake's `state`.
pub async fn wait_until(what: &str, cond: impl Fn() -> bool, state: impl Fn() -> String) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}; {}", state());
}
