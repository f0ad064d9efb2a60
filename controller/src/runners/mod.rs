//! Sandboxed Coder runners: starting them ([`launcher`]), the hub each one talks to
//! ([`hub`], with web fetches under [`fetch`]'s policy and commits, pushes and pull requests
//! made by [`forge`]), supervising runs ([`supervisor`]),
//! the admin API `runnerctl` uses ([`admin`]) and the worktrees runs work in ([`worktree`]).

pub mod admin;
pub mod fetch;
pub mod forge;
pub mod hub;
pub mod launcher;
pub mod supervisor;
pub mod worktree;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codebutler_runner::sandbox::{Limits, SandboxMode, SandboxSpec};

use crate::config::Config;
use crate::gateway::Gateway;
use crate::layout::Layout;
use crate::store::Store;
use launcher::LocalLauncher;
use supervisor::{RunLimits, Supervisor, SupervisorParts};

/// The supervisor for a repository's configuration: local launcher, sandbox spec from the
/// `sandbox` section, fetch policy from `fetch`, limits from `coder` and `access`.
pub async fn supervisor_for(
    layout: &Layout,
    config: &Config,
    store: Store,
    gateway: Arc<Gateway>,
) -> Result<Supervisor, String> {
    let launcher = match &config.sandbox.runner_path {
        Some(path) => LocalLauncher {
            runner_bin: PathBuf::from(path),
        },
        None => LocalLauncher::beside_current_exe().map_err(|e| e.to_string())?,
    };
    if config.sandbox.mode == "none" {
        tracing::warn!("sandbox.mode is \"none\": Coder runners run WITHOUT a sandbox");
    }
    let fetch = fetch::FetchPolicy::new(config.fetch.allow.clone(), config.fetch.deny.clone())?;
    let sandbox = config.sandbox.clone();
    let spec: supervisor::SpecBuilder = Arc::new(move |worktree| {
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
        serde_json::to_string(&spec).unwrap_or_default()
    });
    Supervisor::new(SupervisorParts {
        store,
        gateway,
        launcher: Arc::new(launcher),
        fetch: Arc::new(fetch),
        limits: RunLimits {
            model: config.coder.model.clone(),
            max_turns: config.coder.max_turns,
            timeout: Duration::try_from_secs_f64(config.coder.timeout_mins * 60.0)
                .unwrap_or(Duration::from_secs(86_400)),
            max_concurrent: usize::try_from(config.access.max_concurrent_threads).unwrap_or(1),
            calls_per_hour: config.access.max_claude_calls_per_hour,
            context_window: config.coder.context_window,
        },
        spec,
        log_dir: layout.dir.join("run"),
        memory_dir: layout.memory(),
        gh: PathBuf::from(&config.github.cli),
    })
    .await
    .map_err(|e| e.to_string())
}
