//! A thread's stored state: its [`Stage`] (`threads.state`), its plan and its latest run,
//! read together when one of its messages is handled. The stage is written where it changes:
//! a plan proposed ([`Store::set_plan`]), approved ([`Store::approve_plan`]), withdrawn or
//! waiting again ([`super::Change`]).

use crate::domain::{Plan, RunRecord, Stage, ThreadKey};

use super::{Store, StoreError};

/// Reading a thread's state failed.
#[derive(Debug, thiserror::Error)]
pub enum ThreadStateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("thread {thread} has an unknown stored state {name:?}")]
    UnknownStage { thread: String, name: String },
    #[error("stored plan of thread {thread} is unreadable: {source}")]
    CorruptPlan {
        thread: String,
        source: serde_json::Error,
    },
}

/// What the store holds about a thread's state.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredThread {
    pub stage: Stage,
    /// The thread's latest plan (still kept once approved).
    pub plan: Option<Plan>,
    /// The latest run in the thread.
    pub latest_run: Option<RunRecord>,
}

#[derive(sqlx::FromRow)]
struct ThreadRow {
    state: String,
    plan: Option<String>,
}

impl Store {
    /// The thread's stored state; a thread not stored yet is conversing.
    pub async fn stored_thread(
        &self,
        thread: &ThreadKey,
    ) -> Result<StoredThread, ThreadStateError> {
        let row: Option<ThreadRow> = sqlx::query_as(
            "SELECT state, plan FROM threads WHERE channel_id = ? AND thread_ts = ?",
        )
        .bind(&thread.channel)
        .bind(&thread.thread_ts)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from)?;
        let (stage, plan) = match row {
            None => (Stage::Conversing, None),
            Some(row) => {
                let stage =
                    Stage::parse(&row.state).ok_or_else(|| ThreadStateError::UnknownStage {
                        thread: thread.to_string(),
                        name: row.state.clone(),
                    })?;
                let plan = row
                    .plan
                    .map(|json| Plan::from_json(&json))
                    .transpose()
                    .map_err(|source| ThreadStateError::CorruptPlan {
                        thread: thread.to_string(),
                        source,
                    })?;
                (stage, plan)
            }
        };
        let latest_run = self.latest_run(&thread.thread_ts).await?;
        Ok(StoredThread {
            stage,
            plan,
            latest_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::str::FromStr;

    use sqlx::sqlite::SqliteConnectOptions;

    use super::*;
    use crate::domain::IncomingMessage;
    use crate::store::Change;

    const PLAN: &str = r#"{"summary":"Fix expiry","steps":["Edit it"],"files":["src/a.rs"]}"#;

    fn key(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    fn msg(ts: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: ts.into(),
            user: "U1".into(),
            text: "hi".into(),
            event_id: None,
        }
    }

    /// Applies the migrations before this one to a new database at `path`, as the daemon
    /// released before it would have left it.
    async fn old_schema(path: &Path, dir: &Path) -> sqlx::SqlitePool {
        let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let old = dir.join("old-migrations");
        std::fs::create_dir(&old).unwrap();
        for entry in std::fs::read_dir(&migrations).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if name.as_str() < "20261124180000" {
                std::fs::copy(entry.path(), old.join(&name)).unwrap();
            }
        }
        let options = SqliteConnectOptions::from_str("sqlite:")
            .unwrap()
            .filename(path)
            .create_if_missing(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        sqlx::migrate::Migrator::new(old.as_path())
            .await
            .unwrap()
            .run(&pool)
            .await
            .unwrap();
        pool
    }

    #[tokio::test]
    async fn threads_stored_by_the_old_schema_get_their_stage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let pool = old_schema(&path, dir.path()).await;
        for (ts, phase, plan) in [
            ("1.1", "pm", None),
            ("2.1", "pm", Some(PLAN)),
            ("3.1", "coder", Some(PLAN)),
        ] {
            sqlx::query(
                "INSERT INTO threads (channel_id, thread_ts, phase, plan, created_at, updated_at) \
                 VALUES ('C1', ?, ?, ?, 'then', 'then')",
            )
            .bind(ts)
            .bind(phase)
            .bind(plan)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;

        let store = Store::open(&path).await.unwrap();
        let plan = Plan::from_json(PLAN).unwrap();
        let stage = |s: &StoredThread| (s.stage, s.plan.clone());
        assert_eq!(
            stage(&store.stored_thread(&key("1.1")).await.unwrap()),
            (Stage::Conversing, None)
        );
        assert_eq!(
            stage(&store.stored_thread(&key("2.1")).await.unwrap()),
            (Stage::PlanPending, Some(plan.clone()))
        );
        assert_eq!(
            stage(&store.stored_thread(&key("3.1")).await.unwrap()),
            (Stage::Approved, Some(plan))
        );
    }

    #[tokio::test]
    async fn the_stage_follows_proposals_approvals_and_withdrawals() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.db")).await.unwrap();
        let (m, t) = (msg("1.1"), key("1.1"));
        let stage = || async { store.stored_thread(&t).await.unwrap().stage };
        assert_eq!(stage().await, Stage::Conversing, "unknown thread");
        store.record_message(&m).await.unwrap();
        assert_eq!(stage().await, Stage::Conversing);
        store.set_plan(&t, PLAN).await.unwrap();
        assert_eq!(stage().await, Stage::PlanPending);
        assert!(store.approve_plan(&t, &m).await.unwrap().is_some());
        assert_eq!(stage().await, Stage::Approved);
        store.commit(&[Change::PlanPending(&t)], &[]).await.unwrap();
        assert_eq!(stage().await, Stage::PlanPending);
        store
            .commit(&[Change::WithdrawPlan(&t)], &[])
            .await
            .unwrap();
        let stored = store.stored_thread(&t).await.unwrap();
        assert_eq!((stored.stage, stored.plan), (Stage::Conversing, None));
    }

    #[tokio::test]
    async fn an_unreadable_state_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.db")).await.unwrap();
        let t = key("1.1");
        store.record_message(&msg("1.1")).await.unwrap();
        sqlx::query("UPDATE threads SET state = 'limbo'")
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.stored_thread(&t).await,
            Err(ThreadStateError::UnknownStage { name, .. }) if name == "limbo"
        ));
        sqlx::query("UPDATE threads SET state = 'plan_pending', plan = '{\"summary\":'")
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.stored_thread(&t).await,
            Err(ThreadStateError::CorruptPlan { .. })
        ));
    }
}
