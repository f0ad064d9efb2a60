//! Runner supervision: start runs (queued beyond `access.maxConcurrentThreads`), drive each
//! runner's session, record every event and the run's outcome in the store, enforce the time
//! limit from outside, cancel on request, reap the process and clean up its hub.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codebutler_proto::runner::v1::{
    Answer, Cancel, FinishReason, RunnerCommand, RunnerEvent, Task, UserMessage,
    runner_command::Command, runner_event::Event,
};
use prost::Message;
use tokio::sync::{Semaphore, broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::fetch::FetchPolicy;
use super::hub::RunHub;
use super::launcher::{LaunchRequest, Launcher};
use crate::domain::{RunRecord, RunState, ThreadKey};
use crate::gateway::{CallContext, Gateway};
use crate::store::{CheckpointRecord, NewRun, Store, StoreError};
use crate::workspace::worktree::Preparer;

/// Time a runner gets to stop after a cancel before it is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// Time past the run's own limit before the controller kills the runner.
const HARD_LIMIT_GRACE: Duration = Duration::from_secs(30);

/// A run to start.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub thread: ThreadKey,
    pub plan: String,
    pub worktree: PathBuf,
    /// The worktree's branch (`codebutler/<slug>`): the only one the run may push.
    pub branch: String,
    /// The Slack thread's web link, for PR bodies; `None` for runs started by `runnerctl`.
    pub thread_link: Option<String>,
    pub system_prompt: String,
    /// For a run that goes on from an earlier one (a follow-up, "continue", after "undo"):
    /// the conversation to resume and the new message from the thread. `None`: a fresh run
    /// of the plan.
    pub resume: Option<Resume>,
    /// Set while the worktree is still being prepared: the runner is launched meanwhile,
    /// and gets its task once this turns `true` (a cancel, or the sender dropped, ends the
    /// run before it began). `None`: the worktree is ready.
    pub ready: Option<watch::Receiver<bool>>,
}

/// Where a resumed run picks up.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The stored conversation (JSON array, no system prompt).
    pub conversation: String,
    /// The thread's new message, added after it.
    pub message: String,
}

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
    memory_dir: PathBuf,
    slots: Arc<Semaphore>,
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
    /// The project's memory files (`.codebutler/memory/`), served to runners by ReadMemory.
    pub memory_dir: PathBuf,
}

impl Supervisor {
    /// A supervisor. Marks runs left running by a previous controller as interrupted (their
    /// threads are told by the start-up reconciliation, which reports every run end not yet
    /// reported).
    pub async fn new(parts: SupervisorParts) -> Result<Self, StoreError> {
        let interrupted = parts.store.interrupt_unfinished_runs().await?;
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
                store: parts.store,
                gateway: parts.gateway,
                launcher: parts.launcher,
                fetch: parts.fetch,
                limits: parts.limits,
                worktrees: parts.worktrees,
                log_dir: parts.log_dir,
                gh: parts.gh,
                memory_dir: parts.memory_dir,
                active: Mutex::new(HashMap::new()),
                events,
                tracker: TaskTracker::new(),
            }),
        })
    }

    /// Starts a run (queued while all slots are busy). One run per thread at a time.
    pub async fn start(&self, request: RunRequest) -> Result<RunRecord, SupervisorError> {
        let thread_ts = request.thread.thread_ts.clone();
        let cancel = CancellationToken::new();
        let (commands, command_rx) = mpsc::channel(16);
        let run_id = format!("{}", rand::random::<u64>() >> 11);
        {
            let mut active = self.lock_active();
            if active.contains_key(&thread_ts) {
                return Err(SupervisorError::Busy(thread_ts));
            }
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
        let record = match self.record_run(&run_id, &request).await {
            Ok(record) => record,
            Err(e) => {
                self.lock_active().remove(&thread_ts);
                return Err(e);
            }
        };
        tracing::info!(tag = "CLD", "thread {thread_ts} → run {run_id} queued");
        let inner = self.inner.clone();
        self.inner.tracker.spawn(async move {
            let state = inner
                .drive(&run_id, request, commands, command_rx, &cancel)
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

    /// Records a new run, after checking that a conversation to resume can be read (so a
    /// broken one is reported instead of run).
    async fn record_run(
        &self,
        run_id: &str,
        request: &RunRequest,
    ) -> Result<RunRecord, SupervisorError> {
        if let Some(resume) = &request.resume {
            super::resume::resume_with(&resume.conversation, &resume.message)?;
        }
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
        Ok(record)
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
        let _ = commands
            .send(RunnerCommand {
                command: Some(Command::Cancel(Cancel {
                    reason: reason.to_owned(),
                })),
            })
            .await;
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
        let _ = tokio::time::timeout(
            CANCEL_GRACE + Duration::from_secs(5),
            self.inner.tracker.wait(),
        )
        .await;
    }

    fn lock_active(&self) -> std::sync::MutexGuard<'_, HashMap<String, Active>> {
        match self.inner.active.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl Inner {
    /// Runs one run to its end and records it; returns its final state.
    async fn drive(
        &self,
        run_id: &str,
        request: RunRequest,
        commands: mpsc::Sender<RunnerCommand>,
        command_rx: mpsc::Receiver<RunnerCommand>,
        cancel: &CancellationToken,
    ) -> RunState {
        let permit = tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.ok(),
            () = cancel.cancelled() => None,
        };
        let Some(_permit) = permit else {
            return self
                .finish(run_id, RunState::Cancelled, "cancelled while queued", None)
                .await;
        };
        if let Err(e) = self.worktrees.ensure_mounted(&request.worktree).await {
            return self
                .finish(run_id, RunState::Failed, &e.to_string(), None)
                .await;
        }
        let spec_json = match serde_json::to_string(&self.worktrees.run_spec(&request.worktree)) {
            Ok(json) => json,
            Err(e) => {
                let reason = format!("write the sandbox spec: {e}");
                return self.finish(run_id, RunState::Failed, &reason, None).await;
            }
        };
        let launched = match self
            .launcher
            .launch(&LaunchRequest {
                spec_json,
                log: self.log_dir.join(format!("run-{run_id}.log")),
            })
            .await
        {
            Ok(launched) => launched,
            Err(e) => {
                return self
                    .finish(run_id, RunState::Failed, &e.to_string(), None)
                    .await;
            }
        };
        let mut child = launched.child;
        let pid = child.id().map_or(0, i64::from);
        if let Err(e) = self.store.run_started(run_id, pid).await {
            tracing::error!(run = run_id, "record run start: {e}");
        }
        tracing::info!(
            tag = "CLD",
            "thread {} → coder running (run {run_id}, pid {pid})",
            request.thread
        );

        let (event_tx, mut event_rx) = mpsc::channel(64);
        let hub_stop = CancellationToken::new();
        let hub = RunHub {
            run_id: run_id.to_owned(),
            ctx: CallContext {
                thread: request.thread.clone(),
                role: "coder",
                model: self.limits.model.clone(),
            },
            gateway: self.gateway.clone(),
            store: self.store.clone(),
            fetch: self.fetch.clone(),
            events: event_tx,
            commands: Mutex::new(Some(command_rx)),
            cancel: hub_stop.clone(),
            calls_per_hour: self.limits.calls_per_hour,
            worktree: request.worktree.clone(),
            repo: self.worktrees.repo.clone(),
            helper: self.worktrees.helper(&request.worktree),
            branch: request.branch.clone(),
            gh: self.gh.clone(),
            thread_link: request.thread_link.clone(),
            memory_dir: self.memory_dir.clone(),
        };
        let hub_task = tokio::spawn(hub.serve(launched.hub, hub_stop.clone()));
        // The runner started while the worktree was prepared; it gets its task once ready.
        if let Some(mut ready) = request.ready.clone() {
            let prepared = tokio::select! {
                r = ready.wait_for(|ready| *ready) => r.is_ok(),
                () = cancel.cancelled() => false,
            };
            if !prepared {
                let _ = child.start_kill();
                let exit = child.wait().await.ok();
                hub_stop.cancel();
                let _ = hub_task.await;
                let code = exit.and_then(|s| s.code()).map(i64::from);
                return self
                    .finish(
                        run_id,
                        RunState::Cancelled,
                        "cancelled before it began: the worktree was not prepared",
                        code,
                    )
                    .await;
            }
        }
        self.checkpoint(run_id, &request).await;
        let task = RunnerCommand {
            command: Some(Command::Task(Task {
                plan: request.plan.clone(),
                system_prompt: request.system_prompt.clone(),
                model: self.limits.model.clone(),
                max_turns: self.limits.max_turns,
                timeout_seconds: u32::try_from(self.limits.timeout.as_secs()).unwrap_or(u32::MAX),
                resume_messages_json: match &request.resume {
                    // Checked when the run was recorded.
                    Some(r) => {
                        super::resume::resume_with(&r.conversation, &r.message).unwrap_or_default()
                    }
                    None => String::new(),
                },
                context_window: self.limits.context_window,
            })),
        };
        let _ = commands.send(task).await;

        let mut seq = 0;
        let mut ending: Option<(RunState, String)> = None;
        let hard_limit = Instant::now() + self.limits.timeout + HARD_LIMIT_GRACE;
        let mut kill_at: Option<Instant> = None;
        let exit = loop {
            let kill_deadline = kill_at.unwrap_or(hard_limit).min(hard_limit);
            tokio::select! {
                Some(event) = event_rx.recv() => {
                    if let Some(end) = ending_of(&event, self.worktrees.sandbox.disk_mb) {
                        ending = Some(end);
                    }
                    if request.thread_link.is_none()
                        && let Some(answer) = unattended_answer(&event)
                    {
                        let _ = commands.send(answer).await;
                    }
                    self.record_event(run_id, &mut seq, event).await;
                }
                status = child.wait() => break status.ok(),
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
                    let _ = child.start_kill();
                    break child.wait().await.ok();
                }
            }
        };
        // Events sent just before the exit.
        while let Ok(event) = event_rx.try_recv() {
            if let Some(end) = ending_of(&event, self.worktrees.sandbox.disk_mb) {
                ending = Some(end);
            }
            self.record_event(run_id, &mut seq, event).await;
        }
        hub_stop.cancel();
        let _ = hub_task.await;
        let code = exit.and_then(|s| s.code()).map(i64::from);
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
        self.finish(run_id, state, &text, code).await
    }

    /// Records the checkpoint "undo" returns to: the worktree's files and the conversation
    /// as they are before the run's first step. Without one the run still runs; only undoing
    /// it is unavailable.
    async fn checkpoint(&self, run_id: &str, request: &RunRequest) {
        let conversation = match &request.resume {
            Some(resume) => Ok(resume.conversation.clone()),
            None => serde_json::to_string(&[codebutler_agent::conversation::plan_message(
                &request.plan,
            )]),
        };
        let tree = request.worktree.clone();
        let helper = self.worktrees.helper(&tree);
        let snapshot = tokio::task::spawn_blocking(move || {
            crate::workspace::checkpoint::snapshot(&helper, &tree)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|s| s.map_err(|e| e.to_string()));
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
        let _ = self.events.send(RunEvent {
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
        let _ = self.events.send(RunEvent {
            run_id: run_id.to_owned(),
            seq: -1,
            at_unix_ms: chrono::Utc::now().timestamp_millis(),
            event: RunnerEvent { event: None },
            ended: Some(state),
        });
        state
    }
}

/// The answer to a question asked in a run without a Slack thread (started by `runnerctl`):
/// nobody is there to answer, so the Coder is told to decide itself rather than wait out its
/// time limit.
fn unattended_answer(event: &RunnerEvent) -> Option<RunnerCommand> {
    let Some(Event::Question(question)) = &event.event else {
        return None;
    };
    Some(RunnerCommand {
        command: Some(Command::Answer(Answer {
            question_id: question.question_id.clone(),
            text: UNATTENDED_ANSWER.to_owned(),
        })),
    })
}

/// What a Coder asking in a run without a thread is told.
pub const UNATTENDED_ANSWER: &str = "Nobody can answer questions in this run (it has no Slack thread). Decide yourself, choosing the option that is easiest to change later, and say in your summary what you chose and why.";

/// The run state and words an ending event stands for, if it ends the run; `disk_mb` is the
/// worktree's disk (`sandbox.diskMB`).
fn ending_of(event: &RunnerEvent, disk_mb: u64) -> Option<(RunState, String)> {
    match &event.event {
        Some(Event::Finished(f)) => {
            let reason = FinishReason::try_from(f.reason).unwrap_or(FinishReason::Unspecified);
            Some(match reason {
                FinishReason::Cancelled => {
                    (RunState::Cancelled, format!("cancelled: {}", f.summary))
                }
                FinishReason::MaxTurns => (RunState::Finished, "stopped at the turn limit".into()),
                FinishReason::Timeout => (RunState::Finished, "stopped at the time limit".into()),
                FinishReason::DiskFull if disk_mb > 0 => (
                    RunState::Finished,
                    format!(
                        "stopped: {} (sandbox.diskMB is {disk_mb} MB); remove build outputs \
                         from it or raise the limit",
                        f.summary
                    ),
                ),
                FinishReason::DiskFull => (
                    RunState::Finished,
                    format!("stopped: {} (the host's disk has no room left)", f.summary),
                ),
                FinishReason::Completed | FinishReason::Unspecified => (
                    RunState::Finished,
                    format!("completed: {}", first_line(&f.summary)),
                ),
            })
        }
        Some(Event::Failed(f)) => Some((
            RunState::Failed,
            format!("{} failed: {}", f.step, f.message),
        )),
        _ => None,
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}
