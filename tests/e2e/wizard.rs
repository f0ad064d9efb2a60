//! `codebutler init`, the real binary in a real terminal (tmux: keys typed, the screen read),
//! against the fake Slack and the fake model: wrong tokens said and asked again, a missing
//! scope named with the manifest, a channel picked from the bot's channels, joined or
//! created, the files written (mode, content), a second run changing one answer and keeping
//! the rest, and the same without a terminal, from flags and the environment. Outcomes are
//! read from the files, the fakes' records and the screen — never a secret on it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use codebutler_controller::config::DEFAULT_PM_MODEL;
use codebutler_test_support::slack::{self, APP_TOKEN, BOT_TOKEN};
use codebutler_test_support::terminal::Terminal;
use serde_json::{Value, json};

use crate::harness::Env;

const KEY: &str = "sk-or-wizard-key";
const WAIT: Duration = Duration::from_secs(60);
const BOT_PROMPT: &str = "Slack bot token (xoxb";
const APP_PROMPT: &str = "Slack app-level token (xapp";
const KEY_PROMPT: &str = "OpenRouter API key (sk-or";

/// An operator's first set-up: the global config holds only where Slack and the model are
/// (the fakes), the repository's only its `gh`; the workspace has two channels.
async fn fresh() -> Env {
    let env = Env::new().await;
    env.write_global(json!({
        "slack": {"apiUrl": env.slack.api_url()},
        "openrouter": {"baseUrl": env.model.base_url()}
    }));
    env.write_repo_config(&gh_only(&env).to_string());
    env.slack.add_channel("C0API", "api-team", true);
    env.slack.add_channel("C0DEPLOY", "deploys", false);
    env.model.require_api_key(KEY);
    // The built-in PM model, which a configuration naming none uses, is one the provider
    // lists (as OpenRouter does).
    env.model.list(DEFAULT_PM_MODEL);
    env
}

fn gh_only(env: &Env) -> Value {
    json!({"github": {"cli": env.outside.path().join("gh").display().to_string()}})
}

/// `codebutler init` for the repository of `env`, in a terminal, with `vars` besides the
/// usual environment.
fn start(env: &Env, vars: &[(&str, &str)]) -> Terminal {
    let mut envs = vec![
        ("HOME".to_owned(), env.home.path().display().to_string()),
        (
            "CODEBUTLER_HOME".to_owned(),
            env.home.path().display().to_string(),
        ),
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("RUST_LOG".to_owned(), "warn".to_owned()),
    ];
    envs.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let argv = vec![
        env!("CARGO_BIN_EXE_codebutler").to_owned(),
        "init".to_owned(),
        "--repo".to_owned(),
        env.repo_path().display().to_string(),
    ];
    Terminal::start(
        &env.outside.path().join(format!("tmux-{}", nanos())),
        &argv,
        &envs,
        env.repo_path(),
    )
}

/// Answers the `nth` (from 0) appearance of the hidden prompt `prompt` with `text` (empty:
/// Enter alone), once the prompt reads with echo off.
async fn hidden(term: &Terminal, prompt: &str, nth: usize, text: &str) {
    term.wait_for_nth(prompt, nth, WAIT).await;
    term.wait_echo_off(WAIT).await;
    term.type_line(text);
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn global_path(env: &Env) -> PathBuf {
    env.home.path().join("config.json")
}

fn repo_config_path(env: &Env) -> PathBuf {
    env.repo_path().join(".codebutler/config.json")
}

fn repo_root(env: &Env) -> String {
    env.repo_path()
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

/// The entry `codebutler init` adds to `repositories` for the repository of `env`: its path,
/// and a name where its directory's (a temporary `.tmpXXXX`) cannot be one.
fn entry(env: &Env) -> Value {
    let root = repo_root(env);
    let dir = Path::new(&root)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let name = dir.trim_start_matches('.');
    if name == dir {
        json!({"path": root})
    } else {
        json!({"path": root, "name": name})
    }
}

fn assert_no_secret(screen: &str) {
    for secret in [BOT_TOKEN, APP_TOKEN, KEY] {
        assert!(!screen.contains(secret), "{secret} shown:\n{screen}");
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn init_in_a_terminal_checks_each_answer_joins_the_channel_and_writes_the_files() {
    let env = fresh().await;
    let term = start(&env, &[]);
    hidden(&term, BOT_PROMPT, 0, "xoxb-wrong-4417").await;
    let screen = term
        .wait_for("Slack refused the bot token (invalid_auth)", WAIT)
        .await;
    assert!(screen.contains("slack.botToken"), "{screen}");
    hidden(&term, BOT_PROMPT, 1, BOT_TOKEN).await;
    term.wait_for("[ok] bot token: the bot @codebutler", WAIT)
        .await;
    hidden(&term, APP_PROMPT, 0, "xapp-wrong-4418").await;
    term.wait_for("Slack refused the app token (invalid_auth)", WAIT)
        .await;
    hidden(&term, APP_PROMPT, 1, APP_TOKEN).await;
    term.wait_for("[ok] the bot token has the scopes the service needs", WAIT)
        .await;
    // The bot's channels, by name, then "create".
    let screen = term
        .wait_for("Which channel is this repository's?", WAIT)
        .await;
    let api = screen.find("#api-team (C0API)").expect("api-team listed");
    let deploys = screen
        .find("#deploys (C0DEPLOY) — the bot is not in it")
        .unwrap_or_else(|| panic!("deploys listed:\n{screen}"));
    assert!(api < deploys, "{screen}");
    assert!(screen.contains("Create a new channel…"), "{screen}");
    term.keys(&["Down", "Enter"]);
    term.wait_for("The bot is not in #deploys. Join it now?", WAIT)
        .await;
    term.keys(&["y"]);
    term.wait_for("[ok] the bot joined #deploys", WAIT).await;
    hidden(&term, KEY_PROMPT, 0, "sk-or-refused-4419").await;
    term.wait_for("refused the API key (HTTP 401)", WAIT).await;
    hidden(&term, KEY_PROMPT, 1, KEY).await;
    let code = term.wait_exit(WAIT).await;
    let screen = term.screen();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Next: run it as a service"), "{screen}");
    assert_no_secret(&screen);

    // Slack did what the wizard said, and the files hold the answers.
    assert!(env.slack.bot_is_in("C0DEPLOY"));
    assert_eq!(env.slack.calls_of("conversations.join").len(), 1);
    let global = read_json(&global_path(&env));
    assert_eq!(
        global,
        json!({
            "slack": {"apiUrl": env.slack.api_url(), "botToken": BOT_TOKEN, "appToken": APP_TOKEN},
            "openrouter": {"baseUrl": env.model.base_url(), "apiKey": KEY},
            "repositories": [entry(&env)]
        })
    );
    assert_eq!(mode(&global_path(&env)), 0o600);
    let mut repo = gh_only(&env);
    repo["slack"] = json!({"channelID": "C0DEPLOY", "channelName": "deploys"});
    assert_eq!(read_json(&repo_config_path(&env)), repo);
    // The configuration is one the service takes: its status reads it.
    let status = Command::new(env!("CARGO_BIN_EXE_codebutler"))
        .arg("--status")
        .env_clear()
        .env("HOME", env.home.path())
        .env("CODEBUTLER_HOME", env.home.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(shown.contains("channel  C0DEPLOY"), "{shown}");
}

#[tokio::test]
async fn init_names_the_missing_scopes_with_the_manifest_and_checks_again() {
    let env = fresh().await;
    let all: Vec<String> = slack::manifest_bot_scopes().into_iter().collect();
    let without = |gone: &[&str]| -> Vec<String> {
        all.iter()
            .filter(|s| !gone.contains(&s.as_str()))
            .cloned()
            .collect()
    };
    let set = |scopes: Vec<String>| {
        env.slack
            .set_bot_scopes(&scopes.iter().map(String::as_str).collect::<Vec<_>>());
    };
    set(without(&["channels:read", "channels:manage"]));
    // The tokens come from the environment: Enter keeps them.
    let term = start(
        &env,
        &[
            ("CODEBUTLER_SLACK_BOT_TOKEN", BOT_TOKEN),
            ("CODEBUTLER_SLACK_APP_TOKEN", APP_TOKEN),
            ("OPENROUTER_API_KEY", KEY),
        ],
    );
    let screen = term.wait_for(BOT_PROMPT, WAIT).await;
    assert!(
        screen.contains("Enter keeps the one in CODEBUTLER_SLACK_BOT_TOKEN"),
        "{screen}"
    );
    hidden(&term, BOT_PROMPT, 0, "").await;
    hidden(&term, APP_PROMPT, 0, "").await;
    let screen = term.wait_for("Check the scopes again?", WAIT).await;
    assert!(
        screen.contains(
            "[!!] the bot token lacks channels:read, which deploy/slack-app-manifest.yaml asks for"
        ),
        "{screen}"
    );
    // The operator adds it to the app and reinstalls it; channels:manage is still missing.
    set(without(&["channels:manage"]));
    term.keys(&["y"]);
    term.wait_for("[ok] the bot token has the scopes the service needs", WAIT)
        .await;
    term.wait_for(
        "without channels:manage this set-up cannot join or create",
        WAIT,
    )
    .await;
    term.wait_for("Which channel is this repository's?", WAIT)
        .await;
    // Creating a channel needs the scope it lacks: Slack's `needed` is named.
    term.keys(&["Down", "Down", "Enter"]);
    term.wait_for("Name of the new channel", WAIT).await;
    term.type_line("");
    let screen = term
        .wait_for("Slack said missing_scope, needed: channels:manage", WAIT)
        .await;
    assert!(
        screen.contains("deploy/slack-app-manifest.yaml"),
        "{screen}"
    );
    // Back to the list: the channel the bot is in.
    term.wait_for_nth("Which channel is this repository's?", 1, WAIT)
        .await;
    term.keys(&["Enter"]);
    term.wait_for("[ok] channel: #api-team (C0API)", WAIT).await;
    hidden(&term, KEY_PROMPT, 0, "").await;
    let code = term.wait_exit(WAIT).await;
    let screen = term.screen();
    assert_eq!(code, 0, "{screen}");
    assert_no_secret(&screen);
    assert!(env.slack.channel_named("codebutler-api").is_none());
    let refused = env.slack.calls_of("conversations.create");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].error.as_deref(), Some("missing_scope"));
    assert_eq!(
        read_json(&repo_config_path(&env))["slack"]["channelID"],
        "C0API"
    );
    assert_eq!(
        read_json(&global_path(&env))["slack"]["botToken"],
        BOT_TOKEN
    );
}

#[tokio::test]
async fn running_init_again_changes_one_answer_and_keeps_the_rest() {
    let env = fresh().await;
    let other = tempfile::tempdir().unwrap();
    codebutler_test_support::git::init(other.path());
    let global = json!({
        "slack": {"apiUrl": env.slack.api_url(), "botToken": BOT_TOKEN, "appToken": APP_TOKEN},
        "openrouter": {"baseUrl": env.model.base_url(), "apiKey": KEY, "timeoutSeconds": 99},
        "repositories": [{"name": "web", "path": other.path().display().to_string(), "channel": "C0WEB"}]
    });
    env.write_global(global.clone());
    let mut repo = gh_only(&env);
    repo["slack"] = json!({"channelID": "C0API", "channelName": "api-team"});
    repo["coder"] = json!({"maxTurns": 7});
    env.write_repo_config(&repo.to_string());
    let term = start(&env, &[]);
    let screen = term.wait_for(BOT_PROMPT, WAIT).await;
    assert!(screen.contains("Enter keeps the one in"), "{screen}");
    hidden(&term, BOT_PROMPT, 0, "").await;
    hidden(&term, APP_PROMPT, 0, "").await;
    // The current channel is where the list starts; the operator creates a new one.
    term.wait_for("Which channel is this repository's?", WAIT)
        .await;
    term.keys(&["Down", "Down", "Enter"]);
    let dir_name = env
        .repo_path()
        .canonicalize()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    let screen = term.wait_for("Name of the new channel", WAIT).await;
    assert!(screen.contains("codebutler-"), "{screen} ({dir_name})");
    term.type_line("Bad Name");
    term.wait_for("lower-case letters, digits, hyphens and underscores", WAIT)
        .await;
    term.wait_for_nth("Which channel is this repository's?", 1, WAIT)
        .await;
    term.keys(&["Down", "Down", "Enter"]);
    term.wait_for_nth("Name of the new channel", 1, WAIT).await;
    term.type_line("codebutler-new");
    term.wait_for("[ok] created #codebutler-new", WAIT).await;
    hidden(&term, KEY_PROMPT, 0, "").await;
    let code = term.wait_exit(WAIT).await;
    let screen = term.screen();
    assert_eq!(code, 0, "{screen}");
    assert_no_secret(&screen);

    let created = env.slack.channel_named("codebutler-new").expect("created");
    assert!(env.slack.bot_is_in(&created));
    let mut expected_repo = repo.clone();
    expected_repo["slack"] = json!({"channelID": created, "channelName": "codebutler-new"});
    assert_eq!(read_json(&repo_config_path(&env)), expected_repo);
    let mut expected_global = global.clone();
    expected_global["repositories"]
        .as_array_mut()
        .unwrap()
        .push(entry(&env));
    assert_eq!(read_json(&global_path(&env)), expected_global);
    assert_eq!(mode(&global_path(&env)), 0o600);
}

/// `codebutler init --yes` with `args` and `vars`; exit code and everything it printed.
async fn scripted(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> (i32, String) {
    // Not blocking the test's runtime, which serves the fakes.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_codebutler"))
        .args(["init", "--yes", "--repo"])
        .arg(env.repo_path())
        .args(args)
        .env_clear()
        .env("HOME", env.home.path())
        .env("CODEBUTLER_HOME", env.home.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[tokio::test]
async fn init_without_a_terminal_takes_its_answers_from_flags_and_the_environment() {
    let env = fresh().await;
    let before_global = std::fs::read(global_path(&env)).unwrap();
    let before_repo = std::fs::read(repo_config_path(&env)).unwrap();

    // An answer missing: one line naming the flag and the variable; nothing written.
    let (code, output) = scripted(&env, &["--bot-token", BOT_TOKEN], &[]).await;
    assert_eq!(code, 2, "{output}");
    assert!(
        output.contains(
            "no Slack app-level token was given: pass --app-token or set CODEBUTLER_SLACK_APP_TOKEN"
        ),
        "{output}"
    );
    assert_eq!(std::fs::read(global_path(&env)).unwrap(), before_global);
    assert_eq!(std::fs::read(repo_config_path(&env)).unwrap(), before_repo);

    // A refused answer is not asked again: it ends the set-up, writing nothing.
    let (code, output) = scripted(
        &env,
        &["--bot-token", "xoxb-wrong-5520", "--channel", "#deploys"],
        &[
            ("CODEBUTLER_SLACK_APP_TOKEN", APP_TOKEN),
            ("OPENROUTER_API_KEY", KEY),
        ],
    )
    .await;
    assert_eq!(code, 2, "{output}");
    assert!(
        output.contains("refused the bot token (invalid_auth)"),
        "{output}"
    );
    assert_eq!(std::fs::read(global_path(&env)).unwrap(), before_global);

    // Everything given: the channel by name, joined; the files written.
    let (code, output) = scripted(
        &env,
        &["--bot-token", BOT_TOKEN, "--channel", "#deploys"],
        &[
            ("CODEBUTLER_SLACK_APP_TOKEN", APP_TOKEN),
            ("OPENROUTER_API_KEY", KEY),
        ],
    )
    .await;
    assert_eq!(code, 0, "{output}");
    for secret in [APP_TOKEN, KEY] {
        assert!(!output.contains(secret), "{secret} shown:\n{output}");
    }
    assert!(env.slack.bot_is_in("C0DEPLOY"));
    let global = read_json(&global_path(&env));
    assert_eq!(global["slack"]["appToken"], APP_TOKEN);
    assert_eq!(global["openrouter"]["apiKey"], KEY);
    assert_eq!(mode(&global_path(&env)), 0o600);
    assert_eq!(
        read_json(&repo_config_path(&env))["slack"],
        json!({"channelID": "C0DEPLOY", "channelName": "deploys"})
    );

    // Created instead, by flag; the host's checks list the toolchains the sandbox will
    // show, found in the home the PATH leads to.
    let home = crate::toolchains::installed_home();
    let path = format!(
        "{}:{}",
        home.path().join(".cargo/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (code, output) = scripted(
        &env,
        &["--create-channel", "codebutler-ops"],
        &[("PATH", &path)],
    )
    .await;
    assert_eq!(code, 0, "{output}");
    let h = std::fs::canonicalize(home.path()).unwrap();
    let rustup = format!(
        "[ok] toolchains for the sandbox: rustup ({}, {})",
        h.join(".rustup").display(),
        h.join(".cargo/bin").display()
    );
    assert!(output.contains(&rustup), "{rustup} in:\n{output}");
    let created = env.slack.channel_named("codebutler-ops").expect("created");
    assert_eq!(
        read_json(&repo_config_path(&env))["slack"]["channelID"],
        created.as_str()
    );
}

/// A model id the provider does not list (Anthropic's spelling, with a hyphen where
/// OpenRouter has a dot) ends a scripted set-up naming the closest id, writing nothing; in a
/// terminal the closest is offered, and Enter writes it where the old id was.
#[tokio::test]
async fn init_names_a_model_id_the_provider_lacks_and_offers_the_closest() {
    let env = fresh().await;
    let mut repo = gh_only(&env);
    repo["slack"] = json!({"channelID": "C0API"});
    repo["coder"] = json!({"model": "anthropic/claude-opus-4-6", "maxTurns": 7});
    env.write_repo_config(&repo.to_string());
    let before_global = std::fs::read(global_path(&env)).unwrap();
    let before_repo = std::fs::read(repo_config_path(&env)).unwrap();
    let secrets = [
        ("CODEBUTLER_SLACK_BOT_TOKEN", BOT_TOKEN),
        ("CODEBUTLER_SLACK_APP_TOKEN", APP_TOKEN),
        ("OPENROUTER_API_KEY", KEY),
    ];

    let (code, output) = scripted(&env, &[], &secrets).await;
    assert_eq!(code, 2, "{output}");
    assert!(
        output
            .contains("`coder.model` is `anthropic/claude-opus-4-6`, which the model provider at")
            && output.contains("the closest it lists: `anthropic/claude-opus-4.6`"),
        "{output}"
    );
    assert_eq!(std::fs::read(global_path(&env)).unwrap(), before_global);
    assert_eq!(std::fs::read(repo_config_path(&env)).unwrap(), before_repo);

    let term = start(&env, &secrets);
    hidden(&term, BOT_PROMPT, 0, "").await;
    hidden(&term, APP_PROMPT, 0, "").await;
    term.wait_for("Which channel is this repository's?", WAIT)
        .await;
    term.keys(&["Enter"]);
    hidden(&term, KEY_PROMPT, 0, "").await;
    let screen = term
        .wait_for("Model id for coder.model [anthropic/claude-opus-4.6]", WAIT)
        .await;
    assert!(
        screen.contains("[!!] `coder.model` is `anthropic/claude-opus-4-6`"),
        "{screen}"
    );
    term.type_line("");
    let code = term.wait_exit(WAIT).await;
    let screen = term.screen();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("[ok] model ids"), "{screen}");
    assert_no_secret(&screen);
    let mut expected = repo.clone();
    expected["coder"]["model"] = json!("anthropic/claude-opus-4.6");
    expected["slack"] = json!({"channelID": "C0API", "channelName": "api-team"});
    assert_eq!(read_json(&repo_config_path(&env)), expected);
    assert!(read_json(&global_path(&env)).get("coder").is_none());
}
