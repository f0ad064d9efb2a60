//! What the store holds of a thread's past, read for its history
//! ([`crate::thread::history`]): the people's messages, what CodeButler posted, and the
//! PM's conversation with the time of each message.

use codebutler_agent::conversation::ChatMessage;

use super::{Store, StoreError, ThreadKey};

/// A person's message in a thread, as stored.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct StoredMessage {
    pub ts: String,
    #[sqlx(rename = "user_id")]
    pub user: String,
    pub text: String,
    pub received_at: String,
}

/// One of a thread's outbox intents: a Slack effect (JSON) under its group.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct StoredEffect {
    /// `<group>/<n>`.
    pub id: String,
    pub body: String,
    pub created_at: String,
}

impl Store {
    /// The thread's messages from people (button clicks included), oldest first.
    pub async fn thread_messages(
        &self,
        thread: &ThreadKey,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        Ok(sqlx::query_as::<_, StoredMessage>(
            "SELECT ts, user_id, text, received_at FROM messages \
             WHERE channel_id = $1 AND thread_ts = $2 ORDER BY received_at, ts",
        )
        .bind(&thread.channel)
        .bind(&thread.thread_ts)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Everything recorded to say in the thread, in the order it was recorded.
    pub async fn thread_effects(
        &self,
        thread: &ThreadKey,
    ) -> Result<Vec<StoredEffect>, StoreError> {
        Ok(sqlx::query_as::<_, StoredEffect>(
            "SELECT id, body, created_at FROM outbox \
             WHERE channel_id = $1 AND thread_ts = $2 ORDER BY seq",
        )
        .bind(&thread.channel)
        .bind(&thread.thread_ts)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A role's conversation in the thread with when each message was stored, in order.
    pub async fn dated_conversation(
        &self,
        thread: &ThreadKey,
        role: &str,
    ) -> Result<Vec<(String, ChatMessage)>, StoreError> {
        let rows = sqlx::query_as::<_, (String, String)>(
            "SELECT created_at, body FROM conversation_messages \
             WHERE channel_id = $1 AND thread_ts = $2 AND role = $3 ORDER BY seq",
        )
        .bind(&thread.channel)
        .bind(&thread.thread_ts)
        .bind(role)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(at, body)| {
                serde_json::from_str(&body)
                    .map(|message| (at, message))
                    .map_err(|source| StoreError::Corrupt {
                        thread: thread.to_string(),
                        source,
                    })
            })
            .collect()
    }
}
