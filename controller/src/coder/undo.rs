//! "undo": the worktree back to the checkpoint taken before the thread's last run.

use std::path::PathBuf;

use super::SlackCoder;
use crate::domain::IncomingMessage;
use crate::workspace::checkpoint;

/// What "undo" did: the reply, and the store's side of it when the worktree was restored.
#[derive(Clone, Debug, PartialEq)]
pub struct Undo {
    pub reply: String,
    pub undone: Option<Undone>,
}

/// What an undo changes in the store (see [`crate::store::Change::Undone`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Undone {
    pub checkpoint_run: String,
    pub latest_run: Option<String>,
    pub conversation: String,
}

impl SlackCoder {
    /// "undo": puts the worktree back to the checkpoint taken before the thread's last run.
    /// Returns the reply and, when the worktree was restored, what the store must record
    /// with it: the checkpoint dropped and that run's conversation the one the next run
    /// resumes. Restoring the same checkpoint twice (a crash before the record) gives the
    /// same worktree, so nothing is undone twice.
    pub async fn undo(&self, msg: &IncomingMessage) -> Undo {
        let thread = msg.thread();
        let only = |reply: String| Undo {
            reply,
            undone: None,
        };
        if self.supervisor.is_active(&thread.thread_ts) {
            return only("I'm still working: say **stop** first, then **undo**.".into());
        }
        let checkpoint = match self.store.latest_checkpoint(&thread).await {
            Ok(Some(c)) => c,
            Ok(None) => return only("There is nothing to undo in this thread.".into()),
            Err(e) => return only(format!("I couldn't read this thread's checkpoints ({e}).")),
        };
        let latest_run = match self.store.latest_run(&thread.thread_ts).await {
            Ok(latest) => latest.map(|r| r.id),
            Err(e) => return only(format!("I couldn't read this thread's runs ({e}).")),
        };
        let snapshot = checkpoint::Snapshot {
            tree: checkpoint.tree_sha.clone(),
            head: checkpoint.head_sha.clone(),
        };
        let path = PathBuf::from(&checkpoint.worktree);
        if let Err(e) = self.prepare.ensure_mounted(&path).await {
            return only(format!("I couldn't undo: {e}. Nothing was changed."));
        }
        let (helper, main) = (self.prepare.helper(&path), self.layout.repo.clone());
        let restored = tokio::task::spawn_blocking(move || {
            checkpoint::restore(&helper, &main, &path, &snapshot)
        })
        .await;
        let restored = match restored {
            Ok(Ok(restored)) => restored,
            Ok(Err(e)) => return only(format!("I couldn't undo: {e}.")),
            Err(e) => return only(format!("I couldn't undo: {e}.")),
        };
        tracing::info!(
            tag = "CLD",
            "thread {thread} → undid run {}",
            checkpoint.run_id
        );
        let short = checkpoint.head_sha.get(..7).unwrap_or_default();
        let mut reply =
            String::from("Undone: the worktree is back to where it was before my last run.");
        match restored.head {
            checkpoint::Head::MovedBack => {
                reply.push_str(&format!(" The branch is back at `{short}`."));
            }
            checkpoint::Head::KeptPushed => reply.push_str(
                " Its commits were already pushed, so they stay: the reverted files are uncommitted changes, and my next commit records them.",
            ),
            checkpoint::Head::Unchanged => {}
        }
        reply.push_str(" Tell me what to do instead.");
        Undo {
            reply,
            undone: Some(Undone {
                checkpoint_run: checkpoint.run_id,
                latest_run,
                conversation: checkpoint.conversation,
            }),
        }
    }
}
