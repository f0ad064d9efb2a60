//! After the Coder's pull request opens: the thread is told which TODO and FIXME lines the
//! branch added (read from the branch, not from what the model says), once — a restart does
//! not say it again.

use std::time::Duration;

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{runner_env, say_and_wait_run, thread_with_plan, write};

const TODO_POST: &str = "*PM:* The Coder left";

#[tokio::test]
async fn the_todos_the_coder_left_are_said_once_after_the_pr_opens() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    env.model.script(
        "TODO-TOKEN",
        vec![
            write(
                "src/lib.rs",
                "pub fn parse() {}\n// TODO: handle empty input\n// FIXME the todo list is slow\n",
            ),
            Reply::tool_call("GitCommit", r#"{"message": "Add parse"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Parse", "body": "Adds parse."}"#),
            // Written after the commit: not on the branch, so not reported.
            write("later.rs", "// TODO: not committed\n"),
            Reply::text("The PR is open. No TODOs left."),
        ],
    );
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "add a parser", "TODO-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let ok = env
        .slack
        .wait_until(Duration::from_secs(20), || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.starts_with(TODO_POST))
        })
        .await;
    assert!(ok, "no TODO post: {:?}", env.post_texts(&thread));
    let todo_posts = || -> Vec<String> {
        env.post_texts(&thread)
            .into_iter()
            .filter(|t| t.starts_with(TODO_POST))
            .collect()
    };
    assert_eq!(
        todo_posts(),
        vec![
            "*PM:* The Coder left 2 TODOs in the pull request:\n\
             • `src/lib.rs:2` `// TODO: handle empty input`\n\
             • `src/lib.rs:3` `// FIXME the todo list is slow`\n\
             Want a new thread to resolve them? Start one in the channel."
        ]
    );

    // A restart resumes the steps not done: this one is done, so nothing is said again.
    daemon.kill9().await;
    let _daemon = env.start().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(todo_posts().len(), 1, "{:?}", env.post_texts(&thread));
    env.assert_clean();
}
