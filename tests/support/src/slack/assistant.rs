//! Slack's AI-app surface: `assistant.threads.setStatus` (the "is thinking…" line under a
//! thread) and chat streaming (`chat.startStream`, `chat.appendStream`, `chat.stopStream`),
//! as Slack documents them.
//!
//! - `assistant.threads.setStatus {channel_id, thread_ts, status, loading_messages?}`: needs
//!   `chat:write`; `status` is required but may be empty (that clears it); at most 10
//!   `loading_messages`; a thread the channel does not hold is `thread_not_found`. The status
//!   shows until the bot next posts in the thread (a post or a stream's start), or until an
//!   empty one clears it.
//! - `chat.startStream {channel, thread_ts, recipient_user_id?, recipient_team_id?,
//!   markdown_text?, chunks?, task_display_mode?}`: needs `chat:write` and `assistant:write`;
//!   in a channel thread (anything but a DM) both recipients are required, else
//!   `invalid_arguments`; `task_display_mode` is `plan` or `timeline`. It posts the bot's
//!   message (as `chat.postMessage` does: a message event, history) and answers its `ts`.
//! - `chat.appendStream {channel, ts, markdown_text | chunks}`: adds to a message still
//!   streaming (`message_not_in_streaming_state` once stopped, `message_not_found` for none);
//!   `markdown_text` up to 12,000 characters (`msg_too_long`).
//! - `chat.stopStream {channel, ts, markdown_text?, chunks?, blocks?}`: the last text, then the
//!   message stops streaming; it can be edited with `chat.update` like any other.
//!
//! Chunks are `markdown_text {text}`, `plan_update {title}` and `task_update {id, title,
//! status, output?}` with a status of `pending`, `in_progress`, `complete` or `error`; any
//! other is `invalid_chunks`. The text a streamed message shows (in `conversations.replies`)
//! is its `markdown_text` and its `markdown_text` chunks, in order; its plan and tasks are in
//! [`FakeSlack::streams`].
//!
//! A test makes a method unavailable with [`FakeSlack::refuse`] (as a workspace without the
//! feature, or an app without the scope, answers).

use serde_json::{Value, json};

use super::error::ApiError;
use super::web::{Params, json_param, need, str_param};
use super::{APP_ID, BOT_ID, BOT_USER_ID, FakeSlack, Inner, SlackState, TEAM_ID, channel_type};
use super::{access, history};

/// The longest `markdown_text` one streaming call takes.
pub const MAX_STREAM_TEXT: usize = 12_000;
/// The most `loading_messages` a status rotates through.
const MAX_LOADING_MESSAGES: usize = 10;

/// One `assistant.threads.setStatus` Slack took.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSet {
    pub channel: String,
    pub thread_ts: String,
    /// The status (empty: cleared).
    pub status: String,
    pub loading_messages: Vec<String>,
}

/// A streamed message of the bot's, as Slack keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    pub channel: String,
    pub ts: String,
    pub thread_ts: String,
    pub recipient_user_id: Option<String>,
    pub recipient_team_id: Option<String>,
    /// `plan` or `timeline`, if the start named one.
    pub task_display_mode: Option<String>,
    /// Every chunk it received, in order (`markdown_text` given as a parameter counts as a
    /// `markdown_text` chunk).
    pub chunks: Vec<Value>,
    /// The text it shows: its markdown, in order.
    pub text: String,
    /// Whether `chat.stopStream` ended it.
    pub stopped: bool,
}

impl Stream {
    /// The plan's title: the last `plan_update`'s.
    pub fn plan_title(&self) -> Option<String> {
        self.chunks
            .iter()
            .rev()
            .find(|c| c["type"] == "plan_update")
            .and_then(|c| c["title"].as_str())
            .map(str::to_owned)
    }

    /// Each task as its last `task_update` left it (`id`, `title`, `status`, `output`), in
    /// the order the tasks first appeared.
    pub fn tasks(&self) -> Vec<Value> {
        let mut tasks: Vec<Value> = Vec::new();
        for chunk in self.chunks.iter().filter(|c| c["type"] == "task_update") {
            match tasks.iter_mut().find(|t| t["id"] == chunk["id"]) {
                Some(task) => *task = chunk.clone(),
                None => tasks.push(chunk.clone()),
            }
        }
        tasks
    }
}

/// `assistant.threads.setStatus`.
pub(super) fn set_status(
    _: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let channel = need(params, "channel_id")?;
    let thread_ts = need(params, "thread_ts")?;
    // Required, and may be empty: an empty status clears it.
    let status = match params.get("status") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(ApiError::InvalidArguments),
    };
    let loading_messages: Vec<String> = match json_param(params, "loading_messages") {
        None => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|m| m.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or(ApiError::InvalidArguments)?,
        Some(_) => return Err(ApiError::InvalidArguments),
    };
    if loading_messages.len() > MAX_LOADING_MESSAGES {
        return Err(ApiError::InvalidArguments);
    }
    access::may_post(st, &channel)?;
    if !st
        .history
        .contains_key(&(channel.clone(), thread_ts.clone()))
    {
        return Err(ApiError::ThreadNotFound);
    }
    st.thread_status
        .insert((channel.clone(), thread_ts.clone()), status.clone());
    st.statuses.push(StatusSet {
        channel,
        thread_ts,
        status,
        loading_messages,
    });
    Ok(json!({"ok": true}))
}

/// The chunks of a streaming call, checked: `markdown_text` (if given) first, then `chunks`.
fn chunks_of(params: &Params) -> Result<Vec<Value>, ApiError> {
    let mut chunks = Vec::new();
    if let Some(text) = str_param(params, "markdown_text") {
        chunks.push(json!({"type": "markdown_text", "text": text}));
    }
    match json_param(params, "chunks") {
        None => {}
        Some(Value::Array(list)) => {
            for chunk in list {
                check_chunk(&chunk)?;
                chunks.push(chunk);
            }
        }
        Some(_) => return Err(ApiError::InvalidChunks),
    }
    let text: usize = chunks
        .iter()
        .filter_map(|c| c["text"].as_str())
        .map(|t| t.chars().count())
        .sum();
    if text > MAX_STREAM_TEXT {
        return Err(ApiError::MsgTooLong);
    }
    Ok(chunks)
}

fn check_chunk(chunk: &Value) -> Result<(), ApiError> {
    let text = |key: &str| chunk[key].as_str().is_some_and(|s| !s.is_empty());
    let ok = match chunk["type"].as_str() {
        Some("markdown_text") => text("text"),
        Some("plan_update") => text("title"),
        Some("task_update") => {
            text("id")
                && text("title")
                && matches!(
                    chunk["status"].as_str(),
                    Some("pending" | "in_progress" | "complete" | "error")
                )
                && (chunk.get("output").is_none() || chunk["output"].is_string())
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::InvalidChunks)
    }
}

fn markdown(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter(|c| c["type"] == "markdown_text")
        .filter_map(|c| c["text"].as_str())
        .collect()
}

/// `chat.startStream`.
pub(super) fn start_stream(
    _: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let channel = need(params, "channel")?;
    let thread_ts = need(params, "thread_ts")?;
    let recipient_user_id = str_param(params, "recipient_user_id");
    let recipient_team_id = str_param(params, "recipient_team_id");
    // Outside a DM Slack must know whom the stream is for.
    if channel_type(&channel) != "im"
        && (recipient_user_id.is_none() || recipient_team_id.is_none())
    {
        return Err(ApiError::InvalidArguments);
    }
    let task_display_mode = str_param(params, "task_display_mode");
    if task_display_mode
        .as_deref()
        .is_some_and(|m| !matches!(m, "plan" | "timeline"))
    {
        return Err(ApiError::InvalidArguments);
    }
    let chunks = chunks_of(params)?;
    access::may_post(st, &channel)?;
    if !st
        .history
        .contains_key(&(channel.clone(), thread_ts.clone()))
    {
        return Err(ApiError::ThreadNotFound);
    }
    let text = markdown(&chunks);
    let ts = st.next_ts();
    st.shown.insert(
        (channel.clone(), ts.clone()),
        super::interactive::Shown {
            text: text.clone(),
            blocks: None,
            thread_ts: Some(thread_ts.clone()),
        },
    );
    // The bot's reply clears the thread's status.
    st.thread_status
        .remove(&(channel.clone(), thread_ts.clone()));
    let message = json!({
        "type": "message",
        "ts": ts,
        "text": text,
        "user": BOT_USER_ID,
        "bot_id": BOT_ID,
        "app_id": APP_ID,
        "team": TEAM_ID,
        "thread_ts": thread_ts,
    });
    let mut event = message.clone();
    event["channel"] = json!(channel);
    event["event_ts"] = json!(ts);
    event["channel_type"] = json!(channel_type(&channel));
    st.emit_event(event);
    st.streams.push(Stream {
        channel: channel.clone(),
        ts: ts.clone(),
        thread_ts,
        recipient_user_id,
        recipient_team_id,
        task_display_mode,
        chunks,
        text,
        stopped: false,
    });
    Ok(json!({"ok": true, "channel": channel, "ts": ts}))
}

/// The stream at (`channel`, `ts`) still streaming, or Slack's error.
fn streaming<'a>(
    st: &'a mut SlackState,
    channel: &str,
    ts: &str,
) -> Result<&'a mut Stream, ApiError> {
    let stream = st
        .streams
        .iter_mut()
        .find(|s| s.channel == channel && s.ts == ts)
        .ok_or(ApiError::MessageNotFound)?;
    if stream.stopped {
        return Err(ApiError::MessageNotInStreamingState);
    }
    Ok(stream)
}

/// Adds `chunks` to the stream and shows its text.
fn add(st: &mut SlackState, channel: &str, ts: &str, chunks: Vec<Value>) -> Result<(), ApiError> {
    let stream = streaming(st, channel, ts)?;
    stream.text.push_str(&markdown(&chunks));
    stream.chunks.extend(chunks);
    let text = stream.text.clone();
    if let Some(shown) = st.shown.get_mut(&(channel.to_owned(), ts.to_owned())) {
        shown.text = text.clone();
    }
    if let Some(kept) = st.history.get_mut(&(channel.to_owned(), ts.to_owned())) {
        kept["text"] = json!(text);
    }
    Ok(())
}

/// `chat.appendStream`.
pub(super) fn append_stream(
    _: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let channel = need(params, "channel")?;
    let ts = need(params, "ts")?;
    let chunks = chunks_of(params)?;
    if chunks.is_empty() {
        return Err(ApiError::InvalidArguments);
    }
    access::may_post(st, &channel)?;
    add(st, &channel, &ts, chunks)?;
    Ok(json!({"ok": true, "channel": channel, "ts": ts}))
}

/// `chat.stopStream`.
pub(super) fn stop_stream(
    _: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let channel = need(params, "channel")?;
    let ts = need(params, "ts")?;
    let chunks = chunks_of(params)?;
    let blocks = match json_param(params, "blocks") {
        Some(b) => Some(super::interactive::as_slack_stores(st, b)?),
        None => None,
    };
    access::may_post(st, &channel)?;
    add(st, &channel, &ts, chunks)?;
    let text = streaming(st, &channel, &ts)?.text.clone();
    if let Some(blocks) = &blocks {
        super::interactive::apply_update(st, &channel, &ts, &text, Some(blocks));
        if let Some(kept) = st.history.get_mut(&(channel.clone(), ts.clone())) {
            kept["blocks"] = blocks.clone();
        }
    }
    streaming(st, &channel, &ts)?.stopped = true;
    let message = st
        .history
        .get(&(channel.clone(), ts.clone()))
        .map(history::from_event)
        .unwrap_or(Value::Null);
    Ok(json!({"ok": true, "channel": channel, "ts": ts, "message": message}))
}

impl FakeSlack {
    /// Every status Slack took, in order.
    pub fn statuses(&self) -> Vec<StatusSet> {
        self.inner.lock().statuses.clone()
    }

    /// The status a thread shows now (`None`: none, or cleared).
    pub fn thread_status(&self, channel: &str, thread_ts: &str) -> Option<String> {
        self.inner
            .lock()
            .thread_status
            .get(&(channel.to_owned(), thread_ts.to_owned()))
            .filter(|s| !s.is_empty())
            .cloned()
    }

    /// Every streamed message, in the order they started.
    pub fn streams(&self) -> Vec<Stream> {
        self.inner.lock().streams.clone()
    }

    /// From now on every call of `method` is answered `{"ok": false, "error": error}` and does
    /// nothing (as a workspace without the feature answers, e.g. `feature_not_enabled`, or an
    /// app without its scope, `missing_scope`).
    pub fn refuse(&self, method: &str, error: &str) {
        self.inner
            .lock()
            .refused
            .insert(method.to_owned(), error.to_owned());
    }
}
