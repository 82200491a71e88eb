//! Markdown as models write it → the HTML subset Telegram accepts (`parse_mode = HTML`).
//!
//! Telegram knows `<b> <i> <s> <u> <code> <pre> <a href> <blockquote>` and nothing else, and rejects a message
//! whose tags do not balance. pulldown-cmark parses the markdown, so emphasis and code are recognised the way
//! CommonMark does; everything else becomes text: headings turn bold, list items get a bullet or their number,
//! raw HTML from the model is shown escaped. Text is escaped (`& < >`), attribute values also `"`. When Telegram
//! still rejects the result, the caller resends the part as plain text.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Escapes `& < >` for Telegram HTML text.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

fn escape_attr(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

/// Converts markdown to Telegram HTML.
pub fn markdown_to_html(md: &str) -> String {
    let mut out = String::with_capacity(md.len() + md.len() / 8);
    // One entry per open list: the next number of an ordered list, `None` for bullets.
    let mut lists: Vec<Option<u64>> = Vec::new();
    let parser = Parser::new_ext(md, Options::ENABLE_STRIKETHROUGH);
    for event in parser {
        match event {
            Event::Start(tag) => match tag {
                Tag::Strong | Tag::Heading { .. } => out.push_str("<b>"),
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => match kind {
                    CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                        let lang = lang.split_whitespace().next().unwrap_or_default();
                        out.push_str(&format!(
                            "<pre><code class=\"language-{}\">",
                            escape_attr(lang)
                        ));
                    }
                    _ => out.push_str("<pre><code>"),
                },
                Tag::Link { dest_url, .. } => {
                    out.push_str(&format!("<a href=\"{}\">", escape_attr(&dest_url)));
                }
                Tag::List(start) => {
                    if !lists.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(start);
                }
                Tag::Item => super::push_item_marker(&mut out, &mut lists),
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Heading(_) => out.push_str("</b>\n\n"),
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::BlockQuote(_) => {
                    trim_newlines(&mut out);
                    out.push_str("</blockquote>\n\n");
                }
                TagEnd::CodeBlock => {
                    trim_newlines(&mut out);
                    out.push_str("</code></pre>\n\n");
                }
                TagEnd::Link => out.push_str("</a>"),
                TagEnd::Paragraph => {
                    out.push_str(if lists.is_empty() { "\n\n" } else { "\n" });
                }
                TagEnd::Item if !out.ends_with('\n') => out.push('\n'),
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        out.push('\n');
                    }
                }
                _ => {}
            },
            Event::Text(t) => out.push_str(&escape(&t)),
            Event::Code(t) => {
                out.push_str("<code>");
                out.push_str(&escape(&t));
                out.push_str("</code>");
            }
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&escape(&t)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("———\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

fn trim_newlines(s: &mut String) {
    while s.ends_with('\n') {
        s.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_styles() {
        assert_eq!(
            markdown_to_html("**b** *i* ~~s~~ `c<d>` [l](https://x.y/?a=1&b=2)"),
            "<b>b</b> <i>i</i> <s>s</s> <code>c&lt;d&gt;</code> <a href=\"https://x.y/?a=1&amp;b=2\">l</a>"
        );
    }

    #[test]
    fn code_block_with_language_and_escaping() {
        let html = markdown_to_html("```rust\nif a < b && c > d {}\n```");
        assert_eq!(
            html,
            "<pre><code class=\"language-rust\">if a &lt; b &amp;&amp; c &gt; d {}</code></pre>"
        );
    }

    #[test]
    fn headings_lists_and_text_escaping() {
        let html = markdown_to_html("# Title\n\n- one\n- two\n\n1. a\n2. b\n\n5 < 6 & 7 > 2");
        assert!(html.starts_with("<b>Title</b>\n\n"), "{html}");
        assert!(html.contains("• one\n• two\n"), "{html}");
        assert!(html.contains("1. a\n2. b\n"), "{html}");
        assert!(html.ends_with("5 &lt; 6 &amp; 7 &gt; 2"), "{html}");
    }

    #[test]
    fn raw_html_is_shown_not_interpreted() {
        assert_eq!(
            markdown_to_html("<script>x</script>"),
            "&lt;script&gt;x&lt;/script&gt;"
        );
    }
}
