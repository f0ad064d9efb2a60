//! After a run: a new message in the thread goes on from the stored conversation in the same
//! worktree; "undo" restores the checkpoint taken before the last run; a runner killed in
//! the middle, or a controller restarted under it, is reported, and "continue" resumes it.

use std::path::Path;

use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    Env, WAIT, runner_bin, runner_env, runnerctl, say_and_wait_post, say_and_wait_run, stdout,
    thread_with_plan, user_messages, wait_output, worktree_of, write,
};

fn assistant_texts(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn follow_ups_resume_the_conversation_and_undo_walks_back_run_by_run() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    env.model.script(
        "FOLLOW-TOKEN",
        vec![
            write("first.txt", "one\n"),
            Reply::text("Wrote first.txt."),
            write("second.txt", "two\n"),
            Reply::text("Wrote second.txt."),
            Reply::text("Starting over as asked."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please start the notes", "FOLLOW-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "go").await,
        "white_check_mark"
    );
    let tree = worktree_of(&env, "work-on-follow-token");
    let read = |name: &str| std::fs::read_to_string(tree.join(name)).ok();
    assert_eq!(read("first.txt").as_deref(), Some("one\n"));

    // A follow-up after the run: a new run in the same worktree, with the conversation.
    assert_eq!(
        say_and_wait_run(&env, &thread, "now add second.txt").await,
        "white_check_mark"
    );
    assert_eq!(read("second.txt").as_deref(), Some("two\n"));
    assert_eq!(read("first.txt").as_deref(), Some("one\n"));
    let requests = env.model.requests_for("FOLLOW-TOKEN");
    assert_eq!(requests.len(), 4);
    let resumed = &requests[2].body;
    let users = user_messages(resumed);
    assert!(users[0].contains("Work on FOLLOW-TOKEN"), "{users:?}");
    assert_eq!(users.last().unwrap(), "<@U0ALICE>: now add second.txt");
    assert_eq!(assistant_texts(resumed), ["Wrote first.txt."]);
    let runs: serde_json::Value =
        serde_json::from_str(&stdout(&runnerctl(&env, &["ls", "--json"]).await)).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    assert!(
        env.model.violations().is_empty(),
        "{:?}",
        env.model.violations()
    );

    // "yes" after the run starts nothing.
    let reply = say_and_wait_post(&env, &thread, "yes", "*Coder:*").await;
    assert!(reply.contains("carried out already"), "{reply}");
    assert_eq!(env.model.requests_for("FOLLOW-TOKEN").len(), 4);

    // "undo" drops the last run's work, then the one before.
    let reply = say_and_wait_post(&env, &thread, "undo", "*Coder:*").await;
    assert!(reply.starts_with("*Coder:* Undone"), "{reply}");
    assert_eq!(read("second.txt"), None);
    assert_eq!(read("first.txt").as_deref(), Some("one\n"));
    let reply = say_and_wait_post(&env, &thread, "Undo!", "*Coder:*").await;
    assert!(reply.starts_with("*Coder:* Undone"), "{reply}");
    assert_eq!(read("first.txt"), None);
    let reply = say_and_wait_post(&env, &thread, "undo", "*Coder:*").await;
    assert_eq!(reply, "*Coder:* There is nothing to undo in this thread.");

    // The next message goes on from the conversation as it was before the undone runs.
    assert_eq!(
        say_and_wait_run(&env, &thread, "start over please").await,
        "white_check_mark"
    );
    let requests = env.model.requests_for("FOLLOW-TOKEN");
    let after_undo = &requests.last().unwrap().body;
    let users = user_messages(after_undo);
    assert_eq!(users.len(), 2, "{users:?}");
    assert_eq!(users[1], "<@U0ALICE>: start over please");
    assert!(assistant_texts(after_undo).is_empty());
    assert_eq!(
        env.thread_posts(&thread).last().unwrap().text,
        "*Coder:* Starting over as asked."
    );
}

#[tokio::test]
async fn a_killed_runner_is_reported_and_continue_resumes_it() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    env.model.script(
        "KILL-TOKEN",
        vec![
            Reply::tool_call(
                "Bash",
                r#"{"command": "echo partial > part.txt && sleep 300"}"#,
            ),
            Reply::text("Picked up again and finished."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please do the long job", "KILL-TOKEN").await;
    let approval = env.reply(&thread, "go");
    wait_output(&env, &["logs", &thread], "sleep 300").await;
    let show = stdout(&runnerctl(&env, &["show", &thread, "--json"]).await);
    let show: serde_json::Value = serde_json::from_str(&show).unwrap();
    let pid = show["runnerPid"].as_i64().expect("a running run has a pid");
    // The runner process this test's daemon started, and only that one.
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.slack
                .reactions()
                .iter()
                .any(|r| r.ts == approval.ts && r.name == "x")
        })
        .await;
    assert!(ok, "{:?}", env.thread_posts(&thread));
    let report = env.thread_posts(&thread).last().unwrap().text.clone();
    assert!(report.contains("without finishing"), "{report}");
    assert!(report.contains("Say *continue*"), "{report}");

    assert_eq!(
        say_and_wait_run(&env, &thread, "continue").await,
        "white_check_mark"
    );
    assert_eq!(
        env.thread_posts(&thread).last().unwrap().text,
        "*Coder:* Picked up again and finished."
    );
    let requests = env.model.requests_for("KILL-TOKEN");
    let resumed = &requests[1].body;
    assert_eq!(
        user_messages(resumed).last().unwrap(),
        "<@U0ALICE>: continue"
    );
    // The call cut off by the kill has no result: it was dropped, not sent half-done.
    assert!(
        env.model.violations().is_empty(),
        "{:?}",
        env.model.violations()
    );
    assert!(
        Path::new(&worktree_of(&env, "work-on-kill-token"))
            .join("part.txt")
            .is_file()
    );
}

#[tokio::test]
async fn a_run_cut_off_by_a_restart_is_reported_in_its_thread() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    env.model.script(
        "RESTART-TOKEN",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
            Reply::text("Done after the restart."),
        ],
    );
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "please do the restart job", "RESTART-TOKEN").await;
    env.reply(&thread, "go");
    wait_output(&env, &["logs", &thread], "sleep 300").await;
    daemon.kill9().await;

    let _daemon = env.start().await;
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(&thread)
                .iter()
                .any(|p| p.text.contains("I was stopped while working on this"))
        })
        .await;
    assert!(ok, "{:?}", env.thread_posts(&thread));
    assert_eq!(
        say_and_wait_run(&env, &thread, "continue").await,
        "white_check_mark"
    );
    assert_eq!(
        env.thread_posts(&thread).last().unwrap().text,
        "*Coder:* Done after the restart."
    );
    let requests = env.model.requests_for("RESTART-TOKEN");
    let users = user_messages(&requests[1].body);
    assert!(users[0].contains("Work on RESTART-TOKEN"), "{users:?}");
    assert_eq!(users.last().unwrap(), "<@U0ALICE>: continue");
    assert!(
        env.model.violations().is_empty(),
        "{:?}",
        env.model.violations()
    );
}

/// A thread whose status follower falls behind (Slack makes it wait out a 429 while the run
/// races through hundreds of tool calls) still gets every notice: the events the broadcast
/// dropped are read back from the store.
#[tokio::test]
async fn a_follower_that_falls_behind_reads_the_missed_events_from_the_store() {
    let env = Env::with_config(json!({
        "coder": {"maxTurns": 10, "timeout": 3},
        "access": {"maxClaudeCallsPerHour": 0},
        "sandbox": {"runnerPath": runner_bin().display().to_string(), "memoryMB": 768}
    }))
    .await;
    let mut replies = vec![Reply::tool_call(
        "Notify",
        json!({"message": "EARLY-NOTE before the flood"}).to_string(),
    )];
    // One reply of 600 calls, two events each: well over the broadcast's 1,024 while the
    // follower waits, and quick even on a busy machine.
    replies.push(Reply::ToolCalls(
        (0..600)
            .map(|_| ("Glob".to_owned(), r#"{"pattern": "*.md"}"#.to_owned()))
            .collect(),
    ));
    replies.push(Reply::text("Flooded and done."));
    env.model.script("FLOOD-TOKEN", replies);
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "please flood the events", "FLOOD-TOKEN").await;
    // The status message's post waits out a 429 while the run emits its events.
    env.slack.rate_limit("chat.postMessage", 1, 8);
    let ending = say_and_wait_run(&env, &thread, "go").await;
    assert_eq!(
        ending,
        "white_check_mark",
        "{:?}",
        env.thread_posts(&thread).last().map(|p| p.text.clone())
    );
    let posts = env.thread_posts(&thread);
    assert!(
        posts
            .iter()
            .any(|p| p.text.contains("EARLY-NOTE before the flood")),
        "the early notice was lost: {:?}",
        posts.iter().map(|p| &p.text).collect::<Vec<_>>()
    );
    assert_eq!(posts.last().unwrap().text, "*Coder:* Flooded and done.");
    daemon.signal("TERM");
    daemon.wait_exit(WAIT).await;
    assert!(
        daemon.log().contains("reading them from the store"),
        "the follower never fell behind, so this test proved nothing:\n{}",
        daemon.log()
    );
}
