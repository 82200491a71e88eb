//! Process-wide counters for the admin API's `GET /metrics`, in Prometheus' text format.
//!
//! The counters are global (like a logging facade), so the agent, the tools, memory and cron count events
//! where they happen without a handle threaded through every call. Gauges that describe current state (lane
//! queue depth, sessions cached) are not stored here: the admin API reads them from the router and the store
//! when it is scraped. Everything is a few atomics and one mutex-guarded map per labelled family; counting is
//! cheap enough for every turn and tool call.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// Upper bounds (seconds) of the model latency histogram's buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0,
];

/// A counter family with labels, e.g. turns by channel and outcome.
#[derive(Default)]
struct Family {
    values: Mutex<BTreeMap<Vec<String>, u64>>,
}

impl Family {
    fn add(&self, labels: &[&str]) {
        let key = labels.iter().map(|l| (*l).to_owned()).collect();
        *self
            .values
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default() += 1;
    }

    fn snapshot(&self) -> Vec<(Vec<String>, u64)> {
        self.values
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// The model latency histogram.
struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

#[derive(Default)]
struct Registry {
    turns: Family,
    tool_calls: Family,
    consolidations: Family,
    cron_runs: Family,
    model_errors: Family,
    latency: Histogram,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// A turn finished on `channel` with `outcome` (`ok`, `error`, `cancelled`).
pub fn turn(channel: &str, outcome: &str) {
    registry().turns.add(&[channel, outcome]);
}

/// A tool call finished (`ok` or `error`).
pub fn tool_call(tool: &str, ok: bool) {
    registry()
        .tool_calls
        .add(&[tool, if ok { "ok" } else { "error" }]);
}

/// A consolidation finished: `ok`, `failed` or `raw` (archived without the model after repeated failures).
pub fn consolidation(outcome: &str) {
    registry().consolidations.add(&[outcome]);
}

/// A cron job ran with this status (`ok`, `error`, `skipped`).
pub fn cron_run(status: &str) {
    registry().cron_runs.add(&[status]);
}

/// One model request took `elapsed`; `error` names the failure kind when it failed.
pub fn model_request(elapsed: Duration, error: Option<&str>) {
    let r = registry();
    let secs = elapsed.as_secs_f64();
    for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&r.latency.buckets) {
        if secs <= *bound {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
    }
    r.latency.count.fetch_add(1, Ordering::Relaxed);
    r.latency.sum_micros.fetch_add(
        u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    if let Some(kind) = error {
        r.model_errors.add(&[kind]);
    }
}

/// Gauges read at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gauges {
    /// Messages queued or running in all lanes.
    pub lane_queue_depth: usize,
    /// Lanes alive.
    pub lanes: usize,
    /// Sessions in the store's cache.
    pub sessions_cached: usize,
}

/// The whole exposition, Prometheus text format 0.0.4.
pub fn render(gauges: Gauges) -> String {
    let r = registry();
    let mut out = String::new();
    family(
        &mut out,
        "nanogate_turns_total",
        "Turns handled, by channel and outcome.",
        &["channel", "outcome"],
        &r.turns,
    );
    family(
        &mut out,
        "nanogate_tool_calls_total",
        "Tool calls, by tool and outcome.",
        &["tool", "outcome"],
        &r.tool_calls,
    );
    family(
        &mut out,
        "nanogate_consolidations_total",
        "Memory consolidations, by outcome (ok, failed, raw).",
        &["outcome"],
        &r.consolidations,
    );
    family(
        &mut out,
        "nanogate_cron_runs_total",
        "Cron job runs, by status.",
        &["status"],
        &r.cron_runs,
    );
    family(
        &mut out,
        "nanogate_model_errors_total",
        "Failed model requests, by kind.",
        &["kind"],
        &r.model_errors,
    );
    let _ = writeln!(
        out,
        "# HELP nanogate_model_request_duration_seconds Time for one chat request to the model, retries included.\n\
         # TYPE nanogate_model_request_duration_seconds histogram"
    );
    for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&r.latency.buckets) {
        let _ = writeln!(
            out,
            "nanogate_model_request_duration_seconds_bucket{{le=\"{bound}\"}} {}",
            bucket.load(Ordering::Relaxed)
        );
    }
    let count = r.latency.count.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "nanogate_model_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n\
         nanogate_model_request_duration_seconds_sum {}\n\
         nanogate_model_request_duration_seconds_count {count}",
        r.latency.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    );
    for (name, help, value) in [
        (
            "nanogate_lane_queue_depth",
            "Messages queued or running across all lanes.",
            gauges.lane_queue_depth,
        ),
        (
            "nanogate_lanes",
            "Lanes (active chats) alive.",
            gauges.lanes,
        ),
        (
            "nanogate_sessions_cached",
            "Sessions held in memory.",
            gauges.sessions_cached,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    }
    out
}

fn family(out: &mut String, name: &str, help: &str, labels: &[&str], f: &Family) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (values, n) in f.snapshot() {
        let pairs: Vec<String> = labels
            .iter()
            .zip(&values)
            .map(|(l, v)| format!("{l}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(out, "{name}{{{}}} {n}", pairs.join(","));
    }
}

/// Label values escape `\`, `"` and newlines.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histogram_render_in_prometheus_text() {
        turn("metrics-test", "ok");
        turn("metrics-test", "ok");
        tool_call("weird\"tool", false);
        model_request(Duration::from_millis(300), None);
        let text = render(Gauges {
            lane_queue_depth: 3,
            lanes: 2,
            sessions_cached: 7,
        });
        assert!(
            text.contains("nanogate_turns_total{channel=\"metrics-test\",outcome=\"ok\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("nanogate_tool_calls_total{tool=\"weird\\\"tool\",outcome=\"error\"} 1")
        );
        assert!(text.contains("# TYPE nanogate_model_request_duration_seconds histogram"));
        assert!(text.contains("nanogate_model_request_duration_seconds_bucket{le=\"0.5\"}"));
        assert!(text.contains("nanogate_lane_queue_depth 3\n"));
        assert!(text.contains("nanogate_sessions_cached 7\n"));
        // Buckets are cumulative: a 0.3 s request is in le=0.5 and every larger bucket, not in le=0.25.
        let bucket = |le: &str| -> u64 {
            let prefix = format!("nanogate_model_request_duration_seconds_bucket{{le=\"{le}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(
            bucket("0.5") >= 1 && bucket("+Inf") >= bucket("0.5") && bucket("300") >= bucket("0.5")
        );
    }
}
