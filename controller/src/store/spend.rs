//! What was spent, and by whom, for the caps that hold across threads and hosts
//! (`access.maxCostPerDay`, `access.maxCostPerUserPerDay`, the hourly Coder calls per person):
//! read from the store at the moment of the check, so every instance on a shared
//! PostgreSQL store sees the same figures.
//!
//! A run's spend is its starter's: the person whose message started it (an approval, a
//! follow-up, a review round's *yes*), which is the latest message of its thread marked as
//! starting a run at or before the run was created. Runs of one thread never overlap, so a
//! Coder model call belongs to the latest run of its thread created before it. Runs
//! `runnerctl` started have no starter. The calls made for one person alone (an image they
//! said "draw it" to, a voice note they sent) are theirs too: their usage rows name them
//! ([`Store::record_usage_for`]).

use super::{Store, StoreError};

/// The starter of run `r` (a row of `runs` in the enclosing query), as a SQL expression.
const STARTER: &str = "(SELECT m.user_id FROM messages m \
     WHERE m.channel_id = r.channel_id AND m.thread_ts = r.thread_ts \
     AND m.run_start IS NOT NULL AND m.run_start_at <= r.created_at \
     ORDER BY m.run_start_at DESC LIMIT 1)";

impl Store {
    /// What every model call of the repository cost since `since` (RFC 3339, UTC), in USD.
    pub async fn spend_since(&self, since: &str) -> Result<f64, StoreError> {
        let spent = sqlx::query_scalar::<_, f64>(
            "SELECT COALESCE(SUM(cost), 0.0) AS spent FROM usage WHERE created_at >= $1",
        )
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(spent)
    }

    /// What `person` spent since `since`, in USD: the Coder runs they started, and the calls
    /// made for them alone (images, transcriptions).
    pub async fn person_spend_since(&self, person: &str, since: &str) -> Result<f64, StoreError> {
        let query = format!(
            "SELECT COALESCE(SUM(r.cost), 0.0) AS spent FROM runs r \
             WHERE r.created_at >= $1 AND {STARTER} = $2"
        );
        let runs = sqlx::query_scalar::<_, f64>(&query)
            .bind(since)
            .bind(person)
            .fetch_one(&self.pool)
            .await?;
        let asked = sqlx::query_scalar::<_, f64>(
            "SELECT COALESCE(SUM(cost), 0.0) AS spent FROM usage \
             WHERE person = $1 AND created_at >= $2",
        )
        .bind(person)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(runs + asked)
    }

    /// What the latest call of `role` with `model` that has a cost cost, in USD.
    pub async fn last_cost(&self, role: &str, model: &str) -> Result<Option<f64>, StoreError> {
        let cost = sqlx::query_scalar::<_, f64>(
            "SELECT cost FROM usage WHERE role = $1 AND model = $2 AND cost IS NOT NULL \
             ORDER BY created_at DESC LIMIT 1",
        )
        .bind(role)
        .bind(model)
        .fetch_optional(&self.pool)
        .await?;
        Ok(cost)
    }

    /// Who started run `run_id`, if a person did.
    pub async fn run_starter(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let query = format!("SELECT {STARTER} AS person FROM runs r WHERE r.id = $1");
        let person = sqlx::query_scalar::<_, Option<String>>(&query)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(person.flatten())
    }

    /// The Coder model calls made since `since` by the runs `person` started: how many, and
    /// when the earliest of them was made.
    pub async fn person_coder_calls_since(
        &self,
        person: &str,
        since: &str,
    ) -> Result<(i64, Option<String>), StoreError> {
        let query = format!(
            "SELECT COUNT(*) AS n, MIN(u.created_at) AS earliest FROM usage u JOIN runs r \
             ON r.id = (SELECT l.id FROM runs l WHERE l.channel_id = u.channel_id \
             AND l.thread_ts = u.thread_ts AND l.created_at <= u.created_at \
             ORDER BY l.created_at DESC LIMIT 1) \
             WHERE u.role = 'coder' AND u.created_at > $1 AND {STARTER} = $2"
        );
        let row = sqlx::query_as::<_, CallsRow>(&query)
            .bind(since)
            .bind(person)
            .fetch_one(&self.pool)
            .await?;
        Ok((row.n, row.earliest))
    }
}

#[derive(sqlx::FromRow)]
struct CallsRow {
    n: i64,
    earliest: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IncomingMessage, Origin, ThreadKey, UsageRecord};
    use crate::store::NewRun;
    use crate::store::starts::RunStart;

    fn thread(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    /// `user`'s message `ts` in thread `thread_ts`, stored and marked as starting a run.
    async fn start_by(s: &Store, thread_ts: &str, ts: &str, user: &str) {
        let msg = IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: thread_ts.into(),
            user: user.into(),
            text: "yes".into(),
            event_id: None,
            origin: Origin::Person,
        };
        s.record_message(&msg).await.unwrap();
        s.mark_run_start(&msg, RunStart::FollowUp).await.unwrap();
    }

    async fn run(s: &Store, id: &str, thread_ts: &str, cost: f64) {
        s.create_run(NewRun {
            id,
            thread: &thread(thread_ts),
            plan: "p",
            model: "m",
            worktree: "w",
            branch: "b",
            max_turns: 1,
        })
        .await
        .unwrap();
        s.add_run_usage(id, 1, 1, cost).await.unwrap();
        s.record_usage(&UsageRecord {
            thread: thread(thread_ts),
            role: "coder".into(),
            model: "m".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            cached_tokens: 0,
            cost: Some(cost),
            duration_ms: 1,
        })
        .await
        .unwrap();
    }

    /// Each run's spend and calls are its starter's: the person whose message, marked as
    /// starting a run, came last before it in its thread; a call made for one person alone
    /// is theirs; the repository's spend is every call's.
    async fn spend_is_the_starters_and_the_repositorys(s: &Store) {
        let day = "2000-01-01T00:00:00.000000Z";
        start_by(s, "1.1", "1.2", "U1").await;
        run(s, "r1", "1.1", 0.25).await;
        start_by(s, "1.1", "1.3", "U2").await;
        run(s, "r2", "1.1", 0.5).await;
        start_by(s, "2.1", "2.2", "U1").await;
        run(s, "r3", "2.1", 1.0).await;
        // An image U2 had drawn and a voice note U3 sent are theirs; the PM's call is no one's.
        let asked = |role: &str, cost: f64| UsageRecord {
            thread: thread("1.1"),
            role: role.into(),
            model: "m".into(),
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            cost: Some(cost),
            duration_ms: 1,
        };
        s.record_usage_for(&asked("artist", 0.125), "U2")
            .await
            .unwrap();
        s.record_usage_for(&asked("transcription", 0.0625), "U3")
            .await
            .unwrap();
        s.record_usage(&asked("pm", 2.0)).await.unwrap();
        assert_eq!(s.person_spend_since("U1", day).await.unwrap(), 1.25);
        assert_eq!(s.person_spend_since("U2", day).await.unwrap(), 0.625);
        assert_eq!(s.person_spend_since("U3", day).await.unwrap(), 0.0625);
        assert_eq!(s.spend_since(day).await.unwrap(), 3.9375);
        assert_eq!(s.person_spend_since("U4", day).await.unwrap(), 0.0);
        assert_eq!(s.last_cost("artist", "m").await.unwrap(), Some(0.125));
        assert_eq!(s.last_cost("artist", "other").await.unwrap(), None);
        assert_eq!(s.spend_since("2999-01-01T00:00:00Z").await.unwrap(), 0.0);
        assert_eq!(s.run_starter("r2").await.unwrap().as_deref(), Some("U2"));
        assert_eq!(s.run_starter("nope").await.unwrap(), None);
        let (calls, earliest) = s.person_coder_calls_since("U1", day).await.unwrap();
        assert_eq!(calls, 2);
        assert!(earliest.is_some());
        assert_eq!(
            s.person_coder_calls_since("U4", day).await.unwrap(),
            (0, None)
        );
    }

    crate::store::testing::on_both_backends!(spend_is_the_starters_and_the_repositorys,);
}
