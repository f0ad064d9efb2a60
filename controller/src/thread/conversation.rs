//! Conversations outside the repository's channel: a direct message to the bot, or a mention
//! of it in another channel (and the replies in that mention's thread). They are stored and
//! answered like a thread of the channel — once, in order, through the outbox — but read-only:
//! the PM answers questions with its read-only tools and can propose nothing, and whatever
//! would start or steer work (an approval word, "merge", "stop", "undo", a budget, a button
//! click) is refused with one line naming the channel where work starts. Who may talk here is
//! who may in the channel (`access.allowedUsers`).
//!
//! [`classify`] is pure and tested as a table; [`ThreadHandler::converse`] applies it.

use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, Origin, Role};
use crate::gateway::budget::parse_budget_command;
use crate::thread::approval::{is_approval, is_rebase, is_stop, is_undo};
use crate::thread::close_plan::close_word;
use crate::thread::handler::{Settle, ThreadHandler};
use crate::thread::replies;

/// What a message of a conversation asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A question or a request: the PM answers it, read-only.
    Answer,
    /// Words that start or steer work, or a button click: refused, naming the channel.
    Work,
    /// Its author is not allowed in the repository's channel.
    NotAllowed,
    /// A message of the controller's own (none is expected here): nothing to do.
    Nothing,
}

/// What `msg` asks, its author `allowed` or not in the repository's channel.
pub fn classify(msg: &IncomingMessage, allowed: bool) -> Asked {
    match msg.origin {
        Origin::Person => {}
        Origin::Click => return Asked::Work,
        Origin::Notice | Origin::Watcher => return Asked::Nothing,
    }
    if !allowed {
        return Asked::NotAllowed;
    }
    let text = msg.text.as_str();
    let steers = is_approval(text)
        || is_stop(text)
        || is_undo(text)
        || is_rebase(text)
        || close_word(text).is_some()
        || parse_budget_command(text).is_some();
    if steers { Asked::Work } else { Asked::Answer }
}

/// The one line refusing work outside `channel`.
pub fn work_starts_in(channel: &str) -> String {
    format!(
        "Work starts in <#{channel}> — take this plan there: nothing is started, approved or \
         merged from here."
    )
}

impl ThreadHandler {
    /// Handles a message of a conversation outside the repository's channel.
    pub(super) async fn converse(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        let allowed = self.allows(&msg.user);
        let thread = msg.thread();
        match classify(msg, allowed) {
            Asked::Answer => self.ask_pm_in_conversation(msg, cancel).await,
            Asked::Work => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → work asked outside the channel: refused"
                );
                self.answer(msg, Role::Pm, &work_starts_in(&self.channel))
                    .await
            }
            Asked::NotAllowed => {
                tracing::info!(
                    tag = "PM",
                    "thread {thread} → {} is not in access.allowedUsers",
                    msg.user
                );
                self.answer(msg, Role::Pm, replies::NOT_ALLOWED).await
            }
            Asked::Nothing => Settle::Processed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str, origin: Origin) -> IncomingMessage {
        IncomingMessage {
            channel: "D1".into(),
            ts: "1.2".into(),
            thread_ts: "1.1".into(),
            user: "U1".into(),
            text: text.into(),
            event_id: None,
            origin,
        }
    }

    #[test]
    fn questions_are_answered_and_work_is_refused() {
        let cases = [
            ("how do we deploy?", Origin::Person, true, Asked::Answer),
            (
                "add a --dry-run flag to deploy",
                Origin::Person,
                true,
                Asked::Answer,
            ),
            ("yes", Origin::Person, true, Asked::Work),
            ("<@UBOT> lgtm", Origin::Person, true, Asked::Work),
            ("merge", Origin::Person, true, Asked::Work),
            ("stop", Origin::Person, true, Asked::Work),
            ("undo", Origin::Person, true, Asked::Work),
            ("budget $5", Origin::Person, true, Asked::Work),
            (
                "<codebutler:click approve 1.1 x>",
                Origin::Click,
                true,
                Asked::Work,
            ),
            (
                "how do we deploy?",
                Origin::Person,
                false,
                Asked::NotAllowed,
            ),
            ("notice", Origin::Notice, true, Asked::Nothing),
        ];
        for (text, origin, allowed, asked) in cases {
            assert_eq!(classify(&said(text, origin), allowed), asked, "{text:?}");
        }
    }

    #[test]
    fn the_refusal_names_the_channel() {
        assert!(work_starts_in("C1").starts_with("Work starts in <#C1> — take this plan there"));
    }
}
