//! The reviewer model (`reviewer.model`) end to end, through the real daemon, git, the
//! sandboxed Coder, the fake Slack, the fake model and the fake `gh`: a pull request opened
//! is reviewed with the plan, its diff and a tool over its head; GitHub receives one
//! `COMMENT` review with the comment on a line its diff shows (one elsewhere dropped); the
//! thread gets one line; the comment enters the review loop like a person's and the fix
//! round's push is reviewed once, a restart reviewing nothing again; the reviewer's thread
//! never blocks "merge" and is never an approval; its cost is in the usage report. Off
//! unless configured (turned on, the open head is reviewed); an answer that cannot be read
//! posts nothing.

use std::time::{Duration, Instant};

use codebutler_test_support::gh::{gh_log, gh_merges, gh_reviews_posted};
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{Env, WAIT, say_and_wait_post, say_and_wait_run, thread_with_pr, write};
use crate::reviews::{posts_with, review_env_config, sort_like_a_pm, wait_post_with};

/// The reviewer's model in these tests, listed by the fake provider.
const REVIEWER_MODEL: &str = "test/reviewer-model";
/// What only the reviewer's request carries: its diff's heading.
const REVIEWER_REQUEST: &str = "\n\n## The diff\n\n```diff\n";
/// The pull request the fake `gh` opens.
const PR_URL: &str = "https://github.com/acme/app/pull/7";

/// An env whose reviewer is on.
async fn reviewer_env() -> Env {
    let env = Env::with_runner(review_env_config(
        json!({"reviewer": {"model": REVIEWER_MODEL}}),
    ))
    .await;
    // Priced, so what its calls cost reads in the report (three decimals).
    env.model.price(REVIEWER_MODEL, 0.000_01, 0.000_02, None);
    env
}

/// Whether the request `body` carries a tool's result.
fn has_tool_result(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

/// A reviewer that reads `notes.txt` at the head first, then asks for a rename while the
/// notes say `one` (and comments on a line the diff does not show), and finds nothing once
/// they say `uno`.
fn review_like_a_reviewer(body: &Value) -> Reply {
    if !has_tool_result(body) {
        return Reply::tool_call("ReadFile", r#"{"path": "notes.txt"}"#);
    }
    let request = body.to_string();
    if request.contains("+uno") {
        return Reply::text(json!({"summary": "Looks right.", "comments": []}).to_string());
    }
    Reply::text(
        json!({
            "summary": "One naming problem.",
            "comments": [
                {"path": "notes.txt", "line": 1, "body": "Rename `one` to `uno`."},
                {"path": "README.md", "line": 1, "body": "Not in this diff."}
            ]
        })
        .to_string(),
    )
}

/// The tip of `branch` on the bare repository `origin`.
fn origin_tip(origin: &std::path::Path, branch: &str) -> String {
    git2::Repository::open_bare(origin)
        .unwrap()
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string()
}

/// Waits until the fake `gh` was asked `gh pr view 7` `n` more times than `before`: the
/// watcher polled that often.
async fn polls_after(env: &Env, before: usize, n: usize) {
    let views = || {
        gh_log(env.outside.path())
            .iter()
            .filter(|l| l.starts_with("pr view 7 --json state,mergedAt"))
            .count()
    };
    let deadline = Instant::now() + WAIT;
    while views() < before + n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(views() >= before + n, "the watcher did not poll");
}

fn view_count(env: &Env) -> usize {
    gh_log(env.outside.path())
        .iter()
        .filter(|l| l.starts_with("pr view 7 --json state,mergedAt"))
        .count()
}

#[tokio::test]
async fn each_head_is_reviewed_once_and_its_comment_enters_the_review_loop() {
    let env = reviewer_env().await;
    let gh = env.outside.path();
    let mut daemon = env.start().await;
    env.model.respond(REVIEWER_REQUEST, review_like_a_reviewer);
    let (thread, origin) = thread_with_pr(
        &env,
        "RVW",
        vec![
            write("notes.txt", "uno\ntwo\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Rename the first note"}"#),
            Reply::text("Renamed the first note."),
        ],
    )
    .await;
    env.model.respond("got these comments", sort_like_a_pm);
    let branch = "codebutler/work-on-rvw";
    let first_head = origin_tip(&origin, branch);

    // One line in the thread, once the review is on GitHub.
    let line = wait_post_with(&env, &thread, "🔎 Reviewer").await;
    assert_eq!(line, format!("🔎 Reviewer: 1 comment on {PR_URL}"));

    // The model was asked with the plan and the pull request's diff, read the head with
    // its tool, and its calls were the reviewer's model.
    let asked = env.model.requests_for(REVIEWER_REQUEST);
    assert_eq!(asked.len(), 2, "a tool call, then the answer");
    let request = asked[0].body.to_string();
    assert!(request.contains("## The plan"), "{request}");
    assert!(request.contains("Work on RVW"), "the plan: {request}");
    assert!(request.contains("+one"), "the diff: {request}");
    assert!(asked.iter().all(|r| r.body["model"] == REVIEWER_MODEL));
    let offered: Vec<&str> = asked[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        offered,
        ["ReadFile", "Grep", "ListFiles"],
        "read-only tools only"
    );
    let tool_result = asked[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .to_string();
    assert!(tool_result.contains("1  one"), "{tool_result}");

    // GitHub received one COMMENT review of the head origin has, with the comment on a
    // line of the diff; the one on a line the diff does not show was dropped.
    let posted = gh_reviews_posted(gh);
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0]["event"], "COMMENT");
    assert_eq!(posted[0]["commit_id"], first_head.as_str());
    assert_eq!(
        posted[0]["comments"],
        json!([{"path": "notes.txt", "line": 1, "side": "RIGHT", "body": "Rename `one` to `uno`."}])
    );

    // The review loop proposes a fix from it, as for a person's comment, and the fix runs.
    let proposal = wait_post_with(&env, &thread, "review comment").await;
    assert!(proposal.contains("Rename"), "{proposal}");
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let task = env.model.requests_for("RVW");
    let task = task.last().unwrap().body.to_string();
    assert!(task.contains("Rename `one` to `uno`."), "{task}");

    // The fix's push is a new head: reviewed once, nothing found.
    let clean = wait_post_with(&env, &thread, "no problems found").await;
    assert_eq!(clean, format!("🔎 Reviewer: no problems found on {PR_URL}"));
    let second_head = origin_tip(&origin, branch);
    assert_ne!(second_head, first_head);
    let posted = gh_reviews_posted(gh);
    assert_eq!(posted.len(), 2, "{posted:?}");
    assert_eq!(posted[1]["commit_id"], second_head.as_str());
    assert_eq!(posted[1]["event"], "COMMENT");
    let calls = env.model.requests_for(REVIEWER_REQUEST).len();

    // A restart reviews no head again.
    daemon.kill9().await;
    let _daemon = env.start().await;
    let before = view_count(&env);
    polls_after(&env, before, 3).await;
    assert_eq!(gh_reviews_posted(gh).len(), 2);
    assert_eq!(env.model.requests_for(REVIEWER_REQUEST).len(), calls);
    assert_eq!(posts_with(&env, &thread, "🔎 Reviewer").len(), 2);

    // Its unresolved review thread does not block "merge", and it was never an approval.
    say_and_wait_post(&env, &thread, "merge", "*PM:* PR #7 merged").await;
    assert_eq!(gh_merges(gh), ["squash"]);
    let report = wait_post_with(&env, &thread, "📊").await;
    let charged: f64 = env
        .model
        .requests_for(REVIEWER_REQUEST)
        .iter()
        .map(|r| r.charged)
        .sum();
    assert!(charged >= 0.01, "priced calls: {charged}");
    let reviewer_block: Vec<&str> = report
        .lines()
        .skip_while(|l| *l != "*Reviewer*")
        .take(6)
        .collect();
    assert!(
        reviewer_block.contains(&format!("• Calls: {calls}").as_str()),
        "{report}"
    );
    assert!(
        reviewer_block.contains(&format!("• Cost: ${charged:.3}").as_str()),
        "its cost, {charged}: {report}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn off_unless_configured_then_the_open_head_is_reviewed_once_turned_on() {
    let env = Env::with_runner(review_env_config(json!({}))).await;
    let mut daemon = env.start().await;
    env.model.respond(REVIEWER_REQUEST, review_like_a_reviewer);
    let (thread, _origin) = thread_with_pr(&env, "RVW-OFF", vec![]).await;
    let before = view_count(&env);
    polls_after(&env, before, 3).await;
    assert!(env.model.requests_for(REVIEWER_REQUEST).is_empty());
    assert!(gh_reviews_posted(env.outside.path()).is_empty());
    assert!(posts_with(&env, &thread, "🔎").is_empty());

    // Turned on: the open pull request's head is reviewed, once.
    daemon.kill9().await;
    let path = env.repo_path().join(".codebutler/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["reviewer"] = json!({"model": REVIEWER_MODEL});
    env.write_repo_config(&config.to_string());
    env.model.list(REVIEWER_MODEL);
    let _daemon = env.start().await;
    let line = wait_post_with(&env, &thread, "🔎 Reviewer").await;
    assert_eq!(line, format!("🔎 Reviewer: 1 comment on {PR_URL}"));
    let before = view_count(&env);
    polls_after(&env, before, 3).await;
    assert_eq!(gh_reviews_posted(env.outside.path()).len(), 1);
    assert_eq!(posts_with(&env, &thread, "🔎").len(), 1);
    env.assert_clean();
}

/// The reviewer's model answers 503: its breaker opens at that first failure and
/// `reviewer.fallback` reviews instead (never the PM's fallback), GitHub gets its review, and
/// the thread's line names the model that answered.
#[tokio::test]
async fn a_failing_reviewer_model_gives_way_to_its_own_fallback_named_in_the_line() {
    const FALLBACK: &str = "test/reviewer-fallback";
    const PM_FALLBACK: &str = "test/pm-fallback";
    let env = Env::with_runner(review_env_config(json!({
        "openrouter": {"maxRetries": 0, "breakerFailures": 1, "breakerCoolDownSecs": 3600},
        "productManager": {"fallback": PM_FALLBACK},
        "reviewer": {"model": REVIEWER_MODEL, "fallback": FALLBACK}
    })))
    .await;
    for model in [REVIEWER_MODEL, FALLBACK, PM_FALLBACK] {
        env.model.list(model);
    }
    let _daemon = env.start().await;
    env.model.respond(REVIEWER_REQUEST, |body| {
        if body["model"] == REVIEWER_MODEL {
            Reply::error(503, "overloaded")
        } else {
            review_like_a_reviewer(body)
        }
    });
    let (thread, _origin) = thread_with_pr(&env, "RVW-FALLBACK", vec![]).await;
    let line = wait_post_with(&env, &thread, "🔎 Reviewer").await;
    assert_eq!(
        line,
        format!(
            "🔎 Reviewer: 1 comment on {PR_URL}\n_Answered by `{FALLBACK}`: `{REVIEWER_MODEL}` is failing, so its fallback stands in._"
        )
    );
    let asked: Vec<Value> = env
        .model
        .requests_for(REVIEWER_REQUEST)
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(asked, [REVIEWER_MODEL, FALLBACK, FALLBACK], "{asked:?}");
    assert_eq!(gh_reviews_posted(env.outside.path()).len(), 1);
    env.assert_clean();
}

#[tokio::test]
async fn an_answer_that_cannot_be_read_posts_no_review() {
    let env = reviewer_env().await;
    let _daemon = env.start().await;
    env.model.respond(REVIEWER_REQUEST, |_| {
        Reply::text("Looks good to me, ship it!")
    });
    let (thread, _origin) = thread_with_pr(&env, "RVW-BAD", vec![]).await;
    let line = wait_post_with(&env, &thread, "🔎 Reviewer").await;
    assert!(
        line.starts_with("🔎 Reviewer: no review of `")
            && line.ends_with("the reviewer's answer could not be read, so nothing was posted"),
        "{line}"
    );
    let before = view_count(&env);
    polls_after(&env, before, 2).await;
    assert!(gh_reviews_posted(env.outside.path()).is_empty());
    assert_eq!(posts_with(&env, &thread, "🔎").len(), 1);
    env.assert_clean();
}
