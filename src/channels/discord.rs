//! Discord through serenity's gateway client (one shard) and REST client.
//!
//! - **Connection**: serenity asks the REST API for the gateway URL, identifies with the guild-messages,
//!   direct-messages and message-content intents, heartbeats, and reconnects/resumes by itself after a close.
//!   When `Client::start` returns (a fatal close such as a bad token, or every reconnect failed) the reason is
//!   logged and the client is rebuilt after a backoff, so the daemon keeps running.
//! - **api_url**: with the default (`https://discord.com`) serenity's own ratelimiter reads Discord's rate-limit
//!   headers and waits before each request. Any other URL is used as serenity's HTTP *proxy* (e.g.
//!   twilight-http-proxy, or a test fake), which serenity honours only with its ratelimiter disabled: the proxy
//!   owns rate limiting then, and a 429 that still comes back is retried here with backoff.
//! - **Messages**: DMs are always answered; in servers only when the bot is mentioned
//!   (`guild_policy = "mention"`) or always (`"all"`). Key `discord:<channel_id>`. Senders are checked against
//!   `allow_from` (id or username), message ids are deduplicated, attachments are downloaded to
//!   `<workspace>/media/` (up to `gateway.media_max_bytes`).
//! - **Replies**: split at 2000 characters on line/word boundaries with code blocks kept balanced; a typing
//!   indicator runs while the turn works.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serenity::all::{
    ChannelId, ClientBuilder, Context, EventHandler, GatewayIntents, Http, HttpBuilder, Message,
    Ready, ResumedEvent,
};
use serenity::async_trait;
use serenity::http::HttpError;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::split::{char_len, split_message};
use super::{
    AllowList, Backoff, ChannelContext, ChatQueues, Dedupe, Deliver, FirstAttemptSignal,
    channel_token, extension_of, log_connected, media_path, redact, supervise,
};
use crate::bus::Inbound;
use crate::config::{DISCORD_API_URL, DiscordConfig, GroupPolicy};
use crate::gateway::{GatewayError, Inlet, StartedChannel};

/// Discord's limit on one message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 2000;

struct Shared {
    token: String,
    config: DiscordConfig,
    /// REST client for replies and typing (the gateway client has its own).
    http: Arc<Http>,
    /// For attachment downloads.
    download: reqwest::Client,
    workspace: PathBuf,
    media_max_bytes: u64,
    allow: AllowList,
    dedupe: Dedupe,
    inlet: Inlet,
    typing_slots: Arc<Semaphore>,
    /// The bot's user id, from READY.
    me: OnceLock<u64>,
    first_attempt: FirstAttemptSignal,
}

/// Validates the settings and starts the channel's task; connection failures are logged and retried there.
pub fn start(cfg: DiscordConfig, ctx: ChannelContext) -> Result<StartedChannel, GatewayError> {
    let token = channel_token("discord", cfg.token.as_ref(), cfg.token_env.as_ref())?;
    if let Err(e) = reqwest::Url::parse(&cfg.api_url) {
        return Err(GatewayError::Channel {
            channel: "discord",
            message: format!(
                "channels.discord.api_url {:?} is not a URL: {e}",
                cfg.api_url
            ),
        });
    }
    let download = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| GatewayError::Channel {
            channel: "discord",
            message: format!("cannot build the HTTP client: {e}"),
        })?;
    let (first_attempt, rx) = FirstAttemptSignal::new();
    let shared = Arc::new(Shared {
        http: Arc::new(make_http(&token, &cfg.api_url)),
        allow: AllowList::new("discord", &cfg.allow_from),
        token,
        config: cfg,
        download,
        workspace: ctx.workspace,
        media_max_bytes: ctx.media_max_bytes,
        dedupe: Dedupe::new(4096),
        inlet: ctx.inlet,
        typing_slots: Arc::new(Semaphore::new(ctx.typing_slots.max(1))),
        me: OnceLock::new(),
        first_attempt,
    });
    let queues = ChatQueues::new("discord", shared.clone());
    let stop = ctx.stop;
    let task = tokio::spawn(supervise("discord", stop.clone(), move || {
        run(shared.clone(), stop.clone())
    }));
    Ok(StartedChannel {
        queues,
        task,
        first_attempt: rx,
    })
}

/// serenity's REST client: direct with its ratelimiter, or through `api_url` as a proxy without it.
fn make_http(token: &str, api_url: &str) -> Http {
    let builder = HttpBuilder::new(token);
    if api_url.trim_end_matches('/') == DISCORD_API_URL {
        builder.build()
    } else {
        builder
            .proxy(api_url.trim_end_matches('/'))
            .ratelimiter_disabled(true)
            .build()
    }
}

async fn run(sh: Arc<Shared>, stop: CancellationToken) {
    let intents = GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT;
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        let handler = Handler { sh: sh.clone() };
        let built = ClientBuilder::new_with_http(make_http(&sh.token, &sh.config.api_url), intents)
            .event_handler(handler)
            .await;
        let reason = match built {
            Ok(mut client) => {
                let shards = client.shard_manager.clone();
                tokio::select! {
                    _ = stop.cancelled() => {
                        shards.shutdown_all().await;
                        return;
                    }
                    r = client.start() => match r {
                        Ok(()) => "the gateway connection ended".to_owned(),
                        Err(e) => e.to_string(),
                    },
                }
            }
            Err(e) => e.to_string(),
        };
        sh.inlet.set_connected("discord", false);
        sh.first_attempt_done();
        let delay = backoff.next_delay();
        error!(
            channel = "discord",
            "discord disconnected: {}; reconnecting in {}s",
            redact(&reason, &sh.token),
            delay.as_secs()
        );
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

struct Handler {
    sh: Arc<Shared>,
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        let _ = self.sh.me.set(ready.user.id.get());
        log_connected(
            "discord",
            &format!(
                "{} (id {}), {} server(s)",
                ready.user.name,
                ready.user.id,
                ready.guilds.len()
            ),
        );
        self.sh.inlet.set_connected("discord", true);
        self.sh.first_attempt_done();
    }

    async fn resume(&self, _ctx: Context, _event: ResumedEvent) {
        self.sh.inlet.set_connected("discord", true);
        info!(channel = "discord", "discord gateway session resumed");
    }

    async fn message(&self, _ctx: Context, msg: Message) {
        self.sh.on_message(msg).await;
    }
}

impl Shared {
    fn first_attempt_done(&self) {
        self.first_attempt.done();
    }

    async fn on_message(&self, msg: Message) {
        if msg.author.bot {
            return;
        }
        let Some(&me) = self.me.get() else { return };
        let key = format!("discord:{}", msg.channel_id);
        if !self.dedupe.first_time(u128::from(msg.id.get())) {
            debug!(session = %key, "duplicate message ignored");
            return;
        }
        let mut text = msg.content.clone();
        if msg.guild_id.is_some() {
            let mentioned = msg.mentions.iter().any(|u| u.id.get() == me)
                || text.contains(&format!("<@{me}>"))
                || text.contains(&format!("<@!{me}>"));
            if self.config.guild_policy == GroupPolicy::Mention && !mentioned {
                debug!(session = %key, "server message without a mention ignored");
                return;
            }
        }
        text = text
            .replace(&format!("<@{me}>"), "")
            .replace(&format!("<@!{me}>"), "")
            .trim()
            .to_owned();
        let sender = msg.author.id.to_string();
        if !self.allow.check("discord", &sender, Some(&msg.author.name)) {
            return;
        }
        let mut media = Vec::new();
        for a in &msg.attachments {
            let kind = if a
                .content_type
                .as_deref()
                .is_some_and(|t| t.starts_with("image/"))
            {
                "image"
            } else {
                "file"
            };
            let ext = extension_of(&a.filename).unwrap_or_else(|| "bin".into());
            match self
                .download(&a.id.to_string(), &a.url, &ext, a.size.into())
                .await
            {
                // The agent adds `[image: <path>]` / `[file: <path>]` for each entry of `media`.
                Ok(path) => media.push(path),
                Err(why) => {
                    warn!(session = %key, "attachment not downloaded: {why}");
                    text.push_str(&format!("\n[{kind}: not downloaded: {why}]"));
                }
            }
        }
        let text = text.trim().to_owned();
        if text.is_empty() {
            return;
        }
        info!(session = %key, sender = %sender, chars = text.len(), "message received");
        let inbound = Inbound {
            channel: "discord".into(),
            chat_id: msg.channel_id.to_string(),
            sender,
            text,
            media,
            session_key: None,
        };
        let typing = CancellationToken::new();
        tokio::spawn(typing_loop(
            self.http.clone(),
            msg.channel_id,
            typing.clone(),
            self.typing_slots.clone(),
        ));
        if !self.inlet.submit(inbound, Some(typing.drop_guard())) {
            debug!(session = %key, "shutting down: message not taken");
        }
    }

    async fn download(&self, id: &str, url: &str, ext: &str, size: u64) -> Result<PathBuf, String> {
        let too_big = |n: u64| {
            format!(
                "{n} bytes is over gateway.media_max_bytes ({})",
                self.media_max_bytes
            )
        };
        if size > self.media_max_bytes {
            return Err(too_big(size));
        }
        let mut resp = self
            .download
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| e.without_url().to_string())?;
        let path = media_path(&self.workspace, "discord", id, ext);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| e.without_url().to_string())?
        {
            body.extend_from_slice(&chunk);
            if body.len() as u64 > self.media_max_bytes {
                return Err(too_big(body.len() as u64));
            }
        }
        tokio::fs::write(&path, &body)
            .await
            .map_err(|e| format!("cannot save {}: {e}", path.display()))?;
        Ok(path)
    }

    async fn send_reply(&self, chat_id: &str, text: &str) {
        let key = format!("discord:{chat_id}");
        let Some(channel) = chat_id
            .parse::<u64>()
            .ok()
            .filter(|&id| id != 0)
            .map(ChannelId::new)
        else {
            warn!(session = %key, "not a Discord channel id; reply dropped");
            return;
        };
        for part in split_message(text, MAX_MESSAGE_CHARS, char_len) {
            let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(16));
            for attempt in 1.. {
                let err = match channel.say(&*self.http, &part).await {
                    Ok(_) => break,
                    Err(e) => e,
                };
                let status = match &err {
                    serenity::Error::Http(HttpError::UnsuccessfulRequest(r)) => {
                        Some(r.status_code.as_u16())
                    }
                    _ => None,
                };
                let retry = matches!(status, Some(429) | Some(500..=599))
                    || matches!(err, serenity::Error::Http(HttpError::Request(_)));
                if !retry || attempt >= 6 {
                    error!(session = %key, "reply part not delivered: {}", redact(&err.to_string(), &self.token));
                    break;
                }
                let delay = backoff.next_delay();
                warn!(session = %key, status = status.unwrap_or(0), "sending failed; retrying in {}s", delay.as_secs());
                tokio::time::sleep(delay).await;
            }
        }
    }
}

impl Deliver for Shared {
    fn deliver<'a>(
        &'a self,
        chat_id: &'a str,
        text: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(self.send_reply(chat_id, text))
    }
}

/// Triggers "typing…" every 8 s (Discord shows it for 10) until `stop` is cancelled, once it has one of the
/// channel's typing slots.
async fn typing_loop(
    http: Arc<Http>,
    channel: ChannelId,
    stop: CancellationToken,
    slots: Arc<Semaphore>,
) {
    let _slot = tokio::select! {
        _ = stop.cancelled() => return,
        slot = slots.acquire_owned() => slot,
    };
    loop {
        let _ = tokio::select! {
            _ = stop.cancelled() => return,
            r = channel.broadcast_typing(&*http) => r,
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(8)) => {}
        }
    }
}
