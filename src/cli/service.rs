//! `nanogate service install [--user]`: writes the systemd unit with this installation's paths.
//!
//! The unit is generated from one function, [`unit_text`], which also produced the `systemd/nanogate.service`
//! shipped in the repository (a test keeps the two identical), so the hardening is written down once. A system
//! unit runs as an unprivileged user with a read-only view of the system and only the data directories
//! writable; a user unit (`--user`) gets the subset of the hardening that works without privileges in the user
//! manager (sandboxing options that need mount namespaces fail there unless unprivileged user namespaces are
//! available, so they are left out rather than breaking start-up on some machines).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use clap::Subcommand;

use super::Context;

/// Service subcommands.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write nanogate.service (system unit by default, user unit with --user) and print how to enable it.
    Install {
        /// Install a user unit in ~/.config/systemd/user (no root needed; runs while you are logged in, or
        /// always after `loginctl enable-linger`).
        #[arg(long)]
        user: bool,
        /// Directory to write the unit to [default: /etc/systemd/system, or ~/.config/systemd/user with --user].
        #[arg(long, value_name = "DIR")]
        dest: Option<PathBuf>,
        /// The account a system unit runs as [default: the current user]. Never root.
        #[arg(long, value_name = "USER")]
        run_as: Option<String>,
        /// Overwrite an existing unit file.
        #[arg(long)]
        force: bool,
    },
}

/// Everything that varies between installations.
#[derive(Debug, Clone)]
pub struct UnitSpec {
    /// The nanogate binary.
    pub binary: PathBuf,
    /// The config file.
    pub config: PathBuf,
    /// The workspace.
    pub workspace: PathBuf,
    /// Directories the service may write (data directory, workspace).
    pub writable: Vec<PathBuf>,
    /// `HOME` for the service (so `~` in the config resolves as it does for the user).
    pub home: PathBuf,
    /// `User=` for a system unit; `None` for a user unit.
    pub user: Option<String>,
}

/// The unit file for `spec`.
pub fn unit_text(spec: &UnitSpec) -> String {
    let system = spec.user.is_some();
    let under_home = spec
        .writable
        .iter()
        .any(|p| p.starts_with("/home") || p.starts_with("/root") || p.starts_with("/run/user"));
    let mut u = String::new();
    u.push_str(
        "# nanogate: the chat gateway daemon for a personal LLM agent.\n\
         # Written by `nanogate service install`; see systemd/README.md. Paths below are this installation's.\n\
         [Unit]\n\
         Description=nanogate chat gateway\n\
         After=network-online.target\n\
         Wants=network-online.target\n\
         \n\
         [Service]\n\
         # The daemon sends READY=1 once its channels are up, STOPPING=1 on shutdown, WATCHDOG=1 if WatchdogSec= is set.\n\
         Type=notify\n\
         NotifyAccess=main\n",
    );
    u.push_str(&format!(
        "ExecStart={} --config {} --workspace {} gateway\n",
        quote(&spec.binary),
        quote(&spec.config),
        quote(&spec.workspace)
    ));
    u.push_str(
        "Restart=on-failure\n\
         RestartSec=5\n\
         # A stopping daemon lets turns finish (gateway.shutdown_grace_secs, 30), then waits for a running\n\
         # consolidation (memory.shutdown_wait_secs, 60); raise this if you raise those.\n\
         TimeoutStopSec=120\n",
    );
    if let Some(user) = &spec.user {
        u.push_str(&format!("User={user}\n"));
    }
    u.push_str(&format!(
        "Environment={}\n",
        quote_str(&format!("HOME={}", spec.home.display()))
    ));
    u.push_str(
        "UMask=0077\n\n# Hardening: a read-only system, only the data directories writable.\n",
    );
    u.push_str("NoNewPrivileges=yes\n");
    if system {
        let writable: Vec<String> = spec.writable.iter().map(|p| quote(p)).collect();
        u.push_str(&format!(
            "ProtectSystem=strict\nReadWritePaths={}\n",
            writable.join(" ")
        ));
        // ProtectHome=yes hides /home entirely, and ReadWritePaths cannot punch through it; read-only can.
        u.push_str(if under_home {
            "ProtectHome=read-only\n"
        } else {
            "ProtectHome=yes\n"
        });
        u.push_str(
            "PrivateTmp=yes\n\
             PrivateDevices=yes\n\
             PrivateUsers=yes\n\
             ProtectKernelTunables=yes\n\
             ProtectKernelModules=yes\n\
             ProtectKernelLogs=yes\n\
             ProtectControlGroups=yes\n\
             ProtectClock=yes\n\
             ProtectHostname=yes\n\
             PrivateMounts=yes\n\
             ProtectProc=invisible\n\
             ProcSubset=pid\n\
             CapabilityBoundingSet=\n\
             AmbientCapabilities=\n\
             RemoveIPC=yes\n",
        );
    }
    u.push_str(
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n\
         RestrictNamespaces=yes\n\
         RestrictRealtime=yes\n\
         RestrictSUIDSGID=yes\n\
         LockPersonality=yes\n\
         # Breaks JIT runtimes (node, java) started by the exec tool; remove it if your agent needs them.\n\
         MemoryDenyWriteExecute=yes\n\
         SystemCallArchitectures=native\n\
         SystemCallFilter=@system-service\n\
         SystemCallFilter=~@privileged\n\
         SystemCallErrorNumber=EPERM\n\
         \n\
         [Install]\n",
    );
    u.push_str(if system {
        "WantedBy=multi-user.target\n"
    } else {
        "WantedBy=default.target\n"
    });
    u
}

/// The unit shipped in `systemd/nanogate.service`: a dedicated `nanogate` account whose home,
/// `/var/lib/nanogate`, holds the config and the workspace. (A test keeps the file equal to this.)
#[cfg(test)]
fn default_unit() -> String {
    let home = PathBuf::from("/var/lib/nanogate");
    unit_text(&UnitSpec {
        binary: PathBuf::from("/usr/local/bin/nanogate"),
        config: home.join(".nanogate/config.toml"),
        workspace: home.join(".nanogate/workspace"),
        writable: vec![home.clone()],
        home,
        user: Some("nanogate".into()),
    })
}

/// One path as a unit-file word: quoted when it holds white space or quotes, with `%` (specifier) and `$`
/// (variable) escaped so systemd passes it through literally.
fn quote(p: &Path) -> String {
    quote_str(&p.display().to_string())
}

fn quote_str(s: &str) -> String {
    let escaped = s.replace('%', "%%").replace('$', "$$");
    if escaped
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\' || c == ';')
    {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        escaped
    }
}

/// Runs one service subcommand.
pub fn run(ctx: &Context, cmd: ServiceCommand) -> Result<i32> {
    let ServiceCommand::Install {
        user,
        dest,
        run_as,
        force,
    } = cmd;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")?;
    let binary = std::env::current_exe()
        .context("cannot find the nanogate binary")?
        .canonicalize()
        .context("cannot resolve the nanogate binary's path")?;
    let config = absolute(&ctx.config_path)?;
    let workspace = absolute(&ctx.workspace)?;
    // The workspace and the data directory (cron store, REPL history) are written; the config is only read.
    let mut writable = vec![workspace.clone(), home.join(".nanogate")];
    writable.sort();
    writable.dedup();
    // A directory inside another writable one adds nothing.
    let all = writable.clone();
    writable.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    let unit_user = if user {
        None
    } else {
        let name = match run_as {
            Some(n) => n,
            None => std::env::var("USER")
                .ok()
                .filter(|u| !u.is_empty())
                .context("USER is not set; pass --run-as ACCOUNT")?,
        };
        if name == "root" || name.is_empty() || name.chars().any(|c| c.is_whitespace()) {
            bail!(
                "refusing to run the service as {name:?}: pass --run-as with an unprivileged account"
            );
        }
        Some(name)
    };
    let dir = match dest {
        Some(d) => d,
        None if user => home.join(".config/systemd/user"),
        None => PathBuf::from("/etc/systemd/system"),
    };
    let text = unit_text(&UnitSpec {
        binary,
        config,
        workspace,
        writable,
        home,
        user: unit_user,
    });
    let path = dir.join("nanogate.service");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    if force {
        open.create(true).truncate(true);
    } else {
        open.create_new(true);
    }
    let mut f = match open.open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            println!("kept {} (exists; --force overwrites)", path.display());
            return Ok(1);
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !user => {
            bail!(
                "cannot write {}: permission denied (run with sudo, or install a user unit with --user)",
                path.display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
    };
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote {}", path.display());
    let sc = if user {
        "systemctl --user"
    } else {
        "sudo systemctl"
    };
    println!("\nNow enable and start it:\n    {sc} daemon-reload\n    {sc} enable --now nanogate");
    if user {
        println!(
            "To keep it running after you log out: sudo loginctl enable-linger {}",
            std::env::var("USER").unwrap_or_default()
        );
    }
    Ok(0)
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("cannot resolve {}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_unit_is_generated() {
        let shipped = include_str!("../../systemd/nanogate.service");
        assert_eq!(
            shipped,
            default_unit(),
            "regenerate systemd/nanogate.service"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_str("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(quote_str("/a b/c"), "\"/a b/c\"");
        assert_eq!(quote_str("/a%b$c"), "/a%%b$$c");
        assert_eq!(quote_str("/a \"q\""), "\"/a \\\"q\\\"\"");
    }

    #[test]
    fn user_unit_has_no_user_line_and_targets_default() {
        let text = unit_text(&UnitSpec {
            binary: "/b".into(),
            config: "/h/.nanogate/config.toml".into(),
            workspace: "/h/.nanogate/workspace".into(),
            writable: vec!["/h/.nanogate".into()],
            home: "/h".into(),
            user: None,
        });
        assert!(!text.contains("\nUser="));
        assert!(text.contains("WantedBy=default.target"));
        assert!(text.contains("Type=notify"));
    }

    #[test]
    fn system_unit_under_home_is_read_only_home() {
        let text = unit_text(&UnitSpec {
            binary: "/b".into(),
            config: "/home/ann/.nanogate/config.toml".into(),
            workspace: "/home/ann/.nanogate/workspace".into(),
            writable: vec!["/home/ann/.nanogate".into()],
            home: "/home/ann".into(),
            user: Some("ann".into()),
        });
        assert!(text.contains("ProtectHome=read-only\n"));
        assert!(text.contains("ReadWritePaths=/home/ann/.nanogate\n"));
        assert!(text.contains("User=ann\n"));
    }
}
