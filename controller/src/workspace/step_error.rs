//! A failed step of the workspace's git2 or file system work, named: every workspace module
//! that calls libgit2 or the file system reports a failure as "<step>: <cause>", so the log
//! and the thread say which step failed. The two errors and the helpers that name them are
//! written here once; each module's error wraps them (`#[error(transparent)]`).

use std::io;

/// A libgit2 call that failed, and the step it was for: `"<step>: <libgit2's message>"`.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {}", source.message())]
pub struct GitStepError {
    /// What the call was for, said for people ("find the base commit").
    pub step: String,
    /// libgit2's error.
    #[source]
    pub source: git2::Error,
}

/// A file system call that failed, and the step it was for: `"<step>: <the error>"`.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct IoStepError {
    /// What the call was for, said for people ("create the worktree").
    pub step: String,
    /// The system's error.
    #[source]
    pub source: io::Error,
}

/// Names a libgit2 failure by `step`: `repo.head().map_err(git("read the head"))?`.
pub fn git(step: impl Into<String>) -> impl FnOnce(git2::Error) -> GitStepError {
    let step = step.into();
    move |source| GitStepError { step, source }
}

/// Names a file system failure by `step`: `fs::create_dir(p).map_err(io("create it"))?`.
pub fn io(step: impl Into<String>) -> impl FnOnce(io::Error) -> IoStepError {
    let step = step.into();
    move |source| IoStepError { step, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_says_the_step_and_the_cause_only() {
        let git_error = git("read the head")(git2::Error::from_str("reference 'HEAD' not found"));
        assert_eq!(
            git_error.to_string(),
            "read the head: reference 'HEAD' not found"
        );
        let io_error = io("create the worktree")(io::Error::other("no space left"));
        assert_eq!(io_error.to_string(), "create the worktree: no space left");
        assert!(std::error::Error::source(&io_error).is_some());
    }
}
