//! The set-up mistakes an operator commonly makes, found before the service starts: one
//! cheap call to each service the daemon depends on, and each mistake said in one plain
//! line naming its cause and its fix ([`SetupMistake`]), never a secret, never a service's
//! raw answer — instead of a wrapped error, or Socket Mode retrying a refused token forever.
//!
//! - Slack ([`slack`]): `auth.test` with the bot token (Slack unreachable at `slack.apiUrl`,
//!   the bot token refused), then `apps.connections.open` with the app token (refused,
//!   without `connections:write`, Socket Mode off);
//! - the triggers the bot token's scopes leave silent ([`trigger_scopes`]): said, not a
//!   mistake (the service serves the channel without them);
//! - each repository's channel ([`channel`]): `conversations.info` (no such channel the bot
//!   can see, the bot not in it, the bot token without the scopes to ask);
//! - each repository's own settings ([`repository`]): the model key (`GET /key`), the model
//!   ids the configuration names, each in the provider's model list (`GET /models`, read
//!   once and handed to the gateway for its prices; a list that cannot be read is said once
//!   and leaves the ids unchecked), the GitHub CLI (`gh auth status`: missing, not logged
//!   in), and the sandbox on this host (the runner enters it once,
//!   [`crate::runners::sandbox_probe`]).
//!
//! [`SetupMistake::exit_code`] sorts them for the exit: 2 when a setting or an account needs
//! fixing, 5 when this host lacks something, 6 when Slack cannot be reached (which may pass).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{
    Config, ENV_OPENROUTER_API_KEY, ENV_SLACK_APP_TOKEN, ENV_SLACK_BOT_TOKEN, OpenRouterConfig,
    SandboxMode, SlackConfig,
};
use crate::gateway::key::{KeyCheck, check_key};
use crate::gateway::model_list::{self, Lookup, ModelList};
use crate::layout::Layout;
use crate::runners::sandbox_probe::{self, ProbeError};
use crate::secret::Secret;
use crate::slack::api::{self, BotIdentity, Client, SlackError};
use crate::slack::workspace;
use crate::workspace::gh_cli::GhArgs;
use crate::workspace::toolchains::Toolchains;

/// How long one of Slack's checks may take.
const SLACK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long reading the provider's model list may take.
const MODEL_LIST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a model id or a field may be where a line shows it.
const SHOWN_CHARS: usize = 120;
/// How long `gh auth status` may take (it asks GitHub).
const GH_TIMEOUT: Duration = Duration::from_secs(60);
/// The Slack app manifest, where the scopes and Socket Mode are set.
const MANIFEST: &str = "deploy/slack-app-manifest.yaml";

/// A set-up mistake, worded for the operator who has to fix it.
#[derive(Debug, thiserror::Error)]
pub enum SetupMistake {
    #[error(
        "cannot reach Slack at {url} ({cause}): check this host's network, and `slack.apiUrl` \
         if it is set"
    )]
    SlackUnreachable { url: String, cause: String },
    #[error(
        "Slack at {url} did not answer as Slack's Web API does ({what}): check `slack.apiUrl` \
         (Slack's is https://slack.com/api/)"
    )]
    SlackNotSlack { url: String, what: String },
    #[error(
        "Slack refused the bot token ({code}): set the app's Bot User OAuth Token (xoxb-…, on \
         its OAuth & Permissions page; reinstall the app if the token was revoked) in \
         `slack.botToken` or {ENV_SLACK_BOT_TOKEN}"
    )]
    BotTokenRefused { code: String },
    #[error(
        "Slack refused the app token ({code}): create an app-level token with the \
         connections:write scope (the app's Basic Information → App-Level Tokens) and set it in \
         `slack.appToken` or {ENV_SLACK_APP_TOKEN}"
    )]
    AppTokenRefused { code: String },
    #[error(
        "the app token lacks the connections:write scope Socket Mode needs (Slack said \
         missing_scope): create an app-level token with connections:write (the app's Basic \
         Information → App-Level Tokens) and set it in `slack.appToken` or {ENV_SLACK_APP_TOKEN}"
    )]
    AppTokenWithoutConnections,
    #[error(
        "Socket Mode is off for this Slack app (Slack said {code}): turn it on in the app's \
         settings (Socket Mode), as {MANIFEST} does with socket_mode_enabled: true"
    )]
    SocketModeOff { code: String },
    #[error(
        "the bot token lacks a Slack scope {method} needs (Slack said missing_scope, needed: \
         {needed}): add it under oauth_config.scopes.bot in {MANIFEST} (or on the app's OAuth & \
         Permissions page) and reinstall the app to the workspace"
    )]
    MissingScope {
        method: &'static str,
        needed: String,
    },
    #[error(
        "Slack has no channel {channel} that the bot can see (channel_not_found): check \
         `slack.channelID` (the id is at the bottom of the channel's details); a private \
         channel needs the bot invited before it can see it"
    )]
    ChannelNotFound { channel: String },
    #[error(
        "the bot is not in #{name} ({channel}): invite it there, typing /invite @{bot} in the \
         channel"
    )]
    NotInChannel {
        channel: String,
        name: String,
        bot: String,
    },
    #[error(
        "the model provider at {url} refused the API key (HTTP {status}): set a valid key in \
         `openrouter.apiKey` or {ENV_OPENROUTER_API_KEY}"
    )]
    ModelKeyRefused { url: String, status: u16 },
    #[error(
        "`{field}` is `{id}`, which the model provider at {url} does not list (GET {url}/models); \
         {}",
        closest_ids(.closest)
    )]
    UnknownModel {
        field: String,
        id: String,
        url: String,
        closest: Vec<String>,
    },
    #[error(
        "the GitHub CLI `{cli}` is not installed here: install it (Debian: apt-get install gh; \
         others: https://cli.github.com), or set `github.cli` to where it is"
    )]
    GhMissing { cli: String },
    #[error(
        "`{cli} auth status` says {why}: log in with `gh auth login` as the user codebutler \
         runs as (or give it GH_TOKEN), and check that GitHub is reachable"
    )]
    GhNotLoggedIn { cli: String, why: String },
    #[error(transparent)]
    Sandbox(#[from] ProbeError),
}

impl SetupMistake {
    /// The daemon's exit code for it: 2 a setting or an account to fix, 5 something this
    /// host lacks, 6 Slack out of reach.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::SlackUnreachable { .. } => 6,
            Self::Sandbox(e) if e.is_settings() => 2,
            Self::GhMissing { .. } | Self::Sandbox(_) => 5,
            Self::SlackNotSlack { .. }
            | Self::BotTokenRefused { .. }
            | Self::AppTokenRefused { .. }
            | Self::AppTokenWithoutConnections
            | Self::SocketModeOff { .. }
            | Self::MissingScope { .. }
            | Self::ChannelNotFound { .. }
            | Self::NotInChannel { .. }
            | Self::ModelKeyRefused { .. }
            | Self::UnknownModel { .. }
            | Self::GhNotLoggedIn { .. } => 2,
        }
    }
}

/// Why a check could not finish: a mistake it found, or a failure that says nothing about
/// the set-up (Slack rate-limiting the start, say), kept as it is.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Mistake(#[from] SetupMistake),
    #[error(transparent)]
    Slack(#[from] SlackError),
}

/// Slack's part: who the bot is (`auth.test` with the bot token), then whether Slack takes
/// the app token for Socket Mode.
pub async fn slack(client: &Client, app: &SlackConfig) -> Result<BotIdentity, CheckError> {
    let bot = bot_token(client, &app.api_url, &app.bot_token).await?;
    app_token(client, &app.api_url, &app.app_token).await?;
    Ok(bot)
}

/// The triggers the bot token's scopes leave silent ([`workspace::TRIGGER_SCOPES`]), each
/// said as one line naming the scope, what stays silent and the manifest; none when every
/// scope is granted or Slack does not say which are (a call that lacks one says so then).
pub async fn trigger_scopes(app: &SlackConfig) -> Vec<String> {
    let granted = match workspace::granted_scopes(&app.api_url, &app.bot_token).await {
        Ok(Some(granted)) => granted,
        Ok(None) | Err(_) => return Vec::new(),
    };
    workspace::TRIGGER_SCOPES
        .iter()
        .filter(|(scope, _)| !granted.contains(*scope))
        .map(|(scope, trigger)| {
            format!(
                "the bot token lacks the Slack scope {scope}, so {trigger} stays silent: add it \
                 under oauth_config.scopes.bot in {MANIFEST} (or update the app from the \
                 manifest) and reinstall the app to the workspace"
            )
        })
        .collect()
}

/// Who the bot is, as Slack at `api_url` says for `token` (`auth.test`).
pub async fn bot_token(
    client: &Client,
    api_url: &str,
    token: &Secret,
) -> Result<BotIdentity, CheckError> {
    within(api_url, "auth.test", api::auth_test(client, token))
        .await
        .map_err(|e| bot_token_mistake(api_url, "auth.test", e))
}

/// Whether Slack at `api_url` takes `token` as the app token for Socket Mode
/// (`apps.connections.open`).
pub async fn app_token(client: &Client, api_url: &str, token: &Secret) -> Result<(), CheckError> {
    within(
        api_url,
        "apps.connections.open",
        api::check_app_token(client, token),
    )
    .await
    .map_err(|e| match e.code() {
        Some("missing_scope") => SetupMistake::AppTokenWithoutConnections.into(),
        Some("socket_mode_not_enabled") => SetupMistake::SocketModeOff {
            code: "socket_mode_not_enabled".to_owned(),
        }
        .into(),
        Some(
            code @ ("invalid_auth"
            | "not_authed"
            | "account_inactive"
            | "token_revoked"
            | "token_expired"
            | "not_allowed_token_type"),
        ) => SetupMistake::AppTokenRefused {
            code: code.to_owned(),
        }
        .into(),
        _ => common(api_url, e),
    })
}

/// The repository's channel `channel`, as the bot sees it: there, and the bot in it.
pub async fn channel(
    client: &Client,
    app: &SlackConfig,
    bot: &BotIdentity,
    channel: &str,
) -> Result<(), CheckError> {
    let info = within(
        &app.api_url,
        "conversations.info",
        api::channel_info(client, &app.bot_token, channel),
    )
    .await
    .map_err(|e| match e.code() {
        Some("channel_not_found") => SetupMistake::ChannelNotFound {
            channel: channel.to_owned(),
        }
        .into(),
        _ => bot_token_mistake(&app.api_url, "conversations.info", e),
    })?;
    if !info.is_member {
        return Err(SetupMistake::NotInChannel {
            channel: channel.to_owned(),
            name: info.name,
            bot: bot.name.clone().unwrap_or_else(|| "codebutler".to_owned()),
        }
        .into());
    }
    Ok(())
}

/// A repository's own settings: the model key, the model ids, the GitHub CLI, the sandbox
/// on this host. Returns the provider's model list when it could be read, for the gateway's
/// prices.
pub async fn repository(
    layout: &Layout,
    config: &Config,
) -> Result<Option<Arc<ModelList>>, SetupMistake> {
    model_key(&config.openrouter).await?;
    let models = model_ids(config).await?;
    gh_logged_in(&config.github.cli, &layout.repo).await?;
    for warning in sandbox(layout, config).await? {
        tracing::warn!("the sandbox: {warning}");
    }
    Ok(models)
}

/// Every model id the configuration names for the provider, looked up in its model list:
/// the first the list lacks is the mistake. A list that cannot be read, or that lists
/// nothing, checks nothing: the start goes on, saying so once.
pub async fn model_ids(config: &Config) -> Result<Option<Arc<ModelList>>, SetupMistake> {
    let url = shown_url(&config.openrouter.base_url);
    let list = match model_list::fetch(&config.openrouter, MODEL_LIST_TIMEOUT).await {
        Ok(list) if list.is_empty() => {
            tracing::warn!(
                "the model provider at {url} listed no models (GET {url}/models); the model \
                 ids in the configuration were not checked"
            );
            return Ok(None);
        }
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(
                "could not read the model list at {url}/models ({e}); the model ids in the \
                 configuration were not checked"
            );
            return Ok(None);
        }
    };
    for named in config.provider_model_ids() {
        if let Lookup::Unknown { closest } = list.lookup(&named.id) {
            return Err(SetupMistake::UnknownModel {
                field: one_line(&named.field),
                id: one_line(&named.id),
                url,
                closest: closest.iter().map(|id| one_line(id)).collect(),
            });
        }
    }
    Ok(Some(Arc::new(list)))
}

/// The end of [`SetupMistake::UnknownModel`]'s line: the closest ids, or where the list is.
fn closest_ids(closest: &[String]) -> String {
    if closest.is_empty() {
        return "none of its ids is close: set it to one the list has".to_owned();
    }
    let ids: Vec<String> = closest.iter().map(|id| format!("`{id}`")).collect();
    format!("the closest it lists: {}", ids.join(", "))
}

/// `text` as one line may show it: control characters escaped, cut past [`SHOWN_CHARS`]
/// (a configuration or a provider can hold anything).
fn one_line(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(SHOWN_CHARS)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if text.chars().count() > SHOWN_CHARS {
        shown.push('…');
    }
    shown
}

/// The model key, asked of the provider (`GET /key`): refused is a mistake; a provider that
/// cannot say is logged and passed.
pub async fn model_key(openrouter: &OpenRouterConfig) -> Result<(), SetupMistake> {
    match check_key(openrouter).await {
        KeyCheck::Accepted => Ok(()),
        KeyCheck::Refused { status } => Err(SetupMistake::ModelKeyRefused {
            url: shown_url(&openrouter.base_url),
            status,
        }),
        KeyCheck::Unknown(why) => {
            tracing::warn!(
                "could not check the model key at {} ({why}); going on",
                shown_url(&openrouter.base_url)
            );
            Ok(())
        }
    }
}

/// The sandbox of `config` entered once on this host, with the toolchains found for it
/// (nothing without one, `sandbox.mode` `none`); the runner's warnings — what it had to
/// leave out — are returned.
pub async fn sandbox(layout: &Layout, config: &Config) -> Result<Vec<String>, SetupMistake> {
    if config.sandbox.mode != SandboxMode::Enforce {
        return Ok(Vec::new());
    }
    let runner = crate::runners::runner_bin(config).map_err(|e| ProbeError::Failed {
        path: config
            .sandbox
            .runner_path
            .clone()
            .unwrap_or_default()
            .into(),
        detail: e.to_string(),
    })?;
    let toolchains = Toolchains::of_this_process(config.sandbox.find_toolchains);
    for line in toolchains.lines() {
        tracing::info!("toolchain for the sandbox: {line}");
    }
    Ok(sandbox_probe::probe(
        &runner,
        &config.sandbox,
        &config.build,
        &toolchains,
        &layout.run(),
    )
    .await?)
}

/// `gh auth status`, run as every `gh` call of the controller is (prompts off, in the main
/// repository `repo`).
pub async fn gh_logged_in(cli: &str, repo: &Path) -> Result<(), SetupMistake> {
    let args = GhArgs::AuthStatus;
    let output = tokio::process::Command::new(cli)
        .args(args.to_args())
        .current_dir(repo)
        .env("GH_PROMPT_DISABLED", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(GH_TIMEOUT, output).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SetupMistake::GhMissing {
                cli: cli.to_owned(),
            });
        }
        Ok(Err(e)) => {
            return Err(SetupMistake::GhNotLoggedIn {
                cli: cli.to_owned(),
                why: format!("nothing: it could not run ({e})"),
            });
        }
        Err(_) => {
            return Err(SetupMistake::GhNotLoggedIn {
                cli: cli.to_owned(),
                why: format!("nothing within {} s", GH_TIMEOUT.as_secs()),
            });
        }
    };
    if output.status.success() {
        return Ok(());
    }
    // gh's own words, summed up: its output is not quoted (it can name the account and,
    // with some versions, part of the token).
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
    .to_lowercase();
    let why = if said.contains("not logged in") {
        "it is not logged in to any GitHub host".to_owned()
    } else if said.contains("authentication failed") || said.contains("no longer valid") {
        "its token is not valid (or GitHub could not be reached to check it)".to_owned()
    } else {
        format!("it failed ({})", output.status)
    };
    Err(SetupMistake::GhNotLoggedIn {
        cli: cli.to_owned(),
        why,
    })
}

/// `call` within [`SLACK_TIMEOUT`]; past it, Slack counts as out of reach.
pub async fn within<T>(
    url: &str,
    method: &'static str,
    call: impl std::future::Future<Output = Result<T, SlackError>>,
) -> Result<T, SlackError> {
    tokio::time::timeout(SLACK_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            tracing::debug!("slack {method} at {url}: no answer");
            Err(SlackError::Timeout {
                method,
                after: SLACK_TIMEOUT,
            })
        })
}

/// The mistake a failed call with the bot token shows: the token refused, a scope missing,
/// or what every call can meet ([`common`]).
pub fn bot_token_mistake(url: &str, method: &'static str, e: SlackError) -> CheckError {
    match e.code() {
        Some(
            code @ ("invalid_auth"
            | "not_authed"
            | "account_inactive"
            | "token_revoked"
            | "token_expired"
            | "not_allowed_token_type"),
        ) => SetupMistake::BotTokenRefused {
            code: code.to_owned(),
        }
        .into(),
        Some("missing_scope") => SetupMistake::MissingScope {
            method,
            needed: e
                .needed_scopes()
                .unwrap_or_else(|| "Slack did not name".to_owned()),
        }
        .into(),
        _ => common(url, e),
    }
}

/// What any call can meet: Slack out of reach, or something at `slack.apiUrl` that is not
/// Slack's API; anything else is passed on as it is.
pub fn common(url: &str, e: SlackError) -> CheckError {
    use slack_morphism::errors::SlackClientError;
    if e.is_unreachable() {
        let cause = match &e {
            SlackError::Api { source, .. } => api::describe(source),
            other => other.to_string(),
        };
        return SetupMistake::SlackUnreachable {
            url: shown_url(url),
            cause,
        }
        .into();
    }
    match &e {
        SlackError::Api {
            source: source @ (SlackClientError::HttpError(_) | SlackClientError::ProtocolError(_)),
            ..
        } => SetupMistake::SlackNotSlack {
            url: shown_url(url),
            what: api::describe(source),
        }
        .into(),
        _ => e.into(),
    }
}

/// `url` as it may be shown: without a user name or password, should it hold one.
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url.to_owned(),
    }
}
