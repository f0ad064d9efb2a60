//! The Coder in a Slack thread: an approved plan becomes a run in a fresh worktree, and the
//! run's progress lives in one status message edited in place (at most every 10 s: turn,
//! what the Coder is doing now, elapsed time, tokens, cost). 👀 on the approval while it
//! runs, then ✅ or ❌, and a short summary of how it ended.
//!
//! Everything said in the thread goes through the outbox ([`crate::slack::outbox`]). A run's
//! status message and its end are named groups there (`status:<run>`, `end:<run>`), and the
//! end is recorded with the run's `reported` mark ([`Change::RunReported`]): the follower
//! reports it, or, when a crash took the follower, the next start does, exactly once either
//! way ([`SlackCoder::report_unreported_runs`]).
//!
//! A run's life, one module per step: [`ahead`] (a proposed plan: its worktree prepared
//! and its runner launched while the plan is discussed), [`start`] (an approved plan: the
//! task to the prepared runner, or the worktree prepared while the runner starts), [`resume`] (a follow-up, "continue", or what is said after
//! "undo": a new run from the last one's conversation), [`undo`] (the worktree back to the
//! checkpoint before the last run), [`follower`] (the status message while the run goes,
//! its questions handed to [`crate::pm::questions`]), [`report`] (how it ended, once).
//! [`status`] renders the status message and [`progress`] shows the worktree's preparation;
//! the task tells the Coder the project's test command, and [`tests_run`] reads from the
//! run's Bash calls whether it ran the tests and how they ended, for its summary;
//! [`unseen_images`] tells the thread once per run when the Coder's model cannot see the
//! thread's images.
//!
//! [`Change::RunReported`]: crate::store::Change::RunReported

pub mod ahead;
mod follower;
mod progress;
mod pushed;
mod report;
mod resume;
mod start;
mod status;
mod task;
mod task_cards;
mod tests_run;
mod undo;
mod unseen_images;

use codebutler_proto::runner::v1::runner_event::Event;
use tokio::sync::broadcast;

use crate::domain::{IncomingMessage, RunRecord};
use crate::layout::Layout;
use crate::pm::Pm;
use crate::pm::questions::QuestionDesk;
use crate::postflight::AfterPr;
use crate::runners::supervisor::{
    Reporting, Resume, RunEvent, RunRequest, Standby, Supervisor, SupervisorError, Workspace,
};
use crate::slack::format::escape_text;
use crate::slack::outbox::Outbox;
use crate::store::Store;
use crate::workspace::{forge, worktree};

pub use resume::ResumeError;
pub use start::{StartFailure, WAITING_LINE};
pub use status::STATUS_INTERVAL;
pub use undo::{Undo, Undone};

/// How everything the Coder says in a thread begins.
const PREFIX: &str = "*Coder:* ";

/// The outbox group of a run's status message: 👀 on the message that started the run,
/// then the status message.
fn status_group(run_id: &str) -> String {
    format!("status:{run_id}")
}

/// The outbox group reporting a run's end.
fn end_group(run_id: &str) -> String {
    format!("end:{run_id}")
}

/// The outbox group announcing the pull request of the run's event `seq`.
fn pull_request_group(run_id: &str, seq: i64) -> String {
    format!("pr:{run_id}:{seq}")
}

/// The line announcing a pull request (the address, from the forge, made inert).
fn pull_request_line(url: &str) -> String {
    format!("{PREFIX}opened a pull request: {}", escape_text(url))
}

/// The URL of a pull request the Coder just opened, from its OpenPR tool's result.
fn pull_request_url(event: &Event) -> Option<String> {
    let Event::ToolFinished(f) = event else {
        return None;
    };
    if f.tool != "OpenPR" || f.is_error {
        return None;
    }
    f.summary
        .split_whitespace()
        .find(|w| w.starts_with("https://") || w.starts_with("http://"))
        .map(|w| w.trim_end_matches(['…', '.', ',']).to_owned())
}

/// Starts and reports Coder runs for Slack threads.
#[derive(Clone, Debug)]
pub struct SlackCoder {
    pub supervisor: Supervisor,
    pub layout: Layout,
    pub outbox: Outbox,
    pub store: Store,
    /// Fetches, creates and prepares the worktree of an approved plan.
    pub prepare: worktree::Preparer,
    /// The preparations started while plans are discussed.
    pub ahead: ahead::Ahead,
    /// Answers the Coder's questions first (see [`crate::pm::questions`]).
    pub pm: Pm,
    /// The steps once the thread's pull request opened, started when a run's end is
    /// reported.
    pub after_pr: AfterPr,
    /// Coordination with other threads, after each run and each merge.
    pub coordination: crate::coordination::Coordination,
    /// The runs' followers (status message, end report), waited for at shutdown so the
    /// runs the stop ended are reported before the store closes.
    pub followers: tokio_util::task::TaskTracker,
    /// The project's instructions for its pull requests (`changesWorkflow.prInstructions`),
    /// added to the Coder's prompt.
    pub pr_instructions: Option<String>,
}

impl SlackCoder {
    /// Starts a run in `tree` for the thread of `approval` (the message that asked for it);
    /// returns it with a receiver of the runs' events, subscribed before it started.
    async fn begin(
        &self,
        approval: &IncomingMessage,
        plan: String,
        tree: &worktree::Worktree,
        resume: Option<Resume>,
        workspace: Workspace,
    ) -> Result<(RunRecord, broadcast::Receiver<RunEvent>), SupervisorError> {
        let events = self.supervisor.subscribe();
        let system_prompt =
            crate::prompts::coder_system_prompt(&self.layout, self.pr_instructions.as_deref())
                .await;
        let request = self.request(approval, plan, tree, resume, workspace, system_prompt);
        let run = self.supervisor.start(request).await?;
        Ok((run, events))
    }

    /// [`SlackCoder::begin`] on a runner already waiting in the prepared `tree`.
    async fn begin_on(
        &self,
        approval: &IncomingMessage,
        plan: String,
        tree: &worktree::Worktree,
        standby: Standby,
    ) -> Result<(RunRecord, broadcast::Receiver<RunEvent>), SupervisorError> {
        let events = self.supervisor.subscribe();
        let system_prompt =
            crate::prompts::coder_system_prompt(&self.layout, self.pr_instructions.as_deref())
                .await;
        let request = self.request(approval, plan, tree, None, Workspace::Ready, system_prompt);
        let run = self.supervisor.start_on(request, standby).await?;
        Ok((run, events))
    }

    /// The request of a run in `tree` for the thread of `approval`, with the Coder's
    /// `system_prompt`.
    fn request(
        &self,
        approval: &IncomingMessage,
        plan: String,
        tree: &worktree::Worktree,
        resume: Option<Resume>,
        workspace: Workspace,
        system_prompt: String,
    ) -> RunRequest {
        RunRequest {
            thread: approval.thread(),
            plan,
            worktree: tree.path.clone(),
            branch: tree.branch.clone(),
            reporting: Reporting::Thread {
                link: forge::thread_link(&approval.channel, &approval.thread_ts),
            },
            system_prompt,
            resume,
            workspace,
        }
    }

    /// Where the Coder's questions go: the PM first, then the thread.
    fn questions(&self) -> QuestionDesk {
        QuestionDesk {
            pm: self.pm.clone(),
            supervisor: self.supervisor.clone(),
            store: self.store.clone(),
            outbox: self.outbox.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_request_links_come_from_successful_open_pr_calls() {
        let finished = |tool: &str, summary: &str, is_error: bool| {
            Event::ToolFinished(codebutler_proto::runner::v1::ToolFinished {
                call_id: "c".into(),
                tool: tool.into(),
                summary: summary.into(),
                is_error,
                duration_ms: 1,
            })
        };
        assert_eq!(
            pull_request_url(&finished(
                "OpenPR",
                "opened pull request #7: https://github.com/a/b/pull/7",
                false
            )),
            Some("https://github.com/a/b/pull/7".into())
        );
        assert_eq!(
            pull_request_url(&finished("OpenPR", "error: push refused", true)),
            None
        );
        assert_eq!(
            pull_request_url(&finished("Bash", "see https://x.y", false)),
            None
        );
    }
}
