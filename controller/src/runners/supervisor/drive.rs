//! One run from its admission to its end: the runner launched (or a standby's handed its
//! task), its hub served, its events recorded and broadcast until it exits, the cancel
//! grace and the hard time limit enforced from outside, and its outcome recorded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use codebutler_proto::runner::v1::{
    McpStdioServer, RunnerCommand, RunnerEvent, Task, runner_command::Command, runner_event::Event,
};
use prost::Message;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::ending::{RunDisk, ending_of, paused_by_outage};
use super::super::hub::{ModelOutage, RunHub};
use super::super::launcher::{LaunchError, LaunchRequest};
use super::super::mcp::RemoteMcp;
use super::super::standby::{Launch, Runner, Waiting};
use super::deadline::KillClock;
use super::{Inner, RunEvent, RunLimits, RunRequest};
use crate::domain::RunState;
use crate::gateway::CallContext;
use crate::layout::Layout;
use crate::workspace::worktree::WorktreeError;

/// Why a run's runner could not be started (the run's ending).
#[derive(Debug, thiserror::Error)]
pub(super) enum RunnerStartError {
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
    /// Runs one run to its end and records it; returns its final state. `resume_messages`
    /// is the conversation it resumes (JSON), empty for a fresh run.
    pub(super) async fn drive(
        &self,
        run_id: &str,
        mut request: RunRequest,
        resume_messages: &str,
        commands: mpsc::Sender<RunnerCommand>,
        launch: Launch,
        cancel: &CancellationToken,
    ) -> RunState {
        let permit = tokio::select! {
            permit = self.slots.admit(&self.store, run_id) => permit,
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
        crate::metrics::metrics().run("started");
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
    pub(super) async fn launch(
        &self,
        run_id: &str,
        request: &RunRequest,
        command_rx: mpsc::Receiver<RunnerCommand>,
        tasked: bool,
    ) -> Result<Runner, RunnerStartError> {
        self.worktrees.ensure_mounted(&request.worktree).await?;
        let mut spec = self.worktrees.run_spec(&request.worktree);
        // The files people shared in the thread, read-only at `.codebutler-attachments/`
        // in the worktree: a live view, so files stored while the run goes on appear too.
        // The directory is made now (a real one, never a link) so that a run whose thread
        // has no file yet sees those shared later.
        spec.attachments =
            match Layout::new(&self.worktrees.repo).thread_attachments(&request.thread) {
                Ok(dir) => Some(dir),
                Err(e) => {
                    tracing::warn!(thread = %request.thread, "the shared files' directory: {e}");
                    shared_files_dir(&self.worktrees.repo, &request.thread)
                }
            };
        let launched = self
            .launcher
            .launch(&LaunchRequest {
                run_id: run_id.to_owned(),
                spec,
                log: self.log_dir.join(format!("run-{run_id}.log")),
            })
            .await?;
        let (event_tx, events) = mpsc::channel(64);
        let hub_stop = CancellationToken::new();
        let tasked = Arc::new(AtomicBool::new(tasked));
        let outage = ModelOutage::default();
        let hub = self.hub(run_id, request, event_tx, command_rx, &hub_stop, &tasked);
        let hub = RunHub {
            outage: outage.clone(),
            ..hub
        };
        let hub_task = tokio::spawn(hub.serve(launched.hub, hub_stop.clone()));
        Ok(Runner {
            child: launched.process,
            events,
            hub_stop,
            hub_task,
            tasked,
            outage,
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
            images: Default::default(),
            run_id: run_id.to_owned(),
            ctx: CallContext {
                thread: request.thread.clone(),
                role: "coder",
                model: self.limits.model.clone(),
            },
            gateway: self.gateway.clone(),
            store: self.store.clone(),
            fetch: self.fetch.clone(),
            mcp: Arc::new(RemoteMcp::new(
                run_id,
                self.limits.mcp_servers.remote.clone(),
                self.fetch.clone(),
            )),
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
            outage: ModelOutage::default(),
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
        let task = task(&self.limits, request, resume_messages);
        runner.tasked.store(true, Ordering::Release);
        if commands.send(task).await.is_err() {
            tracing::error!(
                run = run_id,
                "the runner's hub closed before the run got its task"
            );
        }
    }

    /// Records the run's events until its runner exits: a cancel gives it its grace before
    /// the kill, the hard limit kills it ([`KillClock`]). Returns its exit status
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
        let mut clock = KillClock::new(Instant::now(), self.limits.timeout);
        let exit = loop {
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
                () = cancel.cancelled(), if !clock.cancelled() => {
                    clock.cancel(Instant::now());
                }
                () = tokio::time::sleep_until(clock.deadline()) => {
                    if ending.is_none() {
                        ending = Some(clock.ending());
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
        (exit, paused_by_outage(ending, runner.outage.current()))
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
        crate::metrics::metrics().run(state.as_str());
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

/// The run's task: its plan, prompt, model, limits and the conversation it resumes.
fn task(limits: &RunLimits, request: &RunRequest, resume_messages: &str) -> RunnerCommand {
    RunnerCommand {
        command: Some(Command::Task(Task {
            plan: request.plan.clone(),
            system_prompt: request.system_prompt.clone(),
            model: limits.model.clone(),
            max_turns: limits.max_turns,
            timeout_seconds: u32::try_from(limits.timeout.as_secs()).unwrap_or(u32::MAX),
            resume_messages_json: resume_messages.to_owned(),
            context_window: limits.context_window,
            mcp_stdio_servers: limits
                .mcp_servers
                .stdio
                .iter()
                .map(|server| McpStdioServer {
                    name: server.name.clone(),
                    command: server.command.clone(),
                    args: server.args.clone(),
                })
                .collect(),
        })),
    }
}

/// The directory of the files people shared in `thread` of the repository `repo`
/// ([`crate::layout::Layout::thread_attachments`]), when there is one and it is a real
/// directory (never a link).
pub(crate) fn shared_files_dir(
    repo: &std::path::Path,
    thread: &crate::domain::ThreadKey,
) -> Option<std::path::PathBuf> {
    let dir = crate::layout::Layout::new(repo).thread_attachments_path(thread);
    std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir())
        .then_some(dir)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::domain::ThreadKey;
    use crate::runners::request::{Reporting, Workspace};

    /// The task a runner gets carries the plan, the prompt and the conversation from the
    /// request, and the model and limits every run gets; a time limit too long for the
    /// wire's seconds is sent as the longest it holds.
    #[test]
    fn the_task_carries_the_request_and_the_limits() {
        let mut limits = RunLimits {
            model: "coder-model".into(),
            max_turns: 40,
            timeout: Duration::from_secs(1800),
            max_concurrent: 2,
            calls_per_hour: 0,
            context_window: 200_000,
            mcp_servers: Default::default(),
        };
        let request = RunRequest {
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.1".into(),
            },
            plan: "Fix the expiry".into(),
            worktree: PathBuf::from("/r/.codebutler/branches/fix"),
            branch: "codebutler/fix".into(),
            reporting: Reporting::Unattended,
            system_prompt: "You are the Coder.".into(),
            resume: None,
            workspace: Workspace::Ready,
        };
        let sent = |limits: &RunLimits| match task(limits, &request, "[1]").command {
            Some(Command::Task(task)) => task,
            other => panic!("not a task: {other:?}"),
        };
        assert_eq!(
            sent(&limits),
            Task {
                plan: "Fix the expiry".into(),
                system_prompt: "You are the Coder.".into(),
                model: "coder-model".into(),
                max_turns: 40,
                timeout_seconds: 1800,
                resume_messages_json: "[1]".into(),
                context_window: 200_000,
                mcp_stdio_servers: Vec::new(),
            }
        );
        limits.timeout = Duration::from_secs(u64::MAX);
        assert_eq!(sent(&limits).timeout_seconds, u32::MAX);
    }
}
