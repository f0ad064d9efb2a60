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
//! * Slash commands (see [`commands`]): a test types `/codebutler …` and the fake sends a
//!   `slash_commands` envelope; what the acknowledgement's payload says within 3 seconds is
//!   what the person was shown, to them alone unless it is `in_channel`.
//! * Conversations (see [`conversations`]): a person's direct message to the app, and a
//!   mention of the bot, which Slack sends twice (`app_mention` and `message`, one `ts`).
//! * App Home (see [`home`]): `app_home_opened` when a test opens a person's Home tab, and
//!   `views.publish` replacing what it shows.
//! * Interactivity (see [`interactive`]): a test "clicks" a button of a message the bot posted
//!   and the fake sends an `interactive` envelope with a `block_actions` payload, as Slack does;
//!   `chat.update` keeps a message's blocks when it sends none and drops them for `blocks: []`.
//! * History (see [`history`]): every message is kept as `conversations.replies` returns it,
//!   with the `metadata` a post carried (returned with `include_all_metadata`), paged with
//!   `has_more` and cursors.
//! * People and links (see [`people`]): `users.info` for the users a test added, and
//!   `chat.getPermalink` on the fake workspace's own domain, with Slack's errors.
//! * Shared files (see [`shared_files`]): a person's `file_share` message, its files served
//!   to the bot token only, a sign-in page (200, HTML) to anyone else, as Slack does.
//! * Crashes: [`FakeSlack::stall_next`] holds the answer to the next successful call of a
//!   method after Slack has done it, so a test can kill the client in the window where the
//!   effect happened but the client never learned of it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::{any, get, post};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

mod access;
mod acting;
mod assistant;
mod channels;
mod chat;
mod commands;
mod conversations;
mod error;
mod files;
mod history;
mod home;
mod interactive;
mod people;
mod reactions;
mod recorded;
mod shared_files;
mod socket_mode;
mod stall;
mod web;

pub use access::manifest_bot_scopes;
pub use assistant::{MAX_STREAM_TEXT, StatusSet, Stream};
pub use commands::{COMMAND_ACK_WINDOW, CommandAnswer};
pub use conversations::dm_channel;
use files::upload_handler;
pub use recorded::{Ack, Call, Post, Reaction, Sent, Update, Upload};
use shared_files::download_handler;
pub use shared_files::{Download, SharedFile};
use socket_mode::ws_handler;
pub use stall::Stall;
use stall::StallPoint;
use web::{Params, api_handler, json_param, str_param};

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
    /// People's reactions, as (channel, ts, user, name) (see [`FakeSlack::person_reacts`]).
    people_reactions: std::collections::HashSet<(String, String, String, String)>,
    /// What each person's Home tab shows: the last view published for them (see [`home`]).
    home_views: HashMap<String, Value>,
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
    /// Methods a test made unavailable, with the error each answers ([`FakeSlack::refuse`]).
    refused: HashMap<String, String>,
    /// Every status set, in order, and what each thread shows now (see [`assistant`]).
    statuses: Vec<assistant::StatusSet>,
    thread_status: HashMap<(String, String), String>,
    /// The bot's streamed messages, in the order they started.
    streams: Vec<assistant::Stream>,
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
    /// Files people shared, by id ([`shared_files`]), and every request for one.
    shared: HashMap<String, shared_files::Served>,
    downloads: Vec<Download>,
    /// The file ids `files.info` was asked about, in order.
    files_info: Vec<String>,
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
            .route(
                "/files-pri/{team_file}/download/{name}",
                get(download_handler),
            )
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
}
