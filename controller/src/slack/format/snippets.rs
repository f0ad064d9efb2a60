//! Long code blocks taken out of the text as snippet uploads.
//!
//! A code block of [`SNIPPET_MIN_LINES`](super::SNIPPET_MIN_LINES) lines or
//! more is hard to read inline and eats the message budget, so the renderer
//! cuts the text there and hands the block over as an
//! [`Outgoing::Snippet`], leaving a `_(code uploaded as NAME)_` line behind.
//! Names are only final once the whole answer is seen (two `snippet.rs`
//! become `snippet-1.rs` and `snippet-2.rs`), so the text gets a placeholder
//! that [`Snippets::finish`] fills in.

use std::collections::HashMap;

use super::Outgoing;
use super::escape::escape;

/// Marks where a snippet's final file name goes in the text (pulldown-cmark
/// replaces NUL in its input, so it cannot collide with the answer's text).
const MARK: char = '\u{0}';

/// The text runs and snippets of an answer, in document order.
#[derive(Default)]
pub(super) struct Snippets {
    pieces: Vec<Outgoing>,
    /// Inferred (not yet de-duplicated) snippet names, in order.
    names: Vec<String>,
}

impl Snippets {
    /// Reserves the next snippet's name and returns the line to leave in the
    /// text in its place.
    pub(super) fn placeholder(&mut self, name: &str) -> String {
        let index = self.names.len();
        self.names.push(name.to_string());
        format!("_(code uploaded as {MARK}{index}{MARK})_")
    }

    /// Adds the text up to a snippet (its placeholder included), then the
    /// snippet.
    pub(super) fn push(&mut self, text: String, snippet: Outgoing) {
        self.pieces.push(Outgoing::Text(text));
        self.pieces.push(snippet);
    }

    /// Every piece in order, `tail` (the text after the last snippet) last,
    /// with duplicate names numbered and the placeholders filled in.
    pub(super) fn finish(mut self, tail: String) -> Vec<Outgoing> {
        if !tail.is_empty() {
            self.pieces.push(Outgoing::Text(tail));
        }
        let names = number_duplicates(&self.names);
        let mut snippet = 0;
        for piece in &mut self.pieces {
            match piece {
                Outgoing::Text(text) => fill_in_names(text, &names),
                Outgoing::Snippet { filename, .. } => {
                    if let Some(name) = names.get(snippet) {
                        filename.clone_from(name);
                    }
                    snippet += 1;
                }
            }
        }
        self.pieces
    }
}

/// Replaces the placeholders in `text` with the final `names`.
fn fill_in_names(text: &mut String, names: &[String]) {
    if text.contains(MARK) {
        for (index, name) in names.iter().enumerate() {
            *text = text.replace(&format!("{MARK}{index}{MARK}"), &escape(name));
        }
    }
}

/// Numbers names that occur more than once: `a.rs`, `a.rs` → `a-1.rs`, `a-2.rs`.
fn number_duplicates(names: &[String]) -> Vec<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in names {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    names
        .iter()
        .map(|name| {
            if counts.get(name.as_str()).copied().unwrap_or(0) < 2 {
                return name.clone();
            }
            let n = seen.entry(name.as_str()).or_default();
            *n += 1;
            match name.rsplit_once('.') {
                Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{n}.{ext}"),
                _ => format!("{name}-{n}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slack::format::test_support::{code_block, snippets, texts};
    use crate::slack::format::{SNIPPET_MIN_LINES, markdown_to_mrkdwn, render_reply};

    #[test]
    fn nineteen_lines_stay_inline() {
        let md = format!("Code:\n\n{}", code_block("rust", SNIPPET_MIN_LINES - 1));
        let out = render_reply(&md, "");
        assert_eq!(out.len(), 1);
        assert!(snippets(&out).is_empty());
        assert!(texts(&out)[0].contains("line 19\n```"));
    }

    #[test]
    fn twenty_lines_become_snippet_in_document_order() {
        let md = format!(
            "Before.\n\n{}\nAfter.",
            code_block("rust", SNIPPET_MIN_LINES)
        );
        let out = render_reply(&md, "");
        let content: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        assert_eq!(
            out,
            vec![
                Outgoing::Text("Before.\n\n_(code uploaded as snippet.rs)_".to_string()),
                Outgoing::Snippet {
                    filename: "snippet.rs".to_string(),
                    filetype: "rust".to_string(),
                    content,
                },
                Outgoing::Text("After.".to_string()),
            ]
        );
    }

    #[test]
    fn snippet_content_is_not_escaped() {
        let md = format!("```\n{}```\n", "a < b && c > d\n".repeat(20));
        let out = render_reply(&md, "");
        let content = out.iter().find_map(|o| match o {
            Outgoing::Snippet { content, .. } => Some(content.clone()),
            Outgoing::Text(_) => None,
        });
        assert_eq!(content, Some("a < b && c > d\n".repeat(20)));
    }

    #[test]
    fn duplicate_names_are_numbered() {
        let md = format!(
            "First:\n\n{}\nSecond:\n\n{}\nOther:\n\n{}",
            code_block("rust", 20),
            code_block("rust", 21),
            code_block("python", 20)
        );
        let out = render_reply(&md, "");
        assert_eq!(
            snippets(&out),
            vec![
                ("snippet-1.rs".to_string(), "rust".to_string()),
                ("snippet-2.rs".to_string(), "rust".to_string()),
                ("snippet.py".to_string(), "python".to_string()),
            ]
        );
        let all = texts(&out).join("\n");
        assert!(all.contains("_(code uploaded as snippet-1.rs)_"), "{all}");
        assert!(all.contains("_(code uploaded as snippet-2.rs)_"), "{all}");
        assert!(!all.contains(MARK));
    }

    #[test]
    fn markdown_to_mrkdwn_never_extracts() {
        let out = markdown_to_mrkdwn(&code_block("rust", 30));
        assert!(out.starts_with("```\nline 1\n"));
        assert!(out.ends_with("line 30\n```"));
    }
}
