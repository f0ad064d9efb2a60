//! "merge" respects a reviewer, end to end through the real daemon, git, the sandboxed Coder,
//! the fake Slack and the fake `gh`: a reviewer whose latest review requests changes, or a
//! review thread nobody resolved, makes "merge" refuse, name them and merge nothing on
//! origin; an approval or a resolved thread lets it go; "merge anyway" merges over them and
//! the thread's journal on origin says so; `github.mergeChecks` off merges over them.

use std::path::Path;

use codebutler_test_support::gh::{
    add_line_comment, gh_merges, resolve_review_thread, submit_review,
};
use codebutler_test_support::git;
use serde_json::json;

use crate::harness::{Env, say_and_wait_post, stored_state, thread_with_pr};

/// Origin's default branch's commit.
fn origin_base(origin: &Path) -> String {
    git::git(origin, &["rev-parse", "HEAD"])
}

/// An env whose Coder opens pull requests, with `github` as its GitHub settings.
async fn env_with(github: serde_json::Value) -> Env {
    Env::with_runner(json!({"coder": {"maxTurns": 6, "timeout": 2}, "github": github})).await
}

#[tokio::test]
async fn merge_waits_for_a_reviewer_who_asked_for_changes_until_they_approve() {
    let env = env_with(json!({})).await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "REVIEW-CHANGES", vec![]).await;
    let gh = env.outside.path();
    submit_review(gh, "alice", "APPROVED", "");
    submit_review(
        gh,
        "carol",
        "CHANGES_REQUESTED",
        "Please split the notes\ninto two files <!channel>.",
    );
    let base = origin_base(&origin);

    let refused = say_and_wait_post(&env, &thread, "merge", "*PM:* I can't merge").await;
    assert!(
        refused.starts_with("*PM:* I can't merge PR #7 yet: its reviewers asked for more."),
        "{refused}"
    );
    assert!(
        refused.contains(
            "*carol* requested changes: “Please split the notes into two files &lt;!channel&gt;.”"
        ),
        "{refused}"
    );
    assert!(!refused.contains("alice"), "{refused}");
    assert!(refused.contains("say *merge anyway*"), "{refused}");
    assert!(gh_merges(gh).is_empty());
    assert_eq!(origin_base(&origin), base, "nothing merged on origin");
    assert_eq!(stored_state(&env, &thread).await, "pr_opened");

    // The reviewer approves: their latest review wins, and "merge" goes through.
    submit_review(gh, "carol", "APPROVED", "Fine as it is.");
    say_and_wait_post(&env, &thread, "merge", "*PM:* PR #7 merged").await;
    assert_eq!(gh_merges(gh), ["squash"]);
    assert_ne!(origin_base(&origin), base);
    assert_eq!(git::git(&origin, &["show", "HEAD:notes.txt"]), "one\ntwo");
    assert_eq!(stored_state(&env, &thread).await, "closed_merged");
    env.assert_clean();
}

#[tokio::test]
async fn merge_waits_for_an_unresolved_review_thread_until_it_is_resolved() {
    let env = env_with(json!({})).await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "REVIEW-THREAD", vec![]).await;
    let gh = env.outside.path();
    add_line_comment(gh, 801, "bob", "notes.txt", 1, "Why two lines?");
    let base = origin_base(&origin);

    let refused = say_and_wait_post(&env, &thread, "merge", "*PM:* I can't merge").await;
    assert!(
        refused.contains("an unresolved review thread by *bob* on `notes.txt`: “Why two lines?”"),
        "{refused}"
    );
    assert!(gh_merges(gh).is_empty());
    assert_eq!(origin_base(&origin), base, "nothing merged on origin");

    resolve_review_thread(gh, 801, true);
    say_and_wait_post(&env, &thread, "ship it", "*PM:* PR #7 merged").await;
    assert_eq!(gh_merges(gh), ["squash"]);
    assert_ne!(origin_base(&origin), base);
    assert_eq!(stored_state(&env, &thread).await, "closed_merged");
    env.assert_clean();
}

#[tokio::test]
async fn merge_anyway_merges_over_the_reviewers_and_the_journal_records_it() {
    let env = env_with(json!({})).await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "REVIEW-ANYWAY", vec![]).await;
    let gh = env.outside.path();
    submit_review(gh, "carol", "CHANGES_REQUESTED", "Not before the release.");
    add_line_comment(gh, 802, "bob", "notes.txt", 2, "Typo here.");
    let base = origin_base(&origin);
    say_and_wait_post(&env, &thread, "merge", "*PM:* I can't merge").await;
    assert!(gh_merges(gh).is_empty());

    let last = say_and_wait_post(&env, &thread, "merge anyway", "*PM:* PR #7 merged").await;
    assert!(
        last.starts_with(&format!(
            "*PM:* PR #7 merged. Thread closed.\n\n<@{}> said *merge anyway* over:",
            crate::harness::USER
        )),
        "{last}"
    );
    assert!(
        last.contains("*carol* requested changes: “Not before the release.”"),
        "{last}"
    );
    assert!(
        last.contains("*bob* on `notes.txt`: “Typo here.”"),
        "{last}"
    );
    assert_eq!(gh_merges(gh), ["squash"]);
    assert_ne!(origin_base(&origin), base);
    // The journal that landed on origin's default branch with the merge records the override.
    let journal = git::git(
        &origin,
        &[
            "show",
            &format!("HEAD:.codebutler/journals/thread-{thread}.md"),
        ],
    );
    assert!(
        journal.contains(&format!(
            "## Merged anyway\n\n<@{}> said **merge anyway** over:\n\n- **carol** requested changes: “Not before the release\\.”\n- an unresolved review thread by **bob** on `notes.txt`: “Typo here\\.”",
            crate::harness::USER
        )),
        "{journal}"
    );
    assert_eq!(stored_state(&env, &thread).await, "closed_merged");
    env.assert_clean();
}

#[tokio::test]
async fn with_the_merge_checks_off_merge_goes_over_the_reviewers() {
    let env = env_with(json!({
        "mergeChecks": {"changesRequested": false, "unresolvedThreads": false}
    }))
    .await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "REVIEW-OFF", vec![]).await;
    let gh = env.outside.path();
    submit_review(gh, "carol", "CHANGES_REQUESTED", "Not before the release.");
    add_line_comment(gh, 803, "bob", "notes.txt", 2, "Typo here.");
    let base = origin_base(&origin);

    let last = say_and_wait_post(&env, &thread, "merge", "*PM:* PR #7 merged").await;
    assert_eq!(last, "*PM:* PR #7 merged. Thread closed.");
    assert_eq!(gh_merges(gh), ["squash"]);
    assert_ne!(origin_base(&origin), base);
    env.assert_clean();
}
