//! What a run is asked to do ([`RunRequest`]): where it reports ([`Reporting`]), whether it
//! goes on from an earlier run ([`Resume`]) and whether its worktree is ready or still being
//! prepared ([`Workspace`]).
//!
//! Each of these is a type of its own rather than an `Option`, so that a run without a Slack
//! thread, or a runner started before its worktree is ready, is said where it is decided and
//! matched where it matters.

use std::path::PathBuf;

use codebutler_proto::runner::v1::{
    Answer, RunnerCommand, RunnerEvent, runner_command::Command, runner_event::Event,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::domain::ThreadKey;

/// A run to start.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub thread: ThreadKey,
    pub plan: String,
    pub worktree: PathBuf,
    /// The worktree's branch (`codebutler/<slug>`): the only one the run may push.
    pub branch: String,
    /// Where the run reports, and who answers its questions.
    pub reporting: Reporting,
    pub system_prompt: String,
    /// For a run that goes on from an earlier one (a follow-up, "continue", after "undo"):
    /// the conversation to resume and the new message from the thread. `None`: a fresh run
    /// of the plan.
    pub resume: Option<Resume>,
    /// Whether the worktree is ready, or still being prepared while the runner starts.
    pub workspace: Workspace,
}

/// Where a run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reporting {
    /// A Slack thread: its status message follows the run, its PM and people answer the
    /// Coder's questions, and `link` (the thread's web address) goes into pull request bodies.
    Thread { link: String },
    /// No thread (a run started by `runnerctl`): nobody is there to answer a question, so the
    /// Coder is told to decide itself ([`super::supervisor::UNATTENDED_ANSWER`]).
    Unattended,
}

impl Reporting {
    /// The Slack thread's web link, for pull request bodies; `None` for an unattended run.
    pub fn thread_link(&self) -> Option<&str> {
        match self {
            Self::Thread { link } => Some(link),
            Self::Unattended => None,
        }
    }

    /// The answer the supervisor gives the run's `event` itself: in an unattended run
    /// nobody is there to answer a question, so the Coder is told to decide rather than
    /// wait out its time limit. `None` for anything else (a thread's questions go to its PM
    /// and people).
    pub fn answer_for(&self, event: &RunnerEvent) -> Option<RunnerCommand> {
        let Self::Unattended = self else {
            return None;
        };
        let Some(Event::Question(question)) = &event.event else {
            return None;
        };
        Some(RunnerCommand {
            command: Some(Command::Answer(Answer {
                question_id: question.question_id.clone(),
                text: UNATTENDED_ANSWER.to_owned(),
            })),
        })
    }
}

/// What a Coder asking in a run without a thread is told.
pub const UNATTENDED_ANSWER: &str = "Nobody can answer questions in this run (it has no Slack thread). Decide yourself, choosing the option that is easiest to change later, and say in your summary what you chose and why.";

/// Where a resumed run picks up.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The stored conversation (JSON array, no system prompt).
    pub conversation: String,
    /// The thread's new message, added after it.
    pub message: String,
}

/// The state of a run's worktree when the run is asked for.
#[derive(Clone, Debug)]
pub enum Workspace {
    /// Created and prepared: the run gets its task as soon as its runner is up.
    Ready,
    /// Still being prepared: the runner is launched meanwhile and gets its task once the
    /// preparation says so (see [`Workspace::preparing`]).
    Preparing(Preparing),
}

impl Workspace {
    /// A workspace being prepared: the [`Prepared`] half goes to whoever prepares it, the
    /// [`Workspace`] into the run's request.
    pub fn preparing() -> (Prepared, Self) {
        let (ready, waiting) = watch::channel(false);
        (Prepared(ready), Self::Preparing(Preparing(waiting)))
    }

    /// Waits until the workspace is ready. `false` when the run was cancelled first, or the
    /// preparation ended without saying it is ready (it failed).
    pub async fn wait(&mut self, cancel: &CancellationToken) -> bool {
        match self {
            Self::Ready => true,
            Self::Preparing(Preparing(waiting)) => tokio::select! {
                ready = waiting.wait_for(|ready| *ready) => ready.is_ok(),
                () = cancel.cancelled() => false,
            },
        }
    }
}

/// The run's side of a workspace being prepared.
#[derive(Clone, Debug)]
pub struct Preparing(watch::Receiver<bool>);

/// The preparation's side of a workspace being prepared: [`Prepared::ready`] lets the run
/// begin; dropping it unsaid means the preparation failed and the run ends before it began.
#[derive(Debug)]
pub struct Prepared(watch::Sender<bool>);

impl Prepared {
    /// Says the workspace is ready. Returns whether a run was still waiting for it.
    pub fn ready(self) -> bool {
        self.0.send(true).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_waits_for_its_workspace_until_ready_failed_or_cancelled() {
        let cancel = CancellationToken::new();
        assert!(Workspace::Ready.wait(&cancel).await);

        let (prepared, mut workspace) = Workspace::preparing();
        let waiting = tokio::spawn(async move { workspace.wait(&CancellationToken::new()).await });
        assert!(prepared.ready(), "the run was waiting");
        assert!(waiting.await.unwrap());

        let (prepared, mut workspace) = Workspace::preparing();
        drop(prepared);
        assert!(!workspace.wait(&cancel).await, "a failed preparation");

        let (prepared, mut workspace) = Workspace::preparing();
        cancel.cancel();
        assert!(!workspace.wait(&cancel).await, "a cancelled run");
        drop(workspace);
        assert!(!prepared.ready(), "nobody waits any more");
    }

    #[test]
    fn only_a_thread_has_a_link() {
        let thread = Reporting::Thread {
            link: "https://x.slack.com/archives/C1/p1".into(),
        };
        assert_eq!(
            thread.thread_link(),
            Some("https://x.slack.com/archives/C1/p1")
        );
        assert_eq!(Reporting::Unattended.thread_link(), None);
    }

    #[test]
    fn only_an_unattended_run_gets_its_questions_answered_by_the_supervisor() {
        let question = RunnerEvent {
            event: Some(Event::Question(codebutler_proto::runner::v1::Question {
                question_id: "q1".into(),
                text: "JWT or sessions?".into(),
            })),
        };
        let Some(RunnerCommand {
            command: Some(Command::Answer(answer)),
        }) = Reporting::Unattended.answer_for(&question)
        else {
            panic!("an unattended run's question is answered");
        };
        assert_eq!(answer.question_id, "q1");
        assert_eq!(answer.text, UNATTENDED_ANSWER);
        let thread = Reporting::Thread { link: "l".into() };
        assert_eq!(thread.answer_for(&question), None);
        assert_eq!(
            Reporting::Unattended.answer_for(&RunnerEvent { event: None }),
            None
        );
    }
}
