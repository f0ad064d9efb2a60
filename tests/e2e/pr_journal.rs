//! The pull request's description grows as the thread goes: the plan approved and the pull
//! request opened, a follow-up run, the merge, each an entry of its Journal in the body the
//! fake `gh` received, one `gh pr edit` per step that changed the text and none for a step
//! that changed nothing; a daemon killed before GitHub received an update sends it after its
//! restart, and one killed after GitHub received it (before it was recorded) sends the same
//! body once more, no more.

use std::time::Duration;

use codebutler_test_support::gh::{
    block_edit, edit_waiting, gh_edited_bodies, gh_merges, release_edit,
};
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{Env, WAIT, runner_env, say_and_wait_run, thread_with_pr, write};

const PLAN_APPROVED: &str = "**Plan approved**: Work on JOURNAL-GROWS — the Coder's run finished";
const PR_OPENED: &str = "**Pull request #7 opened**";
const FOLLOW_UP: &str = "**Follow-up run**: also add a third note — finished";
const MERGED: &str = "**Merged**";

/// The bodies GitHub received, once there are `n` of them (or fails saying what it has).
async fn wait_edits(env: &Env, n: usize) -> Vec<String> {
    let dir = env.outside.path();
    let ok = env
        .slack
        .wait_until(WAIT, || gh_edited_bodies(dir).len() >= n)
        .await;
    assert!(ok, "{} edit(s), not {n}", gh_edited_bodies(dir).len());
    gh_edited_bodies(dir)
}

/// The Journal section of a body: its entries, one per line.
fn journal(body: &str) -> Vec<String> {
    let section = body
        .split("## Journal\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Journal in:\n{body}"));
    section
        .lines()
        .take_while(|l| l.starts_with("- "))
        .map(|l| l.split_once(" — ").map_or(l, |(_, entry)| entry).to_owned())
        .collect()
}

#[tokio::test]
async fn the_description_gains_each_step_once_across_restarts() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let dir = env.outside.path().to_path_buf();
    let mut daemon = env.start().await;
    let follow_up = vec![
        write("notes.txt", "one\ntwo\nthree\n"),
        Reply::tool_call("GitCommit", r#"{"message": "Add a third note"}"#),
        Reply::text("Added a third note."),
    ];
    let (thread, _origin) = thread_with_pr(&env, "JOURNAL-GROWS", follow_up).await;

    // Plan approved, pull request opened: the first description.
    let edits = wait_edits(&env, 1).await;
    assert_eq!(
        journal(&edits[0]),
        [PLAN_APPROVED, PR_OPENED],
        "{}",
        edits[0]
    );
    assert!(edits[0].contains("- `notes.txt` (+2 −0)\n"), "{}", edits[0]);

    // A follow-up run: its update is on its way to GitHub when the daemon is killed, and
    // never arrives.
    block_edit(&dir);
    assert_eq!(
        say_and_wait_run(&env, &thread, "also add a third note").await,
        "white_check_mark"
    );
    let ok = env.slack.wait_until(WAIT, || edit_waiting(&dir)).await;
    assert!(ok, "no update after the follow-up run");
    daemon.kill9().await;
    release_edit(&dir, true);
    assert_eq!(gh_edited_bodies(&dir).len(), 1);

    // The restart sends it: the follow-up run's entry and its change, once.
    let mut daemon = env.start().await;
    let edits = wait_edits(&env, 2).await;
    assert_eq!(
        journal(&edits[1]),
        [PLAN_APPROVED, PR_OPENED, FOLLOW_UP],
        "{}",
        edits[1]
    );
    assert!(edits[1].contains("- `notes.txt` (+3 −0)\n"), "{}", edits[1]);

    // "merge": the PM's summary again changes nothing before the merge (no edit); after it,
    // the merge's entry reaches GitHub, and the daemon is killed before recording it.
    block_edit(&dir);
    env.reply(&thread, "merge");
    let ok = env.slack.wait_until(WAIT, || edit_waiting(&dir)).await;
    assert!(
        ok,
        "no update after the merge: {:?}",
        env.post_texts(&thread)
    );
    assert_eq!(gh_merges(&dir), ["squash"]);
    daemon.kill9().await;
    release_edit(&dir, false);
    let edits = wait_edits(&env, 3).await;
    let merged = [PLAN_APPROVED, PR_OPENED, FOLLOW_UP, MERGED];
    assert_eq!(journal(&edits[2]), merged, "{}", edits[2]);

    // The restart finishes the close: the same body once more (it was never recorded as
    // sent), and nothing else.
    let _daemon = env.start().await;
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.starts_with("*PM:* PR #7 merged"))
        })
        .await;
    assert!(ok, "{:?}", env.post_texts(&thread));
    let edits = gh_edited_bodies(&dir);
    assert_eq!(edits.len(), 4, "{edits:#?}");
    assert_eq!(edits[3], edits[2]);
    assert_eq!(gh_merges(&dir), ["squash"]);
    // A restart with nothing new sends nothing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(gh_edited_bodies(&dir).len(), 4);
    env.assert_clean();
}
