//! A run's commits reach the open pull request, checked on origin and on the fake GitHub:
//! an approved review round's fix (pushed, the PR's head moved, a reply on GitHub), a
//! follow-up message after the PR, a failing check's fix and "continue" (each pushed at the
//! run's end and named in its summary), a run a crash cut off (pushed when the next start
//! reports it), a follow-up that commits nothing (said), a push origin refuses (said in the
//! thread; "merge" refuses to merge while it cannot push, then pushes and lands it on
//! origin's default branch), and a run of a thread with no pull request yet (its commits
//! stay on the branch, not on origin).

use std::path::{Path, PathBuf};

use codebutler_test_support::gh::{FakePr, add_line_comment, gh_replies, set_run_log};
use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{
    self, Env, WAIT, pushed_line, say_and_wait_run, thread_with_plan, user_messages, write,
};

/// The branch of the threads whose plan is "Work on <token>".
fn branch_of(token: &str) -> String {
    format!("codebutler/work-on-{}", token.to_lowercase())
}

/// `branch`'s commit on the bare repository `origin`, if it has the branch.
fn origin_tip(origin: &Path, branch: &str) -> Option<String> {
    git2::Repository::open_bare(origin)
        .unwrap()
        .refname_to_id(&format!("refs/heads/{branch}"))
        .ok()
        .map(|id| id.to_string())
}

/// A file of `commit` in the bare repository `origin`.
fn file_at(origin: &Path, commit: &str, path: &str) -> String {
    git::git(origin, &["show", &format!("{commit}:{path}")])
}

/// The pull request's head commit as the fake GitHub reports it (`gh pr view`).
fn github_head(env: &Env, number: u64) -> String {
    let out = std::process::Command::new(env.outside.path().join("gh"))
        .args(["pr", "view", &number.to_string(), "--json", "headRefOid"])
        .current_dir(env.repo_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    view["headRefOid"].as_str().unwrap().to_owned()
}

/// The Coder's last post in the thread.
fn last_coder_post(env: &Env, thread: &str) -> String {
    env.post_texts(thread)
        .into_iter()
        .rfind(|t| t.starts_with("*Coder:*") && !t.starts_with("*Coder:* working on"))
        .unwrap_or_default()
}

/// An env whose PR watcher polls every second and gathers comments for two.
async fn pushes_env() -> Env {
    Env::with_runner(json!({
        "coder": {"maxTurns": 8, "timeout": 2},
        "github": {"prWatchIntervalSecs": 1, "reviewQuietSecs": 2}
    }))
    .await
}

/// A thread whose Coder wrote `notes.txt`, committed and opened PR #7 (pushed to a bare
/// `origin`), with `follow_up` scripted for its next runs; returns the thread, origin and
/// origin's tip of the branch once the PR opened.
async fn thread_with_pr(
    env: &Env,
    token: &str,
    follow_up: Vec<Reply>,
) -> (String, PathBuf, String) {
    let (thread, origin) = harness::thread_with_pr(env, token, follow_up).await;
    let opened = origin_tip(&origin, &branch_of(token)).expect("OpenPR pushed the branch");
    assert_eq!(github_head(env, 7), opened);
    (thread, origin, opened)
}

/// Asserts the run that just ended pushed one commit `subject` on top of `before`, with
/// `notes.txt` as `notes`: on origin, as the PR's head on GitHub, and named in the run's
/// summary `summary`; returns origin's new tip.
fn assert_pushed(
    env: &Env,
    (thread, origin, before): (&str, &Path, &str),
    token: &str,
    subject: &str,
    notes: &str,
    summary: &str,
) -> String {
    let tip = origin_tip(origin, &branch_of(token)).unwrap();
    assert_ne!(
        tip,
        before,
        "nothing reached origin: {:?}",
        env.post_texts(thread)
    );
    assert_eq!(
        git::git(origin, &["log", "-1", "--format=%s%n%P", &tip]),
        format!("{subject}\n{before}"),
        "one commit on top of what origin had"
    );
    assert_eq!(file_at(origin, &tip, "notes.txt"), notes);
    assert_eq!(github_head(env, 7), tip, "the PR's head on GitHub");
    assert_eq!(
        last_coder_post(env, thread),
        format!(
            "*Coder:* {summary}\n\n{}",
            pushed_line(origin, &branch_of(token), before, &["notes.txt"], 7)
        )
    );
    tip
}

#[tokio::test]
async fn an_approved_review_rounds_commits_reach_the_pr_and_get_their_reply() {
    let env = pushes_env().await;
    let gh = env.outside.path();
    let _daemon = env.start().await;
    let token = "PUSH-REVIEW";
    let (thread, origin, opened) = thread_with_pr(
        &env,
        token,
        vec![
            write("notes.txt", "uno\ntwo\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Rename the first note"}"#),
            Reply::text("Renamed the first note."),
        ],
    )
    .await;
    // The PM sorts every comment as a change to make.
    env.model.respond("got these comments", |body| {
        let users = user_messages(body);
        let list = users[0].split_once("\n\n").unwrap().1;
        let items: Vec<Value> = serde_json::from_str(list).unwrap();
        let sorted: Vec<Value> = items
            .iter()
            .map(|c| json!({"id": c["id"], "kind": "change", "summary": "Rename it"}))
            .collect();
        Reply::text(json!({ "comments": sorted }).to_string())
    });
    add_line_comment(gh, 301, "alice", "notes.txt", 1, "Rename `one` to `uno`.");
    let proposed = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.contains("review comment"))
        })
        .await;
    assert!(proposed, "{:?}", env.post_texts(&thread));
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let tip = assert_pushed(
        &env,
        (&thread, &origin, &opened),
        token,
        "Rename the first note",
        "uno\ntwo",
        "Renamed the first note.",
    );
    // GitHub got the reply, naming the commit it has.
    let replied = env
        .slack
        .wait_until(WAIT, || !gh_replies(gh).is_empty())
        .await;
    assert!(replied, "no reply on GitHub");
    assert_eq!(
        gh_replies(gh),
        [(
            301,
            format!(
                "Addressed in {} (changed `notes.txt`).\n\n<!-- codebutler reply:line:301 -->",
                &tip[..7]
            )
        )]
    );
    env.assert_clean();
}

/// How a follow-up run of a thread with an open PR is started.
enum Start {
    /// A message in the thread after the PR opened.
    Message,
    /// A failing check, reported by the watcher and approved for a fix.
    FailingCheck,
    /// "continue" after a run that failed (having committed: that commit is pushed too).
    Continue,
}

#[tokio::test]
async fn follow_ups_failing_checks_and_continue_push_to_the_pr() {
    for (start, token) in [
        (Start::Message, "PUSH-MESSAGE"),
        (Start::FailingCheck, "PUSH-CHECK"),
        (Start::Continue, "PUSH-CONTINUE"),
    ] {
        let env = pushes_env().await;
        let _daemon = env.start().await;
        let mut follow_up = vec![
            write("notes.txt", "one\ntwo\nthree\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add a third note"}"#),
        ];
        follow_up.push(match start {
            Start::Continue => Reply::error(400, "the provider refused the request"),
            _ => Reply::text("Added a third note."),
        });
        if let Start::Continue = start {
            follow_up.extend([
                write("notes.txt", "one\ntwo\nthree\nfour\n"),
                Reply::tool_call("GitCommit", r#"{"message": "Add a fourth note"}"#),
                Reply::text("Added a fourth note."),
            ]);
        }
        let (thread, origin, opened) = thread_with_pr(&env, token, follow_up).await;
        let ending = match start {
            Start::Message => say_and_wait_run(&env, &thread, "also add a third note").await,
            Start::FailingCheck => {
                set_run_log(
                    env.outside.path(),
                    4242,
                    "test\tRun cargo test\tnotes: 2 != 3\n",
                );
                FakePr {
                    checks: "failing",
                    ..FakePr::default()
                }
                .set(env.outside.path());
                let reported = env
                    .slack
                    .wait_until(WAIT, || {
                        env.post_texts(&thread)
                            .iter()
                            .any(|t| t.contains("Reply *yes* to let the Coder fix it"))
                    })
                    .await;
                assert!(reported, "{:?}", env.post_texts(&thread));
                say_and_wait_run(&env, &thread, "yes").await
            }
            Start::Continue => say_and_wait_run(&env, &thread, "also add a third note").await,
        };
        if let Start::Continue = start {
            // The run failed after its commit: the commit is on the PR all the same.
            assert_eq!(ending, "x");
            let third = origin_tip(&origin, &branch_of(token)).unwrap();
            assert_ne!(third, opened, "the failed run's commit was not pushed");
            assert_eq!(file_at(&origin, &third, "notes.txt"), "one\ntwo\nthree");
            assert!(
                last_coder_post(&env, &thread).ends_with(&format!(
                    "\n\n{}",
                    pushed_line(&origin, &branch_of(token), &opened, &["notes.txt"], 7)
                )),
                "{:?}",
                env.post_texts(&thread)
            );
            assert_eq!(
                say_and_wait_run(&env, &thread, "continue").await,
                "white_check_mark"
            );
            assert_pushed(
                &env,
                (&thread, &origin, &third),
                token,
                "Add a fourth note",
                "one\ntwo\nthree\nfour",
                "Added a fourth note.",
            );
        } else {
            assert_eq!(ending, "white_check_mark");
            assert_pushed(
                &env,
                (&thread, &origin, &opened),
                token,
                "Add a third note",
                "one\ntwo\nthree",
                "Added a third note.",
            );
        }
        env.assert_clean();
    }
}

#[tokio::test]
async fn a_push_origin_refuses_is_said_and_merge_pushes_then_lands_it() {
    let env = pushes_env().await;
    let _daemon = env.start().await;
    let token = "PUSH-REFUSED";
    let (thread, origin, opened) = thread_with_pr(
        &env,
        token,
        vec![
            write("notes.txt", "one\ntwo\nthree\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add a third note"}"#),
            Reply::text("Added a third note."),
        ],
    )
    .await;
    // GitHub is out of reach while the follow-up runs.
    let away = env.outside.path().join("origin.git.away");
    std::fs::rename(&origin, &away).unwrap();
    assert_eq!(
        say_and_wait_run(&env, &thread, "also add a third note").await,
        "white_check_mark"
    );
    let summary = last_coder_post(&env, &thread);
    // "merge" while origin is still out of reach: it says the push failed and merges nothing.
    let refused = crate::harness::say_and_wait_post(
        &env,
        &thread,
        "merge",
        "*PM:* I couldn't push the branch's last commits to PR #7",
    )
    .await;
    assert!(
        refused
            .ends_with("so I didn't merge it. The thread stays open; say *merge* again to retry."),
        "{refused}"
    );
    assert!(codebutler_test_support::gh::gh_merges(env.outside.path()).is_empty());
    std::fs::rename(&away, &origin).unwrap();
    assert!(
        summary.starts_with("*Coder:* Added a third note.\n\nI couldn't push `")
            && summary.contains("(`notes.txt`) to PR #7 (`git push failed")
            && summary.ends_with(
                "The commits are on the branch; the next run or *merge* pushes them again."
            ),
        "{summary}"
    );
    assert_eq!(
        origin_tip(&origin, &branch_of(token)).as_deref(),
        Some(opened.as_str()),
        "nothing reached origin"
    );
    assert_eq!(github_head(&env, 7), opened);

    // "merge" pushes what origin lacks first, then GitHub merges it into origin's default
    // branch.
    let base_before = git::git(&origin, &["rev-parse", "HEAD"]);
    env.reply(&thread, "merge");
    let merged = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.starts_with("*PM:* PR #7 merged"))
        })
        .await;
    assert!(merged, "{:?}", env.post_texts(&thread));
    let base_after = git::git(&origin, &["rev-parse", "HEAD"]);
    assert_eq!(
        git::git(&origin, &["log", "-1", "--format=%s%n%P", &base_after]),
        format!("Add notes (#7)\n{base_before}"),
        "one squash commit on origin's default branch"
    );
    assert_eq!(
        file_at(&origin, &base_after, "notes.txt"),
        "one\ntwo\nthree"
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_run_without_a_pull_request_keeps_its_commits_on_the_branch() {
    let env = pushes_env().await;
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    let token = "PUSH-NO-PR";
    env.model.script(
        token,
        vec![
            write("notes.txt", "one\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add the notes"}"#),
            Reply::text("Wrote the notes."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "start the notes", token).await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let branch = branch_of(token);
    assert_eq!(origin_tip(&origin, &branch), None, "nothing was published");
    let local = git::git(
        env.repo_path(),
        &["rev-parse", &format!("refs/heads/{branch}")],
    );
    let base = git::git(env.repo_path(), &["rev-parse", &format!("{local}^")]);
    assert_eq!(
        last_coder_post(&env, &thread),
        format!(
            "*Coder:* Wrote the notes.\n\nCommitted `{}..{}` (`notes.txt`) on `{branch}`, not pushed yet: they go to GitHub with the pull request.",
            &base[..7],
            &local[..7]
        )
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_run_the_controllers_crash_cut_off_has_its_commits_pushed_at_the_next_start() {
    let env = pushes_env().await;
    let mut daemon = env.start().await;
    let token = "PUSH-CRASH";
    let (thread, origin, opened) = thread_with_pr(
        &env,
        token,
        vec![
            write("notes.txt", "one\ntwo\nthree\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add a third note"}"#),
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
        ],
    )
    .await;
    env.reply(&thread, "also add a third note");
    // The commit is made; the controller dies while the next command runs.
    let committed = env
        .slack
        .wait_until(WAIT, || env.model.requests_for(token).len() == 7)
        .await;
    assert!(committed, "{:?}", env.post_texts(&thread));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    daemon.kill9().await;
    assert_eq!(
        origin_tip(&origin, &branch_of(token)).as_deref(),
        Some(opened.as_str())
    );

    // The next start reports the run cut off, and pushes its commit with the report.
    let _daemon = env.start().await;
    let reported = env
        .slack
        .wait_until(WAIT, || {
            last_coder_post(&env, &thread).contains("I was stopped while working on this")
        })
        .await;
    assert!(reported, "{:?}", env.post_texts(&thread));
    let tip = origin_tip(&origin, &branch_of(token)).unwrap();
    assert_eq!(
        git::git(&origin, &["log", "-1", "--format=%s%n%P", &tip]),
        format!("Add a third note\n{opened}")
    );
    assert_eq!(github_head(&env, 7), tip);
    assert!(
        last_coder_post(&env, &thread).ends_with(&format!(
            "\n\n{}",
            pushed_line(&origin, &branch_of(token), &opened, &["notes.txt"], 7)
        )),
        "{:?}",
        env.post_texts(&thread)
    );
}

#[tokio::test]
async fn a_follow_up_that_commits_nothing_says_the_pr_is_unchanged() {
    let env = pushes_env().await;
    let _daemon = env.start().await;
    let token = "PUSH-NOTHING";
    let (thread, origin, opened) = thread_with_pr(
        &env,
        token,
        vec![Reply::text("The notes already say that.")],
    )
    .await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "do the notes say two?").await,
        "white_check_mark"
    );
    assert_eq!(
        last_coder_post(&env, &thread),
        "*Coder:* The notes already say that.\n\nNothing was committed in this run; PR #7 is unchanged."
    );
    assert_eq!(
        origin_tip(&origin, &branch_of(token)).as_deref(),
        Some(opened.as_str())
    );
    assert_eq!(github_head(&env, 7), opened);
    env.assert_clean();
}
