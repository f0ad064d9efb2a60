//! Sandboxed Coder runners: starting them, locally or in containers ([`launcher`]), the
//! hub each one talks to ([`hub`], with web fetches under [`fetch`]'s policy and remote MCP
//! servers under the same rules, [`mcp`]), what a run
//! is asked to do ([`request`]: where it reports, whether its worktree is still being
//! prepared), supervising runs ([`supervisor`]: the queue, waiting for the worktree, the
//! events, the limits, the outcome), runners launched before their run is asked for, waiting
//! for a task ([`standby`]), the conversations runs leave and resume ([`resume`]), and
//! whether this host can run the sandbox at all ([`sandbox_probe`], at start). The worktrees runs work in are the [`crate::workspace`]'s; this module
//! uses them, never the other way round.

mod ending;
pub mod fetch;
pub mod hub;
pub mod launcher;
pub mod mcp;
pub mod request;
pub mod resume;
pub mod sandbox_probe;
pub mod standby;
pub mod supervisor;
pub mod thread_images;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, RunnerLauncher, SandboxMode};
use crate::gateway::Gateway;
use crate::layout::Layout;
use crate::store::Store;
use launcher::{ContainerLauncher, Launcher, LocalLauncher};
use supervisor::{RunLimits, Supervisor, SupervisorParts};

/// Why a repository's runners cannot be supervised.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Launcher(#[from] launcher::LaunchError),
    #[error(transparent)]
    Fetch(#[from] fetch::FetchClientError),
    #[error(transparent)]
    Workspace(#[from] crate::workspace::SetupError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The runner binary of a repository's configuration: `sandbox.runnerPath`, else
/// `codebutler-runner` beside this executable.
pub fn runner_bin(config: &Config) -> Result<PathBuf, launcher::LaunchError> {
    match &config.sandbox.runner_path {
        Some(path) => Ok(PathBuf::from(path)),
        None => Ok(LocalLauncher::beside_current_exe()?.runner_bin),
    }
}

/// The supervisor for a repository's configuration: the launcher `runner.launcher` names
/// (local, or a container per run), sandbox spec from the `sandbox` section, fetch policy
/// from `fetch`, limits from `coder` and `access`, and the worktrees runs work in
/// ([`Supervisor::worktrees`]).
pub async fn supervisor_for(
    layout: &Layout,
    config: &Config,
    store: Store,
    gateway: Arc<Gateway>,
    shared_as: Option<String>,
    builds: crate::workspace::build_slots::BuildSlots,
) -> Result<Supervisor, SetupError> {
    // The local runner binary also serves the controller's worktree helper and the
    // worktree preparation, whichever launcher runs the Coder.
    let runner_bin = runner_bin(config)?;
    let local = LocalLauncher {
        runner_bin: runner_bin.clone(),
    };
    let launcher: Arc<dyn Launcher> = match &config.runner {
        RunnerLauncher::Local => Arc::new(local),
        RunnerLauncher::Container(container) => {
            Arc::new(ContainerLauncher::new(container.clone(), &layout.dir.join("run")).await?)
        }
    };
    if config.sandbox.mode == SandboxMode::None {
        tracing::warn!("sandbox.mode is \"none\": Coder runners run WITHOUT a sandbox");
    }
    let fetch = fetch::policy(config)?;
    let worktrees = crate::workspace::preparer_for(layout, config, runner_bin, builds)?;
    Supervisor::new(SupervisorParts {
        store,
        gateway,
        launcher,
        fetch: Arc::new(fetch),
        limits: RunLimits {
            model: config.coder.model.clone(),
            max_turns: config.coder.max_turns,
            timeout: Duration::try_from_secs_f64(config.coder.timeout_mins * 60.0)
                .unwrap_or(Duration::from_secs(86_400)),
            max_concurrent: usize::try_from(config.access.max_concurrent_threads).unwrap_or(1),
            calls_per_hour: config.access.max_claude_calls_per_hour,
            context_window: config.coder.context_window,
            mcp_servers: config.coder.mcp_servers.clone(),
        },
        worktrees,
        log_dir: layout.dir.join("run"),
        memory: crate::memory::source::DefaultBranchMemory::new(&layout.repo),
        gh: PathBuf::from(&config.github.cli),
        shared_as,
    })
    .await
    .map_err(SetupError::from)
}
