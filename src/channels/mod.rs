//! Channels: where messages come from and replies go.
//!
//! - `terminal`: the REPL of `nanogate agent`.
//! - `telegram` (teloxide, long polling) and `discord` (serenity, the gateway websocket): the chat platforms of
//!   `nanogate gateway`. An adapter turns platform events into [`Inbound`](crate::bus::Inbound) messages for the
//!   [`Inlet`](crate::gateway::Inlet) and delivers replies through its [`ChatQueues`]. Adapters know nothing about
//!   sessions or models.
//! - `split` cuts long replies at the platform's limit; `telegram_html` renders markdown as Telegram HTML.
//!
//! This module holds what both platforms share: the allow-list ([`AllowList`]), deduplication of platform
//! message ids ([`Dedupe`]), the per-chat send queues that keep one chat's replies in order ([`ChatQueues`]),
//! exponential [`Backoff`], the [`supervise`]r that restarts a channel task after a panic, where media is saved
//! ([`media_path`]), bounded typing indicators ([`TYPING_SLOTS`]), and [`redact`], which keeps tokens out of
//! error texts (reqwest errors carry the URL, and Telegram's URLs carry the token).

pub mod discord;
pub mod split;
pub mod telegram;
pub mod telegram_html;
pub mod terminal;

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::resolve_token;
use crate::gateway::{GatewayError, Inlet};

/// What every channel needs from the daemon to start, besides its own config section.
#[derive(Clone)]
pub struct ChannelContext {
    /// The workspace (media and state files live in it).
    pub workspace: PathBuf,
    /// `gateway.media_max_bytes`
    pub media_max_bytes: u64,
    /// Where messages go.
    pub inlet: Inlet,
    /// Cancelled at shutdown.
    pub stop: CancellationToken,
    /// Chats whose typing indicator is refreshed at once (see [`TYPING_SLOTS`]).
    pub typing_slots: usize,
}

/// The channel's token: `token` from the file, else the variable `token_env` names; a missing one is a
/// configuration error naming `channels.<channel>.token`.
pub fn channel_token(
    channel: &'static str,
    token: Option<&String>,
    token_env: Option<&String>,
) -> Result<String, GatewayError> {
    resolve_token(&format!("channels.{channel}"), token, token_env)
        .map_err(|source| GatewayError::Config { channel, source })
}

/// Who may talk to the bot, from `allow_from`: ids or usernames (with or without `@`), `"*"` for anyone.
#[derive(Debug, Default)]
pub struct AllowList {
    anyone: bool,
    entries: HashSet<String>,
    /// Senders already logged as refused, so each is logged once.
    refused: Mutex<HashSet<String>>,
}

/// Refused senders remembered at most: a public bot flooded by strangers must not grow the list without bound.
/// Past this many the list starts over, so a stranger may be logged a second time.
const REFUSED_REMEMBERED: usize = 1_000;

impl AllowList {
    /// Builds the list; warns once when it is empty (nobody gets in).
    pub fn new(channel: &str, allow_from: &[String]) -> Self {
        let entries: HashSet<String> = allow_from
            .iter()
            .map(|e| e.trim().trim_start_matches('@').to_lowercase())
            .filter(|e| !e.is_empty())
            .collect();
        let anyone = entries.contains("*");
        if entries.is_empty() {
            warn!(
                channel,
                "allow_from is empty: nobody can talk to the bot; add user ids or usernames to \
                 channels.{channel}.allow_from (\"*\" lets anyone in)"
            );
        }
        AllowList {
            anyone,
            entries,
            refused: Mutex::new(HashSet::new()),
        }
    }

    /// Whether the sender (`id`, optional `username`) is allowed; a refused sender is logged once.
    pub fn check(&self, channel: &str, id: &str, username: Option<&str>) -> bool {
        let name = username.map(|u| u.trim_start_matches('@').to_lowercase());
        if self.anyone
            || self.entries.contains(id)
            || name.as_ref().is_some_and(|n| self.entries.contains(n))
        {
            return true;
        }
        let first = {
            let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
            if refused.len() >= REFUSED_REMEMBERED && !refused.contains(id) {
                *refused = HashSet::new();
            }
            refused.insert(id.to_owned())
        };
        if first {
            warn!(
                channel,
                sender_id = id,
                username = username.unwrap_or("-"),
                "message from a sender not in allow_from refused (add the id or username to let them in)"
            );
        }
        false
    }
}

/// Remembers the last platform message ids seen, so a message delivered twice is answered once.
///
/// Ids are numbers (Telegram: chat id and message id packed together; Discord: the snowflake) kept inline in
/// the set and the ring, so remembering them allocates nothing per message: a long-lived small allocation
/// per message, spread over the heap, would keep the allocator from returning memory after a burst.
#[derive(Debug)]
pub struct Dedupe {
    inner: Mutex<(HashSet<u128>, VecDeque<u128>)>,
    cap: usize,
}

impl Dedupe {
    /// Remembers up to `cap` ids.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Dedupe {
            inner: Mutex::new((
                HashSet::with_capacity(cap + 1),
                VecDeque::with_capacity(cap + 1),
            )),
            cap,
        }
    }

    /// `true` the first time `id` is seen.
    pub fn first_time(&self, id: u128) -> bool {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, order) = &mut *g;
        if !set.insert(id) {
            return false;
        }
        order.push_back(id);
        if order.len() > self.cap
            && let Some(old) = order.pop_front()
        {
            set.remove(&old);
        }
        true
    }
}

/// Exponential backoff: 1 s, 2 s, 4 s, … up to a cap; `reset` after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `min`, doubles up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            next: min,
            min,
            max,
        }
    }

    /// The delay to wait now; the next one doubles.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    /// Back to the first delay.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Replaces every occurrence of `secret` in `text` (error messages quoting URLs) with `<token>`.
pub fn redact(text: &str, secret: &str) -> String {
    if secret.len() < 4 {
        return text.to_owned();
    }
    text.replace(secret, "<token>")
}

/// `<workspace>/media/<channel>_<unique id>.<ext>`, with the id and extension reduced to safe characters.
pub fn media_path(workspace: &Path, channel: &str, unique_id: &str, ext: &str) -> PathBuf {
    let safe = |s: &str, max: usize| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(max)
            .collect()
    };
    let ext = safe(ext, 8);
    let ext = if ext.is_empty() { "bin".into() } else { ext };
    workspace
        .join("media")
        .join(format!("{channel}_{}.{ext}", safe(unique_id, 80)))
}

/// The extension of a file name or URL path (`photo.JPG` → `jpg`), if any.
pub fn extension_of(name: &str) -> Option<String> {
    let name = name.split(['?', '#']).next().unwrap_or(name);
    let (_, ext) = name.rsplit_once('.')?;
    (!ext.is_empty() && ext.len() <= 8 && !ext.contains('/')).then(|| ext.to_lowercase())
}

/// How a channel delivers one part-less reply to one chat (it splits, formats and retries itself).
pub trait Deliver: Send + Sync + 'static {
    /// Sends `text` (markdown as the model wrote it) to `chat_id`; logs its own failures.
    fn deliver<'a>(
        &'a self,
        chat_id: &'a str,
        text: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

/// Per-chat send queues: the replies of one chat are delivered one at a time in the order they were queued, so
/// they never overtake each other; different chats send in parallel. A chat's worker exits after a minute
/// without work (under the map's lock after a last look at its queue, as the router's lanes do).
pub struct ChatQueues {
    channel: &'static str,
    deliver: Arc<dyn Deliver>,
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    pending: AtomicUsize,
}

const QUEUE_IDLE: Duration = Duration::from_secs(60);

impl ChatQueues {
    /// Queues for `channel`, sending through `deliver`.
    pub fn new(channel: &'static str, deliver: Arc<dyn Deliver>) -> Arc<Self> {
        Arc::new(ChatQueues {
            channel,
            deliver,
            queues: Mutex::new(HashMap::new()),
            pending: AtomicUsize::new(0),
        })
    }

    /// The channel these queues send to.
    pub fn channel(&self) -> &'static str {
        self.channel
    }

    /// Queues `text` for `chat_id`.
    pub fn push(self: &Arc<Self>, chat_id: &str, text: String) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let text = match queues.get(chat_id) {
            Some(tx) => match tx.send(text) {
                Ok(()) => return,
                // The worker retired between our look and the send: start a new one.
                Err(mpsc::error::SendError(text)) => text,
            },
            None => text,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // A fresh channel's receiver is alive, so this send cannot fail.
        let _ = tx.send(text);
        queues.insert(chat_id.to_owned(), tx);
        tokio::spawn(self.clone().worker(chat_id.to_owned(), rx));
    }

    /// Replies queued or being sent now.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Waits until every queued reply has been sent (or given up on).
    pub async fn drained(&self) {
        while self.pending() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn worker(self: Arc<Self>, chat_id: String, mut rx: mpsc::UnboundedReceiver<String>) {
        loop {
            let text = match tokio::time::timeout(QUEUE_IDLE, rx.recv()).await {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(_) => {
                    let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
                    match rx.try_recv() {
                        Ok(t) => t,
                        Err(_) => {
                            queues.remove(&chat_id);
                            crate::shrink::shrink_when_sparse(&mut queues);
                            break;
                        }
                    }
                }
            };
            self.deliver.deliver(&chat_id, &text).await;
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Runs a channel's task and restarts it (after a backoff) if it panics, so a bug in one message's handling
/// never stops a channel for good; returns when the task returns normally or `stop` is cancelled.
pub async fn supervise<F, Fut>(channel: &'static str, stop: CancellationToken, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        let res = tokio::spawn(make()).await;
        match res {
            Err(e) if e.is_panic() && !stop.is_cancelled() => {
                let delay = backoff.next_delay();
                error!(
                    channel,
                    "the {channel} channel crashed (a bug: please report it); restarting it in {}s",
                    delay.as_secs()
                );
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            _ => return,
        }
    }
}

/// Typing indicators refreshed at once per channel, per allowed concurrent turn. A chat's indicator waits for a
/// slot (in arrival order, like the turns), so a burst of thousands of chats, whose turns wait for the
/// concurrency cap anyway, does not become thousands of "typing" requests every few seconds.
pub const TYPING_SLOTS: usize = 2;

/// Tells the gateway, once, that a channel's first connection attempt has finished (connected or not), for
/// its "ready" line.
pub struct FirstAttemptSignal(Mutex<Option<tokio::sync::oneshot::Sender<()>>>);

impl FirstAttemptSignal {
    /// The signal and the receiver the gateway waits on.
    pub fn new() -> (Self, crate::gateway::FirstAttempt) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (FirstAttemptSignal(Mutex::new(Some(tx))), rx)
    }

    /// Marks the attempt made; later calls do nothing.
    pub fn done(&self) {
        let tx = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(tx) = tx {
            let _ = tx.send(());
        }
    }
}

/// Logs the one "connected" line of a channel.
pub fn log_connected(channel: &str, detail: &str) {
    info!(channel, "{channel} connected: {detail}");
}

/// Starts a list item in text rendered from markdown (Telegram HTML, the terminal): indented two spaces per
/// level of nesting, then `N. ` in a numbered list (counting on) or `• `. `lists` holds each open list's next
/// number, `None` for a bulleted one.
fn push_item_marker(out: &mut String, lists: &mut [Option<u64>]) {
    out.push_str(&"  ".repeat(lists.len().saturating_sub(1)));
    match lists.last_mut() {
        Some(Some(n)) => {
            out.push_str(&format!("{n}. "));
            *n += 1;
        }
        _ => out.push_str("• "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_matches_ids_and_usernames() {
        let a = AllowList::new("t", &["42".into(), "@Alice".into()]);
        assert!(a.check("t", "42", None));
        assert!(a.check("t", "7", Some("alice")));
        assert!(!a.check("t", "7", Some("bob")));
        assert!(AllowList::new("t", &["*".into()]).check("t", "1", None));
        assert!(!AllowList::new("t", &[]).check("t", "1", None));
    }

    #[test]
    fn a_flood_of_strangers_is_refused_without_growing_the_list_past_its_bound() {
        let a = AllowList::new("t", &["42".into()]);
        for id in 0..5 * REFUSED_REMEMBERED {
            assert!(!a.check("t", &format!("stranger{id}"), None));
            let remembered = a
                .refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
            assert!(remembered <= REFUSED_REMEMBERED, "{remembered}");
        }
        // A sender already remembered stays remembered (logged once) even when the list is full.
        let before = a
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert!(!a.check(
            "t",
            &format!("stranger{}", 5 * REFUSED_REMEMBERED - 1),
            None
        ));
        assert_eq!(
            a.refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            before
        );
        assert!(a.check("t", "42", None));
    }

    #[test]
    fn dedupe_forgets_the_oldest() {
        let d = Dedupe::new(2);
        assert!(d.first_time(1));
        assert!(!d.first_time(1));
        assert!(d.first_time(2));
        assert!(d.first_time(3));
        assert!(d.first_time(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_channel_task_is_restarted() {
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        supervise("test", CancellationToken::new(), move || {
            let n = r.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    panic!("boom {n}");
                }
            }
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn redact_and_media_paths() {
        assert_eq!(
            redact("url /bot123:ABC/GetMe", "123:ABC"),
            "url /bot<token>/GetMe"
        );
        let p = media_path(Path::new("/w"), "telegram", "../x", "j/pg");
        assert_eq!(p, Path::new("/w/media/telegram_x.jpg"));
        assert_eq!(extension_of("a/b/photo.JPG?x=1").as_deref(), Some("jpg"));
        assert_eq!(extension_of("noext"), None);
    }
}
