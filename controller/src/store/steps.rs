//! Steps a thread does once (`thread_steps`): the steps after its pull request opened and
//! those of its close. A step is marked with [`Change::StepDone`](super::Change::StepDone)
//! in the transaction that records what it says, so a crash either leaves it to do again
//! with nothing said, or done with its message in the outbox.

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey};

impl Store {
    /// Whether the thread's `step` is done.
    pub async fn step_done(&self, thread: &ThreadKey, step: &str) -> Result<bool, StoreError> {
        let done = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM thread_steps WHERE channel_id = $1 AND thread_ts = $2 AND step = $3",
        )
        .bind_thread(thread)
        .bind(step)
        .fetch_one(&self.pool)
        .await?;
        Ok(done > 0)
    }

    /// The threads whose `step` is done and `unless` is not: work left half-way
    /// (for example a close asked for and not finished), to resume at start.
    pub async fn threads_with_step_without(
        &self,
        step: &str,
        unless: &str,
    ) -> Result<Vec<ThreadKey>, StoreError> {
        let rows = sqlx::query_as::<_, (String, String)>(
            "SELECT s.channel_id, s.thread_ts FROM thread_steps s \
             WHERE s.step = $1 AND NOT EXISTS (SELECT 1 FROM thread_steps u \
               WHERE u.channel_id = s.channel_id AND u.thread_ts = s.thread_ts AND u.step = $2) \
             ORDER BY s.done_at",
        )
        .bind(step)
        .bind(unless)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(channel, thread_ts)| ThreadKey { channel, thread_ts })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Change, Store, ThreadKey};

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    async fn a_step_is_done_once_with_what_it_says(store: &Store) {
        let t = thread();
        assert!(!store.step_done(&t, "todo_scan").await.unwrap());
        let step = Change::StepDone {
            thread: &t,
            step: "todo_scan",
        };
        assert!(store.commit(&[step], &[]).await.unwrap());
        assert!(store.step_done(&t, "todo_scan").await.unwrap());
        // Done again: the whole commit is refused, so its message is not said twice.
        assert!(!store.commit(&[step], &[]).await.unwrap());
        assert!(!store.step_done(&t, "memory_proposal").await.unwrap());
    }

    async fn half_done_work_is_found(store: &Store) {
        let t = thread();
        let mark = |step| Change::StepDone { thread: &t, step };
        store.commit(&[mark("close_requested")], &[]).await.unwrap();
        assert_eq!(
            store
                .threads_with_step_without("close_requested", "closed")
                .await
                .unwrap(),
            vec![t.clone()]
        );
        store.commit(&[mark("closed")], &[]).await.unwrap();
        assert!(
            store
                .threads_with_step_without("close_requested", "closed")
                .await
                .unwrap()
                .is_empty()
        );
    }

    crate::store::testing::on_both_backends!(
        a_step_is_done_once_with_what_it_says,
        half_done_work_is_found,
    );
}
