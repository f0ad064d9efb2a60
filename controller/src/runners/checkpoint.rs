//! Checkpoints of a run's worktree for "undo": before each run the controller writes the
//! worktree's files (tracked and untracked, ignored ones left out) as a git tree into the
//! repository's object store, with git2 on a scratch index, so the worktree's own index is
//! untouched. Restoring puts those files back.
//!
//! The runner could have left anything in its worktree, symlinks included, and the controller
//! writes there when it restores: every file the runner may have written is removed first
//! (symlinks are removed, never followed), so the checkout writes only into directories the
//! controller made.

use std::path::Path;

/// How big a file may be to go into a checkpoint; bigger ones are left out (build outputs,
/// data dumps) rather than copied into the object store.
const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// A worktree's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The files, as a git tree id (hex).
    pub tree: String,
    /// The branch's head commit (hex).
    pub head: String,
}

/// What a restore did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// Whether the branch was moved back to the checkpoint's head. It is not when the
    /// commits since were already pushed: history that others can see is never rewritten,
    /// and the restored files are left as uncommitted changes instead.
    pub head_reset: bool,
}

/// A checkpoint could not be taken or restored.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {message}")]
pub struct CheckpointError {
    step: String,
    message: String,
}

fn fail(step: &str) -> impl FnOnce(git2::Error) -> CheckpointError + '_ {
    move |e| CheckpointError {
        step: step.to_owned(),
        message: e.message().to_owned(),
    }
}

fn io_fail(step: String) -> impl FnOnce(std::io::Error) -> CheckpointError {
    move |e| CheckpointError {
        step,
        message: e.to_string(),
    }
}

/// Writes the worktree's current files as a tree. Blocking (git2): call it from
/// `spawn_blocking`.
pub fn snapshot(worktree: &Path) -> Result<Snapshot, CheckpointError> {
    let repo = git2::Repository::open(worktree).map_err(fail("open the worktree"))?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(fail("read the branch's head"))?;
    // A copy of the worktree's index keeps its stat cache (unchanged files are not hashed
    // again) while the real index stays as it is.
    let scratch = tempfile::NamedTempFile::new().map_err(io_fail("make a scratch index".into()))?;
    let real_index = repo.path().join("index");
    if real_index.is_file() {
        std::fs::copy(&real_index, scratch.path())
            .map_err(io_fail("copy the worktree's index".into()))?;
    }
    let mut index = git2::Index::open(scratch.path()).map_err(fail("open the scratch index"))?;
    repo.set_index(&mut index)
        .map_err(fail("use the scratch index"))?;
    let mut keep = |path: &Path, _: &[u8]| -> i32 {
        let skip = path.components().any(|c| c.as_os_str() == ".git")
            || std::fs::symlink_metadata(worktree.join(path))
                .is_ok_and(|m| m.is_file() && m.len() > MAX_FILE_BYTES);
        i32::from(skip)
    };
    index
        .add_all(
            ["*"],
            git2::IndexAddOption::DEFAULT,
            Some(&mut keep as &mut git2::IndexMatchedPath<'_>),
        )
        .map_err(fail("add the worktree's files"))?;
    index
        .update_all(["*"], None)
        .map_err(fail("note deleted files"))?;
    let tree = index.write_tree().map_err(fail("write the tree"))?;
    Ok(Snapshot {
        tree: tree.to_string(),
        head: head.id().to_string(),
    })
}

/// Puts the worktree back to `snapshot`: its files (ignored files such as build caches stay)
/// and, unless those commits were pushed, the branch's head. Blocking (git2).
pub fn restore(worktree: &Path, snapshot: &Snapshot) -> Result<Restored, CheckpointError> {
    let repo = git2::Repository::open(worktree).map_err(fail("open the worktree"))?;
    let tree_id = git2::Oid::from_str(&snapshot.tree).map_err(fail("read the checkpoint"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(fail("find the checkpoint's files"))?;
    let old_head = git2::Oid::from_str(&snapshot.head).map_err(fail("read the checkpoint"))?;
    let head_ref = repo.head().map_err(fail("read HEAD"))?;
    let branch = head_ref
        .name()
        .ok()
        .filter(|n| n.starts_with("refs/heads/codebutler/"))
        .ok_or_else(|| CheckpointError {
            step: "check the branch".into(),
            message: "the worktree is not on a codebutler/ branch".into(),
        })?
        .to_owned();
    let current = head_ref.peel_to_commit().map_err(fail("read HEAD"))?.id();
    let mut head_reset = false;
    if current != old_head && !pushed_beyond(&repo, &branch, old_head) {
        repo.find_commit(old_head)
            .map_err(fail("find the checkpoint's commit"))?;
        repo.reference(&branch, old_head, true, "codebutler: undo")
            .map_err(fail("move the branch back"))?;
        head_reset = true;
    }
    clear(&repo, worktree)?;
    let mut options = git2::build::CheckoutBuilder::new();
    options.force();
    repo.checkout_tree(tree.as_object(), Some(&mut options))
        .map_err(fail("write the checkpoint's files"))?;
    Ok(Restored { head_reset })
}

/// Whether `origin` already has commits of `branch` after `head`.
fn pushed_beyond(repo: &git2::Repository, branch: &str, head: git2::Oid) -> bool {
    let short = branch.trim_start_matches("refs/heads/");
    let Ok(remote) = repo.refname_to_id(&format!("refs/remotes/origin/{short}")) else {
        return false;
    };
    remote != head && !repo.graph_descendant_of(head, remote).unwrap_or(false)
}

/// Removes what the runner may have written: every symlink and every file and directory
/// git does not ignore. Ignored entries (caches, build outputs) stay. All entries are
/// judged before any is removed, since removing a `.gitignore` changes what is ignored.
fn clear(repo: &git2::Repository, worktree: &Path) -> Result<(), CheckpointError> {
    let mut doomed = Vec::new();
    judge(repo, worktree, Path::new(""), &mut doomed)?;
    for (path, is_dir) in doomed {
        let removal = if is_dir {
            match std::fs::remove_dir(&path) {
                // Ignored files inside keep it.
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Ok(()),
                other => other,
            }
        } else {
            std::fs::remove_file(&path)
        };
        removal.map_err(io_fail(format!("remove {}", path.display())))?;
    }
    Ok(())
}

/// Lists what [`clear`] removes under `dir`, each directory after its contents.
fn judge(
    repo: &git2::Repository,
    worktree: &Path,
    dir: &Path,
    doomed: &mut Vec<(std::path::PathBuf, bool)>,
) -> Result<(), CheckpointError> {
    let full = worktree.join(dir);
    let entries = std::fs::read_dir(&full).map_err(io_fail(format!("list {}", full.display())))?;
    for entry in entries {
        let entry = entry.map_err(io_fail(format!("list {}", full.display())))?;
        let rel = dir.join(entry.file_name());
        if rel == Path::new(".git") {
            continue;
        }
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(io_fail(format!("inspect {}", path.display())))?;
        if kind.is_symlink() {
            doomed.push((path, false));
        } else if repo.is_path_ignored(&rel).unwrap_or(false) {
            continue;
        } else if kind.is_dir() {
            judge(repo, worktree, &rel, doomed)?;
            doomed.push((path, true));
        } else {
            doomed.push((path, false));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with a commit on `codebutler/t`, checked out.
    fn repo() -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        commit(&repo, "first");
        {
            let head = repo.head().unwrap().peel_to_commit().unwrap();
            repo.branch("codebutler/t", &head, false).unwrap();
        }
        repo.set_head("refs/heads/codebutler/t").unwrap();
        (dir, repo)
    }

    fn commit(repo: &git2::Repository, message: &str) -> git2::Oid {
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let parents: Vec<git2::Commit<'_>> = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    fn read(dir: &Path, path: &str) -> Option<String> {
        std::fs::read_to_string(dir.join(path)).ok()
    }

    #[test]
    fn restore_brings_back_files_and_the_unpushed_head() {
        let (dir, repo) = repo();
        let root = dir.path();
        std::fs::write(root.join("untracked.txt"), "mine\n").unwrap();
        let index_before = std::fs::read(repo.path().join("index")).unwrap();
        let snap = snapshot(root).unwrap();
        assert_eq!(
            std::fs::read(repo.path().join("index")).unwrap(),
            index_before,
            "the worktree's own index is untouched"
        );

        // The run changes, deletes, adds, commits, and builds into an ignored directory.
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        std::fs::remove_file(root.join("untracked.txt")).unwrap();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/deep/new.rs"), "x").unwrap();
        commit(&repo, "run's commit");
        std::fs::write(root.join("b.txt"), "after commit\n").unwrap();
        std::fs::create_dir(root.join("target")).unwrap();
        std::fs::write(root.join("target/cache"), "keep").unwrap();

        let restored = restore(root, &snap).unwrap();
        assert!(restored.head_reset);
        assert_eq!(read(root, "a.txt").as_deref(), Some("one\n"));
        assert_eq!(read(root, "untracked.txt").as_deref(), Some("mine\n"));
        assert_eq!(read(root, "b.txt"), None);
        assert!(!root.join("src").exists());
        assert_eq!(read(root, "target/cache").as_deref(), Some("keep"));
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
    }

    #[test]
    fn pushed_commits_are_never_rewritten() {
        let (dir, repo) = repo();
        let root = dir.path();
        let snap = snapshot(root).unwrap();
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        let pushed = commit(&repo, "pushed");
        repo.reference("refs/remotes/origin/codebutler/t", pushed, true, "push")
            .unwrap();
        let restored = restore(root, &snap).unwrap();
        assert!(!restored.head_reset);
        assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id(), pushed);
        assert_eq!(read(root, "a.txt").as_deref(), Some("one\n"));
    }

    #[test]
    fn symlinks_left_by_the_runner_are_removed_not_followed() {
        let (dir, _repo) = repo();
        let root = dir.path();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "original").unwrap();
        let snap = snapshot(root).unwrap();
        // The runner swaps the directory for a link to somewhere outside the worktree.
        let outside = tempfile::tempdir().unwrap();
        std::fs::remove_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("src")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), root.join("target")).unwrap();
        restore(root, &snap).unwrap();
        assert_eq!(read(root, "src/lib.rs").as_deref(), Some("original"));
        assert!(
            !std::fs::symlink_metadata(root.join("src"))
                .unwrap()
                .is_symlink()
        );
        assert!(!root.join("target").exists());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_checkpoint_is_an_error_and_changes_nothing() {
        let (dir, _repo) = repo();
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        let bogus = Snapshot {
            tree: "1111111111111111111111111111111111111111".into(),
            head: "2222222222222222222222222222222222222222".into(),
        };
        assert!(restore(root, &bogus).is_err());
        assert_eq!(read(root, "a.txt").as_deref(), Some("two\n"));
    }
}
