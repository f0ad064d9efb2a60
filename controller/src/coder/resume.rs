//! Going on from a thread's last run: a follow-up after it ended, "continue" after it was
//! cut off, or what is said after "undo" starts a new run in the same worktree and branch,
//! resuming the conversation the last run left with the new message added.

use std::path::PathBuf;

use super::SlackCoder;
use crate::domain::{IncomingMessage, RunRecord};
use crate::runners::resume::resume_with;
use crate::runners::supervisor::{Resume, SupervisorError, Workspace};
use crate::store::StoreError;
use crate::workspace::forge::{self, ForgeError};
use crate::workspace::worktree;

/// Why a run could not go on from the last one (said in the thread as "I couldn't go on
/// from my last run (…)").
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The last run's worktree was removed (shown relative to the repository).
    #[error("its worktree {} is gone", .0.display())]
    WorktreeGone(PathBuf),
    /// The worktree's branch could not be read.
    #[error(transparent)]
    Branch(#[from] ForgeError),
    #[error(transparent)]
    Blocking(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored conversation is not readable; a broken one is reported, never replaced
    /// by a fresh start.
    #[error(transparent)]
    Conversation(#[from] serde_json::Error),
    #[error(transparent)]
    Start(#[from] SupervisorError),
}

impl SlackCoder {
    /// Starts a run that goes on from the thread's last run `last`, in its worktree and
    /// branch, with `msg` (a follow-up, "continue" or anything said after "undo") added to
    /// the stored conversation.
    pub async fn resume(&self, msg: &IncomingMessage, last: &RunRecord) -> Result<(), ResumeError> {
        self.resume_with(msg, last, follow_up_message(msg)).await
    }

    /// Starts a run that goes on from `last` as [`SlackCoder::resume`] does, with `message`
    /// (said on behalf of `msg`: an approved conflict resolution, an approved review round's
    /// comments) added to the conversation instead of `msg`'s text.
    pub async fn resume_with(
        &self,
        msg: &IncomingMessage,
        last: &RunRecord,
        message: String,
    ) -> Result<(), ResumeError> {
        let path = PathBuf::from(&last.worktree);
        if !path.is_dir() {
            let shown = path.strip_prefix(&self.layout.repo).unwrap_or(&path);
            return Err(ResumeError::WorktreeGone(shown.to_owned()));
        }
        let branch = if last.branch.is_empty() {
            let tree = path.clone();
            tokio::task::spawn_blocking(move || forge::worktree_branch(&tree)).await??
        } else {
            last.branch.clone()
        };
        let conversation = self.stored_conversation(last).await?;
        let resumed = resume_with(&conversation, &message)?;
        let tree = worktree::Worktree { path, branch };
        let resume = Resume {
            conversation,
            message,
        };
        let (run, events) = self
            .begin(
                msg,
                last.plan.clone(),
                &tree,
                Some(resume),
                Workspace::Ready,
            )
            .await?;
        // Until its first model call stores the run's conversation, it is the one it was
        // given with the new message: what "continue" resumes if the run dies before.
        if let Err(e) = self.store.seed_run_conversation(&run.id, &resumed).await {
            tracing::warn!(run = %run.id, "record the conversation the run starts from: {e}");
        }
        self.follow(msg, &tree, run, events).await;
        Ok(())
    }

    /// For a follow-up whose run was recorded just before a crash, before the run's
    /// conversation was: gives the run the conversation it was started with.
    pub async fn seed_cut_off_follow_up(&self, msg: &IncomingMessage, run_id: &str) {
        let seeded = async {
            let Some(run) = self.store.run(run_id).await? else {
                return Ok(());
            };
            let Some(before) = self.store.run_before(&run).await? else {
                return Ok(());
            };
            let given = self.stored_conversation(&before).await?;
            let resumed = resume_with(&given, &follow_up_message(msg))?;
            self.store.seed_run_conversation(run_id, &resumed).await?;
            Ok::<(), ResumeError>(())
        };
        if let Err(e) = seeded.await {
            tracing::warn!(
                run = run_id,
                "record the conversation of a run cut off at its start: {e}"
            );
        }
    }

    /// The conversation `last` left: the one kept at its latest model call, else the one
    /// it was given (it made no call), else its plan.
    async fn stored_conversation(&self, last: &RunRecord) -> Result<String, ResumeError> {
        if let Some(stored) = self.store.run_conversation(&last.id).await? {
            return Ok(stored);
        }
        match self.store.latest_checkpoint(&last.thread).await? {
            Some(c) if c.run_id == last.id => Ok(c.conversation),
            _ => Ok(serde_json::to_string(&[
                codebutler_agent::conversation::plan_message(&last.plan),
            ])?),
        }
    }
}

/// How a follow-up reaches the Coder: who said what.
fn follow_up_message(msg: &IncomingMessage) -> String {
    format!("<@{}>: {}", msg.user, msg.text)
}
