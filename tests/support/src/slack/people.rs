//! `auth.test`, `users.info` and `chat.getPermalink`, as Slack answers them.
//!
//! `auth.test` says who the bot is: the fake workspace ([`TEAM_ID`]), the bot's user id
//! ([`BOT_USER_ID`]) and bot id ([`BOT_ID`]).
//! `users.info` needs `user` and answers the user a test added with
//! [`FakeSlack::add_user`] (`profile.display_name`, `profile.real_name` and `real_name`), or
//! `user_not_found`. `chat.getPermalink` needs `channel` and `message_ts`; it answers
//! `{"ok":true,"channel":C,"permalink":"https://fake.slack.com/archives/C/p<ts without dot>"}`
//! (the workspace's own domain, as `auth.test`'s `url` says) for a message the fake holds,
//! `message_not_found` for an unknown ts in a known channel and `channel_not_found` for a
//! channel with no message.

use serde_json::{Value, json};

use super::error::ApiError;
use super::{BOT_ID, BOT_USER_ID, FakeSlack, Params, SlackState, TEAM_ID, str_param};

/// A user `users.info` knows.
#[derive(Debug, Clone)]
pub(super) struct User {
    display_name: String,
    real_name: String,
}

impl FakeSlack {
    /// Makes `users.info` know `id` with a display name (may be empty, as Slack allows) and
    /// a real name.
    pub fn add_user(&self, id: &str, display_name: &str, real_name: &str) {
        self.inner.lock().users.insert(
            id.to_owned(),
            User {
                display_name: display_name.to_owned(),
                real_name: real_name.to_owned(),
            },
        );
    }
}

/// `auth.test`.
pub(super) fn auth_test() -> Value {
    json!({
        "ok": true,
        "url": "https://fake.slack.com/",
        "team": "Fake",
        "user": "codebutler",
        "team_id": TEAM_ID,
        "user_id": BOT_USER_ID,
        "bot_id": BOT_ID,
        "is_enterprise_install": false,
    })
}

/// `users.info`.
pub(super) fn users_info(st: &SlackState, params: &Params) -> Result<Value, ApiError> {
    let id = str_param(params, "user").ok_or(ApiError::InvalidArguments)?;
    let user = st.users.get(&id).ok_or(ApiError::UserNotFound)?;
    Ok(json!({
        "ok": true,
        "user": {
            "id": id,
            "team_id": super::TEAM_ID,
            "name": user.real_name.to_lowercase().replace(' ', "."),
            "deleted": false,
            "real_name": user.real_name,
            "is_bot": false,
            "profile": {
                "display_name": user.display_name,
                "real_name": user.real_name,
            },
        },
    }))
}

/// `chat.getPermalink`.
pub(super) fn permalink(st: &SlackState, params: &Params) -> Result<Value, ApiError> {
    let channel = str_param(params, "channel").ok_or(ApiError::InvalidArguments)?;
    let ts = str_param(params, "message_ts").ok_or(ApiError::InvalidArguments)?;
    if !st.history.contains_key(&(channel.clone(), ts.clone())) {
        let known = st.history.keys().any(|(c, _)| *c == channel);
        return Err(if known {
            ApiError::MessageNotFound
        } else {
            ApiError::ChannelNotFound
        });
    }
    Ok(json!({
        "ok": true,
        "channel": channel,
        "permalink": format!("https://fake.slack.com/archives/{channel}/p{}", ts.replace('.', "")),
    }))
}
