//! Intake: what Slack delivers (messages and button clicks) is stored as a message of its
//! thread before the event is acknowledged, then the thread's task is woken
//! ([`crate::dispatch`]). Duplicate deliveries are stored once and wake nothing. Files
//! shared on a message are stored with it, to be fetched when its thread handles it
//! (fetching them here would hold the event's acknowledgement).

use async_trait::async_trait;
use slack_morphism::prelude::{SlackInteractionEvent, SlackPushEventCallback};

use crate::dispatch::Dispatcher;
use crate::slack::intake::{Intake, IntakeFilter, classify, shared_files};
use crate::slack::socket::{EventSink, NotStored};
use crate::store::Store;
use crate::thread::pm_turn::preview;

/// Stores accepted events before they are acknowledged and wakes their thread.
#[derive(Debug)]
pub struct IntakeSink {
    pub filter: IntakeFilter,
    pub store: Store,
    pub dispatcher: Dispatcher,
}

#[async_trait]
impl EventSink for IntakeSink {
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        let msg = match classify(&event, &self.filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(reason) => {
                tracing::debug!(event = %event.event_id.0, "ignored event: {reason}");
                return Ok(());
            }
        };
        let files = shared_files(&event);
        let new = self
            .store
            .record_message_with_files(&msg, &files)
            .await
            .map_err(|e| NotStored::new("message", &msg.ts, e))?;
        if !new {
            tracing::debug!(event = %event.event_id.0, "duplicate delivery of message {}", msg.ts);
            return Ok(());
        }
        crate::metrics::metrics().messages_received.inc();
        tracing::info!(tag = "MSG", "{}: {:?}", msg.user, preview(&msg.text));
        self.dispatcher.notify(&msg.thread());
        Ok(())
    }

    /// A button click is stored as a message of its thread, exactly like a typed one.
    async fn accept_interaction(&self, event: SlackInteractionEvent) -> Result<(), NotStored> {
        let msg = match crate::slack::interactive::classify(&event, &self.filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(reason) => {
                tracing::debug!("ignored interaction: {reason}");
                return Ok(());
            }
        };
        let new = self
            .store
            .record_message(&msg)
            .await
            .map_err(|e| NotStored::new("button click", &msg.ts, e))?;
        if new {
            tracing::info!(tag = "MSG", "{}: clicked a button", msg.user);
            self.dispatcher.notify(&msg.thread());
        }
        Ok(())
    }
}
