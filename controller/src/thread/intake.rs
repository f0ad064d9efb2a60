//! Intake: what Slack delivers (messages and button clicks) is stored as a message of its
//! thread before the event is acknowledged, then the thread's task is woken
//! ([`crate::dispatch`]). Duplicate deliveries are stored once and wake nothing. Files
//! shared on a message are stored with it, to be fetched when its thread handles it
//! (fetching them here would hold the event's acknowledgement).
//!
//! A direct message to the bot, a mention of it in another channel and the replies in that
//! mention's thread are stored the same way, as read-only conversations
//! ([`crate::thread::conversation`]); a mention in another channel arrives twice (as
//! `app_mention` and as `message`), and the two share one ts, so it is stored once.
//!
//! A reaction with the request emoji (`triggers.reaction`, [`ReactionTrigger`]) by someone
//! allowed in the channel makes the message it is on a request: the message is read back
//! from Slack (the event carries only its ts) and stored under its own ts, as the reacter's,
//! in its own thread — so a second reaction, a redelivery, or a message that already was a
//! request stores nothing new. A reaction by someone not allowed does nothing.

use async_trait::async_trait;
use slack_morphism::prelude::{
    SlackEventCallbackBody, SlackInteractionEvent, SlackPushEventCallback,
};

use crate::dispatch::Dispatcher;
use crate::domain::{IncomingMessage, Origin};
use crate::slack::api::{Sender, SlackError};
use crate::slack::intake::{
    Intake, IntakeFilter, ReactionRequest, classify, classify_elsewhere, classify_reaction,
    reaction_request_text, shared_files,
};
use crate::slack::socket::{EventSink, NotStored, SlashCommand};
use crate::store::Store;
use crate::thread::pm_turn::preview;
use crate::thread::slash_command::{COMMAND, SlashCommands};

/// Stores accepted events before they are acknowledged and wakes their thread.
#[derive(Debug)]
pub struct IntakeSink {
    pub filter: IntakeFilter,
    pub store: Store,
    pub dispatcher: Dispatcher,
    /// The reaction that makes a message a request; `None`: reactions start nothing.
    pub reaction: Option<ReactionTrigger>,
    /// The `/codebutler` command's answers.
    pub commands: SlashCommands,
}

/// The request emoji and what taking a reaction needs: who may ask, and Slack to read the
/// message reacted to.
#[derive(Debug)]
pub struct ReactionTrigger {
    /// The emoji's name, without colons (`triggers.reaction`).
    pub emoji: String,
    /// `access.allowedUsers`: who may ask (empty: everyone in the channel).
    pub allowed_users: Vec<String>,
    /// Reads the message reacted to.
    pub sender: Sender,
}

/// Whether the service vouched for an event as a conversation of this repository (one
/// whose repository was chosen for it): then a reply in a mention's thread is taken though
/// the store has not seen the thread yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vouched {
    Yes,
    No,
}

/// Pages of a thread read to find the message reacted to (a reply deep in a long thread).
const REACTED_MESSAGE_PAGES: usize = 20;

/// Why a reaction could not be taken: it is left unacknowledged, for Slack to deliver again.
#[derive(Debug, thiserror::Error)]
#[error("read the message reacted to: {0}")]
struct ReadReacted(#[source] SlackError);

#[async_trait]
impl EventSink for IntakeSink {
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        self.take(event, Vouched::No).await
    }

    /// A conversation's event the service routed here: its thread is this repository's.
    async fn accept_conversation(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        self.take(event, Vouched::Yes).await
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

    /// `/codebutler` is answered from the store; another app's command is not ours.
    async fn command(&self, command: SlashCommand) -> String {
        if command.command != COMMAND {
            return format!("{} is not CodeButler's command.", command.command);
        }
        tracing::info!(
            tag = "CMD",
            "{}: {COMMAND} {:?}",
            command.user,
            preview(&command.text)
        );
        match self
            .commands
            .answer(
                &command.channel,
                &command.user,
                &command.text,
                chrono::Utc::now(),
            )
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!("{e}");
                "CodeButler could not read its records just now: try again in a moment.".to_owned()
            }
        }
    }
}

impl IntakeSink {
    /// Stores a push event's message (or takes its reaction); `vouched`: the service routed
    /// it here as a conversation of this repository.
    async fn take(&self, event: SlackPushEventCallback, vouched: Vouched) -> Result<(), NotStored> {
        if let (Some(trigger), SlackEventCallbackBody::ReactionAdded(_)) =
            (&self.reaction, &event.event)
        {
            return match classify_reaction(&event, &self.filter, &trigger.emoji) {
                Ok(request) => self.accept_reaction(trigger, request, &event).await,
                Err(reason) => {
                    tracing::debug!(event = %event.event_id.0, "ignored reaction: {reason}");
                    Ok(())
                }
            };
        }
        let msg = match classify(&event, &self.filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(reason) => match self.elsewhere(&event, vouched).await? {
                Some(msg) => msg,
                None => {
                    tracing::debug!(event = %event.event_id.0, "ignored event: {reason}");
                    return Ok(());
                }
            },
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

    /// A conversation's message outside the channel: a mention of the bot in another
    /// channel, or a reply in a thread where it was mentioned before (a thread the store
    /// holds, or one the service vouched for). A mention and its `message` event share their
    /// ts, so whichever comes second is a duplicate of the first.
    async fn elsewhere(
        &self,
        event: &SlackPushEventCallback,
        vouched: Vouched,
    ) -> Result<Option<IncomingMessage>, NotStored> {
        let msg = match classify_elsewhere(event, &self.filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(_) => return Ok(None),
        };
        let mention = matches!(&event.event, SlackEventCallbackBody::AppMention(_));
        if mention || vouched == Vouched::Yes {
            return Ok(Some(msg));
        }
        let known = self
            .store
            .has_thread(&msg.thread())
            .await
            .map_err(|e| NotStored::new("message", &msg.ts, e))?;
        Ok(known.then_some(msg))
    }

    /// Takes a reaction asking for a request: by someone allowed, on a message Slack still
    /// has with some text, stored under the message's own ts as the reacter's.
    async fn accept_reaction(
        &self,
        trigger: &ReactionTrigger,
        request: ReactionRequest,
        event: &SlackPushEventCallback,
    ) -> Result<(), NotStored> {
        let allowed =
            trigger.allowed_users.is_empty() || trigger.allowed_users.contains(&request.user);
        if !allowed {
            tracing::info!(
                "{} reacted :{}: but is not in access.allowedUsers: no request",
                request.user,
                trigger.emoji
            );
            return Ok(());
        }
        let found = trigger
            .sender
            .find_message(&request.channel, &request.ts, REACTED_MESSAGE_PAGES)
            .await
            .map_err(|e| NotStored::new("reaction", &request.ts, ReadReacted(e)))?;
        let Some(message) = found.filter(|m| !m.text.trim().is_empty()) else {
            tracing::debug!(event = %event.event_id.0, "ignored reaction: no message text");
            return Ok(());
        };
        if message.user.as_deref() == Some(self.filter.bot_user_id.as_str()) {
            tracing::debug!(event = %event.event_id.0, "ignored reaction: the bot's own post");
            return Ok(());
        }
        let author = message.user.as_deref().filter(|_| message.bot_id.is_none());
        let msg = IncomingMessage {
            channel: request.channel.clone(),
            ts: request.ts.clone(),
            thread_ts: message.thread_ts.clone().unwrap_or(request.ts.clone()),
            user: request.user.clone(),
            text: reaction_request_text(&request.user, &trigger.emoji, author, &message.text),
            event_id: Some(event.event_id.0.clone()),
            origin: Origin::Person,
        };
        let new = self
            .store
            .record_message(&msg)
            .await
            .map_err(|e| NotStored::new("reaction", &msg.ts, e))?;
        if new {
            crate::metrics::metrics().messages_received.inc();
            tracing::info!(
                tag = "MSG",
                "{}: made a message a request :{}:",
                msg.user,
                trigger.emoji
            );
            self.dispatcher.notify(&msg.thread());
        } else {
            tracing::debug!(event = %event.event_id.0, "message {} is a request already", msg.ts);
        }
        Ok(())
    }
}
