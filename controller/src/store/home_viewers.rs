//! Who opened the Home tab, and which threads changed since a time: what the Home tab's
//! refresh (`crate::service::home_refresh`) reads to republish the Home of the people whose
//! threads changed.

use super::{Store, StoreError, now};

impl Store {
    /// Remembers that `user` opened the Home tab.
    pub async fn record_home_viewer(&self, user: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO home_viewers (user_id, opened_at) VALUES ($1, $2) \
             ON CONFLICT (user_id) DO UPDATE SET opened_at = excluded.opened_at",
        )
        .bind(user)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Whether `user` opened the Home tab.
    pub async fn is_home_viewer(&self, user: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT 1 AS x FROM home_viewers WHERE user_id = $1")
            .bind(user)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// The threads of `channel` changed after `since` (a stored time): who started each (when
    /// its first message is stored) and when it changed, oldest change first.
    pub async fn threads_changed_since(
        &self,
        channel: &str,
        since: &str,
    ) -> Result<Vec<(Option<String>, String)>, StoreError> {
        let rows = sqlx::query_as::<_, (Option<String>, String)>(
            "SELECT m.user_id, t.updated_at FROM threads t LEFT JOIN messages m \
               ON m.channel_id = t.channel_id AND m.ts = t.thread_ts \
             WHERE t.channel_id = $1 AND t.updated_at > $2 ORDER BY t.updated_at",
        )
        .bind(channel)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::message;

    async fn viewers_are_remembered_and_changed_threads_found(s: &Store) {
        assert!(!s.is_home_viewer("U1").await.unwrap());
        s.record_home_viewer("U1").await.unwrap();
        s.record_home_viewer("U1").await.unwrap();
        assert!(s.is_home_viewer("U1").await.unwrap());

        let before = "2000-01-01T00:00:00.000000Z";
        s.record_message(&message("1.1", "1.1", "hi"))
            .await
            .unwrap();
        let changed = s.threads_changed_since("C1", before).await.unwrap();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].0.as_deref(), Some("U1"));
        assert!(
            s.threads_changed_since("C1", &changed[0].1)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            s.threads_changed_since("C2", before)
                .await
                .unwrap()
                .is_empty()
        );
    }

    crate::store::testing::on_both_backends!(viewers_are_remembered_and_changed_threads_found);
}
