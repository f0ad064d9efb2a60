//! The dashboard's reads: the threads with who started them, their pull request and cost,
//! and the spend grouped by day, model, role and person. Who started a thread is the
//! author of its first message — the stored message whose `ts` is the thread's.

use crate::domain::{SpendRow, Stage, ThreadKey, ThreadOverview, ThreadSpend};

use super::thread_state::pull_request;
use super::{Store, StoreError, unknown_value};

/// A row of [`Store::thread_overviews`]'s query.
#[derive(sqlx::FromRow)]
struct OverviewRow {
    channel_id: String,
    thread_ts: String,
    state: String,
    pr_number: Option<i64>,
    pr_url: Option<String>,
    created_at: String,
    updated_at: String,
    user_id: Option<String>,
    text: Option<String>,
    cost: f64,
}

/// A row of [`Store::spend`]'s query.
#[derive(sqlx::FromRow)]
struct SpendQueryRow {
    day: String,
    model: String,
    role: String,
    person: String,
    calls: i64,
    tokens: i64,
    cost: f64,
}

/// Bounds every stored time (RFC 3339, UTC) falls between.
const EARLIEST: &str = "0000";
const LATEST: &str = "9999";

/// A row of [`Store::costliest_threads`]'s query.
#[derive(sqlx::FromRow)]
struct ThreadSpendRow {
    channel_id: String,
    thread_ts: String,
    user_id: Option<String>,
    text: Option<String>,
    calls: i64,
    cost: f64,
}

impl Store {
    /// The `limit` threads whose model calls from `from` (inclusive) to `to` (exclusive,
    /// both RFC 3339 in UTC) cost the most, most first.
    pub async fn costliest_threads(
        &self,
        from: &str,
        to: &str,
        limit: i64,
    ) -> Result<Vec<ThreadSpend>, StoreError> {
        let rows = sqlx::query_as::<_, ThreadSpendRow>(
            "SELECT u.channel_id, u.thread_ts, MAX(m.user_id) AS user_id, MAX(m.text) AS text, \
             COUNT(*) AS calls, COALESCE(SUM(u.cost), 0.0) AS cost \
             FROM usage u LEFT JOIN messages m \
               ON m.channel_id = u.channel_id AND m.ts = u.thread_ts \
             WHERE u.created_at >= $1 AND u.created_at < $2 \
             GROUP BY u.channel_id, u.thread_ts \
             ORDER BY cost DESC, u.thread_ts LIMIT $3",
        )
        .bind(from)
        .bind(to)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ThreadSpend {
                key: ThreadKey {
                    channel: r.channel_id,
                    thread_ts: r.thread_ts,
                },
                started_by: r.user_id,
                first_message: r.text,
                calls: r.calls,
                cost: r.cost,
            })
            .collect())
    }

    /// The most recently changed threads, newest first, at most `limit`.
    pub async fn thread_overviews(&self, limit: i64) -> Result<Vec<ThreadOverview>, StoreError> {
        let rows = sqlx::query_as::<_, OverviewRow>(
            "SELECT t.channel_id, t.thread_ts, t.state, t.pr_number, t.pr_url, t.created_at, \
             t.updated_at, m.user_id, m.text, \
             COALESCE((SELECT SUM(u.cost) FROM usage u \
               WHERE u.channel_id = t.channel_id AND u.thread_ts = t.thread_ts), 0.0) AS cost \
             FROM threads t LEFT JOIN messages m \
               ON m.channel_id = t.channel_id AND m.ts = t.thread_ts \
             ORDER BY t.updated_at DESC, t.thread_ts DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                let key = ThreadKey {
                    channel: r.channel_id,
                    thread_ts: r.thread_ts,
                };
                let stage = Stage::parse(&r.state)
                    .ok_or_else(|| unknown_value("threads.state", &key, r.state.clone()))?;
                let pull_request = pull_request(&key, r.pr_number, r.pr_url)?;
                Ok(ThreadOverview {
                    key,
                    stage,
                    started_by: r.user_id,
                    first_message: r.text,
                    pull_request,
                    cost: r.cost,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                })
            })
            .collect()
    }

    /// Every model call, summed by day (UTC), model, role and the person who started the
    /// call's thread.
    pub async fn spend(&self) -> Result<Vec<SpendRow>, StoreError> {
        self.spend_between(EARLIEST, LATEST).await
    }

    /// Like [`Self::spend`], for the calls made from `from` (inclusive) to `to` (exclusive),
    /// both RFC 3339 in UTC.
    pub async fn spend_between(&self, from: &str, to: &str) -> Result<Vec<SpendRow>, StoreError> {
        let rows = sqlx::query_as::<_, SpendQueryRow>(
            "SELECT SUBSTR(u.created_at, 1, 10) AS day, u.model, u.role, \
             COALESCE(m.user_id, '') AS person, COUNT(*) AS calls, \
             CAST(COALESCE(SUM(u.prompt_tokens + u.completion_tokens), 0) AS BIGINT) AS tokens, \
             COALESCE(SUM(u.cost), 0.0) AS cost \
             FROM usage u LEFT JOIN messages m \
               ON m.channel_id = u.channel_id AND m.ts = u.thread_ts \
             WHERE u.created_at >= $1 AND u.created_at < $2 \
             GROUP BY SUBSTR(u.created_at, 1, 10), u.model, u.role, COALESCE(m.user_id, '') \
             ORDER BY day, u.model, u.role, person",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| SpendRow {
                day: r.day,
                model: r.model,
                role: r.role,
                person: (!r.person.is_empty()).then_some(r.person),
                calls: r.calls,
                tokens: r.tokens,
                cost: r.cost,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IncomingMessage, Origin, UsageRecord};

    fn message(ts: &str, thread_ts: &str, user: &str, text: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: thread_ts.into(),
            user: user.into(),
            text: text.into(),
            event_id: None,
            origin: Origin::Person,
        }
    }

    fn call(thread_ts: &str, role: &str, model: &str, cost: Option<f64>) -> UsageRecord {
        UsageRecord {
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: thread_ts.into(),
            },
            role: role.into(),
            model: model.into(),
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_tokens: 0,
            cost,
            duration_ms: 5,
        }
    }

    async fn threads_carry_their_starter_title_and_cost(s: &Store) {
        s.record_message(&message("1.1", "1.1", "U_ALICE", "fix the login\nmore"))
            .await
            .unwrap();
        // A reply by someone else does not make them the starter.
        s.record_message(&message("1.2", "1.1", "U_BOB", "and the logout"))
            .await
            .unwrap();
        s.record_message(&message("2.1", "2.1", "U_BOB", "add a page"))
            .await
            .unwrap();
        for record in [
            call("1.1", "pm", "m/cheap", Some(0.25)),
            call("1.1", "coder", "m/big", Some(1.5)),
            call("1.1", "coder", "m/big", None),
            call("2.1", "pm", "m/cheap", Some(0.125)),
        ] {
            s.record_usage(&record).await.unwrap();
        }
        let threads = s.thread_overviews(10).await.unwrap();
        assert_eq!(threads.len(), 2);
        let first = threads.iter().find(|t| t.key.thread_ts == "1.1").unwrap();
        assert_eq!(first.started_by.as_deref(), Some("U_ALICE"));
        assert_eq!(first.first_message.as_deref(), Some("fix the login\nmore"));
        assert_eq!(first.cost, 1.75);
        assert_eq!(first.stage, Stage::Created);
        assert_eq!(s.thread_overviews(1).await.unwrap().len(), 1);

        let week = s.spend_between("2000-01-01", "9999").await.unwrap();
        assert_eq!(week.len(), s.spend().await.unwrap().len());
        assert!(
            s.spend_between("2000-01-01", "2000-01-08")
                .await
                .unwrap()
                .is_empty()
        );
        let costliest = s.costliest_threads("0000", "9999", 1).await.unwrap();
        assert_eq!(costliest.len(), 1);
        assert_eq!(costliest[0].key.thread_ts, "1.1");
        assert_eq!(costliest[0].started_by.as_deref(), Some("U_ALICE"));
        assert_eq!((costliest[0].calls, costliest[0].cost), (3, 1.75));
        let spend = s.spend().await.unwrap();
        let total: f64 = spend.iter().map(|r| r.cost).sum();
        assert_eq!(total, 1.875);
        let calls: i64 = spend.iter().map(|r| r.calls).sum();
        assert_eq!(calls, 4);
        let alice_big = spend
            .iter()
            .find(|r| r.model == "m/big" && r.person.as_deref() == Some("U_ALICE"))
            .unwrap();
        assert_eq!(
            (alice_big.calls, alice_big.cost, alice_big.tokens),
            (2, 1.5, 240)
        );
        assert_eq!(alice_big.role, "coder");
        assert_eq!(alice_big.day.len(), 10);
        assert!(
            spend
                .iter()
                .any(|r| r.person.as_deref() == Some("U_BOB") && r.cost == 0.125)
        );
    }

    async fn calls_of_a_thread_whose_first_message_is_unknown_have_no_person(s: &Store) {
        s.record_usage(&call("9.9", "pm", "m/cheap", Some(0.5)))
            .await
            .unwrap();
        let spend = s.spend().await.unwrap();
        assert_eq!(spend.len(), 1);
        assert_eq!(spend[0].person, None);
    }

    crate::store::testing::on_both_backends!(
        threads_carry_their_starter_title_and_cost,
        calls_of_a_thread_whose_first_message_is_unknown_have_no_person,
    );
}
