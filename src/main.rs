//! The `nanogate` binary: parses the command line, sets up logging, and reports errors plainly.

use std::io::IsTerminal;

use clap::Parser;
use nanogate::cli::LogFormat;
use tracing_subscriber::EnvFilter;

fn main() -> std::process::ExitCode {
    // Before any thread starts, so every thread allocates from the arena this sets up.
    nanogate::heap::limit_retention();
    let cli = nanogate::cli::Cli::parse();
    // In the terminal conversation, per-turn info lines would interleave with the replies.
    let default_level = if cli.is_interactive() { "warn" } else { "info" };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // journald (and any pipe) shows escape codes literally: colours only for a person at a terminal.
    let ansi = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match cli.log_format {
        LogFormat::Pretty => builder.init(),
        // One JSON object per line, fields flattened, for log shippers.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(nanogate::cli::run(cli)) {
        Ok(code) => std::process::ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
