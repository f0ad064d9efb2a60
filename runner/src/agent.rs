//! The Coder's loop: system prompt and plan in, then model call → tool calls → results,
//! turn after turn, until the model stops calling tools (completed), `max_turns` is reached,
//! the run's time is up, or a cancel arrives — each ending reported as such. Progress goes
//! out as events (turn begun, tool started/finished with a one-line summary, assistant
//! text); messages from the thread arrive in an inbox and are added before the next turn.
//!
//! Transport-free: the model is a [`ChatModel`] and events go to a channel, so the loop is
//! tested here without gRPC; the runner binary connects both to the controller's hub.

use std::time::{Duration, Instant};

use codebutler_proto::runner::v1::{
    AssistantText, FinishReason, RunnerEvent, ToolFinished, ToolStarted, TurnBegun,
    runner_event::Event,
};
use tokio::sync::mpsc;

use codebutler_agent::compaction::{Compaction, summary_request};
use codebutler_agent::conversation::{ChatMessage, ToolCall, ToolSpec, plan_message};
use codebutler_agent::tool::ToolRegistry;
use codebutler_agent::tool_loop::ChatModel;

/// What the Coder is asked to do.
#[derive(Clone, Debug)]
pub struct CoderTask {
    pub system_prompt: String,
    pub plan: String,
    pub max_turns: u32,
    pub timeout: Duration,
    /// A stored conversation to continue (without the system prompt); empty for a new run.
    pub resume: Vec<ChatMessage>,
    /// The worktree's disk, checked after every round of tools: the run stops when it is
    /// full. `None`: not watched.
    pub disk: Option<DiskWatch>,
}

/// Watches the free space of the filesystem a directory is on.
#[derive(Clone, Debug)]
pub struct DiskWatch {
    /// The worktree.
    pub path: std::path::PathBuf,
    /// Below this many free bytes the disk counts as full.
    pub min_free_bytes: u64,
}

impl DiskWatch {
    /// Bytes below which a worktree's disk counts as full.
    pub const MIN_FREE_BYTES: u64 = 1 << 20;

    /// Says why the disk is full, if it is.
    pub fn full(&self) -> Option<String> {
        let stat = match nix::sys::statvfs::statvfs(&self.path) {
            Ok(stat) => stat,
            Err(e) => {
                tracing::warn!("free space of {}: {e}", self.path.display());
                return None;
            }
        };
        let unit = stat.fragment_size();
        let free = stat.blocks_available().saturating_mul(unit);
        if free >= self.min_free_bytes {
            return None;
        }
        Some("the worktree's disk is full".to_owned())
    }
}

/// A message for a running Coder.
#[derive(Clone, Debug, PartialEq)]
pub enum Inbox {
    /// Someone wrote in the thread; it is added before the next turn.
    UserMessage { text: String, author: String },
    /// Stop now.
    Cancel { reason: String },
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    Completed {
        summary: String,
    },
    MaxTurns,
    Timeout,
    Cancelled {
        reason: String,
    },
    /// The model could not be reached or refused (e.g. a budget): the run stops cleanly.
    ModelFailed {
        message: String,
    },
    /// The worktree's disk is full: nothing more can be written, so the run stops.
    DiskFull {
        message: String,
    },
}

impl Ending {
    /// The `Finished` or `Failed` event reporting this ending.
    pub fn to_event(&self) -> RunnerEvent {
        use codebutler_proto::runner::v1::{Failed, Finished};
        let finished = |reason: FinishReason, summary: String| {
            Event::Finished(Finished {
                reason: reason as i32,
                summary,
            })
        };
        let event = match self {
            Self::Completed { summary } => finished(FinishReason::Completed, summary.clone()),
            Self::MaxTurns => finished(FinishReason::MaxTurns, "stopped at the turn limit".into()),
            Self::Timeout => finished(FinishReason::Timeout, "stopped at the time limit".into()),
            Self::Cancelled { reason } => finished(FinishReason::Cancelled, reason.clone()),
            Self::DiskFull { message } => finished(FinishReason::DiskFull, message.clone()),
            Self::ModelFailed { message } => Event::Failed(Failed {
                step: "model".into(),
                message: message.clone(),
            }),
        };
        RunnerEvent { event: Some(event) }
    }
}

/// Runs the Coder until one of its endings, compacting the conversation as `compaction`
/// says. Returns the ending and the conversation (without the system prompt), so it can be
/// stored and resumed.
pub async fn run_coder<M: ChatModel>(
    model: &M,
    tools: &ToolRegistry,
    task: CoderTask,
    compaction: Compaction,
    inbox: &mut mpsc::Receiver<Inbox>,
    events: &mpsc::Sender<RunnerEvent>,
) -> (Ending, Vec<ChatMessage>) {
    let mut messages = vec![ChatMessage::system(task.system_prompt.clone())];
    if task.resume.is_empty() {
        messages.push(plan_message(&task.plan));
    } else {
        messages.extend(task.resume.iter().cloned());
    }
    let deadline = tokio::time::sleep(task.timeout);
    tokio::pin!(deadline);
    let ending = tokio::select! {
        biased;
        () = &mut deadline => Ending::Timeout,
        ending = turns(model, tools, &task, compaction, &mut messages, inbox, events) => ending,
    };
    messages.remove(0);
    (ending, messages)
}

async fn turns<M: ChatModel>(
    model: &M,
    tools: &ToolRegistry,
    task: &CoderTask,
    compaction: Compaction,
    messages: &mut Vec<ChatMessage>,
    inbox: &mut mpsc::Receiver<Inbox>,
    events: &mpsc::Sender<RunnerEvent>,
) -> Ending {
    let specs = tools.specs();
    let compaction = compaction.with_tools(&specs);
    // User messages that arrive during a model call or tool run, for the next turn.
    let mut pending = Vec::new();
    for turn in 1..=task.max_turns {
        messages.append(&mut pending);
        while let Ok(item) = inbox.try_recv() {
            match item {
                Inbox::UserMessage { text, author } => {
                    messages.push(ChatMessage::user(format!("<@{author}>: {text}")));
                }
                Inbox::Cancel { reason } => return Ending::Cancelled { reason },
            }
        }
        if compaction.needed(messages) {
            let summary = tokio::select! {
                biased;
                cancel = wait_cancel(inbox, &mut pending) => return cancel,
                summary = summarise(model, &compaction, messages, &specs) => match summary {
                    Ok(summary) => summary,
                    Err(e) => return Ending::ModelFailed { message: format!("compaction: {e}") },
                },
            };
            if summary.trim().is_empty() {
                // Dropping the history for an empty summary would lose the work.
                return Ending::ModelFailed {
                    message: "compaction: the model returned no summary".into(),
                };
            }
            *messages = compaction.compacted(messages, &summary);
            emit(
                events,
                Event::AssistantText(AssistantText {
                    text: "(compacted the conversation to stay within the context window)".into(),
                }),
            )
            .await;
        }
        emit(
            events,
            Event::TurnBegun(TurnBegun {
                turn,
                max_turns: task.max_turns,
            }),
        )
        .await;
        let reply = tokio::select! {
            biased;
            cancel = wait_cancel(inbox, &mut pending) => return cancel,
            reply = model.complete(messages, &specs) => match reply {
                Ok(reply) => reply,
                Err(e) => return Ending::ModelFailed { message: e.to_string() },
            },
        };
        if let Some(text) = reply.content.as_ref().filter(|t| !t.trim().is_empty()) {
            emit(
                events,
                Event::AssistantText(AssistantText { text: text.clone() }),
            )
            .await;
        }
        if reply.tool_calls.is_empty() {
            let summary = reply.content.clone().unwrap_or_default();
            messages.push(ChatMessage::assistant_text(summary.clone()));
            return Ending::Completed { summary };
        }
        messages.push(ChatMessage::Assistant {
            content: reply.content.clone(),
            tool_calls: reply.tool_calls.clone(),
        });
        let results = tokio::select! {
            biased;
            cancel = wait_cancel(inbox, &mut pending) => return cancel,
            results = run_tools(tools, &reply.tool_calls, events) => results,
        };
        messages.extend(results);
        if let Some(message) = task.disk.as_ref().and_then(DiskWatch::full) {
            return Ending::DiskFull { message };
        }
    }
    Ending::MaxTurns
}

/// The model's summary of `messages` for a compaction: asked as the conversation's next
/// turn, with its tools, so the prompt cache serves the conversation (see
/// [`codebutler_agent::compaction`]); asked over the conversation written out as text,
/// without tools, when that turn would not fit the window or the model called tools
/// instead of answering.
async fn summarise<M: ChatModel>(
    model: &M,
    compaction: &Compaction,
    messages: &[ChatMessage],
    specs: &[ToolSpec],
) -> Result<String, M::Error> {
    if let Some(turn) = compaction.summary_turn(messages) {
        let reply = model.complete(&turn, specs).await?;
        if reply.tool_calls.is_empty() {
            return Ok(reply.content.unwrap_or_default());
        }
    }
    let reply = model.complete(&summary_request(messages), &[]).await?;
    Ok(reply.content.unwrap_or_default())
}

/// Completes when a cancel arrives; user messages that arrive meanwhile are kept for the
/// next turn.
async fn wait_cancel(inbox: &mut mpsc::Receiver<Inbox>, pending: &mut Vec<ChatMessage>) -> Ending {
    loop {
        match inbox.recv().await {
            Some(Inbox::Cancel { reason }) => return Ending::Cancelled { reason },
            Some(Inbox::UserMessage { text, author }) => {
                pending.push(ChatMessage::user(format!("<@{author}>: {text}")));
            }
            // The controller hung up: nobody can cancel any more; keep working.
            None => std::future::pending::<()>().await,
        }
    }
}

/// Runs one reply's tool calls (read-only ones concurrently), reporting each.
async fn run_tools(
    tools: &ToolRegistry,
    calls: &[ToolCall],
    events: &mpsc::Sender<RunnerEvent>,
) -> Vec<ChatMessage> {
    for call in calls {
        emit(
            events,
            Event::ToolStarted(ToolStarted {
                call_id: call.id.clone(),
                tool: call.function.name.clone(),
                summary: summarize(call),
            }),
        )
        .await;
    }
    let timed = |call: &ToolCall| {
        let call = call.clone();
        async move {
            let start = Instant::now();
            let out = tools.execute(&call).await;
            (call, out, start.elapsed())
        }
    };
    let outputs = if tools.all_read_only(calls) {
        codebutler_agent::tool::in_order_concurrently(calls.iter().map(timed).collect()).await
    } else {
        let mut outputs = Vec::with_capacity(calls.len());
        for call in calls {
            outputs.push(timed(call).await);
        }
        outputs
    };
    let mut results = Vec::with_capacity(outputs.len());
    for (call, out, took) in outputs {
        let is_error = out.starts_with("error: ");
        emit(
            events,
            Event::ToolFinished(ToolFinished {
                call_id: call.id.clone(),
                tool: call.function.name.clone(),
                summary: first_line(&out, 120),
                is_error,
                duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            }),
        )
        .await;
        results.push(ChatMessage::tool_result(call.id, out));
    }
    results
}

async fn emit(events: &mpsc::Sender<RunnerEvent>, event: Event) {
    // A closed channel means the controller is gone (the run is being cancelled); the
    // event goes with it.
    if events
        .send(RunnerEvent { event: Some(event) })
        .await
        .is_err()
    {
        eprintln!("codebutler-runner: the controller is gone; an event was not delivered");
    }
}

/// A one-line description of a tool call for people: "editing src/auth.rs",
/// "running cargo test".
pub fn summarize(call: &ToolCall) -> String {
    let args: serde_json::Value =
        serde_json::from_str(&call.function.arguments).unwrap_or(serde_json::Value::Null);
    let arg = |key: &str| args.get(key).and_then(|v| v.as_str()).unwrap_or("?");
    let text = match call.function.name.as_str() {
        "Read" => format!("reading {}", arg("file_path")),
        "Write" => format!("writing {}", arg("file_path")),
        "Edit" => format!("editing {}", arg("file_path")),
        "Bash" => format!("running {}", arg("command")),
        "Grep" => format!("searching for {}", arg("pattern")),
        "Glob" => format!("listing {}", arg("pattern")),
        "GitCommit" => format!("committing: {}", arg("message")),
        "OpenPR" => format!("opening a pull request: {}", arg("title")),
        "WebFetch" => format!("fetching {}", arg("url")),
        "AskUser" => format!("asking: {}", arg("question")),
        other => format!("calling {other}"),
    };
    first_line(&text, 100)
}

fn first_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(max_chars).collect();
    if out.len() < line.len() || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use codebutler_agent::scripted::{Exhausted, ScriptedModel as Scripted};
    use codebutler_agent::tool::{Tool, ToolError};
    use codebutler_agent::tool_loop::AssistantReply;
    use codebutler_proto::runner::v1::Finished;
    use std::sync::{Arc, Mutex};

    struct Touch;

    #[async_trait]
    impl Tool for Touch {
        fn spec(&self) -> codebutler_agent::conversation::ToolSpec {
            codebutler_agent::conversation::ToolSpec {
                name: "Edit",
                description: "test",
                parameters: serde_json::json!({"type": "object"}),
            }
        }
        fn read_only(&self) -> bool {
            false
        }
        async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
            Ok(format!("edited {}", args["file_path"]))
        }
    }

    fn tools() -> ToolRegistry {
        let mut r = ToolRegistry::new(1000);
        r.register(Arc::new(Touch));
        r
    }

    fn edit() -> AssistantReply {
        AssistantReply {
            content: Some("Editing.".into()),
            tool_calls: vec![ToolCall::new("c1", "Edit", r#"{"file_path":"src/a.rs"}"#)],
        }
    }

    fn task(max_turns: u32) -> CoderTask {
        CoderTask {
            system_prompt: "sys".into(),
            plan: "do it".into(),
            max_turns,
            timeout: Duration::from_secs(60),
            resume: vec![],
            disk: None,
        }
    }

    async fn collect(mut rx: mpsc::Receiver<RunnerEvent>) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = rx.recv().await {
            out.extend(e.event);
        }
        out
    }

    #[test]
    fn a_disk_counts_as_full_below_its_free_space_floor() {
        let dir = tempfile::tempdir().unwrap();
        let watch = |min_free_bytes| DiskWatch {
            path: dir.path().to_owned(),
            min_free_bytes,
        };
        assert_eq!(watch(0).full(), None);
        assert_eq!(
            watch(u64::MAX).full().as_deref(),
            Some("the worktree's disk is full")
        );
    }

    #[tokio::test]
    async fn completes_with_events_for_each_turn_and_tool() {
        let model = Scripted::new(vec![
            edit(),
            AssistantReply {
                content: Some("Done: edited src/a.rs".into()),
                tool_calls: vec![],
            },
        ]);
        let (tx, rx) = mpsc::channel(100);
        let (_in_tx, mut inbox) = mpsc::channel(10);
        let (ending, conversation) = run_coder(
            &model,
            &tools(),
            task(5),
            Compaction::default(),
            &mut inbox,
            &tx,
        )
        .await;
        drop(tx);
        assert_eq!(
            ending,
            Ending::Completed {
                summary: "Done: edited src/a.rs".into()
            }
        );
        assert_eq!(conversation.len(), 4, "plan, tool call, result, answer");
        let events = collect(rx).await;
        assert!(matches!(
            events[0],
            Event::TurnBegun(TurnBegun {
                turn: 1,
                max_turns: 5
            })
        ));
        assert!(matches!(&events[2], Event::ToolStarted(s) if s.summary == "editing src/a.rs"));
        assert!(
            matches!(&events[3], Event::ToolFinished(f) if !f.is_error && f.summary == "edited \"src/a.rs\"")
        );
        assert!(matches!(
            events[4],
            Event::TurnBegun(TurnBegun { turn: 2, .. })
        ));
        assert!(matches!(
            Ending::MaxTurns.to_event().event,
            Some(Event::Finished(Finished { reason, .. })) if reason == FinishReason::MaxTurns as i32
        ));
    }

    #[tokio::test]
    async fn stops_at_max_turns() {
        let model = Scripted::new(vec![edit(), edit(), edit()]);
        let (tx, _rx) = mpsc::channel(100);
        let (_in_tx, mut inbox) = mpsc::channel(10);
        let (ending, _) = run_coder(
            &model,
            &tools(),
            task(2),
            Compaction::default(),
            &mut inbox,
            &tx,
        )
        .await;
        assert_eq!(ending, Ending::MaxTurns);
        assert_eq!(model.seen().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_the_timeout() {
        let model = Scripted::new(vec![edit()]).with_delay(Duration::from_secs(3600));
        let (tx, _rx) = mpsc::channel(100);
        let (_in_tx, mut inbox) = mpsc::channel(10);
        let mut t = task(5);
        t.timeout = Duration::from_secs(10);
        let (ending, _) =
            run_coder(&model, &tools(), t, Compaction::default(), &mut inbox, &tx).await;
        assert_eq!(ending, Ending::Timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_interrupts_a_model_call_and_messages_reach_the_next_turn() {
        let model = Scripted::new(vec![edit(), edit()]).with_delay(Duration::from_secs(5));
        let (tx, _rx) = mpsc::channel(100);
        let (in_tx, mut inbox) = mpsc::channel(10);
        in_tx
            .send(Inbox::UserMessage {
                text: "use tabs".into(),
                author: "U1".into(),
            })
            .await
            .unwrap();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(7)).await;
            in_tx
                .send(Inbox::Cancel {
                    reason: "stop".into(),
                })
                .await
                .unwrap();
        });
        let (ending, _) = run_coder(
            &model,
            &tools(),
            task(5),
            Compaction::default(),
            &mut inbox,
            &tx,
        )
        .await;
        sender.await.unwrap();
        assert_eq!(
            ending,
            Ending::Cancelled {
                reason: "stop".into()
            }
        );
        let seen = model.seen();
        assert_eq!(seen.len(), 2, "cancelled during the second call");
        assert!(
            seen[0]
                .iter()
                .any(|m| *m == ChatMessage::user("<@U1>: use tabs"))
        );
    }

    /// Answers summary calls (a summary turn, or the written-out conversation without tools)
    /// with a summary, everything else with a tool call whose result is large, until
    /// `turns` tool calls were made; records the size of every request.
    struct LongSession {
        turns: usize,
        made: Mutex<usize>,
        sizes: Mutex<Vec<u64>>,
        summaries: Mutex<usize>,
    }

    #[async_trait]
    impl ChatModel for LongSession {
        type Error = Exhausted;
        async fn complete(
            &self,
            messages: &[ChatMessage],
            tools: &[codebutler_agent::conversation::ToolSpec],
        ) -> Result<AssistantReply, Exhausted> {
            // The prompt as the window holds it: the messages and the tools' definitions.
            let tools_tokens = Compaction::default().with_tools(tools).tool_tokens;
            self.sizes
                .lock()
                .unwrap()
                .push(codebutler_agent::compaction::estimate_tokens(messages) + tools_tokens);
            if tools.is_empty() || codebutler_agent::compaction::is_summary_turn(messages) {
                *self.summaries.lock().unwrap() += 1;
                return Ok(AssistantReply {
                    content: Some("Edited src/a.rs many times; tests pass.".into()),
                    tool_calls: vec![],
                });
            }
            let mut made = self.made.lock().unwrap();
            if *made == self.turns {
                return Ok(AssistantReply {
                    content: Some("all done".into()),
                    tool_calls: vec![],
                });
            }
            *made += 1;
            Ok(AssistantReply {
                content: None,
                tool_calls: vec![ToolCall::new(
                    format!("c{made}"),
                    "Edit",
                    format!(r#"{{"file_path":"{}"}}"#, "x".repeat(3000)),
                )],
            })
        }
    }

    #[tokio::test]
    async fn compaction_keeps_a_sixty_turn_session_under_the_context_limit() {
        let model = LongSession {
            turns: 60,
            made: Mutex::new(0),
            sizes: Mutex::new(vec![]),
            summaries: Mutex::new(0),
        };
        let window = 8_000;
        let (tx, _rx) = mpsc::channel(10_000);
        let (_in_tx, mut inbox) = mpsc::channel(10);
        let mut t = task(100);
        t.timeout = Duration::from_secs(600);
        let compaction = Compaction {
            context_window: window,
            threshold: 0.8,
            ..Compaction::default()
        };
        let (ending, _) = run_coder(&model, &tools(), t, compaction, &mut inbox, &tx).await;
        assert_eq!(
            ending,
            Ending::Completed {
                summary: "all done".into()
            }
        );
        assert_eq!(*model.made.lock().unwrap(), 60);
        assert!(
            *model.summaries.lock().unwrap() >= 5,
            "compacted {} times",
            model.summaries.lock().unwrap()
        );
        let sizes = model.sizes.lock().unwrap();
        let largest = *sizes.iter().max().unwrap();
        assert!(
            largest <= window,
            "a request of ~{largest} tokens exceeded the {window}-token window"
        );
    }

    #[tokio::test]
    async fn a_compaction_asks_for_the_summary_as_the_next_turn_then_goes_on_from_it() {
        let path = "src/".to_owned() + &"a".repeat(300) + ".rs";
        let long_edit = AssistantReply {
            content: None,
            tool_calls: vec![ToolCall::new(
                "c1",
                "Edit",
                serde_json::json!({ "file_path": path }).to_string(),
            )],
        };
        let text = |t: &str| AssistantReply {
            content: Some(t.into()),
            tool_calls: vec![],
        };
        let compaction = Compaction {
            context_window: 1_000,
            threshold: 0.1,
            ..Compaction::default()
        };
        let summary_of = |summary: &str| {
            compaction.compacted(
                &[ChatMessage::system("sys"), plan_message("do it")],
                summary,
            )
        };

        // The summary turn: the conversation as sent, with its tools, then the instruction.
        let model = Scripted::new(vec![long_edit.clone(), text("Edited a.rs."), text("Done")]);
        let (tx, _rx) = mpsc::channel(100);
        let (_in_tx, mut inbox) = mpsc::channel(10);
        let (ending, _) = run_coder(&model, &tools(), task(5), compaction, &mut inbox, &tx).await;
        assert_eq!(
            ending,
            Ending::Completed {
                summary: "Done".into()
            }
        );
        let seen = model.seen();
        let mut turn = seen[0].clone();
        turn.push(ChatMessage::Assistant {
            content: None,
            tool_calls: long_edit.tool_calls.clone(),
        });
        turn.push(ChatMessage::tool_result("c1", format!("edited \"{path}\"")));
        turn.push(ChatMessage::user(
            codebutler_agent::compaction::SUMMARY_PROMPT,
        ));
        assert_eq!(seen[1], turn);
        assert_eq!(seen[2], summary_of("Edited a.rs."));
        assert_eq!(model.offered(), [1, 1, 1]);

        // A model that calls tools instead of summarising is asked again over the
        // conversation written out, without tools.
        let model = Scripted::new(vec![
            long_edit.clone(),
            long_edit,
            text("Edited a.rs."),
            text("Done"),
        ]);
        let (ending, _) = run_coder(&model, &tools(), task(5), compaction, &mut inbox, &tx).await;
        assert_eq!(
            ending,
            Ending::Completed {
                summary: "Done".into()
            }
        );
        let seen = model.seen();
        assert_eq!(seen[2], summary_request(&turn[..turn.len() - 1]));
        assert_eq!(seen[3], summary_of("Edited a.rs."));
        assert_eq!(model.offered(), [1, 1, 0, 1]);
    }

    #[test]
    fn summaries_say_what_is_happening() {
        let bash = ToolCall::new("1", "Bash", r#"{"command":"cargo test\necho done"}"#);
        assert_eq!(summarize(&bash), "running cargo test…");
        let garbage = ToolCall::new("1", "Read", "{not json");
        assert_eq!(summarize(&garbage), "reading ?");
    }
}
