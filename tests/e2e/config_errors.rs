//! Broken configuration: one clear error naming the file and field, a non-zero exit, no
//! panic, no secret in the output.

use std::time::Duration;

use codebutler_test_support::slack::{APP_TOKEN, BOT_TOKEN};

use crate::harness::{Daemon, Env};

async fn run_to_exit(env: &Env) -> (i32, String) {
    let mut daemon: Daemon = env.spawn();
    let status = daemon.wait_exit(Duration::from_secs(30)).await;
    (status.code().unwrap_or(-1), daemon.log())
}

fn assert_no_panic(log: &str) {
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("RUST_BACKTRACE"), "{log}");
}

#[tokio::test]
async fn malformed_repo_config_names_the_file_and_position() {
    let env = Env::new().await;
    env.write_repo_config("{\"slack\": {\"channelID\": \"C1\",,}}");
    let (code, log) = run_to_exit(&env).await;
    assert_eq!(code, 2, "{log}");
    assert_no_panic(&log);
    let path = env.repo_path().join(".codebutler/config.json");
    assert!(
        log.contains(&format!(
            "codebutler: error: configuration: {}: not valid JSON at line 1",
            path.display()
        )),
        "{log}"
    );
    assert_eq!(
        log.lines().count(),
        2,
        "one error (two lines with the hint): {log}"
    );
}

#[tokio::test]
async fn wrong_field_type_and_unknown_role_are_named() {
    let env = Env::new().await;
    env.write_repo_config(r#"{"slack": {"channelID": "C1"}, "coder": {"maxTurns": "lots"}}"#);
    let (code, log) = run_to_exit(&env).await;
    assert_eq!(code, 2);
    assert!(
        log.contains("field `coder.maxTurns`: invalid type: string \"lots\""),
        "{log}"
    );

    env.write_repo_config(r#"{"slack": {"channelID": "C1"}, "tester": {"model": "x"}}"#);
    let (code, log) = run_to_exit(&env).await;
    assert_eq!(code, 2);
    assert!(log.contains("unknown field `tester`"), "{log}");
    assert_no_panic(&log);
}

#[tokio::test]
async fn missing_token_says_how_to_fix_and_hides_secrets() {
    let env = Env::new().await;
    env.write_global(serde_json::json!({
        "slack": {"appToken": "xapp-secret-app-token"},
        "openrouter": {"apiKey": "sk-or-secret-key"}
    }));
    let (code, log) = run_to_exit(&env).await;
    assert_eq!(code, 2);
    assert!(log.contains("missing `slack.botToken`"), "{log}");
    assert!(log.contains("CODEBUTLER_SLACK_BOT_TOKEN"), "{log}");
    assert!(
        !log.contains("xapp-secret-app-token") && !log.contains("sk-or-secret-key"),
        "{log}"
    );
    assert_no_panic(&log);
    // First run created .codebutler with the seeded prompts and ignore rules anyway.
    let dir = env.repo_path().join(".codebutler");
    for name in ["pm.md", "coder.md", "artist.md", "shared.md"] {
        assert!(
            dir.join("prompts").join(name).is_file(),
            "{name} not seeded"
        );
    }
    assert!(dir.join(".gitignore").is_file());
}

#[tokio::test]
async fn outside_a_git_repository_is_a_clear_error() {
    let not_repo = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_codebutler"))
        .arg("--repo")
        .arg(not_repo.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is not inside a git repository"),
        "{stderr}"
    );
}

/// A store URL with a mistyped parameter (`?passwd=…`) or an `sslmode` PostgreSQL does not
/// know stops the start as a configuration error naming the parameter; neither the value nor
/// the URL's password reaches the daemon's output (sqlx would log an unknown parameter's
/// value, and quote a bad `sslmode`).
#[tokio::test]
async fn a_store_url_with_a_bad_parameter_is_named_without_its_value() {
    let env = Env::new().await;
    for (query, parameter, value) in [
        ("passwd=hunter-value-92", "passwd", "hunter-value-92"),
        ("sslmode=hunter-value-93", "sslmode", "hunter-value-93"),
    ] {
        env.write_global(serde_json::json!({
            "slack": {"botToken": BOT_TOKEN, "appToken": APP_TOKEN},
            "openrouter": {"apiKey": "sk-or-test-key"},
            "store": {"url": format!("postgres://cb:pw-hunter-91@127.0.0.1:9/db?{query}")}
        }));
        let (code, log) = run_to_exit(&env).await;
        assert_eq!(code, 2, "{log}");
        assert_no_panic(&log);
        let error = one_error_line(&log);
        assert!(error.contains("store.url"), "{log}");
        assert!(error.contains(&format!("`{parameter}`")), "{log}");
        assert!(!log.contains(value), "the value shown: {log}");
        assert!(!log.contains("pw-hunter-91"), "the password shown: {log}");
    }
}

/// The one `codebutler: error:` line of a daemon's output.
fn one_error_line(log: &str) -> String {
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("codebutler: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line: {log}");
    errors[0].to_owned()
}
