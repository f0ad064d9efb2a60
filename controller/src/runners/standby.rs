//! A runner started before its run is asked for ([`Standby`]): while a plan is still
//! discussed, its worktree's runner is launched (process, sandbox, hub session) and waits
//! for a task, so that an approval only sends the task ([`super::supervisor::Supervisor::start_on`]).
//!
//! A standby holds no secret and calls no model: the runner has nothing but its sandbox
//! and its hub, and the hub answers nothing for a run that has no task. No run is recorded
//! for it. Dropping it stops the hub, and with it the runner (whose process is killed on
//! drop, and which ends anyway when its hub socket closes).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use codebutler_proto::runner::v1::{RunnerCommand, RunnerEvent};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::launcher::RunnerProcess;
use super::request::{Reporting, RunRequest, Workspace};
use super::supervisor::SnapshotError;
use crate::domain::ThreadKey;
use crate::workspace::checkpoint::Snapshot;

/// Where a runner is launched before its run: the thread it will serve, its worktree and
/// branch, and where the run will report.
#[derive(Clone, Debug)]
pub struct RunSite {
    pub thread: ThreadKey,
    pub worktree: PathBuf,
    pub branch: String,
    pub reporting: Reporting,
}

impl RunSite {
    /// The request the runner is launched for: its site, no task yet.
    pub(super) fn request(self) -> RunRequest {
        RunRequest {
            thread: self.thread,
            plan: String::new(),
            worktree: self.worktree,
            branch: self.branch,
            reporting: self.reporting,
            system_prompt: String::new(),
            resume: None,
            workspace: Workspace::Ready,
        }
    }
}

/// A runner waiting for its task, with the checkpoint of its worktree taken meanwhile.
pub struct Standby {
    pub(super) run_id: String,
    pub(super) commands: mpsc::Sender<RunnerCommand>,
    pub(super) waiting: Waiting,
    /// Stops the hub (and so the runner) if the standby is dropped unused.
    pub(super) stop: DropGuard,
}

impl std::fmt::Debug for Standby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standby")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// The launched runner of a standby and the snapshot of its worktree ("undo"'s checkpoint).
pub(super) struct Waiting {
    pub(super) runner: Runner,
    pub(super) snapshot: Result<Snapshot, SnapshotError>,
}

impl Waiting {
    /// Stops the runner and its hub, and waits for both to end.
    pub(super) async fn stop(mut self, run_id: &str) {
        self.runner.start_kill(run_id);
        self.runner.wait(run_id).await;
        self.runner.stop_hub(run_id).await;
    }
}

/// How a run's runner comes: launched for it, or a standby already waiting.
pub(super) enum Launch {
    /// Launched when the run is admitted; its hub takes these commands.
    Fresh(mpsc::Receiver<RunnerCommand>),
    Waiting(Box<Waiting>),
}

impl Launch {
    /// A run that will not go: a waiting runner is stopped (nothing was launched otherwise).
    pub(super) async fn stop(self, run_id: &str) {
        if let Self::Waiting(waiting) = self {
            waiting.stop(run_id).await;
        }
    }
}

impl Standby {
    /// Whether its runner still waits (it did not end on its own, say killed by the OOM
    /// killer); a runner that ended is no use for a run.
    pub fn is_waiting(&mut self) -> bool {
        matches!(self.waiting.runner.child.try_wait(), Ok(None))
    }

    /// Stops its runner and hub, and waits for both to end.
    pub async fn stop(self) {
        let Self {
            run_id,
            waiting,
            stop,
            ..
        } = self;
        waiting.stop(&run_id).await;
        drop(stop);
    }

    /// Its parts, for the run that takes it over.
    pub(super) fn into_parts(self) -> (String, mpsc::Sender<RunnerCommand>, Box<Waiting>) {
        let Self {
            run_id,
            commands,
            waiting,
            stop,
        } = self;
        stop.disarm();
        (run_id, commands, Box::new(waiting))
    }
}

/// A launched runner: its process, the events its hub receives, and the hub.
pub(super) struct Runner {
    pub(super) child: RunnerProcess,
    pub(super) events: mpsc::Receiver<RunnerEvent>,
    pub(super) hub_stop: CancellationToken,
    pub(super) hub_task: tokio::task::JoinHandle<()>,
    /// Whether the hub answers the runner's calls (see [`super::hub::RunHub::tasked`]).
    pub(super) tasked: Arc<AtomicBool>,
    /// Whether the provider failed the run's last model call (see
    /// [`super::hub::ModelOutage`]).
    pub(super) outage: super::hub::ModelOutage,
}

impl Runner {
    /// Starts killing the runner's process (its end is awaited by whoever waits on it).
    pub(super) fn start_kill(&mut self, run_id: &str) {
        if let Err(e) = self.child.start_kill() {
            tracing::warn!(run = run_id, "kill the runner: {e}");
        }
    }

    /// Waits for the runner's process to end. `None` when its status could not be read.
    pub(super) async fn wait(&mut self, run_id: &str) -> Option<std::process::ExitStatus> {
        match self.child.wait().await {
            Ok(status) => Some(status),
            Err(e) => {
                tracing::warn!(run = run_id, "wait for the runner: {e}");
                None
            }
        }
    }

    /// Stops the run's hub once the runner is gone.
    pub(super) async fn stop_hub(self, run_id: &str) {
        self.hub_stop.cancel();
        if let Err(e) = self.hub_task.await {
            tracing::error!(run = run_id, "the run's hub ended abnormally: {e}");
        }
    }
}
