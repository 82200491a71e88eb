//! "Now" for the scheduler, in epoch milliseconds, and the tokio instant at which a given time arrives.
//!
//! The runner never reads the wall clock directly: it asks a [`Clock`], so tests can drive it with tokio's
//! paused clock. [`Clock::simulated`] is a fixed epoch time captured at creation plus the tokio time elapsed
//! since then, so `tokio::time::advance` (or the paused clock's auto-advance) moves it. [`Clock::system`]
//! reads the wall clock every time it is asked: the runner wakes at least once per poll interval and
//! recomputes its sleep from the wall clock, so a machine that was suspended, or whose clock NTP stepped,
//! runs its jobs at the right wall-clock time instead of drifting with the monotonic clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// Where the scheduler's "now" comes from.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// The system's wall clock.
    System,
    /// `base_ms` at tokio instant `base`, advancing with tokio time (paused in tests).
    Simulated {
        /// Epoch milliseconds at `base`.
        base_ms: i64,
        /// The tokio instant that corresponds to `base_ms`.
        base: Instant,
    },
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock::System
    }

    /// A clock that reads `now_ms` at this tokio instant and advances with tokio time.
    pub fn simulated(now_ms: i64) -> Clock {
        Clock::Simulated {
            base_ms: now_ms,
            base: Instant::now(),
        }
    }

    /// Now, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => system_now_ms(),
            Clock::Simulated { base_ms, base } => {
                let elapsed = i64::try_from(base.elapsed().as_millis()).unwrap_or(i64::MAX);
                base_ms.saturating_add(elapsed)
            }
        }
    }

    /// The tokio instant at which this clock reads `at_ms` (now, when `at_ms` has passed; about a year ahead at
    /// most, which the runner never needs, so a wild value cannot overflow).
    pub fn instant_at(&self, at_ms: i64) -> Instant {
        const MAX_AHEAD: Duration = Duration::from_secs(366 * 24 * 3600);
        let (from, offset) = match self {
            // From the base, so a paused test clock wakes the runner on the very millisecond.
            Clock::Simulated { base_ms, base } => (*base, at_ms.saturating_sub(*base_ms)),
            Clock::System => (Instant::now(), at_ms.saturating_sub(self.now_ms())),
        };
        let now = Instant::now();
        let offset = Duration::from_millis(u64::try_from(offset.max(0)).unwrap_or(0));
        from.checked_add(offset)
            .unwrap_or(now + MAX_AHEAD)
            .clamp(now, now + MAX_AHEAD)
    }
}

/// The wall clock in epoch milliseconds (0 for a clock set before 1970).
pub fn system_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_simulated_clock_follows_tokio_time() {
        let clock = Clock::simulated(1_000_000);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        assert_eq!(clock.now_ms(), 1_001_500);
        let at = clock.instant_at(1_002_000);
        assert_eq!(at - Instant::now(), Duration::from_millis(500));
        // Passed times are now; absurd ones are capped instead of overflowing.
        assert_eq!(clock.instant_at(0), Instant::now());
        assert!(clock.instant_at(i64::MAX) > Instant::now());
        assert!(Clock::system().instant_at(i64::MAX) > Instant::now());
    }
}
