//! Markdown → Slack formatting: turns a model's Markdown answer into the
//! messages (and snippet uploads) we post in a Slack thread.
//!
//! Models answer in CommonMark, but Slack speaks its own "mrkdwn" dialect
//! (`*bold*`, `_italic_`, `<url|text>`, no headings or tables, `&`/`<`/`>`
//! must be escaped) and rejects messages over ~4,000 characters. This module
//! owns that translation, so the rest of the daemon can hand it an answer and
//! post whatever comes back, in order:
//!
//! - [`markdown_to_mrkdwn`] converts the syntax, walking pulldown-cmark's
//!   event stream and writing mrkdwn itself;
//! - [`split_message`] cuts mrkdwn into chunks under a size limit without
//!   ever leaving a ```` ``` ```` code fence unbalanced;
//! - [`render_reply`] does both, and additionally takes long code blocks out
//!   of the text as [`Outgoing::Snippet`] file uploads (with a file name
//!   inferred from the surrounding prose or the fence's language).
//!
//! Tables (the GFM extension is enabled) are rendered as a code block of
//! aligned columns, since Slack has no table syntax.
//!
//! The answer is model text, so the output is **inert**: the only `<…>` markup
//! in a rendered message is a user or channel reference (`<@U…>`, `<#C…|name>`)
//! written in the answer's prose, or a web or mail link rendered from Markdown
//! link syntax or an autolink whose label shows no other address than its
//! target. Everything else, whatever its Unicode, is escaped text: no
//! `<!channel>`, `<!here>` or `<!everyone>`, no link that shows one address and
//! leads to another. The renderer issues every `<…>` it writes through one
//! place and checks each finished message against that list.
//! [`escape_text`] makes other text (status lines) inert the same way.
//!
//! This file holds the public API and the assembly of a reply (prefix,
//! per-message limits); each step lives in a submodule with one job:
//!
//! - `render` walks the Markdown events, one method per kind of event or tag;
//! - `output` writes mrkdwn lines: block separators and quote/list prefixes;
//! - `escape` escapes Slack's control characters and defuses stray fences;
//! - `references` carries the answer's user and channel references through
//!   parsing as tokens the answer cannot forge;
//! - `inert` records the markup written and checks finished messages;
//! - `links` renders links and images as `<url|text>`, never under a label
//!   that shows another address;
//! - `table` lays tables out as aligned columns;
//! - `snippets` cuts long code blocks out and numbers their file names;
//! - `names` infers a snippet's file name from the prose before it;
//! - `langs` is the table of fence languages, extensions and Slack types;
//! - `split` cuts mrkdwn under the size limit with balanced fences, never
//!   inside a `<…>`.

#[cfg(test)]
mod attacks;
mod escape;
mod inert;
mod langs;
mod links;
mod names;
mod oracle;
mod output;
mod references;
mod render;
mod snippets;
mod split;
mod table;
#[cfg(test)]
mod test_support;

pub(crate) use links::is_invisible;
pub use oracle::foreign_markup;
pub use split::split_message;

/// Size limit for one Slack message, in characters (Slack recommends staying
/// under 4,000).
pub const MAX_MESSAGE_CHARS: usize = 3900;

/// Code blocks with at least this many lines are uploaded as snippets instead
/// of being posted inline.
pub const SNIPPET_MIN_LINES: usize = 20;

/// A Markdown/mrkdwn code fence; the only one we ever write.
const FENCE: &str = "```";

/// One piece of output for a Slack thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A chat message in Slack mrkdwn, under the size limit.
    Text(String),
    /// A long code block to upload as a snippet file into the thread.
    Snippet {
        /// File name shown in Slack, e.g. `session.rs` or `snippet.py`.
        filename: String,
        /// Slack file type, e.g. `rust`, `python`, `text`.
        filetype: String,
        /// The code, verbatim (not escaped).
        content: String,
    },
}

/// Splits and converts a Markdown answer, prefixing the first text message
/// with `prefix` (e.g. `"*PM:* "`).
///
/// Code blocks of [`SNIPPET_MIN_LINES`] lines or more become
/// [`Outgoing::Snippet`]s placed where they occurred (after the text that
/// preceded them), with a short `_(code uploaded as NAME)_` line left in the
/// text. Every text run is split with [`split_message`] at
/// [`MAX_MESSAGE_CHARS`]. A blank answer yields `prefix` + `_(no answer)_`;
/// an answer that is only code yields `prefix` + `_(see the snippet below)_`
/// followed by the snippets.
pub fn render_reply(markdown: &str, prefix: &str) -> Vec<Outgoing> {
    if markdown.trim().is_empty() {
        return no_answer(prefix);
    }
    let converted = render::convert(markdown, true);
    if converted.has_text {
        split_texts(converted.pieces, prefix, &converted.markup)
    } else {
        snippets_only(converted.pieces, prefix)
    }
}

/// Converts Markdown to Slack mrkdwn, keeping every code block inline.
///
/// Bold → `*b*`, italic → `_i_`, strikethrough → `~s~`, links and images →
/// `<url|text>`, headings → a `*Heading*` line, lists → `• item` / `1. item`
/// (nested levels indented by 4 spaces), block quotes → `> ` lines, rules →
/// `———`, fenced code → a bare ```` ``` ```` block, tables → a code block of
/// aligned columns. `&`, `<` and `>` in text and code are escaped as Slack
/// requires; the result is inert (see the module's documentation).
pub fn markdown_to_mrkdwn(markdown: &str) -> String {
    let converted = render::convert(markdown, false);
    let mut text = String::new();
    for piece in converted.pieces {
        if let Outgoing::Text(t) = piece {
            text.push_str(&t);
        }
    }
    inert::enforce(&text, &converted.markup)
}

/// Plain text (a plan's title, a tool's activity, a command) as inert mrkdwn: `&`, `<`
/// and `>` escaped, so Slack shows it as written and reads no markup in it.
pub fn escape_text(text: &str) -> String {
    escape::escape(text)
}

/// The reply to a blank answer.
fn no_answer(prefix: &str) -> Vec<Outgoing> {
    vec![Outgoing::Text(format!("{prefix}_(no answer)_"))]
}

/// The reply to an answer without text of its own: a lead line pointing at
/// the snippets, then the snippets (their placeholder texts are dropped).
fn snippets_only(pieces: Vec<Outgoing>, prefix: &str) -> Vec<Outgoing> {
    let snippets = pieces
        .iter()
        .filter(|p| matches!(p, Outgoing::Snippet { .. }))
        .count();
    if snippets == 0 {
        return no_answer(prefix);
    }
    let note = if snippets == 1 {
        "_(see the snippet below)_"
    } else {
        "_(see the snippets below)_"
    };
    let mut out = vec![Outgoing::Text(format!("{prefix}{note}"))];
    out.extend(
        pieces
            .into_iter()
            .filter(|p| matches!(p, Outgoing::Snippet { .. })),
    );
    out
}

/// Splits every text run under the message limit, checks each chunk holds no markup
/// but `markup`, and prefixes the first chunk; snippets stay where they are.
fn split_texts(pieces: Vec<Outgoing>, prefix: &str, markup: &inert::Markup) -> Vec<Outgoing> {
    // The prefix may be followed by a line break, hence the `+ 1`.
    let first_limit = MAX_MESSAGE_CHARS.saturating_sub(prefix.chars().count() + 1);
    let mut out = Vec::new();
    let mut prefixed = false;
    for piece in pieces {
        match piece {
            Outgoing::Text(text) => {
                let limit = if prefixed {
                    MAX_MESSAGE_CHARS
                } else {
                    first_limit
                };
                for chunk in split_message(&text, limit) {
                    let chunk = inert::enforce(&chunk, markup);
                    if prefixed {
                        out.push(Outgoing::Text(chunk));
                    } else {
                        out.push(Outgoing::Text(with_prefix(prefix, &chunk)));
                        prefixed = true;
                    }
                }
            }
            snippet @ Outgoing::Snippet { .. } => out.push(snippet),
        }
    }
    out
}

/// Puts the reply prefix before the first chunk; block syntax that must start
/// a line (fences, quotes, list items) goes on the next line.
fn with_prefix(prefix: &str, chunk: &str) -> String {
    if prefix.is_empty() {
        return chunk.to_string();
    }
    let digits = chunk.chars().take_while(char::is_ascii_digit).count();
    let ordered_item = digits > 0 && chunk[digits..].starts_with(". ");
    let block_start = chunk.starts_with(FENCE)
        || chunk.starts_with('>')
        || chunk.starts_with('•')
        || ordered_item;
    if block_start {
        format!("{}\n{chunk}", prefix.trim_end())
    } else {
        format!("{prefix}{chunk}")
    }
}

/// Whether a line (or a block's text) has nothing but whitespace.
fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::test_support::{code_block, texts};
    use super::*;

    #[test]
    fn prefix_goes_on_first_text_only() {
        let para = "word ".repeat(700);
        let md = format!("{para}\n\n{para}\n\n{para}");
        let out = render_reply(&md, "*PM:* ");
        assert!(out.len() >= 2);
        let texts = texts(&out);
        assert!(texts[0].starts_with("*PM:* word"));
        assert!(texts[1..].iter().all(|t| !t.contains("*PM:*")));
        assert!(texts.iter().all(|t| t.chars().count() <= MAX_MESSAGE_CHARS));
    }

    #[test]
    fn prefix_before_block_syntax_gets_own_line() {
        assert_eq!(
            render_reply("- a\n- b", "*PM:* "),
            vec![Outgoing::Text("*PM:*\n• a\n• b".to_string())]
        );
        assert_eq!(
            render_reply("Hi **there**", "*PM:* "),
            vec![Outgoing::Text("*PM:* Hi *there*".to_string())]
        );
    }

    #[test]
    fn only_a_snippet_gets_a_lead_text() {
        let out = render_reply(&code_block("rust", 20), "*PM:* ");
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0],
            Outgoing::Text("*PM:* _(see the snippet below)_".to_string())
        );
        assert!(matches!(&out[1], Outgoing::Snippet { filename, .. } if filename == "snippet.rs"));
    }

    #[test]
    fn empty_answer() {
        let expected = vec![Outgoing::Text("*PM:* _(no answer)_".to_string())];
        assert_eq!(render_reply("", "*PM:* "), expected);
        assert_eq!(render_reply("  \n\t\n", "*PM:* "), expected);
    }
}
