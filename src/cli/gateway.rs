//! `nanogate gateway`: the daemon. Starts every enabled channel and the router, logs one "ready" line, runs
//! until SIGTERM or SIGINT, then shuts down gracefully (running turns finish within
//! `gateway.shutdown_grace_secs`, sessions are flushed) and exits 0.

use anyhow::Result;
use tokio::sync::mpsc;
use tracing::info;

use super::Context;
use super::agent::build_agent;
use crate::gateway::Gateway;

/// Runs `nanogate gateway`.
pub async fn run(ctx: &Context) -> Result<i32> {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let agent = build_agent(ctx, Some(out_tx))?;
    info!(workspace = %ctx.workspace.display(), "starting nanogate gateway");
    let mut gateway = Gateway::start(agent, out_rx).await?;
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let name = tokio::select! {
        name = &mut signal => name?,
        _ = gateway.ready() => signal.await?,
    };
    info!(
        signal = name,
        "shutting down: no new messages; waiting for running turns"
    );
    gateway.shutdown().await?;
    Ok(0)
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
