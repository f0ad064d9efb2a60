//! A close as a plan, with no I/O: the words that ask for one ([`close_word`]), how it ends
//! ([`CloseKind`]) and the steps each kind takes, in order ([`CloseKind::steps`]).
//! [`super::close_commands`] carries the steps out.

use crate::domain::Closure;
use crate::journal::description::MERGE_STEP;
use crate::thread::approval::normalize;

/// The words that close a thread, whole message, case and punctuation ignored: with
/// merging (when the thread has a pull request; "done" closes a thread without one) and
/// without.
pub const CLOSE_WORDS: [(&str, CloseWord); 9] = [
    ("merge", CloseWord::Merge),
    ("merge it", CloseWord::Merge),
    ("ship it", CloseWord::Merge),
    ("merge anyway", CloseWord::MergeAnyway),
    ("merge it anyway", CloseWord::MergeAnyway),
    ("ship it anyway", CloseWord::MergeAnyway),
    ("done", CloseWord::Done),
    ("abandon", CloseWord::Abandon),
    ("close without merging", CloseWord::Abandon),
];

/// What a close word asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseWord {
    /// Merge the pull request and close.
    Merge,
    /// Merge the pull request over its reviewers' objections (changes requested,
    /// unresolved review threads) and close; its checks and conflicts still refuse.
    MergeAnyway,
    /// Merge the pull request if there is one; close either way.
    Done,
    /// Close without merging.
    Abandon,
}

/// The close word `text` is, if it is one and nothing more.
pub fn close_word(text: &str) -> Option<CloseWord> {
    let text = normalize(text);
    CLOSE_WORDS
        .iter()
        .find(|(word, _)| *word == text)
        .map(|(_, kind)| *kind)
}

/// How a close ends, which decides its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseKind {
    /// "merge": the daemon merges the pull request.
    Merge,
    /// The pull request was merged on GitHub.
    MergedOnGitHub,
    /// "abandon": the pull request, if any, stays as it is on GitHub.
    Abandon,
    /// The pull request was closed on GitHub without merging.
    ClosedOnGitHub,
    /// "done" in a thread without a pull request.
    Done,
}

/// One step of a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Description,
    Journal,
    Merge,
    /// The merge written in the pull request's Journal.
    DescriptionMerged,
    DeleteRemoteBranch,
    Cleanup,
    Report,
}

impl Step {
    /// The name the step is recorded under.
    pub fn name(self) -> &'static str {
        match self {
            Self::Description => "description",
            Self::Journal => "journal",
            Self::Merge => MERGE_STEP,
            Self::DescriptionMerged => "description_merged",
            Self::DeleteRemoteBranch => "delete_remote_branch",
            Self::Cleanup => "cleanup",
            Self::Report => "report",
        }
    }

    /// What failed, for the thread: "I couldn't {what}".
    pub(super) fn what(self) -> &'static str {
        match self {
            Self::Description => "update the pull request's description",
            Self::Journal => "commit the thread's journal",
            Self::Merge => "merge the pull request",
            Self::DescriptionMerged => "write the merge in the pull request's description",
            Self::DeleteRemoteBranch => "delete the pull request's branch on GitHub",
            Self::Cleanup => "remove the thread's worktree",
            Self::Report => "post the usage report",
        }
    }
}

impl CloseKind {
    /// The steps of this close, in order; the last is always the report.
    pub fn steps(self) -> &'static [Step] {
        match self {
            Self::Merge => &[
                Step::Description,
                Step::Journal,
                Step::Merge,
                Step::DescriptionMerged,
                Step::DeleteRemoteBranch,
                Step::Cleanup,
                Step::Report,
            ],
            Self::MergedOnGitHub => &[
                Step::Description,
                Step::Journal,
                Step::DeleteRemoteBranch,
                Step::Cleanup,
                Step::Report,
            ],
            Self::Abandon | Self::ClosedOnGitHub | Self::Done => &[Step::Cleanup, Step::Report],
        }
    }

    /// The closed stage it ends in.
    pub fn closure(self) -> Closure {
        match self {
            Self::Merge | Self::MergedOnGitHub => Closure::Merged,
            Self::Abandon | Self::ClosedOnGitHub => Closure::Abandoned,
            Self::Done => Closure::Done,
        }
    }

    /// The word to say to go on after a failed step.
    pub(super) fn retry_word(self) -> &'static str {
        match self {
            Self::Merge | Self::MergedOnGitHub => "merge",
            Self::Abandon | Self::ClosedOnGitHub => "abandon",
            Self::Done => "done",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_words_are_whole_messages() {
        for (text, expected) in [
            ("merge", Some(CloseWord::Merge)),
            ("Merge!", Some(CloseWord::Merge)),
            ("  SHIP IT ", Some(CloseWord::Merge)),
            ("merge it.", Some(CloseWord::Merge)),
            ("<@U0BOT> done", Some(CloseWord::Done)),
            ("Done.", Some(CloseWord::Done)),
            ("abandon", Some(CloseWord::Abandon)),
            ("Close without merging", Some(CloseWord::Abandon)),
            ("merge the two functions", None),
            ("done?", Some(CloseWord::Done)),
            ("merge anyway", Some(CloseWord::MergeAnyway)),
            ("Merge it anyway!", Some(CloseWord::MergeAnyway)),
            ("<@U0BOT> ship it anyway.", Some(CloseWord::MergeAnyway)),
            ("merge anyway please", None),
            ("not done", None),
            ("abandon ship", None),
            ("", None),
        ] {
            assert_eq!(close_word(text), expected, "{text:?}");
        }
    }

    #[test]
    fn each_close_has_its_steps_and_ends_with_the_report() {
        let names =
            |kind: CloseKind| -> Vec<&str> { kind.steps().iter().map(|s| s.name()).collect() };
        assert_eq!(
            names(CloseKind::Merge),
            [
                "description",
                "journal",
                "merge",
                "description_merged",
                "delete_remote_branch",
                "cleanup",
                "report"
            ]
        );
        assert_eq!(
            names(CloseKind::MergedOnGitHub),
            [
                "description",
                "journal",
                "delete_remote_branch",
                "cleanup",
                "report"
            ]
        );
        for kind in [
            CloseKind::Abandon,
            CloseKind::ClosedOnGitHub,
            CloseKind::Done,
        ] {
            assert_eq!(names(kind), ["cleanup", "report"]);
        }
        assert_eq!(CloseKind::Done.closure(), Closure::Done);
        assert_eq!(CloseKind::ClosedOnGitHub.closure(), Closure::Abandoned);
        assert_eq!(CloseKind::MergedOnGitHub.closure(), Closure::Merged);
    }
}
