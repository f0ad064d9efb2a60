//! `chat.postMessage` and `chat.update`: the bot's messages posted and edited, as Slack keeps
//! them (what the message shows, its history, the record a test reads) and echoes them back to
//! the app as message events (`message_changed` for an edit).

use serde_json::{Value, json};

use super::error::ApiError;
use super::web::{Params, json_param, need, str_param};
use super::{
    APP_ID, BOT_ID, BOT_USER_ID, Inner, Post, SlackState, TEAM_ID, Update, access, channel_type,
    history, interactive,
};

/// A message of the bot's as Slack shows it (in events and answers).
fn bot_message(ts: &str, text: &str) -> Value {
    json!({
        "type": "message",
        "ts": ts,
        "text": text,
        "user": BOT_USER_ID,
        "bot_id": BOT_ID,
        "app_id": APP_ID,
        "team": TEAM_ID,
    })
}

/// `chat.postMessage`.
pub(super) fn post_message(
    _: &Inner,
    st: &mut SlackState,
    params: &Params,
) -> Result<Value, ApiError> {
    let channel = need(params, "channel")?;
    access::may_post(st, &channel)?;
    let text = str_param(params, "text");
    let blocks = json_param(params, "blocks");
    if text.is_none() && blocks.is_none() && json_param(params, "attachments").is_none() {
        return Err(ApiError::NoText);
    }
    let blocks = match blocks {
        Some(b) => Some(interactive::as_slack_stores(st, b)?),
        None => None,
    };
    let metadata = history::check_metadata(params)?;
    let text = text.unwrap_or_default();
    let thread_ts = str_param(params, "thread_ts");
    let ts = st.next_ts();
    // The bot's reply clears the thread's status (`assistant.threads.setStatus`).
    if let Some(thread_ts) = &thread_ts {
        st.thread_status
            .remove(&(channel.clone(), thread_ts.clone()));
    }
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
    let mut message = bot_message(&ts, &text);
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

/// `chat.update`.
pub(super) fn update(_: &Inner, st: &mut SlackState, params: &Params) -> Result<Value, ApiError> {
    let channel = need(params, "channel")?;
    access::may_post(st, &channel)?;
    let ts = need(params, "ts")?;
    let text = str_param(params, "text");
    let blocks = json_param(params, "blocks");
    if text.is_none() && blocks.is_none() && json_param(params, "attachments").is_none() {
        return Err(ApiError::NoText);
    }
    let text = text.unwrap_or_default();
    let info = st
        .messages
        .get(&(channel.clone(), ts.clone()))
        .cloned()
        .ok_or(ApiError::MessageNotFound)?;
    if !info.from_bot {
        return Err(ApiError::CantUpdateMessage);
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
    let mut message = bot_message(&ts, &text);
    message["edited"] = json!({"user": BOT_USER_ID, "ts": edit_ts});
    let mut previous = bot_message(&ts, &previous_text);
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
