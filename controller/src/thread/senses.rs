//! What a person's message carries besides its typed text, made readable once, before
//! anything reads the message: its voice notes heard ([`crate::pm::voice`]) and its shared
//! files fetched ([`crate::pm::attachments`]). The handler does this first for every person's
//! message, in the repository's channel and in a conversation outside it, so the thread's
//! rules read the transcript: "yes" said in a voice note approves as a typed "yes" does (with
//! the same access rules), "stop" said stops, and a message for a running Coder carries its
//! transcript and its files. The PM's turn, the Artist and the running Coder then use what
//! was heard and fetched here and hear nothing themselves.
//!
//! Hearing is recorded in one commit with the message's new text, each clip's state, the
//! thread's "🎙️ heard" line and the step `voice:<ts>`, so a retry or a restart neither
//! transcribes again (nor counts its cost twice) nor says it twice; a file is fetched once
//! (a retry finds it stored or refused).

use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, Origin};
use crate::pm::voice::{HearError, heard_line};
use crate::slack::effects::{Effect, Effects};
use crate::store::Change;
use crate::thread::handler::{Settle, ThreadHandler};

impl ThreadHandler {
    /// `msg` as the thread's rules read it: its voice notes heard (their transcripts are its
    /// text from now on) and its shared files fetched, each once. A message that is not a
    /// person's carries no files, and one whose author is not in `access.allowedUsers` is
    /// refused whatever it says: both are returned as they are. `Err`: what is left to record of
    /// the message (it failed, to be handled again; or the daemon stops).
    pub(super) async fn perceive(
        &self,
        msg: IncomingMessage,
        cancel: &CancellationToken,
    ) -> Result<IncomingMessage, Settle> {
        // Someone not allowed here is refused on what they typed: nothing of theirs is
        // downloaded or transcribed (at the repository's cost).
        let allowed = self.allows(&msg.user);
        if msg.origin != Origin::Person || !allowed {
            return Ok(msg);
        }
        let msg = match self.hear(&msg, cancel).await? {
            Some(heard) => heard,
            None => msg,
        };
        if let Err(e) = self.pm.attachments.fetch(&self.store, &msg).await {
            tracing::error!(thread = %msg.thread(), "fetch the files of message {}: {e}", msg.ts);
            return Err(Settle::Failed);
        }
        Ok(msg)
    }

    /// Hears the voice notes shared on `msg`, once: the message's new text (its
    /// transcripts), each clip's state and the thread's "heard" line are recorded in one
    /// commit with the step `voice:<ts>`. Returns the message with its new text, or `None`
    /// when it had no voice note left to hear.
    async fn hear(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Result<Option<IncomingMessage>, Settle> {
        let thread = msg.thread();
        let heard = match self.pm.attachments.hear(&self.store, msg, cancel).await {
            Ok(Some(heard)) => heard,
            Ok(None) => return Ok(None),
            Err(HearError::Cancelled) => return Err(Settle::Settled),
            Err(e) => {
                tracing::error!(thread = %thread, "hear the voice notes of message {}: {e}", msg.ts);
                return Err(Settle::Failed);
            }
        };
        let step = format!("voice:{}", msg.ts);
        let changes = [
            Change::StepDone {
                thread: &thread,
                step: &step,
            },
            Change::Heard {
                msg,
                text: &heard.text,
                files: &heard.files,
            },
        ];
        let mut effects = Effects::new(&thread);
        if !heard.transcripts.is_empty() {
            effects = effects.push(Effect::Post {
                text: heard_line(&heard.transcripts),
                blocks: None,
            });
        }
        match self.outbox.commit(&changes, &effects).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(thread = %thread, "the voice notes of message {} were recorded elsewhere; it is read again", msg.ts);
                return Err(Settle::Failed);
            }
            Err(e) => {
                tracing::error!(thread = %thread, "record the voice notes of message {}: {e}", msg.ts);
                return Err(Settle::Failed);
            }
        }
        Ok(Some(IncomingMessage {
            text: heard.text,
            ..msg.clone()
        }))
    }
}
