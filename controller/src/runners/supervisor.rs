//! Runner supervision: start runs (queued beyond `access.maxConcurrentThreads`), drive each
//! runner's session, record every event and the run's outcome in the store, enforce the time
//! limit from outside, cancel on request, reap the process and clean up its hub.

use crate::memory::source::DefaultBranchMemory;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codebutler_proto::runner::v1::{
    Answer, Cancel, RunnerCommand, RunnerEvent, Task, UserMessage, runner_command::Command,
    runner_event::Event,
};
use prost::Message;
use tokio::sync::{Semaphore, broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ending::{RunDisk, ending_of};
use super::fetch::FetchPolicy;
use super::hub::RunHub;
use super::launcher::{LaunchError, LaunchRequest, Launcher};
pub use super::request::{Prepared, Reporting, Resume, RunRequest, UNATTENDED_ANSWER, Workspace};
use super::standby::{Launch, Runner, Waiting};
pub use super::standby::{RunSite, Standby};
use crate::domain::{RunRecord, RunState};
use crate::gateway::{CallContext, Gateway};
use crate::store::{CheckpointRecord, NewRun, Store, StoreError};
use crate::workspace::checkpoint::Snapshot;
use crate::workspace::worktree::{Preparer, WorktreeError};

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
    slots: Arc<Semaphore>,
    shared_as: Option<String>,
    active: Mutex<HashMap<String, Active>>,
    events: broadcast::Sender<RunEvent>,
    tracker: TaskTracker,
}

struct Active {
    run_id: String,
    commands: mpsc::Sender<RunnerCommand>,
    cancel: CancellationToken,
    /// The Coder's question waiting for the thread's next reply, if any (its id).
    open_question: Option<String>,
}

/// A Coder question waiting for a reply in its thread.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenQuestion {
    pub run_id: String,
    pub question_id: String,
}

/// How often a run queued on a shared store asks for a slot again.
const ADMISSION_POLL: Duration = Duration::from_secs(1);

/// A run's hold on a Coder slot, for as long as it runs: a local permit, or (shared store)
/// the run's admitted row, which stops counting when the run ends.
#[derive(Debug)]
enum Admission {
    Local {
        _permit: tokio::sync::OwnedSemaphorePermit,
    },
    Shared,
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
                slots: Arc::new(Semaphore::new(parts.limits.max_concurrent.max(1))),
                shared_as: parts.shared_as,
                store: parts.store,
                gateway: parts.gateway,
                launcher: parts.launcher,
                fetch: parts.fetch,
                limits: parts.limits,
                worktrees: parts.worktrees,
                log_dir: parts.log_dir,
                gh: parts.gh,
                memory: parts.memory,
                active: Mutex::new(HashMap::new()),
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
        let busy = {
            let mut active = self.lock_active();
            let busy = active.contains_key(&thread_ts);
            if !busy {
                active.insert(
                    thread_ts.clone(),
                    Active {
                        run_id: run_id.clone(),
                        commands: commands.clone(),
                        cancel: cancel.clone(),
                        open_question: None,
                    },
                );
            }
            busy
        };
        if busy {
            launch.stop(&run_id).await;
            return Err(SupervisorError::Busy(thread_ts));
        }
        let (record, resume_messages) = match self.record_run(&run_id, &request).await {
            Ok(recorded) => recorded,
            Err(e) => {
                self.lock_active().remove(&thread_ts);
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
            if let Ok(mut active) = inner.active.lock() {
                active.remove(&thread_ts);
            }
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
        let tree = request.worktree.clone();
        let snapshot = tokio::task::spawn_blocking(move || {
            crate::workspace::checkpoint::snapshot(&helper, &tree)
        });
        let runner = match self
            .inner
            .launch(&run_id, &request, command_rx, false)
            .await
        {
            Ok(runner) => runner,
            Err(RunnerStartError::Launch(e)) => return Err(e),
            Err(RunnerStartError::Mount(e)) => return Err(LaunchError(e.to_string())),
        };
        let snapshot = snapshot
            .await
            .map_err(|e| e.to_string())
            .and_then(|s| s.map_err(|e| e.to_string()));
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
        let found = self
            .lock_active()
            .get(thread_ts)
            .map(|a| (a.commands.clone(), a.cancel.clone(), a.run_id.clone()));
        let Some((commands, cancel, run_id)) = found else {
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

    /// Whether the thread has a run queued or in progress.
    pub fn is_active(&self, thread_ts: &str) -> bool {
        self.lock_active().contains_key(thread_ts)
    }

    /// Passes a message from the thread to its running Coder (added before its next turn).
    /// Returns whether a run was there to take it.
    pub async fn message(&self, thread_ts: &str, text: &str, author: &str) -> bool {
        let commands = self
            .lock_active()
            .get(thread_ts)
            .map(|a| a.commands.clone());
        let Some(commands) = commands else {
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
        let commands = self.lock_active().get_mut(thread_ts).map(|a| {
            if a.open_question.as_deref() == Some(question_id) {
                a.open_question = None;
            }
            a.commands.clone()
        });
        let Some(commands) = commands else {
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
        match self.lock_active().get_mut(thread_ts) {
            Some(active) if active.run_id == run_id => {
                active.open_question = Some(question_id.to_owned());
                true
            }
            _ => false,
        }
    }

    /// Takes the question the thread's run waits on people for, if any: the reply in hand
    /// answers it, and the next reply is a message again.
    pub fn take_open_question(&self, thread_ts: &str) -> Option<OpenQuestion> {
        let mut active = self.lock_active();
        let run = active.get_mut(thread_ts)?;
        let question_id = run.open_question.take()?;
        Some(OpenQuestion {
            run_id: run.run_id.clone(),
            question_id,
        })
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
        let all: Vec<String> = self.lock_active().keys().cloned().collect();
        for thread in all {
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

    fn lock_active(&self) -> std::sync::MutexGuard<'_, HashMap<String, Active>> {
        match self.inner.active.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Why a run's runner could not be started (the run's ending).
#[derive(Debug, thiserror::Error)]
enum RunnerStartError {
    #[error(transparent)]
    Mount(#[from] WorktreeError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// The exit code of a runner that ended with `exit`.
fn exit_code(exit: Option<std::process::ExitStatus>) -> Option<i64> {
    exit.and_then(|s| s.code()).map(i64::from)
}

impl Inner {
    /// Waits for one of the Coder slots: this instance's, or on a shared store one of those
    /// every live instance shares (asked again every [`ADMISSION_POLL`]). `None` when the
    /// slots are gone (shutting down).
    async fn admit(&self, run_id: &str) -> Option<Admission> {
        let Some(instance) = &self.shared_as else {
            return self
                .slots
                .clone()
                .acquire_owned()
                .await
                .ok()
                .map(|permit| Admission::Local { _permit: permit });
        };
        let max = i64::try_from(self.limits.max_concurrent.max(1)).unwrap_or(i64::MAX);
        loop {
            match self
                .store
                .admit_run(run_id, instance, max, crate::store::LEASE_TTL)
                .await
            {
                Ok(true) => return Some(Admission::Shared),
                Ok(false) => {}
                Err(e) => tracing::warn!(run = %run_id, "ask for a Coder slot: {e}"),
            }
            tokio::time::sleep(ADMISSION_POLL).await;
        }
    }

    /// Runs one run to its end and records it; returns its final state. `resume_messages`
    /// is the conversation it resumes (JSON), empty for a fresh run.
    async fn drive(
        &self,
        run_id: &str,
        mut request: RunRequest,
        resume_messages: &str,
        commands: mpsc::Sender<RunnerCommand>,
        launch: Launch,
        cancel: &CancellationToken,
    ) -> RunState {
        let permit = tokio::select! {
            permit = self.admit(run_id) => permit,
            () = cancel.cancelled() => None,
        };
        let Some(_permit) = permit else {
            launch.stop(run_id).await;
            return self
                .finish(run_id, RunState::Cancelled, "cancelled while queued", None)
                .await;
        };
        let mut runner = match launch {
            // A runner waiting for its task in a prepared worktree: the task goes first, and
            // what is recorded of its start (the checkpoint taken while it waited) after.
            Launch::Waiting(waiting) => {
                let Waiting { runner, snapshot } = *waiting;
                self.hand_task(run_id, &request, resume_messages, &runner, &commands)
                    .await;
                self.started(run_id, &request, &runner).await;
                self.record_checkpoint(run_id, &request, snapshot).await;
                runner
            }
            Launch::Fresh(command_rx) => {
                let runner = match self.launch(run_id, &request, command_rx, true).await {
                    Ok(runner) => runner,
                    Err(e) => {
                        return self
                            .finish(run_id, RunState::Failed, &e.to_string(), None)
                            .await;
                    }
                };
                self.started(run_id, &request, &runner).await;
                let mut runner = runner;
                // The runner started while the worktree was prepared; it gets its task once
                // ready.
                if !request.workspace.wait(cancel).await {
                    runner.start_kill(run_id);
                    let exit = runner.wait(run_id).await;
                    runner.stop_hub(run_id).await;
                    let reason = "cancelled before it began: the worktree was not prepared";
                    return self
                        .finish(run_id, RunState::Cancelled, reason, exit_code(exit))
                        .await;
                }
                self.checkpoint(run_id, &request).await;
                self.hand_task(run_id, &request, resume_messages, &runner, &commands)
                    .await;
                runner
            }
        };
        let (exit, ending) = self
            .watch(run_id, &request, &mut runner, &commands, cancel)
            .await;
        runner.stop_hub(run_id).await;
        let (state, text) = ending.unwrap_or_else(|| {
            let how = match exit {
                Some(s) => s.to_string(),
                None => "an unknown status".into(),
            };
            (
                RunState::Failed,
                format!("the runner exited with {how} without finishing"),
            )
        });
        self.finish(run_id, state, &text, exit_code(exit)).await
    }

    /// Records that the run's runner is up (its process id).
    async fn started(&self, run_id: &str, request: &RunRequest, runner: &Runner) {
        let pid = runner.child.id().map_or(0, i64::from);
        if let Err(e) = self.store.run_started(run_id, pid).await {
            tracing::error!(run = run_id, "record run start: {e}");
        }
        tracing::info!(
            tag = "CLD",
            "thread {} → coder running (run {run_id}, pid {pid})",
            request.thread
        );
    }

    /// Mounts the worktree's disk, starts the runner in its sandbox and serves its hub. The
    /// error is the run's ending.
    async fn launch(
        &self,
        run_id: &str,
        request: &RunRequest,
        command_rx: mpsc::Receiver<RunnerCommand>,
        tasked: bool,
    ) -> Result<Runner, RunnerStartError> {
        self.worktrees.ensure_mounted(&request.worktree).await?;
        let launched = self
            .launcher
            .launch(&LaunchRequest {
                run_id: run_id.to_owned(),
                spec: self.worktrees.run_spec(&request.worktree),
                log: self.log_dir.join(format!("run-{run_id}.log")),
            })
            .await?;
        let (event_tx, events) = mpsc::channel(64);
        let hub_stop = CancellationToken::new();
        let tasked = Arc::new(AtomicBool::new(tasked));
        let hub = self.hub(run_id, request, event_tx, command_rx, &hub_stop, &tasked);
        let hub_task = tokio::spawn(hub.serve(launched.hub, hub_stop.clone()));
        Ok(Runner {
            child: launched.process,
            events,
            hub_stop,
            hub_task,
            tasked,
        })
    }

    /// The hub serving the run's runner: model calls, fetches and pull requests for its
    /// thread only.
    fn hub(
        &self,
        run_id: &str,
        request: &RunRequest,
        events: mpsc::Sender<RunnerEvent>,
        command_rx: mpsc::Receiver<RunnerCommand>,
        hub_stop: &CancellationToken,
        tasked: &Arc<AtomicBool>,
    ) -> RunHub {
        RunHub {
            run_id: run_id.to_owned(),
            ctx: CallContext {
                thread: request.thread.clone(),
                role: "coder",
                model: self.limits.model.clone(),
            },
            gateway: self.gateway.clone(),
            store: self.store.clone(),
            fetch: self.fetch.clone(),
            events,
            commands: Mutex::new(Some(command_rx)),
            cancel: hub_stop.clone(),
            tasked: tasked.clone(),
            calls_per_hour: self.limits.calls_per_hour,
            worktree: request.worktree.clone(),
            repo: self.worktrees.repo.clone(),
            helper: self.worktrees.helper(&request.worktree),
            branch: request.branch.clone(),
            gh: self.gh.clone(),
            thread_link: request.reporting.thread_link().map(str::to_owned),
            memory: self.memory.clone(),
            stored: Default::default(),
        }
    }

    /// Sends the run's task to `runner`, whose hub answers its calls from then on.
    async fn hand_task(
        &self,
        run_id: &str,
        request: &RunRequest,
        resume_messages: &str,
        runner: &Runner,
        commands: &mpsc::Sender<RunnerCommand>,
    ) {
        let task = self.task(request, resume_messages);
        runner.tasked.store(true, Ordering::Release);
        if commands.send(task).await.is_err() {
            tracing::error!(
                run = run_id,
                "the runner's hub closed before the run got its task"
            );
        }
    }

    /// The run's task: its plan, prompt, model, limits and the conversation it resumes.
    fn task(&self, request: &RunRequest, resume_messages: &str) -> RunnerCommand {
        RunnerCommand {
            command: Some(Command::Task(Task {
                plan: request.plan.clone(),
                system_prompt: request.system_prompt.clone(),
                model: self.limits.model.clone(),
                max_turns: self.limits.max_turns,
                timeout_seconds: u32::try_from(self.limits.timeout.as_secs()).unwrap_or(u32::MAX),
                resume_messages_json: resume_messages.to_owned(),
                context_window: self.limits.context_window,
            })),
        }
    }

    /// Records the run's events until its runner exits: a cancel gives it
    /// [`CANCEL_GRACE`] before the kill, the hard limit kills it. Returns its exit status
    /// and how it ended, when an event or the kill said so.
    async fn watch(
        &self,
        run_id: &str,
        request: &RunRequest,
        runner: &mut Runner,
        commands: &mpsc::Sender<RunnerCommand>,
        cancel: &CancellationToken,
    ) -> (Option<std::process::ExitStatus>, Option<(RunState, String)>) {
        let mut seq = 0;
        let mut ending: Option<(RunState, String)> = None;
        let disk = RunDisk {
            size_mb: {
                let (worktrees, tree) = (self.worktrees.clone(), request.worktree.clone());
                tokio::task::spawn_blocking(move || worktrees.disk_size_mb(&tree))
                    .await
                    .unwrap_or_default()
            },
            budget: self.worktrees.disks(),
        };
        let hard_limit = Instant::now() + self.limits.timeout + HARD_LIMIT_GRACE;
        let mut kill_at: Option<Instant> = None;
        let exit = loop {
            let kill_deadline = kill_at.unwrap_or(hard_limit).min(hard_limit);
            tokio::select! {
                Some(event) = runner.events.recv() => {
                    if let Some(end) = ending_of(&event, &disk) {
                        ending = Some(end);
                    }
                    if let Some(answer) = request.reporting.answer_for(&event)
                        && commands.send(answer).await.is_err()
                    {
                        tracing::warn!(run = run_id, "the runner's hub closed before it got the answer to its question");
                    }
                    self.record_event(run_id, &mut seq, event).await;
                }
                status = runner.child.wait() => break match status {
                    Ok(status) => Some(status),
                    Err(e) => {
                        tracing::warn!(run = run_id, "wait for the runner: {e}");
                        None
                    }
                },
                () = cancel.cancelled(), if kill_at.is_none() => {
                    kill_at = Some(Instant::now() + CANCEL_GRACE);
                }
                () = tokio::time::sleep_until(kill_deadline) => {
                    if ending.is_none() {
                        ending = Some(if kill_at.is_some() {
                            (RunState::Cancelled, "killed: it did not stop after the cancel".into())
                        } else {
                            (RunState::Finished, "killed at the hard time limit".into())
                        });
                    }
                    runner.start_kill(run_id);
                    break runner.wait(run_id).await;
                }
            }
        };
        // Events sent just before the exit.
        while let Ok(event) = runner.events.try_recv() {
            if let Some(end) = ending_of(&event, &disk) {
                ending = Some(end);
            }
            self.record_event(run_id, &mut seq, event).await;
        }
        (exit, ending)
    }

    /// Records the checkpoint "undo" returns to: the worktree's files and the conversation
    /// as they are before the run's first step. Without one the run still runs; only undoing
    /// it is unavailable.
    async fn checkpoint(&self, run_id: &str, request: &RunRequest) {
        let tree = request.worktree.clone();
        let helper = self.worktrees.helper(&tree);
        let snapshot = tokio::task::spawn_blocking(move || {
            crate::workspace::checkpoint::snapshot(&helper, &tree)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|s| s.map_err(|e| e.to_string()));
        self.record_checkpoint(run_id, request, snapshot).await;
    }

    /// Records `snapshot`, taken before the run's first step, as the run's checkpoint.
    async fn record_checkpoint(
        &self,
        run_id: &str,
        request: &RunRequest,
        snapshot: Result<Snapshot, String>,
    ) {
        let conversation = match &request.resume {
            Some(resume) => Ok(resume.conversation.clone()),
            None => serde_json::to_string(&[codebutler_agent::conversation::plan_message(
                &request.plan,
            )]),
        };
        let (snapshot, conversation) = match (snapshot, conversation) {
            (Ok(s), Ok(c)) => (s, c),
            (Err(e), _) => {
                tracing::warn!(run = run_id, "checkpoint before the run: {e}");
                return;
            }
            (_, Err(e)) => {
                tracing::warn!(run = run_id, "checkpoint before the run: {e}");
                return;
            }
        };
        let record = CheckpointRecord {
            run_id: run_id.to_owned(),
            thread: request.thread.clone(),
            worktree: request.worktree.display().to_string(),
            tree_sha: snapshot.tree,
            head_sha: snapshot.head,
            conversation,
        };
        if let Err(e) = self.store.add_checkpoint(&record).await {
            tracing::warn!(run = run_id, "record the checkpoint before the run: {e}");
        }
    }

    async fn record_event(&self, run_id: &str, seq: &mut i64, event: RunnerEvent) {
        let turn = match &event.event {
            Some(Event::TurnBegun(t)) => Some(i64::from(t.turn)),
            _ => None,
        };
        if let Err(e) = self
            .store
            .add_run_event(run_id, *seq, &event.encode_to_vec(), turn)
            .await
        {
            tracing::error!(run = run_id, "record run event: {e}");
        }
        self.broadcast(RunEvent {
            run_id: run_id.to_owned(),
            seq: *seq,
            at_unix_ms: chrono::Utc::now().timestamp_millis(),
            event,
            ended: None,
        });
        *seq += 1;
    }

    async fn finish(
        &self,
        run_id: &str,
        state: RunState,
        ending: &str,
        code: Option<i64>,
    ) -> RunState {
        if let Err(e) = self.store.finish_run(run_id, state, ending, code).await {
            tracing::error!(run = run_id, "record run end: {e}");
        }
        self.broadcast(RunEvent {
            run_id: run_id.to_owned(),
            seq: -1,
            at_unix_ms: chrono::Utc::now().timestamp_millis(),
            event: RunnerEvent { event: None },
            ended: Some(state),
        });
        state
    }

    /// Tells the followers. Nobody following (a `runnerctl` run nobody watches) is fine: the
    /// store has the event.
    fn broadcast(&self, event: RunEvent) {
        if self.events.send(event).is_err() {
            tracing::trace!("no follower for a run event");
        }
    }
}
