//! What the fake Slack records, and how a test reads it: every Web API call, the posts,
//! updates, reactions and uploads the client made, the acks it sent, the connections it
//! opened, and the protocol problems seen on its side.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::wait_until;

use super::FakeSlack;

/// One Web API call (or one upload to an upload URL, recorded as method `"upload"`).
#[derive(Debug, Clone)]
pub struct Call {
    /// The Slack method, e.g. `"chat.postMessage"`.
    pub method: String,
    /// `GET` or `POST`.
    pub http_method: String,
    /// Query-string and body parameters merged into one JSON object (form and query values are
    /// strings; JSON bodies keep their types).
    pub params: Value,
    /// When the request arrived.
    pub at: Instant,
    /// The `error` the fake answered with (`None` when it answered `ok:true`).
    pub error: Option<String>,
}

/// A message the bot posted with `chat.postMessage`.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    /// `text` as sent (empty if only blocks were sent).
    pub text: String,
    /// `blocks` as Slack keeps them (a `block_id` on every block), if any.
    pub blocks: Option<Value>,
    /// The `metadata` (`{event_type, event_payload}`) the post carried, if any.
    pub metadata: Option<Value>,
}

/// A successful `chat.update`.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub blocks: Option<Value>,
}

/// A reaction the bot added (`reactions.add`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reaction {
    pub channel: String,
    pub ts: String,
    pub name: String,
}

/// A file shared through `files.getUploadURLExternal` → upload → `files.completeUploadExternal`.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub file_id: String,
    pub filename: String,
    /// The title given to `files.completeUploadExternal`, else the filename (as Slack does).
    pub title: String,
    /// The uploaded bytes, as (lossy) UTF-8.
    pub content: String,
    /// The uploaded bytes, exactly (an image's).
    pub bytes: Vec<u8>,
    /// `channel_id` (or the first of `channels`); `None` for a private, unshared file.
    pub channel: Option<String>,
    pub thread_ts: Option<String>,
    pub initial_comment: Option<String>,
}

/// An acknowledgement the client sent over Socket Mode.
#[derive(Debug, Clone)]
pub struct Ack {
    pub envelope_id: String,
    /// When the fake received it.
    pub at: Instant,
    /// The `payload` of the ack, if any (slash commands, interactions).
    pub payload: Option<Value>,
}

/// What `user_message`/`send_event` sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The event's `ts` (the message ts), else its `event_ts`.
    pub ts: String,
    pub envelope_id: String,
    pub event_id: String,
}

impl FakeSlack {
    /// The people's messages the fake sent in `channel` as events, each counted once however
    /// often it was delivered (resent, retried).
    pub fn user_messages_sent(&self, channel: &str) -> usize {
        self.inner
            .lock()
            .messages
            .iter()
            .filter(|((c, _), m)| c == channel && m.user.is_some() && !m.from_bot)
            .count()
    }

    /// Waits until at least one socket is connected and has received `hello`.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        wait_until(timeout, || !self.inner.lock().conns.is_empty()).await
    }

    /// How many websocket connections were accepted so far.
    pub fn connections_opened(&self) -> usize {
        self.inner.lock().connections_opened
    }

    /// How many `hello` messages were sent so far.
    pub fn hellos_sent(&self) -> usize {
        self.inner.lock().hellos
    }

    /// How many sockets are open now.
    pub fn open_connections(&self) -> usize {
        self.inner.lock().conns.len()
    }

    /// Every Web API call, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().calls.clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.inner
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Successful `chat.postMessage` calls, in order.
    pub fn posts(&self) -> Vec<Post> {
        self.inner.lock().posts.clone()
    }

    /// Successful `chat.update` calls, in order.
    pub fn updates(&self) -> Vec<Update> {
        self.inner.lock().updates.clone()
    }

    /// Every successful `reactions.add`, in order (including reactions removed later).
    pub fn reactions(&self) -> Vec<Reaction> {
        self.inner.lock().reactions_log.clone()
    }

    /// The reactions in place now (adds minus removes).
    pub fn current_reactions(&self) -> Vec<Reaction> {
        self.inner.lock().reactions_now.clone()
    }

    /// Completed uploads (`files.completeUploadExternal`), one per file.
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().uploads.clone()
    }

    /// Every ack received, in order.
    pub fn acks(&self) -> Vec<Ack> {
        self.inner.lock().acks.clone()
    }

    /// Whether `envelope_id` was acked.
    pub fn is_acked(&self, envelope_id: &str) -> bool {
        self.inner
            .lock()
            .acks
            .iter()
            .any(|a| a.envelope_id == envelope_id)
    }

    /// Waits until `envelope_id` is acked.
    pub async fn wait_acked(&self, envelope_id: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.is_acked(envelope_id)).await
    }

    /// When the envelope was first written to a socket (or created, if still queued).
    pub fn sent_at(&self, envelope_id: &str) -> Instant {
        let st = self.inner.lock();
        let rec = st
            .envelopes
            .get(envelope_id)
            .unwrap_or_else(|| panic!("FakeSlack::sent_at: unknown envelope {envelope_id}"));
        rec.first_sent.unwrap_or(rec.created)
    }

    /// Protocol problems seen on the client side: acks of unknown envelopes, unparsable or binary
    /// frames, uploads whose size differs from the announced `length`. Tests assert it is empty.
    pub fn violations(&self) -> Vec<String> {
        self.inner.lock().violations.clone()
    }

    /// Polls `condition` every ~20 ms until it holds or `timeout` passes.
    pub async fn wait_until(&self, timeout: Duration, condition: impl FnMut() -> bool) -> bool {
        wait_until(timeout, condition).await
    }

    /// Waits until at least `n` messages were posted and returns all posts; panics on timeout
    /// with the calls seen so far.
    pub async fn wait_posts(&self, n: usize, timeout: Duration) -> Vec<Post> {
        if wait_until(timeout, || self.inner.lock().posts.len() >= n).await {
            return self.posts();
        }
        panic!(
            "FakeSlack: expected {n} posts within {timeout:?}, got {}: {:#?}\ncalls: {:#?}",
            self.posts().len(),
            self.posts(),
            self.calls()
                .iter()
                .map(|c| format!("{} {} -> {:?}", c.method, c.params, c.error))
                .collect::<Vec<_>>()
        );
    }
}
