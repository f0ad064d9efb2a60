//! What a conversation holds, as Slack's history methods return it:
//! `conversations.replies` and `conversations.history`.
//!
//! Every message event the fake emits (user messages, the bot's posts, file shares) is kept
//! as the history methods show it: no `channel`/`event_ts`/`channel_type`, edits applied,
//! deletions removed. A post's `metadata` (`{event_type, event_payload}`, checked like Slack
//! checks it) is kept too, and returned only when the caller asks `include_all_metadata`.
//!
//! `conversations.replies` behaves as documented: `channel` and `ts` are required, `ts` may be
//! the parent or any reply (the whole thread comes back, parent first, oldest first, within
//! `oldest`/`latest`, exclusive unless `inclusive`), an unknown `ts` is `thread_not_found`;
//! `limit` defaults to 1000 and pages are chained with
//! `has_more` and an opaque `response_metadata.next_cursor` (a bad one is `invalid_cursor`).
//! Slack caps pages of apps outside its Marketplace at 15 messages; [`FakeSlack::cap_history_pages`]
//! turns that on. `conversations.history` pages the channel's top-level messages the same
//! way, newest first. Rate limits come from [`FakeSlack::rate_limit`], as for every method.

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::web::need;
use super::{FakeSlack, Params, SlackState, json_param, str_param};

/// Slack's default and largest `limit`.
const MAX_LIMIT: usize = 1000;

/// A message's ts as a number pair, so "9.1" sorts before "10.1".
fn ts_key(ts: &str) -> (u64, u64) {
    let (secs, micros) = ts.split_once('.').unwrap_or((ts, "0"));
    (secs.parse().unwrap_or(0), micros.parse().unwrap_or(0))
}

/// The message of `event` as the history methods show it.
pub(super) fn from_event(event: &Value) -> Value {
    let mut message = event.clone();
    if let Some(obj) = message.as_object_mut() {
        for key in ["channel", "event_ts", "channel_type"] {
            obj.remove(key);
        }
    }
    message
}

/// Checks a `metadata` argument as Slack does: an object with a non-empty string
/// `event_type` and an object `event_payload`.
pub(super) fn check_metadata(params: &Params) -> Result<Option<Value>, ApiError> {
    let Some(raw) = params.get("metadata") else {
        return Ok(None);
    };
    let metadata = json_param(params, "metadata").ok_or(ApiError::InvalidMetadataFormat)?;
    if raw.is_string() && !metadata.is_object() {
        return Err(ApiError::InvalidMetadataFormat);
    }
    let ok = metadata["event_type"]
        .as_str()
        .is_some_and(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        && metadata["event_payload"].is_object();
    if !ok {
        return Err(ApiError::InvalidMetadataFormat);
    }
    Ok(Some(metadata))
}

impl SlackState {
    /// Keeps a new message (its event) in its conversation's history.
    pub(super) fn remember(&mut self, channel: &str, ts: &str, event: &Value) {
        self.history
            .insert((channel.to_owned(), ts.to_owned()), from_event(event));
    }

    /// Applies an edit of a kept message.
    pub(super) fn edit_history(
        &mut self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: Option<&Value>,
        edited: Value,
    ) {
        let Some(message) = self.history.get_mut(&(channel.to_owned(), ts.to_owned())) else {
            return;
        };
        message["text"] = json!(text);
        match blocks {
            None => {}
            Some(Value::Array(b)) if b.is_empty() => {
                if let Some(obj) = message.as_object_mut() {
                    obj.remove("blocks");
                }
            }
            Some(b) => message["blocks"] = b.clone(),
        }
        message["edited"] = edited;
    }
}

/// `conversations.replies`.
pub(super) fn replies(st: &SlackState, params: &Params) -> Result<Value, ApiError> {
    let channel = need(params, "channel")?;
    let ts = need(params, "ts")?;
    let root = st
        .history
        .get(&(channel.clone(), ts.clone()))
        .ok_or(ApiError::ThreadNotFound)?;
    let thread_ts = root["thread_ts"].as_str().unwrap_or(&ts).to_owned();
    let mut thread: Vec<&Value> = st
        .history
        .iter()
        .filter(|((c, t), m)| {
            *c == channel && (*t == thread_ts || m["thread_ts"].as_str() == Some(&thread_ts))
        })
        .map(|(_, m)| m)
        .collect();
    thread.sort_by_key(|m| ts_key(m["ts"].as_str().unwrap_or_default()));
    page(st, params, thread, MAX_LIMIT)
}

/// `conversations.history`: the channel's top-level messages (thread parents included,
/// replies left out), newest first, within `oldest`/`latest`, paged like
/// `conversations.replies` (`limit` defaults to 100).
pub(super) fn history(st: &SlackState, params: &Params) -> Result<Value, ApiError> {
    let channel = str_param(params, "channel").ok_or(ApiError::InvalidArguments)?;
    let mut messages: Vec<&Value> = st
        .history
        .iter()
        .filter(|((c, t), m)| {
            *c == channel && m["thread_ts"].as_str().is_none_or(|parent| parent == t)
        })
        .map(|(_, m)| m)
        .collect();
    messages.sort_by_key(|m| std::cmp::Reverse(ts_key(m["ts"].as_str().unwrap_or_default())));
    page(st, params, messages, 100)
}

/// One page of `messages` (in the order returned) as the history methods answer it.
fn page(
    st: &SlackState,
    params: &Params,
    mut thread: Vec<&Value>,
    default_limit: usize,
) -> Result<Value, ApiError> {
    // `oldest`/`latest` bound the messages returned, exclusive unless `inclusive`.
    let inclusive = matches!(params.get("inclusive"), Some(Value::Bool(true)))
        || matches!(
            str_param(params, "inclusive").as_deref(),
            Some("true" | "1")
        );
    let bound = |key: &str| str_param(params, key).map(|ts| ts_key(&ts));
    let (oldest, latest) = (bound("oldest"), bound("latest"));
    thread.retain(|m| {
        let ts = ts_key(m["ts"].as_str().unwrap_or_default());
        let after = oldest.is_none_or(|o| ts > o || (inclusive && ts == o));
        let before = latest.is_none_or(|l| ts < l || (inclusive && ts == l));
        after && before
    });

    let limit = match str_param(params, "limit") {
        None => default_limit,
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| ApiError::InvalidLimit)?
            .clamp(1, MAX_LIMIT),
    };
    let limit = st.history_page_cap.map_or(limit, |cap| limit.min(cap));
    let start = match str_param(params, "cursor") {
        None => 0,
        Some(cursor) => {
            let after = decode_cursor(&cursor).ok_or(ApiError::InvalidCursor)?;
            thread
                .iter()
                .position(|m| m["ts"].as_str() == Some(after.as_str()))
                .ok_or(ApiError::InvalidCursor)?
        }
    };
    let with_metadata = matches!(params.get("include_all_metadata"), Some(Value::Bool(true)))
        || matches!(
            str_param(params, "include_all_metadata").as_deref(),
            Some("true" | "1")
        );
    let page: Vec<Value> = thread
        .iter()
        .skip(start)
        .take(limit)
        .map(|m| {
            let mut m = (*m).clone();
            if !with_metadata && let Some(obj) = m.as_object_mut() {
                obj.remove("metadata");
            }
            m
        })
        .collect();
    let next = thread.get(start + limit);
    let mut body = Map::new();
    body.insert("ok".into(), json!(true));
    body.insert("messages".into(), Value::Array(page));
    body.insert("has_more".into(), json!(next.is_some()));
    let next_cursor = next
        .and_then(|m| m["ts"].as_str())
        .map(encode_cursor)
        .unwrap_or_default();
    body.insert(
        "response_metadata".into(),
        json!({"next_cursor": next_cursor}),
    );
    Ok(Value::Object(body))
}

/// An opaque cursor naming the next message: hex of `next_ts:<ts>`.
fn encode_cursor(ts: &str) -> String {
    format!("next_ts:{ts}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?)
        .ok()?
        .strip_prefix("next_ts:")
        .map(str::to_owned)
}

impl FakeSlack {
    /// Caps every page of the history methods at `messages` (Slack does so at 15 for apps
    /// outside its Marketplace), whatever `limit` asks.
    pub fn cap_history_pages(&self, messages: usize) {
        self.inner.lock().history_page_cap = Some(messages.max(1));
    }

    /// The bot's messages in the thread `thread_ts`, oldest first, as
    /// `conversations.replies` shows them now (edits applied, file shares included).
    pub fn bot_replies(&self, channel: &str, thread_ts: &str) -> Vec<Value> {
        let st = self.inner.lock();
        let mut thread: Vec<Value> = st
            .history
            .iter()
            .filter(|((c, t), m)| {
                c == channel
                    && t != thread_ts
                    && m["thread_ts"].as_str() == Some(thread_ts)
                    && m["bot_id"].as_str() == Some(super::BOT_ID)
            })
            .map(|(_, m)| m.clone())
            .collect();
        thread.sort_by_key(|m| ts_key(m["ts"].as_str().unwrap_or_default()));
        thread
    }
}
