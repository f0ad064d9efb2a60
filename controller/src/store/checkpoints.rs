//! What resuming and undoing a Coder run needs: each run's latest conversation (kept up to
//! date on every model call, so a crashed run can continue) and the checkpoint taken before
//! each run (the worktree's tree, the branch's head and the conversation given to the run).
//! An undo is a [`super::Change`], recorded with its reply.
//!
//! A run's conversation is stored append-only (`run_conversation`): each model call adds a
//! row with the messages it added after the first `first_index` messages already stored,
//! so a session writes about as much as its conversation holds, not the square of it. A row
//! with `first_index` 0 starts the conversation over; reading starts at the latest such row.

use serde_json::value::RawValue;
use sqlx::AnyConnection;

use super::bind::BindThread;
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
    /// Records a model call's conversation: its first `kept` messages are the ones stored
    /// already, then come `added` (a JSON array of chat messages, no system prompt).
    pub async fn append_run_conversation(
        &self,
        run_id: &str,
        kept: usize,
        added: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        append_run_conversation(&mut conn, run_id, kept, added).await
    }

    /// Gives a run the conversation it starts from (a JSON array), unless a model call
    /// stored one already: what "continue" resumes if the run dies before its first call.
    pub async fn seed_run_conversation(
        &self,
        run_id: &str,
        conversation: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO run_conversation (run_id, seq, first_index, messages) \
             SELECT $1, 1, 0, $2 \
             WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1) \
             AND NOT EXISTS (SELECT 1 FROM run_conversation WHERE run_id = $1)",
        )
        .bind(run_id)
        .bind(conversation)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The run's latest conversation (a JSON array), if a model call was made (or one was
    /// seeded).
    pub async fn run_conversation(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let rows = sqlx::query_as::<_, (i64, i64, String)>(
            "SELECT seq, first_index, messages FROM run_conversation \
             WHERE run_id = $1 AND seq >= (SELECT COALESCE(MAX(seq), 0) FROM run_conversation \
                                           WHERE run_id = $1 AND first_index = 0) \
             ORDER BY seq",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut conversation: Vec<&RawValue> = Vec::new();
        for (seq, first_index, messages) in &rows {
            let corrupt = |reason: String| StoreError::CorruptRunConversation {
                run: run_id.to_owned(),
                seq: *seq,
                reason,
            };
            let added: Vec<&RawValue> =
                serde_json::from_str(messages).map_err(|e| corrupt(e.to_string()))?;
            let kept = usize::try_from(*first_index)
                .ok()
                .filter(|kept| *kept <= conversation.len())
                .ok_or_else(|| {
                    corrupt(format!(
                        "it follows message {first_index} of a conversation of {}",
                        conversation.len()
                    ))
                })?;
            conversation.truncate(kept);
            conversation.extend(added);
        }
        let parts: Vec<&str> = conversation.iter().map(|m| m.get()).collect();
        Ok(Some(format!("[{}]", parts.join(","))))
    }

    /// Records the checkpoint taken before a run.
    pub async fn add_checkpoint(&self, checkpoint: &CheckpointRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO run_checkpoints (run_id, channel_id, thread_ts, worktree, tree_sha, head_sha, conversation, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&checkpoint.run_id)
        .bind_thread(&checkpoint.thread)
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
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(CheckpointRecord::from))
    }
}

/// Appends a row to `run_id`'s conversation: `added` (a JSON array of chat messages) after
/// its first `kept` messages; `kept` 0 starts the conversation over. In the caller's
/// transaction when there is one (an undo).
pub(super) async fn append_run_conversation(
    conn: &mut AnyConnection,
    run_id: &str,
    kept: usize,
    added: &str,
) -> Result<(), StoreError> {
    let kept = i64::try_from(kept).map_err(|_| StoreError::CorruptRunConversation {
        run: run_id.to_owned(),
        seq: 0,
        reason: format!("{kept} messages do not fit a row"),
    })?;
    sqlx::query(
        "INSERT INTO run_conversation (run_id, seq, first_index, messages) \
         SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3 FROM run_conversation WHERE run_id = $1",
    )
    .bind(run_id)
    .bind(kept)
    .bind(added)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Change;
    use crate::store::testing::Place;

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    async fn run(s: &Store, id: &str) {
        crate::store::testing::create_run(s, id, &thread()).await;
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
        s.append_run_conversation("r1", 0, "[1]").await.unwrap();
        s.append_run_conversation("r1", 1, "[2]").await.unwrap();
        s.seed_run_conversation("r1", "[0]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some("[1,2]")
        );
        assert_eq!(s.run("r1").await.unwrap().unwrap().branch, "codebutler/x");
    }

    async fn each_call_appends_and_a_compaction_cuts_back_to_the_shared_head(s: &Store) {
        run(s, "r1").await;
        run(s, "r2").await;
        let plan = r#"{"role":"user","content":"plan"}"#;
        s.append_run_conversation("r1", 0, &format!("[{plan}, 1]"))
            .await
            .unwrap();
        s.append_run_conversation("r1", 2, r#"["two",{"k":[3]}]"#)
            .await
            .unwrap();
        s.append_run_conversation("r2", 0, "[9]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some(r#"[{"role":"user","content":"plan"},1,"two",{"k":[3]}]"#),
            "each message as it was written, in order; another run's rows apart"
        );
        // A compaction keeps the plan and replaces the rest with a summary.
        s.append_run_conversation("r1", 1, r#"["summary"]"#)
            .await
            .unwrap();
        s.append_run_conversation("r1", 2, "[5]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some(r#"[{"role":"user","content":"plan"},"summary",5]"#)
        );
        // Starting over (an undo) leaves the earlier rows behind, even an empty start.
        s.append_run_conversation("r1", 0, "[]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some("[]")
        );
        s.append_run_conversation("r1", 0, "[7]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some("[7]")
        );
        assert_eq!(
            s.run_conversation("r2").await.unwrap().as_deref(),
            Some("[9]")
        );
    }

    async fn a_row_that_cannot_be_read_back_is_an_error(s: &Store) {
        run(s, "r1").await;
        s.append_run_conversation("r1", 0, "[1]").await.unwrap();
        s.append_run_conversation("r1", 3, "[2]").await.unwrap();
        let e = s.run_conversation("r1").await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "stored conversation of run r1 is corrupt at row 2: it follows message 3 of a conversation of 1"
        );
        run(s, "r2").await;
        s.append_run_conversation("r2", 0, "{not json")
            .await
            .unwrap();
        let e = s.run_conversation("r2").await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with("stored conversation of run r2 is corrupt at row 1: "),
            "{e}"
        );
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
        each_call_appends_and_a_compaction_cuts_back_to_the_shared_head,
        a_row_that_cannot_be_read_back_is_an_error,
        undo_walks_back_one_run_at_a_time,
    );

    async fn conversations_stored_whole_are_read_back_and_go_on_appending(place: &Place) {
        let pool = place.old_schema("20261126000200").await;
        for (id, conversation) in [
            ("r1", Some(r#"[{"role":"user","content":"plan"},1]"#)),
            ("r2", None),
        ] {
            sqlx::query(
                "INSERT INTO runs (id, channel_id, thread_ts, state, plan, model, worktree, branch, \
                 max_turns, conversation, created_at) \
                 VALUES ($1, 'C1', '1.1', 'succeeded', 'p', 'm', '/w', 'codebutler/x', 5, $2, 'then')",
            )
            .bind(id)
            .bind(conversation)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;

        let s = place.open().await;
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some(r#"[{"role":"user","content":"plan"},1]"#)
        );
        assert_eq!(s.run_conversation("r2").await.unwrap(), None);
        s.append_run_conversation("r1", 2, "[2]").await.unwrap();
        assert_eq!(
            s.run_conversation("r1").await.unwrap().as_deref(),
            Some(r#"[{"role":"user","content":"plan"},1,2]"#)
        );
    }

    crate::store::testing::on_both_places!(
        conversations_stored_whole_are_read_back_and_go_on_appending
    );
}
