//! The markup the renderer issues, and the final check that nothing else in a message can
//! be read by Slack as markup.
//!
//! Every `<…>` the renderer writes — a reference recognised in the answer, a link rendered
//! from Markdown link syntax — goes through [`Markup::issue`]; everything else it writes is
//! escaped. [`enforce`] then scans each finished message: a `<…>` that was not issued is a
//! bug in the renderer, and it is escaped rather than posted (and reported in debug builds,
//! where tests and fuzzing run). So the property holds by construction, and is checked.

use std::collections::HashSet;

/// The `<…>` markup issued for one answer.
#[derive(Debug, Default)]
pub(super) struct Markup {
    issued: HashSet<String>,
}

impl Markup {
    /// Records `token` (`<…>`, brackets included) as issued and returns it.
    pub(super) fn issue(&mut self, token: String) -> String {
        self.issued.insert(token.clone());
        token
    }

    /// Whether `token` was issued.
    pub(super) fn contains(&self, token: &str) -> bool {
        self.issued.contains(token)
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.issued.is_empty()
    }
}

/// `text` with every `<` that does not open issued markup escaped.
pub(super) fn enforce(text: &str, markup: &Markup) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match tail.find('>').map(|end| &tail[..=end]) {
            Some(token) if markup.contains(token) => {
                out.push_str(token);
                rest = &tail[token.len()..];
            }
            _ => {
                if cfg!(debug_assertions) {
                    panic!("markup the renderer did not issue: {tail:?}");
                }
                tracing::warn!("escaped markup the renderer did not issue");
                out.push_str("&lt;");
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_markup_passes_and_nothing_else_does() {
        let mut markup = Markup::default();
        markup.issue("<@U1>".into());
        markup.issue("<https://x.example|x>".into());
        let text = "<@U1> and <https://x.example|x>";
        assert_eq!(enforce(text, &markup), text);
    }

    #[test]
    #[should_panic(expected = "did not issue")]
    fn foreign_markup_is_a_bug() {
        enforce("<!channel>", &Markup::default());
    }
}
