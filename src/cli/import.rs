//! `nanogate import-nanobot [--from DIR] [--apply]`: the command-line face of [`crate::import`].

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::Context;
use crate::import::{self, Options};

/// Options of `import-nanobot`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// nanobot's data directory.
    #[arg(long, value_name = "DIR", default_value = "~/.nanobot")]
    from: PathBuf,
    /// Write the files (without it, only print what would be done).
    #[arg(long)]
    apply: bool,
    /// Where the cron jobs go [default: ~/.nanogate/cron/jobs.json].
    #[arg(long, value_name = "FILE")]
    cron_store: Option<PathBuf>,
}

/// Runs the import and prints its report; exit 0 even when items were skipped (the report says why).
pub async fn run(ctx: &Context, args: ImportArgs) -> Result<i32> {
    let cron_store = match args.cron_store {
        Some(p) => crate::config::expand_tilde(&p),
        None => crate::config::data_dir()?.join("cron").join("jobs.json"),
    };
    let opts = Options {
        from: crate::config::expand_tilde(&args.from),
        config_path: ctx.config_path.clone(),
        workspace: ctx.workspace.clone(),
        cron_store,
        apply: args.apply,
    };
    println!(
        "{} {} into config {}, workspace {}\n",
        if opts.apply {
            "importing"
        } else {
            "dry run: importing"
        },
        opts.from.display(),
        opts.config_path.display(),
        opts.workspace.display()
    );
    // File work only; a blocking thread keeps the runtime free.
    let report = tokio::task::spawn_blocking(move || import::run(&opts)).await??;
    print!("{}", report.render());
    Ok(0)
}
