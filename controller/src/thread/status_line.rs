//! The thread's status line while the PM works: "is thinking…" when its turn starts, then
//! what it is doing ("is reading widgets/inventory.py…") before each tool runs, through
//! Slack's `assistant.threads.setStatus`. Slack clears it when the answer is posted; a turn
//! that posts nothing clears it itself. Where Slack shows no status (the surface off, or not
//! available in the channel) the turn falls back to the 👀 reaction.

use async_trait::async_trait;

use crate::domain::ThreadKey;
use crate::pm::activity::{Activity, THINKING};
use crate::slack::api::Sender;

/// A thread's status line for one PM turn.
pub(super) struct StatusLine<'a> {
    sender: &'a Sender,
    thread: ThreadKey,
    shown: bool,
}

impl<'a> StatusLine<'a> {
    /// Shows "is thinking…" under `thread`, if Slack can.
    pub(super) async fn start(sender: &'a Sender, thread: &ThreadKey) -> Self {
        let shown = sender
            .show_status(&thread.channel, &thread.thread_ts, THINKING)
            .await;
        Self {
            sender,
            thread: thread.clone(),
            shown,
        }
    }

    /// Whether Slack shows the status (else the turn says so with 👀).
    pub(super) fn shown(&self) -> bool {
        self.shown
    }

    /// Clears the status, for a turn that ends without posting (a post clears it anyway).
    pub(super) async fn clear(&self) {
        if self.shown {
            self.sender
                .show_status(&self.thread.channel, &self.thread.thread_ts, "")
                .await;
        }
    }
}

#[async_trait]
impl Activity for StatusLine<'_> {
    async fn doing(&self, status: &str) {
        if self.shown {
            self.sender
                .show_status(&self.thread.channel, &self.thread.thread_ts, status)
                .await;
        }
    }
}
