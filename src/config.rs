//! `config.toml`: every setting with its default, environment overrides, and errors that name the bad key.
//!
//! Any key can be overridden from the environment as `NANOGATE_<SECTION>__<KEY>` (or `NANOGATE_<KEY>` for a
//! top-level key, `NANOGATE_<SECTION>__<SUB>__<KEY>` for a nested one): `NANOGATE_SESSION__DURABILITY=os`. The value is read as a TOML value when it is one
//! (`30`, `true`, `"text"`) and as a plain string otherwise. Unknown keys, in the file or the environment, are
//! errors that name the key, so a typo never silently falls back to a default.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::session::{Durability, StoreOptions};

/// Prefix of environment overrides.
const ENV_PREFIX: &str = "NANOGATE_";

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The workspace directory (sessions, memory, templates); default `~/.nanogate/workspace`.
    pub workspace: Option<PathBuf>,
    /// `[session]`: how sessions are cached and written.
    pub session: SessionConfig,
    /// `[provider]`: the OpenAI-compatible model endpoint.
    pub provider: ProviderConfig,
    /// `[agent]`: the agent loop.
    pub agent: AgentConfig,
    /// `[tools]`: what the model's tools may do.
    pub tools: ToolsConfig,
    /// `[memory]`: consolidation into MEMORY.md, HISTORY.md and the structured summary.
    pub memory: MemoryConfig,
    /// `[admin]`: the admin HTTP API.
    pub admin: AdminConfig,
    /// `[gateway]`: the daemon.
    pub gateway: GatewayConfig,
    /// `[channels.*]`: Telegram and Discord.
    pub channels: ChannelsConfig,
    /// `[cron]`: scheduled jobs.
    pub cron: CronConfig,
    /// `[heartbeat]`: the periodic look at `HEARTBEAT.md`.
    pub heartbeat: HeartbeatConfig,
}

/// The default API base: OpenAI's.
pub const DEFAULT_API_BASE: &str = "https://api.openai.com/v1";

/// `[provider]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    /// Base URL of an OpenAI-compatible API (OpenAI, OpenRouter, vLLM, llama.cpp, Ollama, …), up to `/v1`.
    pub api_base: String,
    /// The API key. Prefer `api_key_env`, so the key is not in a file.
    pub api_key: Option<String>,
    /// Name of an environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Model name as the API knows it.
    pub model: String,
    /// Upper bound on tokens in one answer.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
    /// Seconds to wait for one HTTP response before giving up on that attempt (0: no limit).
    pub request_timeout_secs: u64,
    /// Retries after a 429, a 5xx or a connection error (with backoff and jitter).
    pub max_retries: u32,
    /// The model accepts images (gpt-4o, Claude, Gemini, llava, …): photos of the current message are sent as
    /// image parts, not only referenced by path.
    pub vision: bool,
    /// Extra HTTP headers sent with every request (e.g. OpenRouter's `HTTP-Referer`).
    pub extra_headers: std::collections::BTreeMap<String, String>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            api_base: DEFAULT_API_BASE.into(),
            api_key: None,
            api_key_env: None,
            model: "gpt-4o-mini".into(),
            max_tokens: 4096,
            temperature: 0.7,
            request_timeout_secs: 120,
            max_retries: 3,
            vision: false,
            extra_headers: Default::default(),
        }
    }
}

impl ProviderConfig {
    /// The API key: `api_key`, else the variable named by `api_key_env` (an error when it is named but unset).
    pub fn resolve_api_key(&self) -> Result<Option<String>, ConfigError> {
        secret(
            "provider.api_key_env",
            self.api_key.as_ref(),
            self.api_key_env.as_ref(),
        )
    }
}

/// `[agent]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// How many recent unconsolidated messages the model sees (and when consolidation starts).
    pub memory_window: usize,
    /// Model → tools → model rounds in one turn before the agent stops and says so.
    pub max_tool_iterations: usize,
    /// Turns (model calls) running at once across all sessions.
    pub max_concurrent_turns: usize,
    /// Seconds a session's lane waits for another message before it exits.
    pub lane_idle_secs: u64,
    /// The model's context window in tokens; a request is kept below `context_window - reserve_tokens`.
    pub context_window: usize,
    /// Tokens left free for the model's answer.
    pub reserve_tokens: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            memory_window: 100,
            max_tool_iterations: 40,
            max_concurrent_turns: 4,
            lane_idle_secs: 60,
            context_window: 128_000,
            reserve_tokens: 16_384,
        }
    }
}

/// `[tools]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// File tools and `exec` stay inside the workspace (symlinks resolved).
    pub restrict_to_workspace: bool,
    /// Tool results longer than this many characters are cut (with a marker) before the model sees them.
    pub max_result_chars: usize,
    /// `[tools.exec]`
    pub exec: ExecConfig,
    /// `[tools.web]`
    pub web: WebConfig,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            restrict_to_workspace: true,
            max_result_chars: 16_000,
            exec: ExecConfig::default(),
            web: WebConfig::default(),
        }
    }
}

/// `[tools.exec]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// Seconds before the command's whole process group is killed.
    pub timeout_secs: u64,
    /// Characters of output kept (stdout and stderr together).
    pub max_output_chars: usize,
    /// Extra regular-expression-free substrings that refuse a command, on top of the built-in deny list.
    pub deny: Vec<String>,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            timeout_secs: 60,
            max_output_chars: 10_000,
            deny: Vec::new(),
        }
    }
}

/// `[tools.web]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// Allow fetching private, loopback and link-local addresses.
    pub allow_private: bool,
    /// Seconds for one fetch.
    pub timeout_secs: u64,
    /// Bytes read from a response at most.
    pub max_bytes: usize,
    /// Characters of extracted text returned at most.
    pub max_chars: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            allow_private: false,
            timeout_secs: 30,
            max_bytes: 2_000_000,
            max_chars: 50_000,
        }
    }
}

/// `[admin]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Whether `nanogate gateway` serves the admin API.
    pub enabled: bool,
    /// Address and port to listen on.
    pub listen: String,
    /// The bearer token every request (except `/healthz` and `/readyz`) must carry.
    pub token: Option<String>,
    /// Name of an environment variable holding the token.
    pub token_env: Option<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: false,
            listen: "127.0.0.1:18790".into(),
            token: None,
            token_env: None,
        }
    }
}

impl AdminConfig {
    /// The token from `token` or the variable `token_env` names; an error when neither gives one, since the
    /// API can clear sessions and talk to the agent.
    pub fn resolve_token(&self) -> Result<String, ConfigError> {
        resolve_token("admin", self.token.as_ref(), self.token_env.as_ref()).map_err(|e| match e {
            ConfigError::Missing { key } => ConfigError::Setting {
                key,
                message: "the admin API is enabled but has no token: set admin.token (or admin.token_env, or \
                          NANOGATE_ADMIN__TOKEN) to a long random string, e.g. the output of `openssl rand -hex 32`"
                    .into(),
            },
            other => other,
        })
    }
}

/// `[memory]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Whether old messages are consolidated into MEMORY.md and HISTORY.md at all. Off: no model call ever
    /// sees the conversation for memory; `/new` only archives the transcript; a request that would not fit is
    /// trimmed (oldest history left out of it) instead.
    pub enabled: bool,
    /// Whether each consolidation also writes a structured summary into the session's metadata, which the
    /// model then sees right after the system prompt.
    pub summary: bool,
    /// Seconds a one-shot command or a stopping daemon waits for a running consolidation to finish.
    pub shutdown_wait_secs: u64,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            enabled: true,
            summary: true,
            shutdown_wait_secs: 60,
        }
    }
}

/// `[session]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Minutes an unused session stays in memory; 0 keeps sessions cached forever.
    pub cache_idle_minutes: u64,
    /// `"fsync"` (default): a commit is on disk before the reply is sent; `"os"`: leave flushing to the OS.
    pub durability: Durability,
    /// Minutes of silence after which the next message starts a new session (archived as `/new` does);
    /// 0 = never.
    pub idle_reset_minutes: u64,
    /// Days a session may stay untouched before the daily upkeep archives its unconsolidated messages into memory
    /// and moves its file to `sessions/archive/` (never deleted); 0 = keep sessions forever.
    pub max_age_days: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            cache_idle_minutes: 30,
            durability: Durability::Fsync,
            idle_reset_minutes: 0,
            max_age_days: 0,
        }
    }
}

impl SessionConfig {
    /// The store options these settings describe.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            durability: self.durability,
            cache_idle: std::time::Duration::from_secs(self.cache_idle_minutes.saturating_mul(60)),
        }
    }
}

/// `[cron]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CronConfig {
    /// The jobs file (nanobot's format); `~` is expanded. A nanobot user can point it at
    /// `~/.nanobot/cron/jobs.json`.
    pub store: PathBuf,
    /// A slot missed while the daemon was down runs at start-up only if it is less than this many minutes late.
    pub catch_up_grace_minutes: u64,
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            store: PathBuf::from("~/.nanogate/cron/jobs.json"),
            catch_up_grace_minutes: 60,
        }
    }
}

impl CronConfig {
    /// The jobs file with `~` expanded; an error when it starts with `~` and `$HOME` is not set.
    pub fn store_path(&self) -> Result<PathBuf, ConfigError> {
        if self.store.starts_with("~") && std::env::var_os("HOME").is_none_or(|h| h.is_empty()) {
            return Err(ConfigError::NoHome);
        }
        Ok(expand_tilde(&self.store))
    }
}

/// `[heartbeat]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeartbeatConfig {
    /// Minutes between two looks at `HEARTBEAT.md`; 0 turns the heartbeat off.
    pub interval_minutes: u64,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            interval_minutes: 30,
        }
    }
}

impl HeartbeatConfig {
    /// The interval between beats; zero when the heartbeat is off.
    pub fn interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.interval_minutes.saturating_mul(60))
    }
}

// ---- gateway and channels (`nanogate gateway`) ----

/// `[gateway]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Seconds SIGTERM/SIGINT waits for running turns and queued replies before the daemon exits anyway.
    pub shutdown_grace_secs: u64,
    /// Bytes a downloaded photo, document or voice note may have at most (bigger ones are not downloaded).
    pub media_max_bytes: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            shutdown_grace_secs: 30,
            media_max_bytes: 20 * 1024 * 1024,
        }
    }
}

/// `[channels]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsConfig {
    /// `[channels.telegram]`
    pub telegram: TelegramConfig,
    /// `[channels.discord]`
    pub discord: DiscordConfig,
}

/// Telegram's Bot API, the default `channels.telegram.api_url`.
pub const TELEGRAM_API_URL: &str = "https://api.telegram.org";
/// Discord's REST API, the default `channels.discord.api_url`.
pub const DISCORD_API_URL: &str = "https://discord.com";

/// When the bot answers in a group chat (Telegram) or a server channel (Discord).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Only when the bot is mentioned (or, on Telegram, a message of the bot is replied to).
    #[default]
    Mention,
    /// Every message from an allowed sender.
    All,
}

/// `[channels.telegram]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramConfig {
    /// Start this channel with `nanogate gateway`.
    pub enabled: bool,
    /// The bot token from @BotFather. Prefer `token_env`, so the token is not in a file.
    pub token: Option<String>,
    /// Name of an environment variable holding the token.
    pub token_env: Option<String>,
    /// User ids or usernames allowed to talk to the bot; `"*"` lets anyone in; empty lets nobody in.
    pub allow_from: Vec<String>,
    /// Bot API server (a self-hosted one, a proxy, a test fake).
    pub api_url: String,
    /// In groups: answer only when mentioned or replied to (`"mention"`), or every message (`"all"`).
    pub group_policy: GroupPolicy,
    /// Seconds one `getUpdates` long poll waits on the server (below teloxide's 17 s HTTP timeout).
    pub poll_timeout_secs: u32,
    /// Seconds without a completed `getUpdates` call before the watchdog restarts polling.
    pub watchdog_secs: u64,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            enabled: false,
            token: None,
            token_env: None,
            allow_from: Vec::new(),
            api_url: TELEGRAM_API_URL.into(),
            group_policy: GroupPolicy::Mention,
            poll_timeout_secs: 10,
            watchdog_secs: 120,
        }
    }
}

/// `[channels.discord]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordConfig {
    /// Start this channel with `nanogate gateway`.
    pub enabled: bool,
    /// The bot token from the Discord developer portal. Prefer `token_env`.
    pub token: Option<String>,
    /// Name of an environment variable holding the token.
    pub token_env: Option<String>,
    /// User ids or usernames allowed to talk to the bot; `"*"` lets anyone in; empty lets nobody in.
    pub allow_from: Vec<String>,
    /// REST API base (a proxy such as twilight-http-proxy, a test fake); the gateway URL is asked from it.
    pub api_url: String,
    /// In servers: answer only when mentioned (`"mention"`), or every message (`"all"`). DMs are always answered.
    pub guild_policy: GroupPolicy,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        DiscordConfig {
            enabled: false,
            token: None,
            token_env: None,
            allow_from: Vec::new(),
            api_url: DISCORD_API_URL.into(),
            guild_policy: GroupPolicy::Mention,
        }
    }
}

/// The token of a channel: `token`, else the variable named by `token_env`; an error names the key, never the
/// token.
pub fn resolve_token(
    section: &str,
    token: Option<&String>,
    token_env: Option<&String>,
) -> Result<String, ConfigError> {
    secret(&format!("{section}.token_env"), token, token_env)?.ok_or_else(|| ConfigError::Missing {
        key: format!("{section}.token"),
    })
}

/// A secret given in the file (`value`), else in the variable `env` names; `None` when neither is given, an
/// error naming `env_key` when the variable is named but unset. Surrounding whitespace (a pasted newline) is
/// trimmed.
fn secret(
    env_key: &str,
    value: Option<&String>,
    env: Option<&String>,
) -> Result<Option<String>, ConfigError> {
    if let Some(v) = value.map(|v| v.trim()).filter(|v| !v.is_empty()) {
        return Ok(Some(v.to_owned()));
    }
    let Some(var) = env else { return Ok(None) };
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_owned())),
        _ => Err(ConfigError::Env {
            var: var.clone(),
            message: format!("{env_key} names this variable, but it is not set"),
        }),
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read, or an explicitly named file is missing.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown or mistyped key.
    #[error("config file {path} is invalid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// toml's description, with line and column.
        message: String,
    },
    /// An environment override is invalid.
    #[error("environment variable {var} is invalid: {message}")]
    Env {
        /// The variable.
        var: String,
        /// What is wrong with it.
        message: String,
    },
    /// A required key is missing.
    #[error("{key} is not set (set it, or the matching *_env key, in config.toml)")]
    Missing {
        /// The key, e.g. `channels.telegram.token`.
        key: String,
    },
    /// A setting has a value that cannot be used, or a required one is missing.
    #[error("{key}: {message}")]
    Setting {
        /// The setting, e.g. `admin.token`.
        key: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// `$HOME` is not set, so the default paths cannot be found.
    #[error(
        "HOME is not set, so ~/.nanogate cannot be found; pass --workspace and --config explicitly"
    )]
    NoHome,
}

/// `~/.nanogate`, where the default config and workspace live (as nanobot uses `~/.nanobot`).
pub fn data_dir() -> Result<PathBuf, ConfigError> {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".nanogate")),
        _ => Err(ConfigError::NoHome),
    }
}

/// Replaces a leading `~` with `$HOME`.
pub fn expand_tilde(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

impl Config {
    /// Reads `path` (or `~/.nanogate/config.toml` when `None`; a missing default file means all defaults), then
    /// applies `NANOGATE_…` overrides from the process environment.
    pub fn load(path: Option<&Path>) -> Result<(Config, PathBuf), ConfigError> {
        let (path, explicit) = match path {
            Some(p) => (expand_tilde(p), true),
            None => (data_dir()?.join("config.toml"), false),
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => String::new(),
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        let config = Self::from_toml(&text, std::env::vars(), &path)?;
        Ok((config, path))
    }

    /// Parses TOML text and applies overrides from `env` (name/value pairs; only `NANOGATE_…` ones are used).
    pub fn from_toml(
        text: &str,
        env: impl Iterator<Item = (String, String)>,
        path: &Path,
    ) -> Result<Config, ConfigError> {
        let invalid = |e: toml::de::Error| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        // Parse the file alone first so its errors carry line numbers.
        let config: Config = toml::from_str(text).map_err(invalid)?;
        let mut table: toml::Table = toml::from_str(text).map_err(invalid)?;
        let mut overridden = Vec::new();
        for (var, raw) in env {
            let Some(name) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let parts: Vec<String> = name.split("__").map(str::to_lowercase).collect();
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(raw.clone()));
            let env_err = |message: String| ConfigError::Env {
                var: var.clone(),
                message,
            };
            let Some((last, sections)) = parts
                .split_last()
                .filter(|_| parts.iter().all(|p| !p.is_empty()))
            else {
                return Err(env_err(
                    "expected NANOGATE_<SECTION>__<KEY> or NANOGATE_<KEY>".into(),
                ));
            };
            let mut table_ref = &mut table;
            for section in sections {
                let entry = table_ref
                    .entry(section.clone())
                    .or_insert_with(|| toml::Value::Table(Default::default()));
                let toml::Value::Table(t) = entry else {
                    return Err(env_err(format!("`{section}` is not a section")));
                };
                table_ref = t;
            }
            table_ref.insert(last.clone(), value);
            overridden.push(var);
        }
        if overridden.is_empty() {
            return Ok(config);
        }
        Config::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Env {
            var: overridden.join(", "),
            message: e.to_string(),
        })
    }

    /// The workspace: `--workspace` when given, else the `workspace` key, else `~/.nanogate/workspace`.
    pub fn workspace_dir(&self, flag: Option<&Path>) -> Result<PathBuf, ConfigError> {
        match flag.or(self.workspace.as_deref()) {
            Some(p) => Ok(expand_tilde(p)),
            None => Ok(data_dir()?.join("workspace")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>();
        Config::from_toml(text, env.into_iter(), Path::new("config.toml"))
    }

    #[test]
    fn defaults() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.session.cache_idle_minutes, 30);
        assert_eq!(c.session.durability, Durability::Fsync);
        assert_eq!(c.cron.catch_up_grace_minutes, 60);
        assert_eq!(c.heartbeat.interval_minutes, 30);
        assert_eq!(c.cron.store, Path::new("~/.nanogate/cron/jobs.json"));
    }

    #[test]
    fn cron_and_heartbeat_sections() {
        let c = parse(
            "[cron]\nstore = \"/srv/jobs.json\"\ncatch_up_grace_minutes = 5\n[heartbeat]\ninterval_minutes = 0\n",
            &[("NANOGATE_CRON__CATCH_UP_GRACE_MINUTES", "7")],
        )
        .unwrap();
        assert_eq!(c.cron.store_path().unwrap(), Path::new("/srv/jobs.json"));
        assert_eq!(c.cron.catch_up_grace_minutes, 7);
        assert_eq!(c.heartbeat.interval_minutes, 0);
        let e = parse("[cron]\ngrace = 5\n", &[]).unwrap_err().to_string();
        assert!(e.contains("grace"), "{e}");
        // The example config (what `onboard` writes) states the same defaults.
        let example = parse(include_str!("../config.toml.example"), &[]).unwrap();
        assert_eq!(example.cron.store, Config::default().cron.store);
        assert_eq!(example.cron.catch_up_grace_minutes, 60);
        assert_eq!(example.heartbeat.interval_minutes, 30);
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse("[session]\ncache_idle_minute = 3\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cache_idle_minute"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        let e = parse("", &[("NANOGATE_SESSION__BOGUS", "1")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("NANOGATE_SESSION__BOGUS") && e.contains("bogus"),
            "{e}"
        );
    }

    #[test]
    fn env_overrides_file() {
        let c = parse(
            "[session]\ndurability = \"fsync\"\n",
            &[
                ("NANOGATE_SESSION__DURABILITY", "os"),
                ("NANOGATE_SESSION__CACHE_IDLE_MINUTES", "5"),
                ("OTHER", "x"),
            ],
        )
        .unwrap();
        assert_eq!(c.session.durability, Durability::Os);
        assert_eq!(c.session.cache_idle_minutes, 5);
        let c = parse("", &[("NANOGATE_TOOLS__EXEC__TIMEOUT_SECS", "5")]).unwrap();
        assert_eq!(c.tools.exec.timeout_secs, 5);
        let c = parse("", &[("NANOGATE_WORKSPACE", "/tmp/ws")]).unwrap();
        assert_eq!(c.workspace.as_deref(), Some(Path::new("/tmp/ws")));
    }

    #[test]
    fn bad_value_is_clear() {
        let e = parse("[session]\ndurability = \"sometimes\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("sometimes") || e.contains("durability"), "{e}");
    }

    #[test]
    fn gateway_and_channels() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.gateway.shutdown_grace_secs, 30);
        assert!(!c.channels.telegram.enabled && !c.channels.discord.enabled);
        assert_eq!(c.channels.telegram.api_url, TELEGRAM_API_URL);
        assert_eq!(c.channels.discord.guild_policy, GroupPolicy::Mention);
        let c = parse(
            "[channels.telegram]\nenabled = true\nallow_from = [\"42\", \"@bob\"]\ngroup_policy = \"all\"\n",
            &[("NANOGATE_CHANNELS__DISCORD__TOKEN", "abc"), ("NANOGATE_GATEWAY__SHUTDOWN_GRACE_SECS", "5")],
        )
        .unwrap();
        assert!(c.channels.telegram.enabled);
        assert_eq!(c.channels.telegram.allow_from, ["42", "@bob"]);
        assert_eq!(c.channels.telegram.group_policy, GroupPolicy::All);
        assert_eq!(c.channels.discord.token.as_deref(), Some("abc"));
        assert_eq!(c.gateway.shutdown_grace_secs, 5);
        let e = parse("[channels.telegram]\ntokn = \"x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("tokn"), "{e}");
        let e = resolve_token("channels.discord", None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("channels.discord.token"), "{e}");
    }

    #[test]
    fn the_example_config_parses() {
        let text = include_str!("../config.toml.example");
        parse(text, &[]).unwrap();
    }
}
