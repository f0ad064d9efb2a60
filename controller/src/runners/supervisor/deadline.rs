//! When the controller kills a run's runner from outside, and what the kill says of the
//! run: at the hard limit (the run's own time limit and [`HARD_LIMIT_GRACE`], for a runner
//! that does not stop itself), or, once a cancel came, [`CANCEL_GRACE`] after it when that
//! is sooner. Plain arithmetic on instants, so it is tested without a runner or a clock.

use std::time::Duration;

use tokio::time::Instant;

use super::{CANCEL_GRACE, HARD_LIMIT_GRACE};
use crate::domain::RunState;

/// A run's kill deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KillClock {
    hard_limit: Instant,
    /// When a cancel's grace ends, once a cancel came.
    cancelled_by: Option<Instant>,
}

impl KillClock {
    /// The clock of a run started at `start` with the time limit `timeout`.
    pub fn new(start: Instant, timeout: Duration) -> Self {
        Self {
            hard_limit: start + timeout + HARD_LIMIT_GRACE,
            cancelled_by: None,
        }
    }

    /// Whether a cancel came.
    pub fn cancelled(&self) -> bool {
        self.cancelled_by.is_some()
    }

    /// A cancel came at `now`: the runner has [`CANCEL_GRACE`] to stop.
    pub fn cancel(&mut self, now: Instant) {
        self.cancelled_by = Some(now + CANCEL_GRACE);
    }

    /// When the runner is killed if it has not exited.
    pub fn deadline(&self) -> Instant {
        self.cancelled_by
            .unwrap_or(self.hard_limit)
            .min(self.hard_limit)
    }

    /// How the run ended when its runner is killed at the deadline (unless an event of the
    /// run said otherwise first).
    pub fn ending(&self) -> (RunState, String) {
        if self.cancelled() {
            (
                RunState::Cancelled,
                "killed: it did not stop after the cancel".into(),
            )
        } else {
            (RunState::Finished, "killed at the hard time limit".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(600);

    #[test]
    fn a_runner_that_never_stops_is_killed_at_the_hard_limit() {
        let start = Instant::now();
        let clock = KillClock::new(start, TIMEOUT);
        assert_eq!(clock.deadline(), start + TIMEOUT + HARD_LIMIT_GRACE);
        assert_eq!(
            clock.ending(),
            (RunState::Finished, "killed at the hard time limit".into())
        );
    }

    #[test]
    fn a_cancel_gives_the_runner_its_grace_then_the_kill() {
        let start = Instant::now();
        let mut clock = KillClock::new(start, TIMEOUT);
        let asked = start + Duration::from_secs(60);
        clock.cancel(asked);
        assert!(clock.cancelled());
        assert_eq!(clock.deadline(), asked + CANCEL_GRACE);
        assert_eq!(
            clock.ending(),
            (
                RunState::Cancelled,
                "killed: it did not stop after the cancel".into()
            )
        );
    }

    #[test]
    fn a_cancel_never_pushes_the_kill_past_the_hard_limit() {
        let start = Instant::now();
        let mut clock = KillClock::new(start, TIMEOUT);
        let hard_limit = clock.deadline();
        clock.cancel(hard_limit - Duration::from_secs(1));
        assert_eq!(clock.deadline(), hard_limit);
        assert_eq!(clock.ending().0, RunState::Cancelled);
    }
}
