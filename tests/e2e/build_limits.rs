//! Limits on heavy preparations: with `build.maxConcurrentBuilds` at 1, two threads approved
//! at once are prepared one after the other — the second says once that it waits, and its
//! preparation starts only after the first's ended — and `build.preBuildCommand` runs in
//! the sandbox before the detected preparation (`npm ci`). Everything is read from the
//! files the commands write in the worktrees on the host and from the fake Slack, and the
//! slow preparation waits on a file the test creates, not on a clock.

use std::path::{Path, PathBuf};

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::Sent;
use serde_json::json;

use crate::harness::{Env, WAIT, runner_bin, thread_with_plan_of};

/// The preparation's first command: it says it ran, then waits for the test's go-ahead.
const PRE_BUILD: &str = "echo pre > pre-build.txt && while [ ! -f go-ahead ]; do sleep 0.05; done";
/// What the thread that waits says.
const WAITING: &str = "waiting for 1 other preparation to finish before preparing the worktree";

/// Whether the detected preparation (`npm ci`) ran in `worktree`: npm writes its log in the
/// cache the preparation points it to.
fn npm_ran(worktree: &Path) -> bool {
    std::fs::read_dir(worktree.join(".codebutler-cache/npm/_logs"))
        .map(|mut logs| logs.next().is_some())
        .unwrap_or(false)
}

/// The worktree of the plan titled "Check <token>".
fn worktree(env: &Env, token: &str) -> PathBuf {
    env.repo_path()
        .join(".codebutler/branches")
        .join(format!("check-{}", token.to_lowercase()))
}

/// A thread whose PM proposed "Check <token>", approved.
async fn approve(env: &Env, token: &str) -> (String, Sent) {
    let plan =
        json!({"summary": format!("Check {token}"), "steps": ["Do it"], "files": ["README.md"]});
    let thread = thread_with_plan_of(
        env,
        &format!("check {token}"),
        &plan,
        "Plan ready; approve it.",
    )
    .await;
    let approval = env.reply(&thread, "LGTM!");
    (thread, approval)
}

/// The posts of `thread` that say it waits.
fn waiting_posts(env: &Env, thread: &str) -> usize {
    env.thread_texts(thread)
        .iter()
        .filter(|t| t.contains(WAITING))
        .count()
}

#[tokio::test]
async fn preparations_past_the_limit_wait_in_turn_and_the_pre_build_command_goes_first() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 5, "timeout": 2},
        // npm needs more address space than the other tests' 768 MB.
        "sandbox": {"runnerPath": runner_bin().display().to_string(), "memoryMB": 4096},
        "build": {
            "maxConcurrentBuilds": 1,
            "preBuildCommand": PRE_BUILD,
            "prepareAheadIdleMinutes": 0
        }
    }))
    .await;
    git::commit_files(
        env.repo_path(),
        &[
            (
                "package.json",
                r#"{"name":"acme","version":"1.0.0","private":true}"#,
            ),
            (
                "package-lock.json",
                r#"{"name":"acme","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"acme","version":"1.0.0"}}}"#,
            ),
        ],
        "Node project",
    );
    for token in ["BUILD-ONE", "BUILD-TWO"] {
        env.model.script(token, vec![Reply::text("Checked.")]);
    }
    let _daemon = env.start().await;
    let (first, first_ok) = approve(&env, "BUILD-ONE").await;
    let one = worktree(&env, "BUILD-ONE");
    let ok = env
        .slack
        .wait_until(WAIT, || one.join("pre-build.txt").exists())
        .await;
    assert!(
        ok,
        "the first preparation never began: {:?}",
        env.thread_texts(&first)
    );

    // The second is approved while the first's preparation holds the only slot: it says it
    // waits, and nothing of its preparation runs.
    let (second, second_ok) = approve(&env, "BUILD-TWO").await;
    let ok = env
        .slack
        .wait_until(WAIT, || waiting_posts(&env, &second) == 1)
        .await;
    assert!(
        ok,
        "the second thread never said it waits: {:?}",
        env.thread_texts(&second)
    );
    let two = worktree(&env, "BUILD-TWO");
    assert!(!two.join("pre-build.txt").exists());
    // The pre-build command runs before the detected preparation.
    assert!(!npm_ran(&one));

    // The first goes on: the second's preparation begins only once the first's npm ran.
    std::fs::write(one.join("go-ahead"), "").unwrap();
    let ok = env
        .slack
        .wait_until(WAIT, || two.join("pre-build.txt").exists())
        .await;
    assert!(
        ok,
        "the second preparation never began: {:?}",
        env.thread_texts(&second)
    );
    assert!(npm_ran(&one), "the second began before the first's npm ran");
    assert!(!npm_ran(&two));
    assert!(
        env.wait_reaction(&first_ok.ts, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&first)
    );
    std::fs::write(two.join("go-ahead"), "").unwrap();
    assert!(
        env.wait_reaction(&second_ok.ts, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&second)
    );
    assert!(npm_ran(&two));

    // Said once, and only by the thread that waited.
    assert_eq!(waiting_posts(&env, &second), 1);
    assert_eq!(waiting_posts(&env, &first), 0);
    // Each thread's preparation line names both commands, the pre-build command first.
    let prepared = |thread: &str| {
        env.thread_texts(thread)
            .iter()
            .any(|t| t.contains("prepared the worktree: `echo pre") && t.contains("npm ci` ("))
    };
    assert!(prepared(&first), "{:?}", env.thread_texts(&first));
    assert!(prepared(&second), "{:?}", env.thread_texts(&second));
    env.assert_clean();
}
