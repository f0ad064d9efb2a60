//! Socket Mode: the websocket through which Slack delivers events.
//!
//! slack-morphism keeps the connection (reconnecting on errors and on Slack's `disconnect`
//! messages) and acknowledges an envelope only after our callback returns `Ok`. So the
//! callback hands each event to an [`EventSink`], which stores it before returning: an event
//! is never acknowledged before it is safe, and one the sink could not store is left
//! unacknowledged for Slack to deliver again. Interactive envelopes (button clicks) take the
//! same way through [`EventSink::accept_interaction`]; one whose payload slack-morphism cannot
//! parse is acknowledged by it and reported to the error handler, so Slack does not resend it.

use std::sync::Arc;

use async_trait::async_trait;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::secret::Secret;
use crate::slack::api::{Client, Connector};

/// Receives every push event and interaction; returning an error leaves it unacknowledged.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// A push event (messages and the like).
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored>;

    /// An interaction (a button click); ignored unless a sink handles them.
    async fn accept_interaction(&self, _event: SlackInteractionEvent) -> Result<(), NotStored> {
        Ok(())
    }
}

/// An event a sink could not keep: it is left unacknowledged, so Slack delivers it again.
/// The cause is boxed so this adapter names no store type.
#[derive(Debug, thiserror::Error)]
#[error("store {what} {ts}: {source}")]
pub struct NotStored {
    /// What the event was (`message`, `button click`).
    pub what: &'static str,
    /// Its Slack ts.
    pub ts: String,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl NotStored {
    /// `what` (with Slack ts `ts`) could not be stored because of `source`.
    pub fn new(
        what: &'static str,
        ts: &str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            what,
            ts: ts.to_string(),
            source: Box::new(source),
        }
    }
}

/// The sink, as stored in slack-morphism's user state (which is keyed by type).
#[derive(Clone)]
struct SinkState(Arc<dyn EventSink>);

/// A running Socket Mode connection.
pub struct SocketMode {
    listener: SlackClientSocketModeListener<Connector>,
}

impl std::fmt::Debug for SocketMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketMode").finish_non_exhaustive()
    }
}

impl SocketMode {
    /// Opens Socket Mode with the app token, delivering events to `sink`.
    pub async fn start(
        client: Arc<Client>,
        app_token: &Secret,
        sink: Arc<dyn EventSink>,
    ) -> Result<Self, SlackClientError> {
        let callbacks = SlackSocketModeListenerCallbacks::new()
            .with_hello_events(on_hello)
            .with_push_events(on_push)
            .with_interaction_events(on_interaction);
        let environment = Arc::new(
            SlackClientEventsListenerEnvironment::new(client)
                .with_error_handler(on_error)
                .with_user_state(SinkState(sink)),
        );
        // One connection: Slack delivers each event on one of an app's sockets, and a
        // second socket buys nothing for one channel.
        let config = SlackClientSocketModeConfig::new()
            .with_max_connections_count(1)
            .with_reconnect_timeout_in_seconds(5)
            .with_initial_backoff_in_seconds(1);
        let listener = SlackClientSocketModeListener::new(&config, environment, callbacks);
        let token = SlackApiToken::new(app_token.expose().into());
        listener.listen_for(&token).await?;
        listener.start().await;
        Ok(Self { listener })
    }

    /// Closes the connection: no further events are taken.
    pub async fn shutdown(&self) {
        self.listener.shutdown().await;
    }
}

// Generic because slack-morphism does not export the hello event's type by name.
async fn on_hello<E>(_event: E, _client: Arc<Client>, _state: SlackClientEventsUserState) {
    tracing::info!("slack connected");
}

async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    sink_of(&state)
        .await?
        .accept(event)
        .await
        .map_err(Into::into)
}

async fn on_interaction(
    event: SlackInteractionEvent,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    sink_of(&state)
        .await?
        .accept_interaction(event)
        .await
        .map_err(Into::into)
}

/// The sink `start` installed in the listener's state.
async fn sink_of(state: &SlackClientEventsUserState) -> UserCallbackResult<Arc<dyn EventSink>> {
    match state.read().await.get_user_state::<SinkState>() {
        Some(SinkState(sink)) => Ok(sink.clone()),
        None => Err("no event sink installed".into()),
    }
}

fn on_error(
    err: Box<dyn std::error::Error + Send + Sync>,
    _client: Arc<Client>,
    _state: SlackClientEventsUserState,
) -> HttpStatusCode {
    tracing::warn!("slack event not acknowledged: {err}");
    HttpStatusCode::INTERNAL_SERVER_ERROR
}
