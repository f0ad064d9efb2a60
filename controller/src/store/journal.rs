//! What the pull request's description, the thread's journal, is written from besides the
//! thread's messages and runs: when its pull request opened, the memory it saved, when it
//! merged; and the description last sent (`pr_descriptions`), so each step sends one
//! `gh pr edit` only when the text changed.
//!
//! The description is recorded as sent after `gh pr edit` succeeded: a crash between the
//! two sends the same body once more at the next step, which changes nothing on GitHub.

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, now};

/// The description last sent for a thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentDescription {
    /// SHA-256 of the body, in lower-case hex.
    pub body_sha256: String,
    /// The PM's summary it was written with (JSON), `None` when it had none.
    pub summary: Option<String>,
}

/// A memory proposal the thread saved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedMemory {
    /// Its number in the thread (1, 2, …).
    pub seq: i64,
    /// Its operations (JSON), as saved.
    pub items: String,
    /// When it was saved (RFC 3339).
    pub saved_at: String,
}

impl Store {
    /// The description last sent for the thread's pull request, if any.
    pub async fn sent_description(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<SentDescription>, StoreError> {
        let row = sqlx::query_as::<_, (String, Option<String>)>(
            "SELECT body_sha256, summary FROM pr_descriptions \
             WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(body_sha256, summary)| SentDescription {
            body_sha256,
            summary,
        }))
    }

    /// Records the description just sent for the thread's pull request.
    pub async fn record_sent_description(
        &self,
        thread: &ThreadKey,
        sent: &SentDescription,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO pr_descriptions (channel_id, thread_ts, body_sha256, summary, sent_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, thread_ts) DO UPDATE \
             SET body_sha256 = excluded.body_sha256, summary = excluded.summary, \
             sent_at = excluded.sent_at",
        )
        .bind_thread(thread)
        .bind(&sent.body_sha256)
        .bind(&sent.summary)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// When the thread's pull request opened (`None` when it has none, or it was recorded
    /// before this was kept).
    pub async fn pr_opened_at(&self, thread: &ThreadKey) -> Result<Option<String>, StoreError> {
        let at = sqlx::query_scalar::<_, Option<String>>(
            "SELECT pr_opened_at FROM threads WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(at.flatten())
    }

    /// The memory proposals the thread saved, oldest first.
    pub async fn saved_memory(&self, thread: &ThreadKey) -> Result<Vec<SavedMemory>, StoreError> {
        let rows = sqlx::query_as::<_, (i64, String, String)>(
            "SELECT seq, items, updated_at FROM memory_proposals \
             WHERE channel_id = $1 AND thread_ts = $2 AND state = 'saved' ORDER BY seq",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(seq, items, saved_at)| SavedMemory {
                seq,
                items,
                saved_at,
            })
            .collect())
    }

    /// When the thread's `step` was done, if it was.
    pub async fn step_done_at(
        &self,
        thread: &ThreadKey,
        step: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar::<_, String>(
            "SELECT done_at FROM thread_steps WHERE channel_id = $1 AND thread_ts = $2 AND step = $3",
        )
        .bind_thread(thread)
        .bind(step)
        .fetch_optional(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PullRequestRef;
    use crate::store::Change;

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    /// The last description sent replaces the one before; none until the first.
    async fn the_last_description_sent_is_kept(store: &Store) {
        let t = thread();
        assert_eq!(store.sent_description(&t).await.unwrap(), None);
        let first = SentDescription {
            body_sha256: "aa".into(),
            summary: Some(r#"{"summary":"x"}"#.into()),
        };
        store.record_sent_description(&t, &first).await.unwrap();
        assert_eq!(store.sent_description(&t).await.unwrap(), Some(first));
        let second = SentDescription {
            body_sha256: "bb".into(),
            summary: None,
        };
        store.record_sent_description(&t, &second).await.unwrap();
        assert_eq!(store.sent_description(&t).await.unwrap(), Some(second));
    }

    /// The pull request's opening time is kept when the same one is recorded again, and
    /// replaced by a new pull request's.
    async fn the_pull_request_keeps_when_it_opened(store: &Store) {
        let t = thread();
        let msg = crate::domain::IncomingMessage {
            channel: "C1".into(),
            ts: "1.1".into(),
            thread_ts: "1.1".into(),
            user: "U1".into(),
            text: "hi".into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        };
        assert!(store.record_message(&msg).await.unwrap());
        assert_eq!(store.pr_opened_at(&t).await.unwrap(), None);
        let pr = |number| PullRequestRef {
            number,
            url: format!("https://github.com/acme/app/pull/{number}"),
        };
        assert!(store.record_pull_request(&t, &pr(7)).await.unwrap());
        let opened = store.pr_opened_at(&t).await.unwrap().unwrap();
        assert!(store.record_pull_request(&t, &pr(7)).await.unwrap());
        assert_eq!(store.pr_opened_at(&t).await.unwrap(), Some(opened.clone()));
        assert!(store.record_pull_request(&t, &pr(8)).await.unwrap());
        let again = store.pr_opened_at(&t).await.unwrap().unwrap();
        assert!(again > opened, "{again} after {opened}");
    }

    async fn a_steps_time_is_read_back(store: &Store) {
        let t = thread();
        assert_eq!(store.step_done_at(&t, "merge").await.unwrap(), None);
        let step = Change::StepDone {
            thread: &t,
            step: "merge",
        };
        store.commit(&[step], &[]).await.unwrap();
        assert!(store.step_done_at(&t, "merge").await.unwrap().is_some());
    }

    crate::store::testing::on_both_backends!(
        the_last_description_sent_is_kept,
        the_pull_request_keeps_when_it_opened,
        a_steps_time_is_read_back,
    );
}
