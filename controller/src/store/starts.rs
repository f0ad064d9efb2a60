//! Messages that start Coder runs. Starting a run takes a while (fetch, worktree, runner) and
//! the message stays pending until its run is recorded and announced; the mark made when
//! the start began tells, after a crash, that the message was cut off mid-start rather than
//! never handled: re-handling it would find its plan already taken.

use sqlx::AnyConnection;

use super::{IncomingMessage, MessageRow, Store, StoreError, now, unknown_value};

/// What a message started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStart {
    /// The approval of the thread's plan.
    Approval,
    /// A new run going on from the thread's last one.
    FollowUp,
}

impl RunStart {
    fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::FollowUp => "follow_up",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Approval, Self::FollowUp]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// A pending message with its start, as [`Store::cut_off_starts`] reads it.
#[derive(sqlx::FromRow)]
struct CutOffRow {
    #[sqlx(flatten)]
    msg: MessageRow,
    run_start: String,
    run_id: Option<String>,
}

impl TryFrom<CutOffRow> for CutOffStart {
    type Error = StoreError;

    fn try_from(r: CutOffRow) -> Result<Self, StoreError> {
        let Some(kind) = RunStart::parse(&r.run_start) else {
            return Err(unknown_value("messages.run_start", &r.msg.ts, r.run_start));
        };
        Ok(Self {
            msg: r.msg.try_into()?,
            kind,
            run_id: r.run_id,
        })
    }
}

/// A message still pending whose run start began before the last stop.
#[derive(Clone, Debug, PartialEq)]
pub struct CutOffStart {
    pub msg: IncomingMessage,
    pub kind: RunStart,
    /// The id of the run recorded for it, if the start got that far.
    pub run_id: Option<String>,
}

/// Marks `msg` as starting a run of `kind`, now.
pub(super) async fn mark(
    conn: &mut AnyConnection,
    msg: &IncomingMessage,
    kind: RunStart,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE messages SET run_start = $1, run_start_at = $2 WHERE channel_id = $3 AND ts = $4",
    )
    .bind(kind.as_str())
    .bind(now())
    .bind(&msg.channel)
    .bind(&msg.ts)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

impl Store {
    /// Marks `msg` as starting a run of `kind` (see [`Store::approve_plan`] for approvals).
    pub async fn mark_run_start(
        &self,
        msg: &IncomingMessage,
        kind: RunStart,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        mark(&mut conn, msg, kind).await
    }

    /// Pending messages whose run start began (at start-up: cut off by the last stop), each
    /// with the run recorded for it since, if any. A thread handles one message at a time,
    /// so a run of its thread created after the start began is that start's run.
    pub async fn cut_off_starts(&self) -> Result<Vec<CutOffStart>, StoreError> {
        let rows = sqlx::query_as::<_, CutOffRow>(
            "SELECT m.channel_id, m.ts, m.thread_ts, m.user_id, m.text, m.event_id, m.origin, m.run_start, \
             (SELECT r.id FROM runs r WHERE r.channel_id = m.channel_id AND r.thread_ts = m.thread_ts \
              AND r.created_at >= m.run_start_at ORDER BY r.created_at LIMIT 1) AS run_id \
             FROM messages m WHERE m.state = 'pending' AND m.run_start IS NOT NULL ORDER BY m.ts",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(CutOffStart::try_from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ThreadKey;
    use crate::store::{Change, NewRun};

    fn msg(ts: &str) -> IncomingMessage {
        crate::store::testing::message("1.1", ts, "yes")
    }

    async fn a_start_cut_off_is_found_with_the_run_it_got_to(s: &Store) {
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        let old_run = NewRun {
            id: "before",
            thread: &thread,
            plan: "p",
            model: "m",
            worktree: "/w",
            branch: "codebutler/x",
            max_turns: 5,
        };
        s.create_run(old_run).await.unwrap();
        let (approval, follow_up, done) = (msg("1.2"), msg("1.3"), msg("1.4"));
        for m in [&approval, &follow_up, &done] {
            s.record_message(m).await.unwrap();
        }
        s.set_plan(&thread, "{}").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        assert!(s.approve_plan(&thread, &approval).await.unwrap().is_some());
        assert_eq!(
            s.cut_off_starts().await.unwrap(),
            [CutOffStart {
                msg: approval.clone(),
                kind: RunStart::Approval,
                run_id: None,
            }],
            "an earlier run of the thread is not this start's"
        );
        s.create_run(NewRun {
            id: "after",
            ..old_run
        })
        .await
        .unwrap();
        s.mark_run_start(&follow_up, RunStart::FollowUp)
            .await
            .unwrap();
        s.mark_run_start(&done, RunStart::FollowUp).await.unwrap();
        s.commit(&[Change::Processed(&done)], &[]).await.unwrap();
        let found = s.cut_off_starts().await.unwrap();
        assert_eq!(found.len(), 2, "a processed message is no cut-off start");
        assert_eq!(found[0].run_id.as_deref(), Some("after"));
        assert_eq!(
            (found[1].kind, found[1].run_id.as_deref()),
            (RunStart::FollowUp, None)
        );
    }

    async fn an_unknown_stored_start_is_an_error_not_an_approval(s: &Store) {
        let m = msg("1.2");
        s.record_message(&m).await.unwrap();
        s.mark_run_start(&m, RunStart::FollowUp).await.unwrap();
        sqlx::query("UPDATE messages SET run_start = 'rerun'")
            .execute(&s.pool)
            .await
            .unwrap();
        let err = s.cut_off_starts().await.expect_err("an unknown start");
        assert_eq!(
            err.to_string(),
            "stored messages.run_start of 1.2 is \"rerun\", which this controller does not know"
        );
    }

    crate::store::testing::on_both_backends!(
        a_start_cut_off_is_found_with_the_run_it_got_to,
        an_unknown_stored_start_is_an_error_not_an_approval,
    );
}
