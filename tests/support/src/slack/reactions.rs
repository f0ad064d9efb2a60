//! `reactions.add` and `reactions.remove`: reactions on messages the fake holds, each once, as
//! Slack refuses a second one (`already_reacted`) or removing one that is not there
//! (`no_reaction`).
//!
//! A person's reaction ([`FakeSlack::person_reacts`]) is the `reaction_added` event Slack
//! sends (`user`, `reaction`, `item_user`, `item: {type: "message", channel, ts}`,
//! `event_ts`), to an app whose bot token has `reactions:read` and that is in the channel.

use serde_json::{Value, json};

use super::error::ApiError;
use super::web::{Params, need};
use super::{FakeSlack, Inner, Reaction, Sent, SlackState};

impl FakeSlack {
    /// `user` adds the reaction `name` to the message `ts` of `channel`, as in Slack's client.
    /// `None` when no event is sent: the fake holds no such message (the client offers no
    /// reaction), the person has this reaction on it already (a second click takes it away
    /// instead), the bot token lacks `reactions:read` or the bot is not in the channel (Slack
    /// keeps the reaction and tells the app nothing).
    pub fn person_reacts(&self, channel: &str, ts: &str, user: &str, name: &str) -> Option<Sent> {
        let mut st = self.inner.lock();
        let author = st
            .history
            .get(&(channel.to_owned(), ts.to_owned()))?
            .get("user")
            .cloned();
        let key = (
            channel.to_owned(),
            ts.to_owned(),
            user.to_owned(),
            name.to_owned(),
        );
        if !st.people_reactions.insert(key) {
            return None;
        }
        if !st.access.bot_scopes().contains("reactions:read")
            || !st.access.channel(channel).bot_member
        {
            return None;
        }
        let event_ts = st.next_ts();
        let mut event = json!({
            "type": "reaction_added",
            "user": user,
            "reaction": name,
            "item": {"type": "message", "channel": channel, "ts": ts},
            "event_ts": event_ts,
        });
        if let Some(author) = author {
            event["item_user"] = author;
        }
        Some(st.emit_event(event))
    }
}

/// The reaction a call names, on a message the fake holds (`message_not_found` otherwise).
fn on_a_message(st: &SlackState, params: &Params) -> Result<Reaction, ApiError> {
    let reaction = Reaction {
        channel: need(params, "channel")?,
        ts: need(params, "timestamp")?,
        name: need(params, "name")?,
    };
    if !st
        .messages
        .contains_key(&(reaction.channel.clone(), reaction.ts.clone()))
    {
        return Err(ApiError::MessageNotFound);
    }
    Ok(reaction)
}

/// `reactions.add`.
pub(super) fn add(_: &Inner, st: &mut SlackState, params: &Params) -> Result<Value, ApiError> {
    let reaction = on_a_message(st, params)?;
    if st.reactions_now.contains(&reaction) {
        return Err(ApiError::AlreadyReacted);
    }
    st.reactions_now.push(reaction.clone());
    st.reactions_log.push(reaction);
    Ok(json!({"ok": true}))
}

/// `reactions.remove`.
pub(super) fn remove(_: &Inner, st: &mut SlackState, params: &Params) -> Result<Value, ApiError> {
    let reaction = on_a_message(st, params)?;
    let before = st.reactions_now.len();
    st.reactions_now.retain(|r| *r != reaction);
    if st.reactions_now.len() == before {
        return Err(ApiError::NoReaction);
    }
    Ok(json!({"ok": true}))
}
