//! `nanogate gateway`: the daemon. Starts every enabled channel and the router, logs one "ready" line, runs
//! until SIGTERM or SIGINT, then shuts down gracefully (running turns finish within
//! `gateway.shutdown_grace_secs`, sessions are flushed) and exits 0.

use anyhow::Result;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::Context;
use super::agent::build_agent;
use crate::gateway::Gateway;
use crate::notify;

/// Runs `nanogate gateway`.
pub async fn run(ctx: &Context) -> Result<i32> {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let agent = build_agent(ctx, Some(out_tx))?;
    info!(workspace = %ctx.workspace.display(), "starting nanogate gateway");
    let mut gateway = Gateway::start(agent, out_rx).await?;
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let watchdog = notify::watchdog_interval().map(|every| tokio::spawn(watchdog(every)));
    let name = tokio::select! {
        name = &mut signal => name?,
        _ = gateway.ready() => {
            tell_systemd(notify::ready(), "READY=1");
            signal.await?
        }
    };
    tell_systemd(notify::stopping(), "STOPPING=1");
    if let Some(w) = watchdog {
        w.abort();
    }
    info!(
        signal = name,
        "shutting down: no new messages; waiting for running turns"
    );
    gateway.shutdown().await?;
    Ok(0)
}

/// Sends `WATCHDOG=1` every `every` (half of `WatchdogSec=`, see [`notify::watchdog_interval`]) while the
/// runtime is alive.
async fn watchdog(every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        tell_systemd(notify::watchdog(), "WATCHDOG=1");
    }
}

/// Logs a failed notification; systemd then acts on its own timeouts, so the daemon goes on.
fn tell_systemd(sent: std::io::Result<bool>, what: &str) {
    if let Err(e) = sent {
        warn!("cannot tell systemd {what}: {e}");
    }
}

/// Resolves on the first SIGTERM or SIGINT, with the signal's name.
async fn shutdown_signal() -> Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
