//! One transaction for what handling a message changes and the Slack effects that report
//! it: a PM turn and its answer, a budget and its confirmation, a run's end and its summary.
//! Either all of it is recorded or none, so a crash can neither post an answer twice (the
//! message is still pending, nothing is in the outbox) nor lose one (the message is
//! processed and its answer waits in the outbox).

use codebutler_agent::conversation::ChatMessage;
use sqlx::AnyConnection;

use super::bind::BindThread;
use super::outbox::{NewIntent, enqueue};
use super::{IncomingMessage, Store, StoreError, ThreadKey, now};
use crate::domain::{Closure, Conversation, FileState, Stage};

/// A change recorded by [`Store::commit`].
#[derive(Clone, Copy, Debug)]
pub enum Change<'a> {
    /// The message is handled.
    Processed(&'a IncomingMessage),
    /// Handling the message failed; it is retried later (up to [`super::MAX_ATTEMPTS`]).
    Failed(&'a IncomingMessage),
    /// A turn appended to `role`'s conversation in the thread.
    Turn {
        thread: &'a ThreadKey,
        role: &'a str,
        messages: &'a [ChatMessage],
    },
    /// "budget $N": the thread's cap, set by `user`.
    Budget {
        thread: &'a ThreadKey,
        cap_usd: f64,
        user: &'a str,
    },
    /// `/codebutler pm <model>`: the thread's PM answers with `model` from now on, chosen by
    /// `user`.
    PmModel {
        thread: &'a ThreadKey,
        model: &'a str,
        user: &'a str,
    },
    /// The bot asks which repository the conversation is about. Only once: if it asked
    /// already, [`Store::commit`] records nothing and returns false.
    ConversationAsked(&'a Conversation),
    /// The conversation is about `repository` from now on, as `user` said. Only if that
    /// changes it: if it was about `repository` already, [`Store::commit`] records nothing
    /// and returns false (a second delivery of the answer confirms nothing twice).
    ConversationChosen {
        conversation: &'a Conversation,
        repository: &'a str,
        user: &'a str,
    },
    /// The thread's pending plan is withdrawn (its Cancel button).
    WithdrawPlan(&'a ThreadKey),
    /// The thread's plan waits for approval again (its run could not start).
    PlanPending(&'a ThreadKey),
    /// A plan the controller proposes itself (resolving a merge's conflicts), waiting for
    /// approval like the PM's: stored with the message that shows it.
    ProposePlan {
        thread: &'a ThreadKey,
        plan_json: &'a str,
    },
    /// The thread goes back to its runs after a plan of its branch's own (a merge's
    /// resolution) was approved or withdrawn: `pr_opened` when it has a pull request, else
    /// `approved`.
    BackToRuns(&'a ThreadKey),
    /// "undo": the restored checkpoint is dropped and the thread's latest run, if any, is
    /// resumed from `conversation` next.
    Undone {
        checkpoint_run: &'a str,
        latest_run: Option<&'a str>,
        conversation: &'a str,
    },
    /// The run's end is reported. Only once: if it was reported already, [`Store::commit`]
    /// records nothing and returns false.
    RunReported(&'a str),
    /// `msg`'s voice notes heard: its text is `text` from now on, and each file at a
    /// position in `files` is in the state given.
    Heard {
        msg: &'a IncomingMessage,
        text: &'a str,
        files: &'a [(u32, FileState)],
    },
    /// The thread's `step` is done. Only once: if it was done already, [`Store::commit`]
    /// records nothing and returns false, so what the step says is never said twice.
    StepDone {
        thread: &'a ThreadKey,
        step: &'a str,
    },
    /// The thread is closed, as `closure` says.
    Closed {
        thread: &'a ThreadKey,
        closure: Closure,
    },
    /// A memory proposal made, edited or settled; guarded like [`Change::RunReported`].
    Memory(super::MemoryChange<'a>),
    /// A review round sorted, approved or declined; guarded like [`Change::RunReported`].
    Review(super::reviews::ReviewChange<'a>),
    /// How the reviewer's review of a head ended; guarded like [`Change::RunReported`].
    Reviewer(super::reviews::ReviewerChange<'a>),
    /// Coordination between threads: a thread's changed files, a notice given once, the
    /// channel's merge order (see [`super::ScopeChange`] for the guards).
    Scope(super::ScopeChange<'a>),
    /// The Artist's drawings: proposed, drawn, used or cancelled; guarded like
    /// [`Change::RunReported`] by the stage each leaves.
    Drawing(super::DrawingChange<'a>),
    /// A guard for instances sharing a store: `owner` holds `thread`'s lease, unexpired. If
    /// not (another instance took the thread over), [`Store::commit`] records nothing and
    /// returns false. Put it first.
    LeaseHeld {
        thread: &'a ThreadKey,
        owner: &'a str,
    },
}

impl Store {
    /// Records `changes` and appends `intents` to the outbox, in one transaction. Returns
    /// false, recording nothing, when a [`Change::RunReported`] finds the run reported.
    pub async fn commit(
        &self,
        changes: &[Change<'_>],
        intents: &[NewIntent],
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        for change in changes {
            if !apply(&mut tx, change, self.backend.now_ms()).await? {
                tx.rollback().await?;
                return Ok(false);
            }
        }
        enqueue(&mut tx, intents).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Applies one change; false when a guard says the whole commit must not happen.
async fn apply(
    conn: &mut AnyConnection,
    change: &Change<'_>,
    db_now: &str,
) -> Result<bool, StoreError> {
    let now = now();
    match *change {
        Change::Processed(msg) => {
            sqlx::query(
                "UPDATE messages SET state = 'processed', processed_at = $1, attempts = attempts + 1 \
                 WHERE channel_id = $2 AND ts = $3",
            )
            .bind(&now)
            .bind(&msg.channel)
            .bind(&msg.ts)
            .execute(&mut *conn)
            .await?;
            // A thread with a message handled is past `created`.
            sqlx::query(
                "UPDATE threads SET state = 'conversing', updated_at = $1 \
                 WHERE channel_id = $2 AND thread_ts = $3 AND state = 'created'",
            )
            .bind(&now)
            .bind_thread(&msg.thread())
            .execute(&mut *conn)
            .await?;
        }
        Change::Heard { msg, text, files } => {
            super::files::set_text(conn, msg, text).await?;
            for (position, state) in files {
                super::files::set_state(conn, msg, *position, state).await?;
            }
        }
        Change::Failed(msg) => {
            sqlx::query(
                "UPDATE messages SET state = 'failed', attempts = attempts + 1 \
                 WHERE channel_id = $1 AND ts = $2",
            )
            .bind(&msg.channel)
            .bind(&msg.ts)
            .execute(&mut *conn)
            .await?;
        }
        Change::Turn {
            thread,
            role,
            messages,
        } => append_turn(conn, thread, role, messages, &now).await?,
        Change::Budget {
            thread,
            cap_usd,
            user,
        } => {
            sqlx::query(
                "INSERT INTO thread_budgets (channel_id, thread_ts, cap_usd, set_by, updated_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, thread_ts) \
                 DO UPDATE SET cap_usd = excluded.cap_usd, set_by = excluded.set_by, updated_at = excluded.updated_at",
            )
            .bind_thread(thread)
            .bind(cap_usd)
            .bind(user)
            .bind(&now)
            .execute(&mut *conn)
            .await?;
        }
        Change::PmModel {
            thread,
            model,
            user,
        } => {
            sqlx::query(
                "UPDATE threads SET pm_model = $1, pm_model_set_by = $2, updated_at = $3 \
                 WHERE channel_id = $4 AND thread_ts = $5",
            )
            .bind(model)
            .bind(user)
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?;
        }
        Change::ConversationAsked(conversation) => {
            let asked = sqlx::query(
                "INSERT INTO conversation_choices (channel_id, thread_ts, updated_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (channel_id, thread_ts) DO NOTHING",
            )
            .bind(conversation.channel())
            .bind(conversation.thread_ts())
            .bind(&now)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            if asked == 0 {
                return Ok(false);
            }
        }
        Change::ConversationChosen {
            conversation,
            repository,
            user,
        } => {
            let chosen = sqlx::query(
                "INSERT INTO conversation_choices \
                 (channel_id, thread_ts, repository, chosen_by, updated_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, thread_ts) DO UPDATE SET \
                 repository = excluded.repository, chosen_by = excluded.chosen_by, \
                 updated_at = excluded.updated_at \
                 WHERE conversation_choices.repository IS NULL \
                 OR conversation_choices.repository <> excluded.repository",
            )
            .bind(conversation.channel())
            .bind(conversation.thread_ts())
            .bind(repository)
            .bind(user)
            .bind(&now)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            if chosen == 0 {
                return Ok(false);
            }
        }
        Change::WithdrawPlan(thread) => {
            sqlx::query(
                "UPDATE threads SET plan = NULL, state = 'conversing', updated_at = $1 \
                 WHERE channel_id = $2 AND thread_ts = $3 AND state = 'plan_pending'",
            )
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?;
        }
        Change::PlanPending(thread) => {
            sqlx::query(
                "UPDATE threads SET state = 'plan_pending', updated_at = $1 WHERE channel_id = $2 AND thread_ts = $3",
            )
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?;
        }
        Change::ProposePlan { thread, plan_json } => {
            sqlx::query(
                "UPDATE threads SET plan = $1, state = 'plan_pending', updated_at = $2 \
                 WHERE channel_id = $3 AND thread_ts = $4",
            )
            .bind(plan_json)
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?;
        }
        Change::BackToRuns(thread) => {
            sqlx::query(
                "UPDATE threads SET state = CASE WHEN pr_number IS NULL THEN 'approved' ELSE 'pr_opened' END, \
                 updated_at = $1 WHERE channel_id = $2 AND thread_ts = $3 AND state NOT LIKE 'closed%'",
            )
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?;
        }
        Change::Undone {
            checkpoint_run,
            latest_run,
            conversation,
        } => {
            sqlx::query("DELETE FROM run_checkpoints WHERE run_id = $1")
                .bind(checkpoint_run)
                .execute(&mut *conn)
                .await?;
            if let Some(run) = latest_run {
                super::checkpoints::append_run_conversation(conn, run, 0, conversation).await?;
            }
        }
        Change::RunReported(run) => {
            let reported = sqlx::query(
                "UPDATE runs SET reported_at = $1 WHERE id = $2 AND reported_at IS NULL",
            )
            .bind(&now)
            .bind(run)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            return Ok(reported == 1);
        }
        Change::StepDone { thread, step } => {
            let marked = sqlx::query(
                "INSERT INTO thread_steps (channel_id, thread_ts, step, done_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (channel_id, thread_ts, step) DO NOTHING",
            )
            .bind_thread(thread)
            .bind(step)
            .bind(&now)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            return Ok(marked == 1);
        }
        Change::Closed { thread, closure } => {
            // Closed once: a thread closed already is not closed again (and what would
            // be said with it is not said).
            let closed = sqlx::query(
                "UPDATE threads SET state = $1, updated_at = $2 \
                 WHERE channel_id = $3 AND thread_ts = $4 AND state NOT LIKE 'closed%'",
            )
            .bind(Stage::Closed(closure).as_str())
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            return Ok(closed == 1);
        }
        Change::Memory(ref memory) => return super::memory::apply(conn, memory).await,
        Change::Review(ref review) => return super::reviews::apply(conn, review).await,
        Change::Reviewer(ref review) => {
            return super::reviews::apply_reviewer(conn, review).await;
        }
        Change::Scope(ref scope) => return super::scope::apply(conn, scope).await,
        Change::Drawing(ref drawing) => return super::drawings::apply(conn, drawing).await,
        Change::LeaseHeld { thread, owner } => {
            return super::leases::held(conn, db_now, thread, owner).await;
        }
    }
    Ok(true)
}

/// Appends a turn to a role's conversation and touches the thread.
async fn append_turn(
    conn: &mut AnyConnection,
    thread: &ThreadKey,
    role: &str,
    messages: &[ChatMessage],
    now: &str,
) -> Result<(), StoreError> {
    let next = sqlx::query_scalar::<_, i64>(
        "SELECT COALESCE(MAX(seq), -1) + 1 AS next FROM conversation_messages \
         WHERE channel_id = $1 AND thread_ts = $2 AND role = $3",
    )
    .bind_thread(thread)
    .bind(role)
    .fetch_one(&mut *conn)
    .await?;
    for (i, message) in messages.iter().enumerate() {
        let body = serde_json::to_string(message).map_err(|source| StoreError::Corrupt {
            thread: thread.to_string(),
            source,
        })?;
        sqlx::query(
            "INSERT INTO conversation_messages (channel_id, thread_ts, role, seq, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind_thread(thread)
        .bind(role)
        .bind(next + i as i64)
        .bind(body)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("UPDATE threads SET updated_at = $1 WHERE channel_id = $2 AND thread_ts = $3")
        .bind(now)
        .bind_thread(thread)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ts: &str) -> IncomingMessage {
        crate::store::testing::message("1.1", ts, &format!("message {ts}"))
    }

    fn reply(id: &str) -> NewIntent {
        NewIntent {
            id: id.into(),
            thread: msg("1.1").thread(),
            body: "{}".into(),
        }
    }

    async fn a_turn_its_answer_and_the_processed_mark_are_one_write(s: &Store) {
        let (a, b) = (msg("1.1"), msg("1.2"));
        s.record_message(&a).await.unwrap();
        s.record_message(&b).await.unwrap();
        let t = a.thread();
        let turn = [ChatMessage::user("q"), ChatMessage::assistant_text("r")];
        assert!(
            s.commit(
                &[
                    Change::Turn {
                        thread: &t,
                        role: "pm",
                        messages: &turn
                    },
                    Change::Processed(&a)
                ],
                &[reply("g/0")],
            )
            .await
            .unwrap()
        );
        assert_eq!(s.next_pending(&t).await.unwrap(), Some(b.clone()));
        assert_eq!(s.conversation(&t, "pm").await.unwrap().len(), 2);
        assert_eq!(s.unsent(&t).await.unwrap().len(), 1);

        // A failing part (the reply's id is taken) leaves nothing behind: no turn, no mark.
        let again = [ChatMessage::user("q2")];
        assert!(
            s.commit(
                &[
                    Change::Turn {
                        thread: &t,
                        role: "pm",
                        messages: &again
                    },
                    Change::Processed(&b)
                ],
                &[reply("g/0")],
            )
            .await
            .is_err()
        );
        assert_eq!(s.next_pending(&t).await.unwrap(), Some(b));
        assert_eq!(s.conversation(&t, "pm").await.unwrap().len(), 2);
    }

    async fn a_run_end_is_reported_once(s: &Store) {
        let t = msg("1.1").thread();
        crate::store::testing::create_run(s, "r1", &t).await;
        assert!(
            s.commit(&[Change::RunReported("r1")], &[reply("end/0")])
                .await
                .unwrap()
        );
        assert!(
            !s.commit(&[Change::RunReported("r1")], &[reply("end2/0")])
                .await
                .unwrap(),
            "reported already"
        );
        assert!(
            s.intent("end2/0").await.unwrap().is_none(),
            "nothing written"
        );
    }

    async fn budgets_plans_and_failures_are_recorded(s: &Store) {
        let a = msg("1.1");
        let t = a.thread();
        s.record_message(&a).await.unwrap();
        s.commit(
            &[Change::Budget {
                thread: &t,
                cap_usd: 7.5,
                user: "U2",
            }],
            &[],
        )
        .await
        .unwrap();
        assert_eq!(s.thread_budget(&t).await.unwrap(), Some(7.5));
        s.set_plan(&t, "{}").await.unwrap();
        assert!(s.approve_plan(&t, &a).await.unwrap().is_some());
        s.commit(&[Change::PlanPending(&t)], &[]).await.unwrap();
        assert!(s.has_pending_plan(&t).await.unwrap(), "approvable again");
        s.commit(&[Change::WithdrawPlan(&t), Change::Failed(&a)], &[])
            .await
            .unwrap();
        assert!(!s.has_pending_plan(&t).await.unwrap());
        assert_eq!(
            s.next_pending(&t).await.unwrap(),
            None,
            "failed, not pending"
        );
    }

    /// A merge's resolution proposed by the controller waits like a PM plan, and the thread
    /// goes back to its runs (with its pull request, if any) once it is approved or withdrawn.
    async fn a_resolution_plan_waits_and_the_thread_goes_back_to_its_runs(s: &Store) {
        use crate::domain::{PullRequestRef, Stage};
        let (a, b) = (
            msg("1.1"),
            IncomingMessage {
                thread_ts: "2.1".into(),
                ..msg("2.1")
            },
        );
        for m in [&a, &b] {
            s.record_message(m).await.unwrap();
            s.set_plan(&m.thread(), "{}").await.unwrap();
            assert!(s.approve_plan(&m.thread(), m).await.unwrap().is_some());
        }
        let pr = PullRequestRef {
            number: 42,
            url: "https://github.com/acme/app/pull/42".into(),
        };
        assert!(s.record_pull_request(&b.thread(), &pr).await.unwrap());
        let plan = r#"{"summary":"Resolve","steps":["x"],"files":["a.rs"]}"#;
        for m in [&a, &b] {
            let t = m.thread();
            let propose = Change::ProposePlan {
                thread: &t,
                plan_json: plan,
            };
            assert!(
                s.commit(&[propose], &[reply(&format!("p{}/0", m.ts))])
                    .await
                    .unwrap()
            );
            let stored = s.stored_thread(&t).await.unwrap();
            assert_eq!(stored.stage, Stage::PlanPending);
            assert_eq!(stored.plan.unwrap().summary, "Resolve");
            s.commit(&[Change::BackToRuns(&t)], &[]).await.unwrap();
        }
        let stage = |t| async move { s.stored_thread(&t).await.unwrap().stage };
        assert_eq!(stage(a.thread()).await, Stage::Approved);
        assert_eq!(stage(b.thread()).await, Stage::PrOpened);
        assert_eq!(
            s.stored_thread(&b.thread()).await.unwrap().pull_request,
            Some(pr)
        );
    }

    crate::store::testing::on_both_backends!(
        a_turn_its_answer_and_the_processed_mark_are_one_write,
        a_run_end_is_reported_once,
        budgets_plans_and_failures_are_recorded,
        a_resolution_plan_waits_and_the_thread_goes_back_to_its_runs,
    );
}
