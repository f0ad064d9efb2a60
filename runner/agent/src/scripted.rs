//! A scripted [`ChatModel`] for the tests of the tool loop and of the loops built on it
//! (the runner's Coder): it answers from a script, in order, records every request it gets
//! (the messages, and how many tools were offered), and may take its time over each answer;
//! a script that runs out is an error, as a model that stops answering would be. Built for
//! this crate's tests and, with the feature `test-support`, for other crates' tests. Test
//! code: a poisoned lock panics.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use crate::conversation::{ChatMessage, ToolSpec};
use crate::tool_loop::{AssistantReply, ChatModel};

/// The script ran out: the model was called once more than it had answers for.
#[derive(Debug, thiserror::Error)]
#[error("script exhausted")]
pub struct Exhausted;

/// A model that answers from a script and records what it was asked.
#[derive(Debug)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<AssistantReply>>,
    delay: Duration,
    seen: Mutex<Vec<Vec<ChatMessage>>>,
    offered: Mutex<Vec<usize>>,
}

impl ScriptedModel {
    /// A model that answers `replies`, one a call, at once.
    pub fn new(replies: Vec<AssistantReply>) -> Self {
        Self {
            replies: Mutex::new(replies.into()),
            delay: Duration::ZERO,
            seen: Mutex::new(Vec::new()),
            offered: Mutex::new(Vec::new()),
        }
    }

    /// The same model, taking `delay` over each answer.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The messages of every call so far, in order.
    #[allow(clippy::unwrap_used)]
    pub fn seen(&self) -> Vec<Vec<ChatMessage>> {
        self.seen.lock().unwrap().clone()
    }

    /// How many tools every call so far offered, in order.
    #[allow(clippy::unwrap_used)]
    pub fn offered(&self) -> Vec<usize> {
        self.offered.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    type Error = Exhausted;

    #[allow(clippy::unwrap_used)]
    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<AssistantReply, Exhausted> {
        self.seen.lock().unwrap().push(messages.to_vec());
        self.offered.lock().unwrap().push(tools.len());
        tokio::time::sleep(self.delay).await;
        self.replies.lock().unwrap().pop_front().ok_or(Exhausted)
    }
}
