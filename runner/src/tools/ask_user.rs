//! AskUser: the Coder asks a question and waits for the answer. The question leaves as a
//! `Question{question_id, text}` event; the controller asks the PM first and then the people
//! in the thread, and sends back an `Answer` with the same id, which the runner's command
//! reader hands to [`Questions::answer`]. The waiting call is an ordinary future: a cancel or
//! the run's time limit (both raced against tool runs by the Coder loop) drops it, and the
//! pending entry goes with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use codebutler_proto::runner::v1::{Question, RunnerEvent, runner_event::Event};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};

/// Longest question, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;

/// The run's questions waiting for an answer, by id.
#[derive(Debug, Default)]
pub struct Questions {
    pending: Mutex<HashMap<String, oneshot::Sender<String>>>,
    next: AtomicU64,
}

impl Questions {
    /// No question asked yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Delivers the answer to the question `question_id`. Returns false when no call waits
    /// for that id (answered already, never asked, or the call was cancelled).
    pub fn answer(&self, question_id: &str, text: String) -> bool {
        match self.lock().remove(question_id) {
            Some(waiter) => waiter.send(text).is_ok(),
            None => false,
        }
    }

    /// How many questions wait for an answer.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<String>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new question; the returned guard withdraws it when dropped.
    fn open(self: &Arc<Self>) -> (Pending, oneshot::Receiver<String>) {
        let id = format!("q{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), tx);
        (
            Pending {
                questions: Arc::clone(self),
                id,
            },
            rx,
        )
    }
}

/// A question in flight; withdrawn from [`Questions`] when the waiting call ends, however it
/// ends (answered, cancelled, timed out).
struct Pending {
    questions: Arc<Questions>,
    id: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.questions.lock().remove(&self.id);
    }
}

/// Asks the thread (PM first, then people) and waits for the answer.
#[derive(Debug, Clone)]
pub struct AskUserTool {
    questions: Arc<Questions>,
    events: mpsc::Sender<RunnerEvent>,
}

impl AskUserTool {
    /// An AskUser that sends its questions on `events` and receives answers through
    /// `questions`.
    pub fn new(questions: Arc<Questions>, events: mpsc::Sender<RunnerEvent>) -> Self {
        Self { questions, events }
    }
}

/// AskUser's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The question, with the options you see and what you would pick.
    question: String,
}

const TOOL: &str = "AskUser";

#[async_trait]
impl Tool for AskUserTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TOOL,
            description: "Ask an implementation question you cannot settle from the plan, the code or the project memory, and wait for the answer (the PM answers when it can, otherwise the people in the thread). Only for choices that would be costly to get wrong; never about scope already decided in the plan. One question per call, self-contained.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(TOOL, args)?;
        let text = args.question.trim();
        if text.is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: TOOL.into(),
                reason: "question is empty".into(),
            });
        }
        if text.chars().count() > MAX_QUESTION_CHARS {
            return Err(ToolError::InvalidArguments {
                tool: TOOL.into(),
                reason: format!(
                    "question is longer than {MAX_QUESTION_CHARS} characters; shorten it"
                ),
            });
        }
        let (pending, answer) = self.questions.open();
        let event = RunnerEvent {
            event: Some(Event::Question(Question {
                question_id: pending.id.clone(),
                text: text.to_owned(),
            })),
        };
        self.events
            .send(event)
            .await
            .map_err(|_| ToolError::Failed("the controller is not listening".into()))?;
        let answer = answer.await.map_err(|_| {
            ToolError::Failed("the question was withdrawn before it was answered".into())
        })?;
        drop(pending);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{CoderTask, Ending, Inbox, run_coder};
    use codebutler_agent::compaction::Compaction;
    use codebutler_agent::conversation::{ChatMessage, ToolCall};
    use codebutler_agent::tool::ToolRegistry;
    use codebutler_agent::tool_loop::{AssistantReply, ChatModel};
    use serde_json::json;
    use std::collections::VecDeque;
    use std::time::Duration;

    fn asked(event: RunnerEvent) -> Question {
        match event.event {
            Some(Event::Question(q)) => q,
            other => panic!("not a question: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_question_waits_for_the_answer_with_its_id() {
        let (tx, mut rx) = mpsc::channel(4);
        let questions = Questions::new();
        let tool = AskUserTool::new(questions.clone(), tx);
        let call = tokio::spawn({
            let tool = tool.clone();
            async move { tool.call(json!({"question": " JWT or cookies? "})).await }
        });
        let q = asked(rx.recv().await.unwrap());
        assert_eq!(q.question_id, "q1");
        assert_eq!(q.text, "JWT or cookies?");
        assert_eq!(questions.waiting(), 1);
        assert!(!questions.answer("q9", "wrong id".into()));
        assert!(questions.answer("q1", "JWT, always.".into()));
        assert_eq!(call.await.unwrap().unwrap(), "JWT, always.");
        assert_eq!(questions.waiting(), 0);
        assert!(
            !questions.answer("q1", "again".into()),
            "answered once only"
        );

        // The next question gets a new id.
        let call = tokio::spawn(async move { tool.call(json!({"question": "tabs?"})).await });
        let q = asked(rx.recv().await.unwrap());
        assert_eq!(q.question_id, "q2");
        assert!(questions.answer("q2", "spaces".into()));
        assert_eq!(call.await.unwrap().unwrap(), "spaces");
    }

    #[tokio::test]
    async fn bad_arguments_ask_nothing() {
        let (tx, mut rx) = mpsc::channel(4);
        let tool = AskUserTool::new(Questions::new(), tx);
        for (args, needle) in [
            (json!({}), "missing field `question`"),
            (json!({"question": ["a"]}), "invalid type"),
            (json!({"question": "   "}), "question is empty"),
            (
                json!({"question": "x".repeat(MAX_QUESTION_CHARS + 1)}),
                "shorten it",
            ),
        ] {
            let err = tool.call(args.clone()).await.unwrap_err().to_string();
            assert!(
                err.starts_with("invalid arguments for AskUser") && err.contains(needle),
                "{args}: {err}"
            );
        }
        assert!(rx.try_recv().is_err(), "no question was sent");
    }

    #[tokio::test]
    async fn a_closed_controller_is_an_error_not_a_hang() {
        let (tx, rx) = mpsc::channel(4);
        drop(rx);
        let questions = Questions::new();
        let tool = AskUserTool::new(questions.clone(), tx);
        let err = tool.call(json!({"question": "?"})).await.unwrap_err();
        assert_eq!(err.to_string(), "the controller is not listening");
        assert_eq!(questions.waiting(), 0);
    }

    /// Asks once, then (if ever called again) finishes; records the last request.
    struct Asker(Mutex<VecDeque<AssistantReply>>, Mutex<Vec<ChatMessage>>);

    #[async_trait]
    impl ChatModel for Asker {
        type Error = std::io::Error;
        async fn complete(
            &self,
            messages: &[ChatMessage],
            _tools: &[ToolSpec],
        ) -> Result<AssistantReply, std::io::Error> {
            *self.1.lock().unwrap() = messages.to_vec();
            Ok(self
                .0
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(AssistantReply {
                    content: Some("done".into()),
                    tool_calls: vec![],
                }))
        }
    }

    fn asker() -> Asker {
        Asker(
            Mutex::new(VecDeque::from([AssistantReply {
                content: None,
                tool_calls: vec![ToolCall::new(
                    "c1",
                    "AskUser",
                    r#"{"question": "Which pattern?"}"#,
                )],
            }])),
            Mutex::new(vec![]),
        )
    }

    fn task(timeout: Duration) -> CoderTask {
        CoderTask {
            system_prompt: "sys".into(),
            plan: "plan".into(),
            max_turns: 5,
            timeout,
            resume: vec![],
            disk: None,
        }
    }

    /// Runs the Coder loop with AskUser until it waits for the answer; `then` acts on the
    /// inbox and the questions once the question is out.
    async fn run_asking<F>(timeout: Duration, then: F) -> (Ending, Arc<Questions>, Vec<ChatMessage>)
    where
        F: FnOnce(mpsc::Sender<Inbox>, Arc<Questions>) -> tokio::task::JoinHandle<()>
            + Send
            + 'static,
    {
        let (events, mut event_rx) = mpsc::channel(64);
        let questions = Questions::new();
        let mut tools = ToolRegistry::new(10_000);
        tools.register(Arc::new(AskUserTool::new(
            questions.clone(),
            events.clone(),
        )));
        let (inbox_tx, mut inbox) = mpsc::channel(4);
        let watcher = tokio::spawn({
            let questions = questions.clone();
            async move {
                while let Some(e) = event_rx.recv().await {
                    if matches!(e.event, Some(Event::Question(_))) {
                        then(inbox_tx, questions).await.unwrap();
                        // Keep draining so the loop never blocks on events.
                        while event_rx.recv().await.is_some() {}
                        return;
                    }
                }
            }
        });
        let model = asker();
        let (ending, _) = run_coder(
            &model,
            &tools,
            task(timeout),
            Compaction::default(),
            &mut inbox,
            &events,
        )
        .await;
        drop(events);
        drop(tools);
        watcher.abort();
        let last = model.1.lock().unwrap().clone();
        (ending, questions, last)
    }

    #[tokio::test]
    async fn a_cancel_stops_a_run_waiting_for_an_answer() {
        let started = tokio::time::Instant::now();
        let (ending, questions, _) = run_asking(Duration::from_secs(600), |inbox, questions| {
            tokio::spawn(async move {
                assert_eq!(questions.waiting(), 1);
                inbox
                    .send(Inbox::Cancel {
                        reason: "stop".into(),
                    })
                    .await
                    .unwrap();
            })
        })
        .await;
        assert_eq!(
            ending,
            Ending::Cancelled {
                reason: "stop".into()
            }
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            questions.waiting(),
            0,
            "the cancelled question is withdrawn"
        );
        assert!(!questions.answer("q1", "too late".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_limit_applies_while_waiting() {
        let (ending, questions, _) = run_asking(Duration::from_secs(30), |_inbox, _questions| {
            tokio::spawn(async {})
        })
        .await;
        assert_eq!(ending, Ending::Timeout);
        assert_eq!(questions.waiting(), 0);
    }

    #[tokio::test]
    async fn the_answer_reaches_the_model_as_the_tool_result() {
        let (ending, _, last) = run_asking(Duration::from_secs(600), |_inbox, questions| {
            tokio::spawn(async move {
                assert!(questions.answer("q1", "Follow auth/login.rs.".into()));
            })
        })
        .await;
        assert_eq!(
            ending,
            Ending::Completed {
                summary: "done".into()
            }
        );
        assert_eq!(
            last.last(),
            Some(&ChatMessage::tool_result("c1", "Follow auth/login.rs."))
        );
    }
}
