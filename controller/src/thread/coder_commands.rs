//! The commands that start, steer, stop or undo the thread's Coder: an approval, a follow-up
//! on an ended run, a message or "stop" for a running Coder, the Stop button, "undo".

use crate::domain::{Click, IncomingMessage, Plan, Role, RunRecord};
use crate::gateway::budget::cap_text;
use crate::gateway::caps;
use crate::slack::interactive::reaction_target;
use crate::store::{Change, RunStart};
use crate::thread::handler::{Settle, ThreadHandler};
use crate::thread::plan_commands::resolve;

impl ThreadHandler {
    /// An approval of the thread's pending plan: starts the Coder (at most once). The
    /// message stays pending until the run is started and announced; a crash meanwhile is
    /// sorted out at the next start ([`crate::reconcile`]).
    pub(super) async fn approve(&self, msg: &IncomingMessage) -> Settle {
        let thread = msg.thread();
        let plan = match self.store.approve_plan(&thread, msg).await {
            Ok(Some(plan)) => plan,
            // Approved a moment ago by someone else: nothing more to start.
            Ok(None) => return Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %thread, "approve plan: {e}");
                return Settle::Failed;
            }
        };
        tracing::info!(
            tag = "INF",
            "thread {thread} → approved by {}, starting coder",
            msg.user
        );
        self.approve_budget(msg).await;
        let started = match Plan::from_json(&plan) {
            // A merge's conflicts to resolve: the run goes on in the thread's worktree.
            Ok(plan) => match self.resolving(&thread).await {
                Some(last) => {
                    self.start_resolution(&reaction_target(msg), &plan, &last)
                        .await
                }
                None => self.coder.start(&reaction_target(msg), &plan).await,
            },
            Err(e) => Err(crate::coder::StartFailure {
                reason: format!("read the plan: {e}"),
                run: None,
            }),
        };
        let Err(failure) = started else {
            return Settle::Processed;
        };
        tracing::error!(thread = %thread, "start coder: {}", failure.reason);
        let reply = format!(
            "I couldn't start the Coder ({}). The plan is still waiting; approve it again to retry.",
            failure.reason
        );
        let mut changes = vec![Change::PlanPending(&thread), Change::Processed(msg)];
        if let Some(run) = &failure.run {
            // The run never began: this reply is its end.
            changes.push(Change::RunReported(run));
        }
        self.reply(msg, Role::Pm, &reply, &changes).await
    }

    /// When a cap that holds across threads (`access.maxCostPerDay`, `.maxCostPerUserPerDay`,
    /// the hourly Coder calls) refuses the run `msg` would start (its author's: the person
    /// who starts a run answers for its spend): the thread is told which cap, its figure and
    /// when it resets, and nothing starts. `None`: the run may start.
    pub(super) async fn over_cap(&self, msg: &IncomingMessage) -> Option<Settle> {
        let now = chrono::Utc::now();
        let refused = caps::refusal(&self.store, self.caps, &msg.user, now).await?;
        tracing::info!(
            tag = "INF",
            "thread {} → run not started for {}: {refused:?}",
            msg.thread(),
            msg.user
        );
        Some(self.answer(msg, Role::Pm, &refused.markdown(now)).await)
    }

    /// At approval, fixes the cap the Coder runs under (a typed one, else the default).
    async fn approve_budget(&self, msg: &IncomingMessage) {
        let thread = msg.thread();
        match self
            .store
            .approve_thread_budget(&thread, self.max_cost_per_thread, &msg.user)
            .await
        {
            Ok(cap) => tracing::info!(tag = "INF", "thread {thread} → budget {}", cap_text(cap)),
            // The hub then finds no cap: say so loudly rather than block the approval.
            Err(e) => tracing::error!(thread = %thread, "record the approved budget: {e}"),
        }
    }

    /// A message after the thread's run ended: a new run goes on from it.
    pub(super) async fn follow_up(&self, msg: &IncomingMessage, last: &RunRecord) -> Settle {
        tracing::info!(
            tag = "CLD",
            "thread {} → {} follows up on run {}",
            msg.thread(),
            msg.user,
            last.id
        );
        if let Err(e) = self.store.mark_run_start(msg, RunStart::FollowUp).await {
            tracing::error!(thread = %msg.thread(), "record the start of a run: {e}");
            return Settle::Failed;
        }
        match self.coder.resume(msg, last).await {
            Ok(()) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "resume coder: {e}");
                let reply = format!("I couldn't go on from my last run ({e}).");
                self.answer(msg, Role::Coder, &reply).await
            }
        }
    }

    /// "stop" while the Coder runs.
    pub(super) async fn stop_coder(&self, msg: &IncomingMessage) -> Settle {
        if self.cancel_run(msg).await {
            self.react(msg, "octagonal_sign").await;
            Settle::Processed
        } else {
            Settle::NotTaken
        }
    }

    /// A message while the Coder runs: while it waits for people to answer its question, the
    /// message is the answer; anything else reaches it before its next turn.
    pub(super) async fn to_running_coder(&self, msg: &IncomingMessage) -> Settle {
        let thread = &msg.thread_ts;
        let supervisor = &self.coder.supervisor;
        let taken = match crate::pm::questions::answer_from_thread(supervisor, &self.store, msg)
            .await
        {
            Some(answered) => answered,
            None => {
                let passed = supervisor.message(thread, &msg.text, &msg.user).await;
                if passed {
                    tracing::info!(tag = "CLD", "thread {thread} → message passed to the coder");
                }
                passed
            }
        };
        if taken {
            self.react(msg, "incoming_envelope").await;
            Settle::Processed
        } else {
            Settle::NotTaken
        }
    }

    /// The Stop button on a running Coder's status: stops it, and the buttons give way to a
    /// line saying who stopped it.
    pub(super) async fn stop_button(&self, msg: &IncomingMessage, click: &Click) -> Settle {
        if !self.cancel_run(msg).await {
            return Settle::Processed;
        }
        let note = format!("⏹️ Cancelled by <@{}>", msg.user);
        match self
            .record(msg, &[Change::Processed(msg)], &resolve(msg, click, &note))
            .await
        {
            Settle::Failed => Settle::Processed,
            settled => settled,
        }
    }

    /// Stops the thread's run on `msg`'s word; whether there was one to stop.
    async fn cancel_run(&self, msg: &IncomingMessage) -> bool {
        let reason = format!("stopped in Slack by <@{}>", msg.user);
        self.coder.supervisor.cancel(&msg.thread_ts, &reason).await
    }

    /// "undo" in a thread that has had a run.
    pub(super) async fn undo(&self, msg: &IncomingMessage) -> Settle {
        let undo = self.coder.undo(msg).await;
        let mut changes = Vec::new();
        if let Some(undone) = &undo.undone {
            changes.push(Change::Undone {
                checkpoint_run: &undone.checkpoint_run,
                latest_run: undone.latest_run.as_deref(),
                conversation: &undone.conversation,
            });
        }
        changes.push(Change::Processed(msg));
        self.reply(msg, Role::Coder, &undo.reply, &changes).await
    }
}
