//! Routes what the one Socket Mode connection delivers to the repository serving its
//! channel. Slack delivers an app's events for every channel the bot is in on the same
//! connections, so one process reads them all and hands each to its repository's sink,
//! which stores it before it is acknowledged. A person opening the app's Home tab is no
//! channel's event: it goes to [`AppHome`]. An event of a channel no repository serves
//! (a direct message, a mention in another channel) goes to the one repository's sink, which
//! answers it read-only; with several repositories it goes to [`Conversations`], which asks
//! which repository the conversation is about. A slash command goes to its channel's
//! repository; typed in a direct message, to the repository of that conversation.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use slack_morphism::prelude::*;

use super::conversations::Conversations;
use super::home::AppHome;
use crate::slack::socket::{EventSink, NotStored, SlashCommand};

/// Channel id → the sink of the repository serving it; and the Home tab, which is no
/// channel's.
pub struct Router {
    routes: HashMap<String, Arc<dyn EventSink>>,
    home: Option<Arc<AppHome>>,
    conversations: Option<Arc<Conversations>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("channels", &self.routes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Router {
    /// A router over `(channel, sink)` pairs (channels are unique: the configuration
    /// checked that).
    pub fn new(routes: impl IntoIterator<Item = (String, Arc<dyn EventSink>)>) -> Self {
        Self {
            routes: routes.into_iter().collect(),
            home: None,
            conversations: None,
        }
    }

    /// The router, handing the conversations outside every repository's channel (direct
    /// messages, mentions elsewhere) to `conversations` when it serves several repositories
    /// (which one a conversation is about is asked there).
    pub fn with_conversations(mut self, conversations: Arc<Conversations>) -> Self {
        self.conversations = Some(conversations);
        self
    }

    /// The router, publishing a person's Home tab when they open it.
    pub fn with_home(mut self, home: Arc<AppHome>) -> Self {
        self.home = Some(home);
        self
    }

    fn sink(&self, channel: Option<&str>) -> Option<&Arc<dyn EventSink>> {
        self.routes.get(channel?)
    }

    /// Where conversations outside every repository's channel go (direct messages, mentions
    /// in other channels): the one repository's sink, which answers them read-only. With
    /// several repositories none: they go to [`Conversations`], which asks which repository.
    fn conversations(&self) -> Option<&Arc<dyn EventSink>> {
        match self.routes.len() {
            1 => self.routes.values().next(),
            _ => None,
        }
    }
}

#[async_trait]
impl EventSink for Router {
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        if let SlackEventCallbackBody::AppHomeOpened(opened) = &event.event {
            // The Messages tab opens with the same event; only the Home tab shows a view.
            if opened.tab.as_deref().unwrap_or("home") == "home"
                && let Some(home) = &self.home
            {
                home.publish_for(opened.user.0.clone());
            }
            return Ok(());
        }
        if let Some(sink) = self.sink(push_channel(&event)) {
            return sink.accept(event).await;
        }
        if let Some(sink) = self.conversations() {
            return sink.accept(event).await;
        }
        match &self.conversations {
            Some(conversations) => conversations.accept(event).await,
            None => {
                tracing::debug!(event = %event.event_id.0, "ignored event: other channel");
                Ok(())
            }
        }
    }

    async fn accept_interaction(&self, event: SlackInteractionEvent) -> Result<(), NotStored> {
        match self.sink(interaction_channel(&event)) {
            Some(sink) => sink.accept_interaction(event).await,
            None => {
                tracing::debug!("ignored interaction: other channel");
                Ok(())
            }
        }
    }

    /// A slash command goes to the repository of the channel it was typed in; in a direct
    /// message, to the repository of that conversation; elsewhere it says which channels
    /// have one.
    async fn command(&self, command: SlashCommand) -> String {
        if let Some(sink) = self.sink(Some(&command.channel)) {
            return sink.command(command).await;
        }
        if !command.channel.starts_with('D') {
            return self.no_repository_here(&command.command);
        }
        if let Some(sink) = self.conversations() {
            return sink.command(command).await;
        }
        match &self.conversations {
            Some(conversations) => conversations.command(command).await,
            None => self.no_repository_here(&command.command),
        }
    }
}

impl Router {
    /// The answer to a slash command typed where no repository is served.
    fn no_repository_here(&self, command: &str) -> String {
        let mut channels: Vec<String> = self.routes.keys().map(|c| format!("<#{c}>")).collect();
        channels.sort();
        format!(
            "No repository is served in this conversation: use {command} in a repository's \
             channel ({}).",
            channels.join(", ")
        )
    }
}

/// The channel of a push event: a message's channel, or that of the message a reaction is
/// on (other events carry none we serve).
fn push_channel(event: &SlackPushEventCallback) -> Option<&str> {
    match &event.event {
        SlackEventCallbackBody::Message(message) => {
            message.origin.channel.as_ref().map(|c| c.0.as_str())
        }
        SlackEventCallbackBody::AppMention(mention) => Some(mention.channel.0.as_str()),
        SlackEventCallbackBody::ReactionAdded(reaction) => match &reaction.item {
            SlackReactionsItem::Message(message) => {
                message.origin.channel.as_ref().map(|c| c.0.as_str())
            }
            SlackReactionsItem::File(_) => None,
        },
        _ => None,
    }
}

/// The channel of an interaction: a block action's channel, or its message container's.
fn interaction_channel(event: &SlackInteractionEvent) -> Option<&str> {
    let SlackInteractionEvent::BlockActions(actions) = event else {
        return None;
    };
    actions
        .channel
        .as_ref()
        .map(|c| c.id.0.as_str())
        .or(match &actions.container {
            SlackInteractionActionContainer::Message(container) => {
                container.channel_id.as_ref().map(|c| c.0.as_str())
            }
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// Records the events it accepts.
    #[derive(Default)]
    struct Recording(Mutex<Vec<String>>);

    #[async_trait]
    impl EventSink for Recording {
        async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
            self.0.lock().unwrap().push(event.event_id.0);
            Ok(())
        }

        async fn accept_interaction(&self, event: SlackInteractionEvent) -> Result<(), NotStored> {
            let channel = interaction_channel(&event).unwrap_or("none").to_owned();
            self.0.lock().unwrap().push(format!("click in {channel}"));
            Ok(())
        }

        async fn command(&self, command: SlashCommand) -> String {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} in {}", command.command, command.channel));
            "answered".to_owned()
        }
    }

    fn message(event_id: &str, channel: &str) -> SlackPushEventCallback {
        serde_json::from_value(json!({
            "team_id": "T1", "api_app_id": "A1", "event_id": event_id, "event_time": 1700000000,
            "type": "event_callback",
            "event": {"type": "message", "channel": channel, "user": "U1", "text": "hi",
                      "ts": "1700000000.000100", "channel_type": "channel"}
        }))
        .unwrap()
    }

    fn click(channel: &str) -> SlackInteractionEvent {
        serde_json::from_value(json!({
            "type": "block_actions",
            "team": {"id": "T1"},
            "user": {"id": "U1"},
            "api_app_id": "A1",
            "trigger_id": "123.456.abc",
            "container": {"type": "message", "message_ts": "1.2", "channel_id": channel},
            "channel": {"id": channel, "name": "dev"},
            "actions": []
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn each_channel_reaches_its_repository_and_others_are_acked_and_ignored() {
        let (api, web) = (
            Arc::new(Recording::default()),
            Arc::new(Recording::default()),
        );
        let router = Router::new([
            ("CAPI".to_owned(), api.clone() as Arc<dyn EventSink>),
            ("CWEB".to_owned(), web.clone() as Arc<dyn EventSink>),
        ]);
        router.accept(message("Ev1", "CAPI")).await.unwrap();
        router.accept(message("Ev2", "CWEB")).await.unwrap();
        router.accept(message("Ev3", "COTHER")).await.unwrap();
        let reaction: SlackPushEventCallback = serde_json::from_value(json!({
            "team_id": "T1", "api_app_id": "A1", "event_id": "Ev4", "event_time": 1700000000,
            "type": "event_callback",
            "event": {"type": "reaction_added", "user": "U1", "reaction": "codebutler",
                      "item": {"type": "message", "channel": "CWEB", "ts": "1.1"},
                      "event_ts": "1.2"}
        }))
        .unwrap();
        router.accept(reaction).await.unwrap();
        router.accept_interaction(click("CWEB")).await.unwrap();
        router.accept_interaction(click("COTHER")).await.unwrap();
        let typed = |channel: &str| SlashCommand {
            channel: channel.to_owned(),
            user: "U1".to_owned(),
            command: "/codebutler".to_owned(),
            text: "status".to_owned(),
        };
        assert_eq!(router.command(typed("CAPI")).await, "answered");
        assert_eq!(
            router.command(typed("D0DM")).await,
            "No repository is served in this conversation: use /codebutler in a repository's \
             channel (<#CAPI>, <#CWEB>)."
        );
        assert_eq!(*api.0.lock().unwrap(), ["Ev1", "/codebutler in CAPI"]);
        assert_eq!(*web.0.lock().unwrap(), ["Ev2", "Ev4", "click in CWEB"]);
    }

    #[tokio::test]
    async fn a_slash_command_in_a_direct_message_goes_to_the_only_repository() {
        let api = Arc::new(Recording::default());
        let router = Router::new([("CAPI".to_owned(), api.clone() as Arc<dyn EventSink>)]);
        let typed = |channel: &str| SlashCommand {
            channel: channel.to_owned(),
            user: "U1".to_owned(),
            command: "/codebutler".to_owned(),
            text: "status".to_owned(),
        };
        assert_eq!(router.command(typed("D0DM")).await, "answered");
        assert_eq!(
            router.command(typed("C0OTHER")).await,
            "No repository is served in this conversation: use /codebutler in a repository's \
             channel (<#CAPI>)."
        );
        assert_eq!(*api.0.lock().unwrap(), ["/codebutler in D0DM"]);
    }
}
