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
//! by-products are ignored in each thread's own repository ([`byproducts`]); how many
//! preparations run at once on the machine is [`build_slots`]'. The controller's
//! own files (memory, journals) are committed on a thread's branch by [`branch_files`]; what
//! a branch changed is read by [`branch_diff`], what a pull request shows by [`pr_diff`];
//! pull requests are viewed, edited and merged
//! by [`pull_request`] (whether its reviewers let a merge go on is [`review_gate`]'s to say,
//! its commenters' write access [`write_access`]'s; every `gh`
//! command line is built by [`gh_cli`]); a branch is brought up to date with the default
//! branch by
//! [`update_branch`]; what threads that are gone left behind is removed by [`orphans`].
//! Every module names a failed git2 or file system step the same way ([`step_error`]).

pub mod base_checkout;
pub mod branch_diff;
pub mod branch_files;
pub mod build_slots;
pub mod byproducts;
pub mod checkpoint;
pub mod ci_workflow;
pub mod disk;
pub mod forge;
pub mod gh_cli;
pub mod git_command;
pub mod ini;
pub mod node_wasm;
pub mod orphans;
pub mod platform;
pub mod pr_diff;
pub mod prepared;
pub mod project_files;
pub mod publish;
pub mod pull_request;
pub mod python_deps;
pub mod python_locks;
pub mod review_gate;
pub mod stage;
pub mod step_error;
pub mod test_command;
pub mod thread_repo;
pub mod toolchains;
pub mod update_branch;
pub mod worktree;
pub mod write_access;

use std::path::{Path, PathBuf};

use codebutler_sandbox::{Limits, SandboxMode, SandboxSpec};

use crate::config::{BuildConfig, Config, SandboxConfig};
use crate::layout::Layout;

/// The sandbox spec of a Coder run in `worktree`: paths, limits and mode from the `sandbox`
/// section, the `toolchains` found read-only with their `PATH` and variables, and the
/// environment of the worktree's platforms with the operator's `build.env` and
/// `build.path` ([`platform::environment`], `build.projectType` deciding the platforms;
/// [`node_wasm`] for Node's WebAssembly); no network.
pub fn run_spec(
    sandbox: &SandboxConfig,
    build: &BuildConfig,
    toolchains: &toolchains::Toolchains,
    worktree: &Path,
) -> SandboxSpec {
    let mut spec = SandboxSpec::for_worktree(worktree);
    spec.read_only = sandbox.read_only.iter().map(PathBuf::from).collect();
    for dir in toolchains.read_only() {
        if !spec.read_only.contains(&dir) {
            spec.read_only.push(dir);
        }
    }
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
    let mut path = build.path.clone();
    path.extend(toolchains.path());
    let mut env = toolchains.env();
    env.extend(build.env.clone());
    spec.env = platform::environment(&platforms, &root, &env, &path);
    // Node's WebAssembly under the sandbox's address-space limit, unless the operator's
    // `build.env` says what Node gets.
    if spec.mode == SandboxMode::Enforce
        && platforms.contains(&platform::Platform::Node)
        && !build.env.contains_key("NODE_OPTIONS")
        && let Some(option) = node_wasm::node_version(&path).and_then(node_wasm::options_for)
    {
        spec.env
            .insert("NODE_OPTIONS".to_owned(), option.to_owned());
    }
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
/// `sandbox-exec` runs the init and the worktree helper) and the machine's preparation
/// slots, shared by every repository of the service (`build.maxConcurrentBuilds`).
pub fn preparer_for(
    layout: &Layout,
    config: &Config,
    runner_bin: PathBuf,
    builds: build_slots::BuildSlots,
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
        toolchains: toolchains::Toolchains::of_this_process(config.sandbox.find_toolchains),
        builds,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::config::ProjectType;

    fn sandbox(mode: SandboxMode) -> SandboxConfig {
        SandboxConfig {
            mode,
            max_processes: 256,
            memory_mb: 2048,
            file_size_mb: 1024,
            cpu_seconds: 3600,
            tmp_mb: 512,
            disk_mb: 0,
            read_only: Vec::new(),
            find_toolchains: false,
            runner_path: None,
        }
    }

    fn build(path: &Path, env: &[(&str, &str)]) -> BuildConfig {
        BuildConfig {
            project_type: ProjectType::Auto,
            init_command: None,
            init_timeout_mins: 10.0,
            prepare_ahead_idle_mins: 30.0,
            max_prepared_ahead: 2,
            test_command: None,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            path: vec![path.display().to_string()],
            max_concurrent_builds: 0,
            pre_build_command: None,
        }
    }

    /// A `node` in a directory of its own that says it is `version`.
    fn node_saying(version: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("node");
        std::fs::write(&node, format!("#!/bin/sh\necho {version}\n")).unwrap();
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[test]
    fn the_toolchains_found_are_read_only_on_the_path_below_build_path() {
        let project = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("pyproject.toml"), "").unwrap();
        std::fs::write(project.path().join("Cargo.toml"), "").unwrap();
        let found = toolchains::Toolchains {
            found: vec![toolchains::Toolchain {
                name: "rustup".into(),
                read_only: vec!["/home/ci/.rustup".into(), "/home/ci/.cargo/bin".into()],
                path: vec!["/home/ci/.cargo/bin".into()],
                env: [("RUSTUP_HOME".to_owned(), "/home/ci/.rustup".to_owned())].into(),
            }],
        };
        let mut sandbox = sandbox(SandboxMode::Enforce);
        sandbox.read_only = vec!["/opt/tools".into(), "/home/ci/.rustup".into()];
        let spec = run_spec(
            &sandbox,
            &build(Path::new("/opt/tools/bin"), &[]),
            &found,
            project.path(),
        );
        assert_eq!(
            spec.read_only,
            [
                PathBuf::from("/opt/tools"),
                "/home/ci/.rustup".into(),
                "/home/ci/.cargo/bin".into()
            ]
        );
        let root = spec.mount_point.display().to_string();
        assert_eq!(
            spec.env["PATH"],
            format!(
                "{root}/.venv/bin:/opt/tools/bin:/home/ci/.cargo/bin:/usr/local/bin:/usr/bin:/bin"
            )
        );
        assert_eq!(spec.env["RUSTUP_HOME"], "/home/ci/.rustup");
        // The worktree's own cargo home stays what `cargo fetch` fills.
        assert_eq!(
            spec.env["CARGO_HOME"],
            format!("{root}/.codebutler-cache/cargo")
        );
        // The operator's build.env wins over a toolchain's variable.
        let mine = build(
            Path::new("/opt/tools/bin"),
            &[("RUSTUP_HOME", "/opt/rustup")],
        );
        let spec = run_spec(&sandbox, &mine, &found, project.path());
        assert_eq!(spec.env["RUSTUP_HOME"], "/opt/rustup");
    }

    #[test]
    fn a_sandboxed_node_that_has_it_gets_the_wasm_option() {
        let node = |spec: &SandboxSpec| spec.env.get("NODE_OPTIONS").cloned();
        let project = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("package.json"), "{}").unwrap();
        let new_node = node_saying("v22.3.1");
        let enforce = sandbox(SandboxMode::Enforce);
        let none = toolchains::Toolchains::none();
        let spec = run_spec(
            &enforce,
            &build(new_node.path(), &[]),
            &none,
            project.path(),
        );
        assert_eq!(node(&spec).as_deref(), Some("--disable-wasm-trap-handler"));
        // An older Node would refuse to start with it.
        let old_node = node_saying("v18.19.0");
        let spec = run_spec(
            &enforce,
            &build(old_node.path(), &[]),
            &none,
            project.path(),
        );
        assert_eq!(node(&spec), None);
        // The operator's NODE_OPTIONS is what Node gets.
        let mine = build(
            new_node.path(),
            &[("NODE_OPTIONS", "--max-old-space-size=512")],
        );
        let spec = run_spec(&enforce, &mine, &none, project.path());
        assert_eq!(node(&spec).as_deref(), Some("--max-old-space-size=512"));
        // Without a sandbox there is no address-space limit; without Node, no Node.
        let spec = run_spec(
            &sandbox(SandboxMode::None),
            &build(new_node.path(), &[]),
            &none,
            project.path(),
        );
        assert_eq!(node(&spec), None);
        let generic = tempfile::tempdir().unwrap();
        let spec = run_spec(
            &enforce,
            &build(new_node.path(), &[]),
            &none,
            generic.path(),
        );
        assert_eq!(node(&spec), None);
    }
}
