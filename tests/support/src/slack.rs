//! `FakeSlack`: the Slack Web API (`/api/<method>`), the files upload URL (`/upload/<id>`) and a
//! Socket Mode websocket (`/ws`) on one local axum server.
//!
//! What it speaks was checked against `slack-morphism` 2.31's source:
//! * Web API calls arrive as `GET` with a query string (`auth.test`,
//!   `files.getUploadURLExternal`) or `POST` with a JSON body (everything else); the token is in
//!   `Authorization: Bearer …`. Form bodies and a `token` parameter are accepted too, as Slack does.
//! * Responses are `200 application/json` with `ok`; errors are `ok:false` + `error` (still 200),
//!   except rate limits: `429` + `Retry-After` + `{"ok":false,"error":"ratelimited"}`.
//! * The upload URL receives the file as a raw `POST` body (slack-morphism's
//!   `files_upload_via_url`), with the bot token in `Authorization`; `multipart/form-data` is
//!   parsed too (other clients send that). It answers `200 text/plain` `OK - <bytes>`.
//! * Unacknowledged events are re-sent like Slack's retries (`retry_attempt`, `retry_reason`)
//!   when a test turns that on ([`FakeSlack::retry_unacked`]) or asks for one ([`FakeSlack::resend`]).
//! * Socket Mode: `hello` on connect, whose `num_connections` counts the app token's open
//!   connections (this one included), as Slack's does; `events_api` envelopes; the client acks with
//!   `{"envelope_id":…}` after its callback returned; `disconnect` makes it drop that socket and
//!   open a fresh one through `apps.connections.open`.
//! * Interactivity (see [`interactive`]): a test "clicks" a button of a message the bot posted
//!   and the fake sends an `interactive` envelope with a `block_actions` payload, as Slack does;
//!   `chat.update` keeps a message's blocks when it sends none and drops them for `blocks: []`.
//! * History (see [`history`]): every message is kept as `conversations.replies` returns it,
//!   with the `metadata` a post carried (returned with `include_all_metadata`), paged with
//!   `has_more` and cursors.
//! * People and links (see [`people`]): `users.info` for the users a test added, and
//!   `chat.getPermalink` on the fake workspace's own domain, with Slack's errors.
//! * Crashes: [`FakeSlack::stall_next`] holds the answer to the next successful call of a
//!   method after Slack has done it, so a test can kill the client in the window where the
//!   effect happened but the client never learned of it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc, watch};

use crate::wait_until;

mod access;
mod channels;
mod history;
mod interactive;
mod people;

pub use access::manifest_bot_scopes;

/// The bot token the fake accepts for every Web API method except `apps.connections.open`.
pub const BOT_TOKEN: &str = "xoxb-fake-bot-token";
/// The app-level token the fake accepts for `apps.connections.open`.
pub const APP_TOKEN: &str = "xapp-fake-app-token";
/// The workspace id.
pub const TEAM_ID: &str = "T0FAKE";
/// The app id (in `hello`, envelopes and the bot's own messages).
pub const APP_ID: &str = "A0FAKE";
/// The bot's user id (`auth.test` `user_id`, `user` of its posts).
pub const BOT_USER_ID: &str = "U0BOT";
/// The bot id (`auth.test` `bot_id`, `bot_id` of its posts).
pub const BOT_ID: &str = "B0BOT";
/// A channel id tests can use.
pub const CHANNEL: &str = "C0CHAN";

/// The Web API methods the fake implements; any other answers `unknown_method`.
const KNOWN_METHODS: &[&str] = &[
    "auth.test",
    "apps.connections.open",
    "chat.getPermalink",
    "conversations.info",
    "conversations.list",
    "conversations.create",
    "conversations.join",
    "users.info",
    "chat.postMessage",
    "chat.update",
    "conversations.replies",
    "conversations.history",
    "reactions.add",
    "reactions.remove",
    "files.getUploadURLExternal",
    "files.completeUploadExternal",
];

/// One Web API call (or one upload to an upload URL, recorded as method `"upload"`).
#[derive(Debug, Clone)]
pub struct Call {
    /// The Slack method, e.g. `"chat.postMessage"`.
    pub method: String,
    /// `GET` or `POST`.
    pub http_method: String,
    /// Query-string and body parameters merged into one JSON object (form and query values are
    /// strings; JSON bodies keep their types).
    pub params: Value,
    /// When the request arrived.
    pub at: Instant,
    /// The `error` the fake answered with (`None` when it answered `ok:true`).
    pub error: Option<String>,
}

/// A message the bot posted with `chat.postMessage`.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    /// `text` as sent (empty if only blocks were sent).
    pub text: String,
    /// `blocks` as Slack keeps them (a `block_id` on every block), if any.
    pub blocks: Option<Value>,
    /// The `metadata` (`{event_type, event_payload}`) the post carried, if any.
    pub metadata: Option<Value>,
}

/// A successful `chat.update`.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub blocks: Option<Value>,
}

/// A reaction the bot added (`reactions.add`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reaction {
    pub channel: String,
    pub ts: String,
    pub name: String,
}

/// A file shared through `files.getUploadURLExternal` → upload → `files.completeUploadExternal`.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub file_id: String,
    pub filename: String,
    /// The title given to `files.completeUploadExternal`, else the filename (as Slack does).
    pub title: String,
    /// The uploaded bytes, as (lossy) UTF-8.
    pub content: String,
    /// `channel_id` (or the first of `channels`); `None` for a private, unshared file.
    pub channel: Option<String>,
    pub thread_ts: Option<String>,
    pub initial_comment: Option<String>,
}

/// An acknowledgement the client sent over Socket Mode.
#[derive(Debug, Clone)]
pub struct Ack {
    pub envelope_id: String,
    /// When the fake received it.
    pub at: Instant,
    /// The `payload` of the ack, if any (slash commands, interactions).
    pub payload: Option<Value>,
}

/// What `user_message`/`send_event` sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The event's `ts` (the message ts), else its `event_ts`.
    pub ts: String,
    pub envelope_id: String,
    pub event_id: String,
}

/// How often Slack retries an unacknowledged event ([`FakeSlack::retry_unacked`]).
pub const MAX_EVENT_RETRIES: u64 = 3;

/// A local fake of Slack. Cheap to clone; the server stops when the last clone is dropped.
#[derive(Clone)]
pub struct FakeSlack {
    inner: Arc<Inner>,
    _guard: Arc<ServerGuard>,
}

impl std::fmt::Debug for FakeSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSlack")
            .field("addr", &self.inner.addr)
            .finish_non_exhaustive()
    }
}

struct ServerGuard {
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        self.inner.shutdown.send_replace(true);
        self.server.abort();
    }
}

struct Inner {
    addr: SocketAddr,
    state: Mutex<SlackState>,
    shutdown: watch::Sender<bool>,
}

enum ConnCmd {
    Send(String),
    Disconnect(String),
}

struct Conn {
    id: u64,
    /// The app token whose `apps.connections.open` ticket opened it.
    app_token: String,
    tx: mpsc::UnboundedSender<ConnCmd>,
}

struct EnvelopeRecord {
    envelope: Value,
    created: Instant,
    first_sent: Option<Instant>,
    /// When it was last sent (its first delivery or a retry).
    last_sent: Option<Instant>,
}

struct PendingFile {
    filename: String,
    length: usize,
    content: Option<Vec<u8>>,
}

#[derive(Clone)]
struct MessageInfo {
    user: Option<String>,
    from_bot: bool,
}

#[derive(Default)]
struct SlackState {
    calls: Vec<Call>,
    posts: Vec<Post>,
    updates: Vec<Update>,
    reactions_log: Vec<Reaction>,
    reactions_now: Vec<Reaction>,
    uploads: Vec<Upload>,
    pending_files: HashMap<String, PendingFile>,
    acks: Vec<Ack>,
    envelopes: HashMap<String, EnvelopeRecord>,
    conns: Vec<Conn>,
    round_robin: usize,
    queue: VecDeque<(String, String)>,
    connections_opened: usize,
    hellos: usize,
    disconnects_sent: usize,
    /// Unused websocket tickets, with the app token that asked for each.
    tickets: HashMap<String, String>,
    messages: HashMap<(String, String), MessageInfo>,
    /// What a bot message shows now, by (channel, ts): after every post and update.
    shown: HashMap<(String, String), interactive::Shown>,
    rate_limits: HashMap<String, (u32, u64)>,
    /// Every message of every conversation as the history methods show it, by (channel, ts).
    history: BTreeMap<(String, String), Value>,
    /// The users `users.info` knows, by id.
    users: HashMap<String, people::User>,
    /// At most this many messages per history page, whatever `limit` asks.
    history_page_cap: Option<usize>,
    /// Armed by [`FakeSlack::stall_next`], by method.
    stalls: HashMap<String, Arc<StallPoint>>,
    /// The app's scopes, Socket Mode and the channels the bot is in (see [`access`]).
    access: access::Access,
    last_ts_micros: u64,
    next_id: u64,
    violations: Vec<String>,
}

impl SlackState {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A new message timestamp: the current time in microseconds, strictly increasing.
    fn next_ts(&mut self) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1_700_000_000_000_000);
        let micros = now.max(self.last_ts_micros + 1);
        self.last_ts_micros = micros;
        format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
    }

    fn uuid_like(&mut self) -> String {
        let n = self.next_id();
        format!(
            "{:08x}-fa4e-4000-8000-{:012x}",
            n,
            n.wrapping_mul(0x9e37_79b9)
        )
    }

    /// Wraps `event` in an `events_api` envelope, records it and delivers it.
    fn emit_event(&mut self, mut event: Value) -> Sent {
        if let Some(obj) = event.as_object_mut()
            && !obj.contains_key("event_ts")
        {
            let event_ts = match obj.get("ts").and_then(Value::as_str) {
                Some(ts) => ts.to_owned(),
                None => self.next_ts(),
            };
            obj.insert("event_ts".into(), Value::String(event_ts));
        }
        // Remember the message so reactions/updates on it behave like Slack.
        if event.get("type").and_then(Value::as_str) == Some("message")
            && let (Some(channel), Some(ts)) = (
                event.get("channel").and_then(Value::as_str),
                event.get("ts").and_then(Value::as_str),
            )
        {
            let subtype = event.get("subtype").and_then(Value::as_str);
            if !matches!(subtype, Some("message_changed" | "message_deleted")) {
                let info = MessageInfo {
                    user: event.get("user").and_then(Value::as_str).map(str::to_owned),
                    from_bot: event.get("bot_id").and_then(Value::as_str) == Some(BOT_ID),
                };
                self.messages
                    .entry((channel.to_owned(), ts.to_owned()))
                    .or_insert(info);
                let (channel, ts) = (channel.to_owned(), ts.to_owned());
                self.remember(&channel, &ts, &event);
            } else if let (Some("message_deleted"), Some(deleted)) =
                (subtype, event.get("deleted_ts").and_then(Value::as_str))
            {
                self.history
                    .remove(&(channel.to_owned(), deleted.to_owned()));
            }
        }
        let ts = event
            .get("ts")
            .or_else(|| event.get("event_ts"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let envelope_id = self.uuid_like();
        let event_id = format!("Ev0FAKE{:08}", self.next_id());
        let envelope = json!({
            "envelope_id": envelope_id,
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": {
                "token": "fake-verification-token",
                "team_id": TEAM_ID,
                "context_team_id": TEAM_ID,
                "api_app_id": APP_ID,
                "event": event,
                "type": "event_callback",
                "event_id": event_id,
                "event_time": unix_secs(),
                "authorizations": [{
                    "enterprise_id": null,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": true,
                    "is_enterprise_install": false,
                }],
                "is_ext_shared_channel": false,
            },
        });
        self.envelopes.insert(
            envelope_id.clone(),
            EnvelopeRecord {
                envelope: envelope.clone(),
                created: Instant::now(),
                first_sent: None,
                last_sent: None,
            },
        );
        self.deliver(envelope_id.clone(), envelope.to_string());
        Sent {
            ts,
            envelope_id,
            event_id,
        }
    }

    /// Sends a frame to one open connection (round-robin), or queues it until one connects.
    fn deliver(&mut self, envelope_id: String, text: String) {
        while !self.conns.is_empty() {
            let idx = self.round_robin % self.conns.len();
            self.round_robin = self.round_robin.wrapping_add(1);
            if self.conns[idx].tx.send(ConnCmd::Send(text.clone())).is_ok() {
                if let Some(rec) = self.envelopes.get_mut(&envelope_id) {
                    let now = Instant::now();
                    rec.first_sent.get_or_insert(now);
                    rec.last_sent = Some(now);
                }
                return;
            }
            self.conns.remove(idx);
        }
        self.queue.push_back((envelope_id, text));
    }

    /// Sends a known envelope again with `retry_attempt` incremented, `retry_reason: "timeout"`.
    fn resend(&mut self, envelope_id: &str) {
        let Some(rec) = self.envelopes.get_mut(envelope_id) else {
            return;
        };
        let attempt = rec.envelope["retry_attempt"].as_u64().unwrap_or(0) + 1;
        rec.envelope["retry_attempt"] = json!(attempt);
        rec.envelope["retry_reason"] = json!("timeout");
        let text = rec.envelope.to_string();
        self.deliver(envelope_id.to_owned(), text);
    }

    fn flush_queue(&mut self) {
        if self.conns.is_empty() {
            return;
        }
        let queued: Vec<_> = self.queue.drain(..).collect();
        for (envelope_id, text) in queued {
            self.deliver(envelope_id, text);
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1_700_000_000)
}

fn channel_type(channel: &str) -> &'static str {
    match channel.as_bytes().first() {
        Some(b'D') => "im",
        Some(b'G') => "group",
        _ => "channel",
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, SlackState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl FakeSlack {
    /// Starts the fake on `127.0.0.1:0`.
    pub async fn start() -> FakeSlack {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FakeSlack: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("FakeSlack: local_addr");
        let (shutdown, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            addr,
            state: Mutex::new(SlackState::default()),
            shutdown,
        });
        let app = Router::new()
            .route("/api/{method}", any(api_handler))
            .route("/upload/{file_id}", post(upload_handler))
            .route("/ws", get(ws_handler))
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                tracing::error!("FakeSlack server stopped: {err}");
            }
        });
        FakeSlack {
            _guard: Arc::new(ServerGuard {
                inner: inner.clone(),
                server,
            }),
            inner,
        }
    }

    /// `http://127.0.0.1:PORT/api/` (trim the slash for slack-morphism's `with_slack_api_url`).
    pub fn api_url(&self) -> String {
        format!("{}/api/", self.inner.base())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.inner.base()
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// Sends a plain user message event (as Slack does for `message.channels` subscriptions)
    /// with a fresh `ts`. `thread_ts` makes it a thread reply.
    pub fn user_message(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Sent {
        let mut st = self.inner.lock();
        let ts = st.next_ts();
        let client_msg_id = st.uuid_like();
        let mut event = json!({
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "client_msg_id": client_msg_id,
            "team": TEAM_ID,
            "channel_type": channel_type(channel),
            "blocks": [{
                "type": "rich_text",
                "block_id": format!("b{}", st.next_id()),
                "elements": [{
                    "type": "rich_text_section",
                    "elements": [{"type": "text", "text": text}],
                }],
            }],
        });
        if let Some(thread_ts) = thread_ts {
            event["thread_ts"] = json!(thread_ts);
            if let Some(parent) = st
                .messages
                .get(&(channel.to_owned(), thread_ts.to_owned()))
                .and_then(|m| m.user.clone())
            {
                event["parent_user_id"] = json!(parent);
            }
        }
        st.emit_event(event)
    }

    /// Sends an arbitrary event (edits, deletes, joins, bot messages, other channels…) in an
    /// `events_api` envelope. `event_ts` is added if missing.
    pub fn send_event(&self, event: Value) -> Sent {
        self.inner.lock().emit_event(event)
    }

    /// A fresh message timestamp, unique among all the fake hands out (for hand-built events).
    pub fn next_ts(&self) -> String {
        self.inner.lock().next_ts()
    }

    /// Re-sends an envelope as Slack does when the ack is late: same envelope and event ids,
    /// `retry_attempt` incremented, `retry_reason: "timeout"`.
    pub fn resend(&self, envelope_id: &str) {
        let mut st = self.inner.lock();
        if !st.envelopes.contains_key(envelope_id) {
            panic!("FakeSlack::resend: unknown envelope {envelope_id}");
        }
        st.resend(envelope_id);
    }

    /// From now on, re-sends every envelope not acknowledged `after` its last sending, up to
    /// [`MAX_EVENT_RETRIES`] times, as Slack does for a connection that died with events in
    /// flight (Slack retries after about 3 s). Off by default, so tests that hold an ack on
    /// purpose see exactly what they sent.
    pub fn retry_unacked(&self, after: Duration) {
        let inner = Arc::downgrade(&self.inner);
        let mut shutdown = self.inner.shutdown.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(after / 4) => {}
                    _ = shutdown.changed() => return,
                }
                let Some(inner) = inner.upgrade() else { return };
                let mut st = inner.lock();
                let acked: HashSet<&str> = st.acks.iter().map(|a| a.envelope_id.as_str()).collect();
                let late: Vec<String> = st
                    .envelopes
                    .iter()
                    .filter(|(id, rec)| {
                        !acked.contains(id.as_str())
                            && rec.last_sent.is_some_and(|t| t.elapsed() >= after)
                            && rec.envelope["retry_attempt"].as_u64().unwrap_or(0)
                                < MAX_EVENT_RETRIES
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in late {
                    st.resend(&id);
                }
            }
        });
    }

    /// Sends `disconnect` (reason `refresh_requested`) on every open socket and closes them.
    pub fn disconnect_all(&self) {
        self.disconnect_all_with_reason("refresh_requested");
    }

    /// Like [`FakeSlack::disconnect_all`] with another reason (`warning`, `link_disabled`, …).
    pub fn disconnect_all_with_reason(&self, reason: &str) {
        let mut st = self.inner.lock();
        let conns: Vec<Conn> = st.conns.drain(..).collect();
        for conn in conns {
            if conn.tx.send(ConnCmd::Disconnect(reason.to_owned())).is_ok() {
                st.disconnects_sent += 1;
            }
        }
    }

    /// Makes the next `times` calls of `method` answer `429` with `Retry-After: retry_after_secs`.
    pub fn rate_limit(&self, method: &str, times: u32, retry_after_secs: u64) {
        self.inner
            .lock()
            .rate_limits
            .insert(method.to_owned(), (times, retry_after_secs));
    }

    /// Arms a stall: the next successful call of `method` takes effect as usual (a post is
    /// posted, a reaction added), but its answer is held until the returned [`Stall`] is
    /// dropped. A test kills the client meanwhile to crash it between Slack doing something
    /// and the client learning of it. Arming again replaces an unused stall.
    pub fn stall_next(&self, method: &str) -> Stall {
        let point = Arc::new(StallPoint::default());
        self.inner
            .lock()
            .stalls
            .insert(method.to_owned(), point.clone());
        Stall {
            point,
            method: method.to_owned(),
            inner: self.inner.clone(),
        }
    }

    /// Waits until at least one socket is connected and has received `hello`.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        wait_until(timeout, || !self.inner.lock().conns.is_empty()).await
    }

    /// How many websocket connections were accepted so far.
    pub fn connections_opened(&self) -> usize {
        self.inner.lock().connections_opened
    }

    /// How many `hello` messages were sent so far.
    pub fn hellos_sent(&self) -> usize {
        self.inner.lock().hellos
    }

    /// How many sockets are open now.
    pub fn open_connections(&self) -> usize {
        self.inner.lock().conns.len()
    }

    /// Every Web API call, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().calls.clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.inner
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Successful `chat.postMessage` calls, in order.
    pub fn posts(&self) -> Vec<Post> {
        self.inner.lock().posts.clone()
    }

    /// Successful `chat.update` calls, in order.
    pub fn updates(&self) -> Vec<Update> {
        self.inner.lock().updates.clone()
    }

    /// Every successful `reactions.add`, in order (including reactions removed later).
    pub fn reactions(&self) -> Vec<Reaction> {
        self.inner.lock().reactions_log.clone()
    }

    /// The reactions in place now (adds minus removes).
    pub fn current_reactions(&self) -> Vec<Reaction> {
        self.inner.lock().reactions_now.clone()
    }

    /// Completed uploads (`files.completeUploadExternal`), one per file.
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().uploads.clone()
    }

    /// Every ack received, in order.
    pub fn acks(&self) -> Vec<Ack> {
        self.inner.lock().acks.clone()
    }

    /// Whether `envelope_id` was acked.
    pub fn is_acked(&self, envelope_id: &str) -> bool {
        self.inner
            .lock()
            .acks
            .iter()
            .any(|a| a.envelope_id == envelope_id)
    }

    /// Waits until `envelope_id` is acked.
    pub async fn wait_acked(&self, envelope_id: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.is_acked(envelope_id)).await
    }

    /// When the envelope was first written to a socket (or created, if still queued).
    pub fn sent_at(&self, envelope_id: &str) -> Instant {
        let st = self.inner.lock();
        let rec = st
            .envelopes
            .get(envelope_id)
            .unwrap_or_else(|| panic!("FakeSlack::sent_at: unknown envelope {envelope_id}"));
        rec.first_sent.unwrap_or(rec.created)
    }

    /// Protocol problems seen on the client side: acks of unknown envelopes, unparsable or binary
    /// frames, uploads whose size differs from the announced `length`. Tests assert it is empty.
    pub fn violations(&self) -> Vec<String> {
        self.inner.lock().violations.clone()
    }

    /// Polls `condition` every ~20 ms until it holds or `timeout` passes.
    pub async fn wait_until(&self, timeout: Duration, condition: impl FnMut() -> bool) -> bool {
        wait_until(timeout, condition).await
    }

    /// Waits until at least `n` messages were posted and returns all posts; panics on timeout
    /// with the calls seen so far.
    pub async fn wait_posts(&self, n: usize, timeout: Duration) -> Vec<Post> {
        if wait_until(timeout, || self.inner.lock().posts.len() >= n).await {
            return self.posts();
        }
        panic!(
            "FakeSlack: expected {n} posts within {timeout:?}, got {}: {:#?}\ncalls: {:#?}",
            self.posts().len(),
            self.posts(),
            self.calls()
                .iter()
                .map(|c| format!("{} {} -> {:?}", c.method, c.params, c.error))
                .collect::<Vec<_>>()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Web API
// ---------------------------------------------------------------------------------------------

type Params = Map<String, Value>;

fn slack_json(body: Value) -> Response {
    let mut resp = (StatusCode::OK, body.to_string()).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

fn slack_error(error: &str) -> Value {
    json!({"ok": false, "error": error})
}

async fn parse_params(uri: &Uri, headers: &HeaderMap, body: Bytes) -> Result<Params, &'static str> {
    let mut params = Params::new();
    if uri.query().is_some() {
        let Query(pairs) =
            Query::<Vec<(String, String)>>::try_from_uri(uri).map_err(|_| "invalid_arguments")?;
        for (k, v) in pairs {
            params.insert(k, Value::String(v));
        }
    }
    if body.is_empty() {
        return Ok(params);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("application/json") {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(obj)) => params.extend(obj),
            _ => return Err("invalid_json"),
        }
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        let req = Request::builder()
            .method(Method::POST)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .map_err(|_| "invalid_form_data")?;
        let axum::Form(pairs) = axum::Form::<Vec<(String, String)>>::from_request(req, &())
            .await
            .map_err(|_| "invalid_form_data")?;
        for (k, v) in pairs {
            params.insert(k, Value::String(v));
        }
    } else if content_type.starts_with("multipart/form-data") {
        let boundary = multipart_boundary(&content_type).ok_or("invalid_form_data")?;
        for part in parse_multipart(&body, &boundary).ok_or("invalid_form_data")? {
            if part.filename.is_none() {
                params.insert(
                    part.name,
                    Value::String(String::from_utf8_lossy(&part.data).into_owned()),
                );
            }
        }
    } else {
        return Err("invalid_form_data");
    }
    Ok(params)
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// A string parameter; numbers are rendered, empty strings count as missing.
fn str_param(params: &Params, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A structured parameter: JSON bodies carry it as a value, form bodies as a JSON string.
fn json_param(params: &Params, key: &str) -> Option<Value> {
    match params.get(key)? {
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Null => None,
        v => Some(v.clone()),
    }
}

async fn api_handler(
    State(inner): State<Arc<Inner>>,
    Path(method): Path<String>,
    http_method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let parsed = parse_params(&uri, &headers, body).await;
    let (params, parse_error) = match parsed {
        Ok(p) => (p, None),
        Err(e) => (Params::new(), Some(e)),
    };
    let token = bearer(&headers).or_else(|| str_param(&params, "token"));
    let call = ApiCall {
        method,
        http_method: http_method.to_string(),
        params,
        parse_error,
        token,
        at,
    };
    let (response, stall) = answer_call(&inner, call);
    if let Some(stall) = stall {
        stall.hold().await;
    }
    response
}

/// A Web API request as the handler parsed it.
struct ApiCall {
    method: String,
    http_method: String,
    params: Params,
    parse_error: Option<&'static str>,
    token: Option<String>,
    at: Instant,
}

/// Records and answers one call under the lock; returns the answer and the stall armed for
/// it, if any.
fn answer_call(inner: &Inner, call: ApiCall) -> (Response, Option<Arc<StallPoint>>) {
    let ApiCall {
        method,
        http_method,
        params,
        parse_error,
        token,
        at,
    } = call;
    let mut st = inner.lock();
    let record = |st: &mut SlackState, error: Option<&str>| {
        st.calls.push(Call {
            method: method.clone(),
            http_method: http_method.clone(),
            params: Value::Object(params.clone()),
            at,
            error: error.map(str::to_owned),
        });
    };

    if let Some((remaining, retry_after)) = st.rate_limits.get_mut(&method)
        && *remaining > 0
    {
        *remaining -= 1;
        let retry_after = *retry_after;
        record(&mut st, Some("ratelimited"));
        let mut resp = slack_json(slack_error("ratelimited"));
        *resp.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_str(&retry_after.to_string()).expect("retry-after header"),
        );
        return (resp, None);
    }

    let result = if !KNOWN_METHODS.contains(&method.as_str()) {
        Err("unknown_method".to_owned())
    } else if let Some(e) = parse_error {
        Err(e.to_owned())
    } else {
        let expected = if method == "apps.connections.open" {
            APP_TOKEN
        } else {
            BOT_TOKEN
        };
        match token.as_deref() {
            None => Err("not_authed".to_owned()),
            Some(t) if t == expected => {
                let app = method == "apps.connections.open";
                if let Some(refused) = access::refusal(&st, &method, &params, app) {
                    let error = refused["error"].as_str().unwrap_or_default().to_owned();
                    record(&mut st, Some(&error));
                    return (slack_json(refused), None);
                }
                dispatch(inner, &mut st, &method, &params)
            }
            Some(t) if t == APP_TOKEN || t == BOT_TOKEN => Err("not_allowed_token_type".to_owned()),
            Some(_) => Err("invalid_auth".to_owned()),
        }
    };
    // Like Slack, every answer to a call with a known token names its scopes.
    let granted = token
        .as_deref()
        .and_then(|t| access::granted_header(&st, t));
    let (mut response, stall) = match result {
        Ok(body) => {
            record(&mut st, None);
            (slack_json(body), st.stalls.remove(&method))
        }
        Err(error) => {
            record(&mut st, Some(&error));
            (slack_json(slack_error(&error)), None)
        }
    };
    if let Some(granted) = granted.and_then(|g| HeaderValue::from_str(&g).ok()) {
        response.headers_mut().insert("x-oauth-scopes", granted);
    }
    (response, stall)
}

/// The longest a stalled answer is held (the client is normally killed long before).
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// One armed [`FakeSlack::stall_next`].
#[derive(Default)]
struct StallPoint {
    reached: Notify,
    released: Notify,
}

impl StallPoint {
    /// Says the call was done, then holds its answer until released (or [`STALL_LIMIT`]).
    async fn hold(&self) {
        self.reached.notify_one();
        let _ = tokio::time::timeout(STALL_LIMIT, self.released.notified()).await;
    }
}

/// A stalled call, from [`FakeSlack::stall_next`]. Dropping it releases the answer, or
/// disarms the stall if no call reached it.
pub struct Stall {
    point: Arc<StallPoint>,
    method: String,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stall").finish_non_exhaustive()
    }
}

impl Stall {
    /// Waits until the stalled call was done by Slack (its effect recorded, its answer held).
    pub async fn reached(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.point.reached.notified())
            .await
            .is_ok()
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        if st
            .stalls
            .get(&self.method)
            .is_some_and(|armed| Arc::ptr_eq(armed, &self.point))
        {
            st.stalls.remove(&self.method);
        }
        self.point.released.notify_one();
    }
}

fn dispatch(
    inner: &Inner,
    st: &mut SlackState,
    method: &str,
    params: &Params,
) -> Result<Value, String> {
    let need = |key: &str| str_param(params, key).ok_or_else(|| "invalid_arguments".to_owned());
    match method {
        "auth.test" => Ok(json!({
            "ok": true,
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": "codebutler",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": false,
        })),
        "apps.connections.open" => {
            let ticket = format!("{}", st.next_id());
            // Only the one app token gets here (checked before dispatch).
            st.tickets.insert(ticket.clone(), APP_TOKEN.to_owned());
            Ok(json!({
                "ok": true,
                "url": format!("ws://{}/ws?ticket={ticket}", inner.addr),
            }))
        }
        "conversations.info" => access::conversations_info(st, params),
        "conversations.list" => channels::list(st, params),
        "conversations.create" => channels::create(st, params),
        "conversations.join" => channels::join(st, params),
        "chat.postMessage" => {
            let channel = need("channel")?;
            access::may_post(st, &channel)?;
            let text = str_param(params, "text");
            let blocks = json_param(params, "blocks");
            if text.is_none() && blocks.is_none() && json_param(params, "attachments").is_none() {
                return Err("no_text".into());
            }
            let blocks = match blocks {
                Some(b) => Some(interactive::as_slack_stores(st, b)?),
                None => None,
            };
            let metadata = history::check_metadata(params)?;
            let text = text.unwrap_or_default();
            let thread_ts = str_param(params, "thread_ts");
            let ts = st.next_ts();
            st.shown.insert(
                (channel.clone(), ts.clone()),
                interactive::Shown {
                    text: text.clone(),
                    blocks: blocks.clone(),
                    thread_ts: thread_ts.clone(),
                },
            );
            st.posts.push(Post {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: thread_ts.clone(),
                text: text.clone(),
                blocks: blocks.clone(),
                metadata: metadata.clone(),
            });
            let mut message = json!({
                "type": "message",
                "ts": ts,
                "text": text,
                "user": BOT_USER_ID,
                "bot_id": BOT_ID,
                "app_id": APP_ID,
                "team": TEAM_ID,
            });
            if let Some(blocks) = &blocks {
                message["blocks"] = blocks.clone();
            }
            if let Some(thread_ts) = &thread_ts {
                message["thread_ts"] = json!(thread_ts);
                if let Some(parent) = st
                    .messages
                    .get(&(channel.clone(), thread_ts.clone()))
                    .and_then(|m| m.user.clone())
                {
                    message["parent_user_id"] = json!(parent);
                }
            }
            // Like Slack, the bot's own post comes back as a message event (its metadata only
            // to apps subscribed to metadata events, which the bot is not).
            let mut event = message.clone();
            event["channel"] = json!(channel);
            event["event_ts"] = json!(ts);
            event["channel_type"] = json!(channel_type(&channel));
            st.emit_event(event);
            if let Some(metadata) = &metadata {
                message["metadata"] = metadata.clone();
                if let Some(kept) = st.history.get_mut(&(channel.clone(), ts.clone())) {
                    kept["metadata"] = metadata.clone();
                }
            }
            Ok(json!({"ok": true, "channel": channel, "ts": ts, "message": message}))
        }
        "chat.update" => {
            let channel = need("channel")?;
            access::may_post(st, &channel)?;
            let ts = need("ts")?;
            let text = str_param(params, "text");
            let blocks = json_param(params, "blocks");
            if text.is_none() && blocks.is_none() && json_param(params, "attachments").is_none() {
                return Err("no_text".into());
            }
            let text = text.unwrap_or_default();
            let info = st
                .messages
                .get(&(channel.clone(), ts.clone()))
                .cloned()
                .ok_or_else(|| "message_not_found".to_owned())?;
            if !info.from_bot {
                return Err("cant_update_message".into());
            }
            let blocks = match blocks {
                Some(b) => Some(interactive::as_slack_stores(st, b)?),
                None => None,
            };
            interactive::apply_update(st, &channel, &ts, &text, blocks.as_ref());
            let previous_text = st
                .updates
                .iter()
                .rev()
                .find(|u| u.channel == channel && u.ts == ts)
                .map(|u| u.text.clone())
                .or_else(|| {
                    st.posts
                        .iter()
                        .find(|p| p.channel == channel && p.ts == ts)
                        .map(|p| p.text.clone())
                })
                .unwrap_or_default();
            let thread_ts = st
                .posts
                .iter()
                .find(|p| p.channel == channel && p.ts == ts)
                .and_then(|p| p.thread_ts.clone());
            let edit_ts = st.next_ts();
            st.edit_history(
                &channel,
                &ts,
                &text,
                blocks.as_ref(),
                json!({"user": BOT_USER_ID, "ts": edit_ts}),
            );
            st.updates.push(Update {
                channel: channel.clone(),
                ts: ts.clone(),
                text: text.clone(),
                blocks,
            });
            let mut message = json!({
                "type": "message",
                "ts": ts,
                "text": text,
                "user": BOT_USER_ID,
                "bot_id": BOT_ID,
                "app_id": APP_ID,
                "team": TEAM_ID,
                "edited": {"user": BOT_USER_ID, "ts": edit_ts},
            });
            let mut previous = json!({
                "type": "message",
                "ts": ts,
                "text": previous_text,
                "user": BOT_USER_ID,
                "bot_id": BOT_ID,
                "app_id": APP_ID,
                "team": TEAM_ID,
            });
            if let Some(thread_ts) = &thread_ts {
                message["thread_ts"] = json!(thread_ts);
                previous["thread_ts"] = json!(thread_ts);
            }
            st.emit_event(json!({
                "type": "message",
                "subtype": "message_changed",
                "hidden": true,
                "channel": channel,
                "channel_type": channel_type(&channel),
                "ts": edit_ts,
                "event_ts": edit_ts,
                "message": message,
                "previous_message": previous,
            }));
            Ok(json!({
                "ok": true,
                "channel": channel,
                "ts": ts,
                "text": text,
                "message": {
                    "type": "message",
                    "text": text,
                    "user": BOT_USER_ID,
                    "bot_id": BOT_ID,
                    "app_id": APP_ID,
                    "team": TEAM_ID,
                    "edited": {"user": BOT_USER_ID, "ts": edit_ts},
                },
            }))
        }
        "conversations.replies" => history::replies(st, params),
        "conversations.history" => history::history(st, params),
        "users.info" => people::users_info(st, params),
        "chat.getPermalink" => people::permalink(st, params),
        "reactions.add" => {
            let reaction = Reaction {
                channel: need("channel")?,
                ts: need("timestamp")?,
                name: need("name")?,
            };
            if !st
                .messages
                .contains_key(&(reaction.channel.clone(), reaction.ts.clone()))
            {
                return Err("message_not_found".into());
            }
            if st.reactions_now.contains(&reaction) {
                return Err("already_reacted".into());
            }
            st.reactions_now.push(reaction.clone());
            st.reactions_log.push(reaction);
            Ok(json!({"ok": true}))
        }
        "reactions.remove" => {
            let reaction = Reaction {
                channel: need("channel")?,
                ts: need("timestamp")?,
                name: need("name")?,
            };
            if !st
                .messages
                .contains_key(&(reaction.channel.clone(), reaction.ts.clone()))
            {
                return Err("message_not_found".into());
            }
            let before = st.reactions_now.len();
            st.reactions_now.retain(|r| *r != reaction);
            if st.reactions_now.len() == before {
                return Err("no_reaction".into());
            }
            Ok(json!({"ok": true}))
        }
        "files.getUploadURLExternal" => {
            let filename = need("filename")?;
            let length: usize = need("length")?
                .parse()
                .map_err(|_| "invalid_arguments".to_owned())?;
            let file_id = format!("F0FAKE{:06}", st.next_id());
            st.pending_files.insert(
                file_id.clone(),
                PendingFile {
                    filename,
                    length,
                    content: None,
                },
            );
            Ok(json!({
                "ok": true,
                "upload_url": format!("{}/upload/{file_id}", inner.base()),
                "file_id": file_id,
            }))
        }
        "files.completeUploadExternal" => {
            let files = json_param(params, "files")
                .and_then(|f| f.as_array().cloned())
                .filter(|f| !f.is_empty())
                .ok_or_else(|| "invalid_arguments".to_owned())?;
            let channel = str_param(params, "channel_id").or_else(|| {
                str_param(params, "channels")
                    .and_then(|c| c.split(',').next().map(str::to_owned))
                    .filter(|c| !c.is_empty())
            });
            let thread_ts = str_param(params, "thread_ts");
            let initial_comment = str_param(params, "initial_comment");
            let mut done = Vec::new();
            for file in &files {
                let id = file
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| "invalid_arguments".to_owned())?;
                let title = file.get("title").and_then(Value::as_str).map(str::to_owned);
                match st.pending_files.get(id) {
                    Some(p) if p.content.is_some() => done.push((id.to_owned(), title)),
                    _ => return Err("file_not_found".into()),
                }
            }
            let mut out = Vec::new();
            let mut shared = Vec::new();
            for (id, title) in done {
                let pending = st.pending_files.remove(&id).expect("checked above");
                let title = title.unwrap_or_else(|| pending.filename.clone());
                let content = pending.content.unwrap_or_default();
                out.push(json!({"id": id, "name": pending.filename, "title": title}));
                shared.push(json!({
                    "id": id,
                    "name": pending.filename,
                    "title": title,
                    "size": content.len(),
                    "user": BOT_USER_ID,
                }));
                st.uploads.push(Upload {
                    file_id: id,
                    filename: pending.filename,
                    title,
                    content: String::from_utf8_lossy(&content).into_owned(),
                    channel: channel.clone(),
                    thread_ts: thread_ts.clone(),
                    initial_comment: initial_comment.clone(),
                });
            }
            if let Some(channel) = &channel {
                // Sharing into a channel posts a file_share message, which the bot sees too.
                let ts = st.next_ts();
                let mut event = json!({
                    "type": "message",
                    "subtype": "file_share",
                    "channel": channel,
                    "channel_type": channel_type(channel),
                    "text": initial_comment.clone().unwrap_or_default(),
                    "files": shared,
                    "upload": true,
                    "user": BOT_USER_ID,
                    "bot_id": BOT_ID,
                    "app_id": APP_ID,
                    "display_as_bot": false,
                    "ts": ts,
                    "event_ts": ts,
                });
                if let Some(thread_ts) = &thread_ts {
                    event["thread_ts"] = json!(thread_ts);
                }
                st.emit_event(event);
            }
            Ok(json!({"ok": true, "files": out}))
        }
        _ => Err("unknown_method".to_owned()),
    }
}

async fn upload_handler(
    State(inner): State<Arc<Inner>>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let content: Option<Vec<u8>> = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        multipart_boundary(&content_type)
            .and_then(|b| parse_multipart(&body, &b))
            .and_then(|parts| {
                let idx = parts
                    .iter()
                    .position(|p| p.filename.is_some() || p.name == "file")?;
                parts.into_iter().nth(idx).map(|p| p.data)
            })
    } else {
        Some(body.to_vec())
    };
    let mut st = inner.lock();
    st.calls.push(Call {
        method: "upload".into(),
        http_method: "POST".into(),
        params: json!({"file_id": file_id, "content_type": content_type, "bytes": body.len()}),
        at: Instant::now(),
        error: None,
    });
    let Some(content) = content else {
        st.violations.push(format!(
            "upload {file_id}: multipart body without a file part"
        ));
        return (StatusCode::BAD_REQUEST, "invalid multipart body").into_response();
    };
    let SlackState {
        pending_files,
        violations,
        ..
    } = &mut *st;
    let Some(pending) = pending_files.get_mut(&file_id) else {
        violations.push(format!("upload to unknown file id {file_id}"));
        return (StatusCode::NOT_FOUND, "file not found").into_response();
    };
    if content.len() != pending.length {
        violations.push(format!(
            "upload {file_id} ({}): {} bytes uploaded but files.getUploadURLExternal said length={}",
            pending.filename,
            content.len(),
            pending.length
        ));
    }
    let len = content.len();
    pending.content = Some(content);
    let mut resp = (StatusCode::OK, format!("OK - {len}")).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

// ---------------------------------------------------------------------------------------------
// multipart/form-data (minimal)
// ---------------------------------------------------------------------------------------------

struct Part {
    name: String,
    filename: Option<String>,
    data: Vec<u8>,
}

fn multipart_boundary(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let p = p.trim();
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn parse_multipart(body: &[u8], boundary: &str) -> Option<Vec<Part>> {
    let delim = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut pos = find(body, &delim, 0)? + delim.len();
    loop {
        if body.get(pos..pos + 2) == Some(b"--") {
            return Some(parts);
        }
        // Skip the CRLF after the delimiter.
        pos = find(body, b"\r\n", pos)? + 2;
        let headers_end = find(body, b"\r\n\r\n", pos)?;
        let headers = String::from_utf8_lossy(&body[pos..headers_end]).into_owned();
        let data_start = headers_end + 4;
        let mut next_delim = delim.clone();
        next_delim.splice(0..0, *b"\r\n");
        let data_end = find(body, &next_delim, data_start)?;
        let mut name = String::new();
        let mut filename = None;
        for line in headers.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            if !k.trim().eq_ignore_ascii_case("content-disposition") {
                continue;
            }
            for attr in v.split(';') {
                if let Some((ak, av)) = attr.trim().split_once('=') {
                    let av = av.trim().trim_matches('"').to_owned();
                    match ak.trim() {
                        "name" => name = av,
                        "filename" => filename = Some(av),
                        _ => {}
                    }
                }
            }
        }
        parts.push(Part {
            name,
            filename,
            data: body[data_start..data_end].to_vec(),
        });
        pos = data_end + next_delim.len();
    }
}

// ---------------------------------------------------------------------------------------------
// Socket Mode
// ---------------------------------------------------------------------------------------------

async fn ws_handler(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<HashMap<String, String>>,
    ws: WebSocketUpgrade,
) -> Response {
    let ticket = query.get("ticket").cloned().unwrap_or_default();
    let app_token = inner.lock().tickets.remove(&ticket);
    let Some(app_token) = app_token else {
        inner.lock().violations.push(format!(
            "websocket connect with unknown or reused ticket {ticket:?}"
        ));
        return (StatusCode::UNAUTHORIZED, "invalid ticket").into_response();
    };
    ws.on_upgrade(move |socket| run_connection(inner, socket, app_token))
}

async fn run_connection(inner: Arc<Inner>, mut socket: WebSocket, app_token: String) {
    let mut shutdown = inner.shutdown.subscribe();
    if *shutdown.borrow() {
        return;
    }
    // Like Slack, hello counts the app's open connections, this one included.
    let num_connections = {
        let mut st = inner.lock();
        st.connections_opened += 1;
        1 + st
            .conns
            .iter()
            .filter(|c| c.app_token == app_token && !c.tx.is_closed())
            .count()
    };
    let hello = json!({
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": {
            "host": "fake-slack",
            "build_number": 1,
            "approximate_connection_time": 18060,
        },
        "connection_info": {"app_id": APP_ID},
    });
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = {
        let mut st = inner.lock();
        st.hellos += 1;
        let id = st.next_id();
        st.conns.push(Conn { id, app_token, tx });
        let open = st.conns.len();
        tracing::debug!("FakeSlack: socket {id} connected ({open} open)");
        st.flush_queue();
        id
    };
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(ConnCmd::Send(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(ConnCmd::Disconnect(reason)) => {
                    let msg = json!({
                        "type": "disconnect",
                        "reason": reason,
                        "debug_info": {"host": "fake-slack"},
                    });
                    let _ = socket.send(Message::Text(msg.to_string().into())).await;
                    let _ = socket
                        .send(Message::Close(Some(CloseFrame {
                            code: 1000,
                            reason: "".into(),
                        })))
                        .await;
                    break;
                }
                None => break,
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(text))) => on_client_text(&inner, text.as_str()),
                Some(Ok(Message::Binary(data))) => inner.lock().violations.push(format!(
                    "socket {id}: unexpected binary frame of {} bytes", data.len()
                )),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                // Pings are answered by tungstenite itself.
                Some(Ok(_)) => {}
            },
            _ = shutdown.changed() => break,
        }
    }
    // Hand frames that never reached this socket to the next one.
    let mut st = inner.lock();
    st.conns.retain(|c| c.id != id);
    rx.close();
    let mut unsent = Vec::new();
    while let Ok(cmd) = rx.try_recv() {
        if let ConnCmd::Send(text) = cmd {
            let envelope_id = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["envelope_id"].as_str().map(str::to_owned))
                .unwrap_or_default();
            unsent.push((envelope_id, text));
        }
    }
    for item in unsent.into_iter().rev() {
        st.queue.push_front(item);
    }
    st.flush_queue();
    tracing::debug!("FakeSlack: socket {id} closed");
}

fn on_client_text(inner: &Inner, text: &str) {
    let mut st = inner.lock();
    let parsed = serde_json::from_str::<Value>(text);
    match parsed
        .as_ref()
        .ok()
        .and_then(|v| v.get("envelope_id"))
        .and_then(Value::as_str)
    {
        Some(envelope_id) => {
            if !st.envelopes.contains_key(envelope_id) {
                st.violations
                    .push(format!("ack of unknown envelope {envelope_id}: {text}"));
            }
            let payload = parsed.as_ref().ok().and_then(|v| v.get("payload")).cloned();
            st.acks.push(Ack {
                envelope_id: envelope_id.to_owned(),
                at: Instant::now(),
                payload,
            });
        }
        None => st
            .violations
            .push(format!("unexpected frame from the client: {text}")),
    }
}
