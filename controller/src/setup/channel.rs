//! The repository's channel, as `codebutler init` settles it: picked from the bot's
//! channels (`conversations.list`), given by id or name, or created
//! (`conversations.create`); a channel the bot is not in is joined (`conversations.join`) or
//! waited for while the operator invites it. Slack's refusals are said and the operator
//! chooses again; without a terminal they end the set-up.

use super::prompt::Asker;
use super::{ENV_SLACK_CHANNEL, Given, InitError, Slack};
use crate::secret::Secret;
use crate::service::preflight::{self, CheckError, SetupMistake};
use crate::slack::api::{self, BotIdentity};
use crate::slack::workspace::{self, ChannelSummary};
use std::path::Path;

/// The channel as a list item.
fn label(channel: &ChannelSummary) -> String {
    let mut text = format!("#{} ({})", channel.name, channel.id);
    if channel.is_private {
        text.push_str(", private");
    }
    if !channel.is_member {
        text.push_str(" — the bot is not in it");
    }
    text
}

/// The repository's channel: picked from the bot's channels, created, or given.
pub(super) async fn pick_channel(
    asker: &mut dyn Asker,
    slack: &Slack,
    bot_token: &Secret,
    bot: &BotIdentity,
    given: &Given,
    current: Option<String>,
    repo: &Path,
) -> Result<ChannelSummary, InitError> {
    let dir_name = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut create = given.create_channel.clone();
    loop {
        let channels = match workspace::list_channels(&slack.client, bot_token).await {
            Ok(channels) => channels,
            Err(e) => {
                let e = preflight::bot_token_mistake(&slack.api_url, "conversations.list", e);
                match e {
                    CheckError::Mistake(m @ SetupMistake::MissingScope { .. })
                        if asker.interactive() =>
                    {
                        asker.say(&format!("  [!!] {m}"));
                        if asker.confirm("Check again?", true)? {
                            continue;
                        }
                        return Err(m.into());
                    }
                    e => return Err(e.into()),
                }
            }
        };
        if let Some(name) = create.take() {
            match create_channel(asker, slack, bot_token, &name).await? {
                Some(channel) => return Ok(channel),
                None if asker.interactive() => continue,
                None => {
                    return Err(InitError::Problem(format!(
                        "could not create #{name} (said above)"
                    )));
                }
            }
        }
        let wanted = given.channel.clone().or_else(|| current.clone());
        let found = wanted.as_deref().and_then(|w| {
            let w = w.trim_start_matches('#');
            channels.iter().position(|c| c.id == w || c.name == w)
        });
        let choice = if asker.interactive() {
            let mut items: Vec<String> = channels.iter().map(label).collect();
            items.push("Create a new channel…".to_owned());
            asker.choose(
                "Which channel is this repository's? (↑/↓, Enter)",
                &items,
                found.unwrap_or(0),
            )?
        } else {
            match (found, wanted) {
                (Some(i), _) => i,
                (None, Some(w)) => {
                    return Err(InitError::Problem(format!(
                        "the bot sees no channel {w}: invite it there (/invite @{}), or pass \
                         --create-channel NAME",
                        bot.name.as_deref().unwrap_or("codebutler")
                    )));
                }
                (None, None) => {
                    return Err(InitError::Missing {
                        what: "channel",
                        flag: "--channel (or --create-channel NAME)",
                        var: ENV_SLACK_CHANNEL,
                    });
                }
            }
        };
        let Some(channel) = channels.get(choice) else {
            let name = asker.text(
                "Name of the new channel",
                &workspace::channel_name_for(&dir_name),
            )?;
            create = Some(name);
            continue;
        };
        if let Some(channel) = ensure_member(asker, slack, bot_token, bot, channel).await? {
            asker.say(&format!(
                "  [ok] channel: #{} ({})",
                channel.name, channel.id
            ));
            return Ok(channel);
        }
    }
}

/// Creates the public channel `name`: `None` when Slack refused it (said, for the
/// operator to choose again).
async fn create_channel(
    asker: &mut dyn Asker,
    slack: &Slack,
    bot_token: &Secret,
    name: &str,
) -> Result<Option<ChannelSummary>, InitError> {
    let name = name.trim().trim_start_matches('#');
    if let Some(why) = workspace::invalid_channel_name(name) {
        return refused(asker, format!("#{name}: {why}"));
    }
    match workspace::create_channel(&slack.client, bot_token, name).await {
        Ok(channel) => {
            asker.say(&format!(
                "  [ok] created #{} ({})",
                channel.name, channel.id
            ));
            Ok(Some(channel))
        }
        Err(e) => match e.code() {
            Some("name_taken") => refused(
                asker,
                format!(
                    "#{name} exists already (name_taken): pick it from the list, or another name"
                ),
            ),
            Some(code) if code.starts_with("invalid_name") => {
                refused(asker, format!("Slack refused the name #{name} ({code})"))
            }
            Some("restricted_action") => refused(
                asker,
                "the workspace does not let the bot create channels (restricted_action): create \
                 it in Slack and invite the bot"
                    .to_owned(),
            ),
            _ => match preflight::bot_token_mistake(&slack.api_url, "conversations.create", e) {
                CheckError::Mistake(m @ SetupMistake::MissingScope { .. }) => {
                    refused(asker, m.to_string())
                }
                e => Err(e.into()),
            },
        },
    }
}

/// A refusal said in a terminal (`Ok(None)`: choose again), or the scripted run's end.
fn refused<T>(asker: &mut dyn Asker, problem: String) -> Result<Option<T>, InitError> {
    if asker.interactive() {
        asker.say(&format!("  [!!] {problem}"));
        Ok(None)
    } else {
        Err(InitError::Problem(problem))
    }
}

/// `channel` with the bot in it: joined when public (asked first in a terminal), or waited
/// for while the operator invites it. `None`: choose again.
async fn ensure_member(
    asker: &mut dyn Asker,
    slack: &Slack,
    bot_token: &Secret,
    bot: &BotIdentity,
    channel: &ChannelSummary,
) -> Result<Option<ChannelSummary>, InitError> {
    if channel.is_member {
        return Ok(Some(channel.clone()));
    }
    let bot_name = bot.name.as_deref().unwrap_or("codebutler");
    let invite = format!("type /invite @{bot_name} in #{}", channel.name);
    if !asker.confirm(
        &format!("The bot is not in #{}. Join it now?", channel.name),
        true,
    )? {
        asker.say(&format!("  invite it: {invite}"));
        return wait_for_invite(asker, slack, bot_token, channel).await;
    }
    match workspace::join_channel(&slack.client, bot_token, &channel.id).await {
        Ok(joined) => {
            asker.say(&format!("  [ok] the bot joined #{}", joined.name));
            Ok(Some(ChannelSummary {
                is_member: true,
                ..joined
            }))
        }
        Err(e) => {
            let why = match preflight::bot_token_mistake(&slack.api_url, "conversations.join", e) {
                CheckError::Mistake(m @ SetupMistake::MissingScope { .. }) => m.to_string(),
                CheckError::Slack(e) if e.code().is_some() => e.to_string(),
                e => return Err(e.into()),
            };
            if !asker.interactive() {
                return Err(InitError::Problem(format!(
                    "the bot could not join #{} ({why}); or {invite}",
                    channel.name
                )));
            }
            asker.say(&format!("  [!!] the bot could not join: {why}"));
            asker.say(&format!("  invite it instead: {invite}"));
            wait_for_invite(asker, slack, bot_token, channel).await
        }
    }
}

/// Asks until the operator says the bot is in `channel` and Slack agrees (`None`: they gave
/// up, choose again).
async fn wait_for_invite(
    asker: &mut dyn Asker,
    slack: &Slack,
    bot_token: &Secret,
    channel: &ChannelSummary,
) -> Result<Option<ChannelSummary>, InitError> {
    loop {
        if !asker.interactive()
            || !asker.confirm(&format!("Is the bot in #{} now?", channel.name), true)?
        {
            return Ok(None);
        }
        let info = api::channel_info(&slack.client, bot_token, &channel.id).await?;
        if info.is_member {
            return Ok(Some(ChannelSummary {
                is_member: true,
                ..channel.clone()
            }));
        }
        asker.say(&format!(
            "  [!!] Slack says the bot is not in #{} yet",
            channel.name
        ));
    }
}
