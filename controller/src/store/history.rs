//! What the store holds of a thread's past, read for its history
//! ([`crate::history`]): the people's messages, what CodeButler posted, and the
//! PM's conversation with the time of each message.

use codebutler_agent::conversation::ChatMessage;

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, unknown_value};
use crate::domain::Origin;

/// A thread's message, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub ts: String,
    pub user: String,
    pub text: String,
    pub received_at: String,
    /// Who stored it (a person, a click, the PR watcher, a notice).
    pub origin: Origin,
}

/// A `messages` row as [`Store::thread_messages`] selects it.
#[derive(sqlx::FromRow)]
struct StoredMessageRow {
    ts: String,
    user_id: String,
    text: String,
    received_at: String,
    origin: String,
}

impl TryFrom<StoredMessageRow> for StoredMessage {
    type Error = StoreError;

    fn try_from(r: StoredMessageRow) -> Result<Self, StoreError> {
        let Some(origin) = Origin::parse(&r.origin) else {
            return Err(unknown_value("messages.origin", &r.ts, r.origin));
        };
        Ok(Self {
            ts: r.ts,
            user: r.user_id,
            text: r.text,
            received_at: r.received_at,
            origin,
        })
    }
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
    /// The thread's messages (people's, clicks, the watcher's and notices), oldest first.
    pub async fn thread_messages(
        &self,
        thread: &ThreadKey,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        sqlx::query_as::<_, StoredMessageRow>(
            "SELECT ts, user_id, text, received_at, origin FROM messages \
             WHERE channel_id = $1 AND thread_ts = $2 ORDER BY received_at, ts",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .map(StoredMessage::try_from)
        .collect()
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
        .bind_thread(thread)
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
        .bind_thread(thread)
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
