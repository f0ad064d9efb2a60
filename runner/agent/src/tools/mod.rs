//! The read-only repository tools of the PM (ReadFile, Grep, ListFiles, GitLog, GitDiff),
//! confined to one repository root by [`path::RepoRoot`]. The controller adds the tools
//! that need its state (ReadMemory, ListThreads, GHStatus, ProposePlan).
//!
//! ReadFile, Grep and ListFiles are also the Coder's Read, Grep and Glob: one
//! implementation each, in the worktree [`path::PathStyle`] (`ReadFile::worktree`, …),
//! which the runner offers.

pub mod git;
pub mod grep;
pub mod list_files;
pub mod path;
pub mod read_file;
mod set;
mod walk;

pub use set::repository_tools;
