//! The jobs of `jobs.json` and their nanobot JSON form.
//!
//! nanobot (0.1.4) writes the file with `json.dumps(data, indent=2, ensure_ascii=False)`, every field always
//! present, in a fixed key order, no trailing newline. [`JobsFile::to_text`] writes exactly that, with our
//! Python-exact codec, so a file nanobot wrote round-trips to the same bytes. Keys nanobot does not know (a
//! newer nanobot, a hand edit) are kept and written back after the known ones instead of being dropped.
//!
//! Reading is strict about the shape of known fields (a job whose `everyMs` is a string cannot be scheduled,
//! and guessing would risk firing at the wrong time): [`JobsFile::parse`] reports the JSON path of the first
//! bad value, and the store turns that into an error naming the file.

use crate::json::{Json, Object};

/// `lastStatus` after a successful run.
pub const STATUS_OK: &str = "ok";
/// `lastStatus` after a failed run.
pub const STATUS_ERROR: &str = "error";
/// `lastStatus` when a missed slot was too late to catch up.
pub const STATUS_SKIPPED: &str = "skipped";

/// The whole file: `{"version": 1, "jobs": [...]}`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobsFile {
    /// `version` as written (nanobot writes `1`).
    pub version: Json,
    /// The jobs, in file order.
    pub jobs: Vec<CronJob>,
    /// Top-level keys nanobot does not know, kept in order.
    pub extra: Object,
}

impl Default for JobsFile {
    fn default() -> Self {
        JobsFile {
            version: Json::from(1u64),
            jobs: Vec::new(),
            extra: Object::new(),
        }
    }
}

/// How a job is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleKind {
    /// Once, at `atMs`.
    At,
    /// Every `everyMs` milliseconds.
    Every,
    /// A cron expression `expr` in `tz` (or the local zone).
    Cron,
}

impl ScheduleKind {
    /// The name nanobot writes.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::At => "at",
            ScheduleKind::Every => "every",
            ScheduleKind::Cron => "cron",
        }
    }
}

/// `schedule`: nanobot keeps all four fields and sets the ones its kind uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// `kind`
    pub kind: ScheduleKind,
    /// `atMs`: epoch milliseconds, for `at`.
    pub at_ms: Option<i64>,
    /// `everyMs`: the interval in milliseconds, for `every`.
    pub every_ms: Option<i64>,
    /// `expr`: the cron expression, for `cron`.
    pub expr: Option<String>,
    /// `tz`: an IANA zone name for `cron` (the local zone when absent).
    pub tz: Option<String>,
    /// Keys nanobot does not know.
    pub extra: Object,
}

impl Schedule {
    /// Once at `at_ms`.
    pub fn at(at_ms: i64) -> Self {
        Self::new(ScheduleKind::At, Some(at_ms), None, None, None)
    }

    /// Every `every_ms` milliseconds.
    pub fn every(every_ms: i64) -> Self {
        Self::new(ScheduleKind::Every, None, Some(every_ms), None, None)
    }

    /// A cron expression in `tz` (or the local zone).
    pub fn cron(expr: &str, tz: Option<&str>) -> Self {
        Self::new(
            ScheduleKind::Cron,
            None,
            None,
            Some(expr.to_owned()),
            tz.map(str::to_owned),
        )
    }

    fn new(
        kind: ScheduleKind,
        at_ms: Option<i64>,
        every_ms: Option<i64>,
        expr: Option<String>,
        tz: Option<String>,
    ) -> Self {
        Schedule {
            kind,
            at_ms,
            every_ms,
            expr,
            tz,
            extra: Object::new(),
        }
    }
}

/// `payload`: what a fired job does.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// `kind` (nanobot writes `agent_turn`; kept as written).
    pub kind: String,
    /// `message`: the text the agent receives.
    pub message: String,
    /// `deliver`: send the reply to `channel:to`.
    pub deliver: bool,
    /// `channel`: where to deliver (`telegram`, `discord`, …).
    pub channel: Option<String>,
    /// `to`: the chat id to deliver to.
    pub to: Option<String>,
    /// Keys nanobot does not know.
    pub extra: Object,
}

impl Payload {
    /// An `agent_turn` payload.
    pub fn agent_turn(
        message: &str,
        deliver: bool,
        channel: Option<String>,
        to: Option<String>,
    ) -> Self {
        Payload {
            kind: "agent_turn".into(),
            message: message.to_owned(),
            deliver,
            channel,
            to,
            extra: Object::new(),
        }
    }
}

/// `state`: what the scheduler remembers between runs and restarts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobState {
    /// `nextRunAtMs`: the slot the job fires at next.
    pub next_run_at_ms: Option<i64>,
    /// `lastRunAtMs`: when the last run started; a slot at or before it never runs again.
    pub last_run_at_ms: Option<i64>,
    /// `lastStatus`: `ok`, `error` or `skipped`.
    pub last_status: Option<String>,
    /// `lastError`: why the last run failed or was skipped.
    pub last_error: Option<String>,
    /// Keys nanobot does not know.
    pub extra: Object,
}

/// One job.
#[derive(Debug, Clone, PartialEq)]
pub struct CronJob {
    /// `id`: 8 lowercase hex digits (nanobot: the start of a UUID4).
    pub id: String,
    /// `name`
    pub name: String,
    /// `enabled`
    pub enabled: bool,
    /// `schedule`
    pub schedule: Schedule,
    /// `payload`
    pub payload: Payload,
    /// `state`
    pub state: JobState,
    /// `createdAtMs`
    pub created_at_ms: i64,
    /// `updatedAtMs`
    pub updated_at_ms: i64,
    /// `deleteAfterRun`: an `at` job is removed after its run (otherwise it is disabled).
    pub delete_after_run: bool,
    /// Keys nanobot does not know.
    pub extra: Object,
}

/// A value of the wrong shape at a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    /// `jobs[1].schedule.kind`, …
    pub path: String,
    /// What was expected.
    pub message: String,
}

type Shape<T> = Result<T, ShapeError>;

fn bad<T>(path: &str, message: impl Into<String>) -> Shape<T> {
    Err(ShapeError {
        path: path.to_owned(),
        message: message.into(),
    })
}

/// Takes the known keys out of an object; what remains is its `extra`.
struct Fields {
    obj: Object,
    path: String,
}

impl Fields {
    fn new(v: Json, path: &str) -> Shape<Fields> {
        match v {
            Json::Object(obj) => Ok(Fields {
                obj,
                path: path.to_owned(),
            }),
            _ => bad(path, "expected an object"),
        }
    }

    fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn take(&mut self, key: &str) -> Option<Json> {
        self.obj.remove(key)
    }

    fn string(&mut self, key: &str) -> Shape<String> {
        match self.take(key) {
            Some(Json::String(s)) => Ok(s),
            Some(_) => bad(&self.at(key), "expected a string"),
            None => bad(&self.at(key), "missing"),
        }
    }

    fn opt_string(&mut self, key: &str) -> Shape<Option<String>> {
        match self.take(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => Ok(Some(s)),
            Some(_) => bad(&self.at(key), "expected a string or null"),
        }
    }

    fn bool_or(&mut self, key: &str, default: bool) -> Shape<bool> {
        match self.take(key) {
            None => Ok(default),
            Some(Json::Bool(b)) => Ok(b),
            Some(_) => bad(&self.at(key), "expected true or false"),
        }
    }

    fn opt_ms(&mut self, key: &str) -> Shape<Option<i64>> {
        match self.take(key) {
            None | Some(Json::Null) => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) => Ok(Some(n)),
                None => bad(&self.at(key), "expected an integer (milliseconds) or null"),
            },
        }
    }

    fn ms_or_zero(&mut self, key: &str) -> Shape<i64> {
        Ok(self.opt_ms(key)?.unwrap_or(0))
    }

    fn object(&mut self, key: &str) -> Shape<Fields> {
        let path = self.at(key);
        match self.take(key) {
            Some(v) => Fields::new(v, &path),
            None => bad(&path, "missing"),
        }
    }

    fn rest(self) -> Object {
        self.obj
    }
}

impl JobsFile {
    /// Reads a parsed `jobs.json` document, or says which value has the wrong shape.
    pub fn from_json(doc: Json) -> Shape<JobsFile> {
        let mut top = Fields::new(doc, "")?;
        let version = top.take("version").unwrap_or(Json::from(1u64));
        let jobs = match top.take("jobs") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| CronJob::from_json(v, &format!("jobs[{i}]")))
                .collect::<Shape<Vec<_>>>()?,
            Some(_) => return bad("jobs", "expected an array"),
        };
        Ok(JobsFile {
            version,
            jobs,
            extra: top.rest(),
        })
    }

    /// The document nanobot writes.
    pub fn to_json(&self) -> Json {
        let mut o = Object::new();
        o.insert("version", self.version.clone());
        o.insert(
            "jobs",
            Json::Array(self.jobs.iter().map(CronJob::to_json).collect()),
        );
        extend(&mut o, &self.extra);
        Json::Object(o)
    }

    /// The file's text: `json.dumps(data, indent=2, ensure_ascii=False)`, no trailing newline.
    pub fn to_text(&self) -> String {
        self.to_json().to_python_indent(2)
    }

    /// The job with this id.
    pub fn get(&self, id: &str) -> Option<&CronJob> {
        self.jobs.iter().find(|j| j.id == id)
    }

    /// The job with this id, to change it.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut CronJob> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }

    /// Removes the job with this id; whether there was one.
    pub fn remove(&mut self, id: &str) -> bool {
        let before = self.jobs.len();
        self.jobs.retain(|j| j.id != id);
        self.jobs.len() != before
    }
}

fn extend(o: &mut Object, extra: &Object) {
    for (k, v) in extra.iter() {
        o.insert(k, v.clone());
    }
}

fn opt_str(v: &Option<String>) -> Json {
    v.as_ref().map_or(Json::Null, |s| Json::str(s.as_str()))
}

fn opt_ms(v: Option<i64>) -> Json {
    v.map_or(Json::Null, Json::from)
}

impl CronJob {
    fn from_json(v: Json, path: &str) -> Shape<CronJob> {
        let mut f = Fields::new(v, path)?;
        let id = f.string("id")?;
        let name = f.opt_string("name")?.unwrap_or_default();
        let enabled = f.bool_or("enabled", true)?;

        let mut s = f.object("schedule")?;
        let kind = match s.string("kind")?.as_str() {
            "at" => ScheduleKind::At,
            "every" => ScheduleKind::Every,
            "cron" => ScheduleKind::Cron,
            other => {
                return bad(
                    &s.at("kind"),
                    format!("expected \"at\", \"every\" or \"cron\", found {other:?}"),
                );
            }
        };
        let schedule = Schedule {
            kind,
            at_ms: s.opt_ms("atMs")?,
            every_ms: s.opt_ms("everyMs")?,
            expr: s.opt_string("expr")?,
            tz: s.opt_string("tz")?,
            extra: s.rest(),
        };

        let mut p = f.object("payload")?;
        let payload = Payload {
            kind: p.opt_string("kind")?.unwrap_or_else(|| "agent_turn".into()),
            message: p.opt_string("message")?.unwrap_or_default(),
            deliver: p.bool_or("deliver", false)?,
            channel: p.opt_string("channel")?,
            to: p.opt_string("to")?,
            extra: p.rest(),
        };

        let state = match f.take("state") {
            None | Some(Json::Null) => JobState::default(),
            Some(v) => {
                let mut st = Fields::new(v, &format!("{path}.state"))?;
                JobState {
                    next_run_at_ms: st.opt_ms("nextRunAtMs")?,
                    last_run_at_ms: st.opt_ms("lastRunAtMs")?,
                    last_status: st.opt_string("lastStatus")?,
                    last_error: st.opt_string("lastError")?,
                    extra: st.rest(),
                }
            }
        };
        Ok(CronJob {
            id,
            name,
            enabled,
            schedule,
            payload,
            state,
            created_at_ms: f.ms_or_zero("createdAtMs")?,
            updated_at_ms: f.ms_or_zero("updatedAtMs")?,
            delete_after_run: f.bool_or("deleteAfterRun", false)?,
            extra: f.rest(),
        })
    }

    /// The job as nanobot writes it: every field, in nanobot's order, then unknown keys.
    pub fn to_json(&self) -> Json {
        let mut s = Object::new();
        s.insert("kind", Json::str(self.schedule.kind.as_str()));
        s.insert("atMs", opt_ms(self.schedule.at_ms));
        s.insert("everyMs", opt_ms(self.schedule.every_ms));
        s.insert("expr", opt_str(&self.schedule.expr));
        s.insert("tz", opt_str(&self.schedule.tz));
        extend(&mut s, &self.schedule.extra);

        let mut p = Object::new();
        p.insert("kind", Json::str(self.payload.kind.as_str()));
        p.insert("message", Json::str(self.payload.message.as_str()));
        p.insert("deliver", Json::Bool(self.payload.deliver));
        p.insert("channel", opt_str(&self.payload.channel));
        p.insert("to", opt_str(&self.payload.to));
        extend(&mut p, &self.payload.extra);

        let mut st = Object::new();
        st.insert("nextRunAtMs", opt_ms(self.state.next_run_at_ms));
        st.insert("lastRunAtMs", opt_ms(self.state.last_run_at_ms));
        st.insert("lastStatus", opt_str(&self.state.last_status));
        st.insert("lastError", opt_str(&self.state.last_error));
        extend(&mut st, &self.state.extra);

        let mut o = Object::new();
        o.insert("id", Json::str(self.id.as_str()));
        o.insert("name", Json::str(self.name.as_str()));
        o.insert("enabled", Json::Bool(self.enabled));
        o.insert("schedule", Json::Object(s));
        o.insert("payload", Json::Object(p));
        o.insert("state", Json::Object(st));
        o.insert("createdAtMs", Json::from(self.created_at_ms));
        o.insert("updatedAtMs", Json::from(self.updated_at_ms));
        o.insert("deleteAfterRun", Json::Bool(self.delete_after_run));
        extend(&mut o, &self.extra);
        Json::Object(o)
    }

    /// The session key a fired job runs in: `cron:<id>`.
    pub fn session_key(&self) -> String {
        crate::bus::session_key("cron", &self.id)
    }

    /// The chat the reply is delivered to, when the job delivers: `(channel, to)`. nanobot's default channel
    /// is `cli`.
    pub fn delivery(&self) -> Option<(String, String)> {
        let to = self.payload.to.as_deref().filter(|t| !t.is_empty())?;
        if !self.payload.deliver {
            return None;
        }
        let channel = self
            .payload
            .channel
            .as_deref()
            .filter(|c| !c.is_empty())
            .unwrap_or("cli");
        Some((channel.to_owned(), to.to_owned()))
    }
}

/// nanobot's job name for a message: its first 30 characters.
pub fn name_from_message(message: &str) -> String {
    message.chars().take(30).collect()
}

/// A new job id: 8 lowercase hex digits (as nanobot's `uuid4()[:8]`), not among `taken`.
pub fn new_id(taken: &[CronJob]) -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        // RandomState is seeded randomly per process; the counter and the time make each draw different.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_i64(super::clock::system_now_ms());
        let id = format!("{:08x}", h.finish() as u32);
        if !taken.iter().any(|j| j.id == id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_to_thirty_characters() {
        assert_eq!(name_from_message("short"), "short");
        let long = "é".repeat(40);
        assert_eq!(name_from_message(&long).chars().count(), 30);
    }

    #[test]
    fn ids_are_eight_hex_digits_and_fresh() {
        let id = new_id(&[]);
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(new_id(&[]), new_id(&[]));
    }

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        let doc = Json::parse(
            r#"{"version": 1, "jobs": [{"id": "a", "schedule": {"kind": "weekly"}, "payload": {}}]}"#,
        )
        .unwrap();
        let e = JobsFile::from_json(doc).unwrap_err();
        assert_eq!(e.path, "jobs[0].schedule.kind");
        assert!(e.message.contains("weekly"), "{}", e.message);
        let doc = Json::parse(r#"{"jobs": [{"id": "a", "schedule": {"kind": "every", "everyMs": "1h"}, "payload": {}}]}"#)
            .unwrap();
        assert_eq!(
            JobsFile::from_json(doc).unwrap_err().path,
            "jobs[0].schedule.everyMs"
        );
    }

    #[test]
    fn unknown_keys_survive_after_the_known_ones() {
        let text = r#"{"version": 1, "jobs": [{"id": "a", "name": "n", "enabled": true, "schedule": {"kind": "every", "atMs": null, "everyMs": 1000, "expr": null, "tz": null, "jitter": 5}, "payload": {"kind": "agent_turn", "message": "m", "deliver": false, "channel": null, "to": null}, "state": {"nextRunAtMs": null, "lastRunAtMs": null, "lastStatus": null, "lastError": null}, "createdAtMs": 1, "updatedAtMs": 2, "deleteAfterRun": false, "owner": "x"}], "extra": [1]}"#;
        let file = JobsFile::from_json(Json::parse(text).unwrap()).unwrap();
        assert_eq!(file.to_json().to_python(), text);
    }
}
