//! The threads' active runs: at most one a thread, queued or running, each with the channel
//! its commands go on, its cancel, and the Coder question waiting for the thread's next
//! reply. Plain bookkeeping behind one lock, so the supervisor's decisions about it — a
//! second run of a thread refused, a message for a thread without a run, an answer closing
//! the question only when it is the one open — are tested without a runner.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use codebutler_proto::runner::v1::RunnerCommand;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::OpenQuestion;

/// A thread's run while it is queued or running.
pub(super) struct Active {
    pub run_id: String,
    pub commands: mpsc::Sender<RunnerCommand>,
    pub cancel: CancellationToken,
    /// The Coder's question waiting for the thread's next reply, if any (its id).
    pub open_question: Option<String>,
}

impl Active {
    /// A run just started, with no question open.
    pub fn new(
        run_id: String,
        commands: mpsc::Sender<RunnerCommand>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            run_id,
            commands,
            cancel,
            open_question: None,
        }
    }
}

/// What stops a thread's run: where its commands go, its cancel, and its id.
pub(super) struct StopHandle {
    pub commands: mpsc::Sender<RunnerCommand>,
    pub cancel: CancellationToken,
    pub run_id: String,
}

/// The active runs, by thread (`thread_ts`).
#[derive(Default)]
pub(super) struct ActiveRuns(Mutex<HashMap<String, Active>>);

impl ActiveRuns {
    /// Records `run` as the thread's; false, recording nothing, when the thread has a run
    /// already.
    pub fn claim(&self, thread_ts: &str, run: Active) -> bool {
        let mut active = self.lock();
        if active.contains_key(thread_ts) {
            return false;
        }
        active.insert(thread_ts.to_owned(), run);
        true
    }

    /// Forgets the thread's run (it ended, or never started).
    pub fn release(&self, thread_ts: &str) {
        self.lock().remove(thread_ts);
    }

    /// Whether the thread has a run queued or running.
    pub fn contains(&self, thread_ts: &str) -> bool {
        self.lock().contains_key(thread_ts)
    }

    /// The threads with a run.
    pub fn threads(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// What stops the thread's run, if it has one.
    pub fn stop_handle(&self, thread_ts: &str) -> Option<StopHandle> {
        self.lock().get(thread_ts).map(|a| StopHandle {
            commands: a.commands.clone(),
            cancel: a.cancel.clone(),
            run_id: a.run_id.clone(),
        })
    }

    /// Where the thread's run takes commands, if it has one.
    pub fn commands(&self, thread_ts: &str) -> Option<mpsc::Sender<RunnerCommand>> {
        self.lock().get(thread_ts).map(|a| a.commands.clone())
    }

    /// Where the thread's run takes the answer to its question `question_id`; the question
    /// is closed if it was the one the thread's next reply was to answer.
    pub fn answering(
        &self,
        thread_ts: &str,
        question_id: &str,
    ) -> Option<mpsc::Sender<RunnerCommand>> {
        self.lock().get_mut(thread_ts).map(|a| {
            if a.open_question.as_deref() == Some(question_id) {
                a.open_question = None;
            }
            a.commands.clone()
        })
    }

    /// Makes the thread's next reply the answer to question `question_id` of run `run_id`;
    /// false when the thread has no run, or another one.
    pub fn open_question(&self, thread_ts: &str, run_id: &str, question_id: &str) -> bool {
        match self.lock().get_mut(thread_ts) {
            Some(active) if active.run_id == run_id => {
                active.open_question = Some(question_id.to_owned());
                true
            }
            _ => false,
        }
    }

    /// Takes the question the thread's run waits on people for, if any.
    pub fn take_open_question(&self, thread_ts: &str) -> Option<OpenQuestion> {
        let mut active = self.lock();
        let run = active.get_mut(thread_ts)?;
        let question_id = run.open_question.take()?;
        Some(OpenQuestion {
            run_id: run.run_id.clone(),
            question_id,
        })
    }

    /// The table; a panic elsewhere while it was held leaves it as it was, still usable.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Active>> {
        match self.0.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str) -> (Active, mpsc::Receiver<RunnerCommand>) {
        let (commands, received) = mpsc::channel(4);
        (
            Active::new(id.into(), commands, CancellationToken::new()),
            received,
        )
    }

    #[test]
    fn a_thread_has_one_run_at_a_time() {
        let runs = ActiveRuns::default();
        let (first, _first) = run("r1");
        let (second, _second) = run("r2");
        let (third, _third) = run("r3");
        assert!(runs.claim("1.1", first));
        assert!(!runs.claim("1.1", second), "the thread's run is on");
        assert_eq!(
            runs.stop_handle("1.1").map(|h| h.run_id).as_deref(),
            Some("r1")
        );
        assert!(runs.contains("1.1"));
        assert!(!runs.contains("2.2"));
        assert!(
            runs.commands("2.2").is_none(),
            "no run, nothing takes a message"
        );
        runs.release("1.1");
        assert!(!runs.contains("1.1"));
        assert!(
            runs.claim("1.1", third),
            "the next run once the first ended"
        );
        assert_eq!(runs.threads(), ["1.1"]);
    }

    #[test]
    fn the_next_reply_answers_the_open_question_of_the_threads_own_run() {
        let runs = ActiveRuns::default();
        let (active, _commands) = run("r1");
        assert!(runs.claim("1.1", active));
        assert!(runs.take_open_question("1.1").is_none());
        assert!(
            !runs.open_question("1.1", "r0", "q1"),
            "another run's question"
        );
        assert!(
            !runs.open_question("2.2", "r1", "q1"),
            "a thread without a run"
        );
        assert!(runs.open_question("1.1", "r1", "q1"));
        assert_eq!(
            runs.take_open_question("1.1"),
            Some(OpenQuestion {
                run_id: "r1".into(),
                question_id: "q1".into(),
            })
        );
        assert!(runs.take_open_question("1.1").is_none(), "taken once");
    }

    #[test]
    fn an_answer_closes_only_the_question_it_answers() {
        let runs = ActiveRuns::default();
        let (active, _commands) = run("r1");
        assert!(runs.claim("1.1", active));
        assert!(runs.open_question("1.1", "r1", "q2"));
        // The PM answered an earlier question: the thread still waits on q2.
        assert!(runs.answering("1.1", "q1").is_some());
        assert!(runs.open_question("1.1", "r1", "q2"));
        assert!(runs.answering("1.1", "q2").is_some());
        assert!(runs.take_open_question("1.1").is_none());
        assert!(runs.answering("2.2", "q2").is_none());
    }
}
