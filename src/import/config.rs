//! nanobot's `config.json` → our `config.toml`.
//!
//! Both generations use pydantic models that accept camelCase and snake_case keys (`maxTokens` or
//! `max_tokens`); so does this reader. The mapping:
//!
//! | nanobot | nanogate |
//! |---|---|
//! | `agents.defaults.model`, `maxTokens`, `temperature` | `provider.model`, `max_tokens`, `temperature` |
//! | `agents.defaults.maxToolIterations`, `memoryWindow` | `agent.max_tool_iterations`, `memory_window` |
//! | `providers.<name>.apiKey`, `apiBase`, `extraHeaders` | `provider.api_key`, `api_base`, `extra_headers` |
//! | `tools.restrictToWorkspace`, `tools.exec.timeout` | `tools.restrict_to_workspace`, `tools.exec.timeout_secs` |
//! | `channels.telegram` / `discord`: `enabled`, `token`, `allowFrom` | `[channels.telegram]` / `[channels.discord]` |
//! | `gateway.heartbeat.intervalS` (or `heartbeat.intervalS`) | `heartbeat.interval_minutes` |
//!
//! nanobot picks its provider from the model name among up to seventeen configured ones; nanogate talks to one
//! OpenAI-compatible endpoint. The provider chosen is the one `agents.defaults.provider` forces, else the first
//! one with a key in nanobot's registry order (gateways first); its API base defaults to that provider's
//! OpenAI-compatible URL. Everything without an equivalent is listed as skipped, with the reason.
//!
//! The `[channels.*]`, `[cron]` and `[heartbeat]` sections belong to the gateway and scheduler; the TOML is
//! built as a table and serialised by the `toml` crate, so every value is escaped correctly.

use std::path::Path;

use toml::{Table, Value};

use super::{Item, Kind, Options, Outcome, Source, field, read_text, snake};
use crate::json::{Json, Object};

/// nanobot's providers in its registry order, with the OpenAI-compatible API base each one has (None: the
/// provider has no OpenAI-compatible endpoint we know, or the user must give one).
const PROVIDERS: &[(&str, Option<&str>)] = &[
    ("custom", None),
    ("openrouter", Some("https://openrouter.ai/api/v1")),
    ("aihubmix", Some("https://aihubmix.com/v1")),
    ("siliconflow", Some("https://api.siliconflow.cn/v1")),
    (
        "volcengine",
        Some("https://ark.cn-beijing.volces.com/api/v3"),
    ),
    ("anthropic", Some("https://api.anthropic.com/v1")),
    ("openai", Some("https://api.openai.com/v1")),
    ("openai_codex", None),
    ("github_copilot", None),
    ("deepseek", Some("https://api.deepseek.com/v1")),
    (
        "gemini",
        Some("https://generativelanguage.googleapis.com/v1beta/openai"),
    ),
    ("zhipu", Some("https://open.bigmodel.cn/api/paas/v4")),
    (
        "dashscope",
        Some("https://dashscope.aliyuncs.com/compatible-mode/v1"),
    ),
    ("moonshot", Some("https://api.moonshot.ai/v1")),
    ("minimax", Some("https://api.minimax.io/v1")),
    ("vllm", None),
    ("groq", Some("https://api.groq.com/openai/v1")),
];

/// Gateways route `vendor/model` names themselves; for the others a `vendor/` prefix (litellm's routing hint)
/// is not part of the model name the API knows.
const GATEWAYS: &[&str] = &[
    "openrouter",
    "aihubmix",
    "siliconflow",
    "volcengine",
    "custom",
    "vllm",
];

/// Finds nanobot's workspace and reads `config.json`; reports a config that cannot be read.
pub fn read_source(root: &Path) -> (Source, Vec<Item>) {
    let mut items = Vec::new();
    let path = root.join("config.json");
    let config = if path.exists() {
        match read_text(&path)
            .and_then(|t| Json::parse(&t).map_err(|e| format!("not valid JSON: {e}")))
        {
            Ok(Json::Object(o)) => Some(o),
            Ok(_) => {
                items.push(Item::skipped(
                    Kind::Config,
                    path.display().to_string(),
                    "not a JSON object",
                ));
                None
            }
            Err(reason) => {
                items.push(Item::skipped(
                    Kind::Config,
                    path.display().to_string(),
                    reason,
                ));
                None
            }
        }
    } else {
        None
    };
    let configured = config
        .as_ref()
        .and_then(|c| field(c, "agents"))
        .and_then(Json::as_object)
        .and_then(|a| field(a, "defaults"))
        .and_then(Json::as_object)
        .and_then(|d| field(d, "workspace"))
        .and_then(Json::as_str)
        .map(|w| crate::config::expand_tilde(Path::new(w)))
        .filter(|w| w.is_dir());
    let workspace = configured.unwrap_or_else(|| root.join("workspace"));
    (
        Source {
            root: root.to_path_buf(),
            workspace,
            config,
        },
        items,
    )
}

/// The config part of the import.
pub fn import(source: &Source, opts: &Options) -> Vec<Item> {
    let Some(cfg) = &source.config else {
        return Vec::new();
    };
    let what = source.root.join("config.json").display().to_string();
    let (table, mut notes) = convert(cfg, opts);
    let text = format!(
        "# Imported from {what} by `nanogate import-nanobot`.\n\
         # config.toml.example documents every key; anything not set here has its default.\n\n{}",
        toml::to_string(&table).unwrap_or_default()
    );
    let target = opts.config_path.clone();
    let outcome = if std::fs::read(&target).ok().as_deref() == Some(text.as_bytes()) {
        // Written by an earlier run of this import: nothing to do.
        Outcome::Exists { target }
    } else if target.exists() {
        notes.insert(
            0,
            "your config file exists and was not changed; copy what you need from the lines above"
                .into(),
        );
        Outcome::Skipped {
            reason: format!("{} exists (never overwritten)", target.display()),
        }
    } else if !opts.apply {
        Outcome::Import { target }
    } else {
        match super::create_new(&target, text.as_bytes()) {
            Ok(true) => Outcome::Import { target },
            Ok(false) => Outcome::Exists { target },
            Err(e) => Outcome::Skipped {
                reason: format!("cannot write {}: {e}", target.display()),
            },
        }
    };
    let mut item = Item::new(Kind::Config, what, outcome);
    item.details = notes;
    vec![item]
}

/// Builds the TOML table; returns it with one note per mapped, secret or skipped key.
pub fn convert(cfg: &Object, opts: &Options) -> (Table, Vec<String>) {
    let mut notes = Vec::new();
    let mut root = Table::new();
    root.insert(
        "workspace".into(),
        Value::String(opts.workspace.display().to_string()),
    );
    let mut provider = Table::new();
    let mut agent = Table::new();
    let mut tools = Table::new();

    for (key, value) in cfg.iter() {
        match snake(key).as_str() {
            "agents" | "providers" | "tools" | "channels" | "gateway" | "heartbeat" => {}
            other => notes.push(format!("skipped `{key}`: {}", no_equivalent(other, value))),
        }
    }

    // agents.defaults
    let defaults = obj(cfg, "agents").and_then(|a| obj(a, "defaults"));
    let mut forced = None;
    let mut model = None;
    if let Some(d) = defaults {
        for (key, value) in d.iter() {
            let k = snake(key);
            match k.as_str() {
                "model" => model = value.as_str().map(str::to_owned),
                "max_tokens" => set_int(&mut provider, "max_tokens", value, &k, &mut notes),
                "temperature" => match value.as_f64() {
                    Some(t) => {
                        provider.insert("temperature".into(), Value::Float(t));
                    }
                    None => notes.push(format!("skipped `agents.defaults.{key}`: not a number")),
                },
                "max_tool_iterations" => {
                    set_int(&mut agent, "max_tool_iterations", value, &k, &mut notes)
                }
                "memory_window" => set_int(&mut agent, "memory_window", value, &k, &mut notes),
                "workspace" => notes.push(format!(
                    "`agents.defaults.workspace` ({}) is imported into {}",
                    value.as_str().unwrap_or("?"),
                    opts.workspace.display()
                )),
                "provider" => {
                    forced = value.as_str().filter(|p| *p != "auto").map(str::to_owned);
                }
                _ => notes.push(format!(
                    "skipped `agents.defaults.{key}`: {}",
                    no_equivalent(&k, value)
                )),
            }
        }
    }

    // providers: the one nanobot would use.
    let providers = obj(cfg, "providers");
    let configured = |name: &str| -> Option<&Object> {
        providers.and_then(|p| obj(p, name)).filter(|p| {
            field(p, "api_key")
                .and_then(Json::as_str)
                .is_some_and(|k| !k.is_empty())
                || field(p, "api_base")
                    .and_then(Json::as_str)
                    .is_some_and(|b| !b.is_empty())
        })
    };
    let chosen = match &forced {
        Some(f) => configured(&snake(f)).map(|p| (snake(f), p)),
        None => PROVIDERS
            .iter()
            .find_map(|(name, _)| configured(name).map(|p| (name.to_string(), p))),
    };
    if let Some((name, p)) = &chosen {
        if let Some(k) = field(p, "api_key")
            .and_then(Json::as_str)
            .filter(|k| !k.is_empty())
        {
            provider.insert("api_key".into(), Value::String(k.to_owned()));
            notes.push(format!(
                "provider.api_key: set (from providers.{name}; not shown)"
            ));
        }
        let base = field(p, "api_base")
            .and_then(Json::as_str)
            .filter(|b| !b.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                PROVIDERS
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, b)| b.map(str::to_owned))
            });
        match base {
            Some(b) => {
                notes.push(format!("provider.api_base = {b} (providers.{name})"));
                provider.insert("api_base".into(), Value::String(b));
            }
            None => notes.push(format!(
                "providers.{name} has no apiBase and no known OpenAI-compatible endpoint: set provider.api_base yourself"
            )),
        }
        if let Some(h) = field(p, "extra_headers").and_then(Json::as_object)
            && !h.is_empty()
        {
            let mut headers = Table::new();
            for (hk, hv) in h.iter() {
                if let Some(v) = hv.as_str() {
                    headers.insert(hk.to_owned(), Value::String(v.to_owned()));
                }
            }
            provider.insert("extra_headers".into(), Value::Table(headers));
            notes.push(format!(
                "provider.extra_headers: {} header(s) (values not shown)",
                h.len()
            ));
        }
        if let Some(m) = &model {
            let stripped = match m.split_once('/') {
                Some((prefix, rest)) if !GATEWAYS.contains(&name.as_str()) && !rest.is_empty() => {
                    notes.push(format!(
                        "provider.model = {rest:?} (nanobot's routing prefix `{prefix}/` removed)"
                    ));
                    rest.to_owned()
                }
                _ => m.clone(),
            };
            provider.insert("model".into(), Value::String(stripped));
        }
        if let Some(ps) = providers {
            for (pk, _) in ps.iter() {
                if snake(pk) != *name && configured(&snake(pk)).is_some() {
                    notes.push(format!(
                        "skipped `providers.{pk}`: nanogate uses one endpoint, providers.{name} was chosen"
                    ));
                }
            }
        }
    } else {
        if let Some(m) = model {
            provider.insert("model".into(), Value::String(m));
        }
        notes.push("no provider with an API key or base found: set [provider] yourself".into());
    }

    // tools
    if let Some(t) = obj(cfg, "tools") {
        for (key, value) in t.iter() {
            let k = snake(key);
            match k.as_str() {
                "restrict_to_workspace" => match value {
                    Json::Bool(b) => {
                        tools.insert("restrict_to_workspace".into(), Value::Boolean(*b));
                        if !b {
                            notes.push(
                                "tools.restrict_to_workspace = false as in nanobot (nanogate's default is true)".into(),
                            );
                        }
                    }
                    _ => notes.push(format!("skipped `tools.{key}`: not true/false")),
                },
                "exec" => {
                    let Some(e) = value.as_object() else { continue };
                    for (ek, ev) in e.iter() {
                        match snake(ek).as_str() {
                            "timeout" => match ev.as_u64() {
                                Some(n) => {
                                    let mut exec = Table::new();
                                    exec.insert(
                                        "timeout_secs".into(),
                                        Value::Integer(clamp_i64(n)),
                                    );
                                    tools.insert("exec".into(), Value::Table(exec));
                                }
                                None => notes.push(
                                    "skipped `tools.exec.timeout`: not a whole number".into(),
                                ),
                            },
                            _ => notes.push(format!(
                                "skipped `tools.exec.{ek}`: {}",
                                no_equivalent(&snake(ek), ev)
                            )),
                        }
                    }
                }
                _ => notes.push(format!(
                    "skipped `tools.{key}`: {}",
                    no_equivalent(&k, value)
                )),
            }
        }
    }

    // channels
    let mut channels = Table::new();
    if let Some(c) = obj(cfg, "channels") {
        for (key, value) in c.iter() {
            let k = snake(key);
            match (k.as_str(), value.as_object()) {
                ("telegram" | "discord", Some(ch)) => {
                    channels.insert(k.clone(), Value::Table(channel(&k, ch, &mut notes)));
                }
                (_, Some(ch)) => {
                    if field(ch, "enabled") == Some(&Json::Bool(true)) {
                        notes.push(format!(
                            "skipped `channels.{key}`: nanogate has no {k} channel (it was enabled)"
                        ));
                    }
                }
                _ => notes.push(format!(
                    "skipped `channels.{key}`: {}",
                    no_equivalent(&k, value)
                )),
            }
        }
    }

    // heartbeat: gateway.heartbeat (0.1.x) or a top-level heartbeat.
    let mut heartbeat = None;
    if let Some(g) = obj(cfg, "gateway") {
        for (key, value) in g.iter() {
            match snake(key).as_str() {
                "heartbeat" => heartbeat = value.as_object(),
                other => notes.push(format!(
                    "skipped `gateway.{key}`: {}",
                    no_equivalent(other, value)
                )),
            }
        }
    }
    let heartbeat = heartbeat.or_else(|| obj(cfg, "heartbeat"));
    let mut hb = Table::new();
    if let Some(h) = heartbeat {
        let enabled = field(h, "enabled").and_then(|v| match v {
            Json::Bool(b) => Some(*b),
            _ => None,
        });
        let secs = field(h, "interval_s").and_then(Json::as_u64);
        let minutes = match (enabled, secs) {
            (Some(false), _) => 0,
            (_, Some(s)) => s.div_ceil(60),
            (_, None) => 30,
        };
        hb.insert(
            "interval_minutes".into(),
            Value::Integer(clamp_i64(minutes)),
        );
        notes.push(format!(
            "heartbeat.interval_minutes = {minutes}{}",
            if minutes == 0 {
                " (off, as in nanobot)"
            } else {
                ""
            }
        ));
    }

    let mut cron = Table::new();
    cron.insert(
        "store".into(),
        Value::String(opts.cron_store.display().to_string()),
    );

    for (name, t) in [("provider", provider), ("agent", agent), ("tools", tools)] {
        if !t.is_empty() {
            root.insert(name.into(), Value::Table(t));
        }
    }
    if !channels.is_empty() {
        root.insert("channels".into(), Value::Table(channels));
    }
    root.insert("cron".into(), Value::Table(cron));
    if !hb.is_empty() {
        root.insert("heartbeat".into(), Value::Table(hb));
    }
    (root, notes)
}

fn channel(name: &str, ch: &Object, notes: &mut Vec<String>) -> Table {
    let mut t = Table::new();
    for (key, value) in ch.iter() {
        let k = snake(key);
        match (k.as_str(), value) {
            ("enabled", Json::Bool(b)) => {
                t.insert("enabled".into(), Value::Boolean(*b));
            }
            ("token", Json::String(s)) => {
                if !s.is_empty() {
                    t.insert("token".into(), Value::String(s.clone()));
                    notes.push(format!("channels.{name}.token: set (not shown)"));
                }
            }
            ("allow_from", Json::Array(list)) => {
                let ids: Vec<Value> = list
                    .iter()
                    .filter_map(|v| match v {
                        Json::String(s) => Some(s.clone()),
                        Json::Number(n) => Some(n.as_str().to_owned()),
                        _ => None,
                    })
                    .map(Value::String)
                    .collect();
                notes.push(format!("channels.{name}.allow_from: {} id(s)", ids.len()));
                t.insert("allow_from".into(), Value::Array(ids));
            }
            ("api_url" | "base_url" | "api_base", Json::String(s))
                if name == "telegram" && !s.is_empty() =>
            {
                t.insert("api_url".into(), Value::String(s.clone()));
            }
            _ => notes.push(format!(
                "skipped `channels.{name}.{key}`: {}",
                no_equivalent(&k, value)
            )),
        }
    }
    t
}

fn obj<'a>(o: &'a Object, name: &str) -> Option<&'a Object> {
    field(o, name).and_then(Json::as_object)
}

fn set_int(t: &mut Table, name: &str, value: &Json, key: &str, notes: &mut Vec<String>) {
    match value.as_u64() {
        Some(n) => {
            t.insert(name.into(), Value::Integer(clamp_i64(n)));
        }
        None => notes.push(format!("skipped `{key}`: not a whole number")),
    }
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Why a key is not carried over (short, for the report).
fn no_equivalent(key: &str, value: &Json) -> String {
    let empty = match value {
        Json::Null => true,
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
        _ => false,
    };
    let why = match key {
        "proxy" => "nanogate has no proxy setting (set HTTPS_PROXY in the environment)",
        "reasoning_effort" => "no equivalent in nanogate's provider settings",
        "mcp_servers" => "nanogate does not speak MCP",
        "web" => "nanogate's web_fetch needs no key; web search is not built in",
        "path_append" => "no equivalent (set PATH in the service's environment)",
        "host" | "port" => "the admin HTTP API has its own [admin] section",
        "send_progress" | "send_tool_hints" => "nanogate sends the final reply only",
        _ => "no equivalent in nanogate",
    };
    if empty {
        format!("{why} (it was empty)")
    } else {
        why.to_owned()
    }
}
