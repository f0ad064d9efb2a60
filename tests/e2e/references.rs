//! Cross-thread references: a message that links another thread of the channel, a pull
//! request or an issue gives the PM their text as read-only background, and the thread one
//! line saying what was read, what was not and why. Slack threads are read through the fake
//! Slack's `conversations.replies`, pull requests and issues through the fake `gh`.

use std::time::Duration;

use codebutler_test_support::gh_items::{FakeItem, set_repository};
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;

use crate::harness::{Env, USER, WAIT, assert_each_effect_posted_once, user_messages};

/// The first line of the PM's context block (a script matcher for conversations that
/// start with one).
const HEADER: &str = "CONTEXT FROM RELATED THREADS AND PULL REQUESTS (read-only, for reference)";

/// The web link of a message of the fake workspace.
fn link(channel: &str, ts: &str) -> String {
    format!(
        "https://fake.slack.com/archives/{channel}/p{}",
        ts.replace('.', "")
    )
}

/// `text` with what changes from run to run (the linked thread's ts and the quote fence's
/// digest) replaced by fixed placeholders.
fn steady(text: &str, thread_ts: &str) -> String {
    let mut out = text
        .replace(&thread_ts.replace('.', ""), "<THREAD_TS>")
        .replace(thread_ts, "<THREAD_TS>");
    let mut from = 0;
    while let Some(at) = out[from..].find("quoted-").map(|at| from + at + 7) {
        if out
            .get(at..at + 12)
            .is_some_and(|tag| tag.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            out.replace_range(at..at + 12, "<TAG>");
        }
        from = at;
    }
    out
}

/// What the fake `gh` was asked, in order (its `--version` and the start's `auth status`
/// checks left out).
fn gh_lines(env: &Env) -> Vec<String> {
    codebutler_test_support::gh_log(env.outside.path())
        .into_iter()
        .filter(|l| l != "--version" && l != "auth status")
        .collect()
}

fn pr_42() -> FakeItem {
    FakeItem::pull_request(
        42,
        "Fix login",
        "Cookies now last 30 days when remember-me is ticked.",
        &[("src/auth/session.rs", 3, 1)],
        "diff --git a/src/auth/session.rs b/src/auth/session.rs\n--- a/src/auth/session.rs\n+++ b/src/auth/session.rs\n@@ -4 +4,3 @@\n-pub const SESSION_EXPIRY_SECS: u64 = 3600;\n+pub const SESSION_EXPIRY_SECS: u64 = 3600;\n+/// Remember-me sessions.\n+pub const REMEMBER_ME_SECS: u64 = 30 * 24 * 3600;\n",
    )
}

#[tokio::test]
async fn a_linked_thread_and_pr_reach_the_pm_with_one_line() {
    let env = Env::new().await;
    pr_42().install(env.outside.path());
    let earlier = "where is the session expiry set?";
    env.model.script(
        earlier,
        vec![Reply::text(
            "It is `SESSION_EXPIRY_SECS` in src/auth/session.rs: 3600 s.",
        )],
    );
    env.model.script(
        HEADER,
        vec![
            Reply::text("PR #42 added `REMEMBER_ME_SECS`; I'll plan the fix."),
            Reply::text("Yes, a test too."),
        ],
    );
    let _daemon = env.start().await;
    let thread_a = env.say(earlier);
    env.wait_thread_posts(&thread_a, 1).await;

    let text = format!(
        "The remember-me fix from PR #42 broke sessions, see <{}|the expiry thread>. Fix it.",
        link(CHANNEL, &thread_a)
    );
    let thread_b = env.say(&text);
    let posts = env.wait_thread_posts(&thread_b, 2).await;

    // One line, before the PM's answer, saying what was read.
    insta::assert_snapshot!("references_line", steady(&posts[0].text, &thread_a));
    assert_eq!(
        posts[1].text,
        "*PM:* PR #42 added `REMEMBER_ME_SECS`; I'll plan the fix."
    );

    // The PM read both, as a context block before the person's message.
    let requests = env.model.requests_for(HEADER);
    assert_eq!(requests.len(), 1);
    let users = user_messages(&requests[0].body);
    assert_eq!(users.len(), 2, "{users:#?}");
    assert_eq!(users[1], format!("<@{USER}>: {text}"));
    let context = &users[0];
    for part in [
        earlier,
        "It is `SESSION_EXPIRY_SECS`",
        "Fix login",
        "Cookies now last 30 days",
        "+pub const REMEMBER_ME_SECS",
    ] {
        assert!(context.contains(part), "{part:?} missing from {context}");
    }
    insta::assert_snapshot!("references_context_block", steady(context, &thread_a));

    // Read once, read-only: one `conversations.replies` of thread A, and only reads of `gh`.
    let replies = env.slack.calls_of("conversations.replies");
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].params["ts"], thread_a.as_str());
    assert_eq!(replies[0].params["channel"], CHANNEL);
    assert_eq!(
        gh_lines(&env),
        [
            "pr view 42 --json number,title,body,state,author,url,files,mergedAt,baseRefName,headRefName",
            "pr diff 42",
        ]
    );
    assert!(env.post_texts(&thread_a).len() == 1, "thread A unchanged");

    // The next message in the thread reads nothing again; the PM still has the context.
    env.slack
        .user_message(CHANNEL, USER, "Add a test as well?", Some(&thread_b));
    let posts = env.wait_thread_posts(&thread_b, 3).await;
    assert_eq!(posts[2].text, "*PM:* Yes, a test too.");
    let requests = env.model.requests_for(HEADER);
    assert_eq!(requests.len(), 2);
    assert!(user_messages(&requests[1].body)[0].starts_with(HEADER));
    assert_eq!(env.slack.calls_of("conversations.replies").len(), 1);
    assert_eq!(gh_lines(&env).len(), 2);
    assert_each_effect_posted_once(&env);
    env.assert_clean();
}

#[tokio::test]
async fn links_to_other_channels_and_repositories_are_not_read_and_the_line_says_so() {
    let env = Env::new().await;
    FakeItem::issue(
        7,
        "Sessions expire too early",
        "Users are logged out after an hour.",
        &[("carol", "Seen on mobile too.")],
    )
    .install(env.outside.path());
    env.model.script(
        HEADER,
        vec![Reply::text("Issue #7 is about early logouts.")],
    );
    let _daemon = env.start().await;
    let elsewhere = link("C0OTHER", "1732456789.123456");
    let text = format!(
        "Like <{elsewhere}> and https://github.com/other/repo/pull/3, fix https://github.com/acme/app/issues/7"
    );
    let thread = env.say(&text);
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(
        posts[0].text,
        format!(
            "📎 Read issue #7 for context. Not read: <{elsewhere}|a thread in another channel> (I only read threads of this repository's channel); `other/repo#3` (another repository's; I only read `acme/app`'s)."
        )
    );
    assert_eq!(posts[1].text, "*PM:* Issue #7 is about early logouts.");
    let context = &user_messages(&env.model.requests_for(HEADER)[0].body)[0];
    assert!(context.contains("Seen on mobile too."), "{context}");
    assert!(!context.contains("other/repo"), "{context}");
    // Nothing was asked of the other channel or the other repository.
    assert!(env.slack.calls_of("conversations.replies").is_empty());
    assert_eq!(
        gh_lines(&env),
        [
            "repo view --json nameWithOwner",
            "issue view 7 --json number,title,body,state,author,url,comments",
        ]
    );

    // A link to this very thread is ignored: no line, no read.
    env.slack.user_message(
        CHANNEL,
        USER,
        &format!("as said in <{}>, go ahead", link(CHANNEL, &thread)),
        Some(&thread),
    );
    env.model.script(HEADER, vec![Reply::text("Going ahead.")]);
    let posts = env.wait_thread_posts(&thread, 3).await;
    assert_eq!(posts[2].text, "*PM:* Going ahead.");
    assert!(env.slack.calls_of("conversations.replies").is_empty());

    // Which repository this is comes from `gh`: named otherwise, acme/app's address is not read.
    set_repository(env.outside.path(), "acme/fork");
    let other = env.say("see https://github.com/acme/app/issues/7");
    env.model.script(
        "see https://github.com/acme/app/issues/7",
        vec![Reply::text("OK.")],
    );
    let posts = env.wait_thread_posts(&other, 2).await;
    assert_eq!(
        posts[0].text,
        "📎 Not read: `acme/app#7` (another repository's; I only read `acme/fork`'s)."
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_failing_read_is_reported_and_the_pm_still_answers() {
    let env = Env::new().await;
    FakeItem::failing_pull_request(5, "HTTP 502: Server Error (https://api.github.com/graphql)")
        .install(env.outside.path());
    let missing = link(CHANNEL, "1000000000.000100");
    let text = format!("why did #5 fail? see <{missing}>, and #99");
    env.model.script(
        "why did #5 fail?",
        vec![Reply::text(
            "I could not read them; can you paste the error?",
        )],
    );
    let _daemon = env.start().await;
    let thread = env.say(&text);
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(
        posts[0].text,
        format!(
            "📎 Could not read #5 (`gh` failed; the log says why); <{missing}|thread> (Slack has no such thread); #99 (not found)."
        )
    );
    assert_eq!(
        posts[1].text,
        "*PM:* I could not read them; can you paste the error?"
    );
    // Nothing was read, so the PM's request holds the person's message alone.
    let requests = env.model.requests_for("why did #5 fail?");
    assert_eq!(
        user_messages(&requests[0].body),
        [format!("<@{USER}>: {text}")]
    );
    // `#99` is no pull request, so the issue was tried too; `#5` failed for another reason,
    // so no issue 5 was asked for. The reads run side by side: compare them sorted.
    let mut asked = gh_lines(&env);
    asked.sort();
    assert_eq!(
        asked,
        [
            "issue view 99 --json number,title,body,state,author,url,comments",
            "pr view 5 --json number,title,body,state,author,url,files,mergedAt,baseRefName,headRefName",
            "pr view 99 --json number,title,body,state,author,url,files,mergedAt,baseRefName,headRefName",
        ]
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_restart_neither_reads_again_nor_repeats_the_line() {
    let env = Env::new().await;
    pr_42().install(env.outside.path());
    env.model.script(
        HEADER,
        vec![
            // The daemon is killed while this answer is on its way.
            Reply::delayed(Duration::from_secs(60), Reply::text("too late")),
            Reply::text("PR #42 changed the session constants."),
        ],
    );
    let mut daemon = env.start().await;
    let thread = env.say("what did #42 change?");
    env.wait_thread_posts(&thread, 1).await;
    let waited = env
        .slack
        .wait_until(WAIT, || !env.model.requests_for(HEADER).is_empty())
        .await;
    assert!(waited, "the PM was not asked");
    daemon.kill9().await;

    let _daemon = env.start().await;
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(posts[1].text, "*PM:* PR #42 changed the session constants.");
    assert!(
        posts[0].text.starts_with("📎 Read PR #42 for context."),
        "{posts:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        env.thread_posts(&thread).len(),
        2,
        "{:?}",
        env.post_texts(&thread)
    );
    // Read once: the restarted daemon used what the first one recorded.
    assert_eq!(
        gh_lines(&env)
            .iter()
            .filter(|l| l.starts_with("pr view 42"))
            .count(),
        1
    );
    let requests = env.model.requests_for(HEADER);
    assert_eq!(requests.len(), 2);
    assert_eq!(
        user_messages(&requests[1].body).len(),
        2,
        "the context block once, then the question"
    );
    assert_each_effect_posted_once(&env);
}

#[tokio::test]
async fn an_approved_plan_carries_the_background_to_the_coder() {
    let env = crate::harness::runner_env(serde_json::json!({"maxTurns": 4, "timeout": 2})).await;
    pr_42().install(env.outside.path());
    let plan = serde_json::json!({
        "summary": "Fix REMEMBER-ME-SESSIONS",
        "steps": ["Use `REMEMBER_ME_SECS` from PR #42 in src/auth/session.rs"],
        "files": ["src/auth/session.rs"]
    });
    env.model.script(
        HEADER,
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Here is my plan."),
        ],
    );
    // Longer than HEADER, which the Coder's task holds too: the longest matcher wins.
    let task_start = "📋 **Plan:** Fix REMEMBER-ME-SESSIONS\n\n1. Use `REMEMBER_ME_SECS` from PR #42 in src/auth/session.rs";
    env.model.script(
        task_start,
        vec![Reply::text("Nothing to change after all.")],
    );
    let _daemon = env.start().await;
    let thread = env.say("Remember-me broke after #42, fix it");
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.contains("Fix REMEMBER-ME-SESSIONS"))
        })
        .await;
    assert!(ok, "no plan: {:?}", env.post_texts(&thread));
    let ending = crate::harness::say_and_wait_run(&env, &thread, "yes").await;
    assert_eq!(ending, "white_check_mark", "{:?}", env.post_texts(&thread));

    // The Coder's task is the plan, then the background the PM planned with.
    let coder = env.model.requests_for(task_start);
    let task = &user_messages(&coder[0].body)[0];
    let background = task
        .split_once("## Background the PM read for this plan")
        .map(|(_, b)| b)
        .unwrap_or_else(|| panic!("no background in the Coder's task: {task}"));
    assert!(task.starts_with("Implement this approved plan:"), "{task}");
    assert!(background.contains(HEADER), "{background}");
    assert!(
        background.contains("Cookies now last 30 days"),
        "{background}"
    );
    assert!(
        background.contains("+pub const REMEMBER_ME_SECS"),
        "{background}"
    );
    env.assert_clean();
}
