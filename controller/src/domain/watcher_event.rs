//! What the PR watcher tells a thread, as the thread keeps it: the text of a stored thread
//! message, so a pull request merged or closed on GitHub ([`PrEvent`]), and a review round
//! opened or the rounds capped ([`ReviewEvent`]), are handled in the thread's own order, by
//! its own handler, exactly like a typed "merge" or a button click
//! ([`crate::domain::Click`]).
//!
//! Both are one codec with two markers: `<codebutler:pr-watch merged #7>`,
//! `<codebutler:pr-review round #7>`. A marker starts with `<`, which Slack escapes in what
//! people type (as `&lt;`); and the thread reads a message as the watcher's only by its
//! stored origin anyway, never by its text.

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
    const MARKER: &str = "<codebutler:pr-watch";
    const ALL: [Self; 2] = [Self::Merged, Self::Closed];

    fn word(self) -> &'static str {
        match self {
            Self::Merged => "merged",
            Self::Closed => "closed",
        }
    }

    /// The stored text: `<codebutler:pr-watch merged #7>`.
    pub fn to_text(self, number: u64) -> String {
        to_text(Self::MARKER, self.word(), number)
    }

    /// The event a stored text carries, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        parse(text, Self::MARKER, Self::ALL, Self::word)
    }
}

/// What the watcher saw of a pull request's reviews and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewEvent {
    /// It opened a round (review comments gathered, or checks failed): the thread's oldest
    /// round not yet handled is to be sorted and proposed.
    Round,
    /// The pull request reached `github.maxReviewRounds`: the thread is told once.
    Capped,
    /// The pull request has a head the reviewer model has not reviewed
    /// (`reviewer.model`): the thread's oldest such head is to be reviewed.
    Reviewer,
}

impl ReviewEvent {
    const MARKER: &str = "<codebutler:pr-review";
    const ALL: [Self; 3] = [Self::Round, Self::Capped, Self::Reviewer];

    fn word(self) -> &'static str {
        match self {
            Self::Round => "round",
            Self::Capped => "capped",
            Self::Reviewer => "reviewer",
        }
    }

    /// The stored text: `<codebutler:pr-review round #7>`.
    pub fn to_text(self, number: u64) -> String {
        to_text(Self::MARKER, self.word(), number)
    }

    /// The event a stored text carries, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        parse(text, Self::MARKER, Self::ALL, Self::word)
    }
}

/// `<marker> <word> #<number>>`.
fn to_text(marker: &str, word: &str, number: u64) -> String {
    format!("{marker} {word} #{number}>")
}

/// The one of `all` whose word `text` carries after `marker`, if any.
fn parse<E: Copy, const N: usize>(
    text: &str,
    marker: &str,
    all: [E; N],
    word: fn(E) -> &'static str,
) -> Option<E> {
    let rest = text.strip_prefix(marker)?.strip_prefix(' ')?;
    let (said, _) = rest.split_once(' ')?;
    all.into_iter().find(|e| word(*e) == said)
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

    #[test]
    fn review_events_read_back_and_typed_text_never_passes_for_one() {
        for event in [
            ReviewEvent::Round,
            ReviewEvent::Capped,
            ReviewEvent::Reviewer,
        ] {
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
