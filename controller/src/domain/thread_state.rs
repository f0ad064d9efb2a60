//! Where a thread is in its life, as the thread's handler sees it when a message arrives.
//!
//! Two types, because two kinds of fact decide it. [`Stage`] is what the thread itself went
//! through, stored explicitly (`threads.state`): talking with the PM, a plan waiting for
//! approval, handed to the Coder. [`ThreadState`] adds what the Coder's runs say — whether a
//! run is active and whether the latest one ended — which the runs and the supervisor own,
//! so it is never copied into the thread's row where it could go stale.
//!
//! A thread whose pull request is open behaves as an approved one (its runs decide), so
//! [`Stage::PrOpened`] needs no [`ThreadState`] of its own; its ended run carries the pull
//! request, which is what the close words act on. A closed one has its own state.

use super::{Plan, RunRecord};

/// What the store keeps of a thread's stage: the thread's lifecycle,
/// `created → planning → working → pr_opened → closed (merged | abandoned | done)`, with planning
/// split in two because a waiting plan changes what a message means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Stored, and none of its messages handled yet.
    Created,
    /// Talking with the PM; no plan waits for approval.
    Conversing,
    /// The PM's plan waits for approval.
    PlanPending,
    /// The plan was approved and handed to the Coder.
    Approved,
    /// The Coder opened the thread's pull request; follow-up runs keep it open.
    PrOpened,
    /// Closed by a person; nothing more is done in it.
    Closed(Closure),
}

/// How a closed thread ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closure {
    /// Its pull request was merged.
    Merged,
    /// Closed without merging.
    Abandoned,
    /// Closed with "done" in a thread without a pull request: the work needed none.
    Done,
}

impl Stage {
    /// Every stage, in lifecycle order.
    pub const ALL: [Stage; 8] = [
        Self::Created,
        Self::Conversing,
        Self::PlanPending,
        Self::Approved,
        Self::PrOpened,
        Self::Closed(Closure::Merged),
        Self::Closed(Closure::Abandoned),
        Self::Closed(Closure::Done),
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Conversing => "conversing",
            Self::PlanPending => "plan_pending",
            Self::Approved => "approved",
            Self::PrOpened => "pr_opened",
            Self::Closed(Closure::Merged) => "closed_merged",
            Self::Closed(Closure::Abandoned) => "closed_abandoned",
            Self::Closed(Closure::Done) => "closed_done",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The lifecycle's name for people and the PM: `created`, `planning` (talking with the PM,
    /// or a plan waiting), `working` (approved: the Coder's runs), `pr_opened`,
    /// `closed (merged)`, `closed (abandoned)`, `closed (done)`.
    pub fn lifecycle(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Conversing | Self::PlanPending => "planning",
            Self::Approved => "working",
            Self::PrOpened => "pr_opened",
            Self::Closed(Closure::Merged) => "closed (merged)",
            Self::Closed(Closure::Abandoned) => "closed (abandoned)",
            Self::Closed(Closure::Done) => "closed (done)",
        }
    }

    /// Whether the thread is closed.
    pub fn is_closed(self) -> bool {
        matches!(self, Self::Closed(_))
    }
}

/// The pull request a thread's Coder opened, as stored with the thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequestRef {
    pub number: u64,
    /// Its web address.
    pub url: String,
}

/// A thread's state when one of its messages is handled.
#[derive(Clone, Debug, PartialEq)]
pub enum ThreadState {
    /// Talking with the PM; no plan waits for approval.
    Conversing,
    /// The PM's plan waits for approval.
    PlanPending {
        plan: Plan,
        /// The digest its Approve and Cancel buttons carry.
        digest: String,
    },
    /// Approved, and no run of it is active or has ended: its run is being prepared (or the
    /// start was cut off and sorted out at the next start).
    Preparing,
    /// The thread's Coder is running (or queued).
    CoderRunning,
    /// The thread's latest run ended; a new message goes on from it.
    RunEnded {
        last: Box<RunRecord>,
        /// The thread's open pull request, once its Coder opened one: what "merge" merges.
        pr: Option<PullRequestRef>,
    },
    /// A person closed the thread: new work belongs in a new thread.
    Closed(Closure),
}

impl ThreadState {
    /// Whether the thread's plan was handed to the Coder (so "undo" has a meaning).
    pub fn with_coder(&self) -> bool {
        matches!(
            self,
            Self::Preparing | Self::CoderRunning | Self::RunEnded { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip_through_their_stored_names() {
        for stage in Stage::ALL {
            assert_eq!(Stage::parse(stage.as_str()), Some(stage));
        }
        assert_eq!(Stage::parse("pm"), None);
        assert_eq!(Stage::parse("closed"), None);
    }

    #[test]
    fn stages_name_their_place_in_the_lifecycle() {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.lifecycle()).collect();
        assert_eq!(
            names,
            [
                "created",
                "planning",
                "planning",
                "working",
                "pr_opened",
                "closed (merged)",
                "closed (abandoned)",
                "closed (done)"
            ]
        );
    }
}
