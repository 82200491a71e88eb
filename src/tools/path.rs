//! Where a tool's `path` argument points: `~` expansion, workspace-relative paths, and the workspace fence.
//!
//! With `tools.restrict_to_workspace` a path must stay inside the workspace after symlinks are resolved. The
//! path may not exist yet (`write_file` creates it), so the longest existing ancestor is canonicalized and the
//! missing rest is appended; `..` in that missing rest cannot be resolved against the file system and is
//! refused, and so is a dangling symlink, because writing through it would create its (possibly outside)
//! target. This fences the model in against mistakes, not against a race with another process that swaps a
//! directory for a symlink between the check and the use.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::{ToolContext, ToolError};

/// Resolves a tool's `path` argument: `~` is `$HOME`, a relative path is relative to the workspace, and with
/// `restrict_to_workspace` the result (symlinks resolved) must lie inside the workspace.
///
/// With the restriction the returned path is canonical; without it, it is the expanded path as given.
pub fn resolve(ctx: &ToolContext, path: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Err(ToolError::InvalidArguments(
            "`path` is empty; give a file or directory path".into(),
        ));
    }
    let joined = ctx.workspace.join(expand_home(path)?);
    if !ctx.config.restrict_to_workspace {
        return Ok(joined);
    }
    let workspace = canonicalize_partial(&ctx.workspace, &ctx.workspace.display().to_string())?;
    let resolved = canonicalize_partial(&joined, path)?;
    if resolved.starts_with(&workspace) {
        return Ok(resolved);
    }
    let via = if Path::new(path) == resolved {
        String::new()
    } else {
        format!(" (it resolves to {})", resolved.display())
    };
    Err(ToolError::Failed(format!(
        "path {path}{via} is outside the workspace {} (tools.restrict_to_workspace is on)",
        workspace.display()
    )))
}

/// Runs blocking file-system work on tokio's blocking pool, so a slow disk does not stall the runtime.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Failed(format!("file operation did not finish: {e}")))?
}

/// `~` and `~/…` become `$HOME` and `$HOME/…`; other paths are returned unchanged.
fn expand_home(path: &str) -> Result<PathBuf, ToolError> {
    let rest = match path.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
        // `~user` is not expanded: it is a plain (relative) name.
        _ => return Ok(PathBuf::from(path)),
    };
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(rest)),
        None => Err(ToolError::Failed(format!(
            "cannot expand `~` in {path}: HOME is not set; use an absolute or workspace-relative path"
        ))),
    }
}

/// `path` made absolute with symlinks resolved, for a path whose tail may not exist yet.
///
/// `shown` is how the path is named in errors (the argument as the model wrote it).
fn canonicalize_partial(path: &Path, shown: &str) -> Result<PathBuf, ToolError> {
    let absolute = std::path::absolute(path)
        .map_err(|e| ToolError::Failed(format!("cannot resolve path {shown}: {e}")))?;
    for ancestor in absolute.ancestors() {
        let Ok(canonical) = std::fs::canonicalize(ancestor) else {
            continue;
        };
        let rest = absolute.strip_prefix(ancestor).unwrap_or(Path::new(""));
        if rest.as_os_str().is_empty() {
            // `join("")` would add a trailing `/`, which makes a file path fail with ENOTDIR.
            return Ok(canonical);
        }
        check_missing_rest(&canonical, rest, shown)?;
        return Ok(canonical.join(rest));
    }
    // Not even `/` canonicalizes: nothing sensible can be checked.
    Err(ToolError::Failed(format!(
        "cannot resolve path {shown}: no part of it exists"
    )))
}

/// Checks the part of a path below its longest existing ancestor `base`: plain names only, and the first of them
/// must really be missing (if it exists, canonicalize failed on it: a dangling symlink or an unreadable entry).
fn check_missing_rest(base: &Path, rest: &Path, shown: &str) -> Result<(), ToolError> {
    let mut components = rest.components().peekable();
    if let Some(Component::Normal(first)) = components.peek() {
        match std::fs::symlink_metadata(base.join(first)) {
            // NotADirectory: the base is a file; the caller's own operation will say so.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            _ => {
                return Err(ToolError::Failed(format!(
                    "cannot resolve path {shown}: {} is a dangling symlink or cannot be read",
                    base.join(first).display()
                )));
            }
        }
    }
    for component in components {
        if !matches!(component, Component::Normal(_)) {
            return Err(ToolError::Failed(format!(
                "path {shown} uses `..` below a directory that does not exist; write the path without `..`"
            )));
        }
    }
    Ok(())
}
