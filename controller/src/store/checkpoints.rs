//! What resuming and undoing a Coder run needs: each run's latest conversation (kept up to
//! date on every model call, so a crashed run can continue) and the checkpoint taken before
//! each run (the worktree's tree, the branch's head and the conversation given to the run).
//! An undo is a [`super::Change`], recorded with its reply.

use super::{Store, StoreError, ThreadKey, ThreadRow, now};

/// A checkpoint taken before a run.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointRecord {
    pub run_id: String,
    pub thread: ThreadKey,
    pub worktree: String,
    /// The worktree's files as a git tree.
    pub tree_sha: String,
    /// The branch's head commit then.
    pub head_sha: String,
    /// The conversation the run was given (JSON array; `[]` for a fresh run).
    pub conversation: String,
}

/// A row of `run_checkpoints` as [`Store::latest_checkpoint`] reads it.
#[derive(sqlx::FromRow)]
struct CheckpointRow {
    run_id: String,
    #[sqlx(flatten)]
    thread: ThreadRow,
    worktree: String,
    tree_sha: String,
    head_sha: String,
    conversation: String,
}

impl From<CheckpointRow> for CheckpointRecord {
    fn from(r: CheckpointRow) -> Self {
        Self {
            run_id: r.run_id,
            thread: r.thread.into(),
            worktree: r.worktree,
            tree_sha: r.tree_sha,
            head_sha: r.head_sha,
            conversation: r.conversation,
        }
    }
}

impl Store {
    /// Keeps the run's latest conversation (JSON array of chat messages, no system prompt).
    pub async fn set_run_conversation(
        &self,
        run_id: &str,
        conversation: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET conversation = $1 WHERE id = $2")
            .bind(conversation)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Gives a run the conversation it starts from, unless a model call stored one already:
    /// what "continue" resumes if the run dies before its first call.
    pub async fn seed_run_conversation(
        &self,
        run_id: &str,
        conversation: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET conversation = $1 WHERE id = $2 AND conversation IS NULL")
            .bind(conversation)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The run's latest conversation, if a model call was made (or one was seeded).
    pub async fn run_conversation(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let conversation =
            sqlx::query_scalar::<_, Option<String>>("SELECT conversation FROM runs WHERE id = $1")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(conversation.flatten())
    }

    /// Records the checkpoint taken before a run.
    pub async fn add_checkpoint(&self, checkpoint: &CheckpointRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO run_checkpoints (run_id, channel_id, thread_ts, worktree, tree_sha, head_sha, conversation, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&checkpoint.run_id)
        .bind(&checkpoint.thread.channel)
        .bind(&checkpoint.thread.thread_ts)
        .bind(&checkpoint.worktree)
        .bind(&checkpoint.tree_sha)
        .bind(&checkpoint.head_sha)
        .bind(&checkpoint.conversation)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The thread's latest checkpoint: the state before its last run.
    pub async fn latest_checkpoint(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<CheckpointRecord>, StoreError> {
        let row = sqlx::query_as::<_, CheckpointRow>(
            "SELECT c.run_id, c.channel_id, c.thread_ts, c.worktree, c.tree_sha, c.head_sha, c.conversation \
             FROM run_checkpoints c JOIN runs r ON r.id = c.run_id \
             WHERE c.channel_id = $1 AND c.thread_ts = $2 \
             ORDER BY r.created_at DESC, c.created_at DESC LIMIT 1",
        )
        .bind(&thread.channel)
        .bind(&thread.thread_ts)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(CheckpointRecord::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Change, NewRun};

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    async fn run(s: &Store, id: &str) {
        s.create_run(NewRun {
            id,
            thread: &thread(),
            plan: "p",
            model: "m",
            worktree: "/w",
            branch: "codebutler/x",
            max_turns: 5,
        })
        .await
        .unwrap();
    }

    fn checkpoint(run_id: &str, tree: &str) -> CheckpointRecord {
        CheckpointRecord {
            run_id: run_id.into(),
            thread: thread(),
            worktree: "/w".into(),
            tree_sha: tree.into(),
            head_sha: "h".into(),
            conversation: "[]".into(),
        }
    }

    async fn conversations_follow_the_latest_model_call(s: &Store) {
        run(s, "r1").await;
        assert_eq!(s.run_conversation("r1").await.unwrap(), None);
        s.seed_run_conversation("r1", "[0]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some("[0]")
        );
        s.set_run_conversation("r1", "[1]").await.unwrap();
        s.set_run_conversation("r1", "[1,2]").await.unwrap();
        s.seed_run_conversation("r1", "[0]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some("[1,2]")
        );
        assert_eq!(s.run("r1").await.unwrap().unwrap().branch, "codebutler/x");
    }

    async fn undo_walks_back_one_run_at_a_time(s: &Store) {
        assert_eq!(s.latest_checkpoint(&thread()).await.unwrap(), None);
        run(s, "r1").await;
        s.add_checkpoint(&checkpoint("r1", "t1")).await.unwrap();
        // Runs are ordered by creation time, which has millisecond resolution.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        run(s, "r2").await;
        s.add_checkpoint(&checkpoint("r2", "t2")).await.unwrap();
        let latest = s.latest_checkpoint(&thread()).await.unwrap().unwrap();
        assert_eq!(latest.tree_sha, "t2");
        let undone = |checkpoint_run| Change::Undone {
            checkpoint_run,
            latest_run: Some("r2"),
            conversation: "[\"back\"]",
        };
        s.commit(&[undone("r2")], &[]).await.unwrap();
        let latest = s.latest_checkpoint(&thread()).await.unwrap().unwrap();
        assert_eq!(latest.tree_sha, "t1");
        assert_eq!(
            s.run_conversation("r2").await.unwrap().as_deref(),
            Some("[\"back\"]"),
            "the next run resumes from before the undone one"
        );
        s.commit(&[undone("r1")], &[]).await.unwrap();
        assert_eq!(s.latest_checkpoint(&thread()).await.unwrap(), None);
    }

    crate::store::testing::on_both_backends!(
        conversations_follow_the_latest_model_call,
        undo_walks_back_one_run_at_a_time,
    );
}
