//! What a crash leaves behind, sorted out when the daemon starts again, before anything can
//! start a run:
//!
//! 1. **Runs cut off mid-start.** An approval or follow-up still pending with its start
//!    begun ([`crate::store::RunStart`]): if its run was recorded, that run was interrupted
//!    and is reported below, so the message is done (a follow-up's run gets the
//!    conversation it was started with, for "continue"); if not, nothing ran, so the thread
//!    is told, an approved plan waits for approval again (with its buttons), and the message
//!    is done. Re-handling it instead would find its plan taken and answer nonsense.
//! 2. **Run ends never reported** (runs the supervisor marked interrupted at start, runs that
//!    ended while the daemon went down): reported now, once.
//!
//! The effects these record are delivered with the rest of the outbox after start-up.
//! Worktrees and branches no run owns (a crash between creating a worktree and recording its
//! run), and those of closed threads, are [`crate::workspace::orphans`]' to remove, right
//! after this.

use crate::coder::SlackCoder;
use crate::slack::effects::Effects;
use crate::slack::interactive::{plan_blocks, plan_digest};
use crate::store::{Change, CutOffStart, RunStart, Store};

const CODER_PREFIX: &str = "*Coder:* ";

/// Runs the start-up reconciliation (see the module's documentation). Failures are logged:
/// what is left is tried again at the next start.
pub async fn after_stop(coder: &SlackCoder) {
    match coder.store.cut_off_starts().await {
        Ok(starts) => {
            for start in starts {
                cut_off(&coder.store, coder, &start).await;
            }
        }
        Err(e) => tracing::error!("read messages cut off while starting a run: {e}"),
    }
    coder.report_unreported_runs().await;
}

/// Settles the cut-off run starts of one thread: what [`after_stop`] does for every thread,
/// for a thread this instance takes from another instance of a shared store.
pub async fn cut_off_starts_of(coder: &SlackCoder, thread: &crate::domain::ThreadKey) {
    match coder.store.cut_off_starts().await {
        Ok(starts) => {
            for start in starts.iter().filter(|s| s.msg.thread() == *thread) {
                cut_off(&coder.store, coder, start).await;
            }
        }
        Err(e) => {
            tracing::error!(thread = %thread, "read messages cut off while starting a run: {e}")
        }
    }
}

/// Settles one message whose run start a crash cut off.
async fn cut_off(store: &Store, coder: &SlackCoder, start: &CutOffStart) {
    let msg = &start.msg;
    let thread = msg.thread();
    if let Some(run) = &start.run_id {
        tracing::info!(thread = %thread, "message {} started run {run} before the stop", msg.ts);
        if start.kind == RunStart::FollowUp {
            coder.seed_cut_off_follow_up(msg, run).await;
        }
        if let Err(e) = store.mark_processed(msg).await {
            tracing::error!(thread = %thread, "mark message {} processed: {e}", msg.ts);
        }
        return;
    }
    tracing::warn!(thread = %thread, "message {} was cut off while its run was starting", msg.ts);
    let mut changes = vec![Change::Processed(msg)];
    let effects = match start.kind {
        RunStart::Approval => {
            changes.push(Change::PlanPending(&thread));
            let digest = match store.plan(&thread).await {
                Ok(Some(plan)) => plan_digest(&plan),
                Ok(None) => String::new(),
                Err(e) => {
                    tracing::error!(thread = %thread, "read the plan: {e}");
                    return;
                }
            };
            let text = format!(
                "{CODER_PREFIX}The CodeButler service restarted while I was getting ready to start, before any work began. The plan is waiting again: approve it to start."
            );
            let blocks = plan_blocks(&text, &digest);
            Effects::new(&thread).post_with_blocks(&text, blocks)
        }
        RunStart::FollowUp => Effects::new(&thread).reply(
            "The CodeButler service restarted before I could start on your message, so nothing ran. Send it again to start.",
            CODER_PREFIX,
        ),
    };
    if let Err(e) = coder.outbox.commit(&changes, &effects).await {
        tracing::error!(thread = %thread, "report a run cut off mid-start: {e}");
    }
}
