//! The command line: global options, one subcommand per file.

mod agent;
mod gateway;
mod onboard;
mod sessions;

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
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
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
    /// Run the daemon: every enabled channel (Telegram, Discord) until SIGTERM/SIGINT.
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
    /// Write a starter config and the workspace templates (never overwrites without --force).
    Onboard {
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
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
        (Err(ConfigError::Read { source, .. }), Command::Onboard { .. }, Some(path))
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            (Config::default(), crate::config::expand_tilde(path))
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
        Command::Onboard { force } => {
            onboard::run(&ctx.config_path, &ctx.workspace, force)?;
            Ok(0)
        }
    }
}
