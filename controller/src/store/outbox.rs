//! The outbox: the effects the daemon means to have in Slack, recorded before they are
//! attempted (see `slack::outbox` for their delivery and what a body holds).
//!
//! A row is written in the same transaction as the change it reports ([`super::Change`]),
//! so a crash either loses both or keeps both. Rows of a thread are delivered in `seq` order.
//! A row goes `pending` → `sending` (attempted: from here on its outcome is unknown until
//! Slack answers) → `sent`, or back to `pending` when Slack certainly did nothing, or to
//! `failed` when Slack refused it for good.

use sqlx::AnyConnection;

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, ThreadRow, now, unknown_value};

/// An effect to record: its id (unique; `<group>/<n>`), its thread and its body (JSON the
/// delivery understands).
#[derive(Clone, Debug, PartialEq)]
pub struct NewIntent {
    pub id: String,
    pub thread: ThreadKey,
    pub body: String,
}

/// Where an effect is in its delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntentState {
    /// Not done, and known not to be.
    Pending,
    /// Attempted; whether it got through is unknown until Slack answers or the thread shows it.
    Sending,
    Sent,
    /// Refused by Slack for good; given up.
    Failed,
}

impl IntentState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Sent => "sent",
            Self::Failed => "failed",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Pending, Self::Sending, Self::Sent, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// One recorded effect.
#[derive(Clone, Debug, PartialEq)]
pub struct IntentRecord {
    pub id: String,
    pub thread: ThreadKey,
    pub body: String,
    pub state: IntentState,
    /// The posted message's ts, once known.
    pub ts: Option<String>,
    /// The uploaded file's id, once known (snippets).
    pub file_id: Option<String>,
    /// When it was recorded (RFC 3339, UTC): nothing of it can be in Slack from before.
    pub created_at: String,
}

const COLUMNS: &str = "id, channel_id, thread_ts, body, state, ts, file_id, created_at";

/// A row of `outbox` as [`COLUMNS`] reads it.
#[derive(sqlx::FromRow)]
struct IntentRow {
    id: String,
    #[sqlx(flatten)]
    thread: ThreadRow,
    body: String,
    state: String,
    ts: Option<String>,
    file_id: Option<String>,
    created_at: String,
}

impl TryFrom<IntentRow> for IntentRecord {
    type Error = StoreError;

    fn try_from(r: IntentRow) -> Result<Self, StoreError> {
        let Some(state) = IntentState::parse(&r.state) else {
            return Err(unknown_value("outbox.state", &r.id, r.state));
        };
        Ok(Self {
            id: r.id,
            thread: r.thread.into(),
            body: r.body,
            state,
            ts: r.ts,
            file_id: r.file_id,
            created_at: r.created_at,
        })
    }
}

/// Rows of `outbox` as records.
fn records(rows: Vec<IntentRow>) -> Result<Vec<IntentRecord>, StoreError> {
    rows.into_iter().map(IntentRecord::try_from).collect()
}

/// Appends `intents` to the outbox, after everything already in it.
pub(super) async fn enqueue(
    conn: &mut AnyConnection,
    intents: &[NewIntent],
) -> Result<(), StoreError> {
    if intents.is_empty() {
        return Ok(());
    }
    let last = sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(seq), 0) AS last FROM outbox")
        .fetch_one(&mut *conn)
        .await?;
    let now = now();
    for (i, intent) in intents.iter().enumerate() {
        sqlx::query(
            "INSERT INTO outbox (id, seq, channel_id, thread_ts, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&intent.id)
        .bind(last + 1 + i as i64)
        .bind_thread(&intent.thread)
        .bind(&intent.body)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

impl Store {
    /// The thread's effects not yet sent or given up, in order.
    pub async fn unsent(&self, thread: &ThreadKey) -> Result<Vec<IntentRecord>, StoreError> {
        let rows = sqlx::query_as::<_, IntentRow>(&format!(
            "SELECT {COLUMNS} FROM outbox WHERE state IN ('pending', 'sending') \
             AND channel_id = $1 AND thread_ts = $2 ORDER BY seq"
        ))
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        records(rows)
    }

    /// Threads with effects not yet sent or given up.
    pub async fn threads_with_unsent(&self) -> Result<Vec<ThreadKey>, StoreError> {
        let rows = sqlx::query_as::<_, ThreadRow>(
            "SELECT channel_id, thread_ts, MIN(seq) AS first FROM outbox \
             WHERE state IN ('pending', 'sending') GROUP BY channel_id, thread_ts ORDER BY first",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(ThreadKey::from).collect())
    }

    /// The effects recorded together as `group`, in order.
    pub async fn intent_group(&self, group: &str) -> Result<Vec<IntentRecord>, StoreError> {
        // Ids of the group are `<group>/<n>`: the range from "<group>/" up to "<group>0"
        // ('0' follows '/') holds exactly them, without LIKE's wildcards.
        let rows = sqlx::query_as::<_, IntentRow>(&format!(
            "SELECT {COLUMNS} FROM outbox WHERE id >= $1 AND id < $2 ORDER BY seq"
        ))
        .bind(format!("{group}/"))
        .bind(format!("{group}0"))
        .fetch_all(&self.pool)
        .await?;
        records(rows)
    }

    /// Whether an effect of `thread` is recorded as the message `ts`.
    pub async fn ts_recorded(&self, thread: &ThreadKey, ts: &str) -> Result<bool, StoreError> {
        let known = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM outbox WHERE channel_id = $1 AND thread_ts = $2 AND ts = $3",
        )
        .bind_thread(thread)
        .bind(ts)
        .fetch_one(&self.pool)
        .await?;
        Ok(known > 0)
    }

    /// One effect.
    pub async fn intent(&self, id: &str) -> Result<Option<IntentRecord>, StoreError> {
        let row =
            sqlx::query_as::<_, IntentRow>(&format!("SELECT {COLUMNS} FROM outbox WHERE id = $1"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(IntentRecord::try_from).transpose()
    }

    /// Records a message Slack already shows as the delivered effect `intent` with its `ts`
    /// (a streamed message: Slack made it when the stream started), so later effects name it
    /// by id and a restart finds it instead of posting again. Recording the same id again
    /// changes nothing.
    pub async fn record_shown(&self, intent: &NewIntent, ts: &str) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let known = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) AS n FROM outbox WHERE id = $1")
            .bind(&intent.id)
            .fetch_one(&mut *tx)
            .await?;
        if known == 0 {
            enqueue(&mut tx, std::slice::from_ref(intent)).await?;
            sqlx::query("UPDATE outbox SET state = 'sent', ts = $1, sent_at = $2 WHERE id = $3")
                .bind(ts)
                .bind(now())
                .bind(&intent.id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Marks an effect attempted (its outcome unknown from now on); `file_id` is the file a
    /// snippet's upload made.
    pub async fn intent_sending(&self, id: &str, file_id: Option<&str>) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET state = 'sending', file_id = $1 WHERE id = $2")
            .bind(file_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Marks an effect done; `ts` is the posted message's.
    pub async fn intent_sent(&self, id: &str, ts: Option<&str>) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE outbox SET state = 'sent', ts = COALESCE($1, ts), sent_at = $2 WHERE id = $3",
        )
        .bind(ts)
        .bind(now())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Puts an effect back in line: Slack certainly did not do it.
    pub async fn intent_pending(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET state = 'pending' WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Gives an effect up: Slack refused it for good (`error` says why).
    pub async fn intent_failed(&self, id: &str, error: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE outbox SET state = 'failed', error = $1 WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    fn intent(id: &str, ts: &str) -> NewIntent {
        NewIntent {
            id: id.into(),
            thread: thread(ts),
            body: format!("{{\"say\":\"{id}\"}}"),
        }
    }

    async fn effects_come_back_in_order_per_thread_until_settled(s: &Store) {
        s.commit(&[], &[intent("a/0", "1.1"), intent("a/1", "1.1")])
            .await
            .unwrap();
        s.commit(&[], &[intent("b/0", "2.1"), intent("c/0", "1.1")])
            .await
            .unwrap();
        let ids = |rows: Vec<IntentRecord>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(s.unsent(&thread("1.1")).await.unwrap()),
            ["a/0", "a/1", "c/0"]
        );
        assert_eq!(
            s.threads_with_unsent().await.unwrap(),
            [thread("1.1"), thread("2.1")]
        );
        assert_eq!(ids(s.intent_group("a").await.unwrap()), ["a/0", "a/1"]);

        s.intent_sending("a/0", None).await.unwrap();
        assert_eq!(
            s.unsent(&thread("1.1")).await.unwrap()[0].state,
            IntentState::Sending,
            "an attempted effect stays in line until its outcome is known"
        );
        s.intent_sent("a/0", Some("9.9")).await.unwrap();
        s.intent_sending("a/1", Some("F1")).await.unwrap();
        s.intent_pending("a/1").await.unwrap();
        s.intent_failed("c/0", "invalid_blocks").await.unwrap();
        let a0 = s.intent("a/0").await.unwrap().unwrap();
        assert_eq!(
            (a0.state, a0.ts.as_deref()),
            (IntentState::Sent, Some("9.9"))
        );
        let a1 = s.intent("a/1").await.unwrap().unwrap();
        assert_eq!(
            (a1.state, a1.file_id.as_deref()),
            (IntentState::Pending, Some("F1"))
        );
        assert_eq!(ids(s.unsent(&thread("1.1")).await.unwrap()), ["a/1"]);
        // A second write of the same id is refused: an effect is recorded once.
        assert!(s.commit(&[], &[intent("a/0", "1.1")]).await.is_err());
    }

    async fn an_unknown_stored_state_is_an_error_not_a_guess(s: &Store) {
        s.commit(&[], &[intent("a/0", "1.1")]).await.unwrap();
        sqlx::query("UPDATE outbox SET state = 'lost' WHERE id = 'a/0'")
            .execute(&s.pool)
            .await
            .unwrap();
        let err = s.intent("a/0").await.expect_err("an unknown state");
        assert_eq!(
            err.to_string(),
            "stored outbox.state of a/0 is \"lost\", which this controller does not know"
        );
        assert!(s.intent_group("a").await.is_err());
    }

    /// Writers committing at once each read the outbox's last `seq` and append after it:
    /// the write transaction keeps them from reading the same one (on PostgreSQL too, where
    /// its advisory lock does what SQLite's `BEGIN IMMEDIATE` does).
    async fn concurrent_commits_append_to_one_outbox_order(s: &Store) {
        let tasks: Vec<_> = (0..30)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move {
                    let ts = format!("{i}.1");
                    s.commit(
                        &[],
                        &[
                            intent(&format!("g{i}/0"), &ts),
                            intent(&format!("g{i}/1"), &ts),
                        ],
                    )
                    .await
                })
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap().unwrap());
        }
        let seqs: Vec<i64> = sqlx::query_scalar("SELECT seq FROM outbox ORDER BY seq")
            .fetch_all(&s.pool)
            .await
            .unwrap();
        assert_eq!(seqs, (1..=60).collect::<Vec<i64>>());
        for i in 0..30 {
            let group = s.intent_group(&format!("g{i}")).await.unwrap();
            assert_eq!(group.len(), 2);
            assert!(group[0].id.ends_with("/0"), "a group keeps its order");
        }
    }

    crate::store::testing::on_both_backends!(
        concurrent_commits_append_to_one_outbox_order,
        effects_come_back_in_order_per_thread_until_settled,
        an_unknown_stored_state_is_an_error_not_a_guess,
    );
}
