//! The command line: global options, one subcommand per file.

mod agent;
mod cron;
mod gateway;
mod import;
mod onboard;
mod service;
mod sessions;
mod status;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigError};

/// nanogate: a fast, nanobot-compatible chat gateway for your personal LLM agent.
#[derive(Debug, Parser)]
#[command(name = "nanogate", version, about)]
pub struct Cli {
    /// Workspace directory [default: the config's `workspace`, else ~/.nanogate/workspace]
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Config file [default: ~/.nanogate/config.toml]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log format on stderr: `pretty` (human-readable) or `json` (one object per line). `RUST_LOG` sets the level.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured only when stderr is a terminal).
    Pretty,
    /// One JSON object per line.
    Json,
}

impl Cli {
    /// Whether this is the interactive terminal conversation (`agent` without `-m`).
    pub fn is_interactive(&self) -> bool {
        matches!(self.command, Command::Agent { message: None, .. })
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, check and repair session files.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Run the daemon: the enabled channels (Telegram, Discord), cron, the heartbeat and the admin API, until SIGTERM/SIGINT.
    Gateway,
    /// Talk to the agent in the terminal, or send one message with -m.
    Agent {
        /// Send this one message, print the reply and exit.
        #[arg(short, long)]
        message: Option<String>,
        /// The session key.
        #[arg(short, long, default_value = "cli:direct")]
        session: String,
    },
    /// Scheduled jobs: list, add, remove, enable, run.
    #[command(subcommand)]
    Cron(cron::CronCommand),
    /// Show the config, workspace, model (and whether it answers), channels, cron jobs and admin API.
    Status,
    /// Write a starter config and the workspace templates (never overwrites without --force).
    Onboard {
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
    /// Bring a nanobot installation over: config, sessions, memory, cron jobs. A dry run unless --apply.
    ImportNanobot(import::ImportArgs),
    /// Install nanogate as a systemd service.
    #[command(subcommand)]
    Service(service::ServiceCommand),
}

/// What every command starts from: the loaded config and the workspace it points at.
pub struct Context {
    /// The configuration after environment overrides.
    pub config: Config,
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The config file (it may not exist).
    pub config_path: PathBuf,
}

impl Context {
    /// `<workspace>/sessions`.
    pub fn sessions_dir(&self) -> PathBuf {
        self.workspace.join("sessions")
    }
}

/// Runs the parsed command line; returns the process exit code.
pub async fn run(cli: Cli) -> Result<i32> {
    let loaded = Config::load(cli.config.as_deref());
    // `onboard` is how a config file comes to exist: a missing one is not an error there.
    let (config, config_path) = match (loaded, &cli.command, &cli.config) {
        (
            Err(ConfigError::Read { source, .. }),
            Command::Onboard { .. }
            | Command::ImportNanobot(_)
            | Command::Service(_)
            | Command::Status,
            Some(path),
        ) if source.kind() == std::io::ErrorKind::NotFound => {
            (Config::default(), crate::config::expand_tilde(path))
        }
        // The import reads our config only for the workspace; a config with sections this build does not
        // know (written by a newer nanogate, or by the import itself) must not stop it.
        (Err(ConfigError::Invalid { path, .. }), Command::ImportNanobot(_), _) => {
            tracing::warn!(
                config = %path.display(),
                "config has keys this build does not know (the error is not shown: it may quote a secret); using its workspace only"
            );
            let workspace = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.parse::<toml::Table>().ok())
                .and_then(|t| {
                    t.get("workspace")
                        .and_then(|w| w.as_str())
                        .map(PathBuf::from)
                });
            let config = Config {
                workspace,
                ..Config::default()
            };
            (config, path)
        }
        (loaded, _, _) => loaded?,
    };
    let workspace = config.workspace_dir(cli.workspace.as_deref())?;
    let ctx = Context {
        config,
        workspace,
        config_path,
    };
    match cli.command {
        Command::Sessions(cmd) => sessions::run(&ctx, cmd).await,
        Command::Gateway => gateway::run(&ctx).await,
        Command::Agent { message, session } => agent::run(&ctx, session, message).await,
        Command::Cron(cmd) => cron::run(&ctx, cmd).await,
        Command::Status => status::run(&ctx).await,
        Command::Onboard { force } => {
            onboard::run(&ctx.config_path, &ctx.workspace, force)?;
            Ok(0)
        }
        Command::ImportNanobot(args) => import::run(&ctx, args).await,
        Command::Service(cmd) => service::run(&ctx, cmd),
    }
}
