//! What besides a message in the repository's channel starts a request (`triggers`):
//! `reaction`, the emoji that turns a message of the channel into a new request thread.

use serde::Deserialize;

use super::ConfigError;
use super::origin::Origin;

/// `triggers` as a file may hold it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct TriggersFile {
    #[serde(default)]
    reaction: Option<String>,
}

/// The triggers a repository's channel answers besides its messages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TriggersConfig {
    /// The emoji's name as Slack's `reaction_added` event names it (no colons, lower-case):
    /// a reaction with it on a message of the channel makes that message a new request.
    /// `None`: reactions start nothing.
    pub reaction: Option<String>,
}

impl TriggersFile {
    /// The section typed: the emoji's name without its colons, checked to be one Slack
    /// could name.
    pub fn resolve(self, origin: &Origin) -> Result<TriggersConfig, ConfigError> {
        let Some(raw) = self.reaction else {
            return Ok(TriggersConfig::default());
        };
        let name = raw.trim().trim_matches(':').to_lowercase();
        let valid = !name.is_empty()
            && name.chars().count() <= 100
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '\''));
        if !valid {
            return Err(origin.field_error(
                "triggers.reaction",
                format!(
                    "{raw:?} is not an emoji's name: write it as Slack shows it, such as \
                     \"codebutler\" or \":robot_face:\""
                ),
            ));
        }
        Ok(TriggersConfig {
            reaction: Some(name),
        })
    }
}
