//! The router and its lanes: strict order within a session, parallelism across sessions.
//!
//! Each session key that has work gets a lane: a task with an unbounded queue that handles that key's messages
//! one at a time, in arrival order, so a message that arrives during a turn waits for it and two turns never
//! interleave in the session file. Turns of different keys run in parallel, at most
//! `agent.max_concurrent_turns` at once (a semaphore permit per turn). A lane that has waited
//! `agent.lane_idle_secs` without work removes itself from the map and exits; the removal happens under the
//! map's lock after a last look at the queue, so a message is never sent to a lane that is going away.
//!
//! `/stop` does not queue: it cancels the key's running turn and everything queued behind it at once, and new
//! messages get a fresh cancellation token.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{Agent, Reply, commands, turn};
use crate::bus::{Inbound, Outbound};

/// Where a job's reply goes.
enum ReplyTo {
    /// To the agent's outbound queue (the gateway's channels).
    Outbound,
    /// To a caller waiting for it (the terminal, the admin API).
    Caller(oneshot::Sender<Option<Reply>>),
}

struct Job {
    inbound: Inbound,
    reply: ReplyTo,
    cancel: CancellationToken,
}

/// The state `/stop` needs: the token new jobs get, and how many jobs are queued or running.
struct LaneState {
    cancel: Mutex<CancellationToken>,
    pending: AtomicUsize,
}

struct LaneEntry {
    id: u64,
    tx: mpsc::UnboundedSender<Job>,
    state: Arc<LaneState>,
}

struct RouterInner {
    agent: Arc<Agent>,
    lanes: Mutex<HashMap<String, LaneEntry>>,
    next_id: AtomicU64,
}

/// Routes messages to per-session lanes. Cheap to clone.
#[derive(Clone)]
pub struct Router {
    inner: Arc<RouterInner>,
}

impl Router {
    /// A router over `agent`.
    pub fn new(agent: Arc<Agent>) -> Self {
        Router {
            inner: Arc::new(RouterInner {
                agent,
                lanes: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// Queues `inbound`; the reply goes to the agent's outbound queue.
    pub fn dispatch(&self, inbound: Inbound) {
        self.submit(inbound, ReplyTo::Outbound);
    }

    /// Queues `inbound` now (so calls queue in call order) and returns a future of its reply (`None` when the
    /// turn was stopped).
    pub fn ask(
        &self,
        inbound: Inbound,
    ) -> impl Future<Output = Option<Reply>> + Send + 'static + use<> {
        let (tx, rx) = oneshot::channel();
        self.submit(inbound, ReplyTo::Caller(tx));
        async move { rx.await.ok().flatten() }
    }

    /// Cancels the running turn of `key` and drops what is queued; returns how many jobs that stopped.
    pub fn stop(&self, key: &str) -> usize {
        let lanes = self
            .inner
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(lane) = lanes.get(key) else { return 0 };
        let mut token = lane
            .state
            .cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        token.cancel();
        *token = CancellationToken::new();
        lane.state.pending.load(Ordering::SeqCst)
    }

    /// The agent the lanes run.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.inner.agent
    }

    /// Messages queued or running across all lanes.
    pub fn queue_depth(&self) -> usize {
        self.inner
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|l| l.state.pending.load(Ordering::SeqCst))
            .sum()
    }

    /// Number of lanes alive now.
    pub fn lanes(&self) -> usize {
        self.inner
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn submit(&self, inbound: Inbound, reply: ReplyTo) {
        let key = inbound.session_key();
        if commands::parse(&inbound.text) == Some("/stop") {
            let n = self.stop(&key);
            let text = if n > 0 {
                format!("Stopped {n} task(s).")
            } else {
                "No active task to stop.".to_owned()
            };
            deliver(&self.inner.agent, &inbound, reply, Some(Reply::ok(text)));
            return;
        }
        let mut lanes = self
            .inner
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if lanes.get(&key).is_none_or(|l| l.tx.is_closed()) {
            let entry = self.spawn_lane(&key);
            lanes.insert(key.clone(), entry);
        }
        let Some(lane) = lanes.get(&key) else { return };
        let cancel = lane
            .state
            .cancel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        lane.state.pending.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::error::SendError(job)) = lane.tx.send(Job {
            inbound,
            reply,
            cancel,
        }) {
            lane.state.pending.fetch_sub(1, Ordering::SeqCst);
            warn!(session = %key, "the session's lane is gone; message not handled");
            let sorry = Reply::error("Sorry, something went wrong; please send that again.".into());
            deliver(&self.inner.agent, &job.inbound, job.reply, Some(sorry));
        }
    }

    fn spawn_lane(&self, key: &str) -> LaneEntry {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(LaneState {
            cancel: Mutex::new(CancellationToken::new()),
            pending: AtomicUsize::new(0),
        });
        tokio::spawn(lane(
            self.inner.clone(),
            key.to_owned(),
            id,
            state.clone(),
            rx,
        ));
        debug!(session = %key, "lane started");
        LaneEntry { id, tx, state }
    }
}

async fn lane(
    inner: Arc<RouterInner>,
    key: String,
    id: u64,
    state: Arc<LaneState>,
    mut rx: mpsc::UnboundedReceiver<Job>,
) {
    let idle = Duration::from_secs(inner.agent.config.agent.lane_idle_secs.max(1));
    loop {
        let job = match tokio::time::timeout(idle, rx.recv()).await {
            Ok(Some(job)) => job,
            Ok(None) => break,
            Err(_) => match take_or_retire(&inner, &key, id, &mut rx) {
                Some(job) => job,
                None => break,
            },
        };
        let reply = if job.cancel.is_cancelled() {
            None
        } else {
            handle(&inner.agent, &job.inbound, &job.cancel).await
        };
        state.pending.fetch_sub(1, Ordering::SeqCst);
        deliver(&inner.agent, &job.inbound, job.reply, reply);
    }
    debug!(session = %key, "lane exited");
}

/// After an idle wait: the next job if one slipped in, else the lane leaves the map (under its lock, so no
/// sender can pick it in between).
fn take_or_retire(
    inner: &RouterInner,
    key: &str,
    id: u64,
    rx: &mut mpsc::UnboundedReceiver<Job>,
) -> Option<Job> {
    let mut lanes = inner.lanes.lock().unwrap_or_else(PoisonError::into_inner);
    if let Ok(job) = rx.try_recv() {
        return Some(job);
    }
    if lanes.get(key).is_some_and(|l| l.id == id) {
        lanes.remove(key);
        crate::shrink::shrink_when_sparse(&mut lanes);
    }
    None
}

async fn handle(
    agent: &Arc<Agent>,
    inbound: &Inbound,
    cancel: &CancellationToken,
) -> Option<Reply> {
    let key = inbound.session_key();
    match commands::parse(&inbound.text) {
        Some("/new") => Some(commands::new_session(agent, &key).await),
        Some("/help") => Some(Reply::ok(commands::HELP.to_owned())),
        Some("/status") => {
            Some(commands::status(agent, &key, &inbound.channel, &inbound.chat_id).await)
        }
        _ => {
            let _permit = tokio::select! {
                p = agent.turn_permits.acquire() => p.ok()?,
                _ = cancel.cancelled() => return None,
            };
            commands::idle_reset(agent, &key).await;
            turn::run(agent, inbound, cancel).await
        }
    }
}

fn deliver(agent: &Agent, inbound: &Inbound, to: ReplyTo, reply: Option<Reply>) {
    match to {
        ReplyTo::Caller(tx) => {
            let _ = tx.send(reply);
        }
        ReplyTo::Outbound => {
            let (Some(reply), Some(out)) = (reply, &agent.outbound) else {
                return;
            };
            let msg = Outbound {
                channel: inbound.channel.clone(),
                chat_id: inbound.chat_id.clone(),
                text: reply.text,
            };
            if out.send(msg).is_err() {
                warn!(session = %inbound.session_key(), "reply dropped: the outbound queue is closed");
            }
        }
    }
}
