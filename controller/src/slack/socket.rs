//! Socket Mode: the websocket through which Slack delivers events.
//!
//! slack-morphism keeps the connection (reconnecting on errors and on Slack's `disconnect`
//! messages) and acknowledges an envelope only after our callback returns `Ok`. So the
//! callback hands each event to an [`EventSink`], which stores it before returning: an event
//! is never acknowledged before it is safe, and one the sink could not store is left
//! unacknowledged for Slack to deliver again. Interactive envelopes (button clicks) take the
//! same way through [`EventSink::accept_interaction`]; one whose payload slack-morphism cannot
//! parse is acknowledged by it and reported to the error handler, so Slack does not resend it.
//!
//! A slash command's envelope must be acknowledged within 3 seconds, and the acknowledgement
//! carries the answer: [`EventSink::command`] returns it (at most [`COMMAND_DEADLINE`] is
//! waited for it), and it goes back as an ephemeral message, shown to the person who typed
//! the command alone.
//!
//! Each `hello` (one per connection opened) carries `num_connections`, how many Socket Mode
//! connections the app has open at that moment; it is handed to a [`Hellos`] channel, so
//! the service can notice another process sharing the app (see
//! [`crate::service::connections`]).

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::sync::mpsc;

use crate::secret::Secret;
use crate::slack::api::{Client, Connector};

/// Receives every push event and interaction; returning an error leaves it unacknowledged.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// A push event (messages and the like).
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored>;

    /// A push event of a conversation outside every repository's channel that the router
    /// vouches for (its repository was chosen for it): a reply in a mention's thread is
    /// taken even when this sink has not seen the thread yet. By default, as [`Self::accept`].
    async fn accept_conversation(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        self.accept(event).await
    }

    /// An interaction (a button click); ignored unless a sink handles them.
    async fn accept_interaction(&self, _event: SlackInteractionEvent) -> Result<(), NotStored> {
        Ok(())
    }

    /// A slash command: the answer (mrkdwn) shown to the person who typed it alone.
    async fn command(&self, command: SlashCommand) -> String {
        format!("{} is not answered here.", command.command)
    }
}

/// A slash command as Slack hands it over: who typed it, in which channel, and its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlashCommand {
    pub channel: String,
    pub user: String,
    /// The command, with its slash (`/codebutler`).
    pub command: String,
    /// What followed the command.
    pub text: String,
}

/// How long a slash command's answer is waited for before a shorter one goes instead: Slack
/// takes an envelope not acknowledged within 3 seconds for lost.
pub const COMMAND_DEADLINE: std::time::Duration = std::time::Duration::from_millis(2500);

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

/// Where each `hello`'s `num_connections` goes.
pub type Hellos = mpsc::UnboundedSender<u32>;

/// The hello channel, as stored in slack-morphism's user state.
#[derive(Clone)]
struct HelloState(Hellos);

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
    /// Opens Socket Mode with the app token, delivering events to `sink` and each hello's
    /// connection count to `hellos`.
    pub async fn start(
        client: Arc<Client>,
        app_token: &Secret,
        sink: Arc<dyn EventSink>,
        hellos: Hellos,
    ) -> Result<Self, SlackClientError> {
        let callbacks = SlackSocketModeListenerCallbacks::new()
            .with_hello_events(on_hello)
            .with_push_events(on_push)
            .with_interaction_events(on_interaction)
            .with_command_events(on_command);
        let environment = Arc::new(
            SlackClientEventsListenerEnvironment::new(client)
                .with_error_handler(on_error)
                .with_user_state(SinkState(sink))
                .with_user_state(HelloState(hellos)),
        );
        // One connection: Slack delivers each event on one of an app's sockets, and a
        // second socket buys nothing: every channel's events arrive on this one.
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

    /// How many Socket Mode connections the app has open, as a fresh connection's hello
    /// says (that connection included), waiting at most `timeout` for it. The connection
    /// takes no events: one Slack hands it before it closes is left unacknowledged, for
    /// Slack to deliver again.
    pub async fn count_connections(
        client: Arc<Client>,
        app_token: &Secret,
        timeout: std::time::Duration,
    ) -> Result<u32, ProbeError> {
        let (hellos, mut rx) = mpsc::unbounded_channel();
        let probe = Self::start(client, app_token, Arc::new(TakesNothing), hellos)
            .await
            .map_err(ProbeError::Connect)?;
        let hello = tokio::time::timeout(timeout, rx.recv()).await;
        probe.shutdown().await;
        match hello {
            Ok(Some(connections)) => Ok(connections),
            Ok(None) | Err(_) => Err(ProbeError::NoHello(timeout.as_secs())),
        }
    }
}

/// A connection count could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("open a probe connection: {0}")]
    Connect(#[source] SlackClientError),
    #[error("no hello on the probe connection within {0} s")]
    NoHello(u64),
}

/// The sink of a probe connection: it leaves every event to the service's connection.
struct TakesNothing;

/// Why a probe connection leaves an event unacknowledged.
#[derive(Debug, thiserror::Error)]
#[error("a probe connection takes no events; Slack delivers it again")]
struct ProbeOnly;

#[async_trait]
impl EventSink for TakesNothing {
    async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        Err(NotStored::new("event", &event.event_id.0, ProbeOnly))
    }

    async fn accept_interaction(&self, _event: SlackInteractionEvent) -> Result<(), NotStored> {
        Err(NotStored::new("button click", "", ProbeOnly))
    }

    async fn command(&self, _command: SlashCommand) -> String {
        "CodeButler is restarting its connection: try again in a moment.".to_owned()
    }
}

// Generic because slack-morphism does not export the hello event's type by name; its
// `num_connections` is read through its serialized form.
async fn on_hello<E: Serialize>(event: E, _client: Arc<Client>, state: SlackClientEventsUserState) {
    let connections = serde_json::to_value(&event)
        .ok()
        .and_then(|v| v.get("num_connections").and_then(serde_json::Value::as_u64))
        .and_then(|n| u32::try_from(n).ok());
    tracing::info!(
        "slack connected ({} connection(s) of this app open)",
        connections.map_or_else(|| "?".to_owned(), |n| n.to_string())
    );
    // The new connection's acknowledgements go out at once (see `super::nodelay`).
    match tokio::task::spawn_blocking(super::nodelay::disable_nagle).await {
        Ok(Ok(sockets)) => tracing::debug!("TCP_NODELAY on {sockets} TCP socket(s)"),
        Ok(Err(e)) => tracing::warn!("could not turn Nagle's algorithm off: {e}"),
        Err(e) => tracing::warn!("could not turn Nagle's algorithm off: {e}"),
    }
    let Some(connections) = connections else {
        tracing::warn!("slack hello without num_connections");
        return;
    };
    if let Some(HelloState(hellos)) = state.read().await.get_user_state::<HelloState>()
        && hellos.send(connections).is_err()
    {
        tracing::debug!("hello after the connection watch stopped");
    }
}

async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let arrived = std::time::Instant::now();
    let stored = sink_of(&state).await?.accept(event).await;
    // The acknowledgement goes out as this returns.
    crate::metrics::metrics()
        .ack_seconds
        .observe(arrived.elapsed().as_secs_f64());
    stored.map_err(Into::into)
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

async fn on_command(
    event: SlackCommandEvent,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<SlackCommandEventResponse> {
    let command = SlashCommand {
        channel: event.channel_id.0,
        user: event.user_id.0,
        command: event.command.0,
        text: event.text.unwrap_or_default(),
    };
    let sink = sink_of(&state).await?;
    let answer = match tokio::time::timeout(COMMAND_DEADLINE, sink.command(command)).await {
        Ok(answer) => answer,
        Err(_) => {
            tracing::warn!("slash command not answered within {COMMAND_DEADLINE:?}");
            "CodeButler could not answer within Slack's 3 seconds: try again in a moment."
                .to_owned()
        }
    };
    Ok(
        SlackCommandEventResponse::new(SlackMessageContent::new().with_text(answer))
            .with_response_type(SlackMessageResponseType::Ephemeral),
    )
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
