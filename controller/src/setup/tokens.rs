//! The secrets `codebutler init` asks for — the Slack bot and app tokens, the model key —
//! each checked at once the way the service's start checks it (`auth.test`,
//! `apps.connections.open`, OpenRouter's `GET /key`), and the bot token's scopes against the
//! manifest's. In a terminal a refused answer is said and asked again; without one it ends
//! the set-up.

use super::prompt::Asker;
use super::{GivenSecret, InitError, Slack};
use crate::config::{
    ENV_OPENROUTER_API_KEY, ENV_SLACK_APP_TOKEN, ENV_SLACK_BOT_TOKEN, OpenRouterConfig,
};
use crate::secret::Secret;
use crate::service::preflight::{self, CheckError};
use crate::slack::api::BotIdentity;
use crate::slack::workspace::{self, INIT_ONLY_SCOPES, MANIFEST_PATH};

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

pub(super) async fn ask_bot_token(
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

pub(super) async fn ask_app_token(
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

pub(super) async fn ask_model_key(
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
            breaker_failures: 0,
            breaker_cool_down_secs: 0,
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
pub(super) async fn check_scopes(
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
