//! Runner supervision: start runs (queued beyond `access.maxConcurrentThreads`), drive each
//! runner's session, record every event and the run's outcome in the store, enforce the time
//! limit from outside, cancel on request, reap the process and clean up its hub.
//!
//! Here: the supervisor's face (start, standby, cancel, messages and answers to a running
//! Coder, shutdown); the threads' runs are [`active`], a run's Coder slot is [`admission`],
//! its life from launch to outcome [`drive`] (killed from outside at [`deadline`]), the
//! checkpoint before its first step [`checkpoint`].

mod active;
mod admission;
mod checkpoint;
mod deadline;
mod drive;

use active::{Active, ActiveRuns, StopHandle};
use admission::Slots;
pub(super) use checkpoint::SnapshotError;

use crate::memory::source::DefaultBranchMemory;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codebutler_proto::runner::v1::{
    Answer, Cancel, RunnerCommand, RunnerEvent, UserMessage, runner_command::Command,
};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::fetch::FetchPolicy;
use super::launcher::{LaunchError, Launcher};
pub use super::request::{Prepared, Reporting, Resume, RunRequest, UNATTENDED_ANSWER, Workspace};
use super::standby::{Launch, Waiting};
pub use super::standby::{RunSite, Standby};
use crate::domain::{RunRecord, RunState};
use crate::gateway::Gateway;
use crate::store::{NewRun, Store, StoreError};
use crate::workspace::worktree::Preparer;
use drive::RunnerStartError;
pub(crate) use drive::shared_files_dir;

/// Time a runner gets to stop after a cancel before it is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// Time past the run's own limit before the controller kills the runner.
const HARD_LIMIT_GRACE: Duration = Duration::from_secs(30);

/// Limits and model of every run.
#[derive(Clone, Debug)]
pub struct RunLimits {
    pub model: String,
    pub max_turns: u32,
    pub timeout: Duration,
    pub max_concurrent: usize,
    /// Coder model calls per hour across runs; 0 for no limit.
    pub calls_per_hour: u32,
    /// The Coder model's context window, in tokens.
    pub context_window: u64,
    /// The MCP servers whose tools every run gets (`coder.mcpServers`).
    pub mcp_servers: crate::config::McpServers,
}

/// One event of a run, as broadcast to followers.
#[derive(Clone, Debug)]
pub struct RunEvent {
    pub run_id: String,
    pub seq: i64,
    pub at_unix_ms: i64,
    pub event: RunnerEvent,
    /// Set on the run's last broadcast: the run's final state.
    pub ended: Option<RunState>,
}

/// Why a run could not be started or changed.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("thread {0} already has a run in progress")]
    Busy(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the stored conversation is unreadable: {0}")]
    Conversation(#[from] serde_json::Error),
}

/// The supervisor; cheap to clone.
#[derive(Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").finish_non_exhaustive()
    }
}

struct Inner {
    store: Store,
    gateway: Arc<Gateway>,
    launcher: Arc<dyn Launcher>,
    fetch: Arc<FetchPolicy>,
    limits: RunLimits,
    /// The worktrees: their sandbox specs, disks and helper.
    worktrees: Preparer,
    log_dir: PathBuf,
    gh: PathBuf,
    memory: DefaultBranchMemory,
    slots: Slots,
    active: ActiveRuns,
    events: broadcast::Sender<RunEvent>,
    tracker: TaskTracker,
}

/// A Coder question waiting for a reply in its thread.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenQuestion {
    pub run_id: String,
    pub question_id: String,
}

/// Everything a supervisor needs.
#[allow(missing_debug_implementations)] // holds a closure
pub struct SupervisorParts {
    pub store: Store,
    pub gateway: Arc<Gateway>,
    pub launcher: Arc<dyn Launcher>,
    pub fetch: Arc<FetchPolicy>,
    pub limits: RunLimits,
    /// The worktrees runs work in: their sandbox specs, disks and helper.
    pub worktrees: Preparer,
    /// Where runner logs go (`.codebutler/run/`).
    pub log_dir: PathBuf,
    /// The `gh` executable pull requests are opened with (`github.cli`).
    pub gh: PathBuf,
    /// The project's memory as the default branch holds it, served to runners by ReadMemory.
    pub memory: DefaultBranchMemory,
    /// With several instances on one store: this instance's id. Runs are then admitted to
    /// the `max_concurrent` slots every live instance shares ([`Store::admit_run`]), and
    /// runs left unfinished are settled by whoever takes their thread, not at start.
    pub shared_as: Option<String>,
}

impl Supervisor {
    /// A supervisor. Marks runs left running by a previous controller as interrupted (their
    /// threads are told by the start-up reconciliation, which reports every run end not yet
    /// reported).
    pub async fn new(parts: SupervisorParts) -> Result<Self, StoreError> {
        let interrupted = match parts.shared_as {
            // Other instances' runs go on; a stopped one's are its threads' new owners' to settle.
            Some(_) => Vec::new(),
            None => parts.store.interrupt_unfinished_runs().await?,
        };
        if !interrupted.is_empty() {
            tracing::warn!(
                tag = "CLD",
                "{} run(s) were interrupted by the last stop",
                interrupted.len()
            );
        }
        let (events, _) = broadcast::channel(1024);
        Ok(Self {
            inner: Arc::new(Inner {
                slots: Slots::new(parts.limits.max_concurrent, parts.shared_as),
                store: parts.store,
                gateway: parts.gateway,
                launcher: parts.launcher,
                fetch: parts.fetch,
                limits: parts.limits,
                worktrees: parts.worktrees,
                log_dir: parts.log_dir,
                gh: parts.gh,
                memory: parts.memory,
                active: ActiveRuns::default(),
                events,
                tracker: TaskTracker::new(),
            }),
        })
    }

    /// Starts a run (queued while all slots are busy). One run per thread at a time.
    pub async fn start(&self, request: RunRequest) -> Result<RunRecord, SupervisorError> {
        self.start_with(request, None).await
    }

    /// Starts a run on a runner already waiting for its task ([`Supervisor::standby`]):
    /// queued like any run, then only the task is sent. The standby's worktree must be the
    /// request's.
    pub async fn start_on(
        &self,
        request: RunRequest,
        standby: Standby,
    ) -> Result<RunRecord, SupervisorError> {
        self.start_with(request, Some(standby)).await
    }

    async fn start_with(
        &self,
        request: RunRequest,
        standby: Option<Standby>,
    ) -> Result<RunRecord, SupervisorError> {
        let thread_ts = request.thread.thread_ts.clone();
        let cancel = CancellationToken::new();
        let (run_id, commands, launch) = match standby {
            Some(standby) => {
                let (run_id, commands, waiting) = standby.into_parts();
                (run_id, commands, Launch::Waiting(waiting))
            }
            None => {
                let (commands, command_rx) = mpsc::channel(16);
                let run_id = format!("{}", rand::random::<u64>() >> 11);
                (run_id, commands, Launch::Fresh(command_rx))
            }
        };
        let busy = !self.inner.active.claim(
            &thread_ts,
            Active::new(run_id.clone(), commands.clone(), cancel.clone()),
        );
        if busy {
            launch.stop(&run_id).await;
            return Err(SupervisorError::Busy(thread_ts));
        }
        let (record, resume_messages) = match self.record_run(&run_id, &request).await {
            Ok(recorded) => recorded,
            Err(e) => {
                self.inner.active.release(&thread_ts);
                launch.stop(&run_id).await;
                return Err(e);
            }
        };
        tracing::info!(tag = "CLD", "thread {thread_ts} → run {run_id} queued");
        let inner = self.inner.clone();
        self.inner.tracker.spawn(async move {
            let state = inner
                .drive(
                    &run_id,
                    request,
                    &resume_messages,
                    commands,
                    launch,
                    &cancel,
                )
                .await;
            inner.active.release(&thread_ts);
            tracing::info!(
                tag = "CLD",
                "thread {thread_ts} → run {run_id} {}",
                state.as_str()
            );
        });
        Ok(record)
    }

    /// Launches a runner for a run not asked for yet (a plan still discussed): its process,
    /// sandbox and hub session, waiting for a task ([`Supervisor::start_on`] sends it), and
    /// the checkpoint "undo" would return to, taken meanwhile. No run is recorded and no
    /// model is called; dropping the standby stops the runner.
    pub async fn standby(&self, site: RunSite) -> Result<Standby, LaunchError> {
        let run_id = format!("{}", rand::random::<u64>() >> 11);
        let (commands, command_rx) = mpsc::channel(16);
        let request = site.request();
        let helper = self.inner.worktrees.helper(&request.worktree);
        let snapshot = checkpoint::snapshot(helper, request.worktree.clone());
        let runner = match self
            .inner
            .launch(&run_id, &request, command_rx, false)
            .await
        {
            Ok(runner) => runner,
            Err(RunnerStartError::Launch(e)) => return Err(e),
            Err(RunnerStartError::Mount(e)) => return Err(LaunchError(e.to_string())),
        };
        let snapshot = snapshot.await;
        let stop = runner.hub_stop.clone().drop_guard();
        Ok(Standby {
            run_id,
            commands,
            waiting: Waiting { runner, snapshot },
            stop,
        })
    }

    /// Records a new run, after reading the conversation it resumes, if any (so a broken
    /// one is reported instead of run). Returns the run and the messages it resumes (JSON;
    /// empty for a fresh run).
    async fn record_run(
        &self,
        run_id: &str,
        request: &RunRequest,
    ) -> Result<(RunRecord, String), SupervisorError> {
        let resume_messages = match &request.resume {
            Some(resume) => super::resume::resume_with(&resume.conversation, &resume.message)?,
            None => String::new(),
        };
        let worktree = request.worktree.display().to_string();
        let record = self
            .inner
            .store
            .create_run(NewRun {
                id: run_id,
                thread: &request.thread,
                plan: &request.plan,
                model: &self.inner.limits.model,
                worktree: &worktree,
                branch: &request.branch,
                max_turns: i64::from(self.inner.limits.max_turns),
            })
            .await?;
        Ok((record, resume_messages))
    }

    /// Asks the thread's run to stop. Returns whether a run was in progress.
    pub async fn cancel(&self, thread_ts: &str, reason: &str) -> bool {
        let Some(StopHandle {
            commands,
            cancel,
            run_id,
        }) = self.inner.active.stop_handle(thread_ts)
        else {
            return false;
        };
        tracing::info!(
            tag = "CLD",
            "thread {thread_ts} → cancelling run {run_id}: {reason}"
        );
        let told = commands
            .send(RunnerCommand {
                command: Some(Command::Cancel(Cancel {
                    reason: reason.to_owned(),
                })),
            })
            .await;
        if told.is_err() {
            // Its hub is gone: the runner is ending, and the token stops whatever is left.
            tracing::debug!(run = %run_id, "the run's commands are closed; cancelling it from outside");
        }
        cancel.cancel();
        true
    }

    /// The place of run `run_id` in the line for a Coder slot (1: next), while it waits for
    /// one (`access.maxConcurrentThreads` runs at a time).
    pub fn queue_place(&self, run_id: &str) -> Option<usize> {
        self.inner.slots.place(run_id)
    }

    /// Whether the thread has a run queued or in progress.
    pub fn is_active(&self, thread_ts: &str) -> bool {
        self.inner.active.contains(thread_ts)
    }

    /// Passes a message from the thread to its running Coder (added before its next turn).
    /// Returns whether a run was there to take it.
    pub async fn message(&self, thread_ts: &str, text: &str, author: &str) -> bool {
        let Some(commands) = self.inner.active.commands(thread_ts) else {
            return false;
        };
        commands
            .send(RunnerCommand {
                command: Some(Command::UserMessage(UserMessage {
                    text: text.to_owned(),
                    author: author.to_owned(),
                })),
            })
            .await
            .is_ok()
    }

    /// Sends the answer to the Coder's question `question_id`; it closes the question if the
    /// thread was waiting to answer it. Returns whether a run was there to take it.
    pub async fn answer(&self, thread_ts: &str, question_id: &str, text: &str) -> bool {
        let Some(commands) = self.inner.active.answering(thread_ts, question_id) else {
            return false;
        };
        commands
            .send(RunnerCommand {
                command: Some(Command::Answer(Answer {
                    question_id: question_id.to_owned(),
                    text: text.to_owned(),
                })),
            })
            .await
            .is_ok()
    }

    /// Makes the thread's next reply the answer to the run's question `question_id` (see
    /// [`Self::take_open_question`]). Returns false when the thread has no run (any more) or
    /// the run is another one.
    pub fn open_question(&self, thread_ts: &str, run_id: &str, question_id: &str) -> bool {
        self.inner
            .active
            .open_question(thread_ts, run_id, question_id)
    }

    /// Takes the question the thread's run waits on people for, if any: the reply in hand
    /// answers it, and the next reply is a message again.
    pub fn take_open_question(&self, thread_ts: &str) -> Option<OpenQuestion> {
        self.inner.active.take_open_question(thread_ts)
    }

    /// Follows every run's events.
    pub fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.inner.events.subscribe()
    }

    /// The store runs are recorded in.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The limits runs get.
    pub fn limits(&self) -> &RunLimits {
        &self.inner.limits
    }

    /// The worktrees runs work in.
    pub fn worktrees(&self) -> &Preparer {
        &self.inner.worktrees
    }

    /// Cancels every run and waits (bounded) for them to be reaped.
    pub async fn shutdown(&self) {
        for thread in self.inner.active.threads() {
            self.cancel(&thread, "the controller is stopping").await;
        }
        self.inner.tracker.close();
        let grace = CANCEL_GRACE + Duration::from_secs(5);
        if tokio::time::timeout(grace, self.inner.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "runs still going {}s after the stop; they are reported at the next start",
                grace.as_secs()
            );
        }
    }
}
