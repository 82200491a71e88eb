//! `nanogate onboard`: a starter `config.toml` and the workspace templates, never overwriting without `--force`.

use std::path::Path;

use anyhow::{Context as _, Result};

/// The config file written by `onboard`: the documented example.
const CONFIG_TEMPLATE: &str = include_str!("../../config.toml.example");

/// Workspace templates, embedded in the binary: (path inside the workspace, content).
pub const WORKSPACE_TEMPLATES: [(&str, &str); 5] = [
    ("AGENTS.md", include_str!("../../workspace/AGENTS.md")),
    ("SOUL.md", include_str!("../../workspace/SOUL.md")),
    ("USER.md", include_str!("../../workspace/USER.md")),
    ("HEARTBEAT.md", include_str!("../../workspace/HEARTBEAT.md")),
    (
        "memory/MEMORY.md",
        include_str!("../../workspace/memory/MEMORY.md"),
    ),
];

/// Writes the config file and the templates; prints what it did with each file.
pub fn run(config_path: &Path, workspace: &Path, force: bool) -> Result<()> {
    write(config_path, CONFIG_TEMPLATE, force)?;
    for (rel, text) in WORKSPACE_TEMPLATES {
        write(&workspace.join(rel), text, force)?;
    }
    for dir in ["sessions", "skills", "memory"] {
        std::fs::create_dir_all(workspace.join(dir))
            .with_context(|| format!("cannot create {}", workspace.join(dir).display()))?;
    }
    println!(
        "\nNext: add your API key, the one line nanogate needs, to {} under [provider]:\n    api_key = \"sk-...\"\n\
         (or set NANOGATE_PROVIDER__API_KEY, or point api_base at a local server), then talk to your agent:\n    nanogate agent",
        config_path.display()
    );
    Ok(())
}

fn write(path: &Path, text: &str, force: bool) -> Result<()> {
    if path.exists() && !force {
        println!("kept     {} (exists; --force overwrites)", path.display());
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let existed = path.exists();
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "{} {}",
        if existed { "replaced" } else { "created " },
        path.display()
    );
    Ok(())
}
