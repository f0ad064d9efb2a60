//! What `codebutler init` asks Slack about the workspace, beyond the start's checks
//! (`api::auth_test`, `api::check_app_token`, `api::channel_info`): the scopes the bot token
//! was granted (Slack's `X-OAuth-Scopes` header, which it sends with every Web API answer),
//! the channels the bot can see (`conversations.list`), and a channel created
//! (`conversations.create`) or joined (`conversations.join`) — each as Slack documents it,
//! read leniently (only the fields used), with Slack's error codes kept for the caller to
//! word ([`SlackError::code`], [`SlackError::needed_scopes`]).

use std::collections::BTreeSet;
use std::time::Duration;

use slack_morphism::prelude::*;

use super::api::{Client, SlackError};
use crate::secret::Secret;

/// The Slack app manifest the app is created from.
pub const MANIFEST: &str = include_str!("../../../deploy/slack-app-manifest.yaml");
/// Where the manifest is, as messages name it.
pub const MANIFEST_PATH: &str = "deploy/slack-app-manifest.yaml";
/// Scopes of the manifest only `codebutler init` uses (to join or create a channel); the
/// service runs without them.
pub const INIT_ONLY_SCOPES: [&str; 2] = ["channels:join", "channels:manage"];
/// Scopes of the manifest that carry a trigger besides a channel message, each with the
/// trigger that stays silent without it: the service runs without them, saying so at start.
pub const TRIGGER_SCOPES: [(&str, &str); 4] = [
    ("commands", "the /codebutler command"),
    (
        "im:history",
        "people's direct messages to the bot (the `message.im` event)",
    ),
    (
        "app_mentions:read",
        "a mention of the bot outside the repositories' channels (the `app_mention` event)",
    ),
    (
        "reactions:read",
        "the reaction that makes a message a request (`triggers.reaction`)",
    ),
];
/// Channels asked for per `conversations.list` page.
const LIST_PAGE: &str = "200";
/// At most this many pages are read (40,000 channels).
const MAX_PAGES: usize = 200;
/// How long the scopes' request may take.
const SCOPES_TIMEOUT: Duration = Duration::from_secs(30);

/// The bot scopes the manifest asks for (`oauth_config.scopes.bot`).
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

/// The scopes Slack says the bot token has: the `X-OAuth-Scopes` header of its answer to
/// `auth.test` at `api_url`. `Ok(None)` when the answer has no such header.
pub async fn granted_scopes(
    api_url: &str,
    bot_token: &Secret,
) -> Result<Option<BTreeSet<String>>, reqwest::Error> {
    crate::tls::ensure_provider();
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let answer = client
        .post(format!("{api_url}/auth.test"))
        .bearer_auth(bot_token.expose())
        .timeout(SCOPES_TIMEOUT)
        .send()
        .await
        .map_err(reqwest::Error::without_url)?;
    Ok(answer
        .headers()
        .get("x-oauth-scopes")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        }))
}

/// A channel as `conversations.list` shows it to the bot.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct ChannelSummary {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub is_private: bool,
    /// Whether the bot is in it.
    #[serde(default)]
    pub is_member: bool,
}

/// The public and private channels the bot can see, not archived, by name.
pub async fn list_channels(
    client: &Client,
    bot_token: &Secret,
) -> Result<Vec<ChannelSummary>, SlackError> {
    #[derive(serde::Deserialize)]
    struct Page {
        #[serde(default)]
        channels: Vec<ChannelSummary>,
        response_metadata: Option<Cursor>,
    }
    #[derive(serde::Deserialize)]
    struct Cursor {
        next_cursor: Option<String>,
    }
    let token = SlackApiToken::new(bot_token.expose().into());
    let session = client.open_session(&token);
    let mut channels = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = vec![
            ("types", Some("public_channel,private_channel")),
            ("exclude_archived", Some("true")),
            ("limit", Some(LIST_PAGE)),
        ];
        if let Some(cursor) = &cursor {
            params.push(("cursor", Some(cursor.as_str())));
        }
        let page: Page = session
            .http_session_api
            .http_get("conversations.list", &params, None)
            .await
            .map_err(|source| SlackError::Api {
                method: "conversations.list",
                source,
            })?;
        channels.extend(page.channels);
        cursor = page
            .response_metadata
            .and_then(|m| m.next_cursor)
            .filter(|c| !c.is_empty());
        if cursor.is_none() {
            break;
        }
    }
    channels.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(channels)
}

/// Creates the public channel `name` (`conversations.create`); the bot, its creator, is in
/// it.
pub async fn create_channel(
    client: &Client,
    bot_token: &Secret,
    name: &str,
) -> Result<ChannelSummary, SlackError> {
    channel_call(
        client,
        bot_token,
        "conversations.create",
        serde_json::json!({"name": name, "is_private": false}),
    )
    .await
}

/// Puts the bot in the public channel `channel` (`conversations.join`).
pub async fn join_channel(
    client: &Client,
    bot_token: &Secret,
    channel: &str,
) -> Result<ChannelSummary, SlackError> {
    channel_call(
        client,
        bot_token,
        "conversations.join",
        serde_json::json!({"channel": channel}),
    )
    .await
}

/// A `conversations.*` call answering `{"channel": {…}}`.
async fn channel_call(
    client: &Client,
    bot_token: &Secret,
    method: &'static str,
    request: serde_json::Value,
) -> Result<ChannelSummary, SlackError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        channel: ChannelSummary,
    }
    let token = SlackApiToken::new(bot_token.expose().into());
    let answer: Answer = client
        .open_session(&token)
        .http_session_api
        .http_post(method, &request, None)
        .await
        .map_err(|source| SlackError::Api { method, source })?;
    Ok(answer.channel)
}

/// Why Slack would refuse `name` for a new channel, as its rules say (lower-case letters,
/// digits, `-` and `_`; at most 80 characters): `None` when it is a valid name.
pub fn invalid_channel_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("a channel needs a name");
    }
    if name.chars().count() > 80 {
        return Some("a channel's name is at most 80 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Some(
            "a channel's name holds only lower-case letters, digits, hyphens and underscores",
        );
    }
    if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
        return Some("a channel's name cannot be only punctuation");
    }
    None
}

/// A channel name made from `text` (a repository's directory name): lower-cased, every
/// other character a hyphen.
pub fn channel_name_for(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    name.truncate(60);
    format!("codebutler-{}", name.trim_matches('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_asks_for_the_scopes_the_service_and_init_use() {
        let scopes = manifest_bot_scopes();
        for scope in ["channels:read", "chat:write", "reactions:write"]
            .into_iter()
            .chain(INIT_ONLY_SCOPES)
        {
            assert!(scopes.contains(scope), "{scope} in {scopes:?}");
        }
    }

    #[test]
    fn channel_names_follow_slacks_rules() {
        assert_eq!(invalid_channel_name("codebutler-api"), None);
        assert!(invalid_channel_name("").is_some());
        assert!(invalid_channel_name("Has Spaces").is_some());
        assert!(invalid_channel_name("a.b").is_some());
        assert!(invalid_channel_name("--").is_some());
        assert!(invalid_channel_name(&"x".repeat(81)).is_some());
        assert_eq!(channel_name_for("My.Repo"), "codebutler-my-repo");
        assert_eq!(invalid_channel_name(&channel_name_for("My.Repo")), None);
    }
}
