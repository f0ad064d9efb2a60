//! The checkpoint "undo" returns to, recorded for each run before its first step: the
//! worktree's files (a snapshot through the worktree helper) and the conversation as they
//! are then.

use std::path::PathBuf;

use super::{Inner, RunRequest};
use crate::store::CheckpointRecord;
use crate::workspace::checkpoint::{self, CheckpointError, Snapshot};
use crate::workspace::stage::Helper;

/// Why the worktree's snapshot before a run's first step is missing.
#[derive(Debug, thiserror::Error)]
pub(in crate::runners) enum SnapshotError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Snapshots the worktree `tree` through `helper` on a blocking thread (git2), started at
/// once; the future gives the snapshot when it is done.
pub(super) fn snapshot(
    helper: Helper,
    tree: PathBuf,
) -> impl Future<Output = Result<Snapshot, SnapshotError>> {
    let task = tokio::task::spawn_blocking(move || checkpoint::snapshot(&helper, &tree));
    async move { Ok(task.await??) }
}

impl Inner {
    /// Records the checkpoint "undo" returns to: the worktree's files and the conversation
    /// as they are before the run's first step. Without one the run still runs; only undoing
    /// it is unavailable.
    pub(super) async fn checkpoint(&self, run_id: &str, request: &RunRequest) {
        let helper = self.worktrees.helper(&request.worktree);
        let snapshot = snapshot(helper, request.worktree.clone()).await;
        self.record_checkpoint(run_id, request, snapshot).await;
    }

    /// Records `snapshot`, taken before the run's first step, as the run's checkpoint.
    pub(super) async fn record_checkpoint(
        &self,
        run_id: &str,
        request: &RunRequest,
        snapshot: Result<Snapshot, SnapshotError>,
    ) {
        let conversation = match &request.resume {
            Some(resume) => Ok(resume.conversation.clone()),
            None => serde_json::to_string(&[codebutler_agent::conversation::plan_message(
                &request.plan,
            )]),
        };
        let (snapshot, conversation) = match (snapshot, conversation) {
            (Ok(s), Ok(c)) => (s, c),
            (Err(e), _) => {
                tracing::warn!(run = run_id, "checkpoint before the run: {e}");
                return;
            }
            (_, Err(e)) => {
                tracing::warn!(run = run_id, "checkpoint before the run: {e}");
                return;
            }
        };
        let record = CheckpointRecord {
            run_id: run_id.to_owned(),
            thread: request.thread.clone(),
            worktree: request.worktree.display().to_string(),
            tree_sha: snapshot.tree,
            head_sha: snapshot.head,
            conversation,
        };
        if let Err(e) = self.store.add_checkpoint(&record).await {
            tracing::warn!(run = run_id, "record the checkpoint before the run: {e}");
        }
    }
}
