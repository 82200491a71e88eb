//! The command line: global options, one subcommand per file.

mod sessions;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::config::Config;

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

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, check and repair session files.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
}

/// What every command starts from: the loaded config and the workspace it points at.
pub struct Context {
    /// The configuration after environment overrides.
    pub config: Config,
    /// The workspace directory.
    pub workspace: PathBuf,
}

impl Context {
    /// `<workspace>/sessions`.
    pub fn sessions_dir(&self) -> PathBuf {
        self.workspace.join("sessions")
    }
}

/// Runs the parsed command line; returns the process exit code.
pub async fn run(cli: Cli) -> Result<i32> {
    let (config, _path) = Config::load(cli.config.as_deref())?;
    let workspace = config.workspace_dir(cli.workspace.as_deref())?;
    let ctx = Context { config, workspace };
    match cli.command {
        Command::Sessions(cmd) => sessions::run(&ctx, cmd).await,
    }
}
