//! Helpers shared by the formatting tests: Markdown code blocks to feed in,
//! and views of the [`Outgoing`] pieces that come out.

use super::Outgoing;

/// A fenced block of `lines` lines `line 1` … `line N`, tagged `lang`.
pub(super) fn code_block(lang: &str, lines: usize) -> String {
    let body: String = (1..=lines).map(|i| format!("line {i}\n")).collect();
    format!("```{lang}\n{body}```\n")
}

/// The `(filename, filetype)` of every snippet, in order.
pub(super) fn snippets(out: &[Outgoing]) -> Vec<(String, String)> {
    out.iter()
        .filter_map(|o| match o {
            Outgoing::Snippet {
                filename, filetype, ..
            } => Some((filename.clone(), filetype.clone())),
            Outgoing::Text(_) => None,
        })
        .collect()
}

/// Every text message, in order.
pub(super) fn texts(out: &[Outgoing]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Outgoing::Text(t) => Some(t.clone()),
            Outgoing::Snippet { .. } => None,
        })
        .collect()
}

/// Fails unless every `<…>` in `text` is markup the renderer may produce for `source`.
pub(super) fn check_inert(text: &str, source: &str) {
    if let Some(found) = super::foreign_markup(text, source) {
        panic!("foreign markup {found:?} in {text:?}");
    }
}
