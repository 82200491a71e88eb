//! The daemon behind `nanogate gateway`: channels in, the router in the middle, replies out.
//!
//! ```text
//!  telegram ─┐            ┌─ Router (one lane per session) ─┐
//!  discord  ─┼─► Inlet ──►┤                                 ├─► agent.outbound ─► dispatcher ─► ChatQueues
//!  (cron)   ─┘            └─────────────────────────────────┘      (message tool too)        (per channel, per chat)
//! ```
//!
//! - Every channel hands its messages to the [`Inlet`]. It asks the router for the reply in a task tracked by a
//!   `TaskTracker`, so shutdown can wait for running turns; the reply goes into the agent's outbound queue,
//!   the same queue the `message` tool writes to, so a turn's messages and its reply stay in order.
//! - The dispatcher moves each `Outbound` to its channel's [`ChatQueues`], which deliver one chat's replies one
//!   at a time.
//! - A channel that cannot connect retries with backoff on its own; the others are not affected. Each logs one
//!   line when connected, and [`Gateway::ready`] logs one "ready" line when every channel has made its first
//!   attempt.
//! - [`Gateway::shutdown`]: stop the channels (no new messages), wait for running turns and queued replies up to
//!   `gateway.shutdown_grace_secs`, flush the sessions.
//!
//! - [`Gateway::shutdown`] also stops the background services first, waits for a running memory consolidation
//!   (`memory.shutdown_wait_secs`) before the flush, and stops the admin API.
//!
//! Background services start with the daemon: the admin API (when `[admin] enabled`; a bad admin setting stops
//! the start), the cron scheduler and the heartbeat (which ask the router directly and deliver through the
//! agent's outbound queue, so their replies reach the chats like any other) and the daily session sweep
//! (`session.max_age_days`). Channels report whether they are connected through the [`Inlet`], for the
//! admin API's `/readyz`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use crate::admin::{self, AdminError, Readiness};
use crate::agent::{Agent, Router, upkeep};
use crate::bus::{Inbound, Outbound};
use crate::channels::{ChatQueues, discord, telegram};
use crate::config::ConfigError;
use crate::cron::heartbeat::{self, HeartbeatHandle};
use crate::cron::{JobStore, Scheduler, SchedulerHandle, SchedulerOptions};
use crate::session::SessionError;

/// Why the gateway could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The agent was built without an outbound queue, so replies would have nowhere to go.
    #[error("the agent has no outbound queue (build it with one for the gateway)")]
    NoOutbound,
    /// A channel's configuration is unusable (e.g. no token).
    #[error("{channel}: {source}")]
    Config {
        /// `telegram` or `discord`.
        channel: &'static str,
        /// What is wrong.
        source: ConfigError,
    },
    /// A channel could not be set up (e.g. a malformed `api_url`).
    #[error("{channel}: {message}")]
    Channel {
        /// `telegram` or `discord`.
        channel: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The admin API could not start.
    #[error("admin API: {0}")]
    Admin(#[from] AdminError),
    /// Sessions could not be flushed at shutdown.
    #[error("flushing sessions at shutdown failed: {0}")]
    Flush(#[from] SessionError),
}

/// Where channels (and background services) hand in messages. Cheap to clone.
#[derive(Clone)]
pub struct Inlet {
    router: Router,
    readiness: Arc<Readiness>,
    tracker: TaskTracker,
    accepting: Arc<AtomicBool>,
    out: mpsc::UnboundedSender<Outbound>,
}

impl Inlet {
    /// Queues `inbound` for its session; the reply is sent to the message's channel and chat. `busy` (e.g. the
    /// typing indicator's guard) is dropped when the turn ends. Returns `false` once shutdown has begun.
    pub fn submit(&self, inbound: Inbound, busy: Option<DropGuard>) -> bool {
        if !self.accepting.load(Ordering::SeqCst) {
            return false;
        }
        let key = inbound.session_key();
        let (channel, chat_id) = (inbound.channel.clone(), inbound.chat_id.clone());
        // `ask` queues now, so messages of one chat keep their arrival order.
        let reply = self.router.ask(inbound);
        let out = self.out.clone();
        self.tracker.spawn(async move {
            let reply = reply.await;
            drop(busy);
            let Some(reply) = reply else { return };
            let msg = Outbound {
                channel,
                chat_id,
                text: reply.text,
            };
            if out.send(msg).is_err() {
                warn!(session = %key, "reply dropped: the outbound queue is closed");
            }
        });
        true
    }

    /// Records whether `channel` is connected now (for the admin API's `/readyz`).
    pub fn set_connected(&self, channel: &str, connected: bool) {
        self.readiness.set(channel, connected);
    }

    /// The router (for `/stop`-like controls and status).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Turns running or queued through this inlet.
    pub fn in_flight(&self) -> usize {
        self.tracker.len()
    }
}

/// How long [`Gateway::ready`] waits for the channels' first connection attempts.
pub const READY_WAIT: Duration = Duration::from_secs(15);

/// A channel's first connection attempt has finished (connected or failed): used for the "ready" line.
pub type FirstAttempt = oneshot::Receiver<()>;

/// The running daemon.
pub struct Gateway {
    agent: Arc<Agent>,
    inlet: Inlet,
    stop: CancellationToken,
    channel_tasks: Vec<JoinHandle<()>>,
    service_tasks: Vec<JoinHandle<()>>,
    queues: Vec<Arc<ChatQueues>>,
    first_attempts: Vec<(&'static str, FirstAttempt)>,
    dispatcher: JoinHandle<()>,
    /// Tells the dispatcher to route what is queued and exit (shutdown, after the turns).
    drain: CancellationToken,
    evictor: JoinHandle<()>,
    trimmer: JoinHandle<()>,
    scheduler: Option<SchedulerHandle>,
    heartbeat: Option<HeartbeatHandle>,
    sweep: Option<JoinHandle<()>>,
}

impl Gateway {
    /// Starts the router, every enabled channel and the background services. `outbound` is the receiving end of
    /// the queue the agent was built with.
    pub async fn start(
        agent: Arc<Agent>,
        outbound: mpsc::UnboundedReceiver<Outbound>,
    ) -> Result<Gateway, GatewayError> {
        let out = agent.outbound.clone().ok_or(GatewayError::NoOutbound)?;
        let readiness = Arc::new(Readiness::default());
        if agent.config.channels.telegram.enabled {
            readiness.register("telegram");
        }
        if agent.config.channels.discord.enabled {
            readiness.register("discord");
        }
        let inlet = Inlet {
            router: Router::new(agent.clone()),
            readiness,
            tracker: TaskTracker::new(),
            accepting: Arc::new(AtomicBool::new(true)),
            out,
        };
        let stop = CancellationToken::new();
        // The admin API first: a configuration error there stops the start before any channel connects.
        let admin = if agent.config.admin.enabled {
            let (_, task) = admin::start(
                &agent.config.admin,
                inlet.router.clone(),
                inlet.readiness.clone(),
                stop.child_token(),
            )
            .await?;
            Some(task)
        } else {
            None
        };
        let started = match start_channels(&agent, &inlet, &stop) {
            Ok(started) => started,
            Err(e) => {
                // Channels started before the failing one end with the token.
                stop.cancel();
                return Err(e);
            }
        };
        if started.is_empty() {
            warn!(
                "no channel is enabled: set channels.telegram.enabled or channels.discord.enabled in config.toml"
            );
        }
        let routes: HashMap<&'static str, Arc<ChatQueues>> = started
            .iter()
            .map(|c| (c.queues.channel(), c.queues.clone()))
            .collect();
        let drain = CancellationToken::new();
        let mut gw = Gateway {
            evictor: agent.store.spawn_evictor(),
            trimmer: tokio::spawn(return_freed_memory(agent.clone())),
            dispatcher: tokio::spawn(dispatch(outbound, routes, drain.clone())),
            drain,
            agent,
            inlet,
            stop,
            channel_tasks: Vec::new(),
            service_tasks: admin.into_iter().collect(),
            scheduler: None,
            heartbeat: None,
            sweep: None,
            queues: Vec::new(),
            first_attempts: Vec::new(),
        };
        for c in started {
            gw.channel_tasks.push(c.task);
            gw.first_attempts
                .push((c.queues.channel(), c.first_attempt));
            gw.queues.push(c.queues);
        }
        gw.start_background_services().await;
        Ok(gw)
    }

    /// Background services that live as long as the daemon: the cron scheduler, the heartbeat and the daily
    /// session sweep. They use the router directly and deliver through the agent's outbound queue, like the
    /// channels' replies. An unusable jobs file is logged (file and position) and the daemon runs without the
    /// scheduler rather than not at all: the chats matter more.
    async fn start_background_services(&mut self) {
        let config = &self.agent.config;
        let router = self.inlet.router.clone();
        let out = self.agent.outbound.clone();
        match config.cron.store_path() {
            Ok(path) => {
                match Scheduler::start(
                    JobStore::new(path),
                    router.clone(),
                    out.clone(),
                    SchedulerOptions::from_config(&config.cron),
                )
                .await
                {
                    Ok(handle) => self.scheduler = Some(handle),
                    Err(e) => error!("cron jobs will not run: {e}"),
                }
            }
            Err(e) => error!("cron jobs will not run: {e}"),
        }
        self.heartbeat = heartbeat::spawn(
            self.agent.workspace.clone(),
            router,
            self.agent.store.clone(),
            out,
            config.heartbeat.interval(),
        );
        self.sweep = Some(upkeep::spawn_daily_sweep(self.agent.clone()));
    }

    /// Waits until every channel has made its first connection attempt (at most [`READY_WAIT`]: a channel that
    /// is still trying keeps trying in the background), then logs the one "ready" line.
    pub async fn ready(&mut self) {
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        let mut pending = Vec::new();
        for (channel, rx) in self.first_attempts.drain(..) {
            // A dropped sender (the channel task ended) counts as an attempt made.
            if tokio::time::timeout_at(deadline, rx).await.is_err() {
                pending.push(channel);
            }
        }
        if pending.is_empty() {
            info!(channels = self.queues.len(), "ready");
        } else {
            info!(
                channels = self.queues.len(),
                still_connecting = %pending.join(","),
                "ready (some channels are still connecting)"
            );
        }
    }

    /// The inlet, for background services and tests.
    pub fn inlet(&self) -> &Inlet {
        &self.inlet
    }

    /// Stops taking messages, waits up to `gateway.shutdown_grace_secs` for running turns and queued replies,
    /// then flushes every session.
    pub async fn shutdown(self) -> Result<(), GatewayError> {
        let grace = Duration::from_secs(self.agent.config.gateway.shutdown_grace_secs);
        let deadline = tokio::time::Instant::now() + grace;
        // Channels stop receiving first; a batch they are handing over is finished, so nothing they took from
        // the platform (and acknowledged) is dropped. Then the inlet closes for anything still trying.
        self.stop.cancel();
        if let Some(sweep) = &self.sweep {
            sweep.abort();
        }
        // No new cron runs or beats; those in progress finish like any turn.
        if let Some(s) = self.scheduler
            && tokio::time::timeout_at(deadline, s.shutdown())
                .await
                .is_err()
        {
            warn!("cron runs still in progress when the grace period ended");
        }
        if let Some(h) = self.heartbeat
            && tokio::time::timeout_at(deadline, h.shutdown())
                .await
                .is_err()
        {
            warn!("a heartbeat turn was still running when the grace period ended");
        }
        for task in self.channel_tasks.into_iter().chain(self.service_tasks) {
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                warn!("a channel or service did not stop within the grace period");
            }
        }
        self.inlet.accepting.store(false, Ordering::SeqCst);
        let running = self.inlet.tracker.len();
        if running > 0 {
            info!(
                turns = running,
                "waiting for running turns to finish (up to {}s)",
                grace.as_secs()
            );
        }
        self.inlet.tracker.close();
        if tokio::time::timeout_at(deadline, self.inlet.tracker.wait())
            .await
            .is_err()
        {
            warn!(
                turns = self.inlet.tracker.len(),
                "turns still running when the grace period ended; their replies are lost"
            );
        }
        // Finished turns have put their replies in the outbound queue; the dispatcher moves them to the send
        // queues before it exits, so none is lost between the two.
        self.drain.cancel();
        let _ = tokio::time::timeout_at(deadline, self.dispatcher).await;
        for q in &self.queues {
            if tokio::time::timeout_at(deadline, q.drained())
                .await
                .is_err()
            {
                warn!(
                    channel = q.channel(),
                    pending = q.pending(),
                    "replies still queued when the grace period ended"
                );
            }
        }
        // A consolidation started by one of the last turns writes MEMORY.md, HISTORY.md and the watermark.
        let memory_wait = Duration::from_secs(self.agent.config.memory.shutdown_wait_secs);
        self.agent.memory.wait_idle(memory_wait).await;
        self.evictor.abort();
        self.trimmer.abort();
        self.agent.store.flush_all().await?;
        info!("stopped: sessions flushed");
        Ok(())
    }
}

/// What a channel's `start` returns.
pub struct StartedChannel {
    /// Its send queues.
    pub queues: Arc<ChatQueues>,
    /// Its task (receiving, reconnecting); ends when the stop token is cancelled.
    pub task: JoinHandle<()>,
    /// Completes after the first connection attempt.
    pub first_attempt: FirstAttempt,
}

/// Minutes of trimming after the session cache last changed size: what a burst of chats leaves behind (lanes,
/// send queues, pooled connections, then the evicted sessions) is freed in stages over a few minutes.
const TRIM_MINUTES_AFTER_CHANGE: u32 = 3;

/// Once a minute, for a few minutes after the session cache grew or shrank, hands freed memory back to the
/// system (see [`crate::heap`]). A daemon whose chats are all cached and quiet is left alone.
async fn return_freed_memory(agent: Arc<Agent>) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    let mut cached = agent.store.cached();
    let mut minutes_left = 0;
    loop {
        tick.tick().await;
        let now = agent.store.cached();
        if now != cached {
            minutes_left = TRIM_MINUTES_AFTER_CHANGE;
        }
        cached = now;
        if minutes_left > 0 {
            minutes_left -= 1;
            crate::heap::trim();
        }
    }
}

/// Starts every enabled channel; the first configuration error stops the loop.
fn start_channels(
    agent: &Agent,
    inlet: &Inlet,
    stop: &CancellationToken,
) -> Result<Vec<StartedChannel>, GatewayError> {
    let channels = &agent.config.channels;
    let typing_slots =
        agent.config.agent.max_concurrent_turns.max(1) * crate::channels::TYPING_SLOTS;
    let ctx = crate::channels::ChannelContext {
        workspace: agent.workspace.clone(),
        media_max_bytes: agent.config.gateway.media_max_bytes,
        inlet: inlet.clone(),
        stop: stop.clone(),
        typing_slots,
    };
    let mut started = Vec::new();
    if channels.telegram.enabled {
        started.push(telegram::start(channels.telegram.clone(), ctx.clone())?);
    }
    if channels.discord.enabled {
        started.push(discord::start(channels.discord.clone(), ctx)?);
    }
    Ok(started)
}

/// Moves each reply to its channel's send queues; on `drain`, routes what is already queued and exits.
async fn dispatch(
    mut rx: mpsc::UnboundedReceiver<Outbound>,
    routes: HashMap<&'static str, Arc<ChatQueues>>,
    drain: CancellationToken,
) {
    let route = |msg: Outbound| match routes.get(msg.channel.as_str()) {
        Some(q) => q.push(&msg.chat_id, msg.text),
        None => warn!(
            channel = %msg.channel,
            chat_id = %msg.chat_id,
            "reply for a channel that is not running; dropped"
        ),
    };
    loop {
        tokio::select! {
            biased;
            msg = rx.recv() => match msg {
                Some(msg) => route(msg),
                None => return,
            },
            _ = drain.cancelled() => {
                while let Ok(msg) = rx.try_recv() {
                    route(msg);
                }
                return;
            }
        }
    }
}
