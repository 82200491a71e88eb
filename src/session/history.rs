//! The model's view of a session: nanobot's `Session.get_history(max_messages)`.

use super::Session;
use crate::json::{Json, Object};

impl Session {
    /// Exactly nanobot's `get_history(max_messages)`:
    /// 1. the messages after `last_consolidated`, then the last `max_messages` of them (`0` means all, as
    ///    Python's `[-0:]` does);
    /// 2. leading entries dropped up to the first `user` message, if there is one;
    /// 3. each entry reduced to `role`, `content` (`""` when absent), and `tool_calls`, `tool_call_id`, `name`
    ///    where present.
    ///
    /// Only the lines in the window are parsed. A line that is not a message (possible only in a file whose
    /// lines are not yet checked, see `load_file_deferred`) is left out, as the first write will move it out.
    pub fn history(&self, max_messages: usize) -> Vec<Json> {
        let start = self.last_consolidated.min(self.len());
        let unconsolidated = self.len() - start;
        let from = if max_messages == 0 {
            start
        } else {
            start + unconsolidated.saturating_sub(max_messages)
        };
        let window: Vec<Json> = (from..self.len())
            .filter_map(|i| self.message(i)?.ok())
            .filter(|m| role_of(m).is_some())
            .collect();
        let first_user = window
            .iter()
            .position(|m| role_of(m) == Some("user"))
            .unwrap_or(0);
        window.into_iter().skip(first_user).map(llm_entry).collect()
    }
}

fn role_of(m: &Json) -> Option<&str> {
    m.as_object()?.get("role")?.as_str()
}

fn llm_entry(m: Json) -> Json {
    let Json::Object(mut m) = m else { return m };
    let mut entry = Object::new();
    entry.insert("role", m.remove("role").unwrap_or(Json::Null));
    entry.insert(
        "content",
        m.remove("content").unwrap_or_else(|| Json::str("")),
    );
    for k in ["tool_calls", "tool_call_id", "name"] {
        if let Some(v) = m.remove(k) {
            entry.insert(k, v);
        }
    }
    Json::Object(entry)
}
