//! Slack's AI-app surface as a thread meets it: the status line while the PM works (and the
//! 👀 reaction where Slack shows none), checked by what the fake Slack received.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::json;

use crate::harness::Env;

/// The statuses Slack took for `thread`, in order.
fn statuses(env: &Env, thread: &str) -> Vec<String> {
    env.slack
        .statuses()
        .into_iter()
        .filter(|s| s.channel == CHANNEL && s.thread_ts == thread)
        .map(|s| s.status)
        .collect()
}

/// The bot's reactions on the message `ts`, in order.
fn reactions_on(env: &Env, ts: &str) -> Vec<String> {
    env.slack
        .reactions()
        .into_iter()
        .filter(|r| r.ts == ts)
        .map(|r| r.name)
        .collect()
}

#[tokio::test]
async fn the_thread_status_says_what_the_pm_reads_and_the_answer_clears_it() {
    let env = Env::new().await;
    let q = "where is STATUS-LINE's expiry set?";
    env.model.script(
        q,
        vec![
            Reply::tool_call("Grep", r#"{"pattern": "SESSION_EXPIRY"}"#),
            Reply::tool_call("ReadFile", r#"{"path": "src/auth/session.rs"}"#),
            Reply::text("In `src/auth/session.rs`."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    assert!(env.wait_reaction(&thread, "white_check_mark").await);
    assert_eq!(
        statuses(&env, &thread),
        [
            "is thinking…",
            "is searching for SESSION_EXPIRY…",
            "is reading src/auth/session.rs…"
        ]
    );
    // The status stood in for 👀; the answer's post cleared it, as Slack does.
    assert_eq!(reactions_on(&env, &thread), ["white_check_mark"]);
    assert_eq!(env.slack.thread_status(CHANNEL, &thread), None);
    let calls: Vec<String> = env
        .slack
        .calls()
        .into_iter()
        .map(|c| c.method)
        .filter(|m| m == "assistant.threads.setStatus" || m == "chat.postMessage")
        .collect();
    assert_eq!(
        calls.last().map(String::as_str),
        Some("chat.postMessage"),
        "the answer came after every status: {calls:?}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn where_slack_refuses_the_status_the_pm_reacts_with_eyes_and_asks_once_per_channel() {
    let env = Env::new().await;
    env.slack
        .refuse("assistant.threads.setStatus", "feature_not_enabled");
    env.model
        .script("first NO-STATUS question", vec![Reply::text("First.")]);
    env.model
        .script("second NO-STATUS question", vec![Reply::text("Second.")]);
    let _daemon = env.start().await;
    let first = env.say("first NO-STATUS question");
    assert!(env.wait_reaction(&first, "white_check_mark").await);
    let second = env.say("second NO-STATUS question");
    assert!(env.wait_reaction(&second, "white_check_mark").await);
    assert_eq!(reactions_on(&env, &first), ["eyes", "white_check_mark"]);
    assert_eq!(reactions_on(&env, &second), ["eyes", "white_check_mark"]);
    assert_eq!(
        env.slack.calls_of("assistant.threads.setStatus").len(),
        1,
        "the channel is remembered as one without a status"
    );
    assert_eq!(env.post_texts(&second), ["*PM:* Second."]);
}

#[tokio::test]
async fn with_the_ai_surface_off_the_pm_reacts_with_eyes_and_sets_no_status() {
    let env = Env::with_config(json!({"slack": {"aiSurface": false}})).await;
    env.model
        .script("a PLAIN-PATH question", vec![Reply::text("Plainly.")]);
    let _daemon = env.start().await;
    let thread = env.say("a PLAIN-PATH question");
    assert!(env.wait_reaction(&thread, "white_check_mark").await);
    assert_eq!(reactions_on(&env, &thread), ["eyes", "white_check_mark"]);
    assert!(env.slack.calls_of("assistant.threads.setStatus").is_empty());
}
