//! `nanogate status`: what this installation is and whether it can work, at a glance. Secrets are never
//! printed, only whether they are set.

use std::time::Duration;

use anyhow::Result;

use super::Context;
use crate::config::resolve_token;
use crate::cron::JobStore;
use crate::cron::schedule::local_time;
use crate::provider::Provider;

/// How long the provider gets to answer.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Prints the status; exit code 1 when something needs attention (the model does not answer, the jobs file is
/// unreadable).
pub async fn run(ctx: &Context) -> Result<i32> {
    let c = &ctx.config;
    let mut problems = 0;
    let row = |name: &str, value: String| println!("{name:<11} {value}");
    println!("nanogate {}", env!("CARGO_PKG_VERSION"));
    row(
        "config",
        if ctx.config_path.exists() {
            ctx.config_path.display().to_string()
        } else {
            format!(
                "{} (not found: defaults in use; `nanogate onboard` writes one)",
                ctx.config_path.display()
            )
        },
    );
    row(
        "workspace",
        format!(
            "{} ({} sessions)",
            ctx.workspace.display(),
            count_sessions(&ctx.sessions_dir())
        ),
    );

    let key = match c.provider.resolve_api_key() {
        Ok(Some(_)) => "set".to_owned(),
        Ok(None) => "not set".to_owned(),
        Err(e) => format!("problem: {e}"),
    };
    let answer = match Provider::new(&c.provider) {
        Ok(p) => match p.check(PROVIDER_TIMEOUT).await {
            Ok(said) => said,
            Err(e) => {
                problems += 1;
                format!("does not answer: {e}")
            }
        },
        Err(e) => {
            problems += 1;
            format!("cannot be used: {e}")
        }
    };
    row(
        "model",
        format!("{} at {}: {answer}", c.provider.model, c.provider.api_base),
    );
    row("api key", key);

    for (name, enabled, token, token_env, allow) in [
        (
            "telegram",
            c.channels.telegram.enabled,
            &c.channels.telegram.token,
            &c.channels.telegram.token_env,
            &c.channels.telegram.allow_from,
        ),
        (
            "discord",
            c.channels.discord.enabled,
            &c.channels.discord.token,
            &c.channels.discord.token_env,
            &c.channels.discord.allow_from,
        ),
    ] {
        if !enabled {
            row(name, "off".to_owned());
            continue;
        }
        let section = format!("channels.{name}");
        let token = match resolve_token(&section, token.as_ref(), token_env.as_ref()) {
            Ok(_) => "token set".to_owned(),
            Err(e) => {
                problems += 1;
                format!("NO TOKEN ({e})")
            }
        };
        let who = if allow.is_empty() {
            "allow_from is empty: nobody can talk to it".to_owned()
        } else if allow.iter().any(|a| a == "*") {
            "anyone may talk to it".to_owned()
        } else {
            format!("{} allowed sender(s)", allow.len())
        };
        row(name, format!("enabled, {token}, {who}"));
    }

    match c.cron.store_path() {
        Ok(path) => match JobStore::new(&path).load() {
            Ok(file) => {
                let enabled: Vec<_> = file.jobs.iter().filter(|j| j.enabled).collect();
                let next = enabled
                    .iter()
                    .filter_map(|j| Some((j.state.next_run_at_ms?, j)))
                    .min_by_key(|(at, _)| *at)
                    .map(|(at, j)| format!(", next: {:?} at {}", j.name, local_time(at)))
                    .unwrap_or_default();
                row(
                    "cron",
                    format!(
                        "{} jobs ({} enabled){next} in {}",
                        file.jobs.len(),
                        enabled.len(),
                        path.display()
                    ),
                );
            }
            Err(e) => {
                problems += 1;
                row("cron", format!("cannot be used: {e}"));
            }
        },
        Err(e) => row("cron", format!("cannot be used: {e}")),
    }
    row(
        "heartbeat",
        match c.heartbeat.interval_minutes {
            0 => "off".to_owned(),
            m => format!("every {m} min (HEARTBEAT.md)"),
        },
    );
    row(
        "admin API",
        if c.admin.enabled {
            let token = if c.admin.resolve_token().is_ok() {
                "token set"
            } else {
                problems += 1;
                "NO TOKEN: it will not start"
            };
            format!("http://{} ({token})", c.admin.listen)
        } else {
            "off".to_owned()
        },
    );
    Ok(if problems > 0 { 1 } else { 0 })
}

/// Session files in the directory (not the archive), without reading them.
fn count_sessions(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_name().to_string_lossy().ends_with(".jsonl")
                        && e.file_type().is_ok_and(|t| t.is_file())
                })
                .count()
        })
        .unwrap_or(0)
}
