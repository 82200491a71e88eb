//! The terminal channel's output: markdown rendered with ANSI styles for a TTY, and a spinner while waiting.

use std::io::Write;
use std::time::Duration;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const STRIKE: &str = "\x1b[9m";
const CYAN: &str = "\x1b[36m";

/// Markdown as styled terminal text: headings bold, emphasis italic, code cyan, code blocks indented, list
/// bullets, links followed by their URL.
pub fn render_markdown(md: &str) -> String {
    let mut out = String::new();
    let mut styles: Vec<&'static str> = Vec::new();
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut in_code_block = false;
    let mut link: Option<String> = None;
    let push_style = |out: &mut String, styles: &mut Vec<&'static str>, s: &'static str| {
        styles.push(s);
        out.push_str(s);
    };
    let pop_style = |out: &mut String, styles: &mut Vec<&'static str>| {
        styles.pop();
        out.push_str(RESET);
        for s in styles.iter() {
            out.push_str(s);
        }
    };
    for event in Parser::new_ext(md, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                push_style(&mut out, &mut styles, BOLD);
                if level == HeadingLevel::H1 {
                    push_style(&mut out, &mut styles, UNDERLINE);
                }
            }
            Event::End(TagEnd::Heading(level)) => {
                if level == HeadingLevel::H1 {
                    pop_style(&mut out, &mut styles);
                }
                pop_style(&mut out, &mut styles);
                out.push_str("\n\n");
            }
            Event::End(TagEnd::Paragraph) => {
                out.push_str(if lists.is_empty() { "\n\n" } else { "\n" })
            }
            Event::Start(Tag::Strong) => push_style(&mut out, &mut styles, BOLD),
            Event::Start(Tag::Emphasis) => push_style(&mut out, &mut styles, ITALIC),
            Event::Start(Tag::Strikethrough) => push_style(&mut out, &mut styles, STRIKE),
            Event::End(TagEnd::Strong | TagEnd::Emphasis | TagEnd::Strikethrough) => {
                pop_style(&mut out, &mut styles)
            }
            Event::Code(code) => {
                out.push_str(CYAN);
                out.push_str(&code);
                out.push_str(RESET);
                styles.iter().for_each(|s| out.push_str(s));
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                in_code_block = true;
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    out.push_str(&format!("{DIM}  {lang}{RESET}\n"));
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                in_code_block = false;
                out.push('\n');
            }
            Event::Start(Tag::List(start)) => lists.push(start),
            Event::End(TagEnd::List(_)) => {
                lists.pop();
                if lists.is_empty() {
                    out.push('\n');
                }
            }
            Event::Start(Tag::Item) => super::push_item_marker(&mut out, &mut lists),
            Event::End(TagEnd::Item) if !out.ends_with('\n') => out.push('\n'),
            Event::Start(Tag::Link { dest_url, .. }) => {
                link = Some(dest_url.to_string());
                push_style(&mut out, &mut styles, UNDERLINE);
            }
            Event::End(TagEnd::Link) => {
                pop_style(&mut out, &mut styles);
                if let Some(url) = link.take() {
                    out.push_str(&format!(" {DIM}({url}){RESET}"));
                }
            }
            Event::Start(Tag::BlockQuote(_)) => out.push_str(&format!("{DIM}│ {RESET}")),
            Event::Text(text) if in_code_block => {
                for line in text.lines() {
                    out.push_str(&format!("    {CYAN}{line}{RESET}\n"));
                }
            }
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => out.push_str(&text),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("────────\n\n"),
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

/// A spinner on stderr until dropped (only when stderr is a terminal).
pub struct Spinner {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Spinner {
    /// Starts the spinner with `label`.
    pub fn start(label: &'static str) -> Self {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Spinner { task: None };
        }
        let task = tokio::spawn(async move {
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            for frame in frames.iter().cycle() {
                eprint!("\r{DIM}{frame} {label}{RESET}");
                let _ = std::io::stderr().flush();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Spinner { task: Some(task) }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_common_markdown() {
        let out = render_markdown(
            "# Title\n\nSome **bold** and `code`.\n\n- one\n- two\n\n```rust\nfn x() {}\n```\n[site](https://e.org)",
        );
        assert!(out.contains(&format!("{BOLD}{UNDERLINE}Title")));
        assert!(out.contains(&format!("{BOLD}bold{RESET}")));
        assert!(out.contains(&format!("{CYAN}code{RESET}")));
        assert!(out.contains("• one\n• two"));
        assert!(out.contains(&format!("    {CYAN}fn x() {{}}{RESET}")));
        assert!(out.contains("(https://e.org)"));
    }
}
