//! When to try a failed request again: exponential backoff with jitter, and the server's `Retry-After`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The first wait.
const BASE: Duration = Duration::from_secs(1);
/// No computed backoff is longer than this.
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// A server's `Retry-After` is honoured up to this long; a longer one would stall the conversation.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// Each backoff is varied by up to this fraction either way, so clients that failed together spread out.
const JITTER: f64 = 0.25;

/// The wait before retry number `retry` (1 for the first retry): `BASE · 2^(retry-1)`, ±25 % jitter, at most
/// 30 s.
pub fn backoff(retry: u32) -> Duration {
    let exp = retry.saturating_sub(1).min(16);
    let nominal = BASE.saturating_mul(1 << exp).min(BACKOFF_CAP);
    let factor = 1.0 + JITTER * (2.0 * random_unit() - 1.0);
    nominal.mul_f64(factor).min(BACKOFF_CAP)
}

/// A uniformly distributed number in `[0, 1)`.
///
/// `RandomState` is seeded randomly per thread and its keys change with every `new()`, so hashing a counter with
/// it is random enough for jitter without adding a crate.
fn random_unit() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    // The top 53 bits fill an f64 mantissa exactly.
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Parses a `Retry-After` value: delay seconds (`"2"`, also `"1.5"` as some servers send) or an HTTP date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`), relative to `now`. A date in the past means "now". The result is capped
/// at [`RETRY_AFTER_CAP`]; `None` when the value is neither form.
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    let wait = if let Ok(secs) = value.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return None;
        }
        Duration::from_secs_f64(secs.min(RETRY_AFTER_CAP.as_secs_f64()))
    } else {
        let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
        (when.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO)
    };
    Some(wait.min(RETRY_AFTER_CAP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_cap() {
        for _ in 0..200 {
            let first = backoff(1);
            assert!(first >= Duration::from_millis(750) && first <= Duration::from_millis(1250));
            let third = backoff(3);
            assert!(third >= Duration::from_secs(3) && third <= Duration::from_secs(5));
            assert!(backoff(10) <= BACKOFF_CAP);
            assert!(backoff(10) >= Duration::from_millis(22_500));
            assert!(backoff(u32::MAX) <= BACKOFF_CAP);
        }
    }

    #[test]
    fn jitter_varies() {
        let waits: std::collections::HashSet<Duration> = (0..20).map(|_| backoff(1)).collect();
        assert!(waits.len() > 10, "{waits:?}");
    }

    #[test]
    fn retry_after_forms() {
        let now = chrono::DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("3600", now), Some(RETRY_AFTER_CAP));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 09:28:10 GMT", now),
            Some(RETRY_AFTER_CAP)
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("NaN", now), None);
    }
}
