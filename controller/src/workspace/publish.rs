//! A thread branch's commits brought to `origin`: what the controller pushes when a run of a
//! thread with an open pull request ends, and before "merge", so the pull request on GitHub
//! is what the thread's branch holds. The Coder's OpenPR pushes too, but a follow-up run
//! (a review round, a failing check, a message after the PR, "continue") commits without
//! opening anything: without this push its commits would never reach the pull request.
//!
//! What `origin` has is read from the thread repository's remote-tracking ref
//! (`refs/remotes/origin/<branch>`), which [`forge::push_branch`] sets after every push it
//! makes — never from what the Coder said. The push itself is [`forge::push_branch`]: never
//! forced, hooks off, only a `codebutler/` branch. Pushing a branch that is on `origin`
//! already does nothing, so the push is safe to repeat (a crash between the push and the
//! run's report pushes again at the next start).

use std::path::Path;

use git2::Oid;

use super::forge::{self, ForgeError};
use super::step_error::{GitStepError, git};
use super::thread_repo::{self, ThreadRepoError};

/// Where a thread's branch is, here and on `origin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tips {
    /// The branch's commit in the thread repository.
    pub local: Oid,
    /// The branch's commit on `origin` as the last push left it; `None` before any push.
    pub pushed: Option<Oid>,
    /// The commit the thread's branch started from.
    pub base: Oid,
}

impl Tips {
    /// Whether `origin` has every commit of the branch.
    pub fn up_to_date(&self) -> bool {
        self.pushed == Some(self.local)
    }

    /// What `origin` had before: the last pushed commit, else the branch's start.
    pub fn on_origin_or_base(&self) -> Oid {
        self.pushed.unwrap_or(self.base)
    }
}

/// Why a branch's commits could not be read or pushed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Thread(#[from] ThreadRepoError),
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error("the git task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The branch's tips in the thread repository of `worktree`. Blocking (git2).
pub fn tips(worktree: &Path, branch: &str) -> Result<Tips, PublishError> {
    forge::check_branch(branch)?;
    let repo = thread_repo::open(worktree)?;
    let local = repo
        .refname_to_id(&format!("refs/heads/{branch}"))
        .map_err(git(format!("read {branch}")))?;
    let pushed = repo
        .refname_to_id(&format!("refs/remotes/origin/{branch}"))
        .ok();
    let base = thread_repo::base_of(&repo)?;
    Ok(Tips {
        local,
        pushed,
        base,
    })
}

/// The files that differ between the commits `from` and `to` of the thread repository of
/// `worktree`, sorted. Blocking (git2).
pub fn files_between(worktree: &Path, from: Oid, to: Oid) -> Result<Vec<String>, PublishError> {
    let repo = thread_repo::open(worktree)?;
    let tree = |id: Oid| {
        repo.find_commit(id)
            .and_then(|c| c.tree())
            .map_err(git(format!("read commit {id}")))
    };
    let (old, new) = (tree(from)?, tree(to)?);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(git("diff the pushed commits"))?;
    let mut files: Vec<String> = diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// What [`push_unpushed`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// What `origin` had before ([`Tips::on_origin_or_base`]).
    pub before: Oid,
    /// What it has now: the branch's commit.
    pub after: Oid,
}

/// Pushes the commits of `branch` that `origin` does not have (from the main repository
/// `main`, where every commit of the branch is copied; [`forge::push_branch`]); pushes
/// nothing when `origin` has them all. Returns the range `origin` moved over (empty when
/// it did not move).
pub async fn push_unpushed(
    main: &Path,
    worktree: &Path,
    branch: &str,
) -> Result<Pushed, PublishError> {
    let tips = read_tips(worktree, branch).await?;
    if !tips.up_to_date() {
        forge::push_branch(main, worktree, branch).await?;
    }
    Ok(Pushed {
        before: tips.on_origin_or_base(),
        after: tips.local,
    })
}

/// [`tips`] off the runtime.
pub async fn read_tips(worktree: &Path, branch: &str) -> Result<Tips, PublishError> {
    let (worktree, branch) = (worktree.to_owned(), branch.to_owned());
    tokio::task::spawn_blocking(move || tips(&worktree, &branch)).await?
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::workspace::stage::test_support::ThreadFixture;

    #[tokio::test]
    async fn pushes_what_origin_lacks_once_and_names_the_range() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        let (wt, main) = (f.worktree(), f.main());
        let bare_path = f.dir.path().join("origin.git");
        let bare = git2::Repository::init_bare(&bare_path).unwrap();
        git2::Repository::open(main)
            .unwrap()
            .remote("origin", bare_path.to_str().unwrap())
            .unwrap();
        let before = tips(wt, "codebutler/t").unwrap();
        assert_eq!(before.pushed, None);
        assert_eq!(before.local, before.base);

        std::fs::write(wt.join("a.txt"), "b\n").unwrap();
        std::fs::write(wt.join("new.txt"), "n\n").unwrap();
        let commit = forge::commit_all(&f.helper(), main, wt, "Change a", &[]).unwrap();
        let pushed = push_unpushed(main, wt, "codebutler/t").await.unwrap();
        assert_eq!(
            pushed.before, before.base,
            "origin had nothing: from the base"
        );
        assert_eq!(pushed.after.to_string(), commit.sha);
        let on_origin = bare
            .refname_to_id("refs/heads/codebutler/t")
            .unwrap()
            .to_string();
        assert_eq!(on_origin, commit.sha);
        assert_eq!(
            files_between(wt, pushed.before, pushed.after).unwrap(),
            ["a.txt", "new.txt"]
        );
        assert!(tips(wt, "codebutler/t").unwrap().up_to_date());

        // Again: origin has it all, nothing moves.
        let again = push_unpushed(main, wt, "codebutler/t").await.unwrap();
        assert_eq!(again.before, again.after);
        assert!(push_unpushed(main, wt, "main").await.is_err());
    }
}
