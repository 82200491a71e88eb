//! Telegram through teloxide's Bot API client, with our own long-polling loop.
//!
//! teloxide's `Dispatcher`/`repl` are not used: they panic when the first `getMe` fails and a panicking handler
//! stops them, while a daemon must log, back off and keep going. So this module calls the API itself:
//!
//! - **Start**: `getMe` until it succeeds (backoff 1 s → 60 s, the reason logged each time, the token never);
//!   then `setMyCommands` once per bot, remembered in `<workspace>/state/telegram_commands`.
//! - **Polling**: `getUpdates` with the persisted offset (`<workspace>/state/telegram_offset`, written after
//!   each batch is handed to the router, so a restart does not answer old updates again) and a server-side
//!   timeout below teloxide's 17 s HTTP timeout. A 429 waits `retry_after`; a 409 (another program polls the same
//!   token) is reported as such; other errors back off. A watchdog rebuilds the HTTP client and restarts
//!   polling when no `getUpdates` call has completed for two minutes (sending does not count).
//! - **Messages**: private chats are `telegram:<chat_id>`; in groups the bot answers when mentioned or replied
//!   to (`group_policy = "mention"`) or always (`"all"`), one session per group. Senders are checked against
//!   `allow_from`; message ids are deduplicated; photos, documents and voice notes are downloaded to
//!   `<workspace>/media/` and referenced in the text. Updates are handled one by one in order, so a message
//!   with a slow download is never overtaken by the next.
//! - **Replies**: split at 4096 UTF-16 units, rendered to Telegram HTML; a part Telegram cannot parse is resent
//!   as plain text; 429s wait and retry. A typing indicator runs while the turn works.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use teloxide::net::Download;
use teloxide::prelude::*;
use teloxide::types::{
    AllowedUpdate, BotCommand, ChatAction, FileMeta, MessageEntityKind, ParseMode, UpdateKind,
};
use teloxide::{ApiError, RequestError};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::split::{split_message, utf16_len};
use super::telegram_html::markdown_to_html;
use super::{
    AllowList, Backoff, ChannelContext, ChatQueues, Dedupe, Deliver, FirstAttemptSignal,
    channel_token, extension_of, log_connected, media_path, redact, supervise,
};
use crate::bus::Inbound;
use crate::config::{GroupPolicy, TelegramConfig};
use crate::gateway::{GatewayError, Inlet, StartedChannel};

/// Telegram's limit on one message, in UTF-16 code units.
pub const MAX_MESSAGE_UTF16: usize = 4096;
/// Bumped when the command list changes, so it is registered again.
const COMMANDS_VERSION: &str = "v1";

/// The bot as `getMe` described it.
#[derive(Debug, Clone)]
struct Me {
    id: u64,
    /// Lower case, without `@`.
    username: String,
}

struct Shared {
    bot: Bot,
    token: String,
    config: TelegramConfig,
    workspace: PathBuf,
    state_dir: PathBuf,
    media_max_bytes: u64,
    allow: AllowList,
    dedupe: Dedupe,
    inlet: Inlet,
    typing_slots: Arc<Semaphore>,
    me: OnceLock<Me>,
    first_attempt: FirstAttemptSignal,
}

/// Validates the settings and starts the channel's task; a bad token or an unreachable server is not an error
/// here (the task logs it and retries), a missing token or a malformed URL is.
pub fn start(cfg: TelegramConfig, ctx: ChannelContext) -> Result<StartedChannel, GatewayError> {
    let token = channel_token("telegram", cfg.token.as_ref(), cfg.token_env.as_ref())?;
    let bot = make_bot(&token, &cfg.api_url)?;
    let (first_attempt, rx) = FirstAttemptSignal::new();
    let shared = Arc::new(Shared {
        bot,
        allow: AllowList::new("telegram", &cfg.allow_from),
        token,
        state_dir: ctx.workspace.join("state"),
        workspace: ctx.workspace,
        media_max_bytes: ctx.media_max_bytes,
        config: cfg,
        dedupe: Dedupe::new(4096),
        inlet: ctx.inlet,
        typing_slots: Arc::new(Semaphore::new(ctx.typing_slots.max(1))),
        me: OnceLock::new(),
        first_attempt,
    });
    let queues = ChatQueues::new("telegram", shared.clone());
    let stop = ctx.stop;
    let task = tokio::spawn(supervise("telegram", stop.clone(), move || {
        run(shared.clone(), stop.clone())
    }));
    Ok(StartedChannel {
        queues,
        task,
        first_attempt: rx,
    })
}

fn make_bot(token: &str, api_url: &str) -> Result<Bot, GatewayError> {
    let bad = |message: String| GatewayError::Channel {
        channel: "telegram",
        message,
    };
    let url = reqwest::Url::parse(api_url).map_err(|e| {
        bad(format!(
            "channels.telegram.api_url {api_url:?} is not a URL: {e}"
        ))
    })?;
    // teloxide's settings: a 17 s timeout that long polls must stay under.
    let client = teloxide::net::default_reqwest_settings()
        .build()
        .map_err(|e| bad(format!("cannot build the HTTP client: {e}")))?;
    Ok(Bot::with_client(token, client).set_api_url(url))
}

async fn run(sh: Arc<Shared>, stop: CancellationToken) {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let me = loop {
        let res = tokio::select! {
            _ = stop.cancelled() => return,
            r = sh.bot.get_me().into_future() => r,
        };
        match res {
            Ok(me) => break me,
            Err(e) => {
                let delay = backoff.next_delay();
                error!(
                    channel = "telegram",
                    "telegram cannot start: {}; retrying in {}s",
                    sh.describe(&e),
                    delay.as_secs()
                );
                sh.inlet.set_connected("telegram", false);
                sh.first_attempt_done();
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    };
    let info = Me {
        id: me.user.id.0,
        username: me.user.username.clone().unwrap_or_default().to_lowercase(),
    };
    log_connected(
        "telegram",
        &format!("@{} (id {}), long polling", info.username, info.id),
    );
    let _ = sh.me.set(info.clone());
    sh.inlet.set_connected("telegram", true);
    sh.first_attempt_done();
    sh.register_commands(&info).await;
    sh.poll(&stop).await;
    debug!(channel = "telegram", "polling stopped");
}

impl Shared {
    fn first_attempt_done(&self) {
        self.first_attempt.done();
    }

    /// An error's text with the token removed (reqwest errors quote the URL, which holds it).
    fn describe(&self, e: &RequestError) -> String {
        let text = match e {
            RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => {
                "409 conflict: another program is polling updates for this bot token (a second nanogate or \
                 nanobot?); only one may run"
                    .to_owned()
            }
            RequestError::Api(ApiError::InvalidToken) => {
                format!("{e} (check channels.telegram.token)")
            }
            e => e.to_string(),
        };
        redact(&text, &self.token)
    }

    async fn register_commands(&self, me: &Me) {
        let marker = self.state_dir.join("telegram_commands");
        let want = format!("{COMMANDS_VERSION} {}\n", me.id);
        if std::fs::read_to_string(&marker).is_ok_and(|m| m == want) {
            return;
        }
        let commands = [
            BotCommand::new("new", "Start a new conversation"),
            BotCommand::new("stop", "Stop the running reply"),
            BotCommand::new("help", "Show the commands"),
            BotCommand::new("status", "Show the session's status"),
        ];
        match self.bot.set_my_commands(commands).await {
            Ok(_) => {
                if let Err(e) = write_atomic(&marker, want.as_bytes()) {
                    warn!(
                        channel = "telegram",
                        "cannot remember that commands are registered: {e}"
                    );
                }
                info!(channel = "telegram", "bot commands registered");
            }
            Err(e) => warn!(
                channel = "telegram",
                "setMyCommands failed (will retry at the next start): {}",
                self.describe(&e)
            ),
        }
    }

    async fn poll(self: &Arc<Self>, stop: &CancellationToken) {
        let offset_file = self.state_dir.join("telegram_offset");
        let mut offset: i32 = std::fs::read_to_string(&offset_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let mut bot = self.bot.clone();
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let timeout = self.config.poll_timeout_secs.min(15);
        // No `getUpdates` completed for this long: the watchdog restarts polling.
        let watchdog = Duration::from_secs(self.config.watchdog_secs.max(u64::from(timeout) + 5));
        loop {
            let req = bot
                .get_updates()
                .offset(offset)
                .timeout(timeout)
                .allowed_updates([AllowedUpdate::Message]);
            let res = tokio::select! {
                _ = stop.cancelled() => return,
                r = tokio::time::timeout(watchdog, req.into_future()) => r,
            };
            let delay = match res {
                Err(_) => {
                    self.inlet.set_connected("telegram", false);
                    warn!(
                        channel = "telegram",
                        "watchdog: no getUpdates call completed for {}s; restarting polling",
                        watchdog.as_secs()
                    );
                    match make_bot(&self.token, &self.config.api_url) {
                        Ok(b) => bot = b,
                        Err(e) => warn!(channel = "telegram", "{e}"),
                    }
                    continue;
                }
                Ok(Ok(updates)) => {
                    backoff.reset();
                    self.inlet.set_connected("telegram", true);
                    if updates.is_empty() {
                        continue;
                    }
                    for update in updates {
                        let next = i32::try_from(update.id.0).unwrap_or(i32::MAX) + 1;
                        if let UpdateKind::Message(msg) = update.kind
                            && !self.on_message(msg).await
                        {
                            // Shutting down: the offset stays before this update, so it is answered next time.
                            break;
                        }
                        offset = offset.max(next);
                    }
                    if let Err(e) = write_atomic(&offset_file, format!("{offset}\n").as_bytes()) {
                        warn!(channel = "telegram", "cannot save the update offset: {e}");
                    }
                    continue;
                }
                Ok(Err(RequestError::RetryAfter(s))) => {
                    warn!(
                        channel = "telegram",
                        retry_after = s.seconds(),
                        "getUpdates rate limited"
                    );
                    s.duration()
                }
                Ok(Err(e)) => {
                    self.inlet.set_connected("telegram", false);
                    let delay = backoff.next_delay();
                    error!(
                        channel = "telegram",
                        "getUpdates failed: {}; retrying in {}s",
                        self.describe(&e),
                        delay.as_secs()
                    );
                    delay
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Handles one message; `false` only when the gateway is shutting down and did not take it (so the caller
    /// leaves its update for the next start).
    async fn on_message(self: &Arc<Self>, msg: Message) -> bool {
        let chat_id = msg.chat.id.0;
        let key = format!("telegram:{chat_id}");
        if !self
            .dedupe
            .first_time(((chat_id as u128) << 64) | u128::from(msg.id.0 as u32))
        {
            debug!(session = %key, message_id = msg.id.0, "duplicate message ignored");
            return true;
        }
        let Some(from) = msg.from.as_ref() else {
            return true;
        };
        let Some(me) = self.me.get() else {
            return true;
        };
        if from.id.0 == me.id {
            return true;
        }
        let mut text = msg.text().or(msg.caption()).unwrap_or_default().to_owned();
        if !msg.chat.is_private() {
            let mention = format!("@{}", me.username);
            let mentioned = !me.username.is_empty()
                && (text.to_lowercase().contains(&mention)
                    || msg
                        .entities()
                        .or(msg.caption_entities())
                        .unwrap_or_default()
                        .iter()
                        .any(|e| matches!(&e.kind, MessageEntityKind::TextMention { user } if user.id.0 == me.id)));
            let replied_to_me = msg
                .reply_to_message()
                .and_then(|r| r.from.as_ref())
                .is_some_and(|u| u.id.0 == me.id);
            if self.config.group_policy == GroupPolicy::Mention && !mentioned && !replied_to_me {
                debug!(session = %key, "group message without a mention ignored");
                return true;
            }
            text = strip_mention(&text, &mention);
        }
        let sender_id = from.id.0.to_string();
        if !self
            .allow
            .check("telegram", &sender_id, from.username.as_deref())
        {
            return true;
        }
        let mut media = Vec::new();
        let mut files: Vec<(&FileMeta, String, &str)> = Vec::new();
        if let Some(p) = msg.photo().and_then(|sizes| sizes.last()) {
            files.push((&p.file, "jpg".into(), "image"));
        }
        if let Some(d) = msg.document() {
            let ext = d
                .file_name
                .as_deref()
                .and_then(extension_of)
                .unwrap_or_else(|| "bin".into());
            let kind = if d.mime_type.as_ref().is_some_and(|m| m.type_() == "image") {
                "image"
            } else {
                "file"
            };
            files.push((&d.file, ext, kind));
        }
        if let Some(v) = msg.voice() {
            files.push((&v.file, "ogg".into(), "file"));
        }
        for (meta, ext, kind) in files {
            match self.download(meta, &ext).await {
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
            return true;
        }
        info!(session = %key, sender = %sender_id, chars = text.len(), "message received");
        let inbound = Inbound {
            channel: "telegram".into(),
            chat_id: chat_id.to_string(),
            sender: sender_id,
            text,
            media,
            session_key: None,
        };
        let typing = CancellationToken::new();
        tokio::spawn(typing_loop(
            self.bot.clone(),
            chat_id,
            typing.clone(),
            self.typing_slots.clone(),
        ));
        if !self.inlet.submit(inbound, Some(typing.drop_guard())) {
            debug!(session = %key, "shutting down: message left for the next start");
            return false;
        }
        true
    }

    async fn download(&self, meta: &FileMeta, ext: &str) -> Result<PathBuf, String> {
        let too_big = |size: u64| {
            format!(
                "{size} bytes is over gateway.media_max_bytes ({})",
                self.media_max_bytes
            )
        };
        if u64::from(meta.size) > self.media_max_bytes {
            return Err(too_big(meta.size.into()));
        }
        let file = self
            .bot
            .get_file(meta.id.clone())
            .await
            .map_err(|e| self.describe(&e))?;
        if u64::from(file.meta.size) > self.media_max_bytes {
            return Err(too_big(file.meta.size.into()));
        }
        let ext = extension_of(&file.path).unwrap_or_else(|| ext.to_owned());
        let path = media_path(&self.workspace, "telegram", &file.meta.unique_id.0, &ext);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("part");
        let mut out = tokio::fs::File::create(&tmp)
            .await
            .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        let res = self.bot.download_file(&file.path, &mut out).await;
        drop(out);
        if let Err(e) = res {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(redact(&e.to_string(), &self.token));
        }
        let len = tokio::fs::metadata(&tmp)
            .await
            .map(|m| m.len())
            .unwrap_or(0);
        if len > self.media_max_bytes {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(too_big(len));
        }
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| format!("cannot save {}: {e}", path.display()))?;
        Ok(path)
    }

    /// Sends one part, retrying 429s (after `retry_after`) and network errors (with backoff) a few times.
    async fn send_part(&self, chat_id: i64, text: &str, html: bool) -> Result<(), RequestError> {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(8));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self.bot.send_message(ChatId(chat_id), text);
            if html {
                req = req.parse_mode(ParseMode::Html);
            }
            let err = match req.await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            let delay = match &err {
                RequestError::RetryAfter(s) => {
                    info!(session = %format!("telegram:{chat_id}"), retry_after = s.seconds(), "rate limited by Telegram; waiting");
                    s.duration()
                }
                RequestError::Network(_) | RequestError::Io(_) => backoff.next_delay(),
                _ => return Err(err),
            };
            if attempt >= 6 {
                return Err(err);
            }
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_reply(&self, chat_id: &str, text: &str) {
        let key = format!("telegram:{chat_id}");
        let Ok(id) = chat_id.parse::<i64>() else {
            warn!(session = %key, "not a Telegram chat id; reply dropped");
            return;
        };
        for part in html_parts(text) {
            let res = match &part {
                Part::Html { html, plain } => match self.send_part(id, html, true).await {
                    Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                        warn!(session = %key, "Telegram rejected the HTML ({why}); sending as plain text");
                        self.send_part(id, plain, false).await
                    }
                    other => other,
                },
                Part::Plain(plain) => self.send_part(id, plain, false).await,
            };
            if let Err(e) = res {
                error!(session = %key, "reply part not delivered: {}", self.describe(&e));
            }
        }
    }
}

/// One message to send: HTML with its markdown as the plain-text fallback, or plain text.
enum Part {
    Html { html: String, plain: String },
    Plain(String),
}

/// Splits markdown into parts whose HTML fits Telegram's limit: split the markdown, render each part, and split
/// again smaller where the markup made a part too long; a part that still does not fit goes as plain text.
fn html_parts(text: &str) -> Vec<Part> {
    let mut out = Vec::new();
    for md in split_message(text, MAX_MESSAGE_UTF16, utf16_len) {
        let html = markdown_to_html(&md);
        let len = utf16_len(&html);
        if len <= MAX_MESSAGE_UTF16 {
            out.push(Part::Html { html, plain: md });
            continue;
        }
        let smaller = MAX_MESSAGE_UTF16 * MAX_MESSAGE_UTF16 / len * 9 / 10;
        for sub in split_message(&md, smaller, utf16_len) {
            let html = markdown_to_html(&sub);
            if utf16_len(&html) <= MAX_MESSAGE_UTF16 {
                out.push(Part::Html { html, plain: sub });
            } else {
                out.push(Part::Plain(sub));
            }
        }
    }
    out
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

/// Sends "typing…" every 4 s (Telegram shows it for 5) until `stop` is cancelled, once it has one of the
/// channel's typing slots.
async fn typing_loop(bot: Bot, chat_id: i64, stop: CancellationToken, slots: Arc<Semaphore>) {
    let _slot = tokio::select! {
        _ = stop.cancelled() => return,
        slot = slots.acquire_owned() => slot,
    };
    loop {
        // Failures are harmless: the indicator is cosmetic.
        let _ = tokio::select! {
            _ = stop.cancelled() => return,
            r = bot.send_chat_action(ChatId(chat_id), ChatAction::Typing).into_future() => r.map(|_| ()),
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(4)) => {}
        }
    }
}

/// Removes `@botname` (any case) from a group message, also from `/cmd@botname`.
fn strip_mention(text: &str, mention: &str) -> String {
    let lower = text.to_lowercase();
    if lower.len() != text.len() {
        // Lower-casing changed byte offsets (rare scripts): leave the text as it is.
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (i, _) in lower.match_indices(mention) {
        out.push_str(&text[rest..i]);
        rest = i + mention.len();
    }
    out.push_str(&text[rest..]);
    out.trim().to_owned()
}

/// Writes a small state file (offset, command marker) atomically and durably, creating its directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::atomic_write::write_atomic(path, &[bytes], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_stripped() {
        assert_eq!(strip_mention("@NanoBot hello", "@nanobot"), "hello");
        assert_eq!(strip_mention("/new@nanobot", "@nanobot"), "/new");
    }

    #[test]
    fn long_code_reply_parts_fit_as_html() {
        let mut md = String::from("```rust\n");
        for i in 0..600 {
            md.push_str(&format!("if a{i} < b && c > d {{ x(); }}\n"));
        }
        md.push_str("```\n");
        let parts = html_parts(&md);
        assert!(parts.len() > 1);
        for p in parts {
            match p {
                Part::Html { html, .. } => {
                    assert!(utf16_len(&html) <= MAX_MESSAGE_UTF16);
                    assert!(html.starts_with("<pre><code class=\"language-rust\">"));
                    assert!(html.ends_with("</code></pre>"));
                }
                Part::Plain(_) => panic!("expected html"),
            }
        }
    }
}
