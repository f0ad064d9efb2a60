//! The store: the source of truth for messages, threads, conversations and usage.
//!
//! It runs on SQLite (the embedded default: one file per repository, WAL, a busy timeout) or
//! on PostgreSQL (`store.url = "postgres://…"`: one schema per repository, so several hosts
//! can share one database). Every query is written once, in SQL both accept, through sqlx's
//! `Any` driver; the few statements that differ (opening, the write transaction, the
//! database's clock) are in [`backend`], the one place that knows which database it is.
//! An enum over two typed pools would have needed every query twice, or a macro to hide
//! it; `Any` keeps one text per query, decoded through one set of row structs, and the
//! test suite runs every store test on both databases. Its cost is a narrower set of
//! column types (integers, doubles, text), which is all the schema uses — sums of integer
//! columns are cast back to BIGINT, since PostgreSQL widens them to NUMERIC.
//!
//! The schema is in `migrations/`, written in portable SQL. Schema changes are new
//! migrations, never edits of old ones.
//!
//! Rows are read into `FromRow` structs (or single checked columns), and enum columns go
//! through conversions that refuse an unknown name, so a schema mismatch or a value this
//! version does not know is a [`StoreError`], never a panic or a guess. The domain types stay
//! free of database types: each row struct converts into its domain type here.

use std::path::Path;

use codebutler_agent::conversation::ChatMessage;
use sqlx::AnyPool;

use crate::domain::{
    IncomingMessage, Origin, Stage, ThreadKey, ThreadSummary, UsageRecord, UsageTotals,
};
use crate::layout::Layout;
use bind::BindThread;

mod backend;
mod bind;
mod budget;
mod checkpoints;
mod commit;
mod conversation_choices;
mod drawings;
mod files;
mod history;
mod home_viewers;
mod journal;
mod leases;
mod memory;
mod outbox;
mod overview;
mod pm_model;
mod questions;
pub mod reviews;
mod runs;
mod scope;
mod spend;
mod starts;
mod steps;
#[cfg(test)]
pub(crate) mod testing;
mod thread_state;
pub use backend::{StoreUrl, StoreUrlError, sanitized_name, schema_name};
pub use checkpoints::CheckpointRecord;
pub use commit::Change;
pub use conversation_choices::ConversationChoice;
pub use drawings::DrawingChange;
pub use files::KeptFile;
pub use history::{StoredEffect, StoredMessage};
pub use journal::{SavedMemory, SentDescription};
pub use leases::{Instance, InstanceRecord, LEASE_TTL, LeaseRecord};
pub use memory::{MemoryChange, OpenProposal};
pub use outbox::{IntentRecord, IntentState, NewIntent};
pub use pm_model::ThreadPmModel;
pub use questions::{QuestionRecord, QuestionState};
pub use runs::NewRun;
pub use scope::{ACTIVE_STAGES, MergeOrderRecord, ScopeChange, ScopeFile, ThreadScope};
pub use starts::{CutOffStart, RunStart};
pub use thread_state::{StoredThread, ThreadRecord, ThreadStateError};

/// Attempts after which a failed message is no longer retried (it stays stored).
pub const MAX_ATTEMPTS: i64 = 3;

/// The embedded migrations (also usable against PostgreSQL).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("open store {path}: {source}")]
    Open { path: String, source: sqlx::Error },
    /// The SQLite file, or one SQLite keeps beside it, is a link: a repository can commit
    /// one under `.codebutler/` (git replaces ignored files on checkout), and SQLite would
    /// write through it.
    #[error(
        "{path} is a symbolic link (a repository can commit one there); the store is never \
         opened through one: remove it"
    )]
    Link { path: String },
    /// A repository name that makes no PostgreSQL schema name (empty, or too long).
    #[error(
        "repository name {repository:?} cannot name a PostgreSQL schema (codebutler_<name>, at most 63 characters)"
    )]
    SchemaName { repository: String },
    /// Two repository names that sanitize alike would share one schema.
    #[error(
        "schema {schema} for repository {repository:?} already holds another repository ({owner}); rename one of them"
    )]
    SchemaTaken {
        schema: String,
        repository: String,
        owner: String,
    },
    #[error("migrate store: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("store query: {0}")]
    Query(#[from] sqlx::Error),
    #[error("stored conversation of thread {thread} is corrupt: {source}")]
    Corrupt {
        thread: String,
        source: serde_json::Error,
    },
    /// An enum column holds a name this controller does not know (a newer version wrote it,
    /// or the file was edited): an error rather than a guess at what it meant.
    #[error("stored {column} of {row} is {value:?}, which this controller does not know")]
    UnknownValue {
        /// `table.column`.
        column: &'static str,
        /// The row's id.
        row: String,
        value: String,
    },
    #[error("stored event {seq} of run {run} is not hex")]
    CorruptEvent { run: String, seq: i64 },
    /// A row of a run's stored conversation cannot be read back (see
    /// [`Store::run_conversation`]).
    #[error("stored conversation of run {run} is corrupt at row {seq}: {reason}")]
    CorruptRunConversation {
        run: String,
        seq: i64,
        reason: String,
    },
}

/// The store handle; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: AnyPool,
    backend: backend::Backend,
}

/// A message as its row stores it (`channel_id`, `ts`, `thread_ts`, `user_id`, `text`,
/// `event_id`). Rows are decoded with checked reads, so a column of the wrong type is a
/// [`StoreError::Query`], never a panic.
#[derive(sqlx::FromRow)]
struct MessageRow {
    channel_id: String,
    ts: String,
    thread_ts: String,
    user_id: String,
    text: String,
    event_id: Option<String>,
    origin: String,
}

impl TryFrom<MessageRow> for IncomingMessage {
    type Error = StoreError;

    fn try_from(r: MessageRow) -> Result<Self, StoreError> {
        let Some(origin) = Origin::parse(&r.origin) else {
            return Err(unknown_value("messages.origin", &r.ts, r.origin));
        };
        Ok(Self {
            channel: r.channel_id,
            ts: r.ts,
            thread_ts: r.thread_ts,
            user: r.user_id,
            text: r.text,
            event_id: r.event_id,
            origin,
        })
    }
}

/// A thread as a row names it (`channel_id`, `thread_ts`).
#[derive(sqlx::FromRow)]
struct ThreadRow {
    channel_id: String,
    thread_ts: String,
}

impl From<ThreadRow> for ThreadKey {
    fn from(r: ThreadRow) -> Self {
        Self {
            channel: r.channel_id,
            thread_ts: r.thread_ts,
        }
    }
}

/// A thread's usage, summed (the aliases of [`Store::usage_totals`]'s query).
#[derive(sqlx::FromRow)]
struct UsageTotalsRow {
    calls: i64,
    prompt_tokens: i64,
    cached_tokens: i64,
    completion_tokens: i64,
    cost: f64,
}

/// A role's usage in a thread, as [`Store::usage_by_role`] reads it.
#[derive(sqlx::FromRow)]
struct RoleTotalsRow {
    role: String,
    calls: i64,
    prompt_tokens: i64,
    cached_tokens: i64,
    completion_tokens: i64,
    cost: f64,
    duration_ms: i64,
}

/// One role's usage in a thread.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleTotals {
    /// The role the gateway recorded (`pm`, `coder`, …).
    pub role: String,
    pub totals: UsageTotals,
    /// The time its model calls took, summed (calls recorded with no duration count none).
    pub model_time: std::time::Duration,
}

/// A row of `threads` as [`Store::list_threads`] reads it.
#[derive(sqlx::FromRow)]
struct ThreadSummaryRow {
    #[sqlx(flatten)]
    key: ThreadRow,
    state: String,
    plan: Option<String>,
    pr_number: Option<i64>,
    pr_url: Option<String>,
    updated_at: String,
}

/// The error for an enum column holding `value`, which no variant names.
pub(crate) fn unknown_value(column: &'static str, row: impl ToString, value: String) -> StoreError {
    StoreError::UnknownValue {
        column,
        row: row.to_string(),
        value,
    }
}

/// The name a repository served on its own goes by: its directory's name (the schema of its
/// store on PostgreSQL is named after it).
pub fn repository_name(layout: &Layout) -> String {
    layout
        .repo
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and applies migrations.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let pool = backend::open_sqlite(path).await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self {
            pool,
            backend: backend::Backend::Sqlite,
        })
    }

    /// Opens the store of the repository named `repository` at `layout` where `url` says:
    /// its SQLite file (`.codebutler/store.db`), or its schema `codebutler_<name>` on the
    /// PostgreSQL server (created if missing), with the migrations applied.
    pub async fn connect(
        url: &StoreUrl,
        repository: &str,
        layout: &Layout,
    ) -> Result<Self, StoreError> {
        match url {
            StoreUrl::Sqlite => Self::open(&layout.store()).await,
            StoreUrl::Postgres(url) => {
                let (pool, backend) = backend::open_postgres(url, repository).await?;
                MIGRATOR.run(&pool).await?;
                Ok(Self { pool, backend })
            }
        }
    }

    /// The PostgreSQL schema this store works in; `None` on SQLite.
    pub fn schema(&self) -> Option<&str> {
        match &self.backend {
            backend::Backend::Sqlite => None,
            backend::Backend::Postgres { schema, .. } => Some(schema),
        }
    }

    /// A write transaction that excludes the store's other writers from its start
    /// (SQLite's `BEGIN IMMEDIATE`; on PostgreSQL an advisory lock: see [`backend`]), so a
    /// read-then-write inside it cannot interleave with another, and concurrent writers
    /// wait for each other instead of failing.
    pub(crate) async fn begin_write(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        self.backend.begin_write(&self.pool).await
    }

    /// Stores a user message unless it is already stored (Slack retries an event until it is
    /// acknowledged, and may deliver it on two connections). Returns whether it was new; a
    /// new message puts its thread's failed messages back in line, so they are retried first.
    pub async fn record_message(&self, msg: &IncomingMessage) -> Result<bool, StoreError> {
        self.record_message_with_files(msg, &[]).await
    }

    /// [`Store::record_message`] with the files shared on the message, stored with it in one
    /// transaction (to be fetched when the thread's task handles it): a duplicate delivery
    /// stores neither again.
    pub async fn record_message_with_files(
        &self,
        msg: &IncomingMessage,
        files: &[crate::domain::SharedFile],
    ) -> Result<bool, StoreError> {
        let now = now();
        let thread = msg.thread();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO threads (channel_id, thread_ts, state, created_at, updated_at) VALUES ($1, $2, 'created', $3, $4) \
             ON CONFLICT (channel_id, thread_ts) DO NOTHING",
        )
        .bind_thread(&thread)
        .bind(&now)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        let inserted = sqlx::query(
            "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, event_id, received_at, origin) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (channel_id, ts) DO NOTHING",
        )
        .bind(&msg.channel)
        .bind(&msg.ts)
        .bind(&msg.thread_ts)
        .bind(&msg.user)
        .bind(&msg.text)
        .bind(&msg.event_id)
        .bind(&now)
        .bind(msg.origin.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if inserted {
            files::insert(&mut tx, msg, files).await?;
            // A new message also puts the thread's failed ones back in line, before it.
            sqlx::query(
                "UPDATE messages SET state = 'pending' WHERE state = 'failed' \
                 AND attempts < $1 AND channel_id = $2 AND thread_ts = $3",
            )
            .bind(MAX_ATTEMPTS)
            .bind_thread(&thread)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(inserted)
    }

    /// Threads with messages waiting to be answered, oldest first.
    pub async fn threads_with_pending(&self) -> Result<Vec<ThreadKey>, StoreError> {
        let rows = sqlx::query_as::<_, ThreadRow>(
            "SELECT channel_id, thread_ts, MIN(ts) AS first FROM messages WHERE state = 'pending' \
             GROUP BY channel_id, thread_ts ORDER BY first",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(ThreadKey::from).collect())
    }

    /// Puts every failed message with attempts left back in line (at start).
    pub async fn requeue_failed(&self) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "UPDATE messages SET state = 'pending' WHERE state = 'failed' AND attempts < $1",
        )
        .bind(MAX_ATTEMPTS)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected())
    }

    /// The oldest message of a thread still waiting to be answered.
    pub async fn next_pending(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<IncomingMessage>, StoreError> {
        let row = sqlx::query_as::<_, MessageRow>(
            "SELECT channel_id, ts, thread_ts, user_id, text, event_id, origin FROM messages \
             WHERE state = 'pending' AND channel_id = $1 AND thread_ts = $2 ORDER BY ts LIMIT 1",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        row.map(IncomingMessage::try_from).transpose()
    }

    /// The thread's messages stored after `ts` and still waiting to be answered, oldest
    /// first: those that arrived while the message `ts` was being handled.
    pub async fn pending_after(
        &self,
        thread: &ThreadKey,
        ts: &str,
    ) -> Result<Vec<IncomingMessage>, StoreError> {
        let rows = sqlx::query_as::<_, MessageRow>(
            "SELECT channel_id, ts, thread_ts, user_id, text, event_id, origin FROM messages \
             WHERE state = 'pending' AND channel_id = $1 AND thread_ts = $2 AND ts > $3 ORDER BY ts",
        )
        .bind_thread(thread)
        .bind(ts)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(IncomingMessage::try_from).collect()
    }

    /// Marks a message handled, with nothing to record or say about it.
    pub async fn mark_processed(&self, msg: &IncomingMessage) -> Result<(), StoreError> {
        self.commit(&[Change::Processed(msg)], &[])
            .await
            .map(|_| ())
    }

    /// Marks a message as failed: kept for a later retry, not retried in a loop.
    pub async fn mark_failed(&self, msg: &IncomingMessage) -> Result<(), StoreError> {
        self.commit(&[Change::Failed(msg)], &[]).await.map(|_| ())
    }

    /// A role's conversation in a thread, in order.
    pub async fn conversation(
        &self,
        thread: &ThreadKey,
        role: &str,
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let bodies = sqlx::query_scalar::<_, String>(
            "SELECT body FROM conversation_messages WHERE channel_id = $1 AND thread_ts = $2 AND role = $3 ORDER BY seq",
        )
        .bind_thread(thread)
        .bind(role)
        .fetch_all(&self.pool)
        .await?;
        bodies
            .iter()
            .map(|body| {
                serde_json::from_str(body).map_err(|source| StoreError::Corrupt {
                    thread: thread.to_string(),
                    source,
                })
            })
            .collect()
    }

    /// Records the usage of one model call.
    pub async fn record_usage(&self, usage: &UsageRecord) -> Result<(), StoreError> {
        self.insert_usage(usage, None).await
    }

    /// Records the usage of one call made for `person` alone (an image they had drawn, a
    /// voice note they sent): their daily cap counts it ([`Store::person_spend_since`]).
    pub async fn record_usage_for(
        &self,
        usage: &UsageRecord,
        person: &str,
    ) -> Result<(), StoreError> {
        self.insert_usage(usage, Some(person)).await
    }

    async fn insert_usage(
        &self,
        usage: &UsageRecord,
        person: Option<&str>,
    ) -> Result<(), StoreError> {
        // sqlx 0.8.6's Any driver sends a NULL `f64` to PostgreSQL as a `float4`: a connection
        // that prepared the insert with one refuses a later call's `f64` cost ("incorrect
        // binary data format"). A call without a cost has a statement of its own.
        let sql = match usage.cost {
            Some(_) => {
                "INSERT INTO usage (id, channel_id, thread_ts, role, model, prompt_tokens, completion_tokens, \
                 cached_tokens, duration_ms, created_at, person, cost) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, ''), $12)"
            }
            None => {
                "INSERT INTO usage (id, channel_id, thread_ts, role, model, prompt_tokens, completion_tokens, \
                 cached_tokens, duration_ms, created_at, person, cost) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULLIF($11, ''), NULL)"
            }
        };
        let query = sqlx::query(sql)
            .bind(format!("{:032x}", rand::random::<u128>()))
            .bind_thread(&usage.thread)
            .bind(&usage.role)
            .bind(&usage.model)
            .bind(usage.prompt_tokens)
            .bind(usage.completion_tokens)
            .bind(usage.cached_tokens)
            .bind(usage.duration_ms)
            .bind(now())
            // No person is bound as '' (stored NULL): a NULL text parameter has the same
            // driver trouble as a NULL cost.
            .bind(person.unwrap_or_default().to_owned());
        match usage.cost {
            Some(cost) => query.bind(cost),
            None => query,
        }
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Model calls made by `role` since `since` (RFC 3339, UTC), across all threads.
    pub async fn calls_since(
        &self,
        role: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<i64, StoreError> {
        let since = since.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let calls = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) AS n FROM usage WHERE role = $1 AND created_at > $2",
        )
        .bind(role)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(calls)
    }

    /// The models that answered the thread's `role` calls since `since` (RFC 3339, UTC),
    /// each once, in the order first used.
    pub async fn models_since(
        &self,
        thread: &ThreadKey,
        role: &str,
        since: &str,
    ) -> Result<Vec<String>, StoreError> {
        let models = sqlx::query_scalar::<_, String>(
            "SELECT model FROM usage WHERE channel_id = $1 AND thread_ts = $2 AND role = $3 \
             AND created_at >= $4 GROUP BY model ORDER BY MIN(created_at)",
        )
        .bind_thread(thread)
        .bind(role)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        Ok(models)
    }

    /// A thread's usage so far.
    pub async fn usage_totals(&self, thread: &ThreadKey) -> Result<UsageTotals, StoreError> {
        let row = sqlx::query_as::<_, UsageTotalsRow>(
            "SELECT COUNT(*) AS calls, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, \
             CAST(COALESCE(SUM(cached_tokens), 0) AS BIGINT) AS cached_tokens, \
             CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens, \
             COALESCE(SUM(cost), 0.0) AS cost \
             FROM usage WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_one(&self.pool)
        .await?;
        Ok(UsageTotals {
            calls: row.calls,
            prompt_tokens: row.prompt_tokens,
            cached_tokens: row.cached_tokens,
            completion_tokens: row.completion_tokens,
            cost: row.cost,
        })
    }

    /// A thread's usage per role (as the gateway recorded it), roles in the order of their
    /// first call.
    pub async fn usage_by_role(&self, thread: &ThreadKey) -> Result<Vec<RoleTotals>, StoreError> {
        let rows = sqlx::query_as::<_, RoleTotalsRow>(
            "SELECT role, COUNT(*) AS calls, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, \
             CAST(COALESCE(SUM(cached_tokens), 0) AS BIGINT) AS cached_tokens, \
             CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens, \
             COALESCE(SUM(cost), 0.0) AS cost, CAST(COALESCE(SUM(duration_ms), 0) AS BIGINT) AS duration_ms \
             FROM usage WHERE channel_id = $1 AND thread_ts = $2 GROUP BY role ORDER BY MIN(created_at), role",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| RoleTotals {
                role: r.role,
                totals: UsageTotals {
                    calls: r.calls,
                    prompt_tokens: r.prompt_tokens,
                    cached_tokens: r.cached_tokens,
                    completion_tokens: r.completion_tokens,
                    cost: r.cost,
                },
                model_time: std::time::Duration::from_millis(
                    u64::try_from(r.duration_ms).unwrap_or(0),
                ),
            })
            .collect())
    }

    /// Records the thread's structured plan (JSON).
    pub async fn set_plan(&self, thread: &ThreadKey, plan_json: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE threads SET plan = $1, state = 'plan_pending', updated_at = $2 WHERE channel_id = $3 AND thread_ts = $4",
        )
        .bind(plan_json)
        .bind(now())
        .bind_thread(thread)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The most recently active threads whose stage `keep` accepts, newest first, at most
    /// `limit` of them.
    pub async fn list_threads(
        &self,
        keep: impl Fn(Stage) -> bool,
        limit: usize,
    ) -> Result<Vec<ThreadSummary>, StoreError> {
        let rows = sqlx::query_as::<_, ThreadSummaryRow>(
            "SELECT channel_id, thread_ts, state, plan, pr_number, pr_url, updated_at FROM threads \
             ORDER BY updated_at DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut threads = Vec::new();
        for r in rows {
            if threads.len() == limit {
                break;
            }
            let key = ThreadKey::from(r.key);
            let stage = Stage::parse(&r.state)
                .ok_or_else(|| unknown_value("threads.state", &key, r.state.clone()))?;
            if !keep(stage) {
                continue;
            }
            let pull_request = thread_state::pull_request(&key, r.pr_number, r.pr_url)?;
            threads.push(ThreadSummary {
                key,
                stage,
                plan: r.plan,
                pull_request,
                updated_at: r.updated_at,
            });
        }
        Ok(threads)
    }

    /// Takes the thread's pending plan for a run: moves the thread from `plan_pending` to `approved`, marks
    /// `approval` as starting a run ([`RunStart::Approval`]) and returns the plan, or `None` if
    /// there is no plan waiting (none proposed, or already approved). Atomic, so one approval
    /// starts at most one run.
    pub async fn approve_plan(
        &self,
        thread: &ThreadKey,
        approval: &IncomingMessage,
    ) -> Result<Option<String>, StoreError> {
        let mut tx = self.begin_write().await?;
        let plan = sqlx::query_scalar::<_, String>(
            "SELECT plan FROM threads WHERE channel_id = $1 AND thread_ts = $2 AND state = 'plan_pending'",
        )
        .bind_thread(thread)
        .fetch_optional(&mut *tx)
        .await?;
        if plan.is_some() {
            sqlx::query("UPDATE threads SET state = 'approved', updated_at = $1 WHERE channel_id = $2 AND thread_ts = $3")
                .bind(now())
                .bind_thread(thread)
                .execute(&mut *tx)
                .await?;
            starts::mark(&mut tx, approval, RunStart::Approval).await?;
        }
        tx.commit().await?;
        Ok(plan)
    }

    /// Whether the thread is stored (a message of it was).
    pub async fn has_thread(&self, thread: &ThreadKey) -> Result<bool, StoreError> {
        let row =
            sqlx::query("SELECT 1 AS x FROM threads WHERE channel_id = $1 AND thread_ts = $2")
                .bind_thread(thread)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    /// Whether the thread has a plan waiting for approval.
    pub async fn has_pending_plan(&self, thread: &ThreadKey) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 AS x FROM threads WHERE channel_id = $1 AND thread_ts = $2 AND state = 'plan_pending'",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// The thread's stored plan, if any.
    pub async fn plan(&self, thread: &ThreadKey) -> Result<Option<String>, StoreError> {
        let plan = sqlx::query_scalar::<_, Option<String>>(
            "SELECT plan FROM threads WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(plan.flatten())
    }

    /// Closes the pool, flushing the WAL.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ts: &str, thread_ts: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: thread_ts.into(),
            user: "U1".into(),
            text: format!("message {ts}"),
            event_id: Some(format!("Ev{ts}")),
            origin: crate::domain::Origin::Person,
        }
    }

    impl Store {
        /// A PM turn for `msg`, which is then processed.
        async fn complete_turn(&self, msg: &IncomingMessage, turn: &[ChatMessage]) {
            let thread = msg.thread();
            let turn = Change::Turn {
                thread: &thread,
                role: "pm",
                messages: turn,
            };
            self.commit(&[turn, Change::Processed(msg)], &[])
                .await
                .unwrap();
        }
    }

    async fn a_message_is_stored_once(s: &Store) {
        assert!(s.record_message(&msg("1.1", "1.1")).await.unwrap());
        assert!(!s.record_message(&msg("1.1", "1.1")).await.unwrap());
        assert_eq!(s.threads_with_pending().await.unwrap().len(), 1);
    }

    async fn pending_messages_come_in_order_and_leave_when_processed(s: &Store) {
        let (a, b) = (msg("1.1", "1.1"), msg("1.2", "1.1"));
        s.record_message(&b).await.unwrap();
        s.record_message(&a).await.unwrap();
        let t = a.thread();
        assert_eq!(s.next_pending(&t).await.unwrap(), Some(a.clone()));
        s.complete_turn(
            &a,
            &[ChatMessage::user("q"), ChatMessage::assistant_text("r")],
        )
        .await;
        assert_eq!(s.next_pending(&t).await.unwrap(), Some(b.clone()));
        s.complete_turn(&b, &[ChatMessage::user("q2")]).await;
        assert_eq!(s.next_pending(&t).await.unwrap(), None);
        let conv = s.conversation(&t, "pm").await.unwrap();
        assert_eq!(conv.len(), 3);
        assert_eq!(conv[2], ChatMessage::user("q2"));
        assert!(s.conversation(&t, "coder").await.unwrap().is_empty());
        // Those stored after a message and still pending, oldest first.
        let (c, d) = (msg("1.4", "1.1"), msg("1.3", "1.1"));
        s.record_message(&c).await.unwrap();
        s.record_message(&d).await.unwrap();
        assert_eq!(
            s.pending_after(&t, "1.1").await.unwrap(),
            vec![d.clone(), c.clone()]
        );
        assert_eq!(s.pending_after(&t, "1.3").await.unwrap(), vec![c.clone()]);
        s.mark_processed(&d).await.unwrap();
        assert_eq!(s.pending_after(&t, "1.1").await.unwrap(), vec![c]);
    }

    async fn failed_messages_wait_until_requeued(s: &Store) {
        let a = msg("1.1", "1.1");
        s.record_message(&a).await.unwrap();
        s.mark_failed(&a).await.unwrap();
        assert_eq!(s.next_pending(&a.thread()).await.unwrap(), None);
        // A new message in the thread brings it back, ahead of itself.
        let b = msg("1.2", "1.1");
        s.record_message(&b).await.unwrap();
        assert_eq!(s.next_pending(&a.thread()).await.unwrap(), Some(a.clone()));
        s.mark_failed(&a).await.unwrap();
        assert_eq!(s.requeue_failed().await.unwrap(), 1);
        assert_eq!(s.next_pending(&a.thread()).await.unwrap(), Some(a.clone()));
        // The third failure is the last: a message that always fails is not retried forever.
        s.mark_failed(&a).await.unwrap();
        assert_eq!(s.requeue_failed().await.unwrap(), 0);
        s.record_message(&msg("1.3", "1.1")).await.unwrap();
        assert_eq!(
            s.next_pending(&a.thread()).await.unwrap().unwrap().ts,
            "1.2"
        );
    }

    async fn concurrent_writers_wait_instead_of_failing(s: &Store) {
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move {
                    let m = msg(&format!("{i}.1"), &format!("{i}.1"));
                    s.record_message(&m).await?;
                    s.conversation(&m.thread(), "pm").await?;
                    let thread = m.thread();
                    let turn = [ChatMessage::user("q"), ChatMessage::assistant_text("a")];
                    s.commit(
                        &[
                            Change::Turn {
                                thread: &thread,
                                role: "pm",
                                messages: &turn,
                            },
                            Change::Processed(&m),
                        ],
                        &[],
                    )
                    .await
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert!(s.threads_with_pending().await.unwrap().is_empty());
    }

    async fn usage_and_plan_are_recorded(s: &Store) {
        let a = msg("1.1", "1.1");
        s.record_message(&a).await.unwrap();
        for _ in 0..2 {
            s.record_usage(&UsageRecord {
                thread: a.thread(),
                role: "pm".into(),
                model: "m".into(),
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_tokens: 4,
                cost: Some(0.5),
                duration_ms: 700,
            })
            .await
            .unwrap();
        }
        let totals = s.usage_totals(&a.thread()).await.unwrap();
        assert_eq!(
            totals,
            UsageTotals {
                calls: 2,
                prompt_tokens: 20,
                cached_tokens: 8,
                completion_tokens: 10,
                cost: 1.0
            }
        );
        s.set_plan(&a.thread(), r#"{"summary":"x"}"#).await.unwrap();
        assert_eq!(
            s.plan(&a.thread()).await.unwrap().as_deref(),
            Some(r#"{"summary":"x"}"#)
        );
        assert_eq!(
            s.list_threads(|_| true, 10).await.unwrap()[0].key,
            a.thread()
        );
    }

    async fn data_survives_reopening(place: &testing::Place) {
        let a = msg("1.1", "1.1");
        {
            let s = place.open().await;
            s.record_message(&a).await.unwrap();
            s.close().await;
        }
        let s = place.open().await;
        assert_eq!(s.next_pending(&a.thread()).await.unwrap(), Some(a));
    }

    testing::on_both_places!(data_survives_reopening);

    crate::store::testing::on_both_backends!(
        a_message_is_stored_once,
        pending_messages_come_in_order_and_leave_when_processed,
        failed_messages_wait_until_requeued,
        concurrent_writers_wait_instead_of_failing,
        usage_and_plan_are_recorded,
    );
}
