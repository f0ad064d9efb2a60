//! Starting the run of an approved plan: the worktree is created, the runner starts while
//! the worktree is prepared, and the run gets its task once the preparation succeeded.

use super::SlackCoder;
use super::progress::ThreadProgress;
use crate::domain::{IncomingMessage, Plan};
use crate::pm::references::render::with_background;
use crate::runners::supervisor::Workspace;
use crate::workspace::worktree;

/// Why a run could not be started.
#[derive(Clone, Debug, PartialEq)]
pub struct StartFailure {
    pub reason: String,
    /// The run, if one was recorded before the start failed (it never began; whoever
    /// reports the failure reports its end).
    pub run: Option<String>,
}

impl StartFailure {
    fn before_run(reason: impl ToString) -> Self {
        Self {
            reason: reason.to_string(),
            run: None,
        }
    }
}

impl SlackCoder {
    /// Starts the run of an approved plan in a fresh worktree, posts its status message and
    /// follows it in the background.
    pub async fn start(&self, approval: &IncomingMessage, plan: &Plan) -> Result<(), StartFailure> {
        // The background the PM read in the thread (linked threads and pull requests) goes
        // with the plan: the Coder works from what the PM planned with.
        let conversation = self
            .store
            .conversation(&approval.thread(), crate::pm::ROLE)
            .await
            .map_err(|e| StartFailure::before_run(format!("read the PM's conversation: {e}")))?;
        let plan_text = with_background(plan.to_markdown(), &conversation);
        let progress = ThreadProgress {
            outbox: &self.outbox,
            approval,
        };
        let tree = self
            .prepare
            .create(&plan.summary, &progress)
            .await
            .map_err(StartFailure::before_run)?;
        // The runner starts (process, sandbox, hub) while the worktree is prepared; it gets
        // its task, and the Coder its first step, only once the preparation succeeded.
        let (prepared, workspace) = Workspace::preparing();
        let (run, events) = match self
            .begin(approval, plan_text, &tree, None, workspace)
            .await
        {
            Ok(started) => started,
            Err(e) => {
                self.remove_worktree(&tree).await;
                return Err(StartFailure::before_run(e));
            }
        };
        if let Err(e) = self.prepare.init_or_remove(&tree, &progress).await {
            let reason = "the worktree could not be prepared";
            self.supervisor.cancel(&approval.thread_ts, reason).await;
            return Err(StartFailure {
                reason: e.to_string(),
                run: Some(run.id),
            });
        }
        if !prepared.ready() {
            tracing::warn!(thread = %approval.thread(), "run {} ended before its worktree was ready", run.id);
        }
        self.follow(approval, &tree, run, events).await;
        Ok(())
    }

    /// Removes a worktree no run was recorded for.
    async fn remove_worktree(&self, tree: &worktree::Worktree) {
        if let Err(e) = worktree::remove(&self.layout.repo, tree).await {
            tracing::warn!("remove a worktree no run uses: {e}");
        }
    }
}
