//! The runner binary's internals: the hub client, the Coder's loop and its tools, the
//! runner's life from sandbox to ending, and the controller's worktree helper. Built on the
//! agent core (`codebutler-agent`) and the sandbox (`codebutler-sandbox`); the controller
//! does not link this crate (only its benchmarks and the fuzz targets do).

pub mod agent;
pub mod hub;
pub mod quiesce;
pub mod run;
pub mod tools;
pub mod worktree_io;
