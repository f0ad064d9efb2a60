//! The worktrees Coder runs work in ([`worktree`], prepared per platform by [`platform`]
//! from what the base commit's files declare, [`project_files`]: for Python
//! [`python_deps`], with [`ini`] reading `setup.cfg` and `tox.ini` and [`python_locks`] the
//! locks' versions; the project's test command the Coder is told is [`test_command`]'s,
//! CI's read by [`ci_workflow`]):
//! each a repository of its own with only its thread's history ([`thread_repo`], its files
//! written by [`base_checkout`]) on a disk of its own ([`disk`]), whose files the controller reads and writes only through the
//! sandboxed worktree helper ([`stage`]), for commits and pushes and pull requests
//! ([`forge`]) and for the checkpoints "undo" returns to ([`checkpoint`]). What the
//! preparation left is recorded and kept out of commits ([`prepared`]), and build
//! by-products are ignored in each thread's own repository ([`byproducts`]). The controller's
//! own files (memory, journals) are committed on a thread's branch by [`branch_files`]; what
//! a branch changed is read by [`branch_diff`]; pull requests are viewed, edited and merged
//! by [`pull_request`] (whose commenters' write access [`write_access`] decides; every `gh`
//! command line is built by [`gh_cli`]); a branch is brought up to date with the default
//! branch by
//! [`update_branch`]; what threads that are gone left behind is removed by [`orphans`].
//! Every module names a failed git2 or file system step the same way ([`step_error`]).

pub mod base_checkout;
pub mod branch_diff;
pub mod branch_files;
pub mod byproducts;
pub mod checkpoint;
pub mod ci_workflow;
pub mod disk;
pub mod forge;
pub mod gh_cli;
pub mod git_command;
pub mod ini;
pub mod orphans;
pub mod platform;
pub mod prepared;
pub mod project_files;
pub mod publish;
pub mod pull_request;
pub mod python_deps;
pub mod python_locks;
pub mod stage;
pub mod step_error;
pub mod test_command;
pub mod thread_repo;
pub mod update_branch;
pub mod worktree;
pub mod write_access;

use std::path::{Path, PathBuf};

use codebutler_sandbox::{Limits, SandboxMode, SandboxSpec};

use crate::config::{BuildConfig, Config, SandboxConfig};
use crate::layout::Layout;

/// The sandbox spec of a Coder run in `worktree`: paths, limits and mode from the `sandbox`
/// section, and the environment of the worktree's platforms with the operator's
/// `build.env` and `build.path` ([`platform::environment`], `build.projectType` deciding
/// the platforms); no network.
pub fn run_spec(sandbox: &SandboxConfig, build: &BuildConfig, worktree: &Path) -> SandboxSpec {
    let mut spec = SandboxSpec::for_worktree(worktree);
    spec.read_only = sandbox.read_only.iter().map(PathBuf::from).collect();
    spec.limits = Limits {
        max_processes: sandbox.max_processes,
        memory_bytes: sandbox.memory_mb << 20,
        file_size_bytes: sandbox.file_size_mb << 20,
        cpu_seconds: sandbox.cpu_seconds,
        tmp_bytes: sandbox.tmp_mb << 20,
    };
    spec.mode = sandbox.mode;
    // Without a sandbox the worktree is seen at its own path.
    let root = match spec.mode {
        SandboxMode::None => worktree.to_owned(),
        SandboxMode::Enforce => spec.mount_point.clone(),
    };
    let platforms = platform::platforms(worktree, build.project_type);
    spec.env = platform::environment(&platforms, &root, &build.env, &build.path);
    spec
}

/// Why the worktrees of a repository's configuration cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `sandbox.diskMB` asks for a disk per worktree that this process cannot make.
    #[error(
        "sandbox.diskMB is {disk_mb} but this process cannot give each worktree its own disk ({source}); \
         run codebutler as root on a host with loop devices (a container needs /dev/loop-control \
         and the loop devices passed in), or set sandbox.diskMB to 0 to run without a per-thread \
         disk cap"
    )]
    NoDisks {
        disk_mb: u64,
        source: disk::DiskError,
    },
}

/// The worktree preparer for a repository's configuration (`build`, `sandbox`,
/// `access.maxWorktreeDiskMB`), with `runner_bin` (the runners' binary, whose
/// `sandbox-exec` runs the init and the worktree helper).
pub fn preparer_for(
    layout: &Layout,
    config: &Config,
    runner_bin: PathBuf,
) -> Result<worktree::Preparer, SetupError> {
    if config.sandbox.disk_mb > 0
        && let Err(source) = disk::probe()
    {
        return Err(SetupError::NoDisks {
            disk_mb: config.sandbox.disk_mb,
            source,
        });
    }
    Ok(worktree::Preparer {
        repo: layout.repo.clone(),
        run_dir: layout.dir.join("run"),
        runner_bin,
        sandbox: config.sandbox.clone(),
        build: config.build.clone(),
        max_disk_mb: config.access.max_worktree_disk_mb,
    })
}
