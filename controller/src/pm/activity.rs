//! What the PM is doing while it works, for the thread's status line ("is reading
//! widgets/inventory.py…"): the model's tool calls said in a few words, told to whoever
//! watches the turn before the tools run; and, for whoever wants it, the text the model
//! writes as it writes it (its answer streamed into the thread).
//!
//! The words come from a model's arguments: they are cut to one short line without the
//! characters Slack would read as markup, so a status can neither mention anyone nor link.

use async_trait::async_trait;
use codebutler_agent::conversation::{ChatMessage, ToolCall, ToolSpec};
use codebutler_agent::tool_loop::{AssistantReply, ChatModel};

use crate::gateway::stream::TextSink;
use crate::slack::assistant::plain_line;

/// The longest status line, in characters.
const MAX_STATUS_CHARS: usize = 80;

/// The status while the PM thinks, before its first tool call.
pub const THINKING: &str = "is thinking…";

/// Whoever wants to know what the PM is doing.
#[async_trait]
pub trait Activity: Send + Sync {
    /// The PM is now doing `status` (a line such as "is reading src/app.py…").
    async fn doing(&self, status: &str);

    /// Whether the text the model writes should be told as it comes ([`Activity::wrote`]):
    /// the PM's calls are then streamed.
    fn watches_text(&self) -> bool {
        false
    }

    /// The model wrote `delta`, the next piece of its text (a retry starts again).
    fn wrote(&self, _delta: &str) {}
}

/// An activity's [`Activity::wrote`] as the gateway's text sink.
pub(crate) struct Writes<'a>(pub(crate) &'a dyn Activity);

impl TextSink for Writes<'_> {
    fn text(&self, delta: &str) {
        self.0.wrote(delta);
    }
}

/// Nobody watches.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unwatched;

#[async_trait]
impl Activity for Unwatched {
    async fn doing(&self, _: &str) {}
}

/// A model whose tool calls are told to `activity` before they run.
pub(crate) struct Watched<'a, M> {
    pub(crate) model: &'a M,
    pub(crate) activity: &'a dyn Activity,
}

#[async_trait]
impl<M: ChatModel> ChatModel for Watched<'_, M> {
    type Error = M::Error;

    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<AssistantReply, M::Error> {
        let reply = self.model.complete(messages, tools).await?;
        if let Some(call) = reply.tool_calls.first() {
            self.activity.doing(&status(call)).await;
        }
        Ok(reply)
    }
}

/// The status line for a tool call of the PM's: "is reading src/app.py…".
pub fn status(call: &ToolCall) -> String {
    let args: serde_json::Value =
        serde_json::from_str(&call.function.arguments).unwrap_or(serde_json::Value::Null);
    let arg = |key: &str| {
        args.get(key)
            .and_then(|v| v.as_str())
            .map(|t| plain_line(t, MAX_STATUS_CHARS))
    };
    let doing = match (call.function.name.as_str(), arg("path"), arg("pattern")) {
        ("ReadFile", Some(path), _) => format!("is reading {path}"),
        ("Grep", _, Some(pattern)) => format!("is searching for {pattern}"),
        ("ListFiles", Some(path), _) => format!("is listing {path}"),
        ("ListFiles", None, _) => "is listing the files".to_owned(),
        ("GitLog", _, _) => "is reading the history".to_owned(),
        ("GitDiff", _, _) => "is reading a diff".to_owned(),
        ("ReadMemory", _, _) => "is reading the project's memory".to_owned(),
        ("ListThreads", _, _) => "is looking at the other threads".to_owned(),
        ("GHStatus", _, _) => "is checking GitHub".to_owned(),
        ("ProposePlan", _, _) => "is writing a plan".to_owned(),
        _ => "is working".to_owned(),
    };
    let mut line: String = doing.chars().take(MAX_STATUS_CHARS).collect();
    line.push('…');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_agent::conversation::FunctionCall;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }

    #[test]
    fn a_tool_call_is_said_in_a_few_words() {
        assert_eq!(
            status(&call("ReadFile", r#"{"path":"widgets/inventory.py"}"#)),
            "is reading widgets/inventory.py…"
        );
        assert_eq!(
            status(&call("Grep", r#"{"pattern":"RESTOCK"}"#)),
            "is searching for RESTOCK…"
        );
        assert_eq!(status(&call("ListFiles", "{}")), "is listing the files…");
        assert_eq!(status(&call("ProposePlan", "{}")), "is writing a plan…");
        assert_eq!(status(&call("ReadFile", "not json")), "is working…");
    }

    #[test]
    fn a_models_words_cannot_mention_or_link_or_run_long() {
        assert_eq!(
            status(&call(
                "Grep",
                r#"{"pattern":"<!channel> <https://evil.example|x>\nsecond line"}"#
            )),
            "is searching for !channel https://evil.example|x second line…"
        );
        let long = format!(r#"{{"path":"{}"}}"#, "a".repeat(500));
        assert_eq!(
            status(&call("ReadFile", &long)).chars().count(),
            MAX_STATUS_CHARS + 1
        );
    }
}
