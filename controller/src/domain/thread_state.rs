//! Where a thread is in its life, as the thread's handler sees it when a message arrives.
//!
//! Two types, because two kinds of fact decide it. [`Stage`] is what the thread itself went
//! through, stored explicitly (`threads.state`): talking with the PM, a plan waiting for
//! approval, handed to the Coder. [`ThreadState`] adds what the Coder's runs say — whether a
//! run is active and whether the latest one ended — which the runs and the supervisor own,
//! so it is never copied into the thread's row where it could go stale.
//!
//! The next stages (a pull request open, closing, closed) are new [`Stage`]s and
//! [`ThreadState`]s.

use super::{Plan, RunRecord};

/// What the store keeps of a thread's stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Talking with the PM; no plan waits for approval.
    Conversing,
    /// The PM's plan waits for approval.
    PlanPending,
    /// The plan was approved and handed to the Coder.
    Approved,
}

impl Stage {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conversing => "conversing",
            Self::PlanPending => "plan_pending",
            Self::Approved => "approved",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Conversing, Self::PlanPending, Self::Approved]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
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
    RunEnded { last: Box<RunRecord> },
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
        for stage in [Stage::Conversing, Stage::PlanPending, Stage::Approved] {
            assert_eq!(Stage::parse(stage.as_str()), Some(stage));
        }
        assert_eq!(Stage::parse("pm"), None);
    }
}
