//! A thread's stored state: its [`Stage`] (`threads.state`), its plan and its latest run,
//! read together when one of its messages is handled. The stage is written where it changes:
//! a plan proposed ([`Store::set_plan`]), approved ([`Store::approve_plan`]), withdrawn or
//! waiting again ([`super::Change`]), past `created` once a message is handled, and
//! `pr_opened` with the pull request's number and address ([`Store::record_pull_request`]).

use crate::domain::{Plan, PullRequestRef, RunRecord, Stage, ThreadKey};

use super::bind::BindThread;
use super::{Store, StoreError, now, unknown_value};

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
    /// The pull request its Coder opened, if one was.
    pub pull_request: Option<PullRequestRef>,
}

#[derive(sqlx::FromRow)]
struct ThreadRow {
    state: String,
    plan: Option<String>,
    pr_number: Option<i64>,
    pr_url: Option<String>,
}

/// A thread's place in its lifecycle, as `runnerctl` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadRecord {
    pub stage: Stage,
    /// The pull request its Coder opened, if one was.
    pub pull_request: Option<PullRequestRef>,
}

#[derive(sqlx::FromRow)]
struct LifecycleRow {
    state: String,
    pr_number: Option<i64>,
    pr_url: Option<String>,
}

/// The pull request stored in a thread's `pr_number` and `pr_url`: both or neither.
pub(super) fn pull_request(
    thread: &ThreadKey,
    number: Option<i64>,
    url: Option<String>,
) -> Result<Option<PullRequestRef>, StoreError> {
    match (number, url) {
        (None, None) => Ok(None),
        (Some(n), Some(url)) => {
            let number = u64::try_from(n)
                .map_err(|_| unknown_value("threads.pr_number", thread, n.to_string()))?;
            Ok(Some(PullRequestRef { number, url }))
        }
        (number, url) => Err(unknown_value(
            "threads.pr_number and pr_url",
            thread,
            format!("{number:?} and {url:?}"),
        )),
    }
}

impl Store {
    /// The thread's stored state; a thread not stored yet is conversing.
    pub async fn stored_thread(
        &self,
        thread: &ThreadKey,
    ) -> Result<StoredThread, ThreadStateError> {
        let row: Option<ThreadRow> = sqlx::query_as(
            "SELECT state, plan, pr_number, pr_url FROM threads WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from)?;
        let (stage, plan, pull_request) = match row {
            None => (Stage::Conversing, None, None),
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
                let pull_request = pull_request(thread, row.pr_number, row.pr_url)?;
                (stage, plan, pull_request)
            }
        };
        let latest_run = self.latest_run(&thread.thread_ts).await?;
        Ok(StoredThread {
            stage,
            plan,
            latest_run,
            pull_request,
        })
    }
}

impl Store {
    /// The thread's stage and pull request; `None` for a thread not stored (a run started
    /// by `runnerctl` has none).
    pub async fn thread_record(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        let row: Option<LifecycleRow> = sqlx::query_as(
            "SELECT state, pr_number, pr_url FROM threads WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let stage = Stage::parse(&row.state)
                .ok_or_else(|| unknown_value("threads.state", thread, row.state.clone()))?;
            Ok(ThreadRecord {
                stage,
                pull_request: pull_request(thread, row.pr_number, row.pr_url)?,
            })
        })
        .transpose()
    }

    /// Records the pull request the thread's Coder opened and moves the thread to
    /// `pr_opened` (a later one, from a follow-up run, replaces it). A closed thread is left
    /// as it is. Returns whether a stored thread was updated (a `runnerctl` run has none).
    pub async fn record_pull_request(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
    ) -> Result<bool, StoreError> {
        let number = i64::try_from(pr.number)
            .map_err(|_| unknown_value("threads.pr_number", thread, pr.number.to_string()))?;
        let updated = sqlx::query(
            "UPDATE threads SET state = 'pr_opened', pr_number = $1, pr_url = $2, updated_at = $3, \
             pr_opened_at = CASE WHEN pr_number = $1 AND pr_opened_at IS NOT NULL \
               THEN pr_opened_at ELSE $3 END \
             WHERE channel_id = $4 AND thread_ts = $5 AND state NOT LIKE 'closed%'",
        )
        .bind(number)
        .bind(&pr.url)
        .bind(now())
        .bind_thread(thread)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(updated == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::IncomingMessage;
    use crate::store::Change;
    use crate::store::testing::Place;

    const PLAN: &str = r#"{"summary":"Fix expiry","steps":["Edit it"],"files":["src/a.rs"]}"#;

    fn key(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    fn msg(ts: &str) -> IncomingMessage {
        crate::store::testing::message(ts, ts, "hi")
    }

    async fn threads_stored_by_the_old_schema_get_their_stage(place: &Place) {
        let pool = place.old_schema("20261124180000").await;
        for (ts, phase, plan) in [
            ("1.1", "pm", None),
            ("2.1", "pm", Some(PLAN)),
            ("3.1", "coder", Some(PLAN)),
        ] {
            sqlx::query(
                "INSERT INTO threads (channel_id, thread_ts, phase, plan, created_at, updated_at) \
                 VALUES ('C1', $1, $2, $3, 'then', 'then')",
            )
            .bind(ts)
            .bind(phase)
            .bind(plan)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;

        let store = place.open().await;
        let plan = Plan::from_json(PLAN).unwrap();
        let stage = |s: &StoredThread| (s.stage, s.plan.clone());
        assert_eq!(
            stage(&store.stored_thread(&key("1.1")).await.unwrap()),
            // Conversing by this migration; none of its messages handled, so the lifecycle's
            // migration after it makes it created.
            (Stage::Created, None)
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

    async fn the_stage_follows_proposals_approvals_and_withdrawals(store: &Store) {
        let (m, t) = (msg("1.1"), key("1.1"));
        let stage = || async { store.stored_thread(&t).await.unwrap().stage };
        assert_eq!(stage().await, Stage::Conversing, "unknown thread");
        store.record_message(&m).await.unwrap();
        assert_eq!(stage().await, Stage::Created);
        store.mark_failed(&m).await.unwrap();
        assert_eq!(stage().await, Stage::Created, "nothing handled yet");
        store.mark_processed(&m).await.unwrap();
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

    /// Threads stored by the schema before the lifecycle get theirs: a thread none of whose
    /// messages was handled is `created`; the others keep their stage, with no pull request.
    async fn threads_stored_before_the_lifecycle_are_backfilled(place: &Place) {
        let pool = place.old_schema("20261124200000").await;
        for (ts, state, plan, message) in [
            ("1.1", "conversing", None, Some("pending")),
            ("2.1", "conversing", None, Some("failed")),
            ("3.1", "conversing", None, Some("processed")),
            ("4.1", "conversing", None, None),
            ("5.1", "plan_pending", Some(PLAN), Some("processed")),
            ("6.1", "approved", Some(PLAN), Some("processed")),
        ] {
            sqlx::query(
                "INSERT INTO threads (channel_id, thread_ts, phase, state, plan, created_at, updated_at) \
                 VALUES ('C1', $1, 'pm', $2, $3, 'then', 'then')",
            )
            .bind(ts)
            .bind(state)
            .bind(plan)
            .execute(&pool)
            .await
            .unwrap();
            if let Some(message) = message {
                sqlx::query(
                    "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, received_at, state) \
                     VALUES ('C1', $1, $2, 'U1', 'hi', 'then', $3)",
                )
                .bind(ts)
                .bind(ts)
                .bind(message)
                .execute(&pool)
                .await
                .unwrap();
            }
        }
        // Another thread's handled message does not count.
        sqlx::query(
            "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, received_at, state) \
             VALUES ('C2', '9.9', '1.1', 'U1', 'hi', 'then', 'processed')",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;

        let store = place.open().await;
        let mut found = Vec::new();
        for ts in ["1.1", "2.1", "3.1", "4.1", "5.1", "6.1"] {
            let record = store.thread_record(&key(ts)).await.unwrap().unwrap();
            assert_eq!(record.pull_request, None, "{ts}");
            found.push(record.stage);
        }
        assert_eq!(
            found,
            [
                Stage::Created,
                Stage::Created,
                Stage::Conversing,
                Stage::Created,
                Stage::PlanPending,
                Stage::Approved
            ]
        );
    }

    async fn an_opened_pull_request_is_stored_and_the_thread_is_pr_opened(store: &Store) {
        let (m, t) = (msg("1.1"), key("1.1"));
        let pr = |n: u64| PullRequestRef {
            number: n,
            url: format!("https://github.com/acme/app/pull/{n}"),
        };
        assert!(
            !store.record_pull_request(&t, &pr(7)).await.unwrap(),
            "no thread"
        );
        assert_eq!(store.thread_record(&t).await.unwrap(), None);
        store.record_message(&m).await.unwrap();
        store.set_plan(&t, PLAN).await.unwrap();
        assert!(store.approve_plan(&t, &m).await.unwrap().is_some());
        assert!(store.record_pull_request(&t, &pr(7)).await.unwrap());
        let record = store.thread_record(&t).await.unwrap().unwrap();
        assert_eq!(record.stage, Stage::PrOpened);
        assert_eq!(record.pull_request, Some(pr(7)));
        let listed = store.list_threads(|_| true, 10).await.unwrap();
        assert_eq!(
            (listed[0].stage, listed[0].pull_request.clone()),
            (Stage::PrOpened, Some(pr(7)))
        );
        // A closed thread keeps its stage and pull request.
        sqlx::query("UPDATE threads SET state = 'closed_merged'")
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(!store.record_pull_request(&t, &pr(8)).await.unwrap());
        let record = store.thread_record(&t).await.unwrap().unwrap();
        assert_eq!(
            (record.stage, record.pull_request),
            (Stage::Closed(crate::domain::Closure::Merged), Some(pr(7)))
        );
    }

    /// A thread is closed once: a second close records nothing, not even what it would say.
    async fn a_thread_is_closed_once(store: &Store) {
        use crate::domain::Closure;
        let (m, t) = (msg("1.1"), key("1.1"));
        store.record_message(&m).await.unwrap();
        let close = |closure| Change::Closed {
            thread: &t,
            closure,
        };
        assert!(store.commit(&[close(Closure::Done)], &[]).await.unwrap());
        assert_eq!(
            store.stored_thread(&t).await.unwrap().stage,
            Stage::Closed(Closure::Done)
        );
        let said = [crate::store::NewIntent {
            id: "close/0".into(),
            thread: t.clone(),
            body: r#"{"post":{"text":"closed again"}}"#.into(),
        }];
        let before = store.thread_effects(&t).await.unwrap().len();
        assert!(
            !store
                .commit(&[close(Closure::Merged), Change::Processed(&m)], &said)
                .await
                .unwrap()
        );
        assert_eq!(
            store.stored_thread(&t).await.unwrap().stage,
            Stage::Closed(Closure::Done)
        );
        assert_eq!(store.thread_effects(&t).await.unwrap().len(), before);
    }

    async fn listing_filters_by_stage_after_reading_them_all(store: &Store) {
        for ts in ["1.1", "2.1", "3.1"] {
            store.record_message(&msg(ts)).await.unwrap();
        }
        sqlx::query("UPDATE threads SET state = 'closed_abandoned' WHERE thread_ts <> '1.1'")
            .execute(&store.pool)
            .await
            .unwrap();
        let open = store.list_threads(|s| !s.is_closed(), 1).await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].key, key("1.1"));
        assert_eq!(store.list_threads(|_| true, 2).await.unwrap().len(), 2);
        sqlx::query("UPDATE threads SET state = 'limbo'")
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.list_threads(|_| true, 10).await,
            Err(StoreError::UnknownValue { value, .. }) if value == "limbo"
        ));
    }

    async fn an_unreadable_state_is_an_error(store: &Store) {
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
        sqlx::query("UPDATE threads SET pr_number = 7, pr_url = NULL")
            .execute(&store.pool)
            .await
            .unwrap();
        assert!(matches!(
            store.thread_record(&t).await,
            Err(StoreError::UnknownValue {
                column: "threads.pr_number and pr_url",
                ..
            })
        ));
    }

    crate::store::testing::on_both_backends!(
        the_stage_follows_proposals_approvals_and_withdrawals,
        an_opened_pull_request_is_stored_and_the_thread_is_pr_opened,
        a_thread_is_closed_once,
        listing_filters_by_stage_after_reading_them_all,
        an_unreadable_state_is_an_error,
    );

    crate::store::testing::on_both_places!(
        threads_stored_by_the_old_schema_get_their_stage,
        threads_stored_before_the_lifecycle_are_backfilled,
    );
}
