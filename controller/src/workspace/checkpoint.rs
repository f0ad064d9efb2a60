//! Checkpoints of a run's worktree for "undo": before each run the controller records the
//! worktree's files (tracked and untracked, ignored ones left out) as a git tree in the
//! thread's own repository, and the branch's head. Restoring puts those files back and, when
//! its commits were not pushed, moves the branch back.
//!
//! The worktree's files are read and written only by the sandboxed worktree helper
//! ([`super::stage`]): a symlink the runner left, in an ignored directory or anywhere, can
//! never make the controller read a host file into a checkpoint or write through it on a
//! restore. Checkpoints stay in the thread's repository, which only that thread's runner
//! can read, on the thread's own disk.

use std::path::Path;

use super::stage::{self, Helper, StageError};
use super::step_error::{GitStepError, git};
use super::thread_repo::{self, ThreadRepoError};

/// How big a file may be to go into a checkpoint; bigger ones are left out (build outputs,
/// data dumps) rather than copied into the object store.
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// A worktree's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The files, as a git tree id (hex).
    pub tree: String,
    /// The branch's head commit (hex).
    pub head: String,
}

/// What a restore did with the branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// No commit was made since the checkpoint: the branch is where it was.
    Unchanged,
    /// The commits since the checkpoint were dropped: the branch is back at its head.
    MovedBack,
    /// The commits since were already pushed, so they stay (history others can see is
    /// never rewritten); the restored files are uncommitted changes instead.
    KeptPushed,
}

/// What a restore did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    pub head: Head,
}

/// A checkpoint could not be taken or restored.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error("{step}: {message}")]
    Step { step: String, message: String },
}

fn fail<E: std::fmt::Display>(step: &str) -> impl FnOnce(E) -> CheckpointError + '_ {
    move |e| CheckpointError::Step {
        step: step.to_owned(),
        message: e.to_string(),
    }
}

/// Records the worktree's current files as a tree of its thread repository. Blocking: call
/// it from `spawn_blocking`.
pub fn snapshot(helper: &Helper, worktree: &Path) -> Result<Snapshot, CheckpointError> {
    let repo = thread_repo::open(worktree).map_err(fail::<ThreadRepoError>("open the worktree"))?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's head"))?;
    let files = stage::snapshot(helper, &repo, MAX_FILE_BYTES)
        .map_err(fail::<StageError>("read the worktree's files"))?;
    for (path, size) in &files.skipped {
        tracing::info!(
            "checkpoint of {}: left out {path} ({size} bytes)",
            worktree.display()
        );
    }
    let mut index = stage::index_of(&files.files).map_err(fail::<StageError>("index the files"))?;
    let tree = index
        .write_tree_to(&repo)
        .map_err(git("write the checkpoint's tree"))?;
    Ok(Snapshot {
        tree: tree.to_string(),
        head: head.id().to_string(),
    })
}

/// Puts the worktree back to `snapshot`: its files (ignored files such as build caches stay)
/// and, unless those commits were pushed, the branch's head, here and in the main
/// repository `main`. Blocking.
pub fn restore(
    helper: &Helper,
    main: &Path,
    worktree: &Path,
    snapshot: &Snapshot,
) -> Result<Restored, CheckpointError> {
    let repo = thread_repo::open(worktree).map_err(fail::<ThreadRepoError>("open the worktree"))?;
    let tree = git2::Oid::from_str(&snapshot.tree).map_err(git("read the checkpoint"))?;
    repo.find_tree(tree)
        .map_err(git("find the checkpoint's files"))?;
    let old_head = git2::Oid::from_str(&snapshot.head).map_err(git("read the checkpoint"))?;
    let head_ref = repo.head().map_err(git("read HEAD"))?;
    let branch = head_ref
        .name()
        .ok()
        .filter(|n| n.starts_with("refs/heads/codebutler/"))
        .ok_or_else(|| CheckpointError::Step {
            step: "check the branch".into(),
            message: "the worktree is not on a codebutler/ branch".into(),
        })?
        .to_owned();
    let current = head_ref.peel_to_commit().map_err(git("read HEAD"))?.id();
    let head = if current == old_head {
        Head::Unchanged
    } else if pushed_beyond(&repo, &branch, old_head) {
        Head::KeptPushed
    } else {
        repo.find_commit(old_head)
            .map_err(git("find the checkpoint's commit"))?;
        Head::MovedBack
    };
    let files = stage::restore(helper, &repo, tree)
        .map_err(fail::<StageError>("write the checkpoint's files"))?;
    stage::write_index(&repo, &files.files).map_err(fail::<StageError>("index the files"))?;
    if head == Head::MovedBack {
        repo.reference(&branch, old_head, true, "codebutler: undo")
            .map_err(git("move the branch back"))?;
        let short = branch.trim_start_matches("refs/heads/");
        thread_repo::mirror(main, &repo, short).map_err(fail::<ThreadRepoError>(
            "move the branch back in the repository",
        ))?;
    }
    Ok(Restored { head })
}

/// Whether `origin` already has commits of `branch` after `head` (as the thread repository
/// recorded at its last push).
fn pushed_beyond(repo: &git2::Repository, branch: &str, head: git2::Oid) -> bool {
    let short = branch.trim_start_matches("refs/heads/");
    let Ok(remote) = repo.refname_to_id(&format!("refs/remotes/origin/{short}")) else {
        return false;
    };
    remote != head && !repo.graph_descendant_of(head, remote).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::stage::test_support::{ThreadFixture, commit_worktree};

    fn read(dir: &Path, path: &str) -> Option<String> {
        std::fs::read_to_string(dir.join(path)).ok()
    }

    #[test]
    fn restore_brings_back_files_and_the_unpushed_head() {
        let f = ThreadFixture::new(&[("a.txt", "one\n"), (".gitignore", "target/\n")]);
        let root = f.worktree();
        std::fs::write(root.join("untracked.txt"), "mine\n").unwrap();
        let index_before = std::fs::read(root.join(".git/index")).unwrap();
        let snap = snapshot(&f.helper(), root).unwrap();
        assert_eq!(
            std::fs::read(root.join(".git/index")).unwrap(),
            index_before,
            "the worktree's own index is untouched"
        );

        // The run changes, deletes, adds, commits, and builds into an ignored directory.
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        std::fs::remove_file(root.join("untracked.txt")).unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/deep/new.rs"), "x").unwrap();
        let committed = commit_worktree(&f, "run's commit");
        std::fs::write(root.join("b.txt"), "after commit\n").unwrap();
        std::fs::create_dir(root.join("target")).unwrap();
        std::fs::write(root.join("target/cache"), "keep").unwrap();

        let restored = restore(&f.helper(), f.main(), root, &snap).unwrap();
        assert_eq!(restored.head, Head::MovedBack);
        assert_eq!(read(root, "a.txt").as_deref(), Some("one\n"));
        assert_eq!(read(root, "untracked.txt").as_deref(), Some("mine\n"));
        assert_eq!(read(root, "b.txt"), None);
        assert!(!root.join("src").exists());
        assert_eq!(read(root, "target/cache").as_deref(), Some("keep"));
        let repo = thread_repo::open(root).unwrap();
        assert_eq!(
            repo.head()
                .unwrap()
                .peel_to_commit()
                .unwrap()
                .id()
                .to_string(),
            snap.head
        );
        assert_eq!(
            repo.head().unwrap().name().ok(),
            Some("refs/heads/codebutler/t")
        );
        // The main repository's copy of the branch moved back too.
        let main = git2::Repository::open(f.main()).unwrap();
        let mirrored = main.refname_to_id("refs/heads/codebutler/t").unwrap();
        assert_eq!(mirrored.to_string(), snap.head);
        assert_ne!(mirrored, committed);
        // The index matches the files again: git in the worktree sees nothing changed but
        // the checkpoint's untracked file, now staged (as a checkout of the tree would).
        let status = f.git_status();
        assert_eq!(status, "A  untracked.txt\n", "{status}");
    }

    #[test]
    fn without_commits_the_branch_is_unchanged() {
        let f = ThreadFixture::new(&[("a.txt", "one\n")]);
        let root = f.worktree();
        let snap = snapshot(&f.helper(), root).unwrap();
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        let restored = restore(&f.helper(), f.main(), root, &snap).unwrap();
        assert_eq!(restored.head, Head::Unchanged);
        assert_eq!(read(root, "a.txt").as_deref(), Some("one\n"));
    }

    #[test]
    fn pushed_commits_are_never_rewritten() {
        let f = ThreadFixture::new(&[("a.txt", "one\n")]);
        let root = f.worktree();
        let snap = snapshot(&f.helper(), root).unwrap();
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        let pushed = commit_worktree(&f, "pushed");
        let repo = thread_repo::open(root).unwrap();
        thread_repo::set_pushed(&repo, "codebutler/t", pushed).unwrap();
        let restored = restore(&f.helper(), f.main(), root, &snap).unwrap();
        assert_eq!(restored.head, Head::KeptPushed);
        assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id(), pushed);
        assert_eq!(read(root, "a.txt").as_deref(), Some("one\n"));
    }

    #[test]
    fn a_missing_checkpoint_is_an_error_and_changes_nothing() {
        let f = ThreadFixture::new(&[("a.txt", "one\n")]);
        let root = f.worktree();
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        let bogus = Snapshot {
            tree: "1111111111111111111111111111111111111111".into(),
            head: "2222222222222222222222222222222222222222".into(),
        };
        assert!(restore(&f.helper(), f.main(), root, &bogus).is_err());
        assert_eq!(read(root, "a.txt").as_deref(), Some("two\n"));
    }

    #[test]
    fn a_restore_never_writes_through_symlinks_in_ignored_directories() {
        // The escape: the runner ignores a directory in its own .gitignore and fills it with
        // links to host paths; a restore of a tree that has files there must not follow them.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "host file").unwrap();
        let f = ThreadFixture::new(&[("a.txt", "one\n"), ("build/victim", "tracked\n")]);
        let root = f.worktree();
        let snap = snapshot(&f.helper(), root).unwrap();
        std::fs::write(root.join(".gitignore"), "build/\nlinks/\n").unwrap();
        std::fs::remove_dir_all(root.join("build")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("build")).unwrap();
        std::fs::create_dir(root.join("links")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("links/out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), root.join("a.txt.tmp")).unwrap();
        restore(&f.helper(), f.main(), root, &snap).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("victim")).unwrap(),
            "host file"
        );
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            1,
            "nothing was created outside"
        );
        assert_eq!(read(root, "build/victim").as_deref(), Some("tracked\n"));
        assert!(
            !std::fs::symlink_metadata(root.join("build"))
                .unwrap()
                .is_symlink()
        );
        assert!(std::fs::symlink_metadata(root.join("a.txt.tmp")).is_err());
    }
}
