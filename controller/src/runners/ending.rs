//! How a run ended, from the event that ended it: the run's final state and the words its
//! thread and `runnerctl` show.

use codebutler_proto::runner::v1::{FinishReason, RunnerEvent, runner_event::Event};

use crate::domain::RunState;
use crate::workspace::worktree::DiskBudget;

/// The disk of a run's worktree, for the words of a run its filling stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RunDisk {
    /// Its size in MB; `None` when the worktree has no disk of its own.
    pub size_mb: Option<u64>,
    /// What the worktrees' disks may take (`sandbox.diskMB`, `access.maxWorktreeDiskMB`).
    pub budget: DiskBudget,
}

impl RunDisk {
    /// Why a full disk stopped the run, with its figures and what to do.
    fn full(&self, summary: &str) -> String {
        let DiskBudget { disk_mb, total_mb } = self.budget;
        match self.size_mb {
            None => format!("stopped: {summary} (the host's disk has no room left)"),
            Some(mb) if mb == disk_mb => format!(
                "stopped: {summary} (sandbox.diskMB is {mb} MB); remove build outputs from it \
                 or raise the limit"
            ),
            Some(mb) if total_mb > 0 && mb < disk_mb => format!(
                "stopped: {summary} ({mb} MB: what access.maxWorktreeDiskMB, {total_mb} MB for \
                 all worktrees, had left when it was made); remove build outputs from it, or \
                 close finished threads so that new worktrees get more room"
            ),
            Some(mb) => format!("stopped: {summary} ({mb} MB); remove build outputs from it"),
        }
    }
}

/// The run state and words an ending event stands for, if it ends the run; `disk` is the
/// worktree's disk.
pub(super) fn ending_of(event: &RunnerEvent, disk: &RunDisk) -> Option<(RunState, String)> {
    match &event.event {
        Some(Event::Finished(f)) => {
            let reason = FinishReason::try_from(f.reason).unwrap_or(FinishReason::Unspecified);
            Some(match reason {
                FinishReason::Cancelled => {
                    (RunState::Cancelled, format!("cancelled: {}", f.summary))
                }
                FinishReason::MaxTurns => (RunState::Finished, "stopped at the turn limit".into()),
                FinishReason::Timeout => (RunState::Finished, "stopped at the time limit".into()),
                FinishReason::DiskFull => (RunState::Finished, disk.full(&f.summary)),
                FinishReason::Completed | FinishReason::Unspecified => (
                    RunState::Finished,
                    format!("completed: {}", first_line(&f.summary)),
                ),
            })
        }
        Some(Event::Failed(f)) => Some((
            RunState::Failed,
            format!("{} failed: {}", f.step, f.message),
        )),
        _ => None,
    }
}

/// The ending of a run that stopped at its model step while no Coder model answered
/// (`outage`: why, as the controller saw its last call fail) is a pause, not a failure:
/// nothing of its work is lost, and "continue" picks it up once the provider is back. Every
/// other ending stays as it is.
pub(super) fn paused_by_outage(
    ending: Option<(RunState, String)>,
    outage: Option<String>,
) -> Option<(RunState, String)> {
    match (ending, outage) {
        (Some((RunState::Failed, words)), Some(why)) if words.starts_with("model failed") => {
            Some((
                RunState::Paused,
                format!("paused: no Coder model answered ({why})"),
            ))
        }
        (ending, _) => ending,
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::Finished;

    fn full(size_mb: Option<u64>, disk_mb: u64, total_mb: u64) -> String {
        let event = RunnerEvent {
            event: Some(Event::Finished(Finished {
                reason: FinishReason::DiskFull as i32,
                summary: "the worktree's disk is full".into(),
            })),
        };
        let disk = RunDisk {
            size_mb,
            budget: DiskBudget { disk_mb, total_mb },
        };
        let (state, text) = ending_of(&event, &disk).unwrap();
        assert_eq!(state, RunState::Finished);
        text
    }

    #[test]
    fn a_model_step_failing_in_an_outage_is_a_pause_and_nothing_else_is() {
        let failed = || Some((RunState::Failed, "model failed: hub call failed".to_owned()));
        assert_eq!(
            paused_by_outage(failed(), Some("HTTP 503".into())),
            Some((
                RunState::Paused,
                "paused: no Coder model answered (HTTP 503)".into()
            ))
        );
        assert_eq!(paused_by_outage(failed(), None), failed());
        let commit = Some((RunState::Failed, "commit failed: x".to_owned()));
        assert_eq!(
            paused_by_outage(commit.clone(), Some("HTTP 503".into())),
            commit
        );
        let done = Some((RunState::Finished, "completed: ok".to_owned()));
        assert_eq!(
            paused_by_outage(done.clone(), Some("HTTP 503".into())),
            done
        );
    }

    #[test]
    fn a_full_disk_is_said_with_its_size_and_where_the_size_came_from() {
        assert_eq!(
            full(Some(64), 64, 0),
            "stopped: the worktree's disk is full (sandbox.diskMB is 64 MB); remove build \
             outputs from it or raise the limit"
        );
        assert_eq!(
            full(Some(63), 4096, 64),
            "stopped: the worktree's disk is full (63 MB: what access.maxWorktreeDiskMB, 64 MB \
             for all worktrees, had left when it was made); remove build outputs from it, or \
             close finished threads so that new worktrees get more room"
        );
        assert_eq!(
            full(None, 0, 0),
            "stopped: the worktree's disk is full (the host's disk has no room left)"
        );
        // A disk made under another configuration.
        assert_eq!(
            full(Some(512), 64, 0),
            "stopped: the worktree's disk is full (512 MB); remove build outputs from it"
        );
    }
}
