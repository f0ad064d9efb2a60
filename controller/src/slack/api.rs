//! The Slack Web API side: building the slack-morphism client (any base URL, http or https,
//! so a fake on 127.0.0.1 works), learning the bot's identity with `auth.test`, and a sender
//! that posts into threads (each post naming its outbox effect in its metadata), updates,
//! reacts, uploads snippets and reads back what a thread shows of its own, while respecting
//! Slack's limits: a per-channel pace for `chat.postMessage` and a wait of `Retry-After` on
//! HTTP 429. [`Outcome`] says what a failed call means for its effect.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::assistant::Surface;
use crate::secret::Secret;

/// The HTTP connector type of our client.
pub type Connector = SlackClientHyperConnector<HttpsConnector<HttpConnector>>;
/// Our slack-morphism client.
pub type Client = SlackClient<Connector>;

/// How many times a call refused with 429 is retried.
const MAX_RATE_LIMIT_RETRIES: u32 = 5;
/// Longest one Web API call may go unanswered. Past it the call counts as failed with an
/// unknown outcome (its effect is looked for in the thread before any retry), so a Slack
/// that never answers cannot hold a thread's outbox, or anything else waiting, for ever.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The metadata `event_type` of the bot's posts.
pub const INTENT_EVENT: &str = "codebutler_post";
/// The metadata `event_payload` key naming the outbox effect a post delivers.
pub const INTENT_KEY: &str = "intent";
/// Messages asked for per `conversations.replies` page (Slack may send fewer).
const REPLIES_PAGE: &str = "200";

/// A Slack call that failed. Its message is one line: what Slack said (its error code, and
/// the scopes a `missing_scope` needs), never Slack's raw answer.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    #[error("set up Slack client: {0}")]
    Setup(String),
    #[error("slack {method}: {}", describe(source))]
    Api {
        method: &'static str,
        source: SlackClientError,
    },
    #[error("slack {method}: no answer within {}s", .after.as_secs())]
    Timeout {
        method: &'static str,
        after: Duration,
    },
}

/// What a failed call says about its effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Slack refused it and would again: it did not happen, and retrying is pointless.
    Refused,
    /// It certainly did not happen (rate limited, Slack unavailable); it may be retried.
    NotDone,
    /// It may or may not have happened (no answer, an unreadable one, or an error Slack says
    /// can come after part of the work was done): check before retrying.
    Unknown,
}

impl SlackError {
    /// Slack's error code (`invalid_auth`, `not_in_channel`, …), when Slack answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api {
                source: SlackClientError::ApiError(e),
                ..
            } => Some(e.code.as_str()),
            _ => None,
        }
    }

    /// The scopes a `missing_scope` answer says the call needs (Slack's `needed`).
    pub fn needed_scopes(&self) -> Option<String> {
        match self {
            Self::Api {
                source: SlackClientError::ApiError(e),
                ..
            } => needed_scopes(e),
            _ => None,
        }
    }

    /// Whether Slack could not be reached at all (no connection, no answer, an answer cut
    /// off), as opposed to an answer refusing the call.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. }
                | Self::Api {
                    source: SlackClientError::HttpProtocolError(_)
                        | SlackClientError::EndOfStream(_)
                        | SlackClientError::SystemError(_),
                    ..
                }
        )
    }

    /// What the failure says about the call's effect.
    pub fn outcome(&self) -> Outcome {
        match self {
            Self::Setup(_) => Outcome::NotDone,
            Self::Timeout { .. } => Outcome::Unknown,
            Self::Api { source, .. } => match source {
                SlackClientError::ApiError(e) => match e.code.as_str() {
                    // "It's possible some aspect of the operation succeeded" (Slack's docs).
                    "internal_error" | "fatal_error" => Outcome::Unknown,
                    "ratelimited" | "service_unavailable" | "request_timeout" => Outcome::NotDone,
                    _ => Outcome::Refused,
                },
                SlackClientError::RateLimitError(_) => Outcome::NotDone,
                SlackClientError::HttpError(_)
                | SlackClientError::HttpProtocolError(_)
                | SlackClientError::EndOfStream(_)
                | SlackClientError::SystemError(_)
                | SlackClientError::ProtocolError(_)
                | SlackClientError::SocketModeProtocolError(_) => Outcome::Unknown,
            },
        }
    }
}

/// A failed call in one plain line: Slack's error code with the fix for the usual ones (a
/// `missing_scope` with the scopes it needs), an HTTP status, or why Slack could not be
/// reached — never Slack's raw answer (slack-morphism's own message adds its body on a
/// second line, and the `Debug` of the connection error).
pub fn describe(error: &SlackClientError) -> String {
    match error {
        SlackClientError::ApiError(e) => match e.code.as_str() {
            "missing_scope" => format!(
                "missing_scope: the token lacks the scope(s) {}; add them to the app \
                 (deploy/slack-app-manifest.yaml) and reinstall it",
                needed_scopes(e).unwrap_or_else(|| "Slack did not name".to_owned())
            ),
            "not_in_channel" => {
                "not_in_channel: the bot is not in the channel; invite it there (/invite)"
                    .to_owned()
            }
            "channel_not_found" => {
                "channel_not_found: no channel with that id that the bot can see".to_owned()
            }
            code => code.to_owned(),
        },
        SlackClientError::HttpError(e) => format!("HTTP {}", e.status_code),
        SlackClientError::RateLimitError(_) => "rate limited (HTTP 429)".to_owned(),
        SlackClientError::HttpProtocolError(e) => match &e.cause {
            Some(cause) => format!("no connection: {}", innermost(cause.as_ref())),
            None => "no connection".to_owned(),
        },
        SlackClientError::EndOfStream(_) => "the connection closed before an answer".to_owned(),
        SlackClientError::ProtocolError(e) => {
            format!("an answer that is not JSON: {}", e.json_error)
        }
        SlackClientError::SystemError(e) => first_line(&e.to_string()),
        SlackClientError::SocketModeProtocolError(e) => first_line(&e.message),
    }
}

/// The innermost cause of an error chain: the operating system's own words ("Connection
/// refused", "failed to lookup address information"), not the wrappers' `Debug`.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut deepest = error;
    while let Some(next) = deepest.source() {
        deepest = next;
    }
    first_line(&deepest.to_string())
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// The `needed` scopes of a `missing_scope` answer, from its body.
fn needed_scopes(error: &slack_morphism::errors::SlackClientApiError) -> Option<String> {
    let body: serde_json::Value =
        serde_json::from_str(error.http_response_body.as_deref()?).ok()?;
    let needed = body.get("needed")?.as_str()?.trim();
    // Scope names only: what Slack sends, never anything else from the body.
    let clean = needed
        .split(',')
        .map(str::trim)
        .filter(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-'))
        })
        .collect::<Vec<_>>();
    (!clean.is_empty()).then(|| clean.join(", "))
}

/// What of the bot's own a thread shows (see [`Sender::thread_marks`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadMarks {
    /// Outbox effect ids named in posts' metadata, with the posts' ts.
    pub intents: HashMap<String, String>,
    /// Ids of the files shared in the thread.
    pub files: HashSet<String>,
    /// The ts of the bot's own messages that name no outbox effect and share no file, oldest
    /// first: streamed messages, which Slack makes without metadata (empty when the sender
    /// does not know the bot's user id).
    pub unmarked_own: Vec<String>,
}

impl ThreadMarks {
    fn add(&mut self, message: &RepliesMessage, bot_user: Option<&str>) {
        if let Some(meta) = &message.metadata
            && meta.event_type == INTENT_EVENT
            && let Some(id) = meta.event_payload.get(INTENT_KEY).and_then(|v| v.as_str())
        {
            self.intents.insert(id.to_owned(), message.ts.clone());
        } else if bot_user.is_some()
            && message.user.as_deref() == bot_user
            && message.files.is_empty()
        {
            self.unmarked_own.push(message.ts.clone());
        }
        for file in &message.files {
            if let Some(id) = file.get("id").and_then(|v| v.as_str()) {
                self.files.insert(id.to_owned());
            }
        }
    }
}

/// One page of `conversations.replies`, read leniently: only what [`ThreadMarks`] needs, so
/// another app's metadata or an unusual message cannot make the page unreadable.
#[derive(Debug, serde::Deserialize)]
struct RepliesPage {
    #[serde(default)]
    messages: Vec<RepliesMessage>,
    response_metadata: Option<RepliesCursor>,
}

#[derive(Debug, serde::Deserialize)]
struct RepliesCursor {
    next_cursor: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct RepliesMessage {
    ts: String,
    #[serde(default)]
    user: Option<String>,
    metadata: Option<RepliesMetadata>,
    #[serde(default)]
    files: Vec<serde_json::Value>,
}

#[derive(Debug, serde::Deserialize)]
struct RepliesMetadata {
    #[serde(default)]
    event_type: String,
    #[serde(default)]
    event_payload: serde_json::Map<String, serde_json::Value>,
}

/// Another thread's messages, as [`Sender::thread_messages`] read them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadMessages {
    /// Oldest first.
    pub messages: Vec<ThreadMessage>,
    /// False when the thread had more pages than were read.
    pub complete: bool,
}

/// One message of a thread, read leniently: what a reader of the thread needs.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct ThreadMessage {
    /// The message's ts.
    #[serde(default)]
    pub ts: String,
    /// The author's user id (absent for some bot posts).
    #[serde(default)]
    pub user: Option<String>,
    /// Set on a bot's post.
    #[serde(default)]
    pub bot_id: Option<String>,
    /// Its text, in Slack's markup.
    #[serde(default)]
    pub text: String,
    /// The thread it is in (a parent's own ts, or absent for a message without replies).
    #[serde(default)]
    pub thread_ts: Option<String>,
}

/// One page of `conversations.replies` as [`Sender::thread_messages`] reads it.
#[derive(Debug, serde::Deserialize)]
struct ThreadPage {
    #[serde(default)]
    messages: Vec<ThreadMessage>,
    response_metadata: Option<RepliesCursor>,
}

/// Builds the client for the Web API at `api_url` (no trailing slash).
pub fn build_client(api_url: &str) -> Result<Arc<Client>, SlackError> {
    crate::tls::ensure_provider();
    // Requests are small writes too: Nagle's algorithm would only hold them back.
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| SlackError::Setup(format!("load system TLS roots: {e}")))?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    let connector = Connector::with_connector(https).with_slack_api_url(api_url);
    Ok(Arc::new(SlackClient::new(connector)))
}

/// The bot's identity.
#[derive(Clone, Debug)]
pub struct BotIdentity {
    pub user_id: String,
    pub team_id: String,
    /// The bot's user name (what `/invite @…` takes), when Slack gives it.
    pub name: Option<String>,
}

/// Calls `auth.test` to learn the bot's user id (to ignore its own messages).
pub async fn auth_test(client: &Client, bot_token: &Secret) -> Result<BotIdentity, SlackError> {
    let token = SlackApiToken::new(bot_token.expose().into());
    let response = client
        .open_session(&token)
        .auth_test()
        .await
        .map_err(|source| SlackError::Api {
            method: "auth.test",
            source,
        })?;
    Ok(BotIdentity {
        user_id: response.user_id.0,
        team_id: response.team_id.0,
        name: response.user,
    })
}

/// Asks for a Socket Mode address with the app token (`apps.connections.open`), as Socket
/// Mode does before each connection, to learn at start whether Slack takes the token (and
/// has Socket Mode on for the app). The address is not used; Slack's tickets expire.
pub async fn check_app_token(client: &Client, app_token: &Secret) -> Result<(), SlackError> {
    let token = SlackApiToken::new(app_token.expose().into());
    client
        .open_session(&token)
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .map_err(|source| SlackError::Api {
            method: "apps.connections.open",
            source,
        })?;
    Ok(())
}

/// A channel as the bot sees it (`conversations.info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelInfo {
    /// Its name, without `#`.
    pub name: String,
    /// Whether the bot is in it.
    pub is_member: bool,
}

/// The channel `channel` as the bot sees it (`conversations.info`, read leniently: its name
/// and whether the bot is a member).
pub async fn channel_info(
    client: &Client,
    bot_token: &Secret,
    channel: &str,
) -> Result<ChannelInfo, SlackError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        channel: Channel,
    }
    #[derive(serde::Deserialize)]
    struct Channel {
        #[serde(default)]
        name: String,
        #[serde(default)]
        is_member: bool,
    }
    let token = SlackApiToken::new(bot_token.expose().into());
    let answer: Answer = client
        .open_session(&token)
        .http_session_api
        .http_get("conversations.info", &[("channel", Some(channel))], None)
        .await
        .map_err(|source| SlackError::Api {
            method: "conversations.info",
            source,
        })?;
    Ok(ChannelInfo {
        name: answer.channel.name,
        is_member: answer.channel.is_member,
    })
}

/// Posts, reacts and uploads on the bot's behalf. Cheap to clone.
#[derive(Clone)]
pub struct Sender {
    client: Arc<Client>,
    token: SlackApiToken,
    pace: Arc<Pace>,
    /// Slack's AI-app surface, and where it is not available ([`super::assistant`]).
    surface: Arc<Surface>,
    /// The bot's own user id, which its posts carry ([`ThreadMarks::unmarked_own`]).
    bot_user: Option<Arc<str>>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl Sender {
    /// A sender with the bot token, posting at most `messages_per_second` per channel.
    pub fn new(client: Arc<Client>, bot_token: &Secret, messages_per_second: f64) -> Self {
        Self {
            client,
            token: SlackApiToken::new(bot_token.expose().into()),
            pace: Arc::new(Pace::new(messages_per_second)),
            surface: Arc::new(Surface::off()),
            bot_user: None,
        }
    }

    /// The same sender with Slack's AI-app surface `surface` (off unless given).
    pub fn with_surface(mut self, surface: Surface) -> Self {
        self.surface = Arc::new(surface);
        self
    }

    /// The same sender knowing the bot's own user id (`auth.test`'s), so a thread's reading
    /// can tell the bot's own messages that name no outbox effect.
    pub fn with_bot_user(mut self, user_id: &str) -> Self {
        self.bot_user = Some(Arc::from(user_id));
        self
    }

    /// Slack's AI-app surface as this sender uses it.
    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    /// A Web API method called with `request` as its JSON body, answered as `T`.
    pub(super) async fn call_post<R, T>(
        &self,
        method: &'static str,
        request: &R,
    ) -> Result<T, SlackError>
    where
        R: serde::Serialize + Send + Sync,
        T: for<'de> serde::Deserialize<'de> + Send,
    {
        self.retrying(method, || async {
            self.client
                .open_session(&self.token)
                .http_session_api
                .http_post(method, request, None)
                .await
        })
        .await
    }

    /// Posts `text` (with Block Kit `blocks`, if any; `text` is then their notification and
    /// accessibility fallback) into the thread (an empty `thread_ts`: the channel's top
    /// level), paced, with metadata naming the outbox effect `intent` so the post can be
    /// found again after a crash. Returns its ts.
    pub async fn post_message(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
        blocks: Option<Vec<SlackBlock>>,
        intent: &str,
    ) -> Result<String, SlackError> {
        let mut content = SlackMessageContent::new()
            .with_text(text.into())
            .with_metadata(
                SlackMessageMetadata::new(INTENT_EVENT.into()).with_event_payload(HashMap::from([
                    (INTENT_KEY.to_owned(), intent.to_owned()),
                ])),
            );
        if let Some(blocks) = blocks {
            content = content.with_blocks(blocks);
        }
        self.pace.wait(channel).await;
        let mut request =
            SlackApiChatPostMessageRequest::new(channel.into(), content).with_unfurl_links(false);
        // An empty thread ts is the channel itself (the merge order is posted there).
        if !thread_ts.is_empty() {
            request = request.with_thread_ts(thread_ts.into());
        }
        let response = self
            .retrying("chat.postMessage", || async {
                self.client
                    .open_session(&self.token)
                    .chat_post_message(&request)
                    .await
            })
            .await?;
        Ok(response.ts.0)
    }

    /// Replaces the text of a message the bot posted.
    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<(), SlackError> {
        self.update_content(
            channel,
            ts,
            SlackMessageContent::new().with_text(text.into()),
        )
        .await
    }

    /// Replaces a message the bot posted with `blocks` and the fallback `text`; an empty
    /// `blocks` removes the message's blocks (and so its buttons).
    pub async fn update_blocks(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: Vec<SlackBlock>,
    ) -> Result<(), SlackError> {
        self.update_content(
            channel,
            ts,
            SlackMessageContent::new()
                .with_text(text.into())
                .with_blocks(blocks),
        )
        .await
    }

    async fn update_content(
        &self,
        channel: &str,
        ts: &str,
        content: SlackMessageContent,
    ) -> Result<(), SlackError> {
        let request = SlackApiChatUpdateRequest::new(channel.into(), content, ts.into());
        self.retrying("chat.update", || async {
            self.client
                .open_session(&self.token)
                .chat_update(&request)
                .await
        })
        .await?;
        Ok(())
    }

    /// The web address of a message (`chat.getPermalink`), on the workspace's own domain.
    pub async fn permalink(&self, channel: &str, ts: &str) -> Result<String, SlackError> {
        let request = SlackApiChatGetPermalinkRequest::new(channel.into(), ts.into());
        let response = self
            .retrying("chat.getPermalink", || async {
                self.client
                    .open_session(&self.token)
                    .chat_get_permalink(&request)
                    .await
            })
            .await?;
        Ok(response.permalink.to_string())
    }

    /// The name people see for `user` (`users.info`): the profile's display name, else
    /// its real name, else `None`.
    pub async fn user_name(&self, user: &str) -> Result<Option<String>, SlackError> {
        let request = SlackApiUsersInfoRequest::new(user.into());
        let response = self
            .retrying("users.info", || async {
                self.client
                    .open_session(&self.token)
                    .users_info(&request)
                    .await
            })
            .await?;
        let user = response.user;
        let (display, real) = user
            .profile
            .map(|p| (p.display_name, p.real_name))
            .unwrap_or((None, None));
        Ok([display, real, user.real_name]
            .into_iter()
            .flatten()
            .map(|n| n.trim().to_owned())
            .find(|n| !n.is_empty()))
    }

    /// Adds a reaction; one that is already there is fine.
    pub async fn react(&self, channel: &str, ts: &str, name: &str) -> Result<(), SlackError> {
        let request = SlackApiReactionsAddRequest::new(channel.into(), name.into(), ts.into());
        let result = self
            .retrying("reactions.add", || async {
                self.client
                    .open_session(&self.token)
                    .reactions_add(&request)
                    .await
            })
            .await;
        match result {
            Err(SlackError::Api {
                source: SlackClientError::ApiError(ref e),
                ..
            }) if e.code == "already_reacted" => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Uploads `content` as a snippet file, not yet shared anywhere (the first two steps of
    /// files upload v2); returns the file's id for [`Sender::share_file`].
    pub async fn upload_file(
        &self,
        filename: &str,
        filetype: &str,
        content: &str,
    ) -> Result<String, SlackError> {
        self.upload_bytes(
            filename,
            Some(filetype),
            content.as_bytes().to_vec(),
            "text/plain",
        )
        .await
    }

    /// Uploads `bytes` (of type `mimetype`; a snippet of `snippet_type` when given) as a file
    /// not yet shared anywhere (the first two steps of files upload v2); returns the file's
    /// id for [`Sender::share_file`].
    pub async fn upload_bytes(
        &self,
        filename: &str,
        snippet_type: Option<&str>,
        bytes: Vec<u8>,
        mimetype: &str,
    ) -> Result<String, SlackError> {
        let mut url_request =
            SlackApiFilesGetUploadUrlExternalRequest::new(filename.into(), bytes.len());
        if let Some(filetype) = snippet_type {
            url_request = url_request.with_snippet_type(SlackFileSnippetType(filetype.into()));
        }
        let target = self
            .retrying("files.getUploadURLExternal", || async {
                self.client
                    .open_session(&self.token)
                    .get_upload_url_external(&url_request)
                    .await
            })
            .await?;
        let upload = SlackApiFilesUploadViaUrlRequest::new(
            target.upload_url.clone(),
            bytes,
            mimetype.into(),
        );
        self.retrying("files upload", || async {
            self.client
                .open_session(&self.token)
                .files_upload_via_url(&upload)
                .await
        })
        .await?;
        Ok(target.file_id.0)
    }

    /// Shares an uploaded file into the thread, titled `title` (files upload v2's last step).
    pub async fn share_file(
        &self,
        channel: &str,
        thread_ts: &str,
        file_id: &str,
        title: &str,
    ) -> Result<(), SlackError> {
        let complete = SlackApiFilesCompleteUploadExternalRequest::new(vec![
            SlackApiFilesComplete::new(SlackFileId(file_id.into())).with_title(title.into()),
        ])
        .with_channel_id(channel.into())
        .with_thread_ts(thread_ts.into());
        self.retrying("files.completeUploadExternal", || async {
            self.client
                .open_session(&self.token)
                .files_complete_upload_external(&complete)
                .await
        })
        .await?;
        Ok(())
    }

    /// What of its own a thread shows from `oldest` (a Slack ts) on: the outbox effects its
    /// posts name in their metadata and the files shared in it. Reads the thread with
    /// `conversations.replies` (`include_all_metadata`; `conversations.history` for the
    /// channel's top level, an empty `thread_ts`), page by page: a call Slack rate-limits
    /// hard, so it is made only to settle an effect whose outcome is unknown, and only from
    /// when that effect was recorded.
    pub async fn thread_marks(
        &self,
        channel: &str,
        thread_ts: &str,
        oldest: &str,
    ) -> Result<ThreadMarks, SlackError> {
        let mut marks = ThreadMarks::default();
        let mut cursor: Option<String> = None;
        // An empty thread ts is the channel itself: its top-level messages.
        let method = if thread_ts.is_empty() {
            "conversations.history"
        } else {
            "conversations.replies"
        };
        loop {
            let page: RepliesPage = self
                .retrying(method, || async {
                    let mut params = vec![
                        ("channel", Some(channel)),
                        ("include_all_metadata", Some("true")),
                        ("oldest", Some(oldest)),
                        ("inclusive", Some("true")),
                        ("limit", Some(REPLIES_PAGE)),
                    ];
                    if !thread_ts.is_empty() {
                        params.push(("ts", Some(thread_ts)));
                    }
                    if let Some(cursor) = &cursor {
                        params.push(("cursor", Some(cursor.as_str())));
                    }
                    self.client
                        .open_session(&self.token)
                        .http_session_api
                        .http_get(method, &params, None)
                        .await
                })
                .await?;
            for message in &page.messages {
                marks.add(message, self.bot_user.as_deref());
            }
            cursor = page
                .response_metadata
                .and_then(|m| m.next_cursor)
                .filter(|c| !c.is_empty());
            if cursor.is_none() {
                return Ok(marks);
            }
        }
    }

    /// The messages of another thread of the channel, oldest first, for a cross-thread
    /// reference ([`crate::pm::references`]): `conversations.replies` page by page, at most
    /// `max_pages` pages of [`REPLIES_PAGE`] messages (`complete` says whether the whole
    /// thread was read). Read once per message that links the thread, never again.
    pub async fn thread_messages(
        &self,
        channel: &str,
        thread_ts: &str,
        max_pages: usize,
    ) -> Result<ThreadMessages, SlackError> {
        let mut read = ThreadMessages {
            messages: Vec::new(),
            complete: true,
        };
        let mut cursor: Option<String> = None;
        for _ in 0..max_pages {
            let page: ThreadPage = self
                .retrying("conversations.replies", || async {
                    let mut params = vec![
                        ("channel", Some(channel)),
                        ("ts", Some(thread_ts)),
                        ("limit", Some(REPLIES_PAGE)),
                    ];
                    if let Some(cursor) = &cursor {
                        params.push(("cursor", Some(cursor.as_str())));
                    }
                    self.client
                        .open_session(&self.token)
                        .http_session_api
                        .http_get("conversations.replies", &params, None)
                        .await
                })
                .await?;
            read.messages.extend(page.messages);
            cursor = page
                .response_metadata
                .and_then(|m| m.next_cursor)
                .filter(|c| !c.is_empty());
            if cursor.is_none() {
                return Ok(read);
            }
        }
        read.complete = false;
        Ok(read)
    }

    /// Replaces what `user`'s App Home tab shows with `blocks` (`views.publish`). Its answer
    /// (the view as Slack keeps it) is not needed and not read.
    pub async fn publish_home(
        &self,
        user: &str,
        blocks: Vec<SlackBlock>,
    ) -> Result<(), SlackError> {
        let request = SlackApiViewsPublishRequest::new(
            user.into(),
            SlackView::Home(SlackHomeView::new(blocks)),
        );
        let _: serde_json::Value = self
            .retrying("views.publish", || async {
                self.client
                    .open_session(&self.token)
                    .http_session_api
                    .http_post("views.publish", &request, None)
                    .await
            })
            .await?;
        Ok(())
    }

    /// One message of `channel` found by its `ts` (a top-level message or a reply), as
    /// `conversations.replies` shows it, reading at most `max_pages` pages of its thread;
    /// `None` when Slack has no such message (`thread_not_found`) or it is past those pages.
    pub async fn find_message(
        &self,
        channel: &str,
        ts: &str,
        max_pages: usize,
    ) -> Result<Option<ThreadMessage>, SlackError> {
        match self.thread_messages(channel, ts, max_pages).await {
            Ok(read) => Ok(read.messages.into_iter().find(|m| m.ts == ts)),
            Err(e) if e.code() == Some("thread_not_found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs `call`, waiting out HTTP 429 answers as long as their `Retry-After` says; an
    /// attempt unanswered after [`CALL_TIMEOUT`] fails with [`SlackError::Timeout`].
    async fn retrying<T, F, Fut>(&self, method: &'static str, call: F) -> Result<T, SlackError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ClientResult<T>>,
    {
        let mut attempt = 0;
        loop {
            let Ok(answer) = tokio::time::timeout(CALL_TIMEOUT, call()).await else {
                crate::metrics::metrics().slack_error(method, false);
                tracing::warn!(
                    "slack {method}: no answer within {}s",
                    CALL_TIMEOUT.as_secs()
                );
                return Err(SlackError::Timeout {
                    method,
                    after: CALL_TIMEOUT,
                });
            };
            match answer {
                Err(SlackClientError::RateLimitError(e)) if attempt < MAX_RATE_LIMIT_RETRIES => {
                    crate::metrics::metrics().slack_error(method, true);
                    let wait = e.retry_after.unwrap_or(Duration::from_secs(1));
                    tracing::warn!(
                        "slack {method} rate limited; retrying in {}s",
                        wait.as_secs_f64()
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(source) => {
                    let limited = matches!(source, SlackClientError::RateLimitError(_));
                    crate::metrics::metrics().slack_error(method, limited);
                    return Err(SlackError::Api { method, source });
                }
                Ok(v) => return Ok(v),
            }
        }
    }
}

/// Spaces out posts per channel (Slack allows about one message per second per channel).
#[derive(Debug)]
struct Pace {
    interval: Duration,
    next: Mutex<HashMap<String, Instant>>,
}

impl Pace {
    fn new(per_second: f64) -> Self {
        let interval = if per_second > 0.0 && per_second.is_finite() {
            Duration::from_secs_f64(1.0 / per_second)
        } else {
            Duration::ZERO
        };
        Self {
            interval,
            next: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for this channel's next slot, reserving it.
    async fn wait(&self, channel: &str) {
        if self.interval.is_zero() {
            return;
        }
        let slot = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let slot = next
                .get(channel)
                .copied()
                .filter(|s| *s > now)
                .unwrap_or(now);
            next.insert(channel.to_owned(), slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bots_own_messages_without_an_effect_are_told_apart() {
        let page: RepliesPage = serde_json::from_value(serde_json::json!({"messages": [
            {"ts": "1.0", "user": "UALICE", "text": "how do we deploy?"},
            {"ts": "2.0", "user": "UBOT", "metadata": {"event_type": INTENT_EVENT,
                "event_payload": {INTENT_KEY: "C1-1.0-a/0"}}},
            {"ts": "3.0", "user": "UBOT", "files": [{"id": "F1"}]},
            {"ts": "4.0", "user": "UOTHERBOT", "bot_id": "B2"},
            {"ts": "5.0", "user": "UBOT", "text": "streamed"},
        ]}))
        .unwrap();
        let mut marks = ThreadMarks::default();
        for message in &page.messages {
            marks.add(message, Some("UBOT"));
        }
        assert_eq!(marks.unmarked_own, ["5.0"]);
        assert_eq!(
            marks.intents.get("C1-1.0-a/0").map(String::as_str),
            Some("2.0")
        );
        assert!(marks.files.contains("F1"));
        // Without the bot's id nothing is taken for its own.
        let mut unknown = ThreadMarks::default();
        for message in &page.messages {
            unknown.add(message, None);
        }
        assert!(unknown.unmarked_own.is_empty());
    }

    /// A call Slack never answers fails after [`CALL_TIMEOUT`], its outcome unknown (it may
    /// have happened), instead of holding its caller for ever.
    #[tokio::test(start_paused = true)]
    async fn an_unanswered_call_times_out_with_an_unknown_outcome() {
        let client = build_client("http://127.0.0.1:9/api").unwrap();
        let sender = Sender::new(client, &Secret::new("xoxb-test"), 0.0);
        let start = Instant::now();
        let result: Result<(), SlackError> = sender
            .retrying("chat.postMessage", std::future::pending)
            .await;
        let e = result.unwrap_err();
        assert_eq!(start.elapsed(), CALL_TIMEOUT);
        assert_eq!(e.outcome(), Outcome::Unknown);
        assert_eq!(
            e.to_string(),
            "slack chat.postMessage: no answer within 30s"
        );
        // An answer within the time is passed on.
        let answered: Result<u8, SlackError> =
            sender.retrying("chat.update", || async { Ok(7) }).await;
        assert_eq!(answered.unwrap(), 7);
    }

    /// A failed call reads as one line: Slack's code with its fix, the scopes a
    /// `missing_scope` needs, or why Slack was out of reach — never Slack's raw body, which
    /// slack-morphism's own message puts on a second line.
    #[test]
    fn failures_are_described_in_one_plain_line() {
        use slack_morphism::errors::{SlackClientApiError, SlackClientHttpProtocolError};
        let api = |code: &str, body: &str| SlackError::Api {
            method: "chat.postMessage",
            source: SlackClientError::ApiError(
                SlackClientApiError::new(code.to_owned()).with_http_response_body(body.to_owned()),
            ),
        };
        let scope = api(
            "missing_scope",
            r#"{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:read,xoxb-looks-like-a-token"}"#,
        );
        assert_eq!(
            scope.to_string(),
            "slack chat.postMessage: missing_scope: the token lacks the scope(s) chat:write; add \
             them to the app (deploy/slack-app-manifest.yaml) and reinstall it"
        );
        assert_eq!(scope.needed_scopes().as_deref(), Some("chat:write"));
        assert_eq!(scope.code(), Some("missing_scope"));
        let not_in = api("not_in_channel", r#"{"ok":false,"error":"not_in_channel"}"#);
        assert!(not_in.to_string().contains("invite it there"), "{not_in}");
        assert!(!not_in.to_string().contains("Body"), "{not_in}");
        let revoked = api("invalid_auth", r#"{"ok":false,"error":"invalid_auth"}"#);
        assert_eq!(revoked.to_string(), "slack chat.postMessage: invalid_auth");
        assert!(!revoked.is_unreachable());

        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let wrapped: Box<dyn std::error::Error + Send + Sync> =
            Box::new(std::io::Error::other(refused));
        let unreachable = SlackError::Api {
            method: "auth.test",
            source: SlackClientError::HttpProtocolError(
                SlackClientHttpProtocolError::new().with_cause(wrapped),
            ),
        };
        assert!(unreachable.is_unreachable());
        let shown = unreachable.to_string();
        assert!(
            shown.starts_with("slack auth.test: no connection: "),
            "{shown}"
        );
        assert!(shown.contains("connection refused"), "{shown}");
        assert_eq!(shown.lines().count(), 1, "{shown}");
    }

    #[tokio::test(start_paused = true)]
    async fn pace_spaces_posts_per_channel() {
        let pace = Pace::new(1.0);
        let start = Instant::now();
        pace.wait("C1").await;
        pace.wait("C2").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        pace.wait("C1").await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        pace.wait("C1").await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
