//! "Use it": the drawn image committed to the thread's branch by the controller and pushed
//! like the Coder's work. A thread whose Coder has run has a branch and a worktree: the image
//! is committed there ([`branch_files::commit_to_thread_branch`], the worktree written by
//! the sandboxed helper) and the branch pushed, so its pull request, if open, gets the
//! commit. A thread without one gets a branch of the Artist's own,
//! `codebutler/artist-<thread>`, from the default branch's tip (or from that branch's tip
//! for a later image), pushed to `origin` ([`branch_files::commit_on_new_branch`]).
//!
//! Both are git2 commits as CodeButler, the file written as a blob (never through a path the
//! runner could have replaced); both are safe to repeat after a crash: the same image at the
//! same path makes no second commit, and pushing a branch `origin` has does nothing.

use std::path::{Path, PathBuf};

use crate::domain::ThreadKey;
use crate::memory::source::DefaultBranchMemory;
use crate::store::{Store, StoreError};
use crate::workspace::branch_files;
use crate::workspace::forge::{self, ForgeError};
use crate::workspace::worktree::Preparer;

/// Where the image went.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    pub branch: String,
    /// The branch's tip after the commit.
    pub sha: String,
    /// Whether the branch is the Coder's (its pull request, if open, has the commit).
    pub coder_branch: bool,
}

/// Why the image could not be committed or pushed.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error("the repository has no default branch to start a branch from")]
    NoBase,
    #[error("{what}: {message}")]
    Task { what: &'static str, message: String },
}

/// What placing an image needs.
#[derive(Clone, Copy, Debug)]
pub struct Workspace<'a> {
    pub store: &'a Store,
    /// The main repository.
    pub repo: &'a Path,
    pub prepare: &'a Preparer,
    pub memory: &'a DefaultBranchMemory,
}

/// The Artist's own branch of a thread whose Coder has not run.
pub fn artist_branch(thread: &ThreadKey) -> String {
    format!("codebutler/artist-{}", thread.thread_ts.replace('.', ""))
}

/// Commits `png` at `path` on `thread`'s branch and pushes it.
pub async fn place(
    ws: Workspace<'_>,
    thread: &ThreadKey,
    path: &str,
    png: Vec<u8>,
) -> Result<Placed, AssetError> {
    let message = format!("Add {path}, drawn by the Artist in Slack");
    let files = vec![(path.to_owned(), png)];
    let run = ws.store.latest_run(&thread.thread_ts).await?;
    let main = ws.repo.to_owned();
    if let Some(run) = run
        .filter(|r| r.thread == *thread && !r.branch.is_empty() && Path::new(&r.worktree).is_dir())
    {
        let worktree = PathBuf::from(&run.worktree);
        if let Err(e) = ws.prepare.ensure_mounted(&worktree).await {
            tracing::warn!(thread = %thread, "mount the worktree's disk: {e}");
        }
        let helper = ws.prepare.helper(&worktree);
        let tree = worktree.clone();
        let repo = main.clone();
        let commit = blocking("commit the image", move || {
            branch_files::commit_to_thread_branch(&helper, &repo, &tree, &files, &message)
        })
        .await??;
        forge::push_branch(&main, &worktree, &run.branch).await?;
        let sha = if commit.nothing_to_commit {
            let (repo, branch) = (main.clone(), run.branch.clone());
            blocking("read the branch", move || tip_of(&repo, &branch))
                .await??
                .unwrap_or_default()
        } else {
            commit.sha
        };
        return Ok(Placed {
            branch: run.branch,
            sha,
            coder_branch: true,
        });
    }
    let branch = artist_branch(thread);
    let (repo, name) = (main.clone(), branch.clone());
    let base = match blocking("read the branch", move || tip_of(&repo, &name)).await?? {
        Some(tip) => tip,
        None => ws.memory.tip(true).await.ok_or(AssetError::NoBase)?,
    };
    let (repo, name) = (main.clone(), branch.clone());
    let commit = blocking("commit the image", move || {
        branch_files::commit_on_new_branch(&repo, &base, &name, &files, &message)
    })
    .await??;
    forge::push_to_origin(&main, &branch).await?;
    let (repo, name) = (main.clone(), branch.clone());
    let sha = blocking("read the branch", move || tip_of(&repo, &name))
        .await??
        .unwrap_or(commit.sha);
    Ok(Placed {
        branch,
        sha,
        coder_branch: false,
    })
}

/// The tip of `branch` in the repository at `repo`, if the branch exists.
fn tip_of(repo: &Path, branch: &str) -> Result<Option<String>, AssetError> {
    let repo = git2::Repository::open(repo).map_err(|e| AssetError::Task {
        what: "open the repository",
        message: e.message().to_owned(),
    })?;
    Ok(repo
        .refname_to_id(&format!("refs/heads/{branch}"))
        .ok()
        .map(|oid| oid.to_string()))
}

/// `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AssetError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| AssetError::Task {
            what,
            message: e.to_string(),
        })
}
