//! What the PR watcher saw on GitHub, as a thread keeps it: the text of a stored thread
//! message, so a pull request merged or closed on GitHub is handled in the thread's own
//! order, by its own handler, exactly like a typed "merge" or a button click
//! ([`crate::domain::Click`]).
//!
//! The marker starts with `<codebutler:pr-watch`: Slack escapes `<` in what people type (as
//! `&lt;`), so no typed message can pass for it.

const MARKER: &str = "<codebutler:pr-watch";

/// The Slack user id the watcher's messages are stored under (no real user has it: Slack
/// ids are upper-case).
pub const WATCHER_USER: &str = "codebutler:pr-watcher";

/// How a thread's pull request ended on GitHub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrEvent {
    /// Merged on GitHub.
    Merged,
    /// Closed on GitHub without merging.
    Closed,
}

impl PrEvent {
    fn word(self) -> &'static str {
        match self {
            Self::Merged => "merged",
            Self::Closed => "closed",
        }
    }

    /// The stored text: `<codebutler:pr-watch merged #7>`.
    pub fn to_text(self, number: u64) -> String {
        format!("{MARKER} {} #{number}>", self.word())
    }

    /// The event a stored text carries, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(MARKER)?.strip_prefix(' ')?;
        let (word, _) = rest.split_once(' ')?;
        [Self::Merged, Self::Closed]
            .into_iter()
            .find(|e| e.word() == word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_back_and_typed_text_never_passes_for_one() {
        for event in [PrEvent::Merged, PrEvent::Closed] {
            assert_eq!(PrEvent::parse(&event.to_text(7)), Some(event));
        }
        assert_eq!(
            PrEvent::Merged.to_text(7),
            "<codebutler:pr-watch merged #7>"
        );
        for typed in [
            "merged",
            "&lt;codebutler:pr-watch merged #7&gt;",
            "<codebutler:pr-watch reopened #7>",
            "<codebutler:pr-watchmerged #7>",
            " <codebutler:pr-watch merged #7>",
        ] {
            assert_eq!(PrEvent::parse(typed), None, "{typed}");
        }
    }
}
