//! Worktree preparation's progress as `*Coder:*` lines in the approval's thread.

use super::PREFIX;
use crate::domain::IncomingMessage;
use crate::slack::effects::{Effect, Effects};
use crate::slack::format::escape_text;
use crate::slack::outbox::Outbox;
use crate::workspace::worktree;

/// Worktree preparation's progress as `*Coder:*` lines in the approval's thread, and ❌ on
/// the approval when it fails.
pub(super) struct ThreadProgress<'a> {
    pub(super) outbox: &'a Outbox,
    pub(super) approval: &'a IncomingMessage,
}

impl ThreadProgress<'_> {
    /// Says a line without waiting for it to be posted (nothing updates it later).
    pub(super) async fn say(&self, text: &str) {
        let effects = Effects::new(&self.approval.thread()).push(Effect::Post {
            text: format!("{PREFIX}{}", escape_text(text)),
            blocks: None,
        });
        self.send(effects, "preparation progress").await;
    }

    async fn send(&self, effects: Effects, what: &str) {
        if let Err(e) = self.outbox.send(&effects).await {
            tracing::warn!(thread = %self.approval.thread(), "record the {what}: {e}");
        }
    }
}

#[async_trait::async_trait]
impl worktree::Progress for ThreadProgress<'_> {
    async fn post(&self, text: &str) -> Option<String> {
        let effects = Effects::new(&self.approval.thread()).push(Effect::Post {
            text: format!("{PREFIX}{}", escape_text(text)),
            blocks: None,
        });
        self.send(effects.clone(), "preparation progress").await;
        self.outbox.posted(&effects.id(0)).await
    }

    async fn update(&self, handle: &str, text: &str) {
        let a = self.approval;
        let text = format!("{PREFIX}{}", escape_text(text));
        if let Err(e) = self.outbox.sender().update(&a.channel, handle, &text).await {
            tracing::warn!(thread = %a.thread(), "update preparation progress: {e}");
        }
    }

    async fn markdown(&self, markdown: &str) {
        let effects = Effects::new(&self.approval.thread()).reply(markdown, PREFIX);
        self.send(effects, "preparation output").await;
    }

    async fn failed(&self) {
        let a = self.approval;
        self.send(
            Effects::new(&a.thread()).react(&a.ts, "x"),
            "failure reaction",
        )
        .await;
    }
}
