//! Files the controller itself commits on a `codebutler/` branch — approved memory, the
//! thread's journal — as opposed to the Coder's commits of its worktree ([`super::forge`]).
//!
//! Two cases:
//!
//! - [`commit_to_thread_branch`]: the thread has a worktree and branch. The commit is the
//!   branch head's tree with exactly the given files replaced or added, made in the thread's
//!   own repository and mirrored to the main repository like the Coder's commits. The
//!   worktree must get the same files, or the Coder's next commit (a snapshot of the whole
//!   worktree) would revert them; they are written by the sandboxed worktree helper
//!   ([`super::stage`]: snapshot the worktree, replace the files in that tree, restore it),
//!   never by the controller opening worktree paths, so a symlink the runner planted at a
//!   file's path is replaced, not followed. No process of the thread's run may be alive
//!   meanwhile (the caller makes sure: the same rule as a checkpoint's restore).
//! - [`commit_on_new_branch`]: the thread has no branch (no pull request); the commit goes in
//!   the main repository on a new `codebutler/` branch from the default branch's tip, without
//!   touching the default branch, the checkout or its index. [`forge::push_to_origin`] pushes it.
//!
//! Everything is git2 (no hooks, no filters, no repository config of the runner's); paths are
//! checked as the worktree helper's wire format checks them (relative, no `..`, nothing under
//! `.git`). Blocking (git2) except the push: call from `spawn_blocking`.

use std::path::Path;

use codebutler_sandbox::worktree_wire;
use git2::{Oid, Repository};

use super::forge::{self, Commit, ForgeError};
use super::stage::{self, Helper};
use super::step_error::git;
use super::thread_repo::{self, ThreadRepoError};
use super::thread_repo::{BOT_EMAIL, BOT_NAME, MAX_COMMIT_FILE_BYTES};

/// Refuses a path that cannot name a file of a git tree, or one under `.git`.
fn check_paths(files: &[(String, Vec<u8>)]) -> Result<(), ForgeError> {
    for (path, _) in files {
        worktree_wire::check_path(path.as_bytes()).map_err(|reason| {
            ForgeError::Thread(ThreadRepoError::Invalid(format!(
                "refusing to commit the file {path:?}: its path {reason}"
            )))
        })?;
    }
    Ok(())
}

/// `tree` of `repo` with each of `files` written as a new blob (a regular file) at its path.
fn replace_in_tree(
    repo: &Repository,
    tree: Oid,
    files: &[(String, Vec<u8>)],
) -> Result<Oid, ForgeError> {
    let base = repo.find_tree(tree).map_err(git("read the tree"))?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    for (path, content) in files {
        let blob = repo.blob(content).map_err(git(format!("store {path}")))?;
        update.upsert(path.as_str(), blob, git2::FileMode::Blob);
    }
    Ok(update
        .create_updated(repo, &base)
        .map_err(git("write the new tree"))?)
}

/// The paths whose entry differs between two trees, sorted.
fn changed_paths(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<String>, ForgeError> {
    let old = repo.find_tree(old).map_err(git("read the old tree"))?;
    let new = repo.find_tree(new).map_err(git("read the new tree"))?;
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(git("diff the commit"))?;
    let mut paths: Vec<String> = diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// Commits `files` (repository-relative paths and their full content) on the thread's
/// `codebutler/` branch — the branch head's tree with exactly these files replaced or added —
/// as CodeButler, writes the same files into the worktree through the sandboxed `helper`
/// (the worktree's other changes, committed or not, stay as they are), and copies the branch
/// to the main repository `main`. Push it with [`forge::push_branch`]. Files that already
/// hold this content make no commit (`nothing_to_commit`). Refuses bad paths, an empty
/// message, a HEAD not on a `codebutler/` branch, and a worktree holding files too large to
/// carry over. No process of the thread's run may be alive. Blocking.
pub fn commit_to_thread_branch(
    helper: &Helper,
    main: &Path,
    worktree: &Path,
    files: &[(String, Vec<u8>)],
    message: &str,
) -> Result<Commit, ForgeError> {
    if message.trim().is_empty() {
        return Err(ForgeError::EmptyMessage);
    }
    check_paths(files)?;
    let branch = forge::worktree_branch(worktree)?;
    let repo = thread_repo::open(worktree)?;
    let parent = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's last commit"))?;
    let tree = replace_in_tree(&repo, parent.tree_id(), files)?;
    if tree == parent.tree_id() {
        return Ok(Commit::nothing());
    }

    // The worktree first: should this fail, the branch is untouched and nothing is half done.
    let current = stage::snapshot(helper, &repo, MAX_COMMIT_FILE_BYTES)?;
    if !current.skipped.is_empty() {
        return Err(ForgeError::TooLarge(
            current
                .skipped
                .iter()
                .map(|(path, size)| format!("{path} ({} MB)", size >> 20))
                .collect(),
        ));
    }
    let current_tree = stage::index_of(&current.files)?
        .write_tree_to(&repo)
        .map_err(git("write the worktree's tree"))?;
    let wanted = replace_in_tree(&repo, current_tree, files)?;
    if wanted != current_tree {
        let written = stage::restore(helper, &repo, wanted)?;
        stage::write_index(&repo, &written.files)?;
    }

    let files_changed = changed_paths(&repo, parent.tree_id(), tree)?;
    let tree = repo.find_tree(tree).map_err(git("read the new tree"))?;
    forge::commit_as_bot(
        main,
        &repo,
        &branch,
        &[&parent],
        &tree,
        message,
        files_changed,
    )
}

/// Commits `files` in the main repository `main` on the new branch `branch` (a
/// `codebutler/` one) from the commit `base` (the default branch's tip): `base`'s tree with
/// exactly these files replaced or added, as CodeButler. Never touches the default branch,
/// HEAD, the index or the checkout. An existing `branch` is moved only from `base` itself;
/// one that already holds this very change on top of `base` (a retry after a crash) is
/// returned as it is; any other existing branch is refused. Blocking.
pub fn commit_on_new_branch(
    main: &Path,
    base: &str,
    branch: &str,
    files: &[(String, Vec<u8>)],
    message: &str,
) -> Result<Commit, ForgeError> {
    if message.trim().is_empty() {
        return Err(ForgeError::EmptyMessage);
    }
    if !thread_repo::is_our_branch(branch) {
        return Err(ForgeError::NotOurBranch {
            branch: branch.to_owned(),
        });
    }
    check_paths(files)?;
    let repo = Repository::open(main).map_err(git(format!("open {}", main.display())))?;
    let base_id = Oid::from_str(base).map_err(git("read the base commit"))?;
    let base_commit = repo
        .find_commit(base_id)
        .map_err(git(format!("find the base commit {base}")))?;
    let tree = replace_in_tree(&repo, base_commit.tree_id(), files)?;
    let files_changed = changed_paths(&repo, base_commit.tree_id(), tree)?;
    let refname = format!("refs/heads/{branch}");
    if let Ok(existing) = repo.refname_to_id(&refname)
        && existing != base_id
    {
        let tip = repo
            .find_commit(existing)
            .map_err(git(format!("read {branch}")))?;
        if tip.parent_ids().eq([base_id]) && tip.tree_id() == tree {
            return Ok(Commit {
                sha: existing.to_string(),
                files_changed,
                nothing_to_commit: false,
                left_out: Vec::new(),
            });
        }
        return Err(ForgeError::Thread(ThreadRepoError::Invalid(format!(
            "refusing to move the branch {branch}: it already exists at {existing}, which is not \
             this change on top of {base}"
        ))));
    }
    if tree == base_commit.tree_id() {
        return Ok(Commit::nothing());
    }
    let tree = repo.find_tree(tree).map_err(git("read the new tree"))?;
    let signature = git2::Signature::now(BOT_NAME, BOT_EMAIL).map_err(git("make the signature"))?;
    let oid = repo
        .commit(
            None,
            &signature,
            &signature,
            message,
            &tree,
            &[&base_commit],
        )
        .map_err(git("commit"))?;
    let reflog = "codebutler: memory";
    match repo.refname_to_id(&refname) {
        Ok(existing) => repo.reference_matching(&refname, oid, true, existing, reflog),
        Err(_) => repo.reference(&refname, oid, false, reflog),
    }
    .map_err(git(format!("create {branch}")))?;
    Ok(Commit {
        sha: oid.to_string(),
        files_changed,
        nothing_to_commit: false,
        left_out: Vec::new(),
    })
}

/// The content of `path` in the tree of `commit` of `repo`, if it is a regular file there.
pub fn read_file_at(
    repo: &Repository,
    commit: Oid,
    path: &str,
) -> Result<Option<Vec<u8>>, ForgeError> {
    let commit = repo
        .find_commit(commit)
        .map_err(git(format!("find the commit {commit}")))?;
    let tree = commit.tree().map_err(git("read the commit's tree"))?;
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    // Regular files only: a symlink's blob is its target, not the file.
    if !matches!(entry.filemode(), 0o100_644 | 0o100_755) {
        return Ok(None);
    }
    let blob = repo
        .find_blob(entry.id())
        .map_err(git(format!("read {path}")))?;
    Ok(Some(blob.content().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::workspace::stage::test_support::{ThreadFixture, commit_worktree};

    const MEMORY: &str = ".codebutler/memory/pm.md";

    fn file(path: &str, text: &str) -> (String, Vec<u8>) {
        (path.to_owned(), text.as_bytes().to_vec())
    }

    fn branch_tree(f: &ThreadFixture) -> (Repository, Oid) {
        let repo = thread_repo::open(f.worktree()).unwrap();
        let head = repo.head().unwrap().peel_to_commit().unwrap().id();
        (repo, head)
    }

    fn text_at(repo: &Repository, commit: Oid, path: &str) -> Option<String> {
        read_file_at(repo, commit, path)
            .unwrap()
            .map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn only_the_named_files_change_on_the_branch_and_in_the_worktree() {
        let f = ThreadFixture::new(&[("a.txt", "a\n"), (MEMORY, "## Project Knowledge\n")]);
        // Uncommitted work of the Coder's stays uncommitted and untouched.
        std::fs::write(f.worktree().join("a.txt"), "changed\n").unwrap();
        std::fs::write(f.worktree().join("new.txt"), "new\n").unwrap();
        let (_, before) = branch_tree(&f);

        let commit = commit_to_thread_branch(
            &f.helper(),
            f.main(),
            f.worktree(),
            &[file(MEMORY, "## Project Knowledge\n- tests use nextest\n")],
            "Memory: one line",
        )
        .unwrap();

        assert!(!commit.nothing_to_commit);
        assert_eq!(commit.files_changed, vec![MEMORY.to_owned()]);
        let (repo, head) = branch_tree(&f);
        assert_eq!(head.to_string(), commit.sha);
        let made = repo.find_commit(head).unwrap();
        assert_eq!(made.parent_ids().collect::<Vec<_>>(), vec![before]);
        assert_eq!(made.author().name().ok(), Some(BOT_NAME));
        assert_eq!(made.author().email().ok(), Some(BOT_EMAIL));
        assert_eq!(text_at(&repo, head, "a.txt").as_deref(), Some("a\n"));
        assert_eq!(text_at(&repo, head, "new.txt"), None);
        assert_eq!(
            text_at(&repo, head, MEMORY).as_deref(),
            Some("## Project Knowledge\n- tests use nextest\n")
        );
        // The worktree has the memory file, and the Coder's changes as they were.
        let wt = f.worktree();
        assert_eq!(
            std::fs::read_to_string(wt.join(MEMORY)).unwrap(),
            "## Project Knowledge\n- tests use nextest\n"
        );
        assert_eq!(
            std::fs::read_to_string(wt.join("a.txt")).unwrap(),
            "changed\n"
        );
        assert_eq!(
            std::fs::read_to_string(wt.join("new.txt")).unwrap(),
            "new\n"
        );
        // Mirrored into the main repository.
        let main = Repository::open(f.main()).unwrap();
        assert_eq!(main.refname_to_id("refs/heads/codebutler/t").unwrap(), head);
        assert!(main.find_commit(head).is_ok());

        // The same content again commits nothing.
        let again = commit_to_thread_branch(
            &f.helper(),
            f.main(),
            f.worktree(),
            &[file(MEMORY, "## Project Knowledge\n- tests use nextest\n")],
            "Memory: one line",
        )
        .unwrap();
        assert!(again.nothing_to_commit);
        assert_eq!(branch_tree(&f).1, head);
    }

    #[test]
    fn the_next_commit_of_the_worktree_keeps_the_memory_change() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        commit_to_thread_branch(
            &f.helper(),
            f.main(),
            f.worktree(),
            &[file(MEMORY, "- learned\n")],
            "Memory",
        )
        .unwrap();
        assert_eq!(f.git_status(), "", "the worktree matches the branch");
        std::fs::write(f.worktree().join("a.txt"), "b\n").unwrap();
        let next = commit_worktree(&f, "The Coder's next commit");
        let (repo, _) = branch_tree(&f);
        assert_eq!(text_at(&repo, next, MEMORY).as_deref(), Some("- learned\n"));
        assert_eq!(text_at(&repo, next, "a.txt").as_deref(), Some("b\n"));
    }

    #[test]
    fn a_symlink_planted_at_the_memory_path_is_not_followed() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        // A host file outside the worktree, and the runner's link to it at the memory path.
        let host = f.dir.path().join("host-secret.txt");
        std::fs::write(&host, "host\n").unwrap();
        let dir = f.worktree().join(".codebutler/memory");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&host, dir.join("pm.md")).unwrap();

        let commit = commit_to_thread_branch(
            &f.helper(),
            f.main(),
            f.worktree(),
            &[file(MEMORY, "- approved\n")],
            "Memory",
        )
        .unwrap();

        assert_eq!(std::fs::read_to_string(&host).unwrap(), "host\n");
        let meta = std::fs::symlink_metadata(f.worktree().join(MEMORY)).unwrap();
        assert!(
            meta.file_type().is_file(),
            "the link was replaced by the file"
        );
        assert_eq!(
            std::fs::read_to_string(f.worktree().join(MEMORY)).unwrap(),
            "- approved\n"
        );
        let (repo, head) = branch_tree(&f);
        assert_eq!(head.to_string(), commit.sha);
        assert_eq!(
            text_at(&repo, head, MEMORY).as_deref(),
            Some("- approved\n")
        );
    }

    #[test]
    fn hostile_paths_and_other_branches_are_refused() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let (_, before) = branch_tree(&f);
        for path in [
            "../escape.md",
            "/etc/passwd",
            ".git/hooks/pre-commit",
            "dir/.GIT/config",
            "a//b",
            "",
        ] {
            let err = commit_to_thread_branch(
                &f.helper(),
                f.main(),
                f.worktree(),
                &[file(path, "x\n")],
                "Memory",
            )
            .unwrap_err();
            assert!(
                err.to_string().contains("refusing to commit"),
                "{path}: {err}"
            );
            let err = commit_on_new_branch(
                f.main(),
                &before.to_string(),
                "codebutler/memory-x",
                &[file(path, "x\n")],
                "Memory",
            )
            .unwrap_err();
            assert!(
                err.to_string().contains("refusing to commit"),
                "{path}: {err}"
            );
        }
        assert_eq!(branch_tree(&f).1, before);
        assert!(!f.dir.path().join("escape.md").exists());

        let err = commit_on_new_branch(
            f.main(),
            &before.to_string(),
            "main",
            &[file(MEMORY, "x\n")],
            "Memory",
        )
        .unwrap_err();
        assert!(matches!(err, ForgeError::NotOurBranch { .. }), "{err}");
    }

    #[test]
    fn a_new_branch_gets_the_files_without_touching_the_default_branch() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let main = Repository::open(f.main()).unwrap();
        let tip = main.refname_to_id("refs/heads/main").unwrap();
        std::fs::write(f.main().join("a.txt"), "local edit\n").unwrap();

        let commit = commit_on_new_branch(
            f.main(),
            &tip.to_string(),
            "codebutler/memory-deploys",
            &[file(MEMORY, "- deploys are on fridays\n")],
            "Memory from a thread",
        )
        .unwrap();

        let id = Oid::from_str(&commit.sha).unwrap();
        assert_eq!(
            main.refname_to_id("refs/heads/codebutler/memory-deploys")
                .unwrap(),
            id
        );
        assert_eq!(main.refname_to_id("refs/heads/main").unwrap(), tip);
        assert_eq!(main.head().unwrap().name().ok(), Some("refs/heads/main"));
        assert_eq!(
            std::fs::read_to_string(f.main().join("a.txt")).unwrap(),
            "local edit\n"
        );
        assert!(
            !f.main().join(MEMORY).exists(),
            "the checkout was not touched"
        );
        assert_eq!(
            text_at(&main, id, MEMORY).as_deref(),
            Some("- deploys are on fridays\n")
        );
        assert_eq!(text_at(&main, id, "a.txt").as_deref(), Some("a\n"));
        assert_eq!(
            main.find_commit(id)
                .unwrap()
                .parent_ids()
                .collect::<Vec<_>>(),
            vec![tip]
        );

        // A retry of the same change finds it done; another change is refused.
        let again = commit_on_new_branch(
            f.main(),
            &tip.to_string(),
            "codebutler/memory-deploys",
            &[file(MEMORY, "- deploys are on fridays\n")],
            "Memory from a thread",
        )
        .unwrap();
        assert_eq!(again.sha, commit.sha);
        let err = commit_on_new_branch(
            f.main(),
            &tip.to_string(),
            "codebutler/memory-deploys",
            &[file(MEMORY, "- something else\n")],
            "Memory from a thread",
        )
        .unwrap_err();
        assert!(err.to_string().contains("refusing to move"), "{err}");
        assert_eq!(
            main.refname_to_id("refs/heads/codebutler/memory-deploys")
                .unwrap(),
            id
        );
    }

    #[tokio::test]
    async fn a_new_branch_is_pushed_to_origin() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let bare_path = f.dir.path().join("origin.git");
        let bare = Repository::init_bare(&bare_path).unwrap();
        let main = Repository::open(f.main()).unwrap();
        main.remote("origin", bare_path.to_str().unwrap()).unwrap();
        let tip = main.refname_to_id("refs/heads/main").unwrap();
        let commit = commit_on_new_branch(
            f.main(),
            &tip.to_string(),
            "codebutler/memory-x",
            &[file(MEMORY, "- x\n")],
            "Memory",
        )
        .unwrap();
        forge::push_to_origin(f.main(), "codebutler/memory-x")
            .await
            .unwrap();
        assert_eq!(
            bare.refname_to_id("refs/heads/codebutler/memory-x")
                .unwrap()
                .to_string(),
            commit.sha
        );
        assert!(bare.refname_to_id("refs/heads/main").is_err());
        let err = forge::push_to_origin(f.main(), "main").await.unwrap_err();
        assert!(matches!(err, ForgeError::NotOurBranch { .. }), "{err}");
    }
}
