//! The thread's lifecycle end to end: plan → approve → the Coder opens a pull request → the
//! thread is `pr_opened` with the PR's number and address in the store, in `runnerctl` and in
//! the PM's ListThreads (each status filter); a follow-up run keeps it so; in a closed thread
//! a statement gets one short reply, and a question reaches the PM read-only (no
//! ProposePlan offered, none taken), its answer ending with the closed note.

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::{Value, json};

use crate::harness::{
    Env, content_text, open_store, runner_env, runnerctl, say_and_wait_post, say_and_wait_run,
    stdout, thread_with_plan, tool_results, write,
};

const CLOSED: &str = "This thread is closed. For new work, start a new thread in the channel.";

const PR_URL: &str = "https://github.com/acme/app/pull/7";

/// The thread's stored `state`, `pr_number` and `pr_url`.
async fn stored(env: &crate::harness::Env, thread: &str) -> (String, Option<i64>, Option<String>) {
    let pool = open_store(env).await;
    let row = sqlx::query_as("SELECT state, pr_number, pr_url FROM threads WHERE thread_ts = ?")
        .bind(thread)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    row
}

#[tokio::test]
async fn an_opened_pull_request_makes_the_thread_pr_opened_everywhere_it_is_shown() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    env.model.script(
        "LIFECYCLE-TOKEN",
        vec![
            write("notes.txt", "one\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add the notes"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Add notes", "body": "Adds notes."}"#),
            Reply::text("The PR is open."),
            write("more.txt", "two\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add more notes"}"#),
            Reply::text("Pushed more."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "start the notes", "LIFECYCLE-TOKEN").await;
    assert_eq!(
        stored(&env, &thread).await,
        ("plan_pending".to_owned(), None, None)
    );

    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let pr_opened = ("pr_opened".to_owned(), Some(7), Some(PR_URL.to_owned()));
    assert_eq!(stored(&env, &thread).await, pr_opened);

    // runnerctl, JSON and text.
    let show: Value = serde_json::from_str(&stdout(
        &runnerctl(&env, &["show", &thread, "--json"]).await,
    ))
    .unwrap();
    assert_eq!(show["summary"]["threadState"], "pr_opened", "{show}");
    assert_eq!(
        show["pullRequest"],
        json!({"number": 7, "url": PR_URL}),
        "{show}"
    );
    let text = stdout(&runnerctl(&env, &["show", &thread]).await);
    assert!(
        text.contains(&format!("thread:   {thread} (pr_opened)\n")),
        "{text}"
    );
    assert!(text.contains(&format!("pr:       #7 {PR_URL}\n")), "{text}");
    let ls: Value =
        serde_json::from_str(&stdout(&runnerctl(&env, &["ls", "--json"]).await)).unwrap();
    assert_eq!(ls[0]["threadState"], "pr_opened", "{ls}");
    let ls = stdout(&runnerctl(&env, &["ls"]).await);
    assert!(
        ls.contains("THREAD STATE") && ls.contains("pr_opened"),
        "{ls}"
    );

    // ListThreads, from another thread: pending_review lists only the PR's thread, all lists
    // the asking thread too (not handled yet, so created).
    let ask = "which threads wait for review?";
    env.model.script(
        ask,
        vec![
            Reply::tool_call("ListThreads", r#"{"status": "pending_review"}"#),
            Reply::tool_call("ListThreads", r#"{"status": "all"}"#),
            Reply::text("One waits for review."),
        ],
    );
    let other = env.say(ask);
    env.wait_thread_posts(&other, 1).await;
    let requests = env.model.requests_for(ask);
    let review = tool_results(&requests[1].body);
    assert_eq!(
        review,
        format!(
            "Thread {thread} [state: pr_opened]\n  Pull request: #7 {PR_URL}\n  Plan: Work on LIFECYCLE-TOKEN\n  Files: \n"
        )
    );
    let all = tool_results(&requests[2].body);
    assert!(
        all.contains(&format!("Thread {other} [state: created]")),
        "{all}"
    );
    assert!(
        all.contains(&format!("Thread {thread} [state: pr_opened]")),
        "{all}"
    );

    // A follow-up run keeps the thread pr_opened, with its pull request.
    assert_eq!(
        say_and_wait_run(&env, &thread, "add more notes").await,
        "white_check_mark"
    );
    assert_eq!(stored(&env, &thread).await, pr_opened);

    // Once closed (closing from Slack comes later; set it as it will be stored), a message
    // gets one short reply and reaches no model.
    let pool = open_store(&env).await;
    sqlx::query("UPDATE threads SET state = 'closed_merged' WHERE thread_ts = ?")
        .bind(&thread)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let calls = env.model.requests().len();
    let reply = say_and_wait_post(&env, &thread, "and rename it", "*PM:*").await;
    assert_eq!(
        reply,
        "*PM:* This thread is closed. For new work, start a new thread in the channel."
    );
    assert_eq!(env.model.requests().len(), calls);
    env.assert_clean();
}

/// The tools a recorded request offered the model, by name.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_question_in_a_closed_thread_reaches_the_pm_read_only() {
    let env = Env::new().await;
    let _daemon = env.start().await;
    let ask = "what does the Makefile deploy?";
    env.model
        .script(ask, vec![Reply::text("It applies `k8s/`.")]);
    let thread = env.say(ask);
    env.wait_thread_posts(&thread, 1).await;
    let open_tools = offered(&env.model.requests_for(ask)[0].body);
    assert!(
        open_tools.contains(&"ProposePlan".to_owned()),
        "{open_tools:?}"
    );
    let pool = open_store(&env).await;
    sqlx::query("UPDATE threads SET state = 'closed_abandoned' WHERE thread_ts = ?")
        .bind(&thread)
        .execute(&pool)
        .await
        .unwrap();

    // A statement: the short reply, no model call.
    let calls = env.model.requests().len();
    let reply = say_and_wait_post(&env, &thread, "thanks, now rename it", "*PM:*").await;
    assert_eq!(reply, format!("*PM:* {CLOSED}"));
    assert_eq!(env.model.requests().len(), calls);

    // A question: the PM, read-only. A model that tries to plan anyway is refused.
    let plan = json!({"summary": "Rename it", "steps": ["Rename"], "files": ["Makefile"]});
    env.model.script(
        ask,
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::tool_call("ReadFile", r#"{"path": "Makefile"}"#),
            Reply::text("It runs `kubectl apply -f k8s/`."),
        ],
    );
    let answer = say_and_wait_post(&env, &thread, "why kubectl there?", "*PM:*").await;
    assert_eq!(
        answer,
        format!("*PM:* It runs `kubectl apply -f k8s/`.\n\n{CLOSED}")
    );
    let requests = env.model.requests_for(ask);
    assert_eq!(
        requests.len(),
        4,
        "one for the first question, three for this one"
    );
    let read_only = [
        "ReadFile",
        "Grep",
        "ListFiles",
        "GitLog",
        "GitDiff",
        "ReadMemory",
        "ListThreads",
        "GHStatus",
    ];
    for request in &requests[1..] {
        assert_eq!(offered(&request.body), read_only);
        let system = content_text(&request.body["messages"][0]["content"]);
        assert!(
            system.contains("# This thread is closed\n\nIts work was merged or abandoned"),
            "{system}"
        );
    }
    let refused = tool_results(&requests[2].body);
    assert_eq!(
        refused,
        format!(
            "error: unknown tool \"ProposePlan\"; available tools: {}",
            read_only.join(", ")
        )
    );
    assert!(tool_results(&requests[3].body).contains("kubectl apply -f k8s/"));
    // Nothing changed: still closed, no plan, no buttons.
    let (state, plan): (String, Option<String>) =
        sqlx::query_as("SELECT state, plan FROM threads WHERE thread_ts = ?")
            .bind(&thread)
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    assert_eq!((state.as_str(), plan), ("closed_abandoned", None));
    for post in env.thread_posts(&thread) {
        assert!(env.slack.buttons(CHANNEL, &post.ts).is_empty(), "{post:?}");
    }
    env.assert_clean();
}
