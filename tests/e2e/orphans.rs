//! Orphan cleanup end to end: three real Coder runs (one opens its pull request, one only
//! commits, one stays open), two of their threads then closed in the store of the stopped
//! daemon, a stray directory under `.codebutler/branches/` and stale run files:
//! `codebutler --cleanup-orphans` (and a second daemon) refuses while the daemon runs, then
//! removes exactly the orphans (disks unmounted, symlinks not followed), keeps the branch
//! holding unpushed work and says so, and leaves the open thread's worktree alone; the
//! daemon does the same at start and logs it.

use std::path::Path;
use std::process::Output;

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    Env, OUTSIDE_SECRET, WAIT, open_store, runner_env, say_and_wait_run, thread_with_plan,
    worktree_of, write,
};

const MERGED: &str = "work-on-merged-token";
const ABANDONED: &str = "work-on-abandoned-token";
const OPEN: &str = "work-on-open-token";

/// Runs `codebutler --cleanup-orphans` on the env's repository.
async fn cleanup(env: &Env) -> Output {
    let mut command = tokio::process::Command::from(env.command());
    command.arg("--cleanup-orphans");
    command.output().await.unwrap()
}

/// Sets the thread's stored state, as the daemon's close stores it.
async fn set_state(env: &Env, thread: &str, state: &str) {
    let pool = open_store(env).await;
    let updated = sqlx::query("UPDATE threads SET state = ? WHERE thread_ts = ?")
        .bind(state)
        .bind(thread)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(updated.rows_affected(), 1);
    pool.close().await;
}

/// The id of the thread's (one) run.
async fn run_id(env: &Env, thread: &str) -> String {
    let pool = open_store(env).await;
    let (id,): (String,) = sqlx::query_as("SELECT id FROM runs WHERE thread_ts = ?")
        .bind(thread)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    id
}

/// The tip of `codebutler/<slug>` in the repository, if it has the branch.
fn branch_tip(repo: &Path, slug: &str) -> Option<git2::Oid> {
    git2::Repository::open(repo)
        .unwrap()
        .find_branch(&format!("codebutler/{slug}"), git2::BranchType::Local)
        .ok()
        .and_then(|b| b.get().target())
}

/// Whether anything is mounted at `path`, as the host's mount table says.
fn mounted(path: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = path.display().to_string();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(path.as_str()))
}

fn lines(text: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(text)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn cleanup_removes_what_closed_and_unknown_threads_left_and_keeps_unpushed_work() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    env.model.script(
        "MERGED-TOKEN",
        vec![
            write("merged.txt", "merged\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add merged"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Add merged", "body": "Adds it."}"#),
            Reply::text("The PR is open."),
        ],
    );
    env.model.script(
        "ABANDONED-TOKEN",
        vec![
            write("abandoned.txt", "abandoned\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add abandoned"}"#),
            Reply::text("Committed, not pushed."),
        ],
    );
    env.model.script(
        "OPEN-TOKEN",
        vec![
            write("open.txt", "open\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add open"}"#),
            Reply::text("Committed."),
        ],
    );
    let mut daemon = env.start().await;
    let mut threads = Vec::new();
    for token in ["MERGED-TOKEN", "ABANDONED-TOKEN", "OPEN-TOKEN"] {
        let thread = thread_with_plan(&env, &format!("the {token} job"), token).await;
        assert_eq!(
            say_and_wait_run(&env, &thread, "yes").await,
            "white_check_mark"
        );
        threads.push(thread);
    }
    let [merged, abandoned, open] = [&threads[0], &threads[1], &threads[2]];
    let repo = env.repo_path().to_owned();
    for slug in [MERGED, ABANDONED, OPEN] {
        assert!(
            mounted(&worktree_of(&env, slug)),
            "{slug} is on its own disk"
        );
    }

    // Refused while the daemon runs: nothing is touched.
    let refused = cleanup(&env).await;
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(&format!(
            "a CodeButler daemon (pid {}) is running for this repository",
            daemon.pid()
        )),
        "{stderr}"
    );
    assert!(refused.stdout.is_empty(), "{refused:?}");
    assert!(worktree_of(&env, MERGED).join("merged.txt").is_file());
    // So is a second daemon for the same repository.
    let mut second = env.spawn();
    assert_eq!(second.wait_exit(WAIT).await.code(), Some(1));
    let log = second.log();
    assert!(
        log.contains(&format!(
            "codebutler: error: a CodeButler daemon (pid {}) is running for this repository",
            daemon.pid()
        )),
        "{log}"
    );

    daemon.signal("TERM");
    daemon.wait_exit(WAIT).await;
    set_state(&env, merged, "closed_merged").await;
    set_state(&env, abandoned, "closed_abandoned").await;
    // What the abandoned thread committed and never pushed, as its own repository has it.
    let unpushed = git2::Repository::open(worktree_of(&env, ABANDONED))
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    // The repository's copy of its branch lags behind (as a crash between the commit and
    // the copy leaves it): the cleanup must bring it up to date before the worktree goes.
    let base = git2::Repository::open(&repo)
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    git2::Repository::open(&repo)
        .unwrap()
        .reference(
            &format!("refs/heads/codebutler/{ABANDONED}"),
            base,
            true,
            "test: a copy that lags",
        )
        .unwrap();
    // A directory no run uses, with a link out of the repository in it.
    let stray = worktree_of(&env, "stray");
    std::fs::create_dir_all(stray.join("src")).unwrap();
    std::fs::write(stray.join("src/notes.txt"), "notes\n").unwrap();
    let secret = env.outside.path().join("secret.txt");
    std::os::unix::fs::symlink(&secret, stray.join("src/link-out")).unwrap();
    std::os::unix::fs::symlink(env.outside.path(), stray.join("dir-out")).unwrap();
    // Run files: the runs' logs, one of a run the store never had, the lock.
    let run_dir = repo.join(".codebutler/run");
    let (merged_run, abandoned_run, open_run) = (
        run_id(&env, merged).await,
        run_id(&env, abandoned).await,
        run_id(&env, open).await,
    );
    for id in [&merged_run, &abandoned_run, &open_run] {
        assert!(run_dir.join(format!("run-{id}.log")).is_file(), "{id}");
    }
    std::fs::write(run_dir.join("run-12345.log"), "old\n").unwrap();
    std::fs::write(run_dir.join("notes.txt"), "not ours to judge\n").unwrap();

    let done = cleanup(&env).await;
    assert_eq!(done.status.code(), Some(0), "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
    let mut expected = vec![
        "removed worktree .codebutler/branches/stray (no thread's run uses it)".to_owned(),
        format!(
            "removed worktree .codebutler/branches/{ABANDONED} (thread {abandoned} is closed (abandoned)); kept branch codebutler/{ABANDONED}: 1 unpushed commit"
        ),
        format!(
            "removed worktree .codebutler/branches/{MERGED} (thread {merged} is closed (merged)); deleted branch codebutler/{MERGED}"
        ),
        format!("removed stale .codebutler/run/run-{merged_run}.log"),
        format!("removed stale .codebutler/run/run-{abandoned_run}.log"),
        "removed stale .codebutler/run/run-12345.log".to_owned(),
    ];
    expected.sort();
    assert_eq!(lines(&done.stdout), expected);

    // The orphans are gone: directories, disks (unmounted), base-store use.
    for slug in [MERGED, ABANDONED, "stray"] {
        let tree = worktree_of(&env, slug);
        assert!(!tree.exists(), "{slug}");
        assert!(!mounted(&tree), "{slug}");
        assert!(
            !repo
                .join(".codebutler/disks")
                .join(format!("{slug}.img"))
                .exists(),
            "{slug}"
        );
    }
    // Nothing was followed out of the stray directory.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), OUTSIDE_SECRET);
    // The pushed branch is deleted here (origin keeps it); the unpushed one is kept, with
    // the thread's commit and its file.
    assert_eq!(branch_tip(&repo, MERGED), None);
    let origin = git2::Repository::open_bare(env.outside.path().join("origin.git")).unwrap();
    assert!(
        origin
            .find_branch(&format!("codebutler/{MERGED}"), git2::BranchType::Local)
            .is_ok()
    );
    assert_eq!(branch_tip(&repo, ABANDONED), Some(unpushed));
    let main = git2::Repository::open(&repo).unwrap();
    let tree = main.find_commit(unpushed).unwrap().tree().unwrap();
    assert!(tree.get_name("abandoned.txt").is_some());
    // The open thread's worktree, branch and log are untouched; so are the lock and the
    // file the cleanup does not know.
    let open_tree = worktree_of(&env, OPEN);
    assert_eq!(
        std::fs::read_to_string(open_tree.join("open.txt")).unwrap(),
        "open\n"
    );
    assert!(mounted(&open_tree));
    assert!(branch_tip(&repo, OPEN).is_some());
    assert!(run_dir.join(format!("run-{open_run}.log")).is_file());
    assert!(run_dir.join("daemon.lock").is_file());
    assert!(run_dir.join("notes.txt").is_file());

    // Again: nothing left to remove, and the kept branch is not said again.
    let again = cleanup(&env).await;
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(again.stdout.is_empty(), "{again:?}");
    assert_eq!(branch_tip(&repo, ABANDONED), Some(unpushed));

    // The daemon cleans up at start, and logs it; the open thread's worktree stays.
    std::fs::create_dir_all(worktree_of(&env, "left-by-a-crash")).unwrap();
    let daemon = env.start().await;
    let log = daemon.log();
    assert!(
        log.contains(
            "INF  removed worktree .codebutler/branches/left-by-a-crash (no thread's run uses it)\n"
        ),
        "{log}"
    );
    assert!(!worktree_of(&env, "left-by-a-crash").exists());
    assert!(open_tree.join("open.txt").is_file());
    env.assert_clean();
}
