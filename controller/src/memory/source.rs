//! Where the PM's memory is read from: the default branch's latest commit, never the main
//! checkout's files. A learning merged on GitHub reaches the next thread even if nobody
//! pulled, and a file someone edits in the checkout without committing is not memory.
//!
//! The default branch is `origin`'s (fetched by [`choose_base`], the fetch worktrees use:
//! hooks off, only that branch) when the repository has an `origin`, else the local HEAD.
//! Fetching costs a round trip, so the PM does not fetch on every message: it fetches at a
//! thread's first message (a new thread sees everything merged before it started) and when the
//! last fetch is older than [`REFRESH_INTERVAL`]; other reads use what the last fetch left.
//! A failed fetch falls back to the last fetched commit (logged). While the branch has no
//! memory file the PM reads the seeded default ([`super::seed`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use git2::{Oid, Repository};

use super::seed;
use crate::workspace::branch_files::read_file_at;
use crate::workspace::worktree::choose_base;

/// How old the last fetch may be before a read fetches again.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// The default branch's memory files; cheap to clone.
#[derive(Clone, Debug)]
pub struct MemorySource {
    repo: PathBuf,
    /// The default branch's tip as last fetched, and when.
    tip: Arc<tokio::sync::Mutex<Option<(Instant, String)>>>,
}

impl MemorySource {
    /// The memory of the repository at `repo`.
    pub fn new(repo: &Path) -> Self {
        Self {
            repo: repo.to_owned(),
            tip: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    /// The default branch's latest commit: fetched now when `fresh` is asked for, when
    /// nothing was fetched yet, or when the last fetch is older than [`REFRESH_INTERVAL`];
    /// else as last fetched. `None` when the repository has no commit at all.
    pub async fn tip(&self, fresh: bool) -> Option<String> {
        let repo = self.repo.clone();
        let has_origin = tokio::task::spawn_blocking(move || {
            Repository::open(&repo).is_ok_and(|r| r.find_remote("origin").is_ok())
        })
        .await
        .unwrap_or(false);
        if !has_origin {
            // The local default branch is always at hand: nothing to fetch.
            let repo = self.repo.clone();
            return tokio::task::spawn_blocking(move || local_head(&repo))
                .await
                .ok()
                .flatten();
        }
        let mut tip = self.tip.lock().await;
        if let Some((at, commit)) = tip.as_ref()
            && !fresh
            && at.elapsed() < REFRESH_INTERVAL
        {
            return Some(commit.clone());
        }
        match choose_base(&self.repo).await {
            Ok(base) => {
                if let Some(warning) = &base.warning {
                    tracing::warn!("memory: {warning}");
                }
                *tip = Some((Instant::now(), base.commit.clone()));
                Some(base.commit)
            }
            Err(e) => {
                tracing::warn!("memory: find the default branch: {e}");
                tip.as_ref().map(|(_, commit)| commit.clone())
            }
        }
    }

    /// The PM's memory (`.codebutler/memory/pm.md`) as the default branch holds it (see
    /// [`MemorySource::tip`] for `fresh`), or the seeded default while it holds none.
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

/// The text of `path` at `commit` in the repository at `repo`, if it is a file there.
pub fn read_at(repo: &Path, commit: &str, path: &str) -> Result<Option<String>, String> {
    let repository = Repository::open(repo).map_err(|e| e.message().to_owned())?;
    let id = Oid::from_str(commit).map_err(|e| e.message().to_owned())?;
    let bytes = read_file_at(&repository, id, path).map_err(|e| e.to_string())?;
    Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// The local HEAD's commit.
fn local_head(repo: &Path) -> Option<String> {
    let repository = Repository::open(repo).ok()?;
    let head = repository.head().ok()?.peel_to_commit().ok()?;
    Some(head.id().to_string())
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
        let source = MemorySource::new(&repo);
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
        let source = MemorySource::new(&repo);
        assert_eq!(source.pm(true).await, seed::PM_DEFAULT);

        // Someone merges memory on origin; the checkout is never pulled.
        let other = dir.path().join("other");
        git::git(dir.path(), &["clone", "-q", url, other.to_str().unwrap()]);
        git::commit_files(&other, &[(seed::PM_PATH, "- merged on origin\n")], "memory");
        git::git(&other, &["push", "-q", "origin", "HEAD"]);

        // Within the interval, what the last fetch left; a fresh read fetches.
        assert_eq!(source.pm(false).await, seed::PM_DEFAULT);
        assert_eq!(source.pm(true).await, "- merged on origin\n");
        assert_eq!(source.pm(false).await, "- merged on origin\n");
        assert!(
            !repo.join(seed::PM_PATH).exists(),
            "the checkout was not touched"
        );
    }
}
