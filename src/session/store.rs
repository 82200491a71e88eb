//! The session store: one shared [`Session`] per key, loaded once, cached, committed crash-safely.
//!
//! The cache is a `DashMap` from key to a `OnceCell` holding the key's [`SessionHandle`]. Concurrent callers
//! asking for one key all await the same cell, so the file is read once and everyone gets the same object.
//! No DashMap guard ever lives across an `.await`: the cell is cloned out of the map first.
//!
//! File I/O runs on tokio's blocking pool. A session sits behind a `std::sync::Mutex` that is only locked for
//! short, synchronous work (reading history, adding messages, a commit on the blocking pool), never across an
//! `.await`.
//!
//! Keys that nanobot would map to the same file name are kept apart: the key on line 1 owns the nanobot name,
//! and any other key gets [`key::alternate_file_name`]. Names handed out in this process are remembered, so
//! two new keys can never both start writing the same new file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::OnceCell;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::persist::{self, CommitOutcome, DiskState, Durability};
use super::scan::{self, SessionInfo};
use super::{Session, SessionError, WorkspaceLock, key, load_file, load_file_deferred};

/// How the store writes and how long it keeps idle sessions in memory.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// fsync before a commit returns, or leave it to the OS.
    pub durability: Durability,
    /// Sessions unused this long (and fully written) leave the cache; zero keeps them forever.
    pub cache_idle: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Fsync,
            cache_idle: Duration::from_secs(30 * 60),
        }
    }
}

/// The workspace's sessions. Cheap to clone; all clones share one cache and one workspace lock.
#[derive(Clone)]
pub struct SessionStore {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    dir: PathBuf,
    opts: StoreOptions,
    cache: DashMap<String, Arc<OnceCell<SessionHandle>>>,
    /// File name → the key it was handed to in this process.
    claims: Mutex<HashMap<String, String>>,
    /// Session files read since the store opened (a cache miss each).
    files_read: AtomicU64,
    _lock: WorkspaceLock,
}

/// What [`SessionStore::retire`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retired {
    /// The file moved to this archive path; no live file remains.
    Archived(PathBuf),
    /// There was no file to move.
    NoFile,
    /// Someone holds the session right now; nothing was done.
    InUse,
    /// The session changed since the caller looked; nothing was done.
    Changed,
}

/// A shared handle to one cached session.
#[derive(Clone)]
pub struct SessionHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    key: String,
    session: Mutex<Session>,
    last_used: Mutex<Instant>,
    durability: Durability,
}

impl SessionHandle {
    fn new(session: Session, durability: Durability) -> Self {
        SessionHandle {
            inner: Arc::new(HandleInner {
                key: session.key.clone(),
                session: Mutex::new(session),
                last_used: Mutex::new(Instant::now()),
                durability,
            }),
        }
    }

    /// The session key.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// Locks the session for a short synchronous piece of work. Never hold the guard across an `.await`.
    pub fn lock(&self) -> MutexGuard<'_, Session> {
        self.touch();
        self.inner
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes what changed since the last commit (on the blocking pool); returns once it is durable.
    pub async fn commit(&self) -> Result<CommitOutcome, SessionError> {
        let h = self.clone();
        run_blocking(self.key(), move || h.commit_blocking()).await
    }

    /// [`SessionHandle::commit`] for code already off the async runtime.
    pub fn commit_blocking(&self) -> Result<CommitOutcome, SessionError> {
        let mut s = self.lock();
        persist::commit(&mut s, self.inner.durability)
    }

    /// Whether two handles are the same cached session.
    pub fn ptr_eq(&self, other: &SessionHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn touch(&self) {
        *self
            .inner
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn idle_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(
            *self
                .inner
                .last_used
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

async fn run_blocking<T: Send + 'static>(
    key: &str,
    f: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, SessionError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SessionError::Task {
            key: key.to_owned(),
            reason: e.to_string(),
        })?
}

impl SessionStore {
    /// Opens the sessions of `workspace` (`<workspace>/sessions`), taking the workspace lock.
    pub fn open(workspace: &Path, opts: StoreOptions) -> Result<Self, SessionError> {
        let lock = WorkspaceLock::acquire(workspace)?;
        let dir = workspace.join("sessions");
        std::fs::create_dir_all(&dir).map_err(|e| SessionError::write(&dir, e))?;
        Ok(SessionStore {
            inner: Arc::new(StoreInner {
                dir,
                opts,
                cache: DashMap::new(),
                claims: Mutex::new(HashMap::new()),
                files_read: AtomicU64::new(0),
                _lock: lock,
            }),
        })
    }

    /// The session for `key`: from the cache, else loaded from its file, else new (written at its first commit).
    pub async fn get(&self, key: &str) -> Result<SessionHandle, SessionError> {
        key::file_name(key)?;
        let cell = self.inner.cache.entry(key.to_owned()).or_default().clone();
        let handle = cell
            .get_or_try_init(|| {
                let inner = self.inner.clone();
                let owned = key.to_owned();
                async move { run_blocking(&owned.clone(), move || inner.load_or_create(&owned)).await }
            })
            .await?
            .clone();
        handle.touch();
        Ok(handle)
    }

    /// Drops `key` from the cache so the next [`SessionStore::get`] reads its file again. Holders of the old
    /// handle keep a stale copy: call this only when no turn is running for the key.
    pub fn invalidate(&self, key: &str) {
        self.inner.cache.remove(key);
    }

    /// Starts `key` afresh as nanobot's `/new` does, without destroying anything: pending changes are written,
    /// the file is moved to `sessions/archive/<file name>.<UTC time>.jsonl`, and a file holding only line 1
    /// (same `created_at` and `metadata`, watermark 0) takes its place. Returns the archive path, if there was
    /// a file.
    pub async fn clear(&self, key: &str) -> Result<Option<PathBuf>, SessionError> {
        let h = self.get(key).await?;
        let durability = self.inner.opts.durability;
        run_blocking(key, move || {
            let mut s = h.lock();
            if s.disk.exists || !s.is_empty() {
                persist::commit(&mut s, durability)?;
            }
            let archived = if s.disk.exists { persist::archive_file(&s.disk.path, durability)? } else { None };
            if let Some(a) = &archived {
                info!(session = %s.key, archive = %a.display(), "session cleared; previous transcript archived");
            }
            s.disk = DiskState::new_file(s.disk.path.clone());
            s.clear();
            persist::commit(&mut s, durability)?;
            Ok(archived)
        })
        .await
    }

    /// Moves `key`'s file to `sessions/archive/` and leaves no live file behind (the session upkeep's end of a
    /// session; `clear` instead starts a fresh file). Refuses, without touching anything, when someone else
    /// holds the session (a turn is running), when its `updated_at` is no longer `expect_updated_at` (a message
    /// arrived since the caller looked), or when it has unconsolidated messages and `require_consolidated` is
    /// set. The cache entry stays locked while the file moves, so nobody can load the old file meanwhile.
    pub async fn retire(
        &self,
        key: &str,
        expect_updated_at: &str,
        require_consolidated: bool,
    ) -> Result<Retired, SessionError> {
        // Load it if needed, so the checks below see the file's current state.
        drop(self.get(key).await?);
        let inner = self.inner.clone();
        let (owned, expected) = (key.to_owned(), expect_updated_at.to_owned());
        run_blocking(key, move || {
            let dashmap::Entry::Occupied(entry) = inner.cache.entry(owned.clone()) else {
                return Ok(Retired::InUse);
            };
            let cell = entry.get();
            let Some(h) = cell.get() else {
                return Ok(Retired::InUse);
            };
            // One reference in the map, none elsewhere: no lane or caller holds this session.
            if Arc::strong_count(cell) > 1 || Arc::strong_count(&h.inner) > 1 {
                return Ok(Retired::InUse);
            }
            let mut s = h.inner.session.lock().unwrap_or_else(PoisonError::into_inner);
            if s.updated_at != expected || (require_consolidated && s.unconsolidated() > 0) {
                return Ok(Retired::Changed);
            }
            if s.has_unsaved_data() {
                persist::commit(&mut s, inner.opts.durability)?;
            }
            let archived = if s.disk.exists {
                persist::archive_file(&s.disk.path, inner.opts.durability)?
            } else {
                None
            };
            drop(s);
            // Under the entry's lock, so a load of this key that starts right after cannot lose its new claim.
            inner.release_claims(&owned);
            entry.remove();
            match archived {
                Some(a) => {
                    info!(session = %owned, archive = %a.display(), "session retired to the archive");
                    Ok(Retired::Archived(a))
                }
                None => Ok(Retired::NoFile),
            }
        })
        .await
    }

    /// Every session file in the directory, newest first.
    pub async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let dir = self.inner.dir.clone();
        run_blocking("*", move || scan::list_sessions(&dir)).await
    }

    /// Every session by key and `updated_at`, newest first, from line 1 of each file only (see
    /// [`scan::list_recent`]).
    pub async fn list_recent(&self) -> Result<Vec<scan::SessionStamp>, SessionError> {
        let dir = self.inner.dir.clone();
        run_blocking("*", move || scan::list_recent(&dir)).await
    }

    /// Rewrites every session file that has problems, moving unusable lines to their `.damaged` sidecars.
    /// Returns each repaired file with the problems it had. Files already cached are committed instead.
    pub async fn repair_all(&self) -> Result<Vec<(PathBuf, Vec<super::Problem>)>, SessionError> {
        self.flush_all().await?;
        let dir = self.inner.dir.clone();
        let cached: Vec<PathBuf> = self
            .inner
            .cache
            .iter()
            .filter_map(|e| e.value().get().map(|h| h.lock().path().to_path_buf()))
            .collect();
        let durability = self.inner.opts.durability;
        run_blocking("*", move || {
            let mut repaired = Vec::new();
            for report in scan::check_dir(&dir)? {
                if report.sidecar_lines.is_some() || cached.contains(&report.path) {
                    continue;
                }
                let Some(mut loaded) = load_file(&report.path, None)? else {
                    continue;
                };
                if loaded.session.is_dirty() {
                    persist::commit(&mut loaded.session, durability)?;
                    repaired.push((report.path, loaded.problems));
                }
            }
            Ok(repaired)
        })
        .await
    }

    /// Number of sessions in the cache.
    pub fn cached(&self) -> usize {
        self.inner.cache.len()
    }

    /// Cache misses since the store opened: each read the session's file, or found there was none.
    pub fn loads(&self) -> u64 {
        self.inner.files_read.load(Ordering::Relaxed)
    }

    /// Removes sessions that nobody holds, that were unused for `cache_idle`, and that have nothing left to
    /// write. Returns how many left the cache.
    pub fn evict_idle(&self) -> usize {
        let idle = self.inner.opts.cache_idle;
        if idle.is_zero() {
            return 0;
        }
        let now = Instant::now();
        let before = self.inner.cache.len();
        self.inner.cache.retain(|key, cell| {
            if Arc::strong_count(cell) > 1 {
                return true;
            }
            let keep = match cell.get() {
                None => false,
                Some(h) if Arc::strong_count(&h.inner) > 1 || h.idle_for(now) < idle => true,
                Some(h) => match h.inner.session.try_lock() {
                    Ok(s) => s.has_unsaved_data(),
                    Err(_) => true,
                },
            };
            if !keep {
                // Under the shard's lock, so a load of this key that starts right after keeps its new claim.
                self.inner.release_claims(key);
            }
            keep
        });
        let evicted = before.saturating_sub(self.inner.cache.len());
        let cache = &self.inner.cache;
        // The cache's own table, like the maps `shrink` looks after, keeps the size of its busiest minute.
        if evicted > 0 && crate::shrink::is_sparse(cache.len(), cache.capacity()) {
            cache.shrink_to_fit();
        }
        if evicted > 0 {
            debug!(
                evicted,
                cached = self.inner.cache.len(),
                "idle sessions left the cache"
            );
        }
        evicted
    }

    /// Runs [`SessionStore::evict_idle`] periodically until the store is dropped.
    pub fn spawn_evictor(&self) -> tokio::task::JoinHandle<()> {
        let weak: Weak<StoreInner> = Arc::downgrade(&self.inner);
        let period =
            (self.inner.opts.cache_idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(60));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                SessionStore { inner }.evict_idle();
            }
        })
    }

    /// Commits every cached session that has unwritten changes (for shutdown).
    pub async fn flush_all(&self) -> Result<(), SessionError> {
        let handles: Vec<SessionHandle> = self
            .inner
            .cache
            .iter()
            .filter_map(|e| e.value().get().cloned())
            .collect();
        for h in handles {
            h.commit().await?;
        }
        Ok(())
    }
}

impl StoreInner {
    /// Forgets the file names claimed for `key`, whose session is leaving the cache with nothing unwritten:
    /// from now on its file's line 1 says who owns it. Keeping the claims would hold two small strings per
    /// chat ever seen, scattered over the heap, and those would keep the allocator from giving back the memory
    /// of a burst of chats after the cache evicted it.
    fn release_claims(&self, key: &str) {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        for name in [key::file_name(key), key::alternate_file_name(key)]
            .into_iter()
            .flatten()
        {
            if claims.get(&name).is_some_and(|owner| owner == key) {
                claims.remove(&name);
            }
        }
        crate::shrink::shrink_when_sparse(&mut claims);
    }

    /// Claims `name` for `key` in this process; false when another key has it.
    fn claim(&self, name: &str, key: &str) -> bool {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        match claims.get(name) {
            Some(owner) => owner == key,
            None => {
                claims.insert(name.to_owned(), key.to_owned());
                true
            }
        }
    }

    fn load_or_create(&self, key: &str) -> Result<SessionHandle, SessionError> {
        let primary_name = key::file_name(key)?;
        let alt_name = key::alternate_file_name(key)?;
        let (primary, alt) = (self.dir.join(&primary_name), self.dir.join(&alt_name));
        let handle = |s: Session| SessionHandle::new(s, self.opts.durability);
        self.files_read.fetch_add(1, Ordering::Relaxed);

        if let Some(loaded) = load_file_deferred(&alt, Some(key))? {
            if loaded.session.key != key || !self.claim(&alt_name, key) {
                return Err(SessionError::Collision {
                    key: key.into(),
                    path: alt,
                    owner: loaded.session.key,
                });
            }
            report_problems(&loaded);
            return Ok(handle(loaded.session));
        }
        if self.claim(&primary_name, key) {
            match load_file_deferred(&primary, Some(key))? {
                None => return Ok(handle(Session::new(key, primary))),
                Some(loaded) if loaded.session.key == key => {
                    report_problems(&loaded);
                    return Ok(handle(loaded.session));
                }
                Some(loaded) => {
                    let owner = loaded.session.key;
                    self.claims
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(primary_name, owner.clone());
                    warn!(
                        session = %key,
                        file = %primary.display(),
                        owner = %owner,
                        own_file = %alt.display(),
                        "two keys map to one nanobot file name; this key gets its own file so the conversations never mix"
                    );
                }
            }
        }
        if !self.claim(&alt_name, key) {
            return Err(SessionError::Collision {
                key: key.into(),
                path: alt,
                owner: "another key".into(),
            });
        }
        Ok(handle(Session::new(key, alt)))
    }
}

fn report_problems(loaded: &super::Loaded) {
    if let Some(first) = loaded.problems.first() {
        warn!(
            session = %loaded.session.key,
            file = %loaded.session.path().display(),
            problems = loaded.problems.len(),
            "session file needs repair (first: line {}: {}); it is repaired at the next write, nothing is lost",
            first.line,
            first.message
        );
    }
}
