//! Where the PM's memory is read from: the default branch's latest commit, never the main
//! checkout's files. A learning merged on GitHub reaches the PM without anyone pulling, and
//! a file someone edits in the checkout without committing is not memory.
//!
//! The default branch is `origin`'s when the repository has an `origin`, else the local
//! HEAD. The PM reads it as the last fetch left it (`refs/remotes/origin/<default>`): the
//! PM's answers never wait on the network, and the daemon fetches that branch whenever it
//! needs it fresh anyway — each approval, to branch the worktree from it, and each memory
//! saved without a pull request ([`DefaultBranchMemory::tip`] with `fresh`, the same fetch:
//! [`choose_base`], hooks off, only that branch). While the branch has no memory file the PM
//! reads the seeded default ([`super::seed`]).

use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use super::seed;
use crate::repo_files::default_branch_tip;
use crate::workspace::branch_files::read_file_at;
use crate::workspace::forge::ForgeError;
use crate::workspace::worktree::choose_base;

/// The default branch's memory files; cheap to clone.
#[derive(Clone, Debug)]
pub struct DefaultBranchMemory {
    repo: PathBuf,
}

impl DefaultBranchMemory {
    /// The memory of the repository at `repo`.
    pub fn new(repo: &Path) -> Self {
        Self {
            repo: repo.to_owned(),
        }
    }

    /// The default branch's latest commit: fetched now when `fresh` (a failed fetch falls
    /// back to the last fetched commit, logged), else as last fetched. `None` when the
    /// repository has no commit at all.
    pub async fn tip(&self, fresh: bool) -> Option<String> {
        if fresh {
            match choose_base(&self.repo).await {
                Ok(base) => {
                    if let Some(warning) = &base.warning {
                        tracing::warn!("memory: {warning}");
                    }
                    return Some(base.commit);
                }
                Err(e) => tracing::warn!("memory: find the default branch: {e}"),
            }
        }
        let repo = self.repo.clone();
        match tokio::task::spawn_blocking(move || default_branch_tip(&repo)).await {
            Ok(tip) => tip,
            Err(e) => {
                tracing::warn!("memory: find the default branch: {e}");
                None
            }
        }
    }

    /// The PM's memory (`.codebutler/memory/pm.md`) as the default branch holds it (see
    /// [`DefaultBranchMemory::tip`] for `fresh`), or the seeded default while it holds none.
    pub async fn pm(&self, fresh: bool) -> String {
        self.file(seed::PM_PATH, fresh).await
    }

    /// The memory file `path` at the default branch's tip, or its seeded default.
    pub async fn file(&self, path: &'static str, fresh: bool) -> String {
        let default = seed::default_for(path).unwrap_or_default().to_owned();
        let Some(tip) = self.tip(fresh).await else {
            return default;
        };
        let repo = self.repo.clone();
        let read = tokio::task::spawn_blocking(move || read_at(&repo, &tip, path)).await;
        match read {
            Ok(Ok(Some(text))) => text,
            Ok(Ok(None)) => default,
            Ok(Err(e)) => {
                tracing::warn!("memory: read {path}: {e}; using the default");
                default
            }
            Err(e) => {
                tracing::warn!("memory: read {path}: {e}; using the default");
                default
            }
        }
    }
}

/// Why a memory file could not be read at a commit (the text is git's, or the read's own).
#[derive(Debug, thiserror::Error)]
pub enum ReadAtError {
    /// The repository does not open.
    #[error("{}", .0.message())]
    Open(#[source] git2::Error),
    /// The commit is no object id.
    #[error("{}", .0.message())]
    Commit(#[source] git2::Error),
    /// The commit's tree or the file's blob could not be read.
    #[error(transparent)]
    Read(#[from] ForgeError),
}

/// The text of `path` at `commit` in the repository at `repo`, if it is a file there.
pub fn read_at(repo: &Path, commit: &str, path: &str) -> Result<Option<String>, ReadAtError> {
    let repository = Repository::open(repo).map_err(ReadAtError::Open)?;
    let id = Oid::from_str(commit).map_err(ReadAtError::Commit)?;
    let bytes = read_file_at(&repository, id, path)?;
    Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_test_support::git;

    #[tokio::test]
    async fn reads_the_committed_memory_not_the_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git::init(&repo);
        git::commit_files(&repo, &[("a.txt", "a\n")], "first");
        let source = DefaultBranchMemory::new(&repo);
        // No memory committed: the seeded default, whatever the checkout holds.
        git::write_files(&repo, &[(seed::PM_PATH, "- uncommitted\n")]);
        assert_eq!(source.pm(false).await, seed::PM_DEFAULT);
        git::commit_files(&repo, &[(seed::PM_PATH, "- committed\n")], "memory");
        git::write_files(&repo, &[(seed::PM_PATH, "- edited, not committed\n")]);
        assert_eq!(source.pm(false).await, "- committed\n");
    }

    #[tokio::test]
    async fn reads_origins_default_branch_after_a_fetch_without_a_pull() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git::init(&repo);
        git::commit_files(&repo, &[("a.txt", "a\n")], "first");
        let origin = dir.path().join("origin.git");
        git::push_to_new_origin(&repo, &origin);
        let url = origin.to_str().unwrap();
        let source = DefaultBranchMemory::new(&repo);
        assert_eq!(source.pm(true).await, seed::PM_DEFAULT);

        // Someone merges memory on origin; the checkout is never pulled.
        let other = dir.path().join("other");
        git::git(dir.path(), &["clone", "-q", url, other.to_str().unwrap()]);
        git::commit_files(&other, &[(seed::PM_PATH, "- merged on origin\n")], "memory");
        git::git(&other, &["push", "-q", "origin", "HEAD"]);

        // What the last fetch left, until a fresh read fetches.
        assert_eq!(source.pm(false).await, seed::PM_DEFAULT);
        assert_eq!(source.pm(true).await, "- merged on origin\n");
        assert_eq!(source.pm(false).await, "- merged on origin\n");
        assert!(
            !repo.join(seed::PM_PATH).exists(),
            "the checkout was not touched"
        );
    }
}
