//! The `slack` section: the two tokens (checked to be of the right kind, since swapping
//! them is the usual mistake), the one channel, the Web API base, the posting pace, and how
//! long more Socket Mode connections than expected may last (another process on the app),
//! and whether Slack's AI-app surface (status line, streamed messages) is used.

use serde::Deserialize;

use super::origin::Origin;
use super::secrets::Secrets;
use super::{ConfigError, ENV_SLACK_APP_TOKEN, ENV_SLACK_BOT_TOKEN, base_url};
use crate::secret::Secret;

/// How long more connections than expected may last before the service stops.
pub const DEFAULT_CONNECTION_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Slack connection and channel.
#[derive(Clone, Debug)]
pub struct SlackConfig {
    pub bot_token: Secret,
    pub app_token: Secret,
    pub channel_id: String,
    pub channel_name: Option<String>,
    /// Web API base, without a trailing slash.
    pub api_url: String,
    /// Pace of `chat.postMessage` per channel (Slack allows about one per second).
    pub messages_per_second: f64,
    /// How long Slack may report more Socket Mode connections of the app than this service
    /// expects before it stops (`connectionGraceSeconds`, default 60): a reconnect or a
    /// killed process's socket lingers that briefly, another process on the app does not.
    pub connection_grace: std::time::Duration,
    /// Whether Slack's AI-app surface is used (`aiSurface`, default true): the thread's status
    /// line while the PM works, its answers streamed, the Coder's task cards. Off: the 👀
    /// reaction, answers posted whole, the edited status message only.
    pub ai_surface: bool,
    /// Whether the PM's answers are streamed as the model writes them (`streaming`, default
    /// true; only with `aiSurface`). Off: answers are posted whole, the status line stays.
    pub streaming: bool,
}

/// What a file may say in `slack`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct SlackFile {
    bot_token: Option<Secret>,
    app_token: Option<Secret>,
    #[serde(rename = "channelID")]
    channel_id: Option<String>,
    channel_name: Option<String>,
    api_url: Option<String>,
    messages_per_second: Option<f64>,
    connection_grace_seconds: Option<u64>,
    ai_surface: Option<bool>,
    streaming: Option<bool>,
}

impl SlackFile {
    /// The section with its defaults, tokens from the environment first.
    pub fn resolve(self, origin: &Origin, secrets: &Secrets) -> Result<SlackConfig, ConfigError> {
        let bot_token = secrets.required(
            self.bot_token,
            ENV_SLACK_BOT_TOKEN,
            "slack.botToken",
            r#""slack": {"botToken": "xoxb-…"}"#,
        )?;
        if !bot_token.expose().starts_with("xoxb-") {
            return Err(origin.field_error(
                "slack.botToken",
                "a bot token starts with `xoxb-` (Slack app → OAuth & Permissions → Bot User OAuth Token)".into(),
            ));
        }
        let app_token = secrets.required(
            self.app_token,
            ENV_SLACK_APP_TOKEN,
            "slack.appToken",
            r#""slack": {"appToken": "xapp-…"}"#,
        )?;
        if !app_token.expose().starts_with("xapp-") {
            return Err(origin.field_error(
                "slack.appToken",
                "an app-level token starts with `xapp-` (Slack app → Basic Information → App-Level Tokens, scope connections:write)".into(),
            ));
        }
        let channel_id = self
            .channel_id
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| ConfigError::Missing {
                field: "slack.channelID".into(),
                hint: format!(
                    "set it in {} (\"slack\": {{\"channelID\": \"C0123ABCDEF\"}}); the id is at the bottom of the channel's details in Slack",
                    origin.sources.repo.display()
                ),
            })?;
        Ok(SlackConfig {
            bot_token,
            app_token,
            channel_id,
            channel_name: self.channel_name,
            api_url: base_url(self.api_url, "https://slack.com/api/"),
            messages_per_second: self.messages_per_second.unwrap_or(1.0),
            ai_surface: self.ai_surface.unwrap_or(true),
            streaming: self.streaming.unwrap_or(true),
            connection_grace: match self.connection_grace_seconds {
                None => DEFAULT_CONNECTION_GRACE,
                Some(secs @ 1..=3600) => std::time::Duration::from_secs(secs),
                Some(secs) => {
                    return Err(origin.field_error(
                        "slack.connectionGraceSeconds",
                        format!("{secs} is not a number of seconds between 1 and 3600"),
                    ));
                }
            },
        })
    }
}
