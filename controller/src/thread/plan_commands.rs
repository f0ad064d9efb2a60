//! The commands about the thread's plan and budget: its Approve and Cancel buttons, and
//! "budget $N". The buttons follow the same rules as the typed words, then give way to a
//! line saying who used them (see [`crate::slack::interactive`]).

use crate::domain::{Click, IncomingMessage, Role};
use crate::gateway::budget::{budget_set_reply, cap_text};
use crate::slack::effects::{Effects, MessageRef};
use crate::slack::interactive::resolved_blocks;
use crate::store::Change;
use crate::thread::handler::{Settle, ThreadHandler, speaker};
use crate::thread::rebase_commands::Aborted;

impl ThreadHandler {
    /// The Approve button of the waiting plan: the buttons give way to who approved it (the
    /// approval itself is [`ThreadHandler::approve`]'s).
    pub(super) async fn approve_button(&self, msg: &IncomingMessage, click: &Click) {
        let note = format!("✅ Approved by <@{}>", msg.user);
        if self.record(msg, &[], &resolve(msg, click, &note)).await == Settle::Failed {
            tracing::warn!(thread = %msg.thread(), "the plan's buttons stay in place");
        }
    }

    /// The Cancel button of the waiting plan: the plan is withdrawn, and its preparation
    /// ahead discarded.
    pub(super) async fn cancel_button(&self, msg: &IncomingMessage, click: &Click) -> Settle {
        let thread = msg.thread();
        tracing::info!(
            tag = "PM",
            "thread {thread} → plan withdrawn by {}",
            msg.user
        );
        self.coder
            .ahead
            .discard(&thread.thread_ts, "the plan was cancelled");
        let note = format!("✖️ Cancelled by <@{}>", msg.user);
        // A merge's resolution: the worktree goes back to the branch's head.
        let aborted = self.abort_resolution(&thread).await;
        let reply = match &aborted {
            Aborted::Nothing => {
                "Plan withdrawn. Tell me what to change, or ask for something else.".to_owned()
            }
            Aborted::Merge => "Plan withdrawn, and the merge with it: the worktree is back at the branch's head. Say **rebase** to try again.".to_owned(),
            Aborted::Failed(e) => format!("Plan withdrawn, but I couldn't put the worktree back ({e}); say **rebase** to start the merge over."),
        };
        let effects = resolve(msg, click, &note).reply(&reply, &speaker(Role::Pm));
        let mut changes = vec![Change::WithdrawPlan(&thread)];
        if aborted != Aborted::Nothing {
            changes.push(Change::BackToRuns(&thread));
        }
        changes.push(Change::Processed(msg));
        self.record(msg, &changes, &effects).await
    }

    /// "budget $N": sets the thread's cap and says so.
    pub(super) async fn set_budget(&self, msg: &IncomingMessage, cap: f64) -> Settle {
        let thread = msg.thread();
        tracing::info!(
            tag = "PM",
            "thread {thread} → budget set to {} by {}",
            cap_text(cap),
            msg.user
        );
        let running = self.coder.supervisor.is_active(&thread.thread_ts);
        let change = Change::Budget {
            thread: &thread,
            cap_usd: cap,
            user: &msg.user,
        };
        let reply = budget_set_reply(cap, running);
        self.reply(msg, Role::Pm, &reply, &[change, Change::Processed(msg)])
            .await
    }
}

/// Replaces the clicked message's buttons with `note`.
pub(super) fn resolve(msg: &IncomingMessage, click: &Click, note: &str) -> Effects {
    let blocks = resolved_blocks(&click.message_text, note);
    Effects::new(&msg.thread()).update(
        MessageRef::Ts(click.message_ts.clone()),
        &click.message_text,
        blocks,
    )
}
