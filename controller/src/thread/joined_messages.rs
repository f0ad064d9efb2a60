//! Messages typed while the PM works on a turn join it. People often type a request as two
//! or three quick messages; each is stored as it arrives (`intake`), and the thread's task
//! handles them one at a time, so without this the PM would answer the first before it saw
//! the second, and then answer again. Instead the PM's tool loop takes the thread's
//! messages stored since its turn began into its conversation before each model call and
//! once more when it answers ([`codebutler_agent::tool_loop::Arrivals`]), as the Coder sees
//! messages between its turns, and the turn is recorded with all of them handled, in one
//! transaction with its answer: the dispatcher never starts a second turn for them, and a
//! daemon stopped mid-turn answers them all once at its next start. A message that comes
//! alone waits for nothing.
//!
//! Only messages the thread would have given the PM join: a person's, classified
//! ([`classify`]) as [`Command::AskPm`] against the thread's state. The first one that is
//! anything else ("yes" to a waiting plan, "stop", a close word, the PR watcher's) stops the
//! taking, so it and everything after it are handled in order once the turn is recorded. A
//! message with files shared on it (a voice note among them) stops the taking too: it is
//! handled on its own once the turn is recorded, where its voice notes are heard and its
//! files fetched before it is classified ([`super::senses`]), so a "yes" said in a voice
//! note approves, and its files reach the PM in a turn of its own
//! ([`crate::pm::attachments`]).

use std::sync::Mutex;

use async_trait::async_trait;

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool_loop::Arrivals;

use crate::domain::{IncomingMessage, Origin};
use crate::thread::command::{Command, classify};
use crate::thread::handler::ThreadHandler;

/// The messages that joined the PM's turn for `first`, in order.
pub(super) struct JoinedMessages<'a> {
    handler: &'a ThreadHandler,
    first: &'a IncomingMessage,
    joined: Mutex<Vec<IncomingMessage>>,
}

impl<'a> JoinedMessages<'a> {
    /// None joined yet the turn for `first`.
    pub(super) fn new(handler: &'a ThreadHandler, first: &'a IncomingMessage) -> Self {
        Self {
            handler,
            first,
            joined: Mutex::new(Vec::new()),
        }
    }

    /// The messages that joined the turn so far, oldest first.
    pub(super) fn joined(&self) -> Vec<IncomingMessage> {
        match self.joined.lock() {
            Ok(joined) => joined.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The ts after which a message has not joined yet.
    fn last_ts(&self) -> String {
        self.joined()
            .last()
            .map_or_else(|| self.first.ts.clone(), |m| m.ts.clone())
    }

    /// Whether the thread would give `msg` to the PM.
    async fn for_the_pm(&self, msg: &IncomingMessage) -> bool {
        if msg.origin != Origin::Person {
            return false;
        }
        match self.handler.store.message_files(msg).await {
            Ok(files) if files.is_empty() => {}
            Ok(_) => return false,
            Err(e) => {
                tracing::warn!(thread = %msg.thread(), "read the files of message {}: {e}", msg.ts);
                return false;
            }
        }
        match self.handler.facts(msg).await {
            Ok(facts) => classify(msg, &facts) == Command::AskPm,
            Err(e) => {
                tracing::warn!(thread = %msg.thread(), "read the thread's state for message {}: {e}", msg.ts);
                false
            }
        }
    }
}

#[async_trait]
impl Arrivals for JoinedMessages<'_> {
    async fn take(&self) -> Vec<ChatMessage> {
        let thread = self.first.thread();
        let waiting = match self
            .handler
            .store
            .pending_after(&thread, &self.last_ts())
            .await
        {
            Ok(waiting) => waiting,
            Err(e) => {
                // They stay pending and get their own turn.
                tracing::warn!(thread = %thread, "read the messages that arrived: {e}");
                return Vec::new();
            }
        };
        let mut taken = Vec::new();
        for msg in waiting {
            if !self.for_the_pm(&msg).await {
                break;
            }
            taken.push(msg);
        }
        if taken.is_empty() {
            return Vec::new();
        }
        tracing::info!(
            tag = "PM",
            "thread {thread} → {} more message(s) joined the pm's turn",
            taken.len()
        );
        let said = taken.iter().map(crate::pm::said).collect();
        match self.joined.lock() {
            Ok(mut joined) => joined.extend(taken),
            Err(poisoned) => poisoned.into_inner().extend(taken),
        }
        said
    }
}
