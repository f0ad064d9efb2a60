//! The worktrees Coder runs work in ([`worktree`], prepared per platform by [`platform`]):
//! each a repository of its own with only its thread's history ([`thread_repo`]) on a disk
//! of its own ([`disk`]), whose files the controller reads and writes only through the
//! sandboxed worktree helper ([`stage`]), for commits and pushes and pull requests
//! ([`forge`]) and for the checkpoints "undo" returns to ([`checkpoint`]).

pub mod checkpoint;
pub mod disk;
pub mod forge;
pub mod platform;
pub mod stage;
pub mod thread_repo;
pub mod worktree;

use std::path::{Path, PathBuf};

use codebutler_sandbox::{Limits, SandboxMode, SandboxSpec};

use crate::config::{BuildConfig, Config, SandboxConfig};
use crate::layout::Layout;
use crate::runners::launcher::LocalLauncher;

/// The sandbox spec of a Coder run in `worktree`: paths, limits and mode from the `sandbox`
/// section, and the build-isolation environment of the worktree's platforms
/// ([`platform::isolation_env`], `build.projectType` deciding them); no network.
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
    if sandbox.mode == "none" {
        spec.mode = SandboxMode::None;
    }
    // Without a sandbox the worktree is seen at its own path.
    let root = match spec.mode {
        SandboxMode::None => worktree.to_owned(),
        SandboxMode::Enforce => spec.mount_point.clone(),
    };
    let platforms = platform::platforms(worktree, &build.project_type);
    spec.env = platform::isolation_env(&platforms, &root);
    spec
}

/// The worktree preparer for a repository's configuration (`build`, `sandbox`,
/// `access.maxWorktreeDiskMB`), with the same runner binary as the supervisor's.
pub fn preparer_for(layout: &Layout, config: &Config) -> Result<worktree::Preparer, String> {
    if config.sandbox.disk_mb > 0
        && let Err(e) = disk::probe()
    {
        return Err(format!(
            "sandbox.diskMB is {} but this process cannot give each worktree its own disk ({e}); \
             run codebutler as root, or set sandbox.diskMB to 0 to run without a per-thread disk cap",
            config.sandbox.disk_mb
        ));
    }
    let runner_bin = match &config.sandbox.runner_path {
        Some(path) => PathBuf::from(path),
        None => {
            LocalLauncher::beside_current_exe()
                .map_err(|e| e.to_string())?
                .runner_bin
        }
    };
    Ok(worktree::Preparer {
        repo: layout.repo.clone(),
        run_dir: layout.dir.join("run"),
        runner_bin,
        sandbox: config.sandbox.clone(),
        build: config.build.clone(),
        max_disk_mb: config.access.max_worktree_disk_mb,
    })
}
