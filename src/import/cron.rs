//! Cron jobs: nanobot's `jobs.json` (either generation) → the classic store nanogate's scheduler reads.
//!
//! The classic format (spec §3) writes every field, in a fixed order, with `indent=2` and no trailing newline.
//! 0.3.x adds `payload.channelMeta`, `sessionKey`, `originChannel`, `originChatId`, `originMetadata` and
//! `state.runHistory`; these are dropped and listed. When a 0.3.x job names no `channel`/`to` but has an
//! origin chat, the origin fills them (that is the chat the job was created in), with `deliver` unchanged.
//! nanobot's own `system_event` jobs (its dream and heartbeat timers) are not agent turns and are skipped:
//! nanogate's heartbeat is configured in `[heartbeat]`. A job missing `id` or with an unknown schedule kind is
//! skipped with the reason.

use std::collections::BTreeSet;

use super::{Item, Kind, Options, Outcome, Source, create_new, read_text};
use crate::json::{Json, Object};

/// The cron part of the import.
pub fn import(source: &Source, opts: &Options) -> Vec<Item> {
    let mut items = Vec::new();
    let candidates = [
        source.workspace.join("cron/jobs.json"),
        source.root.join("cron/jobs.json"),
    ];
    let mut found = candidates.iter().filter(|p| p.is_file());
    let Some(file) = found.next() else {
        return items;
    };
    let label = |p: &std::path::Path| {
        p.strip_prefix(&source.root)
            .unwrap_or(p)
            .display()
            .to_string()
    };
    for other in found {
        items.push(Item::skipped(
            Kind::Cron,
            label(other),
            format!("only one job store is imported, {} was used", label(file)),
        ));
    }
    let what = label(file);
    let jobs = match read_text(file).and_then(|t| convert(&t)) {
        Ok(j) => j,
        Err(reason) => {
            items.insert(0, Item::skipped(Kind::Cron, what, reason));
            return items;
        }
    };
    let target = opts.cron_store.clone();
    let mut item = if target.exists() {
        let same = std::fs::read_to_string(&target).ok().as_deref() == Some(jobs.text.as_str());
        if same {
            Item::new(Kind::Cron, what, Outcome::Exists { target })
        } else {
            Item::skipped(
                Kind::Cron,
                what,
                format!(
                    "{} exists (never overwritten; add the jobs by hand)",
                    target.display()
                ),
            )
        }
    } else if !opts.apply {
        Item::new(Kind::Cron, what, Outcome::Import { target })
    } else {
        match create_new(&target, jobs.text.as_bytes()) {
            Ok(true) => Item::new(Kind::Cron, what, Outcome::Import { target }),
            Ok(false) => Item::new(Kind::Cron, what, Outcome::Exists { target }),
            Err(e) => Item::skipped(
                Kind::Cron,
                what,
                format!("cannot write {}: {e}", target.display()),
            ),
        }
    };
    item.details = jobs.notes;
    items.insert(0, item);
    items
}

/// A converted job store.
#[derive(Debug)]
pub struct Jobs {
    /// The classic `jobs.json` text.
    pub text: String,
    /// One note per job and per dropped field.
    pub notes: Vec<String>,
}

/// Converts the text of a `jobs.json` into the classic store.
pub fn convert(text: &str) -> Result<Jobs, String> {
    let root = Json::parse(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let list = root
        .as_object()
        .and_then(|o| o.get("jobs"))
        .and_then(Json::as_array)
        .ok_or("no \"jobs\" list")?;
    let mut notes = Vec::new();
    let mut jobs = Vec::new();
    let mut dropped = BTreeSet::new();
    for (i, job) in list.iter().enumerate() {
        let Some(job) = job.as_object() else {
            notes.push(format!("job {}: not an object; skipped", i + 1));
            continue;
        };
        match convert_job(job, &mut dropped) {
            Ok((converted, remark)) => {
                let id = converted
                    .get("id")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let name = converted
                    .get("name")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned();
                notes.push(format!("job {id} {name:?}: imported{remark}"));
                jobs.push(Json::Object(converted));
            }
            Err(reason) => {
                let id = job
                    .get("id")
                    .map(Json::to_python)
                    .unwrap_or_else(|| "?".into());
                notes.push(format!("job {id}: skipped: {reason}"));
            }
        }
    }
    if !dropped.is_empty() {
        notes.push(format!(
            "fields without a classic equivalent dropped: {}",
            dropped.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut store = Object::new();
    store.insert("version", Json::from(1u64));
    store.insert("jobs", Json::Array(jobs));
    Ok(Jobs {
        text: Json::Object(store).to_python_indent(2),
        notes,
    })
}

const SCHEDULE: [&str; 5] = ["kind", "atMs", "everyMs", "expr", "tz"];
const PAYLOAD: [&str; 5] = ["kind", "message", "deliver", "channel", "to"];
const STATE: [&str; 4] = ["nextRunAtMs", "lastRunAtMs", "lastStatus", "lastError"];
const JOB: [&str; 9] = [
    "id",
    "name",
    "enabled",
    "schedule",
    "payload",
    "state",
    "createdAtMs",
    "updatedAtMs",
    "deleteAfterRun",
];

fn convert_job(job: &Object, dropped: &mut BTreeSet<String>) -> Result<(Object, String), String> {
    let id = job
        .get("id")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("no id")?;
    let empty = Object::new();
    let sub = |name: &str| job.get(name).and_then(Json::as_object).unwrap_or(&empty);
    let (schedule, payload, state) = (sub("schedule"), sub("payload"), sub("state"));
    let kind = schedule.get("kind").and_then(Json::as_str).unwrap_or("");
    if !matches!(kind, "at" | "every" | "cron") {
        return Err(format!("unknown schedule kind {kind:?}"));
    }
    let payload_kind = payload
        .get("kind")
        .and_then(Json::as_str)
        .unwrap_or("agent_turn");
    if payload_kind != "agent_turn" {
        return Err(format!(
            "a {payload_kind:?} job is nanobot's own timer (dream, heartbeat), not an agent turn; nanogate's heartbeat is set in [heartbeat]"
        ));
    }
    for (name, obj, known) in [
        ("schedule", schedule, &SCHEDULE[..]),
        ("payload", payload, &PAYLOAD[..]),
        ("state", state, &STATE[..]),
        ("", job, &JOB[..]),
    ] {
        for (k, _) in obj.iter() {
            if !known.contains(&k) {
                dropped.insert(if name.is_empty() {
                    k.to_owned()
                } else {
                    format!("{name}.{k}")
                });
            }
        }
    }
    let pick = |obj: &Object, keys: &[&str], default: &dyn Fn(&str) -> Json| -> Object {
        keys.iter()
            .map(|k| {
                (
                    (*k).to_owned(),
                    obj.get(k).cloned().unwrap_or_else(|| default(k)),
                )
            })
            .collect()
    };
    let null = |_: &str| Json::Null;
    let mut remark = String::new();
    let mut p = pick(payload, &PAYLOAD, &|k| match k {
        "kind" => Json::str("agent_turn"),
        "message" => Json::str(""),
        "deliver" => Json::Bool(false),
        _ => Json::Null,
    });
    if p.get("channel") == Some(&Json::Null)
        && p.get("to") == Some(&Json::Null)
        && let (Some(ch), Some(to)) = (
            payload.get("originChannel").and_then(Json::as_str),
            payload.get("originChatId").and_then(Json::as_str),
        )
    {
        p.insert("channel", Json::str(ch));
        p.insert("to", Json::str(to));
        remark = format!(" (channel/to set from its origin chat {ch}:{to})");
    }
    let mut out = Object::new();
    out.insert("id", Json::str(id));
    out.insert(
        "name",
        job.get("name").cloned().unwrap_or_else(|| Json::str(id)),
    );
    out.insert(
        "enabled",
        job.get("enabled").cloned().unwrap_or(Json::Bool(true)),
    );
    out.insert("schedule", Json::Object(pick(schedule, &SCHEDULE, &null)));
    out.insert("payload", Json::Object(p));
    out.insert("state", Json::Object(pick(state, &STATE, &null)));
    let created = job.get("createdAtMs").cloned().unwrap_or(Json::from(0u64));
    out.insert("createdAtMs", created.clone());
    out.insert(
        "updatedAtMs",
        job.get("updatedAtMs").cloned().unwrap_or(created),
    );
    out.insert(
        "deleteAfterRun",
        job.get("deleteAfterRun")
            .cloned()
            .unwrap_or(Json::Bool(false)),
    );
    Ok((out, remark))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_store_round_trips() {
        // A classic store converts to itself, byte for byte.
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/nanobot-0.1.4/cron/jobs.json"
        ))
        .unwrap();
        let jobs = convert(&text).unwrap();
        assert_eq!(jobs.text, text);
    }
}
