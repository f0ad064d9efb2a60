//! `codebutler init`: the set-up wizard. It asks for what the service needs — the Slack bot
//! and app tokens, the repository's channel, the model key — checks each answer at once the
//! way the service's start does ([`crate::service::preflight`]), checks the model ids the
//! configuration names against the provider's list ([`models`]), writes the two config
//! files and checks this host ([`checks`]), then says what to do next.
//!
//! In a terminal it asks ([`prompt::Terminal`]: defaults, secrets typed hidden, the bot's
//! channels to pick from, a channel created or joined on the spot), and an answer Slack or
//! the provider refuses is said and asked again. Without one, or with `--yes`, nothing is
//! asked ([`prompt::Scripted`]): every answer comes from a flag, the environment or the
//! files, and a missing or refused one ends it with one line and exit code 2, writing
//! nothing. Answers already in the files are the defaults: re-running it changes what the
//! operator changes and keeps every other field as it was ([`crate::config::edit`]).
//!
//! What goes where: the tokens and the model key in the global config (mode 0600: the only
//! file with secrets — one the repository's file held is moved out of it), the channel in
//! the repository's `.codebutler/config.json`, and the repository in the global config's
//! `repositories` list, so the one service of the Slack app (`codebutler --install`) serves
//! it with the others. The result is loaded as the service would load it before anything is
//! written. Prompts block the thread they run on; nothing else runs meanwhile.

pub mod checks;
pub mod models;
pub mod prompt;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::edit::{Document, PLAIN_MODE, SECRET_MODE, WriteError};
use crate::config::{
    self, ConfigError, ConfigSources, ENV_OPENROUTER_API_KEY, ENV_SLACK_APP_TOKEN,
    ENV_SLACK_BOT_TOKEN, OpenRouterConfig,
};
use crate::layout::{Layout, LayoutError};
use crate::secret::Secret;
use crate::service::preflight::{self, CheckError, SetupMistake};
use crate::slack::api::{self, BotIdentity, Client, SlackError};
use crate::slack::workspace::{self, ChannelSummary, INIT_ONLY_SCOPES, MANIFEST_PATH};
use models::ModelCheck;
use prompt::Asker;

/// The environment variable that may name the repository's channel (an id or a name).
pub const ENV_SLACK_CHANNEL: &str = "CODEBUTLER_SLACK_CHANNEL";
/// Slack's Web API, when the files name no other.
const DEFAULT_SLACK_API: &str = "https://slack.com/api";
/// OpenRouter, when the files name no other.
const DEFAULT_OPENROUTER: &str = "https://openrouter.ai/api/v1";

/// A secret given on the command line or in the environment, and where it came from.
#[derive(Clone, Debug)]
pub struct GivenSecret {
    pub value: Secret,
    /// The flag or variable, as messages name it.
    pub from: String,
}

/// What flags and the environment answered before any question.
#[derive(Clone, Debug, Default)]
pub struct Given {
    pub bot_token: Option<GivenSecret>,
    pub app_token: Option<GivenSecret>,
    pub openrouter_key: Option<GivenSecret>,
    /// The channel: an id (`C0123…`) or a name (with or without `#`).
    pub channel: Option<String>,
    /// A public channel to create for the repository.
    pub create_channel: Option<String>,
    /// The repository's name in the `repositories` list.
    pub name: Option<String>,
}

/// One run of the wizard.
#[derive(Clone, Debug)]
pub struct InitRequest {
    /// The repository's working tree root.
    pub repo: PathBuf,
    /// The global config directory (`CODEBUTLER_HOME`).
    pub home: PathBuf,
    pub given: Given,
}

/// Why the wizard stopped before it wrote the files. [`InitError::exit_code`] matches the
/// service's codes: 2 an answer or a setting to fix, 6 Slack out of reach, 1 anything else.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(
        "no {what} was given: pass {flag} or set {var} (or run codebutler init in a terminal, \
         without --yes, to be asked)"
    )]
    Missing {
        what: &'static str,
        flag: &'static str,
        var: &'static str,
    },
    #[error(transparent)]
    Mistake(#[from] SetupMistake),
    #[error(transparent)]
    Slack(#[from] SlackError),
    #[error("{0}")]
    Problem(String),
    #[error("the answers make a configuration the service would refuse: {0}")]
    Invalid(ConfigError),
    #[error("the terminal: {0}")]
    Terminal(#[from] dialoguer::Error),
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl InitError {
    /// The exit code for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_) | Self::Missing { .. } | Self::Problem(_) | Self::Invalid(_) => 2,
            Self::Mistake(m) => m.exit_code(),
            Self::Layout(_) | Self::Slack(_) | Self::Terminal(_) | Self::Write(_) => 1,
        }
    }
}

impl From<CheckError> for InitError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Mistake(m) => Self::Mistake(m),
            CheckError::Slack(e) => Self::Slack(e),
        }
    }
}

/// What the wizard did: the files it wrote and what the host checks found.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub global: PathBuf,
    pub repo: PathBuf,
    /// 0 when every host check passed, else the exit code the service's start would end
    /// with (the first blocking finding's).
    pub exit_code: u8,
}

/// Where the wizard's Slack calls go and with which bot.
struct Slack {
    client: std::sync::Arc<Client>,
    api_url: String,
}

/// Runs the wizard for `request`, asking through `asker`.
pub async fn run(request: &InitRequest, asker: &mut dyn Asker) -> Result<Outcome, InitError> {
    let layout = Layout::new(&request.repo);
    layout.init()?;
    let sources = ConfigSources::in_home(&request.home, &request.repo);
    let mut global = Document::read(&sources.global, false)?;
    let mut repo = Document::read(&sources.repo, true)?;
    let setting = |field: &[&str], default: &str| {
        repo.string(field)
            .or_else(|| global.string(field))
            .unwrap_or_else(|| default.to_owned())
            .trim_end_matches('/')
            .to_owned()
    };
    let api_url = setting(&["slack", "apiUrl"], DEFAULT_SLACK_API);
    let model_url = setting(&["openrouter", "baseUrl"], DEFAULT_OPENROUTER);
    asker.say(&format!(
        "CodeButler set-up for {}\n  global config: {} (the secrets; mode 0600)\n  repository \
         config: {}",
        request.repo.display(),
        global.path.display(),
        repo.path.display()
    ));
    let slack = Slack {
        client: api::build_client(&api_url)?,
        api_url,
    };
    let given = &request.given;
    let current = |field: &[&str]| {
        global
            .string(field)
            .or_else(|| repo.string(field))
            .map(|value| GivenSecret {
                value: Secret::new(value),
                from: format!("the one in {}", global.path.display()),
            })
    };

    let (bot_token, bot) = ask_bot_token(
        asker,
        &slack,
        given
            .bot_token
            .clone()
            .or_else(|| current(&["slack", "botToken"])),
    )
    .await?;
    let app_token = ask_app_token(
        asker,
        &slack,
        given
            .app_token
            .clone()
            .or_else(|| current(&["slack", "appToken"])),
    )
    .await?;
    check_scopes(asker, &slack, &bot_token).await?;
    let current_channel = repo.string(&["slack", "channelID"]);
    let channel = pick_channel(
        asker,
        &slack,
        &bot_token,
        &bot,
        given,
        current_channel,
        &request.repo,
    )
    .await?;
    let model_key = ask_model_key(
        asker,
        &model_url,
        given
            .openrouter_key
            .clone()
            .or_else(|| current(&["openrouter", "apiKey"])),
    )
    .await?;

    global.set(&["slack", "botToken"], json!(bot_token.expose()));
    global.set(&["slack", "appToken"], json!(app_token.expose()));
    global.set(&["openrouter", "apiKey"], json!(model_key.expose()));
    for (section, field) in [
        ("slack", "botToken"),
        ("slack", "appToken"),
        ("openrouter", "apiKey"),
    ] {
        if let Some(Value::Object(map)) = repo.value.get_mut(section)
            && map.remove(field).is_some()
        {
            asker.say(&format!(
                "  moved {section}.{field} out of {}: secrets belong in the global config",
                repo.path.display()
            ));
        }
    }
    repo.set(&["slack", "channelID"], json!(channel.id));
    repo.set(&["slack", "channelName"], json!(channel.name));
    register(
        asker,
        &mut global,
        &request.repo,
        given.name.as_deref(),
        &channel.id,
    )?;
    let config = loop {
        let config = config::load_values(
            &sources,
            Some(global.value.clone()),
            Some(repo.value.clone()),
            |_| None,
        )
        .map_err(InitError::Invalid)?;
        match models::check(asker, &config, &mut global, &mut repo).await? {
            ModelCheck::Done => break config,
            ModelCheck::Changed => continue,
        }
    };
    global.write(SECRET_MODE, 0o700)?;
    repo.write(PLAIN_MODE, 0o755)?;
    asker.say(&format!(
        "\nWrote {} and {}.\n\nChecking this host:",
        global.path.display(),
        repo.path.display()
    ));

    let findings = checks::host(&layout, &config).await;
    let mut exit_code = 0;
    for finding in &findings {
        let mark = match (finding.blocks, finding.warning) {
            (Some(_), _) => "[!!]",
            (None, true) => "[..]",
            (None, false) => "[ok]",
        };
        asker.say(&format!("  {mark} {}", finding.text));
        if let Some(code) = finding.blocks
            && exit_code == 0
        {
            exit_code = code;
        }
    }
    let install = if nix::unistd::geteuid().is_root() {
        "codebutler --install --system"
    } else {
        "codebutler --install"
    };
    if exit_code == 0 {
        asker.say(&format!(
            "\nNext: run it as a service with `{install}` (it serves every repository of \
             {}), or in the foreground with `codebutler --repo {}`.",
            global.path.display(),
            request.repo.display()
        ));
    } else {
        asker.say(
            "\nThe service will not start until the [!!] lines above are fixed; run \
             `codebutler init` again to check.",
        );
    }
    Ok(Outcome {
        global: global.path.clone(),
        repo: repo.path.clone(),
        exit_code,
    })
}

/// What is asked for a secret.
struct SecretQuestion {
    what: &'static str,
    prompt: &'static str,
    prefix: &'static str,
    flag: &'static str,
    var: &'static str,
}

/// A secret from the operator, or from `given` (a flag, the environment, the files): typed
/// answers win; in a terminal an empty answer keeps `given`.
fn ask_secret(
    asker: &mut dyn Asker,
    question: &SecretQuestion,
    given: &mut Option<GivenSecret>,
) -> Result<Secret, InitError> {
    loop {
        let typed = if asker.interactive() {
            asker.secret(question.prompt, given.as_ref().map(|g| g.from.as_str()))?
        } else {
            None
        };
        let candidate = match (typed, given.as_ref()) {
            (Some(typed), _) => Secret::new(typed),
            (None, Some(given)) => given.value.clone(),
            (None, None) if asker.interactive() => {
                asker.say(&format!("  [!!] the {} is needed", question.what));
                continue;
            }
            (None, None) => {
                return Err(InitError::Missing {
                    what: question.what,
                    flag: question.flag,
                    var: question.var,
                });
            }
        };
        if candidate.expose().starts_with(question.prefix) || question.prefix.is_empty() {
            return Ok(candidate);
        }
        let problem = format!(
            "that is not a {}: it starts with `{}`",
            question.what, question.prefix
        );
        if !asker.interactive() {
            return Err(InitError::Problem(format!("{}: {problem}", question.flag)));
        }
        asker.say(&format!("  [!!] {problem}"));
        // A default that is wrong is not offered again.
        if given
            .as_ref()
            .is_some_and(|g| g.value.expose() == candidate.expose())
        {
            *given = None;
        }
    }
}

/// Whether a refusal may be answered by asking again (in a terminal, for a mistake the
/// operator fixes by typing another answer).
fn ask_again(
    asker: &mut dyn Asker,
    e: CheckError,
    given: &mut Option<GivenSecret>,
    tried: &Secret,
) -> Result<(), InitError> {
    match e {
        CheckError::Mistake(mistake) if asker.interactive() && mistake.exit_code() == 2 => {
            asker.say(&format!("  [!!] {mistake}"));
            if given
                .as_ref()
                .is_some_and(|g| g.value.expose() == tried.expose())
            {
                *given = None;
            }
            Ok(())
        }
        e => Err(e.into()),
    }
}

async fn ask_bot_token(
    asker: &mut dyn Asker,
    slack: &Slack,
    mut given: Option<GivenSecret>,
) -> Result<(Secret, BotIdentity), InitError> {
    let question = SecretQuestion {
        what: "Slack bot token",
        prompt: "Slack bot token (xoxb-…, the app's OAuth & Permissions page)",
        prefix: "xoxb-",
        flag: "--bot-token",
        var: ENV_SLACK_BOT_TOKEN,
    };
    loop {
        let token = ask_secret(asker, &question, &mut given)?;
        match preflight::bot_token(&slack.client, &slack.api_url, &token).await {
            Ok(bot) => {
                asker.say(&format!(
                    "  [ok] bot token: the bot @{} in workspace {}",
                    bot.name.as_deref().unwrap_or(&bot.user_id),
                    bot.team_id
                ));
                return Ok((token, bot));
            }
            Err(e) => ask_again(asker, e, &mut given, &token)?,
        }
    }
}

async fn ask_app_token(
    asker: &mut dyn Asker,
    slack: &Slack,
    mut given: Option<GivenSecret>,
) -> Result<Secret, InitError> {
    let question = SecretQuestion {
        what: "Slack app-level token",
        prompt: "Slack app-level token (xapp-…, Basic Information → App-Level Tokens, with connections:write)",
        prefix: "xapp-",
        flag: "--app-token",
        var: ENV_SLACK_APP_TOKEN,
    };
    loop {
        let token = ask_secret(asker, &question, &mut given)?;
        match preflight::app_token(&slack.client, &slack.api_url, &token).await {
            Ok(()) => {
                asker.say("  [ok] app token: Socket Mode is on and the token may open it");
                return Ok(token);
            }
            Err(e) => ask_again(asker, e, &mut given, &token)?,
        }
    }
}

async fn ask_model_key(
    asker: &mut dyn Asker,
    base_url: &str,
    mut given: Option<GivenSecret>,
) -> Result<Secret, InitError> {
    let question = SecretQuestion {
        what: "OpenRouter API key",
        prompt: "OpenRouter API key (sk-or-…, openrouter.ai/keys)",
        prefix: "",
        flag: "--openrouter-key",
        var: ENV_OPENROUTER_API_KEY,
    };
    loop {
        let key = ask_secret(asker, &question, &mut given)?;
        let openrouter = OpenRouterConfig {
            api_key: key.clone(),
            base_url: base_url.to_owned(),
            timeout_secs: 30,
            max_retries: 0,
        };
        match preflight::model_key(&openrouter).await {
            Ok(()) => {
                asker.say(&format!("  [ok] model key: {base_url} takes it"));
                return Ok(key);
            }
            Err(mistake) => ask_again(asker, mistake.into(), &mut given, &key)?,
        }
    }
}

/// The bot token has every scope the manifest asks for that the service uses, as Slack
/// says (`X-OAuth-Scopes`); in a terminal, the operator may fix the app and check again.
async fn check_scopes(
    asker: &mut dyn Asker,
    slack: &Slack,
    bot_token: &Secret,
) -> Result<(), InitError> {
    loop {
        let granted = match workspace::granted_scopes(&slack.api_url, bot_token).await {
            Ok(Some(granted)) => granted,
            Ok(None) => {
                asker.say(
                    "  [..] Slack did not say which scopes the bot token has; a call that lacks \
                     one will say which",
                );
                return Ok(());
            }
            Err(e) => {
                asker.say(&format!(
                    "  [..] could not ask Slack for the bot token's scopes ({e})"
                ));
                return Ok(());
            }
        };
        let wanted = workspace::manifest_bot_scopes();
        let missing: Vec<&str> = wanted
            .iter()
            .map(String::as_str)
            .filter(|s| !granted.contains(*s) && !INIT_ONLY_SCOPES.contains(s))
            .collect();
        let init_only: Vec<&str> = INIT_ONLY_SCOPES
            .into_iter()
            .filter(|s| !granted.contains(*s))
            .collect();
        if missing.is_empty() {
            asker.say("  [ok] the bot token has the scopes the service needs");
            if !init_only.is_empty() {
                asker.say(&format!(
                    "  [..] without {} this set-up cannot join or create a channel for you \
                     (the service does not need them)",
                    init_only.join(", ")
                ));
            }
            return Ok(());
        }
        let problem = format!(
            "the bot token lacks {}, which {MANIFEST_PATH} asks for: add them to the app (its \
             OAuth & Permissions page, or update the app from the manifest) and reinstall it \
             to the workspace",
            missing.join(", ")
        );
        if !asker.interactive() {
            return Err(InitError::Problem(problem));
        }
        asker.say(&format!("  [!!] {problem}"));
        if !asker.confirm("Check the scopes again?", true)? {
            return Err(InitError::Problem(problem));
        }
    }
}

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
async fn pick_channel(
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

/// Adds the repository at `repo` to the global config's `repositories` (kept as it is when
/// listed; an entry's own `channel` is set to `channel`, since it would win over the
/// repository's file).
fn register(
    asker: &mut dyn Asker,
    global: &mut Document,
    repo: &Path,
    name: Option<&str>,
    channel: &str,
) -> Result<(), InitError> {
    let dir_name = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut list = match global.value.get("repositories") {
        Some(Value::Array(list)) => list.clone(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => {
            return Err(InitError::Problem(format!(
                "{}: `repositories` is not a list; fix it, then run codebutler init again",
                global.path.display()
            )));
        }
    };
    let same = |entry: &Value| {
        entry
            .get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| same_dir(Path::new(p), repo))
    };
    if let Some(entry) = list.iter_mut().find(|e| same(e)) {
        if entry.get("channel").is_some() {
            entry["channel"] = json!(channel);
        }
        if let Some(name) = name {
            entry["name"] = json!(name);
        }
    } else {
        let names: Vec<String> = list.iter().map(entry_name).collect();
        let mut name = name.map_or_else(|| name_for(&dir_name), str::to_owned);
        loop {
            let problem = if !config::valid_name(&name) {
                format!(
                    "`{name}` cannot name a repository: letters, digits, `.`, `_` and `-`, \
                     starting with a letter or a digit"
                )
            } else if names
                .iter()
                .any(|n| config::sanitized_name(n) == config::sanitized_name(&name))
            {
                format!(
                    "another repository of {} is named `{name}`",
                    global.path.display()
                )
            } else {
                break;
            };
            if !asker.interactive() {
                return Err(InitError::Problem(format!("{problem}: pass --name")));
            }
            asker.say(&format!("  [!!] {problem}"));
            name = asker.text("Name for this repository", &format!("{name}-2"))?;
        }
        let mut entry = json!({"path": repo.to_string_lossy()});
        if name != dir_name {
            entry["name"] = json!(name);
        }
        list.push(entry);
        asker.say(&format!(
            "  [ok] listed under `repositories` in {} as `{name}`",
            global.path.display()
        ));
    }
    global.set(&["repositories"], Value::Array(list));
    // The list as the service will read it.
    config::entries_of(&global.path, &global.value).map_err(InitError::Invalid)?;
    Ok(())
}

/// A repository name made from its directory's name `dir`, as `repositories` takes one.
fn name_for(dir: &str) -> String {
    let name: String = dir
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    if name.is_empty() {
        "repository".to_owned()
    } else {
        name.to_owned()
    }
}

/// An entry's name: its `name`, else its directory's.
fn entry_name(entry: &Value) -> String {
    entry
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            entry
                .get("path")
                .and_then(Value::as_str)
                .and_then(|p| Path::new(p).file_name())
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}
