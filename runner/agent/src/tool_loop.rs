//! The provider-agnostic tool loop: call the model with the conversation and the tools,
//! run the tool calls it asks for, append the results, and repeat until it answers in
//! text. After `max_iterations` model calls that still asked for tools, one last call
//! without tools forces a text answer.
//!
//! People may write again while the loop works (a request typed as several quick
//! messages): [`run_tool_loop_with`] takes what arrived ([`Arrivals`]) into the conversation
//! before every model call and once more when the model answers; an answer written before
//! the last of them arrived is dropped and asked again, so the one answer addresses them
//! all, as the Coder sees messages between its turns.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::conversation::{ChatMessage, ToolCall, ToolSpec};
use crate::tool::ToolRegistry;

/// The model's reply to one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantReply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
}

/// One chat completion. The controller implements it with its gateway (which holds the key,
/// retries and records usage); tests implement it with a script.
#[async_trait]
pub trait ChatModel: Send + Sync {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Completes `messages` (system prompt first), offering `tools` (none when empty).
    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<AssistantReply, Self::Error>;
}

/// Limits of one run of the loop.
#[derive(Clone, Copy, Debug)]
pub struct LoopLimits {
    /// Model calls that may ask for tools before the final tool-less call.
    pub max_iterations: usize,
}

/// What a run of the loop produced.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopOutcome {
    /// Messages to append to the conversation: assistant tool calls, tool results and the
    /// final answer, in order.
    pub new_messages: Vec<ChatMessage>,
    /// The final answer's text.
    pub answer: String,
    /// Tool calls executed.
    pub tool_calls: usize,
    /// Whether the iteration limit forced the final tool-less call.
    pub forced: bool,
}

/// Why a run of the loop stopped without an answer.
#[derive(Debug, thiserror::Error)]
pub enum LoopError<E: std::error::Error + 'static> {
    #[error("model call failed: {0}")]
    Model(#[source] E),
    #[error("cancelled")]
    Cancelled,
}

/// Messages that arrive while the loop runs: people writing again in the conversation.
#[async_trait]
pub trait Arrivals: Send + Sync {
    /// The messages that arrived since the last call, oldest first, as the conversation's
    /// user messages; empty when none did. What it returns is the loop's from then on.
    async fn take(&self) -> Vec<ChatMessage>;
}

/// No message ever arrives: the loop answers what it was given.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoArrivals;

#[async_trait]
impl Arrivals for NoArrivals {
    async fn take(&self) -> Vec<ChatMessage> {
        Vec::new()
    }
}

/// Runs the loop over `system` + `history` (the stored conversation, ending with the new
/// user message). Only the new messages are returned, so the caller decides what to store.
pub async fn run_tool_loop<M: ChatModel>(
    model: &M,
    tools: &ToolRegistry,
    system: &str,
    history: &[ChatMessage],
    limits: LoopLimits,
    cancel: &CancellationToken,
) -> Result<LoopOutcome, LoopError<M::Error>> {
    run_tool_loop_with(model, tools, system, history, limits, &NoArrivals, cancel).await
}

/// [`run_tool_loop`], taking the messages that arrive meanwhile ([`Arrivals::take`]) into
/// the conversation before every model call and once more when the model answers in text:
/// an answer given before messages arrived is dropped (it never saw them) and the model is
/// asked again, within the same `max_iterations`. The messages taken are among the new
/// messages returned, where they arrived.
pub async fn run_tool_loop_with<M: ChatModel>(
    model: &M,
    tools: &ToolRegistry,
    system: &str,
    history: &[ChatMessage],
    limits: LoopLimits,
    arrivals: &dyn Arrivals,
    cancel: &CancellationToken,
) -> Result<LoopOutcome, LoopError<M::Error>> {
    let specs = tools.specs();
    let mut messages = Vec::with_capacity(history.len() + 1);
    messages.push(ChatMessage::system(system));
    messages.extend_from_slice(history);
    let first_new = messages.len();
    let mut tool_calls = 0;

    for _ in 0..limits.max_iterations {
        messages.extend(arrivals.take().await);
        let reply = call(model, &messages, &specs, cancel).await?;
        if reply.tool_calls.is_empty() {
            let late = arrivals.take().await;
            if !late.is_empty() {
                // Written before these arrived: ask again with them.
                messages.extend(late);
                continue;
            }
            let answer = reply.content.unwrap_or_default();
            messages.push(ChatMessage::assistant_text(answer.clone()));
            return Ok(outcome(messages, first_new, answer, tool_calls, false));
        }
        tool_calls += reply.tool_calls.len();
        let results = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(LoopError::Cancelled),
            results = tools.execute_all(&reply.tool_calls) => results,
        };
        messages.push(ChatMessage::Assistant {
            content: reply.content,
            tool_calls: reply.tool_calls,
        });
        messages.extend(results);
    }

    messages.extend(arrivals.take().await);
    messages.push(ChatMessage::user(
        "You have used all your tool calls for this message. Answer now with what you found.",
    ));
    let reply = call(model, &messages, &[], cancel).await?;
    let answer = reply.content.unwrap_or_default();
    messages.push(ChatMessage::assistant_text(answer.clone()));
    Ok(outcome(messages, first_new, answer, tool_calls, true))
}

async fn call<M: ChatModel>(
    model: &M,
    messages: &[ChatMessage],
    specs: &[ToolSpec],
    cancel: &CancellationToken,
) -> Result<AssistantReply, LoopError<M::Error>> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(LoopError::Cancelled),
        reply = model.complete(messages, specs) => reply.map_err(LoopError::Model),
    }
}

fn outcome(
    mut messages: Vec<ChatMessage>,
    first_new: usize,
    answer: String,
    tool_calls: usize,
    forced: bool,
) -> LoopOutcome {
    LoopOutcome {
        new_messages: messages.split_off(first_new),
        answer,
        tool_calls,
        forced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::{Exhausted, ScriptedModel as Scripted};
    use crate::tool::{Tool, ToolError};
    use std::sync::Arc;

    /// The (messages, tools offered) of each call `model` got.
    fn calls_seen(model: &Scripted) -> Vec<(usize, usize)> {
        let messages = model.seen().iter().map(Vec::len).collect::<Vec<_>>();
        messages.into_iter().zip(model.offered()).collect()
    }

    struct Upper;

    #[async_trait]
    impl Tool for Upper {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "Upper",
                description: "upper-cases",
                parameters: serde_json::json!({"type":"object"}),
            }
        }
        fn read_only(&self) -> bool {
            true
        }
        async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
            Ok(args["s"].as_str().unwrap_or_default().to_uppercase())
        }
    }

    fn tools() -> ToolRegistry {
        let mut r = ToolRegistry::new(1000);
        r.register(Arc::new(Upper));
        r
    }

    fn calls(n: usize) -> AssistantReply {
        AssistantReply {
            content: None,
            tool_calls: (0..n)
                .map(|i| ToolCall::new(format!("c{i}"), "Upper", r#"{"s":"ab"}"#))
                .collect(),
        }
    }

    fn text(s: &str) -> AssistantReply {
        AssistantReply {
            content: Some(s.into()),
            tool_calls: vec![],
        }
    }

    #[tokio::test]
    async fn runs_tools_then_returns_answer_and_new_messages() {
        let model = Scripted::new(vec![calls(2), text("done")]);
        let history = vec![ChatMessage::user("q")];
        let out = run_tool_loop(
            &model,
            &tools(),
            "sys",
            &history,
            LoopLimits { max_iterations: 15 },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.answer, "done");
        assert_eq!(out.tool_calls, 2);
        assert!(!out.forced);
        // assistant(tool calls), two results, final answer
        assert_eq!(out.new_messages.len(), 4);
        assert_eq!(out.new_messages[1], ChatMessage::tool_result("c0", "AB"));
        assert_eq!(out.new_messages[3], ChatMessage::assistant_text("done"));
        // system + user, then + 3
        assert_eq!(calls_seen(&model), vec![(2, 1), (5, 1)]);
    }

    /// Arrivals a test hands out: the batch for each `take`, in order, then none.
    struct Batches(std::sync::Mutex<std::collections::VecDeque<Vec<&'static str>>>);

    #[async_trait]
    impl Arrivals for Batches {
        async fn take(&self) -> Vec<ChatMessage> {
            let next = self.0.lock().unwrap().pop_front().unwrap_or_default();
            next.into_iter().map(ChatMessage::user).collect()
        }
    }

    fn batches(list: Vec<Vec<&'static str>>) -> Batches {
        Batches(std::sync::Mutex::new(list.into()))
    }

    /// A message that arrives before a model call joins it; one that arrives while the model
    /// answers makes it answer again, so the one answer saw both.
    #[tokio::test]
    async fn messages_that_arrive_join_the_conversation_before_the_answer() {
        let model = Scripted::new(vec![calls(1), text("draft"), text("both")]);
        // Before the first call: nothing; after the tool call, before the second call: "b";
        // when the model answers: "c" (so the draft is dropped); then nothing.
        let arrivals = batches(vec![vec![], vec!["b"], vec!["c"], vec![], vec![]]);
        let out = run_tool_loop_with(
            &model,
            &tools(),
            "sys",
            &[ChatMessage::user("a")],
            LoopLimits { max_iterations: 15 },
            &arrivals,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.answer, "both");
        let seen = model.seen();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[1].last(), Some(&ChatMessage::user("b")));
        assert_eq!(seen[2].last(), Some(&ChatMessage::user("c")));
        assert!(
            !seen[2].contains(&ChatMessage::assistant_text("draft")),
            "the draft is not in the conversation"
        );
        // assistant(tool call), its result, b, c, the answer.
        assert_eq!(out.new_messages.len(), 5);
        assert_eq!(out.new_messages[2], ChatMessage::user("b"));
        assert_eq!(out.new_messages[3], ChatMessage::user("c"));
        assert_eq!(out.new_messages[4], ChatMessage::assistant_text("both"));

        // Nothing arrives: one call, as without arrivals.
        let model = Scripted::new(vec![text("alone")]);
        let out = run_tool_loop_with(
            &model,
            &tools(),
            "sys",
            &[ChatMessage::user("a")],
            LoopLimits { max_iterations: 15 },
            &NoArrivals,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.answer, "alone");
        assert_eq!(model.seen().len(), 1);
    }

    #[tokio::test]
    async fn iteration_limit_forces_a_call_without_tools() {
        let mut script: Vec<_> = (0..3).map(|_| calls(1)).collect();
        script.push(text("forced answer"));
        let model = Scripted::new(script);
        let out = run_tool_loop(
            &model,
            &tools(),
            "sys",
            &[ChatMessage::user("q")],
            LoopLimits { max_iterations: 3 },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(out.forced);
        assert_eq!(out.answer, "forced answer");
        let seen = calls_seen(&model);
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[3].1, 0, "the last call offers no tools");
    }

    #[tokio::test]
    async fn model_error_and_cancel_stop_the_loop() {
        let model = Scripted::new(vec![calls(1)]);
        let err = run_tool_loop(
            &model,
            &tools(),
            "sys",
            &[ChatMessage::user("q")],
            LoopLimits { max_iterations: 15 },
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, LoopError::Model(Exhausted)));

        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = run_tool_loop(
            &Scripted::new(vec![text("x")]),
            &tools(),
            "sys",
            &[ChatMessage::user("q")],
            LoopLimits { max_iterations: 15 },
            &cancel,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, LoopError::Cancelled));
    }
}
