//! Set-up mistakes end the start with one plain line naming the cause and the fix, an exit
//! code that says what kind of mistake it is, and no secret in what the daemon prints: Slack
//! out of reach, a token Slack refuses, an app token without `connections:write` or Socket
//! Mode off, the bot not in its channel or the channel unknown, a missing scope, the model
//! key refused, a model id the provider does not list, `gh` missing or logged out, and a
//! host without a kernel feature the sandbox needs. Each mistake is made in the world the
//! fakes keep (Slack's tokens, scopes and channels, the provider's keys and models, `gh`'s
//! login) or in the host the daemon runs on (a seccomp filter or a mount namespace that takes
//! a feature away), never in the product.

use std::process::Command;
use std::time::Duration;

use codebutler_test_support::host::{self, Missing};
use codebutler_test_support::slack::{self, APP_TOKEN, BOT_TOKEN, CHANNEL};
use serde_json::json;

use crate::harness::{Daemon, Env, WAIT, thread_with_plan};

/// The secrets every daemon here is given; none may show.
const SECRETS: [&str; 3] = [BOT_TOKEN, APP_TOKEN, "sk-or-test-key"];

/// Runs `command` to its end; returns its exit code and everything it printed.
async fn run_to_exit(env: &Env, command: Command) -> (i32, String) {
    let mut daemon = Daemon::spawn_capturing(command, env.new_log());
    let status = daemon.wait_exit(Duration::from_secs(60)).await;
    (status.code().unwrap_or(-1), daemon.log())
}

/// The daemon ended with `code` and one error line holding each of `needles`, showing none
/// of `secrets` (nor the default ones), nor Slack's raw answer, nor a panic.
fn assert_one_line(code: i32, log: &str, expected: i32, needles: &[&str], secrets: &[&str]) {
    assert_eq!(code, expected, "exit code; output:\n{log}");
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("codebutler: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line; output:\n{log}");
    for needle in needles {
        assert!(errors[0].contains(needle), "{needle:?} in:\n{log}");
    }
    for secret in SECRETS.iter().chain(secrets) {
        assert!(!log.contains(secret), "{secret:?} shown:\n{log}");
    }
    for raw in ["Body:", "panicked", "hyper_util", "Some("] {
        assert!(!log.contains(raw), "{raw:?} in:\n{log}");
    }
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn slack_out_of_reach_is_said_with_its_address() {
    let port = closed_port().await;
    let url = format!("http://127.0.0.1:{port}/api");
    let env = Env::with_config(json!({"slack": {"apiUrl": format!("{url}/")}})).await;
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        6,
        &[&format!("cannot reach Slack at {url}"), "slack.apiUrl"],
        &[],
    );
}

#[tokio::test]
async fn a_bot_token_slack_refuses_is_named() {
    let env = Env::new().await;
    let revoked = "xoxb-revoked-4417-secret";
    env.write_global(json!({
        "slack": {"botToken": revoked, "appToken": APP_TOKEN},
        "openrouter": {"apiKey": "sk-or-test-key"}
    }));
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["refused the bot token (invalid_auth)", "slack.botToken"],
        &[revoked],
    );
    // Slack was asked once, and nothing further.
    assert_eq!(env.slack.calls_of("auth.test").len(), 1);
    assert!(env.slack.calls_of("apps.connections.open").is_empty());
}

#[tokio::test]
async fn an_app_token_slack_refuses_ends_the_start_instead_of_retrying() {
    let env = Env::new().await;
    let revoked = "xapp-revoked-4418-secret";
    env.write_global(json!({
        "slack": {"botToken": BOT_TOKEN, "appToken": revoked},
        "openrouter": {"apiKey": "sk-or-test-key"}
    }));
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["refused the app token (invalid_auth)", "slack.appToken"],
        &[revoked],
    );
    assert_eq!(env.slack.calls_of("apps.connections.open").len(), 1);
    assert_eq!(env.slack.connections_opened(), 0);
}

#[tokio::test]
async fn an_app_token_without_connections_write_is_named() {
    let env = Env::new().await;
    env.slack.set_app_scopes(&["authorizations:read"]);
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["lacks the connections:write scope", "slack.appToken"],
        &[],
    );
}

#[tokio::test]
async fn socket_mode_off_is_named_with_where_to_turn_it_on() {
    let env = Env::new().await;
    env.slack.turn_socket_mode_off();
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["Socket Mode is off", "deploy/slack-app-manifest.yaml"],
        &[],
    );
}

#[tokio::test]
async fn the_bot_not_in_its_channel_is_told_to_be_invited() {
    let env = Env::new().await;
    env.slack.name_channel(CHANNEL, "deploys");
    env.slack.remove_bot_from(CHANNEL);
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["not in #deploys (C0CHAN)", "/invite @codebutler"],
        &[],
    );
}

#[tokio::test]
async fn an_unknown_channel_is_named() {
    let env = Env::new().await;
    env.slack.delete_channel(CHANNEL);
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["no channel C0CHAN", "channel_not_found", "slack.channelID"],
        &[],
    );
}

#[tokio::test]
async fn a_missing_scope_names_the_scopes_and_the_manifest() {
    let env = Env::new().await;
    let scopes: Vec<String> = slack::manifest_bot_scopes()
        .into_iter()
        .filter(|s| s != "channels:read")
        .collect();
    env.slack
        .set_bot_scopes(&scopes.iter().map(String::as_str).collect::<Vec<_>>());
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &[
            "lacks a Slack scope conversations.info needs",
            "needed: channels:read",
            "deploy/slack-app-manifest.yaml",
        ],
        &[],
    );
}

#[tokio::test]
async fn a_model_key_the_provider_refuses_is_named() {
    let env = Env::new().await;
    env.model.require_api_key("sk-or-the-valid-key");
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["refused the API key (HTTP 401)", "openrouter.apiKey"],
        &["sk-or-the-valid-key"],
    );
    // Nothing was asked of the model.
    assert!(env.model.requests().is_empty());
}

/// A `coder.model` written as Anthropic's own API names the model, where OpenRouter writes
/// its version with a dot: the start ends on one line naming the field, the id and the ids
/// the provider lists that come closest, before anything is served.
#[tokio::test]
async fn a_model_id_the_provider_does_not_list_stops_the_start_with_the_closest_ids() {
    let env = Env::with_config(json!({"coder": {"model": "anthropic/claude-opus-4-6"}})).await;
    for id in [
        "anthropic/claude-opus-4.6-fast",
        "anthropic/claude-sonnet-4.5",
        "moonshotai/kimi-k2",
    ] {
        env.model.list(id);
    }
    let (code, log) = run_to_exit(&env, env.command()).await;
    let url = env.model.base_url();
    let expected = format!(
        "codebutler: error: `coder.model` is `anthropic/claude-opus-4-6`, which the model \
         provider at {url} does not list (GET {url}/models); the closest it lists: \
         `anthropic/claude-opus-4.6`, `anthropic/claude-opus-4.6-fast`, \
         `anthropic/claude-sonnet-4.5`"
    );
    assert_one_line(code, &log, 2, &[&expected], &[]);
    assert!(log.lines().any(|l| l == expected), "{log}");
    // The list was read once, for every model; no model was asked anything, no event taken.
    assert_eq!(env.model.model_list_requests(), ["output_modalities=all"]);
    assert!(env.model.requests().is_empty());
    assert_eq!(env.slack.connections_opened(), 0);
}

/// Model ids the provider lists start the service — the Artist's image model among them,
/// which OpenRouter lists only to those who ask for every output — and the list read for
/// the check is the one the plan's estimate prices the Coder's model from: it is read once.
#[tokio::test]
async fn listed_model_ids_start_and_their_list_is_read_once() {
    let env = Env::with_config(json!({
        "coder": {"model": "anthropic/claude-sonnet-4.5"},
        "artist": {"provider": "openrouter", "model": "black-forest-labs/flux.2-pro"}
    }))
    .await;
    env.model.price(
        "anthropic/claude-sonnet-4.5",
        0.000003,
        0.000015,
        Some(0.0000003),
    );
    env.model.list_image_model("black-forest-labs/flux.2-pro");
    let _daemon = env.start().await;
    assert_eq!(env.model.model_list_requests(), ["output_modalities=all"]);
    let thread = thread_with_plan(&env, "add a notice", "NOTICE-PLAN").await;
    let priced = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(&thread)
                .iter()
                .any(|p| p.text.contains("*Estimate:*"))
        })
        .await;
    assert!(priced, "{:?}", env.thread_posts(&thread));
    let plan = env
        .thread_posts(&thread)
        .into_iter()
        .find(|p| p.text.contains("*Estimate:*"))
        .unwrap();
    // 27,000 fresh and 220,500 cached prompt tokens and 6,000 completion tokens.
    assert!(
        plan.text
            .contains("*Estimate:* about $0.24 (a typical run at this model's prices"),
        "{}",
        plan.text
    );
    assert_eq!(env.model.model_list_requests(), ["output_modalities=all"]);
}

/// A model list the provider fails to give checks nothing: the service starts, even with an
/// id the provider would not know, and says once that the ids were not checked.
#[tokio::test]
async fn a_model_list_that_cannot_be_read_leaves_the_ids_unchecked_and_says_so_once() {
    let env = Env::with_config(json!({"coder": {"model": "anthropic/claude-opus-4-6"}})).await;
    env.model.fail_model_list(500);
    let mut daemon = env.start().await;
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(WAIT).await.code(), Some(0));
    let log = daemon.log();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("were not checked"))
        .collect();
    let url = env.model.base_url();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains(&format!(
            "could not read the model list at {url}/models (the provider answered HTTP 500); \
             the model ids in the configuration were not checked"
        )),
        "{log}"
    );
    assert_eq!(env.model.model_list_requests(), ["output_modalities=all"]);
}

/// A stop asked for while the service starts (systemd's stop while Slack is slow to answer)
/// is carried out once the start is through: the service ends as a stop ends it, never
/// killed by the signal mid-start.
#[tokio::test]
async fn a_stop_asked_for_while_starting_ends_the_service_cleanly() {
    let env = Env::new().await;
    // The start's Socket Mode check waits on Slack's answer until the test lets it go.
    let slow = env.slack.stall_next("apps.connections.open");
    let mut daemon = env.spawn();
    let asked = env
        .slack
        .wait_until(WAIT, || {
            !env.slack.calls_of("apps.connections.open").is_empty()
        })
        .await;
    assert!(asked, "the start never asked Slack; log:\n{}", daemon.log());
    daemon.signal("TERM");
    drop(slow);
    let status = daemon.wait_exit(WAIT).await;
    assert_eq!(status.code(), Some(0), "{status:?}; log:\n{}", daemon.log());
}

#[tokio::test]
async fn gh_missing_is_named() {
    let env = Env::with_config(json!({"github": {"cli": "gh"}})).await;
    // A PATH with nothing on it: no `gh`.
    let empty = tempfile::tempdir().unwrap();
    let mut command = env.command();
    command.env("PATH", empty.path());
    let (code, log) = run_to_exit(&env, command).await;
    assert_one_line(code, &log, 5, &["`gh` is not installed", "github.cli"], &[]);
}

#[tokio::test]
async fn gh_logged_out_is_told_to_log_in() {
    let env = Env::new().await;
    codebutler_test_support::gh::log_out_gh(env.outside.path());
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &["not logged in to any GitHub host", "gh auth login"],
        &[],
    );
}

/// On a host without `feature`, the start ends naming it (`needle`), exit code 5.
async fn a_host_without(feature: Missing, needles: &[&str]) {
    let env = Env::new().await;
    let (code, log) = run_to_exit(&env, host::without(feature, env.command())).await;
    assert_one_line(code, &log, 5, needles, &[]);
}

#[tokio::test]
async fn a_host_without_landlock_is_named() {
    a_host_without(Missing::Landlock, &["for lack of Landlock", "lsm="]).await;
}

#[tokio::test]
async fn a_host_without_user_namespaces_is_named() {
    a_host_without(
        Missing::UserNamespaces,
        &["for lack of user namespaces", "unshare"],
    )
    .await;
}

#[tokio::test]
async fn a_host_without_seccomp_is_named() {
    a_host_without(Missing::Seccomp, &["for lack of seccomp filters"]).await;
}

#[tokio::test]
async fn a_host_without_cgroups_is_named() {
    a_host_without(
        Missing::Cgroups,
        &["for lack of cgroups (the pids and memory controllers)"],
    )
    .await;
}

/// A `sandbox.readOnly` path that is not there is a setting to fix, said at the start.
#[tokio::test]
async fn sandbox_settings_that_cannot_work_are_named() {
    let env = Env::with_config(json!({
        "sandbox": {"readOnly": ["/nonexistent/codebutler-toolchain"]}
    }))
    .await;
    let (code, log) = run_to_exit(&env, env.command()).await;
    assert_one_line(
        code,
        &log,
        2,
        &[
            "sandbox step `resolve_read_only` failed",
            "/nonexistent/codebutler-toolchain",
            "sandbox.readOnly",
        ],
        &[],
    );
}

#[tokio::test]
async fn a_host_without_loop_devices_is_named_for_sandbox_disk_mb() {
    a_host_without(
        Missing::LoopDevices,
        &["sandbox.diskMB", "loop devices", "/dev/loop-control"],
    )
    .await;
}

/// The bot taken out of its channel while the daemon runs: the answer Slack refuses is said
/// in the log once, in one line with the fix, and given up (not retried for ever); the
/// daemon goes on running.
#[tokio::test]
async fn a_post_refused_after_the_start_is_said_once_with_its_fix() {
    let env = Env::new().await;
    env.model.script(
        "who deploys?",
        vec![codebutler_test_support::model::Reply::text("Alice.")],
    );
    let mut daemon = env.start().await;
    env.slack.remove_bot_from(CHANNEL);
    env.say("who deploys?");
    let refused = || {
        env.slack
            .calls_of("chat.postMessage")
            .iter()
            .any(|c| c.error.as_deref() == Some("not_in_channel"))
    };
    assert!(env.slack.wait_until(crate::harness::WAIT, refused).await);
    let said = |log: &str| {
        log.lines()
            .filter(|l| l.contains("not_in_channel"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(
        env.slack
            .wait_until(crate::harness::WAIT, || !said(&daemon.log()).is_empty())
            .await,
        "{}",
        daemon.log()
    );
    // Given up: the daemon stops cleanly, having tried once and said it once.
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(crate::harness::WAIT).await.code(), Some(0));
    let log = daemon.log();
    let lines = said(&log);
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("invite it there"), "{log}");
    assert!(!log.contains("Body:"), "{log}");
    assert_eq!(
        env.slack
            .calls_of("chat.postMessage")
            .iter()
            .filter(|c| c.error.is_some())
            .count(),
        1
    );
}
