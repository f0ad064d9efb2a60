//! "rebase" in a thread end to end, through the real daemon, git, the sandboxed Coder, the
//! fake Slack and the fake `gh`, with a bare `origin`: after the default branch moved, the
//! branch gets a merge commit pushed without force; up to date, nothing changes; a conflict
//! is handed to the Coder as a plan, with the markers in the worktree, and its commit
//! becomes the merge, and cancelling it puts the worktree back; a daemon killed while it
//! pushes the merge pushes it and says so once after its restart; and a hostile repository (hooks in the main repository, the worktree
//! and the person's config, filter and merge-driver attributes) runs nothing during a rebase,
//! checked from the host.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use codebutler_test_support::model::Reply;
use git2::{Oid, Repository};
use serde_json::json;

use codebutler_test_support::slack::CHANNEL;

use crate::harness::{
    APPROVE, CANCEL_PLAN, Env, USER, WAIT, runner_env, say_and_wait_post, say_and_wait_run,
    stored_state, thread_with_pr_of, worktree_of, write,
};

/// A thread whose Coder wrote `files`, committed them and opened PR #7 from
/// `codebutler/work-on-<token>`, pushed to a new bare `origin`; returns the thread and
/// the origin's path.
async fn thread_with_pr(env: &Env, token: &str, files: &[(&str, &str)]) -> (String, PathBuf) {
    let mut first_run: Vec<Reply> = files.iter().map(|(p, c)| write(p, c)).collect();
    first_run.extend([
        Reply::tool_call("GitCommit", r#"{"message": "The thread's work"}"#),
        Reply::tool_call("OpenPR", r#"{"title": "Work", "body": "The work."}"#),
        Reply::text("The PR is open."),
    ]);
    thread_with_pr_of(env, &format!("start {token}"), token, first_run, vec![]).await
}

/// Commits `files` on the bare `origin`'s default branch: it moves on, as when another pull
/// request is merged on GitHub.
fn advance_origin(origin: &Path, files: &[(&str, &str)]) -> Oid {
    let bare = Repository::open_bare(origin).unwrap();
    let head = bare.head().unwrap();
    let name = head.name().unwrap().to_owned();
    let parent = head.peel_to_commit().unwrap();
    let mut index = git2::Index::new().unwrap();
    index.read_tree(&parent.tree().unwrap()).unwrap();
    for (path, text) in files {
        let id = bare.blob(text.as_bytes()).unwrap();
        index
            .add(&git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100_644,
                uid: 0,
                gid: 0,
                file_size: 0,
                id,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            })
            .unwrap();
    }
    let tree = bare.find_tree(index.write_tree_to(&bare).unwrap()).unwrap();
    let sig = git2::Signature::now("Someone", "someone@example.com").unwrap();
    bare.commit(
        Some(&name),
        &sig,
        &sig,
        "Another pull request",
        &tree,
        &[&parent],
    )
    .unwrap()
}

/// The commit `branch` points to on the bare `origin`.
fn origin_tip(origin: &Path, branch: &str) -> Oid {
    Repository::open_bare(origin)
        .unwrap()
        .refname_to_id(&format!("refs/heads/{branch}"))
        .unwrap()
}

/// The parents of `id` on the bare `origin`.
fn parents(origin: &Path, id: Oid) -> Vec<Oid> {
    Repository::open_bare(origin)
        .unwrap()
        .find_commit(id)
        .unwrap()
        .parent_ids()
        .collect()
}

/// A file of `commit` on the bare `origin`.
fn file_at(origin: &Path, commit: Oid, path: &str) -> String {
    let bare = Repository::open_bare(origin).unwrap();
    let tree = bare.find_commit(commit).unwrap().tree().unwrap();
    let blob = bare
        .find_blob(tree.get_path(Path::new(path)).unwrap().id())
        .unwrap();
    String::from_utf8(blob.content().to_vec()).unwrap()
}

/// The bare `origin`'s default branch, as the thread names it (`main` or `master`).
fn default_branch(origin: &Path) -> String {
    let bare = Repository::open_bare(origin).unwrap();
    bare.head().unwrap().shorthand().unwrap().to_owned()
}

fn short(id: Oid) -> String {
    id.to_string()[..7].to_owned()
}

#[tokio::test]
async fn rebase_merges_the_moved_default_branch_and_pushes_without_force() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "REBASE-CLEAN", &[("notes.txt", "mine\n")]).await;
    let branch = "codebutler/work-on-rebase-clean";
    let pushed = origin_tip(&origin, branch);
    advance_origin(&origin, &[("other.txt", "first\n")]);
    let main_head = advance_origin(&origin, &[("other.txt", "second\n")]);

    let main = default_branch(&origin);
    let reply = say_and_wait_post(&env, &thread, "rebase", "*PM:* ").await;
    assert_eq!(
        reply,
        format!(
            "*PM:* Merged `{main}` ({}, 2 commits) into this branch and pushed; PR #7 updated.",
            short(main_head)
        )
    );
    let tip = origin_tip(&origin, branch);
    assert_eq!(parents(&origin, tip), [pushed, main_head], "a merge commit");
    let bare = Repository::open_bare(&origin).unwrap();
    assert!(
        bare.graph_descendant_of(tip, pushed).unwrap(),
        "no forced update: the pushed head is in the new one's history"
    );
    assert_eq!(file_at(&origin, tip, "notes.txt"), "mine\n");
    assert_eq!(file_at(&origin, tip, "other.txt"), "second\n");
    let tree = worktree_of(&env, "work-on-rebase-clean");
    assert_eq!(
        std::fs::read_to_string(tree.join("other.txt")).unwrap(),
        "second\n",
        "the worktree has the merge"
    );

    // Up to date now: nothing changes.
    let again = say_and_wait_post(&env, &thread, "update the branch", "*PM:* ").await;
    assert_eq!(
        again,
        format!(
            "*PM:* This branch already has `{main}` ({}): it is up to date, nothing changed.",
            short(main_head)
        )
    );
    assert_eq!(origin_tip(&origin, branch), tip);
    assert_eq!(stored_state(&env, &thread).await, "pr_opened");
    env.assert_clean();
}

#[tokio::test]
async fn a_conflict_is_resolved_by_the_coder_after_approval_and_becomes_the_merge() {
    let env = runner_env(json!({"maxTurns": 8, "timeout": 2})).await;
    let _daemon = env.start().await;
    let token = "REBASE-CONFLICT";
    let (thread, origin) = thread_with_pr(
        &env,
        token,
        &[("Makefile", "deploy:\n\thelm upgrade app\n")],
    )
    .await;
    let branch = "codebutler/work-on-rebase-conflict";
    let pushed = origin_tip(&origin, branch);
    let main_head = advance_origin(&origin, &[("Makefile", "deploy:\n\tterraform apply\n")]);

    let proposal = say_and_wait_post(&env, &thread, "rebase", "*PM:* Merging").await;
    let (sha, main) = (short(main_head), default_branch(&origin));
    assert!(
        proposal.starts_with(&format!(
            "*PM:* Merging `{main}` ({sha}, 1 commit) into this branch conflicts in `Makefile`."
        )),
        "{proposal}"
    );
    assert!(
        proposal.contains(&format!(
            "Resolve the conflicts with `{main}` ({sha}): `Makefile`"
        )),
        "{proposal}"
    );
    let with_buttons = env
        .thread_posts(&thread)
        .into_iter()
        .rfind(|p| p.text.starts_with("*PM:* Merging"))
        .unwrap();
    assert!(
        with_buttons.blocks.unwrap().to_string().contains(APPROVE),
        "approved like a PM plan"
    );
    let tree = worktree_of(&env, "work-on-rebase-conflict");
    let marked = std::fs::read_to_string(tree.join("Makefile")).unwrap();
    assert_eq!(
        marked,
        format!(
            "deploy:\n<<<<<<< codebutler/work-on-rebase-conflict\n\thelm upgrade app\n=======\n\tterraform apply\n>>>>>>> origin/{main}\n"
        )
    );
    assert_eq!(origin_tip(&origin, branch), pushed, "nothing pushed yet");
    assert_eq!(stored_state(&env, &thread).await, "plan_pending");

    // The Coder resolves, commits (the merge) and pushes through OpenPR.
    env.model.script(
        token,
        vec![
            write(
                "Makefile",
                "deploy:\n\tterraform apply\n\thelm upgrade app\n",
            ),
            Reply::tool_call(
                "GitCommit",
                r#"{"message": "Resolve the conflicts with main"}"#,
            ),
            Reply::tool_call("OpenPR", r#"{"title": "Work", "body": "The work."}"#),
            Reply::text("Resolved."),
        ],
    );
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let asked = env.model.requests_for(token);
    let resolution = asked
        .iter()
        .find(|r| r.body.to_string().contains("approved this plan"))
        .expect("the Coder got the plan");
    assert!(
        resolution
            .body
            .to_string()
            .contains(&format!("Resolve the conflicts with `{main}`")),
        "{}",
        resolution.body
    );
    let tip = origin_tip(&origin, branch);
    assert_eq!(
        parents(&origin, tip),
        [pushed, main_head],
        "the merge commit"
    );
    assert_eq!(
        file_at(&origin, tip, "Makefile"),
        "deploy:\n\tterraform apply\n\thelm upgrade app\n"
    );
    assert_eq!(
        stored_state(&env, &thread).await,
        "pr_opened",
        "its PR is still open"
    );
    let up_to_date = say_and_wait_post(&env, &thread, "rebase", "*PM:* ").await;
    assert!(up_to_date.contains("it is up to date"), "{up_to_date}");
    env.assert_clean();
}

#[tokio::test]
async fn cancelling_the_resolution_puts_the_worktree_back() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let _daemon = env.start().await;
    let (thread, origin) =
        thread_with_pr(&env, "REBASE-CANCEL", &[("Makefile", "deploy:\n\tmine\n")]).await;
    advance_origin(
        &origin,
        &[("Makefile", "deploy:\n\ttheirs\n"), ("new.txt", "n\n")],
    );
    say_and_wait_post(&env, &thread, "rebase", "*PM:* Merging").await;
    let tree = worktree_of(&env, "work-on-rebase-cancel");
    assert!(tree.join("new.txt").exists());

    let proposal = env
        .thread_posts(&thread)
        .into_iter()
        .rfind(|p| p.text.starts_with("*PM:* Merging"))
        .unwrap();
    let before = env.thread_posts(&thread).len();
    env.slack
        .click(CHANNEL, USER, &proposal.ts, CANCEL_PLAN)
        .expect("the proposal has a Cancel button");
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(&thread).iter().skip(before).any(|p| {
                p.text
                    .starts_with("*PM:* Plan withdrawn, and the merge with it")
            })
        })
        .await;
    assert!(ok, "posts: {:?}", env.post_texts(&thread));
    assert_eq!(
        std::fs::read_to_string(tree.join("Makefile")).unwrap(),
        "deploy:\n\tmine\n"
    );
    assert!(!tree.join("new.txt").exists());
    assert_eq!(stored_state(&env, &thread).await, "pr_opened");
}

#[tokio::test]
async fn a_daemon_killed_while_pushing_the_merge_pushes_and_says_it_once_after_restart() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let mut daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "REBASE-CRASH", &[("notes.txt", "mine\n")]).await;
    let branch = "codebutler/work-on-rebase-crash";
    let pushed = origin_tip(&origin, branch);
    let main_head = advance_origin(&origin, &[("other.txt", "theirs\n")]);
    // The server holds the push (its own hook) until the test lets it go, then refuses it:
    // the daemon dies while its push is in flight and that push never lands.
    let (started, release) = (
        env.outside.path().join("push-started"),
        env.outside.path().join("push-release"),
    );
    let hook = origin.join("hooks/pre-receive");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch '{}'\nwhile [ ! -e '{}' ]; do sleep 0.1; done\nexit 1\n",
            started.display(),
            release.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();

    env.reply(&thread, "rebase");
    let ok = env.slack.wait_until(WAIT, || started.exists()).await;
    assert!(ok, "the push never started: {:?}", env.post_texts(&thread));
    daemon.kill9().await;
    std::fs::remove_file(&hook).unwrap();
    std::fs::write(&release, "").unwrap();
    assert_eq!(origin_tip(&origin, branch), pushed, "nothing pushed");

    let _daemon = env.start().await;
    let merged = |env: &Env| -> Vec<String> {
        env.post_texts(&thread)
            .into_iter()
            .filter(|t| t.starts_with("*PM:* Merged"))
            .collect()
    };
    let ok = env
        .slack
        .wait_until(WAIT, || !merged(&env).is_empty())
        .await;
    assert!(ok, "{:?}", env.post_texts(&thread));
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(merged(&env).len(), 1, "said once: {:?}", merged(&env));
    assert!(merged(&env)[0].contains("and pushed; PR #7 updated."));
    let tip = origin_tip(&origin, branch);
    assert_eq!(
        parents(&origin, tip),
        [pushed, main_head],
        "one merge commit"
    );
    crate::harness::assert_each_effect_posted_once(&env);
    env.assert_clean();
}

/// An executable script at `path` that creates `marker` when anything runs it.
fn trap(path: &Path, marker: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Git config that runs `trap` for hooks (from `hooks`), filters and merge drivers.
fn hostile_config(hooks: &Path, trap: &Path) -> String {
    let t = trap.display();
    format!(
        "[core]\n\thooksPath = {}\n[filter \"evil\"]\n\tclean = {t}\n\tsmudge = {t}\n\tprocess = {t}\n\trequired = true\n[merge \"evil\"]\n\tdriver = {t} %O %A %B\n[diff \"evil\"]\n\ttextconv = {t}\n",
        hooks.display()
    )
}

#[tokio::test]
async fn a_hostile_repository_runs_nothing_during_a_rebase() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let _daemon = env.start().await;
    // The branch asks for filters and merge drivers on every file and ignores the hooks the
    // runner leaves in the worktree.
    let (thread, origin) = thread_with_pr(
        &env,
        "REBASE-HOSTILE",
        &[
            (".gitattributes", "* filter=evil merge=evil diff=evil\n"),
            (".gitignore", "hooks/\n"),
            ("notes.txt", "mine\n"),
        ],
    )
    .await;
    let branch = "codebutler/work-on-rebase-hostile";
    let pushed = origin_tip(&origin, branch);
    let tree = worktree_of(&env, "work-on-rebase-hostile");
    let markers = env.outside.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    const HOOKS: [&str; 9] = [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "pre-merge-commit",
        "post-merge",
        "post-checkout",
        "pre-push",
        "reference-transaction",
        "post-rewrite",
    ];
    // Hooks in the worktree (where a runner can write), in the main repository, and a
    // program for every filter and merge driver; the person's global config and the main
    // repository's config point git at all of them.
    let worktree_hooks = tree.join("hooks");
    let main_hooks = env.repo_path().join(".git/hooks");
    for hook in HOOKS {
        trap(
            &worktree_hooks.join(hook),
            &markers.join(format!("worktree-{hook}")),
        );
        trap(
            &main_hooks.join(hook),
            &markers.join(format!("main-{hook}")),
        );
    }
    let program = env.outside.path().join("filter");
    trap(&program, &markers.join("filter-or-driver"));
    let config = hostile_config(&worktree_hooks, &program);
    std::fs::write(env.home.path().join(".gitconfig"), &config).unwrap();
    let main_config = env.repo_path().join(".git/config");
    let mut person = std::fs::read_to_string(&main_config).unwrap();
    person.push_str(&config);
    std::fs::write(&main_config, person).unwrap();
    // The bare origin stands in for GitHub, whose side of a push runs GitHub's hooks, not
    // the person's: git runs a local remote's receive-pack with the person's global config,
    // so it is given hooks of its own (none).
    let server = std::fs::read_to_string(origin.join("config")).unwrap();
    std::fs::write(
        origin.join("config"),
        format!(
            "{server}[core]\n\thooksPath = {}\n",
            origin.join("no-hooks").display()
        ),
    )
    .unwrap();
    // The default branch moves on with a file of its own.
    let main_head = advance_origin(&origin, &[("other.txt", "theirs\n")]);

    let reply = say_and_wait_post(&env, &thread, "rebase", "*PM:* ").await;
    assert!(
        reply.starts_with("*PM:* Merged `") && reply.contains("and pushed"),
        "{reply}"
    );
    let tip = origin_tip(&origin, branch);
    assert_eq!(parents(&origin, tip), [pushed, main_head]);
    assert_eq!(
        std::fs::read_dir(&markers).unwrap().count(),
        0,
        "something ran: {:?}",
        std::fs::read_dir(&markers)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    // The files are as committed, not as a filter would have made them.
    assert_eq!(
        std::fs::read_to_string(tree.join("other.txt")).unwrap(),
        "theirs\n"
    );
}
