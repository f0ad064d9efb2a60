//! Starting runner processes. Everything goes through the [`Launcher`] trait, so another
//! launcher (a Kubernetes Pod per run, deploy/README.md: Runners in containers) is an addition that
//! touches neither supervision nor the hub.
//!
//! A [`LaunchRequest`] carries everything a runner needs wherever it runs: the run's id
//! and its sandbox spec (the worktree to mount read-write, the paths to expose read-only,
//! the limits). The time limit stays the supervisor's, which kills the runner through
//! [`RunnerProcess::start_kill`]. The launcher hands back a [`RunnerProcess`] to watch
//! and stop, and the controller's end of the hub: the runner's only connection.
//!
//! - [`LocalLauncher`]: `codebutler-runner run` as a local process, with an empty
//!   environment (no secret can leak through it), its output in a log file, and one end of
//!   a fresh socket pair as fd 3. Nothing else ever holds that socket.
//! - [`container::ContainerLauncher`]: the same runner in a container of its own, the
//!   same socket passed in as fd 3.

#![allow(unsafe_code)]

pub mod container;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use codebutler_sandbox::SandboxSpec;

pub use container::ContainerLauncher;

/// The file descriptor on which the runner finds its hub socket.
pub const HUB_FD: i32 = 3;

/// What a runner needs to start.
#[derive(Clone, Debug)]
pub struct LaunchRequest {
    /// The run's id (names its container).
    pub run_id: String,
    /// The sandbox spec (not secret: paths and limits): the worktree, the read-only paths,
    /// the limits. Passed to the runner as JSON.
    pub spec: SandboxSpec,
    /// Where the runner's stdout and stderr go.
    pub log: PathBuf,
}

/// A started runner.
#[derive(Debug)]
pub struct Launched {
    pub process: RunnerProcess,
    /// The controller's end of the hub socket.
    pub hub: tokio::net::UnixStream,
}

/// Why a runner could not be started.
#[derive(Debug, thiserror::Error)]
#[error("start runner: {0}")]
pub struct LaunchError(pub String);

/// Starts runners.
#[async_trait]
pub trait Launcher: Send + Sync + std::fmt::Debug {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError>;
}

/// A launched runner's process: the local runner itself, or the container engine's client
/// attached to the runner's container, with what it takes to stop that container.
#[derive(Debug)]
pub struct RunnerProcess {
    child: tokio::process::Child,
    container: Option<container::Running>,
}

impl RunnerProcess {
    /// A local process: killing it kills the runner.
    pub fn local(child: tokio::process::Child) -> Self {
        Self {
            child,
            container: None,
        }
    }

    /// The process id of the child the controller started (the runner, or the engine's
    /// client); `None` once it has been waited for.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The runner's exit status if it has ended, without waiting; `None` while it runs.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }

    /// Starts killing the runner: the process, and its container if it has one.
    pub fn start_kill(&mut self) -> std::io::Result<()> {
        if let Some(container) = &mut self.container {
            container.start_kill();
        }
        self.child.start_kill()
    }

    /// Waits for the runner to end. For a container, also until the container is gone, so
    /// nothing of the run outlives this call.
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.child.wait().await?;
        if let Some(container) = &mut self.container {
            container.remove().await;
        }
        Ok(status)
    }
}

/// Starts runners as local processes of the `codebutler-runner` binary.
#[derive(Clone, Debug)]
pub struct LocalLauncher {
    pub runner_bin: PathBuf,
}

impl LocalLauncher {
    /// The runner binary next to the running executable (`codebutler-runner`).
    pub fn beside_current_exe() -> Result<Self, LaunchError> {
        let exe = std::env::current_exe()
            .map_err(|e| LaunchError(format!("find own executable: {e}")))?;
        Ok(Self {
            runner_bin: exe.with_file_name("codebutler-runner"),
        })
    }
}

#[async_trait]
impl Launcher for LocalLauncher {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        let mut cmd = tokio::process::Command::new(&self.runner_bin);
        cmd.arg("run").arg("--spec-json").arg(spec_json(request)?);
        let (child, hub) = spawn_with_hub(cmd, request, &[])?;
        Ok(Launched {
            process: RunnerProcess::local(child),
            hub,
        })
    }
}

/// The request's spec as the runner's `--spec-json` argument.
fn spec_json(request: &LaunchRequest) -> Result<String, LaunchError> {
    serde_json::to_string(&request.spec)
        .map_err(|e| LaunchError(format!("write the sandbox spec: {e}")))
}

/// Spawns `cmd` with an empty environment but the controller's variables named in `keep`
/// (none for a runner; where a container engine finds its own state), stdin from
/// `/dev/null`, stdout and stderr into the request's log, in a process group of its own,
/// and one end of a fresh socket pair as fd [`HUB_FD`]; returns the child and the other
/// end.
fn spawn_with_hub(
    mut cmd: tokio::process::Command,
    request: &LaunchRequest,
    keep: &[&str],
) -> Result<(tokio::process::Child, tokio::net::UnixStream), LaunchError> {
    let (ours, theirs) =
        StdUnixStream::pair().map_err(|e| LaunchError(format!("create hub socket pair: {e}")))?;
    if let Some(dir) = request.log.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| LaunchError(format!("create {}: {e}", dir.display())))?;
    }
    let log = crate::layout::create_own_file(&request.log)
        .map_err(|e| LaunchError(format!("create {}: {e}", request.log.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|e| LaunchError(format!("open runner log: {e}")))?;
    cmd.env_clear();
    for name in keep {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        .kill_on_drop(true);
    let fd = theirs.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and only calls dup2 and
    // fcntl, which are async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(move || {
            if fd == HUB_FD {
                // Already in place: dup2 would be a no-op and leave close-on-exec set.
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, HUB_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let program = cmd.as_std().get_program().to_string_lossy().into_owned();
    let child = cmd
        .spawn()
        .map_err(|e| LaunchError(format!("run {program}: {e}")))?;
    drop(theirs);
    ours.set_nonblocking(true)
        .map_err(|e| LaunchError(format!("hub socket: {e}")))?;
    let hub = tokio::net::UnixStream::from_std(ours)
        .map_err(|e| LaunchError(format!("hub socket: {e}")))?;
    Ok((child, hub))
}
