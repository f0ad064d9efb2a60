//! Closing a thread: "merge" (or "done", "ship it", "merge it") once its pull request is
//! open (the branch's unpushed commits pushed first, so GitHub merges what the thread
//! made), "abandon" (or "close without merging"), "done" in a thread without one, and the PR
//! watcher's word that the pull request was merged or closed on GitHub.
//!
//! A close is a fixed sequence of steps, each recorded once in the store with the shared
//! step record ([`Change::StepDone`]) together with what it says in the thread:
//! `description` → `journal` → `merge` → `delete_remote_branch` → `cleanup` → `report`, and
//! with the report the thread's closed stage. Which steps a close takes depends on how it
//! ends ([`CloseKind::steps`]). A step that fails is said in the thread and the thread stays
//! as it was; saying "merge" again goes on from the first step not done, so no step ever
//! runs twice. The message that asked for the close stays pending until the close is
//! recorded (or a step's failure is), so a daemon killed in the middle finishes the close
//! once at its next start, when pending messages are handled again.
//!
//! Every close ends in [`ThreadHandler::finish_close`]: the usage report, the closed stage
//! and the last word, recorded together — after a merge with the notices of the other
//! active threads that overlap it ([`crate::coordination::Coordination::after_merge`]).
//!
//! Before a merge its checks must pass and its reviewers must not object
//! ([`crate::workspace::review_gate`], `github.mergeChecks`): a reviewer asking for changes
//! or an unresolved review thread makes "merge" refuse and name them, and "merge anyway"
//! merges over them, said in the close's last word and written in the thread's journal.
//! The reviewer model's review threads are the controller's own and never object: its
//! reviews are comments, never an approval nor a request for changes.
//!
//! Here: the checks before a merge and a close's start; the order its steps run in, each
//! once, is [`sequence`], each step's effect [`steps`], the close's end [`finish`].

mod finish;
mod sequence;
mod steps;

use std::path::PathBuf;

use crate::domain::PrEvent;
use crate::domain::{IncomingMessage, PullRequestRef, Role, RunRecord, ThreadKey};
use crate::journal::description::DescriptionError;
use crate::store::StoreError;
use crate::thread::close_plan::{CloseKind, Step};
use crate::thread::handler::{Settle, ThreadHandler};
use crate::workspace::forge::ForgeError;
use crate::workspace::publish::{self, PublishError};
use crate::workspace::pull_request::{
    self, MergeBlocker, PrStatus, PullRequestError, ReviewThread, VIEW_FIELDS,
};
use crate::workspace::review_gate::{self, Objection};
use crate::workspace::thread_repo;
use crate::workspace::worktree::{Worktree, WorktreeError};
use sequence::{Ran, run_steps};

/// The close in progress: the thread, its pull request and its worktree (the latest run's).
struct Closing<'a> {
    msg: &'a IncomingMessage,
    thread: ThreadKey,
    kind: CloseKind,
    pr: Option<&'a PullRequestRef>,
    tree: Option<Worktree>,
    /// What a "merge anyway" went past ([`review_gate::overridden`]), if it went past
    /// anything.
    overridden: Option<String>,
}

/// Why a step of a close failed; said in the thread.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    PullRequest(#[from] PullRequestError),
    #[error(transparent)]
    Description(#[from] DescriptionError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    #[error("read the thread: {0}")]
    Store(#[from] StoreError),
    #[error("the commit's task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Publish(#[from] PublishError),
}

impl ThreadHandler {
    /// "merge" in a thread whose pull request is open: the checks first, then the close.
    /// "merge anyway" (`anyway`) merges over the reviewers' objections, and the close says
    /// so in the thread and in its journal.
    pub(super) async fn merge(
        &self,
        msg: &IncomingMessage,
        pr: &PullRequestRef,
        anyway: bool,
    ) -> Settle {
        let thread = msg.thread();
        let mut overridden = None;
        let merged = match self.step_done(&thread, Step::Merge).await {
            Ok(done) => done,
            Err(settle) => return settle,
        };
        if !merged {
            // The pull request merges what the branch holds: commits a run's end could not
            // push go first.
            if let Err(e) = self.push_before_merge(&thread).await {
                tracing::error!(thread = %thread, "push before merging #{}: {e}", pr.number);
                let reply = format!(
                    "I couldn't push the branch's last commits to PR #{} ({e}), so I didn't merge it. The thread stays open; say **merge** again to retry.",
                    pr.number
                );
                return self.answer(msg, Role::Pm, &reply).await;
            }
            let status = match pull_request::view(
                &self.pm.gh,
                &self.coder.layout.repo,
                pr.number,
                VIEW_FIELDS,
            )
            .await
            {
                Ok(status) => status,
                Err(e) => {
                    tracing::error!(thread = %thread, "read pull request #{}: {e}", pr.number);
                    let reply = format!(
                        "I couldn't read pull request #{} on GitHub ({e}). The thread stays open; say **merge** again to retry.",
                        pr.number
                    );
                    return self.answer(msg, Role::Pm, &reply).await;
                }
            };
            match pull_request::merge_blocker(&status) {
                // Merged already (on GitHub, or by this close before a stop): close as
                // merged; the merge step finds it merged and does nothing.
                Some(MergeBlocker::AlreadyMerged) => {}
                None => match self.review_objections(&thread, pr, &status).await {
                    Ok(found) if found.is_empty() => {}
                    Ok(found) if anyway => {
                        tracing::info!(
                            tag = "PM",
                            "thread {thread} → {} merges #{} over {} review objection(s)",
                            msg.user,
                            pr.number,
                            found.len()
                        );
                        overridden = Some(review_gate::overridden(&msg.user, &found));
                    }
                    Ok(found) => {
                        tracing::info!(
                            tag = "PM",
                            "thread {thread} → merge of #{} refused: {} review objection(s)",
                            pr.number,
                            found.len()
                        );
                        let reply = review_gate::refusal(pr.number, &found);
                        return self.answer(msg, Role::Pm, &reply).await;
                    }
                    Err(e) => {
                        tracing::error!(thread = %thread, "read the reviews of #{}: {e}", pr.number);
                        let reply = format!(
                            "I couldn't read the review threads of pull request #{} on GitHub ({e}). The thread stays open; say **merge** again to retry.",
                            pr.number
                        );
                        return self.answer(msg, Role::Pm, &reply).await;
                    }
                },
                Some(blocker) => {
                    tracing::info!(
                        tag = "PM",
                        "thread {thread} → merge of #{} refused: {blocker}",
                        pr.number
                    );
                    let reply = format!(
                        "I can't merge PR #{} yet: {blocker}. The thread stays open.",
                        pr.number
                    );
                    return self.answer(msg, Role::Pm, &reply).await;
                }
            }
        }
        self.close_overriding(msg, CloseKind::Merge, Some(pr), overridden)
            .await
    }

    /// What the pull request's reviewers object to that `github.mergeChecks` heeds: its
    /// latest reviews (in `status`) and, when that check is on, its unresolved review
    /// threads (read from GitHub).
    async fn review_objections(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        status: &PrStatus,
    ) -> Result<Vec<Objection>, PullRequestError> {
        let checks = self.merge_checks;
        let mut threads = if checks.unresolved_threads {
            pull_request::review_threads(&self.pm.gh, &self.coder.layout.repo, pr.number).await?
        } else {
            Vec::new()
        };
        if let Some(own) = self.reviewer_login(thread, &threads).await {
            // The reviewer's threads are the controller's own: they never block a merge.
            threads.retain(|t| {
                !t.author
                    .as_deref()
                    .is_some_and(|a| crate::closing::feedback::same_login(a, &own))
            });
        }
        let found = review_gate::objections(status, &threads, checks);
        tracing::debug!(thread = %thread, "#{}: {} review objection(s)", pr.number, found.len());
        Ok(found)
    }

    /// The login the reviewer's comments are written as (the one `gh` acts as), when the
    /// thread has reviews of the reviewer and `threads` may hold some of theirs; `None`
    /// otherwise, or when it cannot be read (logged; every thread then counts).
    async fn reviewer_login(&self, thread: &ThreadKey, threads: &[ReviewThread]) -> Option<String> {
        if threads.iter().all(|t| t.is_resolved) {
            return None;
        }
        match self.store.reviewer_review_ids(thread).await {
            Ok(ids) if ids.is_empty() => return None,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(thread = %thread, "read the reviewer's reviews: {e}");
                return None;
            }
        }
        let login = pull_request::api_get(&self.pm.gh, &self.coder.layout.repo, "user", false)
            .await
            .map_err(|e| e.to_string())
            .and_then(|out| crate::closing::feedback::parse_user(&out).map_err(|e| e.to_string()));
        match login {
            Ok(login) => Some(login),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the login gh acts as: {e}");
                None
            }
        }
    }

    /// Pushes the commits of the thread's branch that `origin` lacks (none: nothing
    /// happens).
    async fn push_before_merge(&self, thread: &ThreadKey) -> Result<(), StepError> {
        let Some(tree) = self
            .store
            .latest_run(&thread.thread_ts)
            .await?
            .as_ref()
            .and_then(worktree_of)
        else {
            return Ok(());
        };
        self.coder.prepare.ensure_mounted(&tree.path).await?;
        if !tree.path.exists() {
            return Ok(());
        }
        publish::push_unpushed(&self.coder.layout.repo, &tree.path, &tree.branch).await?;
        Ok(())
    }

    /// What the PR watcher saw on GitHub: the thread closes the same way.
    pub(super) async fn ended_on_github(
        &self,
        msg: &IncomingMessage,
        event: PrEvent,
        pr: &PullRequestRef,
    ) -> Settle {
        let kind = match event {
            PrEvent::Merged => CloseKind::MergedOnGitHub,
            PrEvent::Closed => CloseKind::ClosedOnGitHub,
        };
        tracing::info!(
            tag = "INF",
            "thread {} → PR #{} {event:?} on GitHub",
            msg.thread(),
            pr.number
        );
        self.close(msg, kind, Some(pr)).await
    }

    /// Runs the steps of `kind` not done yet, in order, then finishes the close.
    pub(super) async fn close(
        &self,
        msg: &IncomingMessage,
        kind: CloseKind,
        pr: Option<&PullRequestRef>,
    ) -> Settle {
        self.close_overriding(msg, kind, pr, None).await
    }

    /// [`Self::close`], with what a "merge anyway" went past (`overridden`), for the journal
    /// and the last word.
    async fn close_overriding(
        &self,
        msg: &IncomingMessage,
        kind: CloseKind,
        pr: Option<&PullRequestRef>,
        overridden: Option<String>,
    ) -> Settle {
        let thread = msg.thread();
        // A plan still pending is closed with the thread: its preparation ahead goes too.
        self.coder
            .ahead
            .discard(&thread.thread_ts, "the thread was closed");
        let tree = match self.store.latest_run(&thread.thread_ts).await {
            Ok(run) => run.as_ref().and_then(worktree_of),
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's run: {e}");
                return Settle::Failed;
            }
        };
        let closing = Closing {
            msg,
            thread,
            kind,
            pr,
            tree,
            overridden,
        };
        tracing::info!(
            tag = "INF",
            "thread {} → closing ({kind:?}) for {}",
            closing.thread,
            msg.user
        );
        let steps: Vec<Step> = kind
            .steps()
            .iter()
            .copied()
            .filter(|s| *s != Step::Report)
            .collect();
        let ran = run_steps(&self.store, &self.outbox, &closing.thread, &steps, |step| {
            self.run_step(&closing, step)
        })
        .await;
        match ran {
            Ran::AllDone(notes) => self.finish_close(&closing, &notes).await,
            Ran::NotRecorded => Settle::Failed,
            Ran::Failed { step, error } => {
                tracing::error!(thread = %closing.thread, "close step {}: {error}", step.name());
                let reply = format!(
                    "I couldn't {} ({error}). The thread stays open; say **{}** again to go on from there.",
                    step.what(),
                    kind.retry_word()
                );
                self.answer(msg, Role::Pm, &reply).await
            }
        }
    }

    /// Whether `step` of the thread's close is done; a store failure settles the message as
    /// failed (logged).
    async fn step_done(&self, thread: &ThreadKey, step: Step) -> Result<bool, Settle> {
        self.store
            .step_done(thread, step.name())
            .await
            .map_err(|e| {
                tracing::error!(thread = %thread, "read close step {}: {e}", step.name());
                Settle::Failed
            })
    }
}

/// The worktree of a run, if it has one of ours.
fn worktree_of(run: &RunRecord) -> Option<Worktree> {
    if run.worktree.is_empty() || !thread_repo::is_our_branch(&run.branch) {
        return None;
    }
    Some(Worktree {
        path: PathBuf::from(&run.worktree),
        branch: run.branch.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RunState;

    fn run(worktree: &str, branch: &str) -> RunRecord {
        RunRecord {
            id: "r1".into(),
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.1".into(),
            },
            state: RunState::Finished,
            plan: String::new(),
            model: "m".into(),
            worktree: worktree.into(),
            branch: branch.into(),
            max_turns: 1,
            turns: 1,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 0.0,
            ending: None,
            exit_code: None,
            runner_pid: None,
            created_at: "t".into(),
            started_at: None,
            ended_at: None,
        }
    }

    /// A close removes, pushes and deletes only a worktree on one of the controller's own
    /// branches: a run with no worktree, or on any other branch, leaves the close nothing
    /// to touch.
    #[test]
    fn a_close_touches_only_a_worktree_on_a_codebutler_branch() {
        assert_eq!(
            worktree_of(&run("/r/.codebutler/branches/fix", "codebutler/fix")),
            Some(Worktree {
                path: PathBuf::from("/r/.codebutler/branches/fix"),
                branch: "codebutler/fix".into(),
            })
        );
        for (worktree, branch) in [
            ("", "codebutler/fix"),
            ("/r/.codebutler/branches/fix", "main"),
            ("/r/.codebutler/branches/fix", "feature/fix"),
            ("/r/.codebutler/branches/fix", ""),
            ("/r/.codebutler/branches/fix", "codebutler/"),
        ] {
            assert_eq!(
                worktree_of(&run(worktree, branch)),
                None,
                "{worktree:?} {branch:?}"
            );
        }
    }
}
