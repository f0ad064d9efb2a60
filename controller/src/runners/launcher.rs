//! Starting runner processes. Everything goes through the [`Launcher`] trait, so container
//! or cluster launchers can be added without touching supervision.
//!
//! The local launcher starts `codebutler-runner run` with an empty environment (no secret can
//! leak through it), its output in a log file, and one end of a fresh socket pair as fd 3:
//! the runner's only connection to the controller. Nothing else ever holds that socket.

#![allow(unsafe_code)]

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;

/// The file descriptor on which the runner finds its hub socket.
pub const HUB_FD: i32 = 3;

/// What a runner needs to start.
#[derive(Clone, Debug)]
pub struct LaunchRequest {
    /// The sandbox spec, as JSON (not secret: paths and limits).
    pub spec_json: String,
    /// Where the runner's stdout and stderr go.
    pub log: PathBuf,
}

/// A started runner.
#[derive(Debug)]
pub struct Launched {
    pub child: tokio::process::Child,
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
        let (ours, theirs) = StdUnixStream::pair()
            .map_err(|e| LaunchError(format!("create hub socket pair: {e}")))?;
        if let Some(dir) = request.log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| LaunchError(format!("create {}: {e}", dir.display())))?;
        }
        let log = std::fs::File::create(&request.log)
            .map_err(|e| LaunchError(format!("create {}: {e}", request.log.display())))?;
        let log_err = log
            .try_clone()
            .map_err(|e| LaunchError(format!("open runner log: {e}")))?;
        let mut cmd = tokio::process::Command::new(&self.runner_bin);
        cmd.arg("run")
            .arg("--spec-json")
            .arg(&request.spec_json)
            .env_clear()
            .stdin(Stdio::null())
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
        let child = cmd
            .spawn()
            .map_err(|e| LaunchError(format!("run {}: {e}", self.runner_bin.display())))?;
        drop(theirs);
        ours.set_nonblocking(true)
            .map_err(|e| LaunchError(format!("hub socket: {e}")))?;
        let hub = tokio::net::UnixStream::from_std(ours)
            .map_err(|e| LaunchError(format!("hub socket: {e}")))?;
        Ok(Launched { child, hub })
    }
}
