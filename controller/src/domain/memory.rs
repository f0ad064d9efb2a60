//! Where approved memory goes, as a thread's open proposal keeps it.

use std::str::FromStr;

/// Where approved memory is committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryTarget {
    /// The thread's pull request branch: the memory lands with the merge.
    PrBranch,
    /// A small pull request of its own on `codebutler/memory-<slug>`, for a thread without
    /// one.
    NewPullRequest,
}

impl MemoryTarget {
    /// The name the store keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PrBranch => "pr_branch",
            Self::NewPullRequest => "new_pr",
        }
    }
}

impl FromStr for MemoryTarget {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, ()> {
        match name {
            "pr_branch" => Ok(Self::PrBranch),
            "new_pr" => Ok(Self::NewPullRequest),
            _ => Err(()),
        }
    }
}
