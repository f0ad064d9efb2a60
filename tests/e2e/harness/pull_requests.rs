//! A thread carried to an open pull request, the step the close, rebase, push and review
//! tests all start from: origin a new bare repository, the PM's plan approved, the Coder's
//! first run committing and opening PR #7 from `codebutler/work-on-<token>`; and the thread's
//! stored state, read from the daemon's store.

use std::path::PathBuf;

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;

use super::{Env, open_store, say_and_wait_run, thread_with_plan, write};

/// A thread started with "start the notes" whose Coder wrote `notes.txt`, committed it
/// ("Add the notes") and opened PR #7 ("Add notes"), with `follow_up` scripted for its next
/// runs; returns the thread and the bare origin's path.
pub async fn thread_with_pr(env: &Env, token: &str, follow_up: Vec<Reply>) -> (String, PathBuf) {
    let first_run = vec![
        write("notes.txt", "one\ntwo\n"),
        Reply::tool_call("GitCommit", r#"{"message": "Add the notes"}"#),
        Reply::tool_call("OpenPR", r#"{"title": "Add notes", "body": "Adds notes."}"#),
        Reply::text("The PR is open."),
    ];
    thread_with_pr_of(env, "start the notes", token, first_run, follow_up).await
}

/// A thread started with `ask` whose PM proposed "Work on `token`" and whose Coder's first
/// run, `first_run`, opened PR #7; `follow_up` is scripted for its next runs. Origin is a
/// new bare repository holding the repository's branch. Asserts the run ended well and the
/// thread is `pr_opened`; returns the thread and origin's path.
pub async fn thread_with_pr_of(
    env: &Env,
    ask: &str,
    token: &str,
    first_run: Vec<Reply>,
    follow_up: Vec<Reply>,
) -> (String, PathBuf) {
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    let mut script = first_run;
    script.extend(follow_up);
    env.model.script(token, script);
    let thread = thread_with_plan(env, ask, token).await;
    assert_eq!(
        say_and_wait_run(env, &thread, "yes").await,
        "white_check_mark"
    );
    assert_eq!(stored_state(env, &thread).await, "pr_opened");
    (thread, origin)
}

/// The thread's stored state (`created`, `pr_opened`, `closed_merged`…).
pub async fn stored_state(env: &Env, thread: &str) -> String {
    let pool = open_store(env).await;
    let state: String = sqlx::query_scalar("SELECT state FROM threads WHERE thread_ts = ?")
        .bind(thread)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    state
}
