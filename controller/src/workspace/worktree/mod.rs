//! Worktrees for runs: `<repo>/.codebutler/branches/<slug>` on branch `codebutler/<slug>`,
//! made with git2 (libgit2 runs no hooks), each a repository of its own with only its base
//! commit's history ([`super::thread_repo`]) on a disk of its own ([`super::disk`]). A
//! worktree's life, one module per step:
//!
//! 1. [`space`]: what the existing worktrees take of `access.maxWorktreeDiskMB` (each disk
//!    at its full size, the base stores and worktrees without a disk by what they hold) and
//!    so how large the new worktree's disk may be, refused when too little is left;
//! 2. [`base`]: `origin`'s default branch is fetched ([`choose_base`]) with the controller's
//!    safe git settings ([`super::git_command::safe_git`]: no hooks, no `ext::`, no repository
//!    programs), from `remote.origin.url` directly, so no `remote.origin.*` setting applies; a
//!    failed fetch falls back to the last fetched `origin/<default>` or the local `HEAD`, and
//!    says so;
//! 3. [`tree`]: the worktree is created on a new branch from that commit ([`create`]): its
//!    slug claimed, the base store shared or packed, its disk sized by [`space`] (one
//!    creation at a time, so two cannot both take what is left) and mounted, its
//!    repository made and the base's files checked out — all undone again if a step fails —
//!    and removed whole again ([`remove`]) when a preparation fails or the thread is done;
//! 4. [`preparer`]: the steps above for an approved plan, then the platforms' init
//!    ([`super::platform`]) in the sandbox with the network, reporting in the thread through
//!    a [`Progress`] ([`Preparer`]).

mod base;
mod preparer;
mod space;
#[cfg(test)]
mod testing;
mod tree;

use std::path::{Path, PathBuf};

pub use base::{Base, FETCH_TIMEOUT, choose_base, default_branch};
pub use preparer::{PrepareError, Preparer, Progress};
pub use space::{
    DiskBudget, HEADROOM_MB, NoRoom, checkout_estimate, disk_usage, new_disk_mb, taken,
};
pub use tree::{create, remove, remove_keeping_branch};

/// A created worktree.
#[derive(Clone, Debug, PartialEq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
}

/// Why a worktree could not be made.
#[derive(Debug, thiserror::Error)]
#[error("create worktree for {slug}: {message}")]
pub struct WorktreeError {
    slug: String,
    message: String,
}

/// Why a worktree was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// `access.maxWorktreeDiskMB` has too little left for a new worktree's disk; nothing
    /// was left behind.
    #[error(transparent)]
    NoRoom(#[from] NoRoom),
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
}

/// A branch-friendly slug of a plan's first line: lower-case words joined by `-`, at most
/// 40 characters, never empty.
pub fn slug(plan: &str) -> String {
    let line = plan
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let mut slug = String::new();
    for word in line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        "task".to_owned()
    } else {
        slug
    }
}

/// `.codebutler/branches` of the repository at `repo`: the worktrees.
pub fn branches_dir(repo: &Path) -> PathBuf {
    repo.join(".codebutler").join("branches")
}

/// `.codebutler/disks` of the repository at `repo`: the worktrees' disk images.
pub fn disks_dir(repo: &Path) -> PathBuf {
    repo.join(".codebutler").join("disks")
}

/// `.codebutler/git/bases` of the repository at `repo`: the shared base object stores.
pub fn stores_dir(repo: &Path) -> PathBuf {
    repo.join(".codebutler").join("git").join("bases")
}

/// Runs blocking git or file work off the runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorktreeError> + Send + 'static,
) -> Result<T, WorktreeError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| WorktreeError {
            slug: String::new(),
            message: format!("blocking task: {e}"),
        })?
}

/// A commit's short form, for people.
fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(
            slug("Fix the session expiry!\nmore"),
            "fix-the-session-expiry"
        );
        assert_eq!(slug("   \n../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("ünïcode only"), "n-code-only");
        assert_eq!(slug(""), "task");
        assert!(slug(&"word ".repeat(40)).len() <= 40);
    }
}
