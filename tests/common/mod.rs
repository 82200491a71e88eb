//! Helpers shared by the integration tests: fixture paths, temp workspaces, Python.
#![allow(dead_code)]

pub mod fake_openai;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// A temp dir holding a copy of `tests/fixtures/<rel>` (a workspace), writable.
pub fn copy_fixture_dir(rel: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    copy_dir(&fixture(rel), tmp.path());
    tmp
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
            let mut perms = std::fs::metadata(&target).expect("meta").permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).expect("chmod");
        }
    }
}

/// Runs `python3 -c script` with `input` on stdin; returns stdout. Panics with stderr on failure.
pub fn python(script: &str, input: &[u8]) -> Vec<u8> {
    python_with("python3", script, input)
}

/// Runs `interpreter -c script` with `input` on stdin; returns stdout.
pub fn python_with(interpreter: &str, script: &str, input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(interpreter)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 must be installed to run this test");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("python output");
    writer
        .join()
        .expect("writer thread")
        .expect("write to python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every `*.jsonl` session file under a directory (not recursive).
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v
}
