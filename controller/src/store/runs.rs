//! Coder runs and their event logs: what `runnerctl` lists and follows, and what survives a
//! controller restart (runs that were running are marked interrupted).

use super::bind::BindThread;
use super::{Store, StoreError, ThreadRow, now, unknown_value};
use crate::domain::{RunRecord, RunState, ThreadKey};

const COLUMNS: &str = "id, channel_id, thread_ts, state, plan, model, worktree, branch, max_turns, turns, \
    prompt_tokens, completion_tokens, cost, ending, exit_code, runner_pid, created_at, started_at, ended_at";

/// A row of `runs` as [`COLUMNS`] reads it.
#[derive(sqlx::FromRow)]
struct RunRow {
    id: String,
    #[sqlx(flatten)]
    thread: ThreadRow,
    state: String,
    plan: String,
    model: String,
    worktree: String,
    branch: String,
    max_turns: i64,
    turns: i64,
    prompt_tokens: i64,
    completion_tokens: i64,
    cost: f64,
    ending: Option<String>,
    exit_code: Option<i64>,
    runner_pid: Option<i64>,
    created_at: String,
    started_at: Option<String>,
    ended_at: Option<String>,
}

impl TryFrom<RunRow> for RunRecord {
    type Error = StoreError;

    fn try_from(r: RunRow) -> Result<Self, StoreError> {
        let Some(state) = RunState::parse(&r.state) else {
            return Err(unknown_value("runs.state", &r.id, r.state));
        };
        Ok(Self {
            id: r.id,
            thread: r.thread.into(),
            state,
            plan: r.plan,
            model: r.model,
            worktree: r.worktree,
            branch: r.branch,
            max_turns: r.max_turns,
            turns: r.turns,
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            cost: r.cost,
            ending: r.ending,
            exit_code: r.exit_code,
            runner_pid: r.runner_pid,
            created_at: r.created_at,
            started_at: r.started_at,
            ended_at: r.ended_at,
        })
    }
}

/// Rows of `runs` as records.
fn records(rows: Vec<RunRow>) -> Result<Vec<RunRecord>, StoreError> {
    rows.into_iter().map(RunRecord::try_from).collect()
}

/// A run to record.
#[derive(Clone, Copy, Debug)]
pub struct NewRun<'a> {
    pub id: &'a str,
    pub thread: &'a ThreadKey,
    pub plan: &'a str,
    pub model: &'a str,
    pub worktree: &'a str,
    pub branch: &'a str,
    pub max_turns: i64,
}

impl Store {
    /// Records a new run (queued).
    pub async fn create_run(&self, run: NewRun<'_>) -> Result<RunRecord, StoreError> {
        let NewRun {
            id,
            thread,
            plan,
            model,
            worktree,
            branch,
            max_turns,
        } = run;
        let mut tx = self.begin_write().await?;
        let now = now();
        sqlx::query(
            "INSERT INTO threads (channel_id, thread_ts, created_at, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (channel_id, thread_ts) DO NOTHING",
        )
        .bind_thread(thread)
        .bind(&now)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO runs (id, channel_id, thread_ts, state, plan, model, worktree, branch, max_turns, created_at) \
             VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9)",
        )
        .bind(id)
        .bind_thread(thread)
        .bind(plan)
        .bind(model)
        .bind(worktree)
        .bind(branch)
        .bind(max_turns)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.run(id)
            .await?
            .ok_or(StoreError::Query(sqlx::Error::RowNotFound))
    }

    /// One run.
    pub async fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let row = sqlx::query_as::<_, RunRow>(&format!("SELECT {COLUMNS} FROM runs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(RunRecord::try_from).transpose()
    }

    /// The thread's latest run.
    pub async fn latest_run(&self, thread_ts: &str) -> Result<Option<RunRecord>, StoreError> {
        let row = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {COLUMNS} FROM runs WHERE thread_ts = $1 ORDER BY created_at DESC, id DESC LIMIT 1"
        ))
        .bind(thread_ts)
        .fetch_optional(&self.pool)
        .await?;
        row.map(RunRecord::try_from).transpose()
    }

    /// The run of `run`'s thread created just before it, if any.
    pub async fn run_before(&self, run: &RunRecord) -> Result<Option<RunRecord>, StoreError> {
        let row = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {COLUMNS} FROM runs WHERE channel_id = $1 AND thread_ts = $2 AND id <> $3 \
             AND created_at <= $4 ORDER BY created_at DESC, id DESC LIMIT 1"
        ))
        .bind_thread(&run.thread)
        .bind(&run.id)
        .bind(&run.created_at)
        .fetch_optional(&self.pool)
        .await?;
        row.map(RunRecord::try_from).transpose()
    }

    /// Runs, newest first.
    pub async fn list_runs(
        &self,
        active_only: bool,
        limit: i64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let filter = if active_only {
            "WHERE state IN ('queued', 'running')"
        } else {
            ""
        };
        let rows = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {COLUMNS} FROM runs {filter} ORDER BY created_at DESC, id DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        records(rows)
    }

    /// The thread's Coder runs, oldest first.
    pub async fn thread_runs(&self, thread: &ThreadKey) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {} FROM runs WHERE channel_id = $1 AND thread_ts = $2 ORDER BY created_at, id",
            COLUMNS
        ))
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        records(rows)
    }

    /// Marks a run running in the process `pid`.
    pub async fn run_started(&self, id: &str, pid: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE runs SET state = 'running', runner_pid = $1, started_at = $2 WHERE id = $3",
        )
        .bind(pid)
        .bind(now())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Appends an event (protobuf bytes) to a run's log; `turn` updates the turn count.
    pub async fn add_run_event(
        &self,
        id: &str,
        seq: i64,
        encoded: &[u8],
        turn: Option<i64>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO run_events (run_id, seq, body, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(seq)
        .bind(hex(encoded))
        .bind(now())
        .execute(&mut *tx)
        .await?;
        if let Some(turn) = turn {
            sqlx::query("UPDATE runs SET turns = $1 WHERE id = $2")
                .bind(turn)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A run's events from `from_seq` on, in order, as (seq, protobuf bytes).
    pub async fn run_events(
        &self,
        id: &str,
        from_seq: i64,
    ) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        let rows = sqlx::query_as::<_, (i64, String)>(
            "SELECT seq, body FROM run_events WHERE run_id = $1 AND seq >= $2 ORDER BY seq",
        )
        .bind(id)
        .bind(from_seq)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(seq, body)| match unhex(&body) {
                Some(bytes) => Ok((seq, bytes)),
                None => Err(StoreError::CorruptEvent {
                    run: id.to_string(),
                    seq,
                }),
            })
            .collect()
    }

    /// Adds a model call's usage to a run's totals.
    pub async fn add_run_usage(
        &self,
        id: &str,
        prompt_tokens: i64,
        completion_tokens: i64,
        cost: f64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE runs SET prompt_tokens = prompt_tokens + $1, completion_tokens = completion_tokens + $2, \
             cost = cost + $3 WHERE id = $4",
        )
        .bind(prompt_tokens)
        .bind(completion_tokens)
        .bind(cost)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records how a run ended.
    pub async fn finish_run(
        &self,
        id: &str,
        state: RunState,
        ending: &str,
        exit_code: Option<i64>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE runs SET state = $1, ending = $2, exit_code = $3, ended_at = $4 WHERE id = $5",
        )
        .bind(state.as_str())
        .bind(ending)
        .bind(exit_code)
        .bind(now())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every run's worktree path and branch: what the runs own on disk and in git.
    pub async fn run_worktrees(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query_as::<_, (String, String)>("SELECT worktree, branch FROM runs")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows)
    }

    /// Whether the run's end was reported in its thread (with its commits pushed to an open
    /// pull request, [`crate::coder`]); false for an unknown run.
    pub async fn run_reported(&self, id: &str) -> Result<bool, StoreError> {
        let reported: Option<i64> = sqlx::query_scalar(
            "SELECT CASE WHEN reported_at IS NULL THEN 0 ELSE 1 END FROM runs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(reported == Some(1))
    }

    /// Runs that ended without their end being reported in their thread, oldest first,
    /// leaving out the channel `except_channel` (runs started outside Slack).
    pub async fn unreported_runs(
        &self,
        except_channel: &str,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let rows = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {COLUMNS} FROM runs WHERE reported_at IS NULL \
             AND state NOT IN ('queued', 'running') AND channel_id <> $1 ORDER BY created_at"
        ))
        .bind(except_channel)
        .fetch_all(&self.pool)
        .await?;
        records(rows)
    }

    /// Marks the thread's queued or running runs interrupted: an instance of a shared store
    /// taking the thread from one that stopped (whose runs stopped with it). Returns them.
    pub async fn interrupt_unfinished_runs_of(
        &self,
        thread: &ThreadKey,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {COLUMNS} FROM runs WHERE state IN ('queued', 'running') \
             AND channel_id = $1 AND thread_ts = $2 ORDER BY created_at"
        ))
        .bind_thread(thread)
        .fetch_all(&mut *tx)
        .await?;
        let runs = records(rows)?;
        sqlx::query(
            "UPDATE runs SET state = 'interrupted', ending = 'the instance running it stopped', \
             ended_at = $1 WHERE state IN ('queued', 'running') AND channel_id = $2 AND thread_ts = $3",
        )
        .bind(now())
        .bind_thread(thread)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(runs)
    }

    /// At start: runs that were queued or running when the controller died are interrupted.
    /// Returns them, so their threads can be told.
    pub async fn interrupt_unfinished_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {COLUMNS} FROM runs WHERE state IN ('queued', 'running') ORDER BY created_at"
        ))
        .fetch_all(&mut *tx)
        .await?;
        // Decoded before the update commits: a row that cannot be read leaves them all as
        // they were, rather than interrupting runs whose threads would not be told.
        let runs = records(rows)?;
        sqlx::query(
            "UPDATE runs SET state = 'interrupted', ending = 'the controller stopped while it ran', \
             ended_at = $1 WHERE state IN ('queued', 'running')",
        )
        .bind(now())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(runs
            .into_iter()
            .map(|run| RunRecord {
                state: RunState::Interrupted,
                ending: Some("the controller stopped while it ran".into()),
                ..run
            })
            .collect())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::Place;

    fn new_run<'a>(id: &'a str, thread: &'a ThreadKey, max_turns: i64) -> NewRun<'a> {
        NewRun {
            id,
            thread,
            plan: "plan",
            model: "m",
            worktree: "/w",
            branch: "codebutler/x",
            max_turns,
        }
    }

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    async fn a_run_goes_from_queued_to_finished_with_its_events(s: &Store) {
        let run = s.create_run(new_run("r1", &thread(), 10)).await.unwrap();
        assert_eq!(run.state, RunState::Queued);
        s.run_started("r1", 42).await.unwrap();
        s.add_run_event("r1", 0, &[1, 2, 255], None).await.unwrap();
        s.add_run_event("r1", 1, &[], Some(3)).await.unwrap();
        s.add_run_usage("r1", 10, 5, 0.25).await.unwrap();
        s.add_run_usage("r1", 1, 1, 0.25).await.unwrap();
        assert_eq!(s.list_runs(true, 10).await.unwrap().len(), 1);
        s.finish_run("r1", RunState::Finished, "completed", Some(0))
            .await
            .unwrap();
        let run = s.run("r1").await.unwrap().unwrap();
        assert_eq!(
            (run.state, run.turns, run.prompt_tokens, run.cost),
            (RunState::Finished, 3, 11, 0.5)
        );
        assert_eq!(run.runner_pid, Some(42));
        assert_eq!(
            s.run_events("r1", 0).await.unwrap(),
            vec![(0, vec![1, 2, 255]), (1, vec![])]
        );
        assert_eq!(s.run_events("r1", 1).await.unwrap().len(), 1);
        assert!(s.list_runs(true, 10).await.unwrap().is_empty());
        assert_eq!(s.latest_run("1.1").await.unwrap().unwrap().id, "r1");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        let r2 = s.create_run(new_run("r2", &thread(), 10)).await.unwrap();
        assert_eq!(s.run_before(&r2).await.unwrap().unwrap().id, "r1");
        assert_eq!(s.run_before(&run).await.unwrap(), None);
    }

    async fn unfinished_runs_are_interrupted_at_start(s: &Store) {
        s.create_run(new_run("r1", &thread(), 1)).await.unwrap();
        s.create_run(new_run("r2", &thread(), 1)).await.unwrap();
        s.finish_run("r2", RunState::Cancelled, "cancelled", None)
            .await
            .unwrap();
        let interrupted = s.interrupt_unfinished_runs().await.unwrap();
        assert_eq!(interrupted.len(), 1);
        assert_eq!(
            (interrupted[0].id.as_str(), interrupted[0].state),
            ("r1", RunState::Interrupted)
        );
        assert_eq!(
            s.run("r1").await.unwrap().unwrap().state,
            RunState::Interrupted
        );
        assert_eq!(
            s.run("r2").await.unwrap().unwrap().state,
            RunState::Cancelled
        );
    }

    async fn ended_runs_wait_to_be_reported_once(s: &Store) {
        let cli = ThreadKey {
            channel: "runnerctl".into(),
            thread_ts: "cli-1".into(),
        };
        for (id, thread) in [("r1", thread()), ("r2", thread()), ("r3", cli)] {
            s.create_run(new_run(id, &thread, 1)).await.unwrap();
        }
        s.finish_run("r1", RunState::Finished, "completed", Some(0))
            .await
            .unwrap();
        s.finish_run("r3", RunState::Finished, "completed", Some(0))
            .await
            .unwrap();
        let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(s.unreported_runs("runnerctl").await.unwrap()),
            ["r1"],
            "r2 is still running; r3 has no Slack thread"
        );
        assert!(!s.run_reported("r1").await.unwrap());
        s.commit(&[crate::store::Change::RunReported("r1")], &[])
            .await
            .unwrap();
        assert!(s.unreported_runs("runnerctl").await.unwrap().is_empty());
        assert!(s.run_reported("r1").await.unwrap());
        assert!(!s.run_reported("no-such-run").await.unwrap());
        s.interrupt_unfinished_runs().await.unwrap();
        assert_eq!(ids(s.unreported_runs("runnerctl").await.unwrap()), ["r2"]);
    }

    async fn a_stored_row_this_controller_cannot_read_is_an_error_not_a_panic(place: &Place) {
        let s = place.open().await;
        s.create_run(new_run("r1", &thread(), 10)).await.unwrap();
        // A column of the wrong type, as a schema written by another version could leave it.
        // SQLite stores any value in any column; PostgreSQL needs the column changed, and
        // then a store opened afresh (a pool that prepared its queries against the old
        // column type refuses to run them: also an error, but not this one).
        let postgres = matches!(place, Place::Postgres { .. });
        let wrong_type: &[&str] = if postgres {
            &[
                "ALTER TABLE runs ALTER COLUMN turns TYPE TEXT",
                "UPDATE runs SET turns = 'many' WHERE id = 'r1'",
            ]
        } else {
            &["UPDATE runs SET turns = 'many' WHERE id = 'r1'"]
        };
        for statement in wrong_type {
            sqlx::query(statement).execute(&s.pool).await.unwrap();
        }
        s.close().await;
        let s = place.open().await;
        let err = s.run("r1").await.expect_err("a text turn count");
        assert!(err.to_string().contains("\"turns\""), "{err}");
        assert!(s.list_runs(false, 10).await.is_err());
        if postgres {
            sqlx::query("ALTER TABLE runs ALTER COLUMN turns TYPE INTEGER USING 0")
                .execute(&s.pool)
                .await
                .unwrap();
        }
        s.close().await;
        let s = place.open().await;
        // A state this controller does not know is an error too, never a guess.
        sqlx::query("UPDATE runs SET turns = 0, state = 'exploded' WHERE id = 'r1'")
            .execute(&s.pool)
            .await
            .unwrap();
        let err = s.run("r1").await.expect_err("an unknown run state");
        assert_eq!(
            err.to_string(),
            "stored runs.state of r1 is \"exploded\", which this controller does not know"
        );
        assert!(
            s.interrupt_unfinished_runs().await.is_ok(),
            "not queued or running"
        );
        assert!(s.unreported_runs("runnerctl").await.is_err());
        // An event log that is not hex is reported, not skipped.
        s.add_run_event("r1", 0, &[1], None).await.unwrap();
        sqlx::query("UPDATE run_events SET body = 'zz' WHERE run_id = 'r1'")
            .execute(&s.pool)
            .await
            .unwrap();
        let err = s.run_events("r1", 0).await.expect_err("a corrupt event");
        assert_eq!(err.to_string(), "stored event 0 of run r1 is not hex");
    }

    async fn a_taken_threads_unfinished_runs_are_interrupted_and_no_others(s: &Store) {
        let other = ThreadKey {
            channel: "C1".into(),
            thread_ts: "2.1".into(),
        };
        s.create_run(new_run("mine", &thread(), 1)).await.unwrap();
        s.create_run(new_run("other", &other, 1)).await.unwrap();
        let interrupted = s.interrupt_unfinished_runs_of(&thread()).await.unwrap();
        assert_eq!(
            interrupted
                .iter()
                .map(|r| r.id.as_str())
                .collect::<Vec<_>>(),
            ["mine"]
        );
        assert_eq!(
            s.run("mine").await.unwrap().unwrap().state,
            RunState::Interrupted
        );
        // Another thread's run (another instance's, still running) is left alone.
        assert_eq!(
            s.run("other").await.unwrap().unwrap().state,
            RunState::Queued
        );
        assert!(
            s.interrupt_unfinished_runs_of(&thread())
                .await
                .unwrap()
                .is_empty()
        );
    }

    crate::store::testing::on_both_backends!(
        a_run_goes_from_queued_to_finished_with_its_events,
        unfinished_runs_are_interrupted_at_start,
        a_taken_threads_unfinished_runs_are_interrupted_and_no_others,
        ended_runs_wait_to_be_reported_once,
    );

    crate::store::testing::on_both_places!(
        a_stored_row_this_controller_cannot_read_is_an_error_not_a_panic
    );
}
