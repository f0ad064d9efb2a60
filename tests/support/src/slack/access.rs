//! What the app may do and where, as Slack decides it: the bot token's scopes, the app
//! token's, whether Socket Mode is on, and the channels with the bot in them or not.
//!
//! The world a test starts in is an app installed from `deploy/slack-app-manifest.yaml` (its
//! bot scopes, Socket Mode on, an app token with `connections:write`) in a workspace where
//! every channel exists, is named after its id and has the bot in it. A test changes it:
//! [`FakeSlack::set_bot_scopes`], [`FakeSlack::set_app_scopes`],
//! [`FakeSlack::turn_socket_mode_off`], [`FakeSlack::name_channel`],
//! [`FakeSlack::remove_bot_from`], [`FakeSlack::invite_bot_to`], [`FakeSlack::delete_channel`].
//!
//! Slack's answers, as the daemon meets them:
//! - a method whose scope the token lacks: `{"ok":false,"error":"missing_scope","needed":…,
//!   "provided":…}` (`needed` lists the scopes any of which would do, as Slack's does for the
//!   `conversations.*` family; `provided`, the token's);
//! - `apps.connections.open` with Socket Mode off: `socket_mode_not_enabled`;
//! - `conversations.info` of a deleted channel, or of a private one the bot is not in:
//!   `channel_not_found`; of a public one it is not in: the channel with `is_member: false`;
//! - `chat.postMessage` and `chat.update` in a channel the bot is not in: `not_in_channel`;
//!   in one that does not exist: `channel_not_found`.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::error::ApiError;
use super::{FakeSlack, Params, SlackState, str_param};

/// The Slack app manifest the daemon's app is created from.
const MANIFEST: &str = include_str!("../../../../deploy/slack-app-manifest.yaml");

/// A channel as the test made it (channels it never mentioned exist, named after their id,
/// with the bot in them).
#[derive(Debug, Clone)]
pub(super) struct Channel {
    pub(super) name: String,
    pub(super) exists: bool,
    pub(super) bot_member: bool,
}

/// The app's access, as the test set it.
#[derive(Debug, Default)]
pub(super) struct Access {
    /// The bot token's scopes; `None`: the manifest's.
    bot_scopes: Option<BTreeSet<String>>,
    /// The app token's scopes; `None`: `connections:write`.
    app_scopes: Option<BTreeSet<String>>,
    socket_mode_off: bool,
    pub(super) channels: HashMap<String, Channel>,
}

impl Access {
    pub(super) fn bot_scopes(&self) -> BTreeSet<String> {
        self.bot_scopes.clone().unwrap_or_else(manifest_bot_scopes)
    }

    fn app_scopes(&self) -> BTreeSet<String> {
        self.app_scopes
            .clone()
            .unwrap_or_else(|| BTreeSet::from(["connections:write".to_owned()]))
    }

    pub(super) fn channel(&self, id: &str) -> Channel {
        self.channels.get(id).cloned().unwrap_or_else(|| Channel {
            name: id.to_ascii_lowercase(),
            exists: true,
            bot_member: true,
        })
    }

    pub(super) fn channel_mut(&mut self, id: &str) -> &mut Channel {
        let channel = self.channel(id);
        self.channels.entry(id.to_owned()).or_insert(channel)
    }
}

/// The bot scopes `deploy/slack-app-manifest.yaml` asks for (`oauth_config.scopes.bot`), read
/// with a YAML parser; none when the manifest is no YAML (the tests that use them then fail).
pub fn manifest_bot_scopes() -> BTreeSet<String> {
    let Ok(documents) = yaml_rust2::YamlLoader::load_from_str(MANIFEST) else {
        return BTreeSet::new();
    };
    documents
        .first()
        .and_then(|manifest| manifest["oauth_config"]["scopes"]["bot"].as_vec())
        .into_iter()
        .flatten()
        .filter_map(|scope| scope.as_str().map(str::to_owned))
        .collect()
}

impl FakeSlack {
    /// The bot token has exactly `scopes` from now on (as after reinstalling the app with
    /// another manifest).
    pub fn set_bot_scopes(&self, scopes: &[&str]) {
        self.inner.lock().access.bot_scopes =
            Some(scopes.iter().map(|s| (*s).to_owned()).collect());
    }

    /// The app-level token has exactly `scopes` from now on.
    pub fn set_app_scopes(&self, scopes: &[&str]) {
        self.inner.lock().access.app_scopes =
            Some(scopes.iter().map(|s| (*s).to_owned()).collect());
    }

    /// Turns Socket Mode off in the app's settings.
    pub fn turn_socket_mode_off(&self) {
        self.inner.lock().access.socket_mode_off = true;
    }

    /// Names the channel `id` (`conversations.info`'s `name`).
    pub fn name_channel(&self, id: &str, name: &str) {
        self.inner.lock().access.channel_mut(id).name = name.to_owned();
    }

    /// Takes the bot out of the channel `id` (or never invites it).
    pub fn remove_bot_from(&self, id: &str) {
        self.inner.lock().access.channel_mut(id).bot_member = false;
    }

    /// Puts the bot in the channel `id` again (someone typed `/invite`).
    pub fn invite_bot_to(&self, id: &str) {
        self.inner.lock().access.channel_mut(id).bot_member = true;
    }

    /// Deletes the channel `id` (or it never existed).
    pub fn delete_channel(&self, id: &str) {
        self.inner.lock().access.channel_mut(id).exists = false;
    }
}

/// The scope `method` needs with the token it was called with, as the scopes any of which
/// would do (`None`: no scope needed). `app` says the call came with the app-level token.
fn needed(method: &str, params: &Params) -> Option<Vec<&'static str>> {
    let private = str_param(params, "channel").is_some_and(|c| c.starts_with('G'));
    let one = |scope| Some(vec![scope]);
    match method {
        "apps.connections.open" => one("connections:write"),
        "chat.postMessage" | "chat.update" | "assistant.threads.setStatus" => one("chat:write"),
        "chat.startStream" | "chat.appendStream" | "chat.stopStream" => one("assistant:write"),
        "reactions.add" | "reactions.remove" => one("reactions:write"),
        "users.info" => one("users:read"),
        "files.getUploadURLExternal" | "files.completeUploadExternal" => one("files:write"),
        "files.info" => one("files:read"),
        "conversations.list" => one("channels:read"),
        "conversations.join" => one("channels:join"),
        "conversations.create" => Some(if super::channels::is_private(params) {
            vec!["groups:write"]
        } else {
            vec!["channels:manage"]
        }),
        "conversations.info" => Some(if private {
            vec!["groups:read", "channels:read", "mpim:read", "im:read"]
        } else {
            vec!["channels:read", "groups:read", "mpim:read", "im:read"]
        }),
        "conversations.replies" | "conversations.history" => Some(if private {
            vec![
                "groups:history",
                "channels:history",
                "mpim:history",
                "im:history",
            ]
        } else {
            vec![
                "channels:history",
                "groups:history",
                "mpim:history",
                "im:history",
            ]
        }),
        _ => None,
    }
}

/// Slack's refusal of a call the app may not make — a scope the token lacks, Socket Mode
/// off — or `None` when it may. `app`: the call came with the app-level token.
pub(super) fn refusal(st: &SlackState, method: &str, params: &Params, app: bool) -> Option<Value> {
    if let Some(needed) = needed(method, params) {
        let scopes = if app {
            st.access.app_scopes()
        } else {
            st.access.bot_scopes()
        };
        // The scope for this channel's kind is the first; Slack lists the others too.
        if !scopes.contains(needed[0]) {
            return Some(json!({
                "ok": false,
                "error": "missing_scope",
                "needed": needed.join(","),
                "provided": scopes.into_iter().collect::<Vec<_>>().join(","),
            }));
        }
    }
    // Listing private channels needs groups:read besides channels:read.
    let wants_private = str_param(params, "types")
        .is_some_and(|t| t.split(',').any(|t| t.trim() == "private_channel"));
    if method == "conversations.list" && wants_private && !app {
        let scopes = st.access.bot_scopes();
        if !scopes.contains("groups:read") {
            return Some(json!({
                "ok": false,
                "error": "missing_scope",
                "needed": "groups:read",
                "provided": scopes.into_iter().collect::<Vec<_>>().join(","),
            }));
        }
    }
    if method == "apps.connections.open" && st.access.socket_mode_off {
        return Some(json!({"ok": false, "error": "socket_mode_not_enabled"}));
    }
    None
}

/// The scopes Slack's `X-OAuth-Scopes` header names on an answer to a call with `token`
/// (the bot's or the app's), as Slack sends it on every Web API answer.
pub(super) fn granted_header(st: &SlackState, token: &str) -> Option<String> {
    let scopes = if token == super::BOT_TOKEN {
        st.access.bot_scopes()
    } else if token == super::APP_TOKEN {
        st.access.app_scopes()
    } else {
        return None;
    };
    Some(scopes.into_iter().collect::<Vec<_>>().join(","))
}

/// `conversations.info`: the channel with its name and whether the bot is in it.
pub(super) fn conversations_info(st: &SlackState, params: &Params) -> Result<Value, ApiError> {
    let id = str_param(params, "channel").ok_or(ApiError::InvalidArguments)?;
    let channel = st.access.channel(&id);
    let private = id.starts_with('G');
    if !channel.exists || (private && !channel.bot_member) {
        return Err(ApiError::ChannelNotFound);
    }
    Ok(json!({"ok": true, "channel": super::channels::summary(&id, &channel)}))
}

/// Whether the bot may post in `channel`: `channel_not_found` or `not_in_channel` if not.
pub(super) fn may_post(st: &SlackState, channel: &str) -> Result<(), ApiError> {
    let world = st.access.channel(channel);
    // A private channel the bot is not in is one it cannot see.
    if !world.exists || (channel.starts_with('G') && !world.bot_member) {
        return Err(ApiError::ChannelNotFound);
    }
    if !world.bot_member {
        return Err(ApiError::NotInChannel);
    }
    Ok(())
}
