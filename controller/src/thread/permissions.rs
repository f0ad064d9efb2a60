//! Who may do what in a thread: one rule table ([`need`]) that says, for every command a
//! message can give, whether only a developer (`access.developers`) may give it, and the one
//! place ([`gate`]) that turns a command a non-developer gave into a refusal. Everyone
//! allowed in the channel may ask questions and discuss; only developers start, steer the
//! end of and undo work: approve a plan, stop the Coder, close the thread, rebase, undo,
//! change the budget, approve a review round or a memory proposal, or have an ended run go on.
//!
//! The table is an exhaustive match on [`Command`], so a new command does not compile until
//! it has its row. With no developers configured everyone allowed is a developer (the
//! behaviour before roles existed).

use crate::thread::command::Command;

/// Who may give a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Anyone allowed in the channel (`access.allowedUsers`).
    Anyone,
    /// Only a developer (`access.developers`); the words name what the command does, for the
    /// refusal ("approve a plan").
    Developer(&'static str),
}

/// The developers of a repository (`access.developers`): who may steer the work.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Developers(Vec<String>);

impl Developers {
    /// The developers `access.developers` names; empty means everyone allowed.
    pub fn new(users: Vec<String>) -> Self {
        Self(users)
    }

    /// Whether `user` is a developer: named, or no developers are configured.
    pub fn includes(&self, user: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|d| d == user)
    }

    /// Whether developers are configured at all (otherwise everyone allowed is one).
    pub fn configured(&self) -> bool {
        !self.0.is_empty()
    }

    /// The developers as Slack mentions, joined: `<@U1>, <@U2>`.
    pub fn mentions(&self) -> String {
        self.0
            .iter()
            .map(|u| format!("<@{u}>"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The rule table: who may give `command`.
pub fn need(command: &Command) -> Need {
    use Need::{Anyone, Developer};
    match command {
        Command::ApproveButton(_) | Command::Approve => Developer("approve a plan"),
        Command::CancelButton(_) => Developer("cancel a plan"),
        Command::StopButton(_) | Command::StopCoder => Developer("stop the Coder"),
        Command::Merge { .. } => Developer("merge"),
        Command::Abandon { .. } => Developer("abandon a thread"),
        Command::Done => Developer("close a thread"),
        Command::Rebase { .. } => Developer("rebase"),
        Command::Undo => Developer("undo a run"),
        Command::SetBudget(_) => Developer("change a thread's budget"),
        Command::FollowUp { .. } => Developer("have the Coder go on with its work"),
        Command::ApproveReview { .. } | Command::DeclineReview { .. } => {
            Developer("answer a review round")
        }
        Command::MemoryReply(_) | Command::CorrectAnswer { .. } => Developer("answer memory"),
        Command::Draw { .. } => Developer("have an image drawn"),
        Command::UseDrawing { .. } => Developer("put an image in the branch"),
        // Refusals, replies, questions and what the controller stored itself.
        Command::ClickNotAllowed
        | Command::NotAllowed
        | Command::SpentClick
        | Command::EarlierPlanButton
        | Command::ThreadClosed
        | Command::QuestionAfterClose
        | Command::ToRunningCoder
        | Command::CloseWhileCoderRuns
        | Command::NothingToMerge
        | Command::EndedOnGitHub { .. }
        | Command::WatchLater
        | Command::AlreadyCarriedOut
        | Command::OtherRoles(_)
        | Command::AskPm
        | Command::AskArtist
        | Command::AskPmThenArtist
        | Command::CancelDrawing { .. }
        | Command::AskResearcher
        | Command::ReviewRound
        | Command::ReviewCapped
        | Command::ReviewerDue
        | Command::RebaseWhileCoderRuns
        | Command::RebaseWhilePlanPending
        | Command::NothingToRebase
        | Command::Notice(_)
        | Command::Unreadable
        | Command::DevelopersOnly(_) => Anyone,
    }
}

/// `command` as its author may give it: unchanged for a developer or a command anyone may
/// give, otherwise [`Command::DevelopersOnly`] naming what was refused.
pub fn gate(command: Command, developer: bool) -> Command {
    match need(&command) {
        Need::Developer(what) if !developer => Command::DevelopersOnly(what),
        _ => command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_developers_everyone_allowed_is_one() {
        let none = Developers::default();
        assert!(none.includes("U1"));
        assert!(!none.configured());
        let some = Developers::new(vec!["U1".into(), "U2".into()]);
        assert!(some.includes("U2"));
        assert!(!some.includes("U3"));
        assert_eq!(some.mentions(), "<@U1>, <@U2>");
    }

    #[test]
    fn a_non_developer_is_refused_only_what_the_table_keeps_for_developers() {
        assert_eq!(
            gate(Command::Approve, false),
            Command::DevelopersOnly("approve a plan")
        );
        assert_eq!(gate(Command::Approve, true), Command::Approve);
        assert_eq!(gate(Command::AskPm, false), Command::AskPm);
        assert_eq!(
            gate(Command::Done, false),
            Command::DevelopersOnly("close a thread")
        );
    }
}
