//! Who may do what (`access.developers`), end to end: a request from someone who is not a
//! developer gets a plan that waits for a developer, their "yes" starts nothing and names who
//! can approve, a developer's "yes" starts the run, and "merge" from someone who is not a
//! developer leaves the pull request open on origin.

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::json;

use crate::harness::{Env, USER, WAIT, runnerctl, say_and_wait_run, stored_state, thread_with_pr};

/// Someone allowed in the channel who is not a developer.
const BOB: &str = "U0BOB";

/// An env with a runner whose only developer is [`USER`] (Alice).
async fn env_with_developers() -> Env {
    Env::with_runner(json!({
        "coder": {"maxTurns": 6, "timeout": 2},
        "access": {"developers": [USER]}
    }))
    .await
}

/// Waits until a post of the thread satisfies `pred`; returns its text.
async fn wait_post(env: &Env, thread: &str, pred: impl Fn(&str) -> bool) -> String {
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(thread).iter().any(|p| pred(&p.text))
        })
        .await;
    assert!(ok, "no such post in {:?}", env.post_texts(thread));
    env.thread_posts(thread)
        .into_iter()
        .find(|p| pred(&p.text))
        .map(|p| p.text)
        .unwrap_or_default()
}

/// Bob asks for work: the plan says it waits for Alice; Bob's "yes" gets one answer naming
/// Alice and starts no run (no Coder request, nothing listed by `runnerctl`); Alice's "yes"
/// starts the run, which ends well.
#[tokio::test]
async fn a_non_developers_yes_starts_nothing_and_a_developers_does() {
    let env = env_with_developers().await;
    env.model.script(
        "add a changelog",
        vec![
            Reply::tool_call(
                "ProposePlan",
                json!({"summary": "Work on DEV-GATE", "steps": ["Write CHANGELOG.md"], "files": ["CHANGELOG.md"]})
                    .to_string(),
            ),
            Reply::text("Here is my plan."),
        ],
    );
    env.model.script(
        "DEV-GATE",
        vec![
            crate::harness::write("CHANGELOG.md", "# Changes\n"),
            Reply::text("Wrote the changelog."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env
        .slack
        .user_message(CHANNEL, BOB, "add a changelog", None)
        .ts;
    let plan = wait_post(&env, &thread, |t| t.contains("Work on DEV-GATE")).await;
    assert!(
        plan.contains("This plan waits for a developer's approval: <@U0ALICE>"),
        "{plan}"
    );

    env.slack.user_message(CHANNEL, BOB, "yes", Some(&thread));
    let refusal = wait_post(&env, &thread, |t| {
        t.contains("only this channel's developers")
    })
    .await;
    assert!(refusal.contains("<@U0BOB>"), "{refusal}");
    assert!(refusal.contains("approve a plan"), "{refusal}");
    assert!(refusal.contains("<@U0ALICE>"), "{refusal}");
    assert!(env.model.requests_for("DEV-GATE").is_empty());
    let listed = runnerctl(&env, &["ls", "--json"]).await;
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).trim(),
        "[]",
        "no run for a non-developer's yes"
    );

    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    assert!(!env.model.requests_for("DEV-GATE").is_empty());
    // Bob's "yes" was answered once, whatever came after it.
    assert_eq!(
        env.post_texts(&thread)
            .iter()
            .filter(|t| t.contains("only this channel's developers"))
            .count(),
        1
    );
}

/// "merge" from someone who is not a developer is refused with the developers named, and the
/// pull request stays unmerged: origin's default branch does not move.
#[tokio::test]
async fn merge_from_a_non_developer_is_refused() {
    let env = env_with_developers().await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "DEV-MERGE", vec![]).await;
    let head = git::git(&origin, &["rev-parse", "HEAD"]);
    env.slack.user_message(CHANNEL, BOB, "merge", Some(&thread));
    let refusal = wait_post(&env, &thread, |t| {
        t.contains("only this channel's developers")
    })
    .await;
    assert!(refusal.contains("can merge"), "{refusal}");
    assert!(refusal.contains("<@U0ALICE>"), "{refusal}");
    assert_eq!(stored_state(&env, &thread).await, "pr_opened");
    assert_eq!(git::git(&origin, &["rev-parse", "HEAD"]), head);
}
