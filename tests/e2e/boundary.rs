//! The trust boundary between the controller and what a runner leaves behind, attacked
//! through the real daemon and runner the way a hostile repository or a prompt-injected
//! model would, every outcome checked from the host: files outside the worktree, the object
//! stores, what the model was sent, what Slack received.

use std::path::Path;
use std::process::Command;

use codebutler_test_support::git::git;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    Env, OUTSIDE_SECRET, say_and_wait_post, say_and_wait_run, thread_with_plan, tool_results,
    worktree_of, write,
};

fn bash(command: &str) -> Reply {
    Reply::tool_call("Bash", json!({ "command": command }).to_string())
}

fn commit(message: &str) -> Reply {
    Reply::tool_call("GitCommit", json!({ "message": message }).to_string())
}

/// Env whose Coder runs in the real sandbox, each worktree on a disk of `disk_mb` MB.
async fn boundary_env(disk_mb: u64) -> Env {
    Env::with_runner(json!({
        "coder": {"maxTurns": 10, "timeout": 2},
        "sandbox": {"diskMB": disk_mb}
    }))
    .await
}

/// Every object of the git repository at `git_dir`, printed whole (`git cat-file
/// --batch-all-objects --batch`), objects of its alternates included.
fn all_objects(git_dir: &Path) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn an_undo_never_writes_through_the_runners_symlinks() {
    let env = boundary_env(256).await;
    let victim = env.outside.path().join("victim.txt");
    std::fs::write(&victim, "the host's own file\n").unwrap();
    let planted_dir = env.outside.path().join("planted");
    std::fs::create_dir(&planted_dir).unwrap();
    env.model.script(
        "UNDO-ESCAPE",
        vec![
            // Run 1: ordinary files the checkpoint before run 2 will hold.
            write("cache/keep.txt", "RUNNER-CHOSEN-CONTENT\n"),
            write("cache/sub/new.txt", "RUNNER-CHOSEN-CONTENT\n"),
            Reply::text("Wrote the cache."),
            // Run 2: the directory becomes ignored and its files links to host paths.
            bash(&format!(
                "printf 'cache/\\n' > .gitignore && rm -rf cache/keep.txt cache/sub && \
                 ln -s '{}' cache/keep.txt && ln -s '{}' cache/sub && ls -l cache",
                victim.display(),
                planted_dir.display()
            )),
            Reply::text("Linked."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please build the cache", "UNDO-ESCAPE").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "go").await,
        "white_check_mark"
    );
    assert_eq!(
        say_and_wait_run(&env, &thread, "now link it").await,
        "white_check_mark"
    );
    let tree = worktree_of(&env, "work-on-undo-escape");
    assert!(
        std::fs::symlink_metadata(tree.join("cache/keep.txt"))
            .unwrap()
            .is_symlink()
    );

    // Undo puts run 2's checkpoint back: cache/keep.txt and cache/sub/new.txt are written.
    let reply = say_and_wait_post(&env, &thread, "undo", "*Coder:*").await;
    assert!(reply.starts_with("*Coder:* Undone"), "{reply}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the host's own file\n",
        "the restore wrote through a symlink into a host file"
    );
    assert_eq!(
        std::fs::read_dir(&planted_dir).unwrap().count(),
        0,
        "the restore created a file in a host directory"
    );
    // The worktree has real files again.
    assert_eq!(
        std::fs::read_to_string(tree.join("cache/keep.txt")).unwrap(),
        "RUNNER-CHOSEN-CONTENT\n"
    );
    assert!(
        !std::fs::symlink_metadata(tree.join("cache/sub"))
            .unwrap()
            .is_symlink()
    );
}

#[tokio::test]
async fn a_commit_never_stages_a_host_file_swapped_in_while_it_reads() {
    let env = boundary_env(256).await;
    let secret = env.outside.path().join("secret.txt");
    env.model.script(
        "SWAP-ESCAPE",
        vec![
            // A background process that keeps swapping an untracked file for a link to a
            // host file holding tokens, and a plain link to it.
            bash(&format!(
                "ln -s '{secret}' direct-link; \
                 (while :; do echo innocent > data.tmp && mv -f data.tmp data.txt; \
                   ln -sfn '{secret}' data.lnk && mv -Tf data.lnk data.txt; done) \
                   >/dev/null 2>&1 & echo $! > swapper.pid; sleep 0.3; echo started",
                secret = secret.display()
            )),
            commit("Add the data"),
            bash("if kill -0 $(cat swapper.pid) 2>/dev/null; then echo SWAPPER-ALIVE; else echo SWAPPER-GONE; fi"),
            commit("Again, with the swapper gone"),
            Reply::text("Committed."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please add the data", "SWAP-ESCAPE").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "go").await,
        "white_check_mark"
    );

    let requests = env.model.requests_for("SWAP-ESCAPE");
    let results = tool_results(&requests.last().unwrap().body);
    assert!(results.contains("committed "), "{results}");
    // GitCommit stopped the background process before the controller staged anything.
    assert!(results.contains("SWAPPER-GONE"), "{results}");
    // Nothing of the host file reached an object store: not the thread's (which the
    // runner can read back), not the main repository's.
    let tree = worktree_of(&env, "work-on-swap-escape");
    for git_dir in [tree.join(".git"), env.repo_path().join(".git")] {
        let objects = all_objects(&git_dir);
        assert!(!objects.is_empty());
        assert!(
            !objects.contains(OUTSIDE_SECRET),
            "the secret is in {}",
            git_dir.display()
        );
    }
    // The links were committed as links (their target paths), never as the file.
    let show = git(
        env.repo_path(),
        &[
            "cat-file",
            "-p",
            "codebutler/work-on-swap-escape:direct-link",
        ],
    );
    assert_eq!(show, secret.display().to_string());
}

#[tokio::test]
async fn a_runner_sees_only_its_own_threads_history() {
    let env = boundary_env(256).await;
    let repo = env.repo_path().to_owned();
    // The person's own things: an unpushed branch, a stash, a credential in the config.
    git(&repo, &["reset", "-q"]);
    git(&repo, &["checkout", "-q", "-b", "my-unpushed-work"]);
    std::fs::write(repo.join("mine.txt"), "PERSON-UNPUSHED-SECRET\n").unwrap();
    git(&repo, &["add", "mine.txt"]);
    git(&repo, &["commit", "-q", "-m", "PERSON-UNPUSHED-SUBJECT"]);
    git(&repo, &["checkout", "-q", "-"]);
    std::fs::write(repo.join("README.md"), "PERSON-STASH-SECRET\n").unwrap();
    git(&repo, &["stash", "-q"]);
    git(
        &repo,
        &[
            "config",
            "http.extraheader",
            "AUTHORIZATION: bearer PERSON-CONFIG-SECRET",
        ],
    );
    env.model.script(
        "THREAD-A",
        vec![
            write("a.txt", "THREAD-A-SECRET\n"),
            commit("THREAD-A-SUBJECT"),
            Reply::text("Done A."),
        ],
    );
    let _daemon = env.start().await;
    let a = thread_with_plan(&env, "please do A", "THREAD-A").await;
    assert_eq!(say_and_wait_run(&env, &a, "go").await, "white_check_mark");
    let commit_a = git(&repo, &["rev-parse", "codebutler/work-on-thread-a"]);
    let stash = git(&repo, &["rev-parse", "refs/stash"]);

    env.model.script(
        "THREAD-B",
        vec![
            bash(&format!(
                "git log --all --format='%H %s'; git branch -a; git stash list; \
                 git cat-file -p {commit_a}; git cat-file -p {stash}; \
                 git show my-unpushed-work:mine.txt; git config --list; \
                 cat {main_config} .git/config; \
                 git cat-file --batch-all-objects --batch | \
                   grep -a -o -e THREAD-A-SECRET -e PERSON-UNPUSHED-SECRET -e PERSON-STASH-SECRET; \
                 ls ../ ../../ 2>&1; echo THE-END",
                main_config = repo.join(".git/config").display(),
            )),
            bash("git log --oneline && git blame README.md && git status --short && git diff"),
            Reply::text("Looked."),
        ],
    );
    let b = thread_with_plan(&env, "please do B", "THREAD-B").await;
    assert_eq!(say_and_wait_run(&env, &b, "go").await, "white_check_mark");
    let requests = env.model.requests_for("THREAD-B");
    let results = tool_results(&requests.last().unwrap().body);
    assert!(results.contains("THE-END"), "{results}");
    for secret in [
        "THREAD-A-SECRET",
        "THREAD-A-SUBJECT",
        "PERSON-UNPUSHED-SECRET",
        "PERSON-UNPUSHED-SUBJECT",
        "PERSON-STASH-SECRET",
        "PERSON-CONFIG-SECRET",
        "codebutler/work-on-thread-a",
    ] {
        assert!(
            !results.contains(secret),
            "{secret} reached thread B:\n{results}"
        );
    }
    // No branch of the person's (the command names it, so look at the listing).
    assert!(!results.contains("  my-unpushed-work"), "{results}");
    // Its everyday git works on its own history.
    assert!(results.contains("Initial commit"), "{results}");
    assert!(results.contains(" 1) # Acme"), "git blame: {results}");
}

#[tokio::test]
async fn a_run_cannot_pass_the_worktrees_disk_total() {
    const TOTAL_MB: u64 = 64;
    // Each worktree's own disk may be 4096 MB, but all of them together only 64.
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 10, "timeout": 2},
        "sandbox": {"diskMB": 4096},
        "access": {"maxWorktreeDiskMB": TOTAL_MB}
    }))
    .await;
    env.model.script(
        "TOTAL-FLOOD",
        vec![
            bash("dd if=/dev/zero of=flood bs=1M count=200 2>&1 | tail -1; echo dd-done"),
            bash("echo still going > after.txt"),
            Reply::text("Flooded."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please flood the total", "TOTAL-FLOOD").await;
    assert_eq!(say_and_wait_run(&env, &thread, "go").await, "x");

    // On the host, the worktrees' disks together stay within the total, and so does what
    // the run wrote.
    let disks = env.repo_path().join(".codebutler/disks");
    let images: Vec<std::fs::Metadata> = std::fs::read_dir(&disks)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "img"))
        .map(|e| e.metadata().unwrap())
        .collect();
    assert_eq!(images.len(), 1);
    let size = images[0].len();
    assert!(size <= TOTAL_MB << 20, "a disk of {size} bytes");
    let allocated = std::os::unix::fs::MetadataExt::blocks(&images[0]) * 512;
    assert!(allocated <= TOTAL_MB << 20, "{allocated} bytes allocated");
    let tree = worktree_of(&env, "work-on-total-flood");
    let written = std::fs::metadata(tree.join("flood")).unwrap().len();
    assert!(written < TOTAL_MB << 20, "{written} bytes written");
    assert!(!tree.join("after.txt").exists());

    // The thread says the disk is full, with its size and where that size came from.
    let texts = env.thread_texts(&thread);
    let full = format!(
        "the worktree's disk is full ({} MB: what access.maxWorktreeDiskMB, {TOTAL_MB} MB for \
         all worktrees, had left when it was made)",
        size >> 20
    );
    assert!(
        texts.iter().any(|t| t.contains(&full)),
        "no {full:?} in {texts:?}"
    );
}

#[tokio::test]
async fn a_run_that_fills_its_disk_stops_and_nothing_else_fills() {
    let env = boundary_env(64).await;
    env.model.script(
        "DISK-FLOOD",
        vec![
            bash("dd if=/dev/zero of=flood bs=1M count=400 2>&1 | tail -1; echo dd-done"),
            bash("echo still going > after.txt"),
            Reply::text("Flooded."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please flood it", "DISK-FLOOD").await;
    assert_eq!(say_and_wait_run(&env, &thread, "go").await, "x");
    // The thread says why the run stopped.
    let posts = env.thread_posts(&thread);
    let summary = posts
        .iter()
        .find(|p| p.text.contains("is full"))
        .unwrap_or_else(|| panic!("no disk-full summary: {posts:?}"));
    assert!(
        summary
            .text
            .contains("the worktree's disk is full (sandbox.diskMB is 64 MB)"),
        "{}",
        summary.text
    );
    // The kernel stopped the writes at the cap; the run went no further.
    let tree = worktree_of(&env, "work-on-disk-flood");
    let written = std::fs::metadata(tree.join("flood")).unwrap().len();
    assert!(written < 64 << 20, "{written} bytes written");
    assert!(!tree.join("after.txt").exists());
    // On the host the whole thread takes what its disk image holds, no more.
    let image = env
        .repo_path()
        .join(".codebutler/disks/work-on-disk-flood.img");
    let allocated =
        std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&image).unwrap()) * 512;
    assert!(allocated <= 65 << 20, "{allocated} bytes allocated");
}
