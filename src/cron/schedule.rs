//! When a job runs next: `at`, `every` and `cron` schedules, time zones, daylight saving.
//!
//! - `at`: once, at `atMs`.
//! - `every`: every `everyMs` milliseconds, kept exactly (no rounding to seconds). A new job's first slot is
//!   one interval after it is added; later slots stay on that grid (`slot + n × every`), so a run that takes a
//!   while, or a late wake-up, does not make the job drift.
//! - `cron`: a 5-field expression (minute hour day-of-month month day-of-week), a 6-field one with seconds
//!   first, or a nickname (`@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`), evaluated by
//!   [croner](https://docs.rs/croner) in the job's `tz` (an IANA name, via chrono-tz) or the machine's local
//!   zone. Day-of-month and day-of-week are OR-ed as in Vixie cron and nanobot's croniter (`0 12 1 * MON` runs
//!   on the 1st and on Mondays).
//!
//! Daylight saving, for expressions with a fixed time of day (`30 2 * * *`):
//! - a time that does not exist that day (the clock jumps from 02:00 to 03:00) runs at the first valid
//!   instant after the gap, the same day (03:00);
//! - a time that exists twice (the clock goes back from 03:00 to 02:00) runs once, at its first occurrence.
//!
//! Expressions with a wildcard or step in the time fields (`*/15 * * * *`) keep their rhythm in real time:
//! slots inside a gap do not exist, and during the repeated hour they run in both passes, since those are
//! distinct instants. This is croner's behaviour (the Open Cron Pattern Specification's), checked by tests.

use chrono::{DateTime, Local, TimeZone};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::error::CronError;
use super::job::{Schedule, ScheduleKind};

/// The zone a cron expression is evaluated in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    /// The machine's local zone.
    Local,
    /// An IANA zone.
    Named(Tz),
}

/// The zone named `tz` (`None` or empty: the local zone); an unknown name is a clear error.
pub fn parse_zone(tz: Option<&str>) -> Result<Zone, CronError> {
    match tz.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(Zone::Local),
        Some(name) => name.parse::<Tz>().map(Zone::Named).map_err(|_| {
            CronError::InvalidSchedule(format!(
                "unknown time zone {name:?}: use an IANA name such as \"Europe/Berlin\" or \"America/New_York\""
            ))
        }),
    }
}

/// Parses a cron expression (5 fields, 6 with seconds first, or `@daily` and the like).
pub fn parse_expr(expr: &str) -> Result<Cron, CronError> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| {
            CronError::InvalidSchedule(format!(
                "invalid cron expression {expr:?}: {}. Use 5 fields (minute hour day-of-month month \
                 day-of-week, e.g. \"0 9 * * 1-5\"), 6 with seconds first, or @hourly, @daily, @weekly, \
                 @monthly, @yearly",
                e.to_string().trim_end_matches('.')
            ))
        })
}

/// Checks that a schedule can run: a positive interval, a time for `at`, a valid expression and zone.
pub fn validate(s: &Schedule) -> Result<(), CronError> {
    match s.kind {
        ScheduleKind::At => {
            if s.at_ms.is_none() {
                return Err(CronError::InvalidSchedule(
                    "an `at` schedule needs atMs".into(),
                ));
            }
        }
        ScheduleKind::Every => match s.every_ms {
            Some(ms) if ms > 0 => {}
            _ => {
                return Err(CronError::InvalidSchedule(
                    "an `every` schedule needs a positive interval".into(),
                ));
            }
        },
        ScheduleKind::Cron => {
            let Some(expr) = s.expr.as_deref() else {
                return Err(CronError::InvalidSchedule(
                    "a `cron` schedule needs an expression".into(),
                ));
            };
            parse_expr(expr)?;
        }
    }
    if s.tz.as_deref().is_some_and(|t| !t.trim().is_empty()) {
        if s.kind != ScheduleKind::Cron {
            return Err(CronError::InvalidSchedule(
                "a time zone only applies to cron expressions".into(),
            ));
        }
        parse_zone(s.tz.as_deref())?;
    }
    Ok(())
}

/// The first slot strictly after `after_ms`, or `None` when there is none (an `at` time that has passed).
/// For `every`, that is one interval after `after_ms` (a new job's first slot).
pub fn next_after(s: &Schedule, after_ms: i64) -> Result<Option<i64>, CronError> {
    match s.kind {
        ScheduleKind::At => Ok(s.at_ms.filter(|&at| at > after_ms)),
        ScheduleKind::Every => Ok(Some(after_ms.saturating_add(every(s)?))),
        ScheduleKind::Cron => cron_after(s, after_ms).map(Some),
    }
}

/// The slot after `slot` that is later than `now_ms`: the next run once `slot` was handled (run, skipped or
/// found already covered) at `now_ms`. `every` stays on its grid; `cron` asks the expression; `at` has none.
pub fn next_after_slot(s: &Schedule, slot: i64, now_ms: i64) -> Result<Option<i64>, CronError> {
    match s.kind {
        ScheduleKind::At => Ok(None),
        ScheduleKind::Every => {
            let every = every(s)?;
            let behind = now_ms.saturating_sub(slot).max(0);
            let steps = behind / every + 1;
            Ok(Some(slot.saturating_add(steps.saturating_mul(every))))
        }
        ScheduleKind::Cron => cron_after(s, now_ms.max(slot)).map(Some),
    }
}

/// The latest slot that is due at `now_ms`, counting from the first due slot `slot` (several slots may have
/// passed while the daemon was down; only the latest one may still run).
pub fn latest_due(s: &Schedule, slot: i64, now_ms: i64) -> Result<i64, CronError> {
    if now_ms <= slot {
        return Ok(slot);
    }
    match s.kind {
        ScheduleKind::At => Ok(slot),
        ScheduleKind::Every => {
            let every = every(s)?;
            Ok(slot + (now_ms - slot) / every * every)
        }
        ScheduleKind::Cron => {
            let cron = parse_expr(s.expr.as_deref().unwrap_or_default())?;
            let prev = match parse_zone(s.tz.as_deref())? {
                Zone::Local => previous(&cron, &Local, now_ms),
                Zone::Named(tz) => previous(&cron, &tz, now_ms),
            };
            // A slot written by someone else need not lie on the expression; never go before it.
            Ok(prev.map_or(slot, |p| p.max(slot)))
        }
    }
}

fn every(s: &Schedule) -> Result<i64, CronError> {
    s.every_ms.filter(|&ms| ms > 0).ok_or_else(|| {
        CronError::InvalidSchedule("an `every` schedule needs a positive interval".into())
    })
}

fn cron_after(s: &Schedule, after_ms: i64) -> Result<i64, CronError> {
    let expr = s.expr.as_deref().unwrap_or_default();
    let cron = parse_expr(expr)?;
    let next = match parse_zone(s.tz.as_deref())? {
        Zone::Local => following(&cron, &Local, after_ms),
        Zone::Named(tz) => following(&cron, &tz, after_ms),
    };
    next.ok_or_else(|| {
        CronError::InvalidSchedule(format!("the cron expression {expr:?} never matches again"))
    })
}

fn at<Z: TimeZone>(zone: &Z, ms: i64) -> Option<DateTime<Z>> {
    zone.timestamp_millis_opt(ms).single()
}

fn following<Z: TimeZone>(cron: &Cron, zone: &Z, after_ms: i64) -> Option<i64> {
    let start = at(zone, after_ms)?;
    cron.find_next_occurrence(&start, false)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn previous<Z: TimeZone>(cron: &Cron, zone: &Z, now_ms: i64) -> Option<i64> {
    let start = at(zone, now_ms)?;
    cron.find_previous_occurrence(&start, true)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// A schedule for people: `every 3600s`, `every 1.5s`, `cron 0 9 * * 1-5`, `at 2026-03-01 09:00:00`.
pub fn describe(s: &Schedule) -> String {
    match s.kind {
        ScheduleKind::At => match s.at_ms {
            Some(ms) => format!("at {}", local_time(ms)),
            None => "at ?".into(),
        },
        ScheduleKind::Every => match s.every_ms {
            Some(ms) if ms % 1000 == 0 => format!("every {}s", ms / 1000),
            Some(ms) => format!("every {}s", ms as f64 / 1000.0),
            None => "every ?".into(),
        },
        ScheduleKind::Cron => format!("cron {}", s.expr.as_deref().unwrap_or("?")),
    }
}

/// Epoch milliseconds as local time, `YYYY-MM-DD HH:MM:SS`.
pub fn local_time(ms: i64) -> String {
    match Local.timestamp_millis_opt(ms).single() {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S").to_string(),
        None => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, Utc};

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_opt(h, mi, s))
            .map(|t| Utc.from_utc_datetime(&t).timestamp_millis())
            .unwrap()
    }

    fn berlin(expr: &str) -> Schedule {
        Schedule::cron(expr, Some("Europe/Berlin"))
    }

    fn slots(s: &Schedule, from: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let mut t = from;
        for _ in 0..n {
            t = next_after(s, t).unwrap().unwrap();
            out.push(t);
        }
        out
    }

    #[test]
    fn five_six_fields_and_nicknames_parse() {
        for e in [
            "0 9 * * 1-5",
            "*/5 * * * * *",
            "@daily",
            "@hourly",
            "0 12 1 * MON",
        ] {
            assert!(parse_expr(e).is_ok(), "{e}");
        }
        for e in ["", "61 * * * *", "* * *", "0 0 9 * * 1-5 2030", "hello"] {
            let err = parse_expr(e).unwrap_err().to_string();
            assert!(err.contains("invalid cron expression"), "{e}: {err}");
        }
    }

    #[test]
    fn unknown_zone_is_a_clear_error() {
        let e = parse_zone(Some("Mars/Olympus")).unwrap_err().to_string();
        assert!(e.contains("Mars/Olympus") && e.contains("IANA"), "{e}");
        assert_eq!(parse_zone(None).unwrap(), Zone::Local);
        assert!(validate(&Schedule::cron("0 9 * * *", Some("Nowhere/City"))).is_err());
        let mut every = Schedule::every(1000);
        every.tz = Some("Europe/Berlin".into());
        assert!(validate(&every).is_err());
    }

    #[test]
    fn day_of_month_or_day_of_week() {
        // 2026-06-01 is a Monday; the next match after it is Monday 8 June, then 1 July (a Wednesday).
        let s = Schedule::cron("0 12 1 * MON", Some("UTC"));
        let got = slots(&s, utc(2026, 6, 1, 12, 0, 0), 3);
        assert_eq!(
            got,
            [
                utc(2026, 6, 8, 12, 0, 0),
                utc(2026, 6, 15, 12, 0, 0),
                utc(2026, 6, 22, 12, 0, 0)
            ]
        );
        let got = slots(&s, utc(2026, 6, 29, 13, 0, 0), 1);
        assert_eq!(got, [utc(2026, 7, 1, 12, 0, 0)]);
    }

    #[test]
    fn spring_forward_runs_at_the_first_valid_instant() {
        // Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST (01:00 UTC). 02:30 does not exist.
        let s = berlin("30 2 * * *");
        let got = slots(&s, utc(2026, 3, 28, 12, 0, 0), 3);
        assert_eq!(
            got,
            [
                utc(2026, 3, 29, 1, 0, 0),  // 03:00 CEST, right after the gap
                utc(2026, 3, 30, 0, 30, 0), // 02:30 CEST
                utc(2026, 3, 31, 0, 30, 0),
            ]
        );
    }

    #[test]
    fn fall_back_runs_a_doubled_time_once() {
        // Berlin, 25 October 2026: 03:00 CEST goes back to 02:00 CET; 02:30 happens at 00:30 and 01:30 UTC.
        let s = berlin("30 2 * * *");
        let got = slots(&s, utc(2026, 10, 24, 12, 0, 0), 2);
        assert_eq!(
            got,
            [utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 26, 1, 30, 0)]
        );
    }

    #[test]
    fn a_fixed_time_keeps_its_wall_clock_across_both_changes() {
        let s = berlin("0 9 * * *");
        assert_eq!(
            slots(&s, utc(2026, 3, 28, 12, 0, 0), 1),
            [utc(2026, 3, 29, 7, 0, 0)]
        );
        assert_eq!(
            slots(&s, utc(2026, 3, 27, 12, 0, 0), 1),
            [utc(2026, 3, 28, 8, 0, 0)]
        );
        assert_eq!(
            slots(&s, utc(2026, 10, 25, 12, 0, 0), 1),
            [utc(2026, 10, 26, 8, 0, 0)]
        );
    }

    #[test]
    fn every_keeps_milliseconds_and_its_grid() {
        let s = Schedule::every(1500);
        assert_eq!(next_after(&s, 1_000).unwrap(), Some(2_500));
        // Handled 10 ms late: the next slot is still on the grid.
        assert_eq!(next_after_slot(&s, 2_500, 2_510).unwrap(), Some(4_000));
        // Down for a while: the latest due slot is on the grid, and the next one after now.
        assert_eq!(latest_due(&s, 2_500, 9_999).unwrap(), 8_500);
        assert_eq!(latest_due(&s, 2_500, 10_000).unwrap(), 10_000);
        assert_eq!(next_after_slot(&s, 8_500, 9_999).unwrap(), Some(10_000));
    }

    #[test]
    fn at_fires_once() {
        let s = Schedule::at(5_000);
        assert_eq!(next_after(&s, 1_000).unwrap(), Some(5_000));
        assert_eq!(next_after(&s, 5_000).unwrap(), None);
        assert_eq!(next_after_slot(&s, 5_000, 5_000).unwrap(), None);
    }

    #[test]
    fn latest_due_cron_slot() {
        let s = Schedule::cron("0 * * * *", Some("UTC"));
        let slot = utc(2026, 1, 1, 10, 0, 0);
        assert_eq!(
            latest_due(&s, slot, utc(2026, 1, 1, 13, 20, 0)).unwrap(),
            utc(2026, 1, 1, 13, 0, 0)
        );
        assert_eq!(
            next_after_slot(&s, slot, utc(2026, 1, 1, 13, 20, 0)).unwrap(),
            Some(utc(2026, 1, 1, 14, 0, 0))
        );
    }
}
