//! How a run ended, from the event that ended it: the run's final state and the words its
//! thread and `runnerctl` show.

use codebutler_proto::runner::v1::{FinishReason, RunnerEvent, runner_event::Event};

use crate::domain::RunState;

/// The run state and words an ending event stands for, if it ends the run; `disk_mb` is the
/// worktree's disk (`sandbox.diskMB`).
pub(super) fn ending_of(event: &RunnerEvent, disk_mb: u64) -> Option<(RunState, String)> {
    match &event.event {
        Some(Event::Finished(f)) => {
            let reason = FinishReason::try_from(f.reason).unwrap_or(FinishReason::Unspecified);
            Some(match reason {
                FinishReason::Cancelled => {
                    (RunState::Cancelled, format!("cancelled: {}", f.summary))
                }
                FinishReason::MaxTurns => (RunState::Finished, "stopped at the turn limit".into()),
                FinishReason::Timeout => (RunState::Finished, "stopped at the time limit".into()),
                FinishReason::DiskFull if disk_mb > 0 => (
                    RunState::Finished,
                    format!(
                        "stopped: {} (sandbox.diskMB is {disk_mb} MB); remove build outputs \
                         from it or raise the limit",
                        f.summary
                    ),
                ),
                FinishReason::DiskFull => (
                    RunState::Finished,
                    format!("stopped: {} (the host's disk has no room left)", f.summary),
                ),
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

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}
