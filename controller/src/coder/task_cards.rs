//! The Coder's progress as Slack's task cards: one streamed message per run, shown as a plan
//! (`task_display_mode: plan`) titled with the plan's summary, with a task per tool call
//! (reading, editing, running tests, committing, opening the pull request) that turns from
//! in progress to complete (or error) with the tool's one-line outcome.
//!
//! The live status message (turn, time, tokens, cost, the Cancel button) stays beside it, and
//! is all there is where streaming is off or Slack refuses it. Updates gathered between two
//! ticks of the follower go to Slack in one call. The card is recorded as the delivered
//! outbox effect `taskcards-<run>/0` when Slack made it: a follower that starts again after a
//! restart finds it and makes no second card (the first stays as the crash left it; the
//! status message carries on).

use std::collections::HashMap;

use codebutler_proto::runner::v1::runner_event::Event;

use crate::domain::IncomingMessage;
use crate::slack::api::Sender;
use crate::slack::assistant::{Chunk, StreamRef, TaskDisplay, TaskStatus, plain_line};
use crate::slack::effects::{Effect, Effects};
use crate::store::Store;

/// The longest task title or output, in characters.
const MAX_TASK_CHARS: usize = 120;

/// A run's task card.
pub(super) struct TaskCards {
    sender: Sender,
    /// The card, while it can take updates.
    stream: Option<StreamRef>,
    /// Each started call's title, by call id.
    titles: HashMap<String, String>,
    /// Updates not sent yet.
    pending: Vec<Chunk>,
}

impl TaskCards {
    /// Starts the run's card in the approval's thread, titled `summary`; a card that shows
    /// nothing where streaming is not available, or where this run already has one.
    pub(super) async fn start(
        sender: &Sender,
        store: &Store,
        approval: &IncomingMessage,
        run_id: &str,
        summary: &str,
    ) -> Self {
        let mut cards = Self {
            sender: sender.clone(),
            stream: None,
            titles: HashMap::new(),
            pending: Vec::new(),
        };
        let thread = approval.thread();
        let record = Effects::named(format!("taskcards-{run_id}"), &thread).push(Effect::Post {
            text: String::new(),
            blocks: None,
        });
        match store.intent(&record.id(0)).await {
            Ok(None) => {}
            Ok(Some(_)) => return cards,
            Err(e) => {
                tracing::warn!(thread = %thread, "read whether run {run_id} has task cards: {e}");
                return cards;
            }
        }
        let title = Chunk::PlanUpdate {
            title: plain_line(summary, MAX_TASK_CHARS),
        };
        let Some(stream) = sender
            .start_stream(
                &thread.channel,
                &thread.thread_ts,
                &approval.user,
                Some(TaskDisplay::Plan),
                &[title],
            )
            .await
        else {
            return cards;
        };
        let recorded = match record.intents().first() {
            Some(intent) => store.record_shown(intent, &stream.ts).await,
            None => Ok(()),
        };
        if let Err(e) = recorded {
            tracing::warn!(thread = %thread, "record run {run_id}'s task cards: {e}");
        }
        cards.stream = Some(stream);
        cards
    }

    /// Takes one event of the run into account (sent at the next [`TaskCards::flush`]).
    pub(super) fn apply(&mut self, event: &Event) {
        if self.stream.is_none() {
            return;
        }
        if let Some(chunk) = task_update(&mut self.titles, event) {
            self.pending.push(chunk);
        }
    }

    /// Sends the updates gathered since the last flush.
    pub(super) async fn flush(&mut self) {
        let Some(stream) = &self.stream else {
            return;
        };
        if self.pending.is_empty() {
            return;
        }
        let chunks = std::mem::take(&mut self.pending);
        if let Err(e) = self.sender.append_stream(stream, &chunks).await {
            tracing::warn!("update the task cards: {e}; they stop here");
            self.stream = None;
        }
    }

    /// Ends the card with the updates not sent yet.
    pub(super) async fn finish(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        let chunks = std::mem::take(&mut self.pending);
        if let Err(e) = self.sender.stop_stream(&stream, &chunks).await {
            tracing::warn!("end the task cards: {e}");
        }
    }
}

/// The task update an event makes, if any: a tool call started is a task in progress, a
/// tool call finished is complete (or an error) with its outcome.
fn task_update(titles: &mut HashMap<String, String>, event: &Event) -> Option<Chunk> {
    match event {
        Event::ToolStarted(started) => {
            let title = plain_line(&started.summary, MAX_TASK_CHARS);
            titles.insert(started.call_id.clone(), title.clone());
            Some(Chunk::TaskUpdate {
                id: started.call_id.clone(),
                title,
                status: TaskStatus::InProgress,
                output: None,
            })
        }
        Event::ToolFinished(finished) => {
            let title = titles
                .get(&finished.call_id)
                .cloned()
                .unwrap_or_else(|| plain_line(&finished.tool, MAX_TASK_CHARS));
            let output = plain_line(&finished.summary, MAX_TASK_CHARS);
            Some(Chunk::TaskUpdate {
                id: finished.call_id.clone(),
                title,
                status: if finished.is_error {
                    TaskStatus::Error
                } else {
                    TaskStatus::Complete
                },
                output: (!output.is_empty()).then_some(output),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::{ToolFinished, ToolStarted, TurnBegun};

    #[test]
    fn a_tool_call_is_a_task_that_completes_with_its_outcome() {
        let mut titles = HashMap::new();
        let started = Event::ToolStarted(ToolStarted {
            call_id: "c1".into(),
            tool: "Bash".into(),
            summary: "running cargo test <!here>".into(),
        });
        let finished = Event::ToolFinished(ToolFinished {
            call_id: "c1".into(),
            tool: "Bash".into(),
            summary: "exit 101, 12 lines".into(),
            is_error: true,
            duration_ms: 1200,
        });
        assert_eq!(
            task_update(&mut titles, &started),
            Some(Chunk::TaskUpdate {
                id: "c1".into(),
                title: "running cargo test !here".into(),
                status: TaskStatus::InProgress,
                output: None,
            })
        );
        assert_eq!(
            task_update(&mut titles, &finished),
            Some(Chunk::TaskUpdate {
                id: "c1".into(),
                title: "running cargo test !here".into(),
                status: TaskStatus::Error,
                output: Some("exit 101, 12 lines".into()),
            })
        );
        let turn = Event::TurnBegun(TurnBegun {
            turn: 1,
            max_turns: 5,
        });
        assert_eq!(task_update(&mut titles, &turn), None);
    }
}
