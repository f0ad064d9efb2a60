//! The checkpoint "undo" returns to, recorded for each run before its first step: the
//! worktree's files (a snapshot through the worktree helper) and the conversation as they
//! are then.

use super::{Inner, RunRequest};
use crate::store::CheckpointRecord;
use crate::workspace::checkpoint::Snapshot;

impl Inner {
    /// Records the checkpoint "undo" returns to: the worktree's files and the conversation
    /// as they are before the run's first step. Without one the run still runs; only undoing
    /// it is unavailable.
    pub(super) async fn checkpoint(&self, run_id: &str, request: &RunRequest) {
        let tree = request.worktree.clone();
        let helper = self.worktrees.helper(&tree);
        let snapshot = tokio::task::spawn_blocking(move || {
            crate::workspace::checkpoint::snapshot(&helper, &tree)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|s| s.map_err(|e| e.to_string()));
        self.record_checkpoint(run_id, request, snapshot).await;
    }

    /// Records `snapshot`, taken before the run's first step, as the run's checkpoint.
    pub(super) async fn record_checkpoint(
        &self,
        run_id: &str,
        request: &RunRequest,
        snapshot: Result<Snapshot, String>,
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
