//! Session files: nanobot's names and history, byte-exact writes, and damaged files that lose nothing.

mod common;

use std::path::{Path, PathBuf};

use common::{copy_fixture_dir, fixture};
use nanogate::json::{Json, Object};
use nanogate::session::{
    CommitOutcome, Durability, SessionStore, StoreOptions, key, load_file, sidecar_path,
};

fn store(ws: &Path) -> SessionStore {
    SessionStore::open(ws, StoreOptions::default()).expect("open store")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).expect("read file")
}

fn lines(p: &Path) -> Vec<String> {
    String::from_utf8(read(p))
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every line of the file is what Python's `json.dumps(json.loads(line))` gives, line 1 is the header, and the
/// file ends with a newline: what nanobot's loader needs.
fn assert_nanobot_readable(p: &Path) {
    let bytes = read(p);
    assert!(
        bytes.ends_with(b"\n"),
        "{} must end with a newline",
        p.display()
    );
    let text = String::from_utf8(bytes).expect("utf-8");
    for (i, line) in text.lines().enumerate() {
        let v = Json::parse(line).unwrap_or_else(|e| panic!("{}:{}: {e}", p.display(), i + 1));
        assert_eq!(
            v.to_python(),
            line,
            "line {} is not in Python's form",
            i + 1
        );
        let o = v.as_object().expect("object");
        if i == 0 {
            assert_eq!(o.get("_type").and_then(Json::as_str), Some("metadata"));
        } else {
            assert!(
                o.get("role").and_then(Json::as_str).is_some(),
                "line {} has no role",
                i + 1
            );
        }
    }
}

fn turn(store: &SessionStore, key: &str, user: &str) -> CommitOutcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let h = store.get(key).await.expect("get");
        {
            let mut s = h.lock();
            s.add_message("user", Json::str(user), Object::new());
            s.add_message("assistant", Json::str(format!("re: {user}")), Object::new());
        }
        h.commit().await.expect("commit")
    })
}

#[test]
fn file_names_match_nanobot() {
    let names = Json::parse(
        &std::fs::read_to_string(fixture("nanobot-0.1.4/filenames.json")).expect("fixture"),
    )
    .expect("json");
    for (k, name) in names.as_object().expect("object").iter() {
        assert_eq!(
            key::file_name(k).expect("valid key"),
            name.as_str().expect("string"),
            "key {k:?}"
        );
    }
}

#[test]
fn history_matches_nanobot_get_history_for_every_fixture_session() {
    let expected = Json::parse(
        &std::fs::read_to_string(fixture("nanobot-0.1.4/history.json")).expect("fixture"),
    )
    .expect("json");
    let names = Json::parse(
        &std::fs::read_to_string(fixture("nanobot-0.1.4/filenames.json")).expect("fixture"),
    )
    .expect("json");
    let names = names.as_object().expect("object");
    let mut checked = 0;
    for (k, want) in expected.as_object().expect("object").iter() {
        let name = names
            .get(k)
            .and_then(Json::as_str)
            .unwrap_or_else(|| panic!("no file name for {k}"));
        let path = fixture("nanobot-0.1.4/workspace/sessions").join(name);
        let loaded = load_file(&path, Some(k)).expect("read").expect("exists");
        assert!(loaded.problems.is_empty(), "{k}: {:?}", loaded.problems);
        let want = want.as_object().expect("object");
        let s = &loaded.session;
        assert_eq!(
            Some(s.last_consolidated() as u64),
            want.get("last_consolidated").and_then(Json::as_u64),
            "{k}"
        );
        assert_eq!(
            Some(s.len() as u64),
            want.get("message_count").and_then(Json::as_u64),
            "{k}"
        );
        for (variant, max) in [("get_history(max_messages=6)", 6), ("get_history()", 500)] {
            let ours = Json::Array(s.history(max));
            assert_eq!(&ours, want.get(variant).expect("variant"), "{k} {variant}");
            checked += 1;
        }
    }
    assert_eq!(checked, 26);
}

#[test]
fn history_edge_cases_follow_python_slicing() {
    let ws = tempfile::tempdir().expect("tmp");
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let h = rt.block_on(st.get("t:1")).expect("get");
    let mut s = h.lock();
    assert!(s.history(500).is_empty());
    let mut tool = Object::new();
    tool.insert("tool_call_id", Json::str("c1"));
    tool.insert("name", Json::str("exec"));
    s.add_message("tool", Json::str("orphan result"), tool);
    s.add_message("assistant", Json::Null, Object::new());
    // No user message at all: nothing is dropped.
    assert_eq!(s.history(500).len(), 2);
    s.add_message("user", Json::str("hi"), Object::new());
    let mut without_content = Object::new();
    without_content.insert("role", Json::str("assistant"));
    s.push(without_content);
    let h500 = Json::Array(s.history(500)).to_python();
    assert_eq!(
        h500,
        r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]"#
    );
    // max 0 is Python's [-0:]: everything.
    assert_eq!(s.history(0).len(), 2);
    assert_eq!(
        Json::Array(s.history(1)).to_python(),
        r#"[{"role": "assistant", "content": ""}]"#
    );
}

#[test]
fn a_turn_appended_to_a_fixture_session_leaves_every_earlier_byte_unchanged() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let path = ws.path().join("sessions/telegram_12345678.jsonl");
    let before = read(&path);
    let st = store(ws.path());
    assert_eq!(
        turn(&st, "telegram:12345678", "again"),
        CommitOutcome::Appended { lines: 2 }
    );
    let after = read(&path);
    let first_nl = before.iter().position(|&b| b == b'\n').expect("line 1");
    // Line 1 keeps its length (only updated_at changes) and everything after it is untouched.
    assert_eq!(after[first_nl..before.len()], before[first_nl..]);
    assert_eq!(after[..first_nl].len(), first_nl);
    let new_lines = lines(&path);
    assert_eq!(new_lines.len(), 15);
    assert!(new_lines[13].starts_with(r#"{"role": "user", "content": "again", "timestamp": ""#));
    assert_nanobot_readable(&path);
    let reloaded = load_file(&path, None)
        .expect("read")
        .expect("exists")
        .session;
    assert_eq!(reloaded.len(), 14);
    assert_eq!(reloaded.last_consolidated(), 7);
    assert_eq!(reloaded.created_at(), "2026-11-22T09:50:26.226704");
}

#[test]
fn rewrites_keep_every_message_line_byte_identical_for_every_fixture() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    for path in common::jsonl_files(&ws.path().join("sessions")) {
        let before = lines(&path);
        let k = load_file(&path, None)
            .expect("read")
            .expect("exists")
            .session
            .key()
            .to_owned();
        let h = rt.block_on(st.get(&k)).expect("get");
        assert_eq!(h.lock().path(), path, "{k} resolves to its own file");
        h.lock()
            .metadata_mut()
            .insert("note", Json::str("a longer line 1 forces a rewrite"));
        assert_eq!(
            rt.block_on(h.commit()).expect("commit"),
            CommitOutcome::Rewritten
        );
        let after = lines(&path);
        assert_eq!(after[1..], before[1..], "{}", path.display());
        assert!(after[0].contains(r#""metadata": {"note": "a longer line 1 forces a rewrite"}"#));
        assert_nanobot_readable(&path);
    }
}

#[test]
fn nothing_to_write_means_no_write() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let h = rt.block_on(st.get("discord:987654321")).expect("get");
    assert_eq!(
        rt.block_on(h.commit()).expect("commit"),
        CommitOutcome::Unchanged
    );
}

#[test]
fn durability_os_writes_the_same_bytes() {
    let mut outputs = Vec::new();
    for durability in [Durability::Fsync, Durability::Os] {
        let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
        let st = SessionStore::open(
            ws.path(),
            StoreOptions {
                durability,
                ..Default::default()
            },
        )
        .expect("open");
        turn(&st, "cli:direct", "x");
        let text =
            String::from_utf8(read(&ws.path().join("sessions/cli_direct.jsonl"))).expect("utf8");
        // Only the times of the new turn differ between runs: blank them, compare the rest byte for byte.
        let stamp = |v: &mut Json| {
            if let Some(o) = v.as_object_mut() {
                for k in ["timestamp", "updated_at"] {
                    if o.contains_key(k) {
                        o.insert(k, Json::str("T"));
                    }
                }
            }
        };
        let lines: Vec<String> = text
            .lines()
            .map(|l| {
                let mut v = Json::parse(l).expect("json");
                stamp(&mut v);
                v.to_python()
            })
            .collect();
        assert_eq!(lines.len(), 5);
        outputs.push(lines);
    }
    assert_eq!(outputs[0], outputs[1]);
}

// ---- Two keys, one nanobot file name ----

#[test]
fn keys_that_share_a_nanobot_file_name_never_mix() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let primary = ws.path().join("sessions/telegram_a_b.jsonl");
    let before = read(&primary);
    {
        let st = store(ws.path());
        // The file's line 1 says telegram:a:b, so telegram:a_b gets its own file.
        turn(&st, "telegram:a_b", "mine");
        assert_eq!(read(&primary), before, "the other key's file is untouched");
        let alt = ws
            .path()
            .join("sessions")
            .join(key::alternate_file_name("telegram:a_b").expect("name"));
        assert_eq!(lines(&alt).len(), 3);
        assert_nanobot_readable(&alt);
        turn(&st, "telegram:a:b", "owner");
        assert_eq!(lines(&primary).len(), 7);
    }
    // After a restart, each key finds its own file again.
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let a = rt.block_on(st.get("telegram:a_b")).expect("get");
    assert_eq!(a.lock().len(), 2);
    let b = rt.block_on(st.get("telegram:a:b")).expect("get");
    assert_eq!(b.lock().len(), 6);
}

#[test]
fn two_new_keys_with_one_nanobot_name_get_two_files() {
    let ws = tempfile::tempdir().expect("tmp");
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (a, b) = rt.block_on(async { tokio::join!(st.get("x:a_b"), st.get("x:a:b")) });
    let (a, b) = (a.expect("a"), b.expect("b"));
    assert_ne!(a.lock().path(), b.lock().path());
    turn(&st, "x:a_b", "one");
    turn(&st, "x:a:b", "two");
    for h in [a, b] {
        let s = load_file(h.lock().path(), None)
            .expect("read")
            .expect("exists")
            .session;
        assert_eq!(s.key(), h.key());
        assert_eq!(s.len(), 2);
    }
}

#[test]
fn keys_that_cannot_name_a_file_are_clear_errors() {
    let ws = tempfile::tempdir().expect("tmp");
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    for (bad, words) in [
        ("", "empty"),
        ("  ", "empty"),
        ("a\0b", "NUL"),
        (&"k".repeat(300) as &str, "too long"),
    ] {
        let err = rt
            .block_on(st.get(bad))
            .err()
            .expect("must fail")
            .to_string();
        assert!(err.contains(words), "{err}");
    }
    assert!(
        std::fs::read_dir(ws.path().join("sessions"))
            .expect("dir")
            .next()
            .is_none()
    );
}

// ---- Damaged files ----

const HEADER: &str = r#"{"_type": "metadata", "key": "t:1", "created_at": "2026-01-02T03:04:05.000006", "updated_at": "2026-01-02T03:04:05.000007", "metadata": {"keep": [1.5, 10000000000000000000001]}, "last_consolidated": 1}"#;
const M1: &str = r#"{"role": "user", "content": "one", "timestamp": "2026-01-02T03:04:05.000008", "x_extra": {"b": 1, "a": 2}}"#;
const M2: &str =
    r#"{"role": "assistant", "content": "two", "timestamp": "2026-01-02T03:04:05.000009"}"#;

struct Damaged {
    _ws: tempfile::TempDir,
    ws: PathBuf,
    path: PathBuf,
}

fn damaged(bytes: &[u8]) -> Damaged {
    let dir = tempfile::tempdir().expect("tmp");
    let ws = dir.path().to_path_buf();
    std::fs::create_dir_all(ws.join("sessions")).expect("mkdir");
    let path = ws.join("sessions/t_1.jsonl");
    std::fs::write(&path, bytes).expect("write");
    Damaged { _ws: dir, ws, path }
}

/// Loads the damaged file (checking that reading changes nothing), appends a turn, and returns the messages
/// now in the file and the sidecar's bytes.
fn repair(d: &Damaged) -> (Vec<String>, Vec<u8>, Vec<nanogate::session::Problem>) {
    let original = read(&d.path);
    let side_before = std::fs::read(sidecar_path(&d.path)).ok();
    let loaded = load_file(&d.path, Some("t:1"))
        .expect("read")
        .expect("exists");
    let _ = loaded.session.history(500);
    nanogate::session::check_dir(&d.ws.join("sessions")).expect("check");
    assert_eq!(read(&d.path), original, "reading must not change the file");
    assert_eq!(
        std::fs::read(sidecar_path(&d.path)).ok(),
        side_before,
        "reading must not touch the sidecar"
    );
    let st = store(&d.ws);
    turn(&st, "t:1", "after repair");
    assert_nanobot_readable(&d.path);
    let side = std::fs::read(sidecar_path(&d.path)).unwrap_or_default();
    let lines = lines(&d.path);
    (lines, side, loaded.problems)
}

fn contents(lines: &[String]) -> Vec<String> {
    lines[1..]
        .iter()
        .map(|l| {
            let v = Json::parse(l).expect("json");
            v.as_object()
                .and_then(|o| o.get("content"))
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_bad_line_in_the_middle_moves_to_the_sidecar() {
    let d = damaged(format!("{HEADER}\n{M1}\n{{this is not json\n{M2}\n").as_bytes());
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert_eq!(side, b"{this is not json\n");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 3);
    assert!(
        problems[0].message.contains("not valid JSON"),
        "{}",
        problems[0].message
    );
    // The header kept its metadata, numbers and watermark; the message kept its extra field in order.
    assert!(lines[0].contains(
        r#""metadata": {"keep": [1.5, 10000000000000000000001]}, "last_consolidated": 1}"#
    ));
    assert_eq!(lines[1], M1);
}

#[test]
fn a_torn_last_line_goes_to_the_sidecar_and_the_next_append_starts_on_a_fresh_line() {
    let d = damaged(
        format!("{HEADER}\n{M1}\n{M2}\n{{\"role\": \"user\", \"content\": \"cut of").as_bytes(),
    );
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert_eq!(side, b"{\"role\": \"user\", \"content\": \"cut of\n");
    assert!(
        problems[0].message.contains("cut off"),
        "{}",
        problems[0].message
    );
}

#[test]
fn a_complete_last_line_without_newline_is_kept() {
    let d = damaged(format!("{HEADER}\n{M1}\n{M2}").as_bytes());
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert!(side.is_empty() && problems.is_empty());
}

#[test]
fn every_possible_crash_point_of_an_append_loses_no_committed_message() {
    // A crash can cut an append anywhere: simulate each byte position of an appended turn.
    let committed = format!("{HEADER}\n{M1}\n");
    let appended = format!("{M2}\n{M1}\n");
    for cut in 0..=appended.len() {
        let written = &appended[..cut];
        let d = damaged(format!("{committed}{written}").as_bytes());
        let (lines, side, _) = repair(&d);
        // Every line that made it to disk whole (with or without its newline) is kept; a partial line is
        // in the sidecar, byte for byte; the new turn follows on fresh lines.
        let (whole, tail) = match written.rfind('\n') {
            Some(i) => (&written[..=i], &written[i + 1..]),
            None => ("", written),
        };
        let mut want = vec!["one".to_owned()];
        want.extend(whole.lines().map(|l| {
            if l == M2 {
                "two".to_owned()
            } else {
                "one".to_owned()
            }
        }));
        if Json::parse(tail).is_ok() {
            want.push(if tail == M2 {
                "two".into()
            } else {
                "one".into()
            });
            assert!(side.is_empty(), "cut at {cut}");
        } else if tail.is_empty() {
            assert!(side.is_empty(), "cut at {cut}");
        } else {
            assert_eq!(side, format!("{tail}\n").as_bytes(), "cut at {cut}");
        }
        want.extend(["after repair".to_owned(), "re: after repair".to_owned()]);
        assert_eq!(contents(&lines), want, "cut at {cut}");
    }
}

#[test]
fn a_broken_line_1_is_rebuilt_and_messages_are_kept() {
    let d = damaged(
        format!("{{\"_type\": \"metadata\", \"key\": \"t:1\", \"crea\n{M1}\n{M2}\n").as_bytes(),
    );
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert_eq!(
        side,
        b"{\"_type\": \"metadata\", \"key\": \"t:1\", \"crea\n"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.message.contains("no metadata line"))
    );
    let header = Json::parse(&lines[0]).expect("json");
    let h = header.as_object().expect("object");
    assert_eq!(h.get("key").and_then(Json::as_str), Some("t:1"));
    // created_at is taken from the first message when line 1 is lost.
    assert_eq!(
        h.get("created_at").and_then(Json::as_str),
        Some("2026-01-02T03:04:05.000008")
    );
    assert_eq!(h.get("last_consolidated").and_then(Json::as_u64), Some(0));
}

#[test]
fn a_missing_line_1_is_rebuilt_from_the_file_name() {
    let d = damaged(format!("{M1}\n{M2}\n").as_bytes());
    let loaded = load_file(&d.path, None).expect("read").expect("exists");
    assert_eq!(loaded.session.key(), "t:1");
    let (lines, side, _) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert!(side.is_empty());
}

#[test]
fn a_line_1_with_wrong_field_types_is_salvaged_and_kept_in_the_sidecar() {
    let bad = r#"{"_type": "metadata", "key": "t:1", "created_at": "2026-01-02T03:04:05", "updated_at": "2026-01-02T03:04:06", "metadata": {"a": 1}, "last_consolidated": "1"}"#;
    let d = damaged(format!("{bad}\n{M1}\n{M2}\n").as_bytes());
    let (lines, side, problems) = repair(&d);
    assert_eq!(side, format!("{bad}\n").as_bytes());
    assert!(
        problems[0]
            .message
            .contains("last_consolidated is not a non-negative integer"),
        "{problems:?}"
    );
    assert!(lines[0].contains(r#""created_at": "2026-01-02T03:04:05", "#));
    assert!(lines[0].contains(r#""metadata": {"a": 1}, "last_consolidated": 0}"#));
}

#[test]
fn a_byte_order_mark_is_removed_and_nothing_else_changes() {
    let d = damaged(format!("\u{feff}{HEADER}\n{M1}\n{M2}\n").as_bytes());
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert!(side.is_empty());
    assert!(problems[0].message.contains("byte-order mark"));
    assert!(!read(&d.path).starts_with(b"\xEF\xBB\xBF"));
}

#[test]
fn crlf_line_endings_and_blank_lines_are_normalised_without_loss() {
    let d = damaged(format!("{HEADER}\r\n\r\n{M1}\r\n   \n\n{M2}\r\n").as_bytes());
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert!(side.is_empty() && problems.is_empty(), "{problems:?}");
    assert!(!read(&d.path).contains(&b'\r'));
}

#[test]
fn a_second_metadata_line_wins_as_in_nanobot_and_the_first_is_kept() {
    let second = HEADER.replace(r#""last_consolidated": 1"#, r#""last_consolidated": 2"#);
    let d = damaged(format!("{HEADER}\n{M1}\n{second}\n{M2}\n").as_bytes());
    let (lines, side, _) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert_eq!(side, format!("{HEADER}\n").as_bytes());
    assert!(lines[0].ends_with(r#""last_consolidated": 2}"#));
}

#[test]
fn a_five_megabyte_line_is_kept_and_a_five_megabyte_bad_line_is_moved() {
    let big = "x".repeat(5 * 1024 * 1024);
    let good =
        format!(r#"{{"role": "user", "content": "{big}", "timestamp": "2026-01-02T03:04:05"}}"#);
    let bad = format!(r#"{{"role": "user", "content": "{big}"#);
    let d = damaged(format!("{HEADER}\n{good}\n{bad}\n{M2}\n").as_bytes());
    let (lines, side, _) = repair(&d);
    assert_eq!(lines[1], good);
    assert_eq!(side.len(), bad.len() + 1);
    assert_eq!(
        contents(&lines)[1..],
        ["two", "after repair", "re: after repair"]
    );
}

#[test]
fn lines_that_are_not_messages_are_moved_byte_for_byte() {
    let mut bytes = format!("{HEADER}\n{M1}\n").into_bytes();
    let not_utf8: &[u8] = b"{\"role\": \"user\", \"content\": \"\xff\xfe\"}";
    let nul: &[u8] = b"{\"role\": \"user\", \"content\": \"a\0b\"}";
    let no_role: &[u8] = br#"{"content": "who said this?"}"#;
    let not_object: &[u8] = b"[1, 2, 3]";
    for l in [not_utf8, nul, no_role, not_object] {
        bytes.extend_from_slice(l);
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(format!("{M2}\n").as_bytes());
    let d = damaged(&bytes);
    let (lines, side, problems) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    let want: Vec<u8> = [not_utf8, nul, no_role, not_object]
        .iter()
        .flat_map(|l| [*l, b"\n"].concat())
        .collect();
    assert_eq!(side, want);
    let lines_reported: Vec<usize> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines_reported, [3, 4, 5, 6]);
    assert!(problems[0].message.contains("UTF-8"));
    assert!(problems[1].message.contains("NUL"));
    assert!(problems[2].message.contains("role"));
    assert!(problems[3].message.contains("not an object"));
}

#[test]
fn the_sidecar_is_appended_to_not_replaced() {
    let d = damaged(format!("{HEADER}\n{M1}\nfirst bad\n").as_bytes());
    std::fs::write(sidecar_path(&d.path), b"older bad\n").expect("write");
    let (_, side, _) = repair(&d);
    assert_eq!(side, b"older bad\nfirst bad\n");
}

#[test]
fn a_watermark_beyond_the_messages_is_clamped() {
    let d = damaged(
        format!(
            "{}\n{M1}\n",
            HEADER.replace(r#""last_consolidated": 1"#, r#""last_consolidated": 99"#)
        )
        .as_bytes(),
    );
    let loaded = load_file(&d.path, None).expect("read").expect("exists");
    assert_eq!(loaded.session.last_consolidated(), 1);
    assert!(loaded.problems[0].message.contains("99"));
    let (lines, _, _) = repair(&d);
    assert!(lines[0].ends_with(r#""last_consolidated": 1}"#));
}

#[test]
fn an_empty_file_becomes_a_session() {
    let d = damaged(b"");
    let (lines, side, problems) = repair(&d);
    assert_eq!(contents(&lines), ["after repair", "re: after repair"]);
    assert!(side.is_empty());
    assert!(problems[0].message.contains("empty"));
}

#[test]
fn a_file_changed_behind_our_back_is_kept_not_overwritten() {
    let d = damaged(format!("{HEADER}\n{M1}\n").as_bytes());
    let st = store(&d.ws);
    turn(&st, "t:1", "first");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&d.path)
        .expect("open");
    std::io::Write::write_all(&mut f, format!("{M2}\n").as_bytes()).expect("write");
    let theirs = read(&d.path);
    turn(&st, "t:1", "second");
    let kept: Vec<PathBuf> = std::fs::read_dir(d.ws.join("sessions"))
        .expect("dir")
        .map(|e| e.expect("e").path())
        .filter(|p| p.to_string_lossy().contains(".conflict-"))
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(read(&kept[0]), theirs);
    assert_eq!(
        contents(&lines(&d.path)),
        ["one", "first", "re: first", "second", "re: second"]
    );
}

#[test]
fn a_same_size_edit_behind_our_back_is_noticed_too() {
    let d = damaged(format!("{HEADER}\n{M1}\n").as_bytes());
    let st = store(&d.ws);
    turn(&st, "t:1", "first");
    let edited = String::from_utf8(read(&d.path))
        .expect("utf8")
        .replace("\"one\"", "\"ONE\"");
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&d.path, &edited).expect("write");
    turn(&st, "t:1", "second");
    let kept = std::fs::read_dir(d.ws.join("sessions"))
        .expect("dir")
        .map(|e| e.expect("e").path())
        .find(|p| p.to_string_lossy().contains(".conflict-"))
        .expect("the edited version is kept");
    assert_eq!(String::from_utf8(read(&kept)).expect("utf8"), edited);
}

#[test]
fn a_deferred_load_skips_bad_lines_in_history_and_repairs_them_at_the_first_write() {
    let d = damaged(format!("{HEADER}\n{M1}\n{{\"oops\": tru}}\n{M2}\n").as_bytes());
    let loaded = nanogate::session::load_file_deferred(&d.path, Some("t:1"))
        .expect("read")
        .expect("exists");
    // The bad line looked like an object, so it was not checked yet: no problem reported, nothing written.
    assert!(loaded.problems.is_empty());
    let history = Json::Array(loaded.session.history(500)).to_python();
    assert_eq!(
        history, r#"[{"role": "assistant", "content": "two"}]"#,
        "watermark 1 skips M1; the bad line is left out"
    );
    // The store loads this way; its first write still moves the line to the sidecar.
    let (lines, side, _) = repair(&d);
    assert_eq!(
        contents(&lines),
        ["one", "two", "after repair", "re: after repair"]
    );
    assert_eq!(side, b"{\"oops\": tru}\n");
}

#[test]
fn an_alternate_file_owned_by_another_key_is_a_clear_error_not_a_mix() {
    let ws = tempfile::tempdir().expect("tmp");
    let dir = ws.path().join("sessions");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let alt = dir.join(key::alternate_file_name("telegram:a_b").expect("name"));
    let foreign = HEADER.replace(r#""key": "t:1""#, r#""key": "someone:else""#);
    std::fs::write(&alt, format!("{foreign}\n{M1}\n")).expect("write");
    let before = read(&alt);
    let st = store(ws.path());
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let err = rt
        .block_on(st.get("telegram:a_b"))
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        err.contains("someone:else") && err.contains("rename or archive"),
        "{err}"
    );
    assert_eq!(read(&alt), before);
}
