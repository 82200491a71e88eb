//! Where a consolidation stops: the first message that stays in the live context.
//!
//! A cut never separates an assistant's tool calls from their results: the first kept message must be a user
//! message or an assistant message (whose own tool results follow it), never a tool result. When the ideal
//! point falls on a tool result, the cut moves forward to the next valid point, so consolidation always makes
//! progress. Indices here are relative to the watermark: `roles[0]` is the first unconsolidated message.

/// Whether the kept part may start with a message of this role.
fn is_cut_point(role: &str) -> bool {
    matches!(role, "user" | "assistant")
}

/// The first valid cut at or after `from`; `roles.len()` (archive everything) when there is none.
fn next_cut(roles: &[&str], from: usize) -> usize {
    (from..roles.len())
        .find(|&i| is_cut_point(roles[i]))
        .unwrap_or(roles.len())
}

/// The classic rule: keep the last `memory_window / 2` messages, archive the rest; `None` when there is
/// nothing to archive.
pub fn classic_end(roles: &[&str], memory_window: usize) -> Option<usize> {
    let target = roles.len().checked_sub(memory_window / 2)?;
    if target == 0 {
        return None;
    }
    Some(next_cut(roles, target))
}

/// The budget rule: keep the newest messages whose tokens add up to at most `keep_tokens`, archive the rest;
/// at least one message is archived, so a budget that nothing fits still makes progress. `None` when there is
/// nothing to archive.
pub fn budget_end(roles: &[&str], tokens: &[usize], keep_tokens: usize) -> Option<usize> {
    if roles.is_empty() {
        return None;
    }
    let mut kept = 0usize;
    let mut start_of_kept = roles.len();
    for i in (0..roles.len()).rev() {
        if kept + tokens[i] > keep_tokens {
            break;
        }
        kept += tokens[i];
        start_of_kept = i;
    }
    Some(next_cut(roles, start_of_kept.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_keeps_half_the_window_and_never_starts_with_a_tool_result() {
        let roles = [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
        ];
        // 8 messages, window 6: keep 3 → target 5 is a tool result; the cut moves on to index 6.
        assert_eq!(classic_end(&roles, 6), Some(6));
        // Window 8: keep 4 → target 4 is a tool result too.
        assert_eq!(classic_end(&roles, 8), Some(6));
        assert_eq!(classic_end(&roles, 10), Some(3));
        assert_eq!(classic_end(&roles, 16), None);
        assert_eq!(classic_end(&roles, 100), None);
        // Nothing valid after the target: everything goes.
        assert_eq!(classic_end(&["user", "assistant", "tool"], 2), Some(3));
    }

    #[test]
    fn budget_keeps_what_fits_and_always_progresses() {
        let roles = [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ];
        let tokens = [10, 10, 500, 10, 10, 10];
        assert_eq!(budget_end(&roles, &tokens, 30), Some(3));
        assert_eq!(budget_end(&roles, &tokens, 25), Some(4));
        assert_eq!(budget_end(&roles, &tokens, 10_000), Some(1));
        assert_eq!(budget_end(&roles, &tokens, 0), Some(6));
        assert_eq!(budget_end(&[], &[], 10), None);
    }

    #[test]
    fn a_cut_never_starts_with_a_tool_result() {
        let roles = [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "tool",
            "user",
        ];
        for window in 0..20 {
            if let Some(end) = classic_end(&roles, window) {
                assert!(
                    end == roles.len() || roles[end] != "tool",
                    "window {window}"
                );
            }
        }
        for keep in 0..10 {
            let end = budget_end(&roles, &[1; 7], keep).unwrap();
            assert!(end == roles.len() || roles[end] != "tool", "keep {keep}");
        }
    }
}
