//! Starting the run of an approved plan. When the plan was prepared ahead ([`super::ahead`])
//! and its preparation is ready, only the task goes to the runner already waiting in the
//! prepared worktree; one still preparing is waited for (the thread is told so); one that
//! failed is reported as a failed preparation is. Without a preparation (preparing ahead
//! off or discarded, a restart, another instance's thread) the cold path runs: the
//! worktree is created, the runner starts while the worktree is prepared, and the run gets
//! its task once the preparation succeeded.

use std::collections::HashMap;

use super::SlackCoder;
use super::ahead::{self, Outcome, Speculation};
use super::progress::ThreadProgress;
use super::task::task_text;
use crate::domain::{IncomingMessage, Plan};
use crate::runners::supervisor::Workspace;
use crate::workspace::worktree::{self, PrepareError};
use codebutler_sandbox::spec::ATTACHMENTS_DIR;

/// What the thread is told when the approved plan's preparation is still under way.
pub const WAITING_LINE: &str =
    "waiting for the worktree's preparation, started when the plan was proposed, to finish…";

/// What the task of an approved plan is made of before its worktree says how its tests run.
#[derive(Clone, Copy)]
struct TaskParts<'a> {
    plan: &'a Plan,
    conversation: &'a [codebutler_agent::conversation::ChatMessage],
    /// The line naming the files people shared in the thread, if they shared any.
    shared: Option<&'a str>,
}

impl TaskParts<'_> {
    /// The task's text, with the project's `test_command` when there is one.
    fn text(self, test_command: &Option<String>) -> String {
        let mut text = task_text(self.plan, test_command.as_deref(), self.conversation);
        if let Some(shared) = self.shared {
            text.push_str("\n\n");
            text.push_str(shared);
        }
        text
    }
}

/// Why a run could not be started.
#[derive(Clone, Debug, PartialEq)]
pub struct StartFailure {
    pub reason: String,
    /// The run, if one was recorded before the start failed (it never began; whoever
    /// reports the failure reports its end).
    pub run: Option<String>,
}

impl StartFailure {
    fn before_run(reason: impl ToString) -> Self {
        Self {
            reason: reason.to_string(),
            run: None,
        }
    }
}

impl SlackCoder {
    /// Starts the run of an approved plan, posts its status message and follows it in the
    /// background.
    pub async fn start(&self, approval: &IncomingMessage, plan: &Plan) -> Result<(), StartFailure> {
        // The background the PM read in the thread (linked threads and pull requests) goes
        // with the plan: the Coder works from what the PM planned with.
        let conversation = self
            .store
            .conversation(&approval.thread(), crate::pm::ROLE)
            .await
            .map_err(|e| StartFailure::before_run(format!("read the PM's conversation: {e}")))?;
        let shared = shared_files_line(
            &self.layout.repo,
            &approval.thread(),
            self.prepare.sandboxed(),
        );
        let parts = TaskParts {
            plan,
            conversation: &conversation,
            shared: shared.as_deref(),
        };
        let progress = ThreadProgress {
            outbox: &self.outbox,
            approval,
        };
        match self.ahead.take(&approval.thread_ts) {
            Some(speculation) => {
                self.start_prepared(approval, plan, parts, speculation, &progress)
                    .await
            }
            None => self.start_cold(approval, plan, parts, &progress).await,
        }
    }

    /// The approved plan's preparation: once it is ready, the task goes to its runner.
    async fn start_prepared(
        &self,
        approval: &IncomingMessage,
        plan: &Plan,
        parts: TaskParts<'_>,
        speculation: Speculation,
        progress: &ThreadProgress<'_>,
    ) -> Result<(), StartFailure> {
        let Speculation {
            relay, mut task, ..
        } = speculation;
        let (held, mut follow) = relay.attach();
        let mut posted = HashMap::new();
        let mut deferred = Vec::new();
        let outcome = if task.is_finished() {
            // Said after the task went: nothing of it is on the way to the first step.
            deferred = held;
            (&mut task).await
        } else {
            tracing::info!(
                tag = "CLD",
                "thread {} → approved while its preparation runs; waiting for it",
                approval.thread()
            );
            // The thread is told once the wait is the init's (the step that may take
            // minutes); creating a worktree takes no longer than at a cold start, where
            // nothing is said either.
            let mut init = relay.init();
            let mut told = false;
            if *init.borrow_and_update() {
                progress.say(WAITING_LINE).await;
                told = true;
            }
            for said in held {
                ahead::replay(said, progress, &mut posted).await;
            }
            loop {
                tokio::select! {
                    biased;
                    Ok(()) = init.changed(), if !told => {
                        if *init.borrow_and_update() {
                            progress.say(WAITING_LINE).await;
                            told = true;
                        }
                    }
                    Some(said) = follow.recv() => ahead::replay(said, progress, &mut posted).await,
                    outcome = &mut task => break outcome,
                }
            }
        };
        while let Ok(said) = follow.try_recv() {
            deferred.push(said);
        }
        let (tree, standby, test_command) = match outcome {
            Ok(Outcome::Ready {
                tree,
                standby,
                test_command,
            }) => (tree, standby, test_command),
            Ok(Outcome::Failed(e)) => {
                for said in deferred {
                    ahead::replay(said, progress, &mut posted).await;
                }
                return Err(StartFailure::before_run(e));
            }
            Ok(Outcome::Nothing) => {
                return self.start_cold(approval, plan, parts, progress).await;
            }
            Err(e) => {
                tracing::error!(thread = %approval.thread(), "the plan's preparation ended abnormally: {e}");
                return self.start_cold(approval, plan, parts, progress).await;
            }
        };
        let mut standby = standby;
        let plan_text = parts.text(&test_command);
        let started = if standby.is_waiting() {
            self.begin_on(approval, plan_text, &tree, *standby).await
        } else {
            tracing::warn!(thread = %approval.thread(), "the prepared runner ended while waiting; starting another");
            standby.stop().await;
            self.begin(approval, plan_text, &tree, None, Workspace::Ready)
                .await
        };
        for said in deferred {
            ahead::replay(said, progress, &mut posted).await;
        }
        let (run, events) = match started {
            Ok(started) => started,
            Err(e) => {
                self.remove_worktree(&tree).await;
                return Err(StartFailure::before_run(e));
            }
        };
        self.follow(approval, &tree, run, events).await;
        Ok(())
    }

    /// Creates the worktree, starts the runner while the worktree is prepared, and gives
    /// the run its task once the preparation succeeded.
    async fn start_cold(
        &self,
        approval: &IncomingMessage,
        plan: &Plan,
        parts: TaskParts<'_>,
        progress: &ThreadProgress<'_>,
    ) -> Result<(), StartFailure> {
        let tree = loop {
            match self.prepare.create(&plan.summary, progress).await {
                Ok(tree) => break tree,
                // Preparations for plans not approved yet give way to an approved one.
                Err(PrepareError::DiskLimit(_))
                    if self.ahead.make_room(&approval.thread_ts).await => {}
                Err(e) => return Err(StartFailure::before_run(e)),
            }
        };
        // The runner starts (process, sandbox, hub) while the worktree is prepared; it gets
        // its task, and the Coder its first step, only once the preparation succeeded.
        let (prepared, workspace) = Workspace::preparing();
        let plan_text = parts.text(&self.test_command(&tree.path).await);
        let (run, events) = match self
            .begin(approval, plan_text, &tree, None, workspace)
            .await
        {
            Ok(started) => started,
            Err(e) => {
                self.remove_worktree(&tree).await;
                return Err(StartFailure::before_run(e));
            }
        };
        if let Err(e) = self.prepare.init_or_remove(&tree, progress).await {
            let reason = "the worktree could not be prepared";
            self.supervisor.cancel(&approval.thread_ts, reason).await;
            return Err(StartFailure {
                reason: e.to_string(),
                run: Some(run.id),
            });
        }
        if !prepared.ready() {
            tracing::warn!(thread = %approval.thread(), "run {} ended before its worktree was ready", run.id);
        }
        self.follow(approval, &tree, run, events).await;
        Ok(())
    }

    /// Removes a worktree no run was recorded for.
    async fn remove_worktree(&self, tree: &worktree::Worktree) {
        if let Err(e) = worktree::remove(&self.layout.repo, tree).await {
            tracing::warn!("remove a worktree no run uses: {e}");
        }
    }
}

/// The task's line about the files people shared in `thread`: where the run finds them,
/// read-only, and their names (the controller's), or `None` when there are none. In the
/// sandbox they are at [`ATTACHMENTS_DIR`] in the worktree; without one (`sandbox.mode:
/// none`) nothing binds them there, so the line names their directory on the host.
fn shared_files_line(
    repo: &std::path::Path,
    thread: &crate::domain::ThreadKey,
    sandboxed: bool,
) -> Option<String> {
    let dir = crate::runners::supervisor::shared_files_dir(repo, thread)?;
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return None;
    }
    names.sort();
    let names = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(if sandboxed {
        format!(
            "Files people shared in this thread are in `{ATTACHMENTS_DIR}/` at the top of the worktree (read-only and git-ignored: read and grep them there, never commit them): {names}."
        )
    } else {
        format!(
            "Files people shared in this thread are in `{}` (outside the worktree: read them, never change or commit them): {names}.",
            dir.display()
        )
    })
}
