//! `exec`: runs a shell command (`sh -c`) in the workspace, with a deny list, a timeout and an output cap.
//!
//! The command runs in a new process group, so a timeout or a cancelled call kills everything it started,
//! background jobs included, not only the shell. The deny list is a seatbelt against destructive mistakes
//! (`rm -rf /`, `mkfs`, `shutdown`, …), not a sandbox: a determined command can always be written around it.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::path::{blocking, resolve};
use super::{Tool, ToolContext, ToolError, ToolFuture, args};
use super::{object_schema, truncate_chars};
use crate::json::{Json, Object};

/// How long to wait for the killed shell to be reaped before leaving it to tokio's orphan reaper.
const REAP_GRACE: Duration = Duration::from_secs(5);

/// `exec`: runs `sh -c <command>` and returns its stdout, stderr and exit code.
pub struct Exec;

impl Tool for Exec {
    fn name(&self) -> &'static str {
        "exec"
    }

    fn description(&self) -> &'static str {
        "Execute a shell command (sh -c) and return its output. Runs in the workspace unless working_dir is \
         given; long-running commands are killed after a timeout."
    }

    fn parameters(&self) -> Json {
        object_schema(
            &[
                ("command", "string", "The shell command to execute"),
                (
                    "working_dir",
                    "string",
                    "Optional working directory for the command",
                ),
            ],
            &["command"],
        )
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let command = args::string(args, "command")?;
            if command.trim().is_empty() {
                return Err(ToolError::InvalidArguments(
                    "`command` is empty; give a shell command".into(),
                ));
            }
            if let Some(rule) = deny_reason(command, &ctx.config.exec.deny) {
                return Err(ToolError::Failed(format!(
                    "command refused: it matches the deny-list pattern {rule}; this looks destructive, so run a \
                     narrower command or ask the user to run it themselves"
                )));
            }
            let cwd = working_dir(ctx, args::opt_string(args, "working_dir")?).await?;
            run(command, cwd, ctx).await
        })
    }
}

/// The directory the command runs in: `working_dir` (resolved like any tool path) or the workspace.
async fn working_dir(ctx: &ToolContext, dir: Option<&str>) -> Result<PathBuf, ToolError> {
    let ctx = ctx.clone();
    let dir = dir.map(str::to_owned);
    blocking(move || {
        let shown = dir.as_deref().unwrap_or(".");
        let path = resolve(&ctx, shown)?;
        if path.is_dir() {
            Ok(path)
        } else {
            Err(ToolError::Failed(format!(
                "working directory {} does not exist or is not a directory",
                path.display()
            )))
        }
    })
    .await
}

/// Kills a process group with SIGKILL when dropped, unless disarmed: a timed-out or cancelled call must not leave
/// the command (or anything it put in the background) running.
struct GroupKiller {
    pgid: Option<libc::pid_t>,
}

impl GroupKiller {
    /// Kills the group now (idempotent).
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: killpg only sends a signal. The group id is the unreaped shell's pid, so it cannot have
            // been reused by an unrelated group (we only disarm after reaping).
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }

    /// Leaves the group alone: the shell exited normally and has been reaped.
    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Output of one stream: the first `limit` bytes, and how many characters came after them.
#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    dropped_chars: usize,
}

impl Capture {
    /// Reads `stream` to its end, keeping at most `limit` bytes and counting the characters beyond them.
    async fn read_from(
        &mut self,
        mut stream: impl AsyncRead + Unpin,
        limit: usize,
    ) -> std::io::Result<()> {
        let mut buf = [0u8; 8192];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            let room = limit.saturating_sub(self.kept.len()).min(n);
            self.kept.extend_from_slice(&buf[..room]);
            // A UTF-8 character starts at every byte that is not a continuation byte (10xxxxxx).
            self.dropped_chars += buf[room..n].iter().filter(|b| **b & 0xC0 != 0x80).count();
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.kept).into_owned()
    }
}

/// Runs the command and formats its result.
async fn run(command: &str, cwd: PathBuf, ctx: &ToolContext) -> Result<String, ToolError> {
    let cfg = &ctx.config.exec;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| ToolError::Failed(format!("cannot start sh: {e}")))?;
    // Declared after `child`, so it is dropped (and kills) first when the call is cancelled.
    let mut killer = GroupKiller {
        pgid: child.id().and_then(|id| libc::pid_t::try_from(id).ok()),
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ToolError::Failed(
            "cannot capture the command's output".into(),
        ));
    };
    // Enough bytes for `max_output_chars` characters of any width; the rest is only counted.
    let limit = cfg.max_output_chars.saturating_mul(4).saturating_add(4);
    let (mut out, mut err) = (Capture::default(), Capture::default());
    let timeout_secs = cfg.timeout_secs.max(1);
    let finished = tokio::time::timeout(Duration::from_secs(timeout_secs), async {
        // Pipes first, then the exit status: the shell stays unreaped (its pid, our group id, reserved) until
        // everything that held its output has finished.
        tokio::try_join!(out.read_from(stdout, limit), err.read_from(stderr, limit))?;
        child.wait().await
    })
    .await;
    match finished {
        Ok(Ok(status)) => {
            killer.disarm();
            Ok(format_output(&out, &err, status, cfg.max_output_chars))
        }
        Ok(Err(e)) => Err(ToolError::Failed(format!(
            "reading the command's output failed: {e}"
        ))),
        Err(_elapsed) => {
            killer.kill();
            // Reap the shell now if it dies promptly; otherwise tokio's orphan reaper does it later.
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
            let mut message =
                format!("command timed out after {timeout_secs} s (process group killed)");
            let partial = combine(&out, &err);
            if !partial.is_empty() {
                message.push_str("\nOutput before the timeout:\n");
                message.push_str(&truncate_chars(
                    &partial,
                    cfg.max_output_chars,
                    out.dropped_chars + err.dropped_chars,
                ));
            }
            Err(ToolError::Failed(message))
        }
    }
}

/// stdout, then stderr under a `STDERR:` label (as nanobot formats them).
fn combine(out: &Capture, err: &Capture) -> String {
    let mut text = out.text();
    let stderr = err.text();
    if !stderr.trim().is_empty() || err.dropped_chars > 0 {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("STDERR:\n");
        text.push_str(&stderr);
    }
    text
}

/// The tool result: capped output, then the exit code when it is not 0 (after the cap, so it is never cut off).
fn format_output(out: &Capture, err: &Capture, status: ExitStatus, max_chars: usize) -> String {
    let combined = combine(out, err);
    let mut result = truncate_chars(&combined, max_chars, out.dropped_chars + err.dropped_chars);
    let code = match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(0), _) => None,
        (Some(code), _) => Some(code.to_string()),
        (None, Some(signal)) => Some(format!("none (killed by signal {signal})")),
        (None, None) => Some("unknown".to_owned()),
    };
    if let Some(code) = code {
        if !result.is_empty() && !result.ends_with('\n') {
            result.push('\n');
        }
        result.push_str(&format!("Exit code: {code}"));
    }
    if result.is_empty() {
        result.push_str("(no output)");
    }
    result
}

/// The deny-list rule `command` matches, named for the model (e.g. "`rm -rf /`"), or `None`.
///
/// Whitespace is normalised before matching. `extra` holds `tools.exec.deny` substrings, matched
/// case-insensitively against the normalised command.
pub fn deny_reason(command: &str, extra: &[String]) -> Option<String> {
    let normalized = command.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = normalized.to_lowercase();
    for pattern in extra {
        let p = pattern.split_whitespace().collect::<Vec<_>>().join(" ");
        if !p.is_empty() && lower.contains(&p.to_lowercase()) {
            return Some(format!("`{pattern}` (tools.exec.deny)"));
        }
    }
    let compact: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    if is_fork_bomb(&compact) {
        return Some("`:(){ :|:& };:` (fork bomb)".into());
    }
    const DISKS: [&str; 6] = ["sd", "hd", "vd", "xvd", "nvme", "mmcblk"];
    if DISKS
        .iter()
        .any(|d| compact.contains(&format!(">/dev/{d}")))
    {
        return Some("`> /dev/sd…` (writing over a disk)".into());
    }
    normalized
        .split([';', '&', '|', '(', ')', '`', '{', '}'])
        .find_map(simple_command_rule)
}

/// `NAME(){ … NAME|NAME … }`: a function that pipes into itself, the classic fork bomb, under any name.
fn is_fork_bomb(compact: &str) -> bool {
    compact.match_indices("(){").any(|(at, _)| {
        let name_start = compact[..at]
            .rfind(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '.' | '-')))
            .map_or(0, |i| i + 1);
        let name = &compact[name_start..at];
        let body = &compact[at + 3..];
        let body = body.find('}').map_or(body, |end| &body[..end]);
        !name.is_empty() && body.contains(&format!("{name}|{name}"))
    })
}

/// Words that run the command after them (`sudo rm …`), skipped to find the real command.
const WRAPPERS: [&str; 10] = [
    "sudo", "doas", "exec", "nohup", "env", "command", "builtin", "time", "nice", "busybox",
];

/// Top-level directories whose recursive removal or permission change wrecks the system.
const SYSTEM_DIRS: [&str; 16] = [
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root", "/sbin",
    "/srv", "/sys", "/usr", "/var", "/mnt",
];

/// The rule one simple command (no `;`, `&&`, `|`) breaks, if any.
fn simple_command_rule(simple: &str) -> Option<String> {
    let words: Vec<String> = simple
        .split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                .collect()
        })
        .collect();
    // Skip wrappers, their options and `VAR=value` assignments.
    let start = words.iter().position(|w| {
        !(WRAPPERS.contains(&w.as_str())
            || w.starts_with('-')
            || (w.contains('=') && !w.starts_with('=')))
    })?;
    let name = words[start].rsplit('/').next().unwrap_or("").to_lowercase();
    let rest = &words[start + 1..];
    let flags = || rest.iter().filter(|w| w.starts_with('-'));
    let targets = || rest.iter().filter(|w| !w.starts_with('-'));
    let recursive = |upper_only: bool| {
        flags().any(|f| {
            f == "--recursive"
                || (!f.starts_with("--") && (f.contains('R') || (!upper_only && f.contains('r'))))
        })
    };
    match name.as_str() {
        "rm" if recursive(false) => targets()
            .find_map(|t| dangerous_target(t, true))
            .map(|t| format!("`rm -rf {t}`")),
        "chmod" | "chown" | "chgrp" if recursive(true) => targets()
            .find_map(|t| dangerous_target(t, false))
            .map(|t| format!("`{name} -R … {t}` (e.g. chmod -R 777 /)")),
        n if n == "mkfs" || n.starts_with("mkfs.") => Some("`mkfs`".into()),
        "dd" => rest
            .iter()
            .any(|w| is_device_output(w))
            .then(|| "`dd … of=/dev/…` (writing over a device)".into()),
        "shutdown" | "reboot" | "poweroff" | "halt" => Some(format!("`{name}`")),
        "systemctl" | "loginctl" => rest
            .iter()
            .find(|w| matches!(w.as_str(), "reboot" | "poweroff" | "halt" | "kexec"))
            .map(|w| format!("`{name} {w}`")),
        "init" | "telinit" => rest
            .iter()
            .find(|w| matches!(w.as_str(), "0" | "6"))
            .map(|w| format!("`{name} {w}`")),
        _ => None,
    }
}

/// `target` (quotes already removed) as the rule names it when it is the root, home, a bare glob or a system
/// directory. `glob_too`: a bare `*` counts (for `rm`, where it empties the current directory).
fn dangerous_target(target: &str, glob_too: bool) -> Option<String> {
    let t = target.trim_end_matches("/*").trim_end_matches('/');
    let t = if t.is_empty() && target.starts_with('/') {
        "/"
    } else {
        t
    };
    let home = matches!(t.to_lowercase().as_str(), "~" | "$home" | "${home}");
    if t == "/" || t == "/." || home || SYSTEM_DIRS.contains(&t) {
        Some(if home { "~".into() } else { t.to_owned() })
    } else if glob_too && (target == "*" || target == ".*") {
        Some("*".into())
    } else {
        None
    }
}

/// Whether a `dd` operand writes to a device (`of=/dev/sda`), other than the harmless pseudo-devices.
fn is_device_output(word: &str) -> bool {
    let Some(dev) = word.strip_prefix("of=/dev/") else {
        return false;
    };
    !matches!(dev, "null" | "zero" | "stdout" | "stderr") && !dev.starts_with("fd/")
}
