//! Notify: the Coder posts a short note to the people in the thread while it works (a
//! progress milestone, a decision worth knowing). It travels as a `Notice` event; the
//! controller posts it.

use async_trait::async_trait;
use codebutler_proto::runner::v1::{Notice, RunnerEvent, runner_event::Event};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::mpsc;

use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};

/// Longest note, in characters.
pub const MAX_NOTICE_CHARS: usize = 2_000;

/// Posts notes to the thread through the run's event stream.
#[derive(Debug, Clone)]
pub struct NotifyTool {
    events: mpsc::Sender<RunnerEvent>,
}

impl NotifyTool {
    /// A Notify that sends its notes on `events`.
    pub fn new(events: mpsc::Sender<RunnerEvent>) -> Self {
        Self { events }
    }
}

/// Notify's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The note.
    message: String,
}

#[async_trait]
impl Tool for NotifyTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Notify",
            description: "Post a short note (Markdown, at most 2,000 characters) to the people in the Slack thread now: a milestone reached, a decision they should know about. Not for questions, and not for the final summary (your last answer is posted anyway).",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args("Notify", args)?;
        let text = args.message.trim();
        if text.is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: "Notify".into(),
                reason: "message is empty".into(),
            });
        }
        if text.chars().count() > MAX_NOTICE_CHARS {
            return Err(ToolError::InvalidArguments {
                tool: "Notify".into(),
                reason: format!("message is longer than {MAX_NOTICE_CHARS} characters; shorten it"),
            });
        }
        let event = RunnerEvent {
            event: Some(Event::Notice(Notice {
                text: text.to_owned(),
            })),
        };
        self.events
            .send(event)
            .await
            .map_err(|_| ToolError::Failed("the controller is not listening".into()))?;
        Ok("posted to the thread".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_note_becomes_a_notice_event() {
        let (tx, mut rx) = mpsc::channel(4);
        let tool = NotifyTool::new(tx);
        assert_eq!(
            tool.call(json!({"message": " Tests pass. "}))
                .await
                .unwrap(),
            "posted to the thread"
        );
        let Some(Event::Notice(n)) = rx.recv().await.unwrap().event else {
            panic!("not a notice")
        };
        assert_eq!(n.text, "Tests pass.");
        assert!(tool.call(json!({"message": "  "})).await.is_err());
        let long = "x".repeat(MAX_NOTICE_CHARS + 1);
        assert!(
            tool.call(json!({"message": long}))
                .await
                .unwrap_err()
                .to_string()
                .contains("shorten")
        );
    }
}
