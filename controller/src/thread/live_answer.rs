//! The PM's answer streamed into the thread as the model writes it (`chat.startStream`,
//! `chat.appendStream`, `chat.stopStream`), ending as exactly the message the plain path
//! would post.
//!
//! The text shown while it streams is the model's raw words made inert (no mention or link
//! can fire); when the turn is recorded, the streamed message is updated to the first
//! message of the rendered reply, through the outbox like any other effect, and the rest of
//! the reply (its other messages past Slack's length, its snippets) is posted after it. So
//! what the thread keeps is the renderer's output, whether it was streamed or not.
//!
//! Exactly once: as soon as Slack made the message, its ts is recorded as the delivered
//! outbox effect `stream-<message ts>/0` ([`crate::store::Store::record_shown`]). A turn that
//! finds that record (the process restarted mid-stream, or the message is retried after a
//! failure) streams nothing new: its answer replaces the recorded message. Before the stream
//! is started the thread's step `stream-start-<message ts>` is marked; a turn that finds the
//! step without the record (a crash between Slack making the message and the record) reads
//! the thread once and takes the bot's first message since the person's that names no
//! outbox effect and no record knows — the streamed one, as Slack makes it without metadata
//! — as its own.
//!
//! Where streaming is off or Slack refuses it (remembered per channel by the sender), the
//! turn posts its answer the plain way.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::domain::{IncomingMessage, ThreadKey};
use crate::slack::api::Sender;
use crate::slack::assistant::{Chunk, Feature, StreamRef};
use crate::slack::effects::{Effect, Effects, MessageRef};
use crate::slack::format::escape_text;
use crate::store::{Change, Store};

/// Least time between two additions to a streamed message: what arrives meanwhile goes in
/// the next one.
const APPEND_INTERVAL: Duration = Duration::from_millis(250);
/// The most characters of the model's text in one addition (Slack takes 12,000 per call,
/// and the text is escaped first).
const APPEND_CHARS: usize = 2_000;

/// The outbox id under which the message streamed for `msg` is recorded.
fn stream_id(msg: &IncomingMessage) -> String {
    Effects::named(format!("stream-{}", msg.ts), &msg.thread()).id(0)
}

/// The thread's step marked before a stream for `msg` is started.
fn start_step(msg: &IncomingMessage) -> String {
    format!("stream-start-{}", msg.ts)
}

/// The streamed answer to one message.
pub(super) struct LiveAnswer {
    sender: Sender,
    /// The outbox id of the streamed message.
    id: String,
    mode: Mode,
}

enum Mode {
    /// Streaming in this turn: the model's text goes to the writer.
    Writing {
        text: mpsc::UnboundedSender<String>,
        writer: JoinHandle<Option<StreamRef>>,
    },
    /// A message an earlier attempt streamed: the answer replaces it.
    Shown(StreamRef),
}

impl LiveAnswer {
    /// The streamed answer to `msg`: the message an earlier attempt streamed, if one did;
    /// else a new stream, started when the model writes its first words, where streaming
    /// is available; else `None` (the plain path).
    pub(super) async fn begin(
        sender: &Sender,
        store: &Store,
        msg: &IncomingMessage,
    ) -> Option<Self> {
        let thread = msg.thread();
        let id = stream_id(msg);
        match store.intent(&id).await {
            Ok(Some(shown)) => {
                if let Some(ts) = shown.ts {
                    return Some(Self::shown(sender, id, thread, ts));
                }
            }
            Ok(None) => {
                if let Some(ts) = unrecorded_stream(sender, store, msg).await {
                    let record = Effects::named(group_of(&id), &thread).push(Effect::Post {
                        text: String::new(),
                        blocks: None,
                    });
                    if let Some(intent) = record.intents().first()
                        && let Err(e) = store.record_shown(intent, &ts).await
                    {
                        tracing::warn!(thread = %thread, "record the streamed answer {ts}: {e}");
                    }
                    return Some(Self::shown(sender, id, thread, ts));
                }
            }
            Err(e) => {
                tracing::warn!(thread = %thread, "read whether {} was streamed: {e}; answering the plain way", msg.ts);
                return None;
            }
        }
        if !sender
            .surface()
            .available(Feature::Streaming, &thread.channel)
        {
            return None;
        }
        let (text, arrivals) = mpsc::unbounded_channel();
        let writer = Writer {
            sender: sender.clone(),
            store: store.clone(),
            thread,
            recipient: msg.user.clone(),
            id: id.clone(),
            start_step: start_step(msg),
        };
        Some(Self {
            sender: sender.clone(),
            id,
            mode: Mode::Writing {
                text,
                writer: tokio::spawn(writer.run(arrivals)),
            },
        })
    }

    /// The answer going into the message `ts` an earlier attempt streamed, recorded as `id`.
    fn shown(sender: &Sender, id: String, thread: ThreadKey, ts: String) -> Self {
        Self {
            sender: sender.clone(),
            id,
            mode: Mode::Shown(StreamRef {
                channel: thread.channel,
                ts,
            }),
        }
    }

    /// The model wrote `delta`.
    pub(super) fn wrote(&self, delta: &str) {
        if let Mode::Writing { text, .. } = &self.mode {
            // The writer is gone only when streaming failed: the plain path follows.
            let _ = text.send(delta.to_owned());
        }
    }

    /// Ends the stream and says which message the answer goes into (`None`: no message was
    /// streamed, the answer is posted).
    pub(super) async fn finish(self) -> Option<MessageRef> {
        let stream = match self.mode {
            Mode::Writing { text, writer } => {
                drop(text);
                match writer.await {
                    Ok(Some(stream)) => stream,
                    Ok(None) => return None,
                    Err(e) => {
                        tracing::error!("the streamed answer's writer failed: {e}");
                        return None;
                    }
                }
            }
            Mode::Shown(stream) => stream,
        };
        // An earlier attempt's stream may have ended already; either way it can be updated.
        if let Err(e) = self.sender.stop_stream(&stream, &[]).await {
            tracing::debug!("stop the streamed answer {}: {e}", stream.ts);
        }
        Some(MessageRef::Post(self.id))
    }
}

/// The message a stream for `msg` left in the thread without its ts recorded (a crash
/// between Slack making it and the record), when the step marked before starting it says
/// one may exist: the bot's first message since `msg` that names no outbox effect and that
/// no record of the thread knows. Reads the thread only then.
async fn unrecorded_stream(
    sender: &Sender,
    store: &Store,
    msg: &IncomingMessage,
) -> Option<String> {
    let thread = msg.thread();
    match store.step_done(&thread, &start_step(msg)).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(e) => {
            tracing::warn!(thread = %thread, "read whether a stream was started for {}: {e}", msg.ts);
            return None;
        }
    }
    let marks = match sender
        .thread_marks(&thread.channel, &thread.thread_ts, &msg.ts)
        .await
    {
        Ok(marks) => marks,
        Err(e) => {
            tracing::warn!(thread = %thread, "look for the answer streamed for {}: {e}", msg.ts);
            return None;
        }
    };
    for ts in marks.unmarked_own {
        match store.ts_recorded(&thread, &ts).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(thread = %thread, "the answer to {} was streamed as {ts} before a crash: it is replaced", msg.ts);
                return Some(ts);
            }
            Err(e) => {
                tracing::warn!(thread = %thread, "look for the answer streamed for {}: {e}", msg.ts);
                return None;
            }
        }
    }
    None
}

/// Streams the model's text into a new message of the thread.
struct Writer {
    sender: Sender,
    store: Store,
    thread: ThreadKey,
    recipient: String,
    id: String,
    /// The thread's step marked before the stream starts ([`start_step`]).
    start_step: String,
}

impl Writer {
    /// Starts the message with the first words, records it, then adds what follows until
    /// the text ends. Returns the message, or `None` when none was streamed.
    async fn run(self, mut arrivals: mpsc::UnboundedReceiver<String>) -> Option<StreamRef> {
        let first = arrivals.recv().await?;
        let thread = &self.thread;
        let step = Change::StepDone {
            thread,
            step: &self.start_step,
        };
        if let Err(e) = self.store.commit(&[step], &[]).await {
            tracing::warn!(thread = %thread, "mark the stream's start: {e}; the answer is posted");
            while arrivals.recv().await.is_some() {}
            return None;
        }
        let Some(stream) = self
            .sender
            .start_stream(
                &thread.channel,
                &thread.thread_ts,
                &self.recipient,
                None,
                &inert(&first),
            )
            .await
        else {
            while arrivals.recv().await.is_some() {}
            return None;
        };
        let record = Effects::named(group_of(&self.id), thread).push(Effect::Post {
            text: String::new(),
            blocks: None,
        });
        let recorded = match record.intents().first() {
            Some(intent) => self.store.record_shown(intent, &stream.ts).await,
            None => Ok(()),
        };
        if let Err(e) = recorded {
            tracing::error!(thread = %thread, "record the streamed answer {}: {e}; it is left as it is and the answer posted", stream.ts);
            if let Err(e) = self.sender.stop_stream(&stream, &[]).await {
                tracing::warn!(thread = %thread, "stop the streamed answer: {e}");
            }
            while arrivals.recv().await.is_some() {}
            return None;
        }
        let mut failing = false;
        while let Some(mut text) = arrivals.recv().await {
            while let Ok(more) = arrivals.try_recv() {
                text.push_str(&more);
            }
            if failing {
                continue;
            }
            if let Err(e) = self.sender.append_stream(&stream, &inert(&text)).await {
                // The finished answer replaces the message all the same.
                tracing::warn!(thread = %thread, "add to the streamed answer: {e}");
                failing = true;
            }
            tokio::time::sleep(APPEND_INTERVAL).await;
        }
        Some(stream)
    }
}

/// The group of the outbox id `id` (`<group>/<n>`).
fn group_of(id: &str) -> &str {
    id.rsplit_once('/').map_or(id, |(group, _)| group)
}

/// The model's raw words as streamed text chunks that can neither mention nor link, each
/// small enough for Slack.
fn inert(text: &str) -> Vec<Chunk> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(APPEND_CHARS)
        .map(|piece| Chunk::MarkdownText {
            text: escape_text(&piece.iter().collect::<String>()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_words_are_inert_and_cut_to_slacks_size() {
        let chunks = inert("hi <!channel> & <https://x.example|y>");
        assert_eq!(
            chunks,
            [Chunk::MarkdownText {
                text: "hi &lt;!channel&gt; &amp; &lt;https://x.example|y&gt;".into()
            }]
        );
        let long = "&".repeat(APPEND_CHARS + 1);
        let chunks = inert(&long);
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| match c {
            Chunk::MarkdownText { text } => text.chars().count() <= 12_000,
            _ => false,
        }));
        assert_eq!(group_of("stream-1.2/0"), "stream-1.2");
    }
}
