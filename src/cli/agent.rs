//! `nanogate agent`: talk to the agent in the terminal (a REPL), or send one message with `-m`.
//!
//! The REPL keeps line-editing history across runs (`~/.nanogate/history/cli_history`), cancels the running
//! turn on Ctrl-C, exits on Ctrl-D (or `exit`), and renders markdown when stdout is a terminal. Commands
//! (`/new`, `/status`, …) work as in any chat.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use tokio::sync::mpsc;

use super::Context;
use crate::agent::{Agent, Reply, Router};
use crate::bus::{Inbound, Outbound, split_key};
use crate::channels::terminal::{Spinner, render_markdown};
use crate::config::{DEFAULT_API_BASE, data_dir};
use crate::provider::Provider;
use crate::session::SessionStore;
use crate::tools::{CronTool, default_registry};

/// Builds the agent for this workspace: takes the workspace lock, checks the provider is configured.
pub fn build_agent(
    ctx: &Context,
    outbound: Option<mpsc::UnboundedSender<Outbound>>,
) -> Result<Arc<Agent>> {
    let p = &ctx.config.provider;
    let key = p.resolve_api_key()?;
    if key.is_none() && p.api_base.trim_end_matches('/') == DEFAULT_API_BASE {
        bail!(
            "no model provider is configured: add your API key under [provider] in {} (api_key = \"sk-...\", \
             or api_key_env = \"OPENAI_API_KEY\"), or set NANOGATE_PROVIDER__API_KEY, or point provider.api_base at \
             a local OpenAI-compatible server. `nanogate onboard` writes a starter config.",
            ctx.config_path.display()
        );
    }
    let provider = Provider::new(p)?;
    let store = SessionStore::open(&ctx.workspace, ctx.config.session.store_options())?;
    let mut tools = default_registry();
    tools.register(Arc::new(CronTool::new(ctx.config.cron.store_path()?)));
    Ok(Agent::new(
        ctx.config.clone(),
        ctx.workspace.clone(),
        store,
        provider,
        tools,
        outbound,
    ))
}

/// Runs `nanogate agent`.
pub async fn run(ctx: &Context, session: String, message: Option<String>) -> Result<i32> {
    let (channel, chat_id) = split_key(&session).unwrap_or(("cli", session.as_str()));
    let (channel, chat_id) = (channel.to_owned(), chat_id.to_owned());
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let router = Router::new(build_agent(ctx, Some(out_tx))?);
    let printer = tokio::spawn(print_messages(out_rx));
    let inbound = |text: String| Inbound {
        channel: channel.clone(),
        chat_id: chat_id.clone(),
        sender: "user".into(),
        text,
        media: Vec::new(),
        session_key: Some(session.clone()),
    };
    let tty = std::io::stdout().is_terminal();

    if let Some(text) = message {
        let reply = {
            let _spin = Spinner::start("thinking…");
            router.ask(inbound(text)).await
        };
        printer.abort();
        let code = match reply {
            Some(r) if r.error => {
                eprintln!("error: {}", r.text);
                1
            }
            Some(r) => {
                print_reply(&r, tty);
                0
            }
            None => 1,
        };
        finish_memory(&router).await;
        return Ok(code);
    }

    println!(
        "nanogate — session {session}. /help for commands, Ctrl-C stops a reply, Ctrl-D exits."
    );
    let history = data_dir().ok().map(|d| d.join("history/cli_history"));
    let mut editor = Some(new_editor(history.as_ref())?);
    loop {
        let Some(ed) = editor.take() else { break };
        let (ed, line) = tokio::task::spawn_blocking(move || {
            let mut ed = ed;
            let line = ed.readline("you › ");
            (ed, line)
        })
        .await?;
        editor = Some(ed);
        let line = match line {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => bail!("cannot read from the terminal: {e}"),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if matches!(text, "exit" | "quit" | ":q") {
            break;
        }
        if let Some(ed) = editor.as_mut() {
            let _ = ed.add_history_entry(text);
            // Saved at once, so a terminal that is closed without Ctrl-D keeps the history too.
            if let Some(path) = &history {
                let _ = ed.save_history(path);
            }
        }
        let spin = Spinner::start("thinking…");
        tokio::select! {
            reply = router.ask(inbound(text.to_owned())) => {
                drop(spin);
                match reply {
                    Some(r) => print_reply(&r, tty),
                    None => println!("(stopped)"),
                }
            }
            _ = tokio::signal::ctrl_c() => {
                drop(spin);
                router.stop(&session);
                println!("(stopped)");
            }
        }
    }
    printer.abort();
    finish_memory(&router).await;
    Ok(0)
}

/// Lets a running memory consolidation finish writing before the process exits (`memory.shutdown_wait_secs`).
async fn finish_memory(router: &Router) {
    let agent = router.agent();
    let limit = std::time::Duration::from_secs(agent.config.memory.shutdown_wait_secs);
    agent.memory.wait_idle(limit).await;
}

fn new_editor(history: Option<&PathBuf>) -> Result<DefaultEditor> {
    let mut ed = DefaultEditor::new()?;
    if let Some(path) = history {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = ed.load_history(path);
    }
    Ok(ed)
}

fn print_reply(reply: &Reply, tty: bool) {
    if tty {
        println!("\n{}\n", render_markdown(&reply.text));
    } else {
        println!("{}", reply.text);
    }
}

/// Prints what the `message` tool sends while a turn runs.
async fn print_messages(mut rx: mpsc::UnboundedReceiver<Outbound>) {
    while let Some(m) = rx.recv().await {
        println!("[message to {}:{}] {}", m.channel, m.chat_id, m.text);
    }
}
