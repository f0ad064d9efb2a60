//! `codebutler init`: the set-up wizard. It asks for what the service needs — the Slack bot
//! and app tokens and the model key (`tokens`), the repository's channel (`channel`) —
//! checks each answer at once the way the service's start does
//! ([`crate::service::preflight`]), checks the model ids the configuration names against
//! the provider's list ([`models`]), writes the two config files (the repository listed in
//! `repositories`: `repositories`) and checks this host ([`checks`]), then says what to do
//! next. This file holds the steps in their order; each step is its own module.
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

mod channel;
pub mod checks;
pub mod models;
pub mod prompt;
mod repositories;
mod tokens;

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::config::edit::{Document, PLAIN_MODE, SECRET_MODE, WriteError};
use crate::config::{self, ConfigError, ConfigSources};
use crate::layout::{Layout, LayoutError};
use crate::secret::Secret;
use crate::service::preflight::{CheckError, SetupMistake};
use crate::slack::api::{self, Client, SlackError};
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

    let (bot_token, bot) = tokens::ask_bot_token(
        asker,
        &slack,
        given
            .bot_token
            .clone()
            .or_else(|| current(&["slack", "botToken"])),
    )
    .await?;
    let app_token = tokens::ask_app_token(
        asker,
        &slack,
        given
            .app_token
            .clone()
            .or_else(|| current(&["slack", "appToken"])),
    )
    .await?;
    tokens::check_scopes(asker, &slack, &bot_token).await?;
    let current_channel = repo.string(&["slack", "channelID"]);
    let channel = channel::pick_channel(
        asker,
        &slack,
        &bot_token,
        &bot,
        given,
        current_channel,
        &request.repo,
    )
    .await?;
    let model_key = tokens::ask_model_key(
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
    repositories::register(
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
