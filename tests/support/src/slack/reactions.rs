//! `reactions.add` and `reactions.remove`: reactions on messages the fake holds, each once, as
//! Slack refuses a second one (`already_reacted`) or removing one that is not there
//! (`no_reaction`).

use serde_json::{Value, json};

use super::error::ApiError;
use super::web::{Params, need};
use super::{Inner, Reaction, SlackState};

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
