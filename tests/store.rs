//! The session store: one shared session per key, eviction, clear with archive, list, the workspace lock.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::copy_fixture_dir;
use nanogate::json::{Json, Object};
use nanogate::session::{SessionError, SessionStore, StoreOptions, load_file};

fn opts(idle_minutes: u64) -> StoreOptions {
    StoreOptions {
        cache_idle: Duration::from_secs(idle_minutes * 60),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_callers_share_one_session_and_one_read() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.get("telegram:12345678").await })
        })
        .collect();
    let mut handles = Vec::new();
    for t in tasks {
        handles.push(t.await.expect("task").expect("get"));
    }
    assert!(handles.iter().all(|h| h.ptr_eq(&handles[0])));
    assert_eq!(store.loads(), 1, "the file is read once");
    assert_eq!(handles[0].lock().len(), 12);
    // A change through one handle is seen through all.
    handles[5]
        .lock()
        .add_message("user", Json::str("seen by all"), Object::new());
    assert_eq!(handles[77].lock().len(), 13);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_turns_on_many_keys_all_land() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let h = store
                    .get(&format!("telegram:{}", i % 10))
                    .await
                    .expect("get");
                h.lock()
                    .add_message("user", Json::str(format!("m{i}")), Object::new());
                h.commit().await.expect("commit");
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let total: usize = store
        .list()
        .await
        .expect("list")
        .iter()
        .map(|s| s.messages)
        .sum();
    assert_eq!(total, 50);
    assert_eq!(store.loads(), 10);
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_leave_the_cache_unless_held_or_unwritten() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let held = store.get("k:held").await.expect("get");
    let dirty = store.get("k:dirty").await.expect("get");
    dirty
        .lock()
        .add_message("user", Json::str("not committed"), Object::new());
    drop(dirty);
    drop(store.get("k:idle").await.expect("get"));
    let clean = store.get("k:clean").await.expect("get");
    clean
        .lock()
        .add_message("user", Json::str("committed"), Object::new());
    clean.commit().await.expect("commit");
    drop(clean);

    tokio::time::advance(Duration::from_secs(29 * 60)).await;
    assert_eq!(store.evict_idle(), 0);
    tokio::time::advance(Duration::from_secs(2 * 60)).await;
    // k:idle (never written, nothing to write) and k:clean leave; k:held is in use; k:dirty has unwritten turns.
    assert_eq!(store.evict_idle(), 2);
    assert_eq!(store.cached(), 2);
    let dirty = store.get("k:dirty").await.expect("get");
    assert_eq!(
        dirty.lock().len(),
        1,
        "the unwritten message is still there"
    );
    assert_eq!(held.lock().len(), 0);
    // An evicted session comes back from its file.
    let loads = store.loads();
    assert_eq!(store.get("k:clean").await.expect("get").lock().len(), 1);
    assert_eq!(store.loads(), loads + 1);
}

/// Two keys with one nanobot file name (`telegram:a_b`, `telegram:a:b`) stay apart however often the cache
/// evicts them: once a session has left the cache its file's line 1 says who owns the name, and a key that
/// never wrote anything holds no name.
#[tokio::test(start_paused = true)]
async fn keys_sharing_a_file_name_stay_apart_across_evictions() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(1)).expect("open");
    let name = |h: &nanogate::session::SessionHandle| {
        let s = h.lock();
        s.path()
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned()
    };
    let evict = || async {
        tokio::time::advance(Duration::from_secs(120)).await;
        store.evict_idle()
    };

    // A key that only looked, wrote nothing and left does not keep the name from the other key.
    drop(store.get("telegram:a_b").await.expect("get"));
    assert_eq!(evict().await, 1);
    let owner = store.get("telegram:a:b").await.expect("get");
    owner
        .lock()
        .add_message("user", Json::str("owner's"), Object::new());
    owner.commit().await.expect("commit");
    assert_eq!(name(&owner), "telegram_a_b.jsonl");
    drop(owner);
    assert_eq!(evict().await, 1);

    // The first key comes back after the owner left the cache: the file's line 1 sends it to its own file.
    let other = store.get("telegram:a_b").await.expect("get");
    assert_eq!(other.lock().len(), 0, "never sees the owner's messages");
    other
        .lock()
        .add_message("user", Json::str("other's"), Object::new());
    other.commit().await.expect("commit");
    assert_ne!(name(&other), "telegram_a_b.jsonl");
    drop(other);

    for _ in 0..3 {
        let cached = store.cached();
        assert_eq!(evict().await, cached);
        for (key, text) in [("telegram:a:b", "owner's"), ("telegram:a_b", "other's")] {
            let h = store.get(key).await.expect("get");
            let history = h.lock().history(100);
            assert_eq!(history.len(), 1, "{key}");
            assert!(history[0].to_string().contains(text), "{key}: {history:?}");
        }
    }
}

/// `list_recent` orders sessions by line 1 alone: what follows line 1 is never read (a broken line there does
/// not matter), a file without a metadata line gets the key nanobot would guess and sorts last, and a file whose
/// line 1 cannot be read is left out.
#[tokio::test]
async fn list_recent_reads_line_one_only() {
    let ws = tempfile::tempdir().expect("tmp");
    let dir = ws.path().join("sessions");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let header = |key: &str, updated: &str| {
        format!(
            "{{\"_type\": \"metadata\", \"key\": \"{key}\", \"created_at\": \"2026-01-01T00:00:00\", \"updated_at\": \"{updated}\", \"metadata\": {{}}, \"last_consolidated\": 0}}\n"
        )
    };
    let message =
        "{\"role\": \"user\", \"content\": \"hi\", \"timestamp\": \"2026-01-01T00:00:00\"}\n";
    std::fs::write(
        dir.join("telegram_1.jsonl"),
        header("telegram:1", "2026-01-02T00:00:00") + "{not json\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("discord_9.jsonl"),
        header("discord:9", "2026-03-01T00:00:00") + message,
    )
    .expect("write");
    std::fs::write(dir.join("cli_direct.jsonl"), message).expect("write");
    // Line 1 is not text: left out (and logged), the others still listed.
    std::fs::write(dir.join("web_x.jsonl"), b"\xff\xfe\n").expect("write");

    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let recent = store.list_recent().await.expect("list");
    let order: Vec<(&str, &str)> = recent
        .iter()
        .map(|s| (s.key.as_str(), s.updated_at.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("discord:9", "2026-03-01T00:00:00"),
            ("telegram:1", "2026-01-02T00:00:00"),
            ("cli:direct", ""),
        ]
    );
    // A session the store committed has its new updated_at on line 1, so it comes first.
    let h = store.get("telegram:1").await.expect("get");
    h.lock()
        .add_message("user", Json::str("later"), Object::new());
    h.commit().await.expect("commit");
    let first = &store.list_recent().await.expect("list")[0];
    assert_eq!(first.key, "telegram:1");
    assert_eq!(first.updated_at, h.lock().updated_at());
}

#[tokio::test(start_paused = true)]
async fn the_evictor_task_runs_on_its_own() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(2)).expect("open");
    let task = store.spawn_evictor();
    drop(store.get("k:1").await.expect("get"));
    assert_eq!(store.cached(), 1);
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    assert_eq!(store.cached(), 0);
    drop(store);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(task.is_finished(), "the evictor stops with the store");
}

#[tokio::test]
async fn zero_idle_minutes_keeps_sessions_cached() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(0)).expect("open");
    drop(store.get("k:1").await.expect("get"));
    assert_eq!(store.evict_idle(), 0);
    assert_eq!(store.cached(), 1);
}

#[tokio::test]
async fn invalidate_rereads_the_file() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let first = store.get("cli:direct").await.expect("get");
    store.invalidate("cli:direct");
    let second = store.get("cli:direct").await.expect("get");
    assert!(!first.ptr_eq(&second));
    assert_eq!(store.loads(), 2);
}

#[tokio::test]
async fn clear_archives_the_transcript_and_starts_afresh_like_nanobot() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let path = ws.path().join("sessions/telegram_12345678.jsonl");
    let before = std::fs::read(&path).expect("read");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let archived = store
        .clear("telegram:12345678")
        .await
        .expect("clear")
        .expect("there was a file");
    assert_eq!(
        archived.parent().expect("dir"),
        ws.path().join("sessions/archive")
    );
    let name = archived
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("telegram_12345678.jsonl.") && name.ends_with("Z.jsonl"),
        "{name}"
    );
    assert_eq!(
        std::fs::read(&archived).expect("archive"),
        before,
        "the archive is the old file, byte for byte"
    );

    let text = std::fs::read_to_string(&path).expect("live file");
    assert_eq!(text.lines().count(), 1);
    let header = Json::parse(text.trim_end()).expect("json");
    let h = header.as_object().expect("object");
    assert_eq!(
        h.get("created_at").and_then(Json::as_str),
        Some("2026-11-22T09:50:26.226704")
    );
    assert_eq!(h.get("last_consolidated").and_then(Json::as_u64), Some(0));
    assert_eq!(h.get("metadata"), Some(&Json::Object(Object::new())));
    assert_ne!(
        h.get("updated_at").and_then(Json::as_str),
        Some("2026-11-22T09:50:26.275253")
    );

    // The cached session is the cleared one; new turns go to the new file.
    let handle = store.get("telegram:12345678").await.expect("get");
    assert_eq!(handle.lock().len(), 0);
    handle
        .lock()
        .add_message("user", Json::str("fresh"), Object::new());
    handle.commit().await.expect("commit");
    assert_eq!(
        std::fs::read_to_string(&path)
            .expect("live")
            .lines()
            .count(),
        2
    );
    // nanobot's archive glob never sees it: only top-level *.jsonl files are sessions.
    assert_eq!(
        store
            .list()
            .await
            .expect("list")
            .iter()
            .filter(|s| s.key == "telegram:12345678")
            .count(),
        1
    );

    // A second clear in the same second gets its own archive name.
    let again = store
        .clear("telegram:12345678")
        .await
        .expect("clear")
        .expect("file");
    assert_ne!(again, archived);
}

#[tokio::test]
async fn clearing_a_session_without_a_file_just_starts_one() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    assert_eq!(store.clear("new:1").await.expect("clear"), None);
    assert!(ws.path().join("sessions/new_1.jsonl").exists());
}

#[tokio::test]
async fn list_is_newest_first_with_counts() {
    let ws = copy_fixture_dir("nanobot-0.1.4/workspace");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    let h = store.get("discord:987654321").await.expect("get");
    h.lock()
        .add_message("user", Json::str("newest"), Object::new());
    h.commit().await.expect("commit");
    let list = store.list().await.expect("list");
    assert_eq!(list.len(), 12);
    assert_eq!(list[0].key, "discord:987654321");
    assert_eq!(list[0].messages, 7);
    let tg = list
        .iter()
        .find(|s| s.key == "telegram:12345678")
        .expect("telegram");
    assert_eq!((tg.messages, tg.unconsolidated), (12, 5));
    assert!(list.windows(2).all(|w| w[0].updated_at >= w[1].updated_at));
}

#[tokio::test]
async fn flush_all_writes_pending_changes() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = SessionStore::open(ws.path(), opts(30)).expect("open");
    store
        .get("a:1")
        .await
        .expect("get")
        .lock()
        .add_message("user", Json::str("x"), Object::new());
    store.flush_all().await.expect("flush");
    let s = load_file(&ws.path().join("sessions/a_1.jsonl"), None)
        .expect("read")
        .expect("exists");
    assert_eq!(s.session.len(), 1);
}

#[test]
fn a_second_store_on_the_same_workspace_is_refused_clearly() {
    let ws = tempfile::tempdir().expect("tmp");
    let first = SessionStore::open(ws.path(), opts(30)).expect("open");
    let err = match SessionStore::open(ws.path(), opts(30)) {
        Err(e) => e,
        Ok(_) => panic!("a second store must be refused"),
    };
    assert!(matches!(err, SessionError::Locked { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("already in use") && msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    drop(first);
    let _again =
        SessionStore::open(ws.path(), opts(30)).expect("free again once the first is gone");
}

#[tokio::test]
async fn a_shared_handle_is_send_and_usable_across_tasks() {
    let ws = tempfile::tempdir().expect("tmp");
    let store = Arc::new(SessionStore::open(ws.path(), opts(30)).expect("open"));
    let h = store.get("x:1").await.expect("get");
    let h2 = h.clone();
    tokio::spawn(async move {
        h2.lock()
            .add_message("user", Json::str("from another task"), Object::new());
        h2.commit().await.expect("commit");
    })
    .await
    .expect("task");
    assert_eq!(h.lock().len(), 1);
}
