//! The runner's sandbox, split by where it runs.
//!
//! - [`spec`] — the sandbox spec the controller hands to the runner (JSON), its defaults
//!   and the clean environment built from it; and [`worktree_wire`] — the frames the
//!   sandboxed worktree helper writes for the controller. Both are plain data, portable,
//!   always built: the controller needs them and nothing else from here.
//! - The Linux implementation ([`enter`] and the modules it uses: namespaces, mounts,
//!   rlimits, cgroups, capabilities, Landlock, seccomp, the connect supervisor), built
//!   only on Linux with the `enforce` feature (on by default). Only the runner binary
//!   enables it; the controller depends on this crate without it, and CI checks that the
//!   controller still builds so (`.ci/run`), since the controller must build where this
//!   code does not compile. Its module documentation gives the order of operations.

pub mod spec;
pub mod worktree_wire;

pub use spec::{Limits, SandboxMode, SandboxSpec, clean_env};

#[cfg(all(target_os = "linux", feature = "enforce"))]
mod linux;
#[cfg(all(target_os = "linux", feature = "enforce"))]
pub use linux::*;
