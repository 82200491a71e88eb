//! Handing freed memory back to the system after a burst of chats.
//!
//! glibc's allocator keeps what a program frees for reuse. For a daemon that once served 10,000 chats in a
//! minute and then went quiet, that is tens of megabytes it will not need again: the resident size would never
//! come down after the session cache evicted them. Two things are needed, and both are here:
//!
//! - [`limit_retention`], once at start-up: glibc raises its trim threshold each time a large block is freed, up
//!   to 64 MB, and the free space at the end of a thread's arena is only returned above that threshold. A
//!   fixed 128 KB threshold (glibc's own default before it became dynamic) lets each arena give its free end
//!   back as soon as it is freed.
//! - [`trim`], from the gateway once a minute while chats come and go: `malloc_trim` returns the free pages
//!   inside every arena, which freeing alone never does.
//!
//! Other allocators were measured instead (README, "Gateway"): mimalloc kept more, and jemalloc with background
//! purging cost 4–5 MB of idle RSS. On other C libraries both functions do nothing.

/// The trim threshold set by [`limit_retention`]: free space at an arena's end beyond this goes back at once.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 128 * 1024;

/// Fixes glibc's trim threshold so freed memory at the end of an arena is returned to the system instead of
/// being kept after a burst of large buffers (call once, early in a long-running process).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_retention() {
    // SAFETY: mallopt only changes the allocator's tuning parameters; glibc takes its own lock.
    let ok = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) };
    if ok != 1 {
        tracing::debug!("glibc refused the trim threshold; freed memory may stay resident longer");
    }
}

/// Returns the free pages of every allocator arena to the system.
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
