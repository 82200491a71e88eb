//! Timestamps as nanobot writes them: naive local time in Python's `datetime.isoformat()` form.

use chrono::{DateTime, Local, NaiveDate, NaiveDateTime, Timelike};

/// Now, as `datetime.now().isoformat()`: `2026-11-22T09:50:26.226704`.
///
/// Python drops the fraction when the microsecond is 0, which would make line 1 shorter and force a whole-file
/// rewrite instead of an in-place patch (and another one at the next turn). Such an instant is written one
/// microsecond later, so nanogate's own timestamps always have the same length; [`iso`] still writes any given
/// time exactly as Python would.
pub fn now_iso() -> String {
    let now = Local::now().naive_local();
    let now = if now.nanosecond() / 1000 == 0 {
        now + chrono::TimeDelta::microseconds(1)
    } else {
        now
    };
    iso(now)
}

/// A naive date-time as Python's `isoformat()` writes it.
pub fn iso(t: NaiveDateTime) -> String {
    if t.nanosecond() / 1000 == 0 {
        t.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        format!(
            "{}.{:06}",
            t.format("%Y-%m-%dT%H:%M:%S"),
            t.nanosecond() / 1000 % 1_000_000
        )
    }
}

/// Whether Python's `datetime.fromisoformat` would accept `s` for the forms nanobot and people write:
/// a date, optionally `T` or a space and a time with optional fraction and UTC offset.
pub fn is_valid_iso(s: &str) -> bool {
    const NAIVE: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ];
    NAIVE
        .iter()
        .any(|f| NaiveDateTime::parse_from_str(s, f).is_ok())
        || NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
        || DateTime::parse_from_rfc3339(s).is_ok()
        || DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%:z").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_isoformat_shape() {
        let t = NaiveDate::from_ymd_opt(2026, 11, 22)
            .unwrap()
            .and_hms_micro_opt(9, 50, 26, 226_704)
            .unwrap();
        assert_eq!(iso(t), "2026-11-22T09:50:26.226704");
        let t = NaiveDate::from_ymd_opt(2026, 11, 22)
            .unwrap()
            .and_hms_micro_opt(9, 50, 26, 0)
            .unwrap();
        assert_eq!(iso(t), "2026-11-22T09:50:26");
        let t = NaiveDate::from_ymd_opt(2026, 1, 2)
            .unwrap()
            .and_hms_micro_opt(3, 4, 5, 60)
            .unwrap();
        assert_eq!(iso(t), "2026-01-02T03:04:05.000060");
        assert!(is_valid_iso(&now_iso()));
    }

    #[test]
    fn accepts_and_refuses() {
        for ok in [
            "2026-11-22T09:50:26.226704",
            "2026-11-22T09:50:26",
            "2026-11-22",
            "2026-11-22 09:50",
            "2026-11-22T09:50:26+01:00",
        ] {
            assert!(is_valid_iso(ok), "{ok}");
        }
        for bad in ["", "yesterday", "2026-13-01", "22/11/2026"] {
            assert!(!is_valid_iso(bad), "{bad}");
        }
    }
}
