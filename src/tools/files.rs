//! File tools: `read_file`, `write_file`, `edit_file`, `list_dir` (nanobot's names and parameters).
//!
//! Paths go through [`resolve`], so `tools.restrict_to_workspace` applies to every one of them. File I/O runs
//! on tokio's blocking pool.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use super::path::{blocking, resolve};
use super::{Tool, ToolContext, ToolError, ToolFuture, args, object_schema};
use crate::json::{Json, Object};

/// Largest file `read_file` and `edit_file` load (1 MB): more would flood the model's context.
pub const MAX_READ_BYTES: u64 = 1_000_000;

/// Most entries `list_dir` shows; the rest are counted.
pub const MAX_LIST_ENTRIES: usize = 1000;

/// An I/O error as a message that names the path and the operation.
fn io_error(action: &str, shown: &str, e: &io::Error) -> ToolError {
    let reason = match e.kind() {
        io::ErrorKind::NotFound => "it does not exist".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => e.to_string(),
    };
    ToolError::Failed(format!("cannot {action} {shown}: {reason}"))
}

/// The UTF-8 text of the file at `path`, refusing directories, files over [`MAX_READ_BYTES`] and binary data.
fn read_text(path: &Path, shown: &str) -> Result<String, ToolError> {
    let file = fs::File::open(path).map_err(|e| io_error("read", shown, &e))?;
    let meta = file.metadata().map_err(|e| io_error("read", shown, &e))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{shown} is a directory; use list_dir to see what is in it"
        )));
    }
    let too_big = || {
        ToolError::Failed(format!(
            "{shown} is larger than 1 MB ({} bytes); read part of it with exec, e.g. `head -n 200 {shown}` or `grep -n PATTERN {shown}`",
            meta.len()
        ))
    };
    if meta.len() > MAX_READ_BYTES {
        return Err(too_big());
    }
    // `take` bounds the read even if the file grows after the size check.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_READ_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error("read", shown, &e))?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(too_big());
    }
    let binary = || {
        ToolError::Failed(format!(
            "{shown} is not UTF-8 text (a binary file?); inspect it with exec, e.g. `file {shown}` or `xxd {shown} | head`"
        ))
    };
    if bytes.contains(&0) {
        return Err(binary());
    }
    String::from_utf8(bytes).map_err(|_| binary())
}

/// `read_file`: the text of one file.
pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn description(&self) -> &'static str {
        "Read the contents of a UTF-8 text file (up to 1 MB). Relative paths are relative to the workspace."
    }

    fn parameters(&self) -> Json {
        object_schema(&[("path", "string", "The file path to read")], &["path"])
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let shown = args::string(args, "path")?.to_owned();
            let ctx = ctx.clone();
            blocking(move || {
                let path = resolve(&ctx, &shown)?;
                let text = read_text(&path, &shown)?;
                Ok(if text.is_empty() {
                    "(empty file)".to_owned()
                } else {
                    text
                })
            })
            .await
        })
    }
}

/// `write_file`: creates or replaces a file, creating missing parent directories.
pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn description(&self) -> &'static str {
        "Write content to a file, replacing it if it exists. Parent directories are created as needed."
    }

    fn parameters(&self) -> Json {
        object_schema(
            &[
                ("path", "string", "The file path to write to"),
                ("content", "string", "The content to write"),
            ],
            &["path", "content"],
        )
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let shown = args::string(args, "path")?.to_owned();
            let content = args::string(args, "content")?.to_owned();
            let ctx = ctx.clone();
            blocking(move || {
                let path = resolve(&ctx, &shown)?;
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)
                        .map_err(|e| io_error("create the directory for", &shown, &e))?;
                }
                fs::write(&path, content.as_bytes()).map_err(|e| io_error("write", &shown, &e))?;
                Ok(format!(
                    "Wrote {} bytes to {}",
                    content.len(),
                    path.display()
                ))
            })
            .await
        })
    }
}

/// `edit_file`: replaces exactly one occurrence of `old_text` with `new_text`.
pub struct EditFile;

impl Tool for EditFile {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn description(&self) -> &'static str {
        "Edit a file by replacing old_text with new_text. old_text must appear exactly once in the file."
    }

    fn parameters(&self) -> Json {
        object_schema(
            &[
                ("path", "string", "The file path to edit"),
                (
                    "old_text",
                    "string",
                    "The exact text to find and replace (must occur exactly once)",
                ),
                ("new_text", "string", "The text to replace it with"),
            ],
            &["path", "old_text", "new_text"],
        )
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let shown = args::string(args, "path")?.to_owned();
            let old = args::string(args, "old_text")?.to_owned();
            let new = args::string(args, "new_text")?.to_owned();
            if old.is_empty() {
                return Err(ToolError::InvalidArguments(
                    "`old_text` is empty; give the exact text to replace".into(),
                ));
            }
            let ctx = ctx.clone();
            blocking(move || {
                let path = resolve(&ctx, &shown)?;
                let text = read_text(&path, &shown)?;
                match text.matches(old.as_str()).count() {
                    0 => Err(ToolError::Failed(format!(
                        "old_text not found in {shown}; read the file and copy the text exactly, whitespace included"
                    ))),
                    1 => {
                        let edited = text.replacen(old.as_str(), &new, 1);
                        fs::write(&path, edited).map_err(|e| io_error("write", &shown, &e))?;
                        Ok(format!("Edited {}", path.display()))
                    }
                    n => Err(ToolError::Failed(format!(
                        "old_text appears {n} times in {shown}; add more context to make it unique"
                    ))),
                }
            })
            .await
        })
    }
}

/// `list_dir`: the entries of a directory, sorted by name, directories marked with a trailing `/`.
///
/// (nanobot prints `📁 name` / `📄 name`; a trailing slash says the same in fewer tokens.)
pub struct ListDir;

impl Tool for ListDir {
    fn name(&self) -> &'static str {
        "list_dir"
    }

    fn description(&self) -> &'static str {
        "List a directory's entries, sorted by name; directories end with `/`."
    }

    fn parameters(&self) -> Json {
        object_schema(
            &[("path", "string", "The directory path to list")],
            &["path"],
        )
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let shown = args::string(args, "path")?.to_owned();
            let ctx = ctx.clone();
            blocking(move || {
                let path = resolve(&ctx, &shown)?;
                list(&path, &shown)
            })
            .await
        })
    }
}

/// The listing `list_dir` returns.
fn list(path: &Path, shown: &str) -> Result<String, ToolError> {
    let meta = fs::metadata(path).map_err(|e| io_error("list", shown, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{shown} is not a directory; use read_file to read a file"
        )));
    }
    let mut names = Vec::new();
    for entry in fs::read_dir(path).map_err(|e| io_error("list", shown, &e))? {
        let entry = entry.map_err(|e| io_error("list", shown, &e))?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        // `Path::is_dir` follows symlinks, so a link to a directory is shown as one.
        if entry.path().is_dir() {
            name.push('/');
        }
        names.push(name);
    }
    if names.is_empty() {
        return Ok("(empty directory)".into());
    }
    names.sort_unstable();
    let more = names.len().saturating_sub(MAX_LIST_ENTRIES);
    names.truncate(MAX_LIST_ENTRIES);
    let mut out = names.join("\n");
    if more > 0 {
        out.push_str(&format!(
            "\n... and {more} more entries (use exec with ls or find to filter)"
        ));
    }
    Ok(out)
}
