//! Questions a Coder asked (its AskUser tool) and their answers: the durable record of the
//! exchanges that happen behind the scenes (the PM answering the Coder) as well as the ones
//! people answered in the thread. The run's event log has the question too; this table is
//! where the answer and who gave it are kept.

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, ThreadRow, now, unknown_value};

/// Where a Coder question is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuestionState {
    /// Asked; the PM has not passed it on or answered it yet.
    Asked,
    /// Passed on to the people in the thread.
    Escalated,
    Answered,
}

impl QuestionState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Asked => "asked",
            Self::Escalated => "escalated",
            Self::Answered => "answered",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Asked, Self::Escalated, Self::Answered]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// Compares with a stored name (`asked`, `escalated`, `answered`).
impl PartialEq<&str> for QuestionState {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

/// One Coder question as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionRecord {
    pub run_id: String,
    pub question_id: String,
    pub thread: ThreadKey,
    pub question: String,
    pub state: QuestionState,
    /// Why the PM passed the question on to the thread, when it did.
    pub pm_note: Option<String>,
    pub answer: Option<String>,
    /// `pm`, or the Slack user id of whoever answered in the thread.
    pub answered_by: Option<String>,
    pub asked_at: String,
    pub answered_at: Option<String>,
}

/// A row of `coder_questions` as [`Store::thread_questions`] reads it.
#[derive(sqlx::FromRow)]
struct QuestionRow {
    run_id: String,
    question_id: String,
    #[sqlx(flatten)]
    thread: ThreadRow,
    question: String,
    state: String,
    pm_note: Option<String>,
    answer: Option<String>,
    answered_by: Option<String>,
    asked_at: String,
    answered_at: Option<String>,
}

impl TryFrom<QuestionRow> for QuestionRecord {
    type Error = StoreError;

    fn try_from(r: QuestionRow) -> Result<Self, StoreError> {
        let Some(state) = QuestionState::parse(&r.state) else {
            let row = format!("{}/{}", r.run_id, r.question_id);
            return Err(unknown_value("coder_questions.state", row, r.state));
        };
        Ok(Self {
            run_id: r.run_id,
            question_id: r.question_id,
            thread: r.thread.into(),
            question: r.question,
            state,
            pm_note: r.pm_note,
            answer: r.answer,
            answered_by: r.answered_by,
            asked_at: r.asked_at,
            answered_at: r.answered_at,
        })
    }
}

impl Store {
    /// Records a question a run asked (state `asked`). Recording the same question twice
    /// keeps the first.
    pub async fn record_question(
        &self,
        run_id: &str,
        question_id: &str,
        thread: &ThreadKey,
        question: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO coder_questions (run_id, question_id, channel_id, thread_ts, question, state, asked_at) \
             VALUES ($1, $2, $3, $4, $5, 'asked', $6) ON CONFLICT (run_id, question_id) DO NOTHING",
        )
        .bind(run_id)
        .bind(question_id)
        .bind_thread(thread)
        .bind(question)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Marks a question passed on to the people in the thread, with the PM's reason.
    pub async fn escalate_question(
        &self,
        run_id: &str,
        question_id: &str,
        pm_note: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE coder_questions SET state = 'escalated', pm_note = $1 \
             WHERE run_id = $2 AND question_id = $3 AND state <> 'answered'",
        )
        .bind(pm_note)
        .bind(run_id)
        .bind(question_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a question's answer and who gave it (`pm` or a Slack user id).
    pub async fn answer_question(
        &self,
        run_id: &str,
        question_id: &str,
        answered_by: &str,
        answer: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE coder_questions SET state = 'answered', answer = $1, answered_by = $2, answered_at = $3 \
             WHERE run_id = $4 AND question_id = $5",
        )
        .bind(answer)
        .bind(answered_by)
        .bind(now())
        .bind(run_id)
        .bind(question_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The questions asked in a thread, oldest first.
    pub async fn thread_questions(
        &self,
        thread: &ThreadKey,
    ) -> Result<Vec<QuestionRecord>, StoreError> {
        let rows = sqlx::query_as::<_, QuestionRow>(
            "SELECT run_id, question_id, channel_id, thread_ts, question, state, pm_note, answer, \
             answered_by, asked_at, answered_at FROM coder_questions \
             WHERE channel_id = $1 AND thread_ts = $2 ORDER BY asked_at, run_id, question_id",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(QuestionRecord::try_from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    async fn questions_go_from_asked_to_escalated_to_answered(s: &Store) {
        s.record_question("r1", "q1", &thread(), "JWT or cookies?")
            .await
            .unwrap();
        s.record_question("r1", "q1", &thread(), "a duplicate")
            .await
            .unwrap();
        s.record_question("r1", "q2", &thread(), "Tabs?")
            .await
            .unwrap();
        s.answer_question("r1", "q2", "pm", "Spaces, per memory.")
            .await
            .unwrap();
        s.escalate_question("r1", "q1", "the plan does not say")
            .await
            .unwrap();
        let asked = s.thread_questions(&thread()).await.unwrap();
        assert_eq!(asked.len(), 2);
        let q1 = asked.iter().find(|q| q.question_id == "q1").unwrap();
        assert_eq!(
            (
                q1.question.as_str(),
                q1.state.as_str(),
                q1.pm_note.as_deref()
            ),
            (
                "JWT or cookies?",
                "escalated",
                Some("the plan does not say")
            )
        );
        assert_eq!(q1.answer, None);
        s.answer_question("r1", "q1", "U0ALICE", "JWT")
            .await
            .unwrap();
        // An escalation arriving late does not undo an answer.
        s.escalate_question("r1", "q1", "late").await.unwrap();
        let asked = s.thread_questions(&thread()).await.unwrap();
        let q1 = asked.iter().find(|q| q.question_id == "q1").unwrap();
        assert_eq!(
            (
                q1.state.as_str(),
                q1.answer.as_deref(),
                q1.answered_by.as_deref()
            ),
            ("answered", Some("JWT"), Some("U0ALICE"))
        );
        assert!(q1.answered_at.is_some());
        let q2 = asked.iter().find(|q| q.question_id == "q2").unwrap();
        assert_eq!(q2.answered_by.as_deref(), Some("pm"));
        let other = ThreadKey {
            channel: "C1".into(),
            thread_ts: "2.2".into(),
        };
        assert!(s.thread_questions(&other).await.unwrap().is_empty());
    }

    async fn an_unknown_stored_state_is_an_error(s: &Store) {
        s.record_question("r1", "q1", &thread(), "Tabs?")
            .await
            .unwrap();
        sqlx::query("UPDATE coder_questions SET state = 'pondered'")
            .execute(&s.pool)
            .await
            .unwrap();
        let err = s
            .thread_questions(&thread())
            .await
            .expect_err("an unknown state");
        assert_eq!(
            err.to_string(),
            "stored coder_questions.state of r1/q1 is \"pondered\", which this controller does not know"
        );
    }

    crate::store::testing::on_both_backends!(
        questions_go_from_asked_to_escalated_to_answered,
        an_unknown_stored_state_is_an_error,
    );
}
