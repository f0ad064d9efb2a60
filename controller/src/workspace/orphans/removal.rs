//! One orphan removed: its branch settled first (the thread's unpushed commits copied to
//! the repository's branch, which is then kept; a branch with commits of its own kept; a
//! conflict between the two leaves the worktree for a person), then its worktree removed
//! the way [`worktree::remove`] removes one. Blocking parts run off the runtime.

use std::path::Path;

use super::{BranchFacts, BranchFate, OrphanError, Orphaned, Removal, blocking, branch_fate};
use crate::workspace::step_error::{GitStepError, git, io};
use crate::workspace::thread_repo::{self, BASE_REF, BRANCH_PREFIX};
use crate::workspace::worktree::{self, Worktree, branches_dir};

use super::listing::linked_worktree;

/// What removing one orphan came to.
pub(super) enum Outcome {
    Removed(Removal),
    /// Left on purpose, with why.
    Left(String),
    /// Nothing to remove (a branch kept, with no worktree).
    Nothing,
}

/// Removes the orphan `slug`: settles its branch (copying unpushed commits to the
/// repository first), then removes the worktree, keeping the branch if it must stay.
pub(super) async fn remove_orphan(
    repo: &Path,
    slug: &str,
    why: Orphaned,
) -> Result<Outcome, OrphanError> {
    let tree = Worktree {
        path: branches_dir(repo).join(slug),
        branch: format!("{BRANCH_PREFIX}{slug}"),
    };
    let (dir, settling) = (repo.to_owned(), tree.clone());
    let (fate, existed) = blocking(move || settle(&dir, &settling)).await?;
    if fate == BranchFate::Conflict {
        return Ok(Outcome::Left(format!(
            "left worktree .codebutler/branches/{slug} ({why}): its branch {} has commits it \
             never pushed, and the repository's {} has commits of its own; merge them by hand, \
             then run the cleanup again",
            tree.branch, tree.branch
        )));
    }
    let deletes_branch = fate == BranchFate::Delete;
    if !existed && !deletes_branch {
        return Ok(Outcome::Nothing);
    }
    let removed = if deletes_branch {
        worktree::remove(repo, &tree).await
    } else {
        worktree::remove_keeping_branch(repo, &tree).await
    };
    removed?;
    let slug = slug.to_owned();
    Ok(Outcome::Removed(if existed {
        Removal::Worktree {
            slug,
            why,
            branch: fate,
        }
    } else {
        Removal::Branch { slug, why }
    }))
}

/// Reads what git says of the orphan's branch and decides its fate; copies the thread's
/// unpushed commits to the repository when the branch is kept for them, and drops git's
/// record of a linked worktree there. Returns the fate and whether the worktree (its
/// directory or disk) exists. Blocking.
fn settle(repo: &Path, tree: &Worktree) -> Result<(BranchFate, bool), OrphanError> {
    let main = git2::Repository::open(repo).map_err(git(format!("open {}", repo.display())))?;
    let repo_tip = main
        .find_branch(&tree.branch, git2::BranchType::Local)
        .ok()
        .and_then(|b| b.get().target());
    let entry = std::fs::symlink_metadata(&tree.path).ok();
    let image = worktree::disks_dir(repo).join(format!(
        "{}.img",
        tree.path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let existed = entry.is_some() || image.is_file();
    // A thread repository is read only where the worktree is a real directory.
    let thread = entry
        .as_ref()
        .filter(|m| m.is_dir())
        .and_then(|_| thread_repo::open(&tree.path).ok());
    let mut facts = BranchFacts {
        in_repo: repo_tip.is_some(),
        repo_own_commits: has_own_commits(&main, &tree.branch),
        ..BranchFacts::default()
    };
    if let Some(thread) = &thread
        && let Ok(head) = thread.refname_to_id(&format!("refs/heads/{}", tree.branch))
    {
        facts.unpushed = Some(unpushed(thread, &tree.branch, head)?);
        facts.repo_within_thread = repo_tip.is_some_and(|tip| {
            tip == head || thread.graph_descendant_of(head, tip).unwrap_or(false)
        });
    }
    let fate = branch_fate(facts);
    if let (BranchFate::KeepUnpushed(_), Some(thread)) = (fate, &thread) {
        thread_repo::mirror(repo, thread, &tree.branch).map_err(|source| OrphanError::Copy {
            branch: tree.branch.clone(),
            source,
        })?;
    }
    if let Some(entry) = &entry
        && !entry.is_dir()
    {
        // Not a worktree but something in its place: removed itself, never followed.
        std::fs::remove_file(&tree.path).map_err(io(format!("remove {}", tree.path.display())))?;
    }
    if fate != BranchFate::Conflict
        && let Some(name) = tree.path.file_name().map(|n| n.to_string_lossy())
        && let Some(linked) = linked_worktree(&main, &branches_dir(repo), &name)
    {
        let mut options = git2::WorktreePruneOptions::new();
        options.valid(true).locked(true).working_tree(false);
        linked
            .prune(Some(&mut options))
            .map_err(git(format!("forget the linked worktree {name}")))?;
    }
    Ok((fate, existed))
}

/// The commits on `branch` (at `head`) of the thread repository `thread` that are neither
/// in its base nor recorded as pushed.
fn unpushed(
    thread: &git2::Repository,
    branch: &str,
    head: git2::Oid,
) -> Result<usize, GitStepError> {
    let err = |e: git2::Error| git(format!("walk {branch}"))(e);
    let mut walk = thread.revwalk().map_err(err)?;
    walk.push(head).map_err(err)?;
    for name in [BASE_REF.to_owned(), format!("refs/remotes/origin/{branch}")] {
        if let Ok(id) = thread.refname_to_id(&name) {
            walk.hide(id).map_err(err)?;
        }
    }
    let mut count = 0;
    for id in walk {
        id.map_err(err)?;
        count += 1;
    }
    Ok(count)
}

/// Whether the local branch `name` holds a commit no other branch or remote ref reaches
/// (work that deleting it would lose). False when there is no such branch; true when git
/// cannot tell.
fn has_own_commits(repository: &git2::Repository, name: &str) -> bool {
    let Ok(branch) = repository.find_branch(name, git2::BranchType::Local) else {
        return false;
    };
    let Some(tip) = branch.get().target() else {
        return false;
    };
    let full = format!("refs/heads/{name}");
    let Ok(mut walk) = repository.revwalk() else {
        return true;
    };
    if walk.push(tip).is_err() {
        return true;
    }
    let Ok(references) = repository.references() else {
        return true;
    };
    for reference in references.flatten() {
        if reference.name().ok() == Some(full.as_str()) {
            continue;
        }
        // Refs to trees or blobs (checkpoints) hold no commits.
        if let Ok(commit) = reference.peel_to_commit()
            && walk.hide(commit.id()).is_err()
        {
            return true;
        }
    }
    walk.next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::stage::test_support::{ThreadFixture, commit_worktree};

    /// The thread's commits that would be lost with its worktree: those past its base that
    /// its last push did not record.
    #[test]
    fn unpushed_commits_are_past_the_base_and_the_last_push() {
        let f = ThreadFixture::new(&[("a.txt", "a")]);
        let thread = thread_repo::open(f.worktree()).unwrap();
        let branch = "codebutler/t";
        let head = |thread: &git2::Repository| {
            thread
                .refname_to_id(&format!("refs/heads/{branch}"))
                .unwrap()
        };
        assert_eq!(unpushed(&thread, branch, head(&thread)).unwrap(), 0);
        std::fs::write(f.worktree().join("b.txt"), "b").unwrap();
        let first = commit_worktree(&f, "one");
        std::fs::write(f.worktree().join("c.txt"), "c").unwrap();
        commit_worktree(&f, "two");
        let thread = thread_repo::open(f.worktree()).unwrap();
        assert_eq!(unpushed(&thread, branch, head(&thread)).unwrap(), 2);
        thread
            .reference(
                &format!("refs/remotes/origin/{branch}"),
                first,
                true,
                "pushed",
            )
            .unwrap();
        assert_eq!(unpushed(&thread, branch, head(&thread)).unwrap(), 1);
    }

    /// A failure names the step and the path, as the cleanup's report says it.
    #[test]
    fn a_repository_that_cannot_be_opened_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let tree = Worktree {
            path: branches_dir(&missing).join("t"),
            branch: "codebutler/t".into(),
        };
        let error = settle(&missing, &tree).unwrap_err();
        assert!(matches!(error, OrphanError::Git(_)), "{error:?}");
        assert!(
            error
                .to_string()
                .starts_with(&format!("open {}: ", missing.display())),
            "{error}"
        );
    }
}
