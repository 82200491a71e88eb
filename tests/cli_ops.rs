//! The operations commands through the real binary: `sessions fork`, `service install`, `--log-format`.

mod common;

use std::process::Command;

use common::{copy_fixture_dir, nanogate, nanogate_command, stderr, stdout};
use nanogate::json::Json;
use nanogate::session::{find_session, load_file};

#[test]
fn fork_copies_a_prefix_with_the_watermark_and_metadata() {
    let home = tempfile::tempdir().unwrap();
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let w = ws.path().to_str().unwrap();
    let dir = ws.path().join("sessions");
    let src_path = dir.join("telegram_12345678.jsonl");
    let src_before = std::fs::read(&src_path).unwrap();
    let source = load_file(&src_path, None).unwrap().unwrap().session;
    assert_eq!((source.len(), source.last_consolidated()), (12, 7));

    // Past the watermark: the fork keeps it. Before it: the fork's watermark is N.
    for (at, to, watermark) in [(10, "telegram:fork-a", 7), (4, "telegram:fork-b", 4)] {
        let o = nanogate(
            home.path(),
            &[
                "sessions",
                "fork",
                "telegram:12345678",
                "--at",
                &at.to_string(),
                "--to",
                to,
                "--workspace",
                w,
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains(&format!("forked \"telegram:12345678\" at {at}")));
        let fork = find_session(&dir, to).unwrap().unwrap().session;
        assert_eq!(fork.key(), to);
        assert_eq!((fork.len(), fork.last_consolidated()), (at, watermark));
        assert_eq!(fork.metadata(), source.metadata());
        for i in 0..at {
            assert_eq!(
                fork.messages().text(i),
                source.messages().text(i),
                "message {i}"
            );
        }
    }
    assert_eq!(
        std::fs::read(&src_path).unwrap(),
        src_before,
        "the source is never written"
    );

    // Refusals, with nothing written.
    let before: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for (args, says) in [
        (
            vec!["telegram:12345678", "--at", "13", "--to", "telegram:x"],
            "has 12 messages",
        ),
        (
            vec!["telegram:12345678", "--at", "2", "--to", "telegram:fork-a"],
            "already exists",
        ),
        (
            vec!["telegram:nope", "--at", "1", "--to", "telegram:y"],
            "no session",
        ),
    ] {
        let mut full = vec!["sessions", "fork"];
        full.extend(args);
        full.extend(["--workspace", w]);
        let o = nanogate(home.path(), &full);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
    let after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn service_install_writes_the_unit_once_and_prints_the_commands() {
    let home = tempfile::tempdir().unwrap();
    let dest = home.path().join("units");
    let d = dest.to_str().unwrap();
    // The unit runs as the user who installs it.
    let install = |args: &[&str]| {
        let args = [&["service", "install"][..], args].concat();
        nanogate_command(home.path(), &args, &[("USER", "ann")])
            .output()
            .unwrap()
    };
    let o = install(&["--dest", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("sudo systemctl daemon-reload"));
    assert!(out.contains("sudo systemctl enable --now nanogate"));
    let unit = std::fs::read_to_string(dest.join("nanogate.service")).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_nanogate")).unwrap();
    let data = home.path().join(".nanogate");
    assert!(unit.contains(&format!(
        "ExecStart={} --config {} --workspace {} gateway\n",
        exe.display(),
        data.join("config.toml").display(),
        data.join("workspace").display()
    )));
    assert!(unit.contains("User=ann\n"));
    assert!(unit.contains("Type=notify\n"));
    assert!(unit.contains(&format!("ReadWritePaths={}\n", data.display())));
    assert!(unit.contains(&format!("Environment=HOME={}\n", home.path().display())));

    // Never overwritten without --force.
    std::fs::write(dest.join("nanogate.service"), "mine").unwrap();
    let o = install(&["--dest", d]);
    assert!(!o.status.success());
    assert!(stdout(&o).contains("--force overwrites"));
    assert_eq!(
        std::fs::read_to_string(dest.join("nanogate.service")).unwrap(),
        "mine"
    );
    let o = install(&["--dest", d, "--force"]);
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(dest.join("nanogate.service")).unwrap(),
        unit
    );

    // A user unit.
    let o = install(&["--user"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("systemctl --user daemon-reload"));
    let user_unit =
        std::fs::read_to_string(home.path().join(".config/systemd/user/nanogate.service")).unwrap();
    assert!(!user_unit.contains("\nUser="));
    assert!(user_unit.contains("WantedBy=default.target"));

    // Never as root.
    let o = install(&["--dest", d, "--force", "--run-as", "root"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unprivileged"));
}

#[test]
fn log_format_json_writes_one_object_per_line_without_colours() {
    let home = tempfile::tempdir().unwrap();
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let w = ws.path().to_str().unwrap();
    // `sessions repair` logs one info line per repaired file; make one damaged file.
    let f = ws.path().join("sessions/cli_direct.jsonl");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("{not json\n");
    std::fs::write(&f, text).unwrap();
    let o = nanogate(
        home.path(),
        &[
            "--log-format",
            "json",
            "sessions",
            "repair",
            "--workspace",
            w,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert!(!lines.is_empty(), "expected log lines");
    for line in &lines {
        let v = Json::parse(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let o = v.as_object().unwrap();
        assert!(
            o.get("level").is_some() && o.get("timestamp").is_some(),
            "{line}"
        );
    }
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes when stderr is not a terminal"
    );

    // pretty (the default): plain text, no colours in a pipe, and RUST_LOG is respected.
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("{not json again\n");
    std::fs::write(&f, text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_nanogate"))
        .args(["sessions", "repair", "--workspace", w])
        .env("HOME", home.path())
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        !stderr(&o).contains("WARN"),
        "RUST_LOG=error hides warnings: {}",
        stderr(&o)
    );
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("{and again\n");
    std::fs::write(&f, text).unwrap();
    let o = nanogate(home.path(), &["sessions", "repair", "--workspace", w]);
    let err = stderr(&o);
    assert!(err.contains("WARN"), "{err}");
    assert!(!err.contains('\u{1b}'));
    assert!(Json::parse(err.lines().next().unwrap()).is_err());
}
