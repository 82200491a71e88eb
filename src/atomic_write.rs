//! Replacing a file so that a crash leaves either the old or the new content, never a mix: the one
//! implementation the session store, the cron store, the memory files and the channels' state files share.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Writes `parts` to a temporary file beside `path`, optionally fsyncs it, renames it over `path` and fsyncs
/// the directory. The old file stays intact until the rename; permissions of an existing file are kept.
pub fn write_atomic(path: &Path, parts: &[&[u8]], durable: bool) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        if let Ok(old) = fs::metadata(path) {
            f.set_permissions(old.permissions())?;
        }
        for p in parts {
            f.write_all(p)?;
        }
        if durable {
            f.sync_all()?;
        }
        drop(f);
        fs::rename(&tmp, path)?;
        if durable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
