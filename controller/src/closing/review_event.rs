//! What the PR watcher tells a thread about its pull request's reviews and checks, as the
//! thread keeps it: the text of a stored thread message, like [`super::event::PrEvent`], so
//! the thread's own handler acts on it in order with everything else said there.
//!
//! The marker starts with `<codebutler:pr-review`: Slack escapes `<` in what people type, so
//! no typed message can pass for it.

const MARKER: &str = "<codebutler:pr-review";

/// What the watcher saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewEvent {
    /// It opened a round (review comments gathered, or checks failed): the thread's oldest
    /// round not yet handled is to be sorted and proposed.
    Round,
    /// The pull request reached `github.maxReviewRounds`: the thread is told once.
    Capped,
}

impl ReviewEvent {
    fn word(self) -> &'static str {
        match self {
            Self::Round => "round",
            Self::Capped => "capped",
        }
    }

    /// The stored text: `<codebutler:pr-review round #7>`.
    pub fn to_text(self, number: u64) -> String {
        format!("{MARKER} {} #{number}>", self.word())
    }

    /// The event a stored text carries, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(MARKER)?.strip_prefix(' ')?;
        let (word, _) = rest.split_once(' ')?;
        [Self::Round, Self::Capped]
            .into_iter()
            .find(|e| e.word() == word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_back_and_typed_text_never_passes_for_one() {
        for event in [ReviewEvent::Round, ReviewEvent::Capped] {
            assert_eq!(ReviewEvent::parse(&event.to_text(7)), Some(event));
        }
        assert_eq!(
            ReviewEvent::Round.to_text(7),
            "<codebutler:pr-review round #7>"
        );
        for typed in [
            "round",
            "&lt;codebutler:pr-review round #7&gt;",
            "<codebutler:pr-review merged #7>",
            "<codebutler:pr-watch merged #7>",
            " <codebutler:pr-review round #7>",
        ] {
            assert_eq!(ReviewEvent::parse(typed), None, "{typed}");
        }
    }
}
