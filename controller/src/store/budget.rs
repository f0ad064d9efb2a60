//! Per-thread Coder budgets and the figures behind a plan's cost estimate: what a thread's
//! Coder has spent, and what earlier completed runs of this repository cost. (A typed budget
//! and a withdrawn plan are [`super::Change`]s, recorded with the reply that confirms them.)

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, now};

/// How many of the latest completed runs the estimate looks at.
const ESTIMATE_RUNS: i64 = 20;

impl Store {
    /// The thread's budget cap in USD (0: no cap), if one was set or approved.
    pub async fn thread_budget(&self, thread: &ThreadKey) -> Result<Option<f64>, StoreError> {
        let cap = sqlx::query_scalar::<_, f64>(
            "SELECT cap_usd FROM thread_budgets WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(cap)
    }

    /// Fixes the thread's cap at approval: keeps a typed one, else records `default_usd`.
    /// Returns the cap the Coder runs under.
    pub async fn approve_thread_budget(
        &self,
        thread: &ThreadKey,
        default_usd: f64,
        approved_by: &str,
    ) -> Result<f64, StoreError> {
        sqlx::query(
            "INSERT INTO thread_budgets (channel_id, thread_ts, cap_usd, set_by, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, thread_ts) DO NOTHING",
        )
        .bind_thread(thread)
        .bind(default_usd)
        .bind(approved_by)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(self.thread_budget(thread).await?.unwrap_or(default_usd))
    }

    /// What the thread's work has spent so far, in USD: the Coder over all its runs and the
    /// reviewer over all its reviews (from the usage recorded per model call).
    pub async fn thread_coder_cost(&self, thread: &ThreadKey) -> Result<f64, StoreError> {
        let spent = sqlx::query_scalar::<_, f64>(
            "SELECT COALESCE(SUM(cost), 0.0) AS spent FROM usage \
             WHERE channel_id = $1 AND thread_ts = $2 AND role IN ('coder', 'reviewer')",
        )
        .bind_thread(thread)
        .fetch_one(&self.pool)
        .await?;
        Ok(spent)
    }

    /// The costs of this repository's latest completed Coder runs, newest first.
    pub async fn completed_run_costs(&self) -> Result<Vec<f64>, StoreError> {
        let costs = sqlx::query_scalar::<_, f64>(
            "SELECT cost FROM runs WHERE state = 'finished' AND ending LIKE 'completed%' \
             ORDER BY created_at DESC LIMIT $1",
        )
        .bind(ESTIMATE_RUNS)
        .fetch_all(&self.pool)
        .await?;
        Ok(costs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::UsageRecord;
    use crate::store::Change;

    fn thread(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    async fn a_typed_budget_survives_approval_and_the_default_fills_in_otherwise(s: &Store) {
        let typed = thread("1.1");
        assert_eq!(s.thread_budget(&typed).await.unwrap(), None);
        for (cap_usd, user) in [(5.0, "U1"), (7.5, "U2")] {
            s.commit(
                &[Change::Budget {
                    thread: &typed,
                    cap_usd,
                    user,
                }],
                &[],
            )
            .await
            .unwrap();
        }
        assert_eq!(
            s.approve_thread_budget(&typed, 10.0, "U1").await.unwrap(),
            7.5
        );
        let plain = thread("2.2");
        assert_eq!(
            s.approve_thread_budget(&plain, 10.0, "U1").await.unwrap(),
            10.0
        );
        assert_eq!(s.thread_budget(&plain).await.unwrap(), Some(10.0));
    }

    async fn a_withdrawn_plan_is_no_longer_pending(s: &Store) {
        let t = thread("1.1");
        let msg = crate::domain::IncomingMessage {
            channel: "C1".into(),
            ts: "1.1".into(),
            thread_ts: "1.1".into(),
            user: "U1".into(),
            text: "hi".into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        };
        s.record_message(&msg).await.unwrap();
        s.set_plan(&t, "{}").await.unwrap();
        assert!(s.has_pending_plan(&t).await.unwrap());
        s.commit(&[Change::WithdrawPlan(&t)], &[]).await.unwrap();
        assert!(!s.has_pending_plan(&t).await.unwrap());
        assert_eq!(s.approve_plan(&t, &msg).await.unwrap(), None);
    }

    async fn coder_cost_counts_only_the_threads_coder_calls(s: &Store) {
        let call = |ts: &str, role: &str, cost: Option<f64>| UsageRecord {
            thread: thread(ts),
            role: role.into(),
            model: "m".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            cached_tokens: 0,
            cost,
            duration_ms: 10,
        };
        assert_eq!(s.thread_coder_cost(&thread("1.1")).await.unwrap(), 0.0);
        // A call without a cost first: on PostgreSQL it must not spoil the insert for the
        // calls with one (see `Store::record_usage`).
        for record in [
            call("1.1", "coder", None),
            call("1.1", "coder", Some(0.25)),
            call("1.1", "coder", Some(0.5)),
            call("1.1", "pm", Some(9.0)),
            call("2.2", "coder", Some(9.0)),
        ] {
            s.record_usage(&record).await.unwrap();
        }
        assert_eq!(s.thread_coder_cost(&thread("1.1")).await.unwrap(), 0.75);
    }

    crate::store::testing::on_both_backends!(
        a_typed_budget_survives_approval_and_the_default_fills_in_otherwise,
        a_withdrawn_plan_is_no_longer_pending,
        coder_cost_counts_only_the_threads_coder_calls,
    );
}
