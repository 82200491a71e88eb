//! What the model sees at the start of a turn: the system prompt and the message list.
//!
//! The system prompt is built fresh for every turn from: who the agent is, the current date and time with the
//! timezone, the channel and chat id, the workspace's instruction files (`AGENTS.md`, `SOUL.md`, `USER.md`,
//! `TOOLS.md`, `IDENTITY.md`, where present), the long-term memory (`memory/MEMORY.md`), and the list of skills
//! (`skills/*/SKILL.md` with their descriptions; the model reads a skill's file with `read_file` when it needs it).

use std::path::Path;

use super::Agent;
use super::memory::Summary;
use crate::bus::Inbound;
use crate::json::{Json, Object};

/// The workspace files put into the system prompt, in this order.
pub const BOOTSTRAP_FILES: [&str; 5] =
    ["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md"];

/// Largest part of any one workspace file put into the prompt; a runaway file must not fill the context.
const MAX_FILE_CHARS: usize = 20_000;

/// The system prompt for a turn in `channel:chat_id`.
pub fn system_prompt(workspace: &Path, channel: &str, chat_id: &str) -> String {
    let now = chrono::Local::now();
    let mut parts = vec![format!(
        "# nanogate\n\nYou are a personal assistant running in nanogate. You have tools to read, write and edit \
         files in your workspace, run shell commands, fetch web pages and send messages. Be concise; use tools \
         when they help, and say plainly when something failed.\n\n\
         Current time: {} ({}, UTC{})\nChannel: {channel}\nChat ID: {chat_id}\nWorkspace: {}",
        now.format("%Y-%m-%d %H:%M (%A)"),
        local_zone_name(),
        now.format("%:z"),
        workspace.display()
    )];
    for name in BOOTSTRAP_FILES {
        if let Some(text) = read_capped(&workspace.join(name)) {
            parts.push(format!("## {name}\n\n{text}"));
        }
    }
    if let Some(memory) =
        read_capped(&workspace.join("memory/MEMORY.md")).filter(|m| !m.trim().is_empty())
    {
        parts.push(format!("# Memory\n\n{memory}"));
    }
    let skills = skills(workspace);
    if !skills.is_empty() {
        let mut s = String::from(
            "# Skills\n\nSkills extend what you can do. To use one, read its SKILL.md with read_file first.\n",
        );
        for (name, description, path) in skills {
            s.push_str(&format!("\n- {name}: {description} ({path})"));
        }
        parts.push(s);
    }
    parts.join("\n\n---\n\n")
}

/// The IANA zone name when the system says it (TZ or /etc/localtime), else "local time".
fn local_zone_name() -> String {
    if let Ok(tz) = std::env::var("TZ")
        && !tz.is_empty()
    {
        return tz.trim_start_matches(':').to_owned();
    }
    std::fs::read_link("/etc/localtime")
        .ok()
        .and_then(|p| {
            let s = p.to_string_lossy().into_owned();
            s.split_once("zoneinfo/").map(|(_, zone)| zone.to_owned())
        })
        .unwrap_or_else(|| "local time".into())
}

fn read_capped(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    if text.chars().count() <= MAX_FILE_CHARS {
        return Some(text);
    }
    let cut: String = text.chars().take(MAX_FILE_CHARS).collect();
    Some(format!(
        "{cut}\n\n[{}: cut at {MAX_FILE_CHARS} characters]",
        path.display()
    ))
}

/// `(name, description, relative path)` of each `skills/<name>/SKILL.md`, sorted by name.
pub fn skills(workspace: &Path) -> Vec<(String, String, String)> {
    let Ok(entries) = std::fs::read_dir(workspace.join("skills")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let dir_name = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path().join("SKILL.md")).ok()?;
            let (name, description) = frontmatter(&text);
            Some((
                name.unwrap_or_else(|| dir_name.clone()),
                description.unwrap_or_else(|| first_line(&text)),
                format!("skills/{dir_name}/SKILL.md"),
            ))
        })
        .collect();
    out.sort();
    out
}

/// `name:` and `description:` from a `---` front-matter block.
fn frontmatter(text: &str) -> (Option<String>, Option<String>) {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return (None, None);
    }
    let (mut name, mut description) = (None, None);
    for line in lines.take_while(|l| l.trim() != "---") {
        let clean = |v: &str| v.trim().trim_matches(|c| c == '"' || c == '\'').to_owned();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(clean(v));
        } else if let Some(v) = line.strip_prefix("description:") {
            description = Some(clean(v));
        }
    }
    (name, description)
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty() && *l != "---")
        .unwrap_or("(no description)")
        .to_owned()
}

/// The image type of a file, by its extension; `None` for anything else.
fn image_mime(path: &Path) -> Option<&'static str> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => Some("image/png"),
        Some("jpg" | "jpeg") => Some("image/jpeg"),
        Some("gif") => Some("image/gif"),
        Some("webp") => Some("image/webp"),
        _ => None,
    }
}

/// Largest image sent inline as an image part; bigger ones stay a path reference.
const MAX_INLINE_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

/// Tokens counted for one image part (providers bill a few hundred to about a thousand per image).
const IMAGE_TOKENS: usize = 1_000;

/// The user's message as the model gets it in this turn: [`user_content`], and, when the model accepts images
/// (`provider.vision`), each attached image as an `image_url` part with a data URL. The session keeps only
/// [`user_content`]; an image that cannot be read stays a path reference.
pub async fn request_user_content(inbound: &Inbound, vision: bool) -> Json {
    let text = user_content(inbound);
    if !vision {
        return text;
    }
    let mut parts = Vec::new();
    for path in &inbound.media {
        let Some(mime) = image_mime(path) else {
            continue;
        };
        let small = tokio::fs::metadata(path)
            .await
            .is_ok_and(|m| m.len() <= MAX_INLINE_IMAGE_BYTES);
        if !small {
            continue;
        }
        match tokio::fs::read(path).await {
            Ok(bytes) => {
                use base64::Engine;
                let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                let mut url = Object::new();
                url.insert("url", Json::String(format!("data:{mime};base64,{data}")));
                let mut part = Object::new();
                part.insert("type", Json::str("image_url"));
                part.insert("image_url", Json::Object(url));
                parts.push(Json::Object(part));
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), "cannot read an image for the model: {e}")
            }
        }
    }
    if parts.is_empty() {
        return text;
    }
    let mut text_part = Object::new();
    text_part.insert("type", Json::str("text"));
    text_part.insert("text", text);
    parts.insert(0, Json::Object(text_part));
    Json::Array(parts)
}

/// The user's message as the session stores it: the text, plus a line per attached file. Images are referenced
/// by path in the text so the session file stays small and readable.
pub fn user_content(inbound: &Inbound) -> Json {
    let mut text = inbound.text.clone();
    for path in &inbound.media {
        let kind = if image_mime(path).is_some() {
            "image"
        } else {
            "file"
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("[{kind}: {}]", path.display()));
    }
    Json::String(text)
}

/// The system message of a turn: [`system_prompt`], then, when sessions end by themselves
/// (`session.idle_reset_minutes`), the last three HISTORY.md entries of the past 14 days under "Recent
/// conversations", then the session's structured summary, if it has one.
pub fn system_message(
    agent: &Agent,
    channel: &str,
    chat_id: &str,
    summary: Option<&Summary>,
) -> Json {
    let mut prompt = system_prompt(&agent.workspace, channel, chat_id);
    if agent.config.session.idle_reset_minutes > 0 {
        let now = chrono::Local::now().naive_local();
        match agent.memory.files().recent_entries(3, 14, now) {
            Ok(entries) if !entries.is_empty() => {
                prompt.push_str("\n\n---\n\n# Recent conversations\n\n");
                prompt.push_str(&entries.join("\n\n"));
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot read memory/HISTORY.md: {e}"),
        }
    }
    if let Some(summary) = summary {
        prompt.push_str("\n\n---\n\n");
        prompt.push_str(&summary.render());
    }
    message("system", Json::String(prompt))
}

/// `{"role": role, "content": content}`.
pub fn message(role: &str, content: Json) -> Json {
    let mut o = Object::new();
    o.insert("role", Json::str(role));
    o.insert("content", content);
    Json::Object(o)
}

/// A rough token count (4 characters a token), enough for budgets and `/status`.
/// Image parts count as [`IMAGE_TOKENS`] each, not as the characters of their data URL.
pub fn estimate_tokens(messages: &[Json], tools: Option<&Json>) -> usize {
    let mut images = 0;
    let mut image_chars = 0;
    for m in messages {
        let parts = m
            .as_object()
            .and_then(|o| o.get("content"))
            .and_then(Json::as_array)
            .unwrap_or_default();
        for p in parts {
            if let Some(url) = p
                .as_object()
                .and_then(|o| o.get("image_url"))
                .and_then(Json::as_object)
                .and_then(|u| u.get("url"))
                .and_then(Json::as_str)
            {
                images += 1;
                image_chars += url.chars().count();
            }
        }
    }
    let chars: usize = messages
        .iter()
        .map(|m| m.to_python().chars().count())
        .sum::<usize>()
        + tools.map_or(0, |t| t.to_python().chars().count());
    chars.saturating_sub(image_chars).div_ceil(4) + images * IMAGE_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_has_files_memory_and_skills_in_order() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("SOUL.md"), "soul text").unwrap();
        std::fs::write(ws.path().join("AGENTS.md"), "agents text").unwrap();
        std::fs::create_dir_all(ws.path().join("memory")).unwrap();
        std::fs::write(ws.path().join("memory/MEMORY.md"), "likes tea").unwrap();
        std::fs::create_dir_all(ws.path().join("skills/weather")).unwrap();
        std::fs::write(
            ws.path().join("skills/weather/SKILL.md"),
            "---\nname: weather\ndescription: \"Forecasts\"\n---\nbody",
        )
        .unwrap();
        let p = system_prompt(ws.path(), "telegram", "42");
        let pos = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s} missing in {p}"));
        assert!(pos("Channel: telegram") < pos("## AGENTS.md"));
        assert!(pos("## AGENTS.md") < pos("## SOUL.md"));
        assert!(pos("## SOUL.md") < pos("# Memory"));
        assert!(pos("likes tea") < pos("- weather: Forecasts (skills/weather/SKILL.md)"));
        assert!(p.contains("Chat ID: 42"));
        assert!(!p.contains("USER.md"));
    }

    #[test]
    fn media_become_references() {
        let mut m = Inbound::text("telegram", "1", "look");
        m.media = vec!["/w/media/a.JPG".into(), "/w/media/b.pdf".into()];
        assert_eq!(
            user_content(&m),
            Json::str("look\n[image: /w/media/a.JPG]\n[file: /w/media/b.pdf]")
        );
    }

    #[test]
    fn an_image_part_counts_as_a_fixed_number_of_tokens() {
        let huge = format!("data:image/png;base64,{}", "A".repeat(400_000));
        let m = Json::parse(&format!(
            r#"{{"role": "user", "content": [{{"type": "text", "text": "hi"}}, {{"type": "image_url", "image_url": {{"url": "{huge}"}}}}]}}"#
        ))
        .unwrap();
        let tokens = estimate_tokens(&[m], None);
        assert!(
            (IMAGE_TOKENS..IMAGE_TOKENS + 50).contains(&tokens),
            "{tokens}"
        );
    }
}
