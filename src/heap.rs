//! Handing freed memory back to the system after a burst of chats.
//!
//! glibc's allocator keeps what a program frees for reuse. For a daemon that once served 10,000 chats in a
//! minute and then went quiet, that is tens of megabytes it will not need again: the resident size would never
//! come down after the session cache evicted them. Measured on the gateway benchmark, three things are needed:
//!
//! - One arena ([`limit_retention`], at start-up). glibc gives every thread that allocates under contention an
//!   arena of its own, up to eight per core; tokio's blocking threads (file reads and fsyncs) each leave one
//!   behind, and `malloc_trim` cannot shrink the free space at the end of those: seven arenas kept 1.5 MB
//!   each after the burst. In the main arena that space goes back. Each thread's cache of small blocks keeps
//!   most allocations off the arena's lock, so the 10,000-chat throughput did not drop.
//! - A fixed trim threshold (also [`limit_retention`]). glibc raises it each time a large block is freed, up to
//!   64 MB, and keeps everything below it; its own pre-2006 default of 128 KB returns freed space promptly,
//!   and blocks over 128 KB (a big session file's text) get their own mapping, returned when freed.
//! - [`trim`], from the gateway once a minute while chats come and go: `malloc_trim` returns the free pages
//!   inside the heap, which freeing alone never does.
//!
//! `MALLOC_ARENA_MAX` or `MALLOC_TRIM_THRESHOLD_` in the environment still win: an operator who set them
//! meant it. Other allocators were measured instead (README, "Gateway"): mimalloc kept more, and jemalloc with
//! background purging cost 4–5 MB of idle RSS. On other C libraries both functions do nothing.

/// The trim threshold set by [`limit_retention`]: free space at the heap's end beyond this goes back at once.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 128 * 1024;

/// Makes glibc's allocator give memory back: one arena and a fixed trim threshold, unless the environment
/// sets them. Call first thing in `main`, before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_retention() {
    let set = |env: &str, param: libc::c_int, value: libc::c_int| {
        if std::env::var_os(env).is_none() {
            // SAFETY: mallopt only changes the allocator's tuning parameters; glibc takes its own lock.
            unsafe { libc::mallopt(param, value) };
        }
    };
    set("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, 1);
    set(
        "MALLOC_TRIM_THRESHOLD_",
        libc::M_TRIM_THRESHOLD,
        TRIM_THRESHOLD,
    );
}

/// Returns the free pages of the allocator's heap to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() {
    // SAFETY: malloc_trim only walks and shrinks the allocator's own free lists; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Fixes the allocator's trim threshold (glibc only; elsewhere nothing to do).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_retention() {}

/// Returns free pages to the system (glibc only; elsewhere nothing to do).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() {}
