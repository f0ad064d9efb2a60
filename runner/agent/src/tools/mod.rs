//! The read-only repository tools of the PM (ReadFile, Grep, ListFiles, GitLog, GitDiff),
//! confined to one repository root by [`path::RepoRoot`]. The controller adds the tools
//! that need its state (ReadMemory, ListThreads, GHStatus, ProposePlan).

pub mod git;
pub mod grep;
pub mod list_files;
pub mod path;
pub mod read_file;
mod set;
mod walk;

pub use set::repository_tools;
