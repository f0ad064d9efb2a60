//! The pull request's review loop end to end, through the real daemon, git, the sandboxed
//! Coder, the fake Slack, the fake model and the fake `gh`: review comments gathered during
//! the quiet period into one batch, sorted by the PM into one proposal, a follow-up run on
//! the changes asked with their file, line and text, and one reply per addressed comment on
//! GitHub; bots' and the controller's own comments starting nothing; a failing check
//! reported once with the end of its log; the round cap; a PM answer that cannot be read;
//! a restart and a reply whose answer was lost repeating nothing.

use std::time::{Duration, Instant};

use codebutler_test_support::gh::{
    FakePr, add_conversation_comment, add_line_comment, add_line_comment_reply, add_review, gh_log,
    gh_pr_comments, gh_replies, lose_next_answer, set_review_decision, set_run_log,
};
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{
    Env, WAIT, open_store, say_and_wait_post, say_and_wait_run, thread_with_pr, user_messages,
    write,
};

/// The review loop's settings for the tests: the watcher polls every second, a batch waits
/// for two quiet seconds, dependabot is a bot.
pub(crate) fn review_env_config(extra: Value) -> Value {
    let mut config = json!({
        "coder": {"maxTurns": 8, "timeout": 2},
        "github": {"prWatchIntervalSecs": 1, "reviewQuietSecs": 2, "ignoreBots": ["dependabot"]}
    });
    codebutler_test_support::merge(&mut config, extra);
    config
}

/// The thread's posts that contain `needle`.
pub(crate) fn posts_with(env: &Env, thread: &str, needle: &str) -> Vec<String> {
    env.post_texts(thread)
        .into_iter()
        .filter(|t| t.contains(needle))
        .collect()
}

/// Waits for a post in the thread containing `needle`; returns it.
pub(crate) async fn wait_post_with(env: &Env, thread: &str, needle: &str) -> String {
    env.wait_post(thread, |t| t.contains(needle)).await
}

/// How many review comments the store keeps for the thread.
pub(crate) async fn stored_comments(env: &Env) -> i64 {
    let pool = open_store(env).await;
    let n = sqlx::query_scalar("SELECT COUNT(*) FROM review_comments")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    n
}

/// Waits until the store keeps `n` review comments.
pub(crate) async fn wait_stored(env: &Env, n: i64) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if stored_comments(env).await == n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Answers the sorting call as a PM would: a comment asking to rename is a change, one
/// asking why a question, anything else discussion.
pub(crate) fn sort_like_a_pm(body: &Value) -> Reply {
    let users = user_messages(body);
    let list = users[0].split_once("\n\n").unwrap().1;
    let items: Vec<Value> = serde_json::from_str(list).unwrap();
    let sorted: Vec<Value> = items
        .iter()
        .map(|c| {
            let text = c["text"].as_str().unwrap();
            let kind = if text.contains("Rename") {
                "change"
            } else if text.contains("Why") {
                "question"
            } else {
                "discussion"
            };
            json!({"id": c["id"], "kind": kind, "summary": text.split('.').next().unwrap()})
        })
        .collect();
    Reply::text(json!({ "comments": sorted }).to_string())
}

/// The sorting prompt's first line, which only the sorting call's system message carries.
pub(crate) fn sorting_requests(env: &Env) -> usize {
    env.model
        .requests()
        .iter()
        .filter(|r| {
            r.body
                .to_string()
                .contains("You sort the comments people left")
        })
        .count()
}

#[tokio::test]
async fn three_comments_make_one_proposal_one_follow_up_and_replies_on_github() {
    let env = Env::with_runner(review_env_config(json!({}))).await;
    let gh = env.outside.path();
    let _daemon = env.start().await;
    let (thread, _origin) = thread_with_pr(
        &env,
        "REVIEW-MAIN",
        vec![
            write("notes.txt", "uno\ntwo\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Rename the first note"}"#),
            Reply::text("Renamed the first note; the loop keeps the notes in order."),
        ],
    )
    .await;
    env.model.respond("got these comments", sort_like_a_pm);

    // Two comments, then (while the watcher gathers them) a third: one batch.
    add_line_comment(gh, 101, "alice", "notes.txt", 1, "Rename `one` to `uno`.");
    add_conversation_comment(gh, "IC_2", "bob", "Why a loop here?");
    // Neither a bot's comment nor the controller's own count.
    add_line_comment(
        gh,
        104,
        "dependabot[bot]",
        "notes.txt",
        2,
        "Rename everything!",
    );
    add_conversation_comment(
        gh,
        "IC_own",
        "someone",
        "Noted.\n\n<!-- codebutler reply:line:1 -->",
    );
    assert!(
        wait_stored(&env, 2).await,
        "the watcher did not store the two comments"
    );
    assert!(
        posts_with(&env, &thread, "review comment").is_empty(),
        "proposed too early"
    );
    add_review(
        gh,
        "PRR_3",
        "carol",
        "COMMENTED",
        "Maybe split this later? Not sure yet.",
    );
    set_review_decision(gh, "CHANGES_REQUESTED");

    let proposal = wait_post_with(&env, &thread, "review comments").await;
    insta::assert_snapshot!("review_proposal_post", proposal);
    assert_eq!(sorting_requests(&env), 1);

    // Approved: one follow-up run whose task carries the change and the question.
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let requests = env.model.requests_for("REVIEW-MAIN");
    let follow_up = user_messages(&requests[4].body);
    let task = follow_up.last().unwrap();
    insta::assert_snapshot!("review_coder_task_received", task);
    assert!(
        task.contains("`notes.txt:1` — alice: Rename `one` to `uno`."),
        "{task}"
    );
    assert!(
        task.contains("the conversation — bob: Why a loop here?"),
        "{task}"
    );
    assert!(
        !task.contains("Maybe split"),
        "discussion is left alone: {task}"
    );
    assert!(
        !task.contains("Rename everything"),
        "a bot's comment: {task}"
    );

    // After the run pushed: one reply to the line comment, one answer on the conversation.
    let replied = env
        .slack
        .wait_until(WAIT, || {
            !gh_replies(gh).is_empty() && !gh_pr_comments(gh).is_empty()
        })
        .await;
    assert!(replied, "no replies; gh log: {:?}", gh_log(gh));
    let head = git2::Repository::open(env.repo_path())
        .unwrap()
        .find_reference("refs/heads/codebutler/work-on-review-main")
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string();
    assert_eq!(
        gh_replies(gh),
        [(
            101,
            format!(
                "Addressed in {} (changed `notes.txt`).\n\n<!-- codebutler reply:line:101 -->",
                &head[..7]
            )
        )]
    );
    assert_eq!(
        gh_pr_comments(gh),
        [format!(
            "The Coder's answer: Renamed the first note; the loop keeps the notes in order.\n\nThe branch is now at {} (changed `notes.txt`).\n\n<!-- codebutler reply:conversation:IC_2 -->",
            &head[..7]
        )]
    );

    // The replies are the controller's own comments: they start nothing, and nothing is
    // said or posted twice.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(posts_with(&env, &thread, "review comment").len(), 1);
    assert_eq!(sorting_requests(&env), 1);
    assert_eq!(gh_replies(gh).len(), 1);
    assert_eq!(gh_pr_comments(gh).len(), 1);
    assert_eq!(
        gh_log(gh).iter().filter(|l| *l == "api user").count(),
        1,
        "the login is read once"
    );
    env.assert_clean();
}

#[tokio::test]
async fn bots_and_the_controllers_own_comments_start_nothing() {
    let env = Env::with_runner(review_env_config(json!({}))).await;
    let gh = env.outside.path();
    let _daemon = env.start().await;
    let (thread, _origin) = thread_with_pr(&env, "REVIEW-BOTS", vec![]).await;
    let posts = env.post_texts(&thread).len();
    add_line_comment(
        gh,
        201,
        "dependabot[bot]",
        "notes.txt",
        1,
        "Bump the notes.",
    );
    add_conversation_comment(gh, "IC_bot", "Dependabot", "Rebased.");
    // Written as the login gh acts as, and one carrying the controller's marker.
    add_conversation_comment(gh, "IC_self", "codebutler-bot", "Addressed in abc1234.");
    add_review(
        gh,
        "PRR_marked",
        "a-human",
        "COMMENTED",
        "Addressed.\n\n<!-- codebutler reply:review:x -->",
    );
    let polled = env
        .slack
        .wait_until(WAIT, || {
            gh_log(gh)
                .iter()
                .filter(|l| l.starts_with("api --paginate repos/{owner}/{repo}/pulls/7/comments"))
                .count()
                >= 5
        })
        .await;
    assert!(polled, "the watcher did not poll: {:?}", gh_log(gh));
    assert_eq!(stored_comments(&env).await, 0);
    assert_eq!(sorting_requests(&env), 0);
    assert_eq!(
        env.post_texts(&thread).len(),
        posts,
        "{:?}",
        env.post_texts(&thread)
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_failing_check_is_reported_once_with_its_log_and_the_cap_holds() {
    let env = Env::with_runner(review_env_config(json!({"github": {"maxReviewRounds": 1}}))).await;
    let gh = env.outside.path();
    let _daemon = env.start().await;
    let (thread, _origin) = thread_with_pr(&env, "REVIEW-CHECKS", vec![]).await;
    let log: String = (1..=60)
        .map(|i| format!("test\tRun cargo test\tfailure line {i}\n"))
        .collect();
    set_run_log(gh, 4242, &log);
    FakePr {
        checks: "failing",
        ..FakePr::default()
    }
    .set(gh);
    let report = wait_post_with(&env, &thread, "failed on").await;
    assert!(report.contains("the check `test` failed on"), "{report}");
    assert!(
        !report.contains("`build`"),
        "only the failed check: {report}"
    );
    wait_post_with(&env, &thread, "Reply *yes* to let the Coder fix it").await;
    // The log's last 40 lines, uploaded as a snippet in the thread.
    let snippets: Vec<String> = env
        .slack
        .uploads()
        .into_iter()
        .filter(|u| u.thread_ts.as_deref() == Some(thread.as_str()))
        .map(|u| u.content)
        .collect();
    let expected: Vec<String> = (21..=60)
        .map(|i| format!("test\tRun cargo test\tfailure line {i}"))
        .collect();
    assert_eq!(snippets.len(), 1, "{snippets:?}");
    assert_eq!(snippets[0].trim_end().lines().collect::<Vec<_>>(), expected);

    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        posts_with(&env, &thread, "failed on").len(),
        1,
        "once per check and commit"
    );
    let declined = say_and_wait_post(&env, &thread, "no", "*PM:* OK, I'll leave them").await;
    assert!(declined.starts_with("*PM:* OK, I'll leave them."));

    // The cap (1 round) is reached: new comments start no round, and the thread is told once.
    add_line_comment(gh, 301, "alice", "notes.txt", 1, "Rename `one` to `uno`.");
    let capped = wait_post_with(&env, &thread, "automatic review rounds").await;
    insta::assert_snapshot!("review_capped_post", capped);
    add_conversation_comment(gh, "IC_later", "bob", "Why a loop here?");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        posts_with(&env, &thread, "automatic review rounds").len(),
        1
    );
    assert_eq!(sorting_requests(&env), 0, "no round after the cap");
    assert!(posts_with(&env, &thread, "review comment").is_empty());
    env.assert_clean();
}

#[tokio::test]
async fn a_sorting_answer_that_cannot_be_read_proposes_nothing() {
    let env = Env::with_runner(review_env_config(json!({}))).await;
    let gh = env.outside.path();
    let _daemon = env.start().await;
    let (thread, _origin) = thread_with_pr(&env, "REVIEW-GARBLED", vec![]).await;
    env.model.script(
        "got these comments",
        vec![Reply::text("They all look like changes to me!")],
    );
    add_line_comment(gh, 401, "alice", "notes.txt", 1, "Rename `one` to `uno`.");
    add_conversation_comment(gh, "IC_4", "bob", "Why a loop here?");
    let said = wait_post_with(&env, &thread, "couldn't sort them").await;
    insta::assert_snapshot!("review_unsorted_post", said);
    assert!(!said.contains("Reply"), "{said}");

    // A yes now starts no Coder: nothing was proposed.
    let coder_calls = env.model.requests_for("REVIEW-GARBLED").len();
    let answer = say_and_wait_post(&env, &thread, "yes", "*Coder:*").await;
    assert!(answer.contains("carried out already"), "{answer}");
    assert_eq!(env.model.requests_for("REVIEW-GARBLED").len(), coder_calls);
    env.assert_clean();
}

#[tokio::test]
async fn a_restart_or_a_lost_answer_repeats_nothing() {
    let env = Env::with_runner(review_env_config(json!({}))).await;
    let gh = env.outside.path();
    let mut daemon = env.start().await;
    let (thread, _origin) = thread_with_pr(
        &env,
        "REVIEW-ONCE",
        vec![
            write("notes.txt", "uno\ntwo\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Rename the first note"}"#),
            Reply::text("Renamed."),
        ],
    )
    .await;
    env.model.respond("got these comments", sort_like_a_pm);
    // The change is asked in a reply to another comment: GitHub takes replies to the top
    // comment of a thread only.
    add_line_comment(gh, 500, "bob", "notes.txt", 1, "Looks fine to me.");
    add_line_comment_reply(gh, 501, 500, "alice", "Rename `one` to `uno`.");
    wait_post_with(&env, &thread, "review comment").await;

    // Killed after the proposal and started again: nothing is proposed twice.
    daemon.kill9().await;
    let _daemon = env.start().await;
    // GitHub takes the reply, but its answer never reaches the controller.
    lose_next_answer(gh);
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let posted = async {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let pool = open_store(&env).await;
            let reply: Option<String> = sqlx::query_scalar(
                "SELECT reply FROM review_comments WHERE comment_key = 'line:501'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            pool.close().await;
            if reply.as_deref() == Some("posted") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    };
    assert!(
        posted.await,
        "the reply was never recorded; gh log: {:?}",
        gh_log(gh)
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let replies = gh_replies(gh);
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].0, 500, "to the thread's top comment");
    assert!(
        replies[0].1.ends_with("<!-- codebutler reply:line:501 -->"),
        "{replies:?}"
    );
    assert_eq!(posts_with(&env, &thread, "review comment").len(), 1);
    assert_eq!(sorting_requests(&env), 1);
    env.assert_clean();
}
