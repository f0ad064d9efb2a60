//! The workspace's channels as `codebutler init` meets them: `conversations.list`,
//! `conversations.create` and `conversations.join`, answered from the channels of
//! [`super::access`] as Slack answers them.
//!
//! Which channels are listed: those a test made known ([`FakeSlack::add_channel`], or
//! [`FakeSlack::name_channel`] and the other access helpers) and those created through
//! `conversations.create` — not the channels a test never mentioned, which exist only when
//! asked for by id. A private channel is listed only while the bot is in it (Slack shows
//! the bot no other), an archived one never with `exclude_archived`.
//!
//! Slack's answers, as documented:
//! - `conversations.list`: `channels` with `id`, `name`, `is_private`, `is_member`, paged
//!   by `limit` and `cursor` (`response_metadata.next_cursor`, empty at the end); asking for
//!   `private_channel` needs `groups:read` besides `channels:read` (`missing_scope`);
//! - `conversations.create`: `name_taken`, `invalid_name_required`,
//!   `invalid_name_maxlength` (over 80), `invalid_name_specials` (anything but lower-case
//!   letters, digits, `-` and `_`), `invalid_name_punctuation` (only `-` and `_`); the bot,
//!   its creator, is in the new channel; `channels:manage` (`groups:write` for a private one);
//! - `conversations.join`: `channel_not_found`, `method_not_supported_for_channel_type` for a
//!   private channel, `is_archived`; a channel the bot is in already answers `ok` with
//!   `warning: already_in_channel`; `channels:join`.

use serde_json::{Value, json};

use super::access::Channel;
use super::error::ApiError;
use super::{FakeSlack, Params, SlackState, str_param};

impl FakeSlack {
    /// Adds the channel `id` named `name` to the workspace (`private` channels get ids
    /// starting with `G` in this fake), with the bot in it or not.
    pub fn add_channel(&self, id: &str, name: &str, bot_member: bool) {
        let mut st = self.inner.lock();
        let channel = st.access.channel_mut(id);
        channel.name = name.to_owned();
        channel.exists = true;
        channel.bot_member = bot_member;
    }

    /// Whether the bot is in the channel `id` now.
    pub fn bot_is_in(&self, id: &str) -> bool {
        let st = self.inner.lock();
        let channel = st.access.channel(id);
        channel.exists && channel.bot_member
    }

    /// The channel named `name` in the workspace, if one is (its id).
    pub fn channel_named(&self, name: &str) -> Option<String> {
        let st = self.inner.lock();
        st.access
            .channels
            .iter()
            .find(|(_, c)| c.exists && c.name == name)
            .map(|(id, _)| id.clone())
    }
}

/// A conversation object as Slack's `conversations.*` methods return it: `conversations.info`,
/// each of `conversations.list`'s, and those `create` and `join` answer with.
pub(super) fn summary(id: &str, channel: &Channel) -> Value {
    let private = id.starts_with('G');
    json!({
        "id": id,
        "name": channel.name,
        "name_normalized": channel.name,
        "is_channel": !private,
        "is_group": false,
        "is_im": false,
        "is_mpim": false,
        "is_private": private,
        "is_archived": false,
        "is_general": false,
        "is_shared": false,
        "is_org_shared": false,
        "is_ext_shared": false,
        "is_member": channel.bot_member,
        "created": 1_700_000_000,
        "creator": "U0ALICE",
        "unlinked": 0,
        "topic": {"value": "", "creator": "", "last_set": 0},
        "purpose": {"value": "", "creator": "", "last_set": 0},
        "num_members": 1,
    })
}

/// `conversations.list` (its scopes checked before, in [`super::access::refusal`]).
pub(super) fn list(st: &SlackState, params: &Params) -> Result<Value, ApiError> {
    let types = str_param(params, "types").unwrap_or_else(|| "public_channel".to_owned());
    let public = types.split(',').any(|t| t.trim() == "public_channel");
    let private = types.split(',').any(|t| t.trim() == "private_channel");
    let mut ids: Vec<&String> = st
        .access
        .channels
        .iter()
        .filter(|(id, c)| {
            let is_private = id.starts_with('G');
            c.exists && ((is_private && private && c.bot_member) || (!is_private && public))
        })
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    let limit = str_param(params, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(100)
        .min(1000);
    let start = str_param(params, "cursor")
        .and_then(|c| {
            c.strip_prefix("next:")
                .and_then(|n| n.parse::<usize>().ok())
        })
        .unwrap_or(0);
    let page: Vec<Value> = ids
        .iter()
        .skip(start)
        .take(limit)
        .map(|id| summary(id, &st.access.channel(id)))
        .collect();
    let next = if start + limit < ids.len() {
        format!("next:{}", start + limit)
    } else {
        String::new()
    };
    Ok(json!({"ok": true, "channels": page, "response_metadata": {"next_cursor": next}}))
}

/// `conversations.create`.
pub(super) fn create(st: &mut SlackState, params: &Params) -> Result<Value, ApiError> {
    let name = str_param(params, "name").ok_or(ApiError::InvalidNameRequired)?;
    if name.chars().count() > 80 {
        return Err(ApiError::InvalidNameMaxlength);
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Err(ApiError::InvalidNameSpecials);
    }
    if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
        return Err(ApiError::InvalidNamePunctuation);
    }
    if st
        .access
        .channels
        .values()
        .any(|c| c.exists && c.name == name)
    {
        return Err(ApiError::NameTaken);
    }
    let private = is_private(params);
    let n = st.next_id();
    let id = format!("{}0NEW{n:04}", if private { 'G' } else { 'C' });
    let channel = st.access.channel_mut(&id);
    channel.name = name;
    channel.exists = true;
    channel.bot_member = true;
    let channel = channel.clone();
    Ok(json!({"ok": true, "channel": summary(&id, &channel)}))
}

/// `conversations.join`.
pub(super) fn join(st: &mut SlackState, params: &Params) -> Result<Value, ApiError> {
    let id = str_param(params, "channel").ok_or(ApiError::ChannelNotFound)?;
    let channel = st.access.channel(&id);
    if !channel.exists || (id.starts_with('G') && !channel.bot_member) {
        return Err(ApiError::ChannelNotFound);
    }
    if id.starts_with('G') {
        return Err(ApiError::MethodNotSupportedForChannelType);
    }
    let already = channel.bot_member;
    let joined = st.access.channel_mut(&id);
    joined.bot_member = true;
    let joined = joined.clone();
    let mut answer = json!({"ok": true, "channel": summary(&id, &joined)});
    if already {
        answer["warning"] = json!("already_in_channel");
        answer["response_metadata"] = json!({"warnings": ["already_in_channel"]});
    }
    Ok(answer)
}

/// Whether `conversations.create` was asked for a private channel (`is_private`, a JSON
/// boolean or the form's `"true"`).
pub(super) fn is_private(params: &Params) -> bool {
    params
        .get("is_private")
        .is_some_and(|v| v == &json!(true) || v == &json!("true"))
}
