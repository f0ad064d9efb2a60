//! "rebase" in a thread: its branch brought up to date with the default branch, and a
//! merge's conflicts handed to the Coder with the usual approval.
//!
//! The default branch is fetched as for a new worktree ([`worktree::choose_base`]) and merged
//! into the branch in the controller ([`update_branch`]: git2 on the thread's own repository,
//! nothing of the repository's run, the worktree changed only through the sandboxed helper).
//! A clean merge is pushed without force when the branch was pushed before (an open pull
//! request just gets the merge commit), and the thread is told what came in. A conflict is
//! not resolved here: the worktree keeps the merge with conflict markers and the thread gets
//! a plan "Resolve the conflicts with …" with the cost line and Approve/Cancel buttons, like
//! the PM's. Approving it starts a run that goes on from the last one in the same worktree
//! (its commit becomes the merge commit); cancelling it puts the worktree back.
//!
//! Exactly once: the reply (or the plan) is recorded with the message's processed mark, so a
//! crash before leaves the message to handle again, which finishes a merge left half-way
//! (the same commit, pushed once more without force: a no-op) or starts a conflicted one
//! over; nothing is said twice.

use std::path::{Path, PathBuf};

use git2::Oid;
use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, Plan, PullRequestRef, Role, RunRecord, ThreadKey};
use crate::store::Change;
use crate::thread::handler::{Settle, ThreadHandler};
use crate::thread::replies;
use crate::workspace::forge::ForgeError;
use crate::workspace::update_branch::{self, Incoming, Outcome, UpdateError};
use crate::workspace::{forge, thread_repo, worktree};

const UNCOMMITTED: &str = "The worktree has changes that are not committed, so I left the branch as it is. Ask the Coder to commit them, or say **undo** to drop them, then say **rebase** again.";

/// What cancelling a plan did to a merge in progress.
#[derive(Debug, PartialEq)]
pub(super) enum Aborted {
    /// No merge was in progress.
    Nothing,
    /// The merge was dropped: the worktree is at the branch's head again.
    Merge,
    /// The merge could not be dropped (said in the thread).
    Failed(String),
}

impl ThreadHandler {
    /// "rebase" while the Coder runs or its run is being prepared: stop it first.
    pub(super) async fn rebase_while_coder_runs(&self, msg: &IncomingMessage) -> Settle {
        self.answer(msg, Role::Pm, replies::REBASE_WHILE_CODER_RUNS)
            .await
    }

    /// "rebase" while a plan waits for approval: approve or cancel it first.
    pub(super) async fn rebase_while_plan_pending(&self, msg: &IncomingMessage) -> Settle {
        self.answer(msg, Role::Pm, replies::REBASE_WHILE_PLAN_PENDING)
            .await
    }

    /// "rebase" in a thread whose Coder has not run: there is no branch yet.
    pub(super) async fn nothing_to_rebase(&self, msg: &IncomingMessage) -> Settle {
        self.answer(msg, Role::Pm, replies::NOTHING_TO_REBASE).await
    }

    /// "rebase" after the thread's run `last` ended; `pr` is its open pull request.
    pub(super) async fn rebase(
        &self,
        msg: &IncomingMessage,
        last: &RunRecord,
        pr: Option<&PullRequestRef>,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        let path = PathBuf::from(&last.worktree);
        let main = self.coder.layout.repo.clone();
        if !path.is_dir() {
            let shown = path.strip_prefix(&main).unwrap_or(&path).display();
            let reply = format!(
                "This thread's worktree ({shown}) is gone, so there is no branch to bring up to date."
            );
            return self.answer(msg, Role::Pm, &reply).await;
        }
        if let Err(e) = self.coder.prepare.ensure_mounted(&path).await {
            return self.rebase_failed(msg, &e.to_string()).await;
        }
        let base = match worktree::choose_base(&main).await {
            Ok(base) => base,
            Err(e) => return self.rebase_failed(msg, &e.to_string()).await,
        };
        let Ok(default_head) = Oid::from_str(&base.commit) else {
            return self
                .rebase_failed(msg, &format!("{} is not a commit", base.commit))
                .await;
        };
        let branch = if last.branch.is_empty() {
            let tree = path.clone();
            match tokio::task::spawn_blocking(move || forge::worktree_branch(&tree)).await {
                Ok(Ok(branch)) => branch,
                Ok(Err(e)) => return self.rebase_failed(msg, &e.to_string()).await,
                Err(e) => return self.rebase_failed(msg, &e.to_string()).await,
            }
        } else {
            last.branch.clone()
        };
        tracing::info!(
            tag = "INF",
            "thread {thread} → bringing {branch} up to date with {} ({})",
            base.name,
            update_branch::short(default_head)
        );
        let (helper, tree, name) = (
            self.coder.prepare.helper(&path),
            path.clone(),
            base.name.clone(),
        );
        let (main_dir, branch_name) = (main.clone(), branch.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            update_branch::bring_up_to_date(
                &helper,
                &main_dir,
                &tree,
                &branch_name,
                default_head,
                &name,
            )
        })
        .await;
        let shown = default_name(&base.name);
        let outcome = match outcome {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => return self.rebase_failed(msg, &e.to_string()).await,
            Err(e) => return self.rebase_failed(msg, &e.to_string()).await,
        };
        let warning = base.warning.as_deref();
        match outcome {
            Outcome::UpToDate => {
                let reply = with_warning(up_to_date_reply(shown, default_head), warning);
                self.answer(msg, Role::Pm, &reply).await
            }
            Outcome::Uncommitted => self.answer(msg, Role::Pm, UNCOMMITTED).await,
            Outcome::Merged { incoming, .. } => {
                let push = self.push_merge(msg, &path, &branch, pr).await;
                let reply = with_warning(merged_reply(shown, &incoming, pr, push), warning);
                self.say_merged(msg, &path, &reply).await
            }
            Outcome::Conflicts { files, incoming } => {
                let plan = resolution_plan(shown, &incoming, &files, pr);
                let intro = with_warning(conflict_intro(shown, &incoming, &files), warning);
                self.propose_resolution(msg, &intro, &plan, cancel).await
            }
        }
    }

    /// Pushes the merge when the branch was pushed before (otherwise nothing is pushed
    /// now).
    async fn push_merge(
        &self,
        msg: &IncomingMessage,
        path: &Path,
        branch: &str,
        pr: Option<&PullRequestRef>,
    ) -> MergePush {
        if pr.is_none() && !was_pushed(path, branch).await {
            return MergePush::NotOnGitHub;
        }
        match forge::push_branch(&self.coder.layout.repo, path, branch).await {
            Ok(()) => MergePush::Pushed,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "push the merge: {e}");
                MergePush::Failed(e)
            }
        }
    }

    /// Says `reply` about the merge in the worktree `path`, then forgets the merge as
    /// pending (until the reply is recorded, handling the message again finishes it).
    async fn say_merged(&self, msg: &IncomingMessage, path: &Path, reply: &str) -> Settle {
        let settle = self.answer(msg, Role::Pm, reply).await;
        if settle == Settle::Settled {
            let tree = path.to_owned();
            let cleared =
                tokio::task::spawn_blocking(move || update_branch::clear_pending(&tree)).await;
            match cleared {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(thread = %msg.thread(), "forget the merge: {e}"),
                Err(e) => tracing::warn!(thread = %msg.thread(), "forget the merge: {e}"),
            }
        }
        settle
    }

    /// The plan resolving a merge's conflicts, with its cost line and buttons, recorded with
    /// the message it answers.
    async fn propose_resolution(
        &self,
        msg: &IncomingMessage,
        intro: &str,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        let (plan_json, effects) = match plan.to_json() {
            Ok(json) => match self.plan_effects(msg, intro, plan, cancel).await {
                Ok(effects) => (json, effects),
                Err(e) => return self.rebase_failed(msg, &e.to_string()).await,
            },
            Err(e) => return self.rebase_failed(msg, &e.to_string()).await,
        };
        tracing::info!(
            tag = "PM",
            "thread {thread} → conflicts: resolution proposed"
        );
        let changes = [
            Change::ProposePlan {
                thread: &thread,
                plan_json: &plan_json,
            },
            Change::Processed(msg),
        ];
        self.record(msg, &changes, &effects).await
    }

    async fn rebase_failed(&self, msg: &IncomingMessage, reason: &str) -> Settle {
        tracing::error!(thread = %msg.thread(), "rebase: {reason}");
        let reply = format!(
            "I couldn't bring the branch up to date ({reason}). Nothing was pushed; say **rebase** to try again."
        );
        self.answer(msg, Role::Pm, &reply).await
    }

    /// The thread's last run when its worktree has a merge in progress: approving a plan
    /// then goes on from that run in the same worktree.
    pub(super) async fn resolving(&self, thread: &ThreadKey) -> Option<RunRecord> {
        let last = match self.store.latest_run(&thread.thread_ts).await {
            Ok(last) => last?,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's runs: {e}");
                return None;
            }
        };
        let path = PathBuf::from(&last.worktree);
        if !path.is_dir() {
            return None;
        }
        if let Err(e) = self.coder.prepare.ensure_mounted(&path).await {
            tracing::warn!(thread = %thread, "mount the worktree: {e}");
        }
        match tokio::task::spawn_blocking(move || update_branch::merging(&path)).await {
            Ok(Ok(Some(_))) => Some(last),
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::warn!(thread = %thread, "read the merge in progress: {e}");
                None
            }
            Err(e) => {
                tracing::warn!(thread = %thread, "read the merge in progress: {e}");
                None
            }
        }
    }

    /// The approved `plan` resolving a merge: a run that goes on from `last` in its worktree,
    /// and the thread back to its runs (with its pull request).
    pub(super) async fn start_resolution(
        &self,
        approval: &IncomingMessage,
        plan: &Plan,
        last: &RunRecord,
    ) -> Result<(), crate::coder::StartFailure> {
        let thread = approval.thread();
        let message = format!(
            "<@{}> approved this plan:\n\n{}",
            approval.user,
            plan.to_markdown()
        );
        self.coder
            .resume_with(approval, last, message)
            .await
            .map_err(|e| crate::coder::StartFailure {
                reason: e.to_string(),
                run: None,
            })?;
        if let Err(e) = self.store.commit(&[Change::BackToRuns(&thread)], &[]).await {
            tracing::error!(thread = %thread, "record the thread back at its runs: {e}");
        }
        Ok(())
    }

    /// Drops the merge in progress of the thread, if any (its plan was cancelled).
    pub(super) async fn abort_resolution(&self, thread: &ThreadKey) -> Aborted {
        let Some(last) = self.resolving(thread).await else {
            return Aborted::Nothing;
        };
        let path = PathBuf::from(&last.worktree);
        let helper = self.coder.prepare.helper(&path);
        match tokio::task::spawn_blocking(move || update_branch::abort_merge(&helper, &path)).await
        {
            Ok(Ok(_)) => Aborted::Merge,
            Ok(Err(e)) => Aborted::Failed(e.to_string()),
            Err(e) => Aborted::Failed(e.to_string()),
        }
    }
}

/// Whether the branch was pushed before (the thread repository records each push).
async fn was_pushed(path: &Path, branch: &str) -> bool {
    let (tree, name) = (path.to_owned(), branch.to_owned());
    let read = tokio::task::spawn_blocking(move || {
        let repo = thread_repo::open(&tree).map_err(UpdateError::from)?;
        Ok::<_, UpdateError>(
            repo.refname_to_id(&format!("refs/remotes/origin/{name}"))
                .is_ok(),
        )
    })
    .await;
    match read {
        Ok(Ok(pushed)) => pushed,
        Ok(Err(e)) => {
            tracing::warn!("read whether {branch} was pushed: {e}");
            false
        }
        Err(e) => {
            tracing::warn!("read whether {branch} was pushed: {e}");
            false
        }
    }
}

/// The default branch as people name it: `main` for `origin/main`.
fn default_name(name: &str) -> &str {
    name.strip_prefix("origin/").unwrap_or(name)
}

/// `abc1234, 3 commits`.
fn what_came_in(incoming: &Incoming) -> String {
    let s = if incoming.commits == 1 { "" } else { "s" };
    format!(
        "{}, {} commit{s}",
        update_branch::short(incoming.head),
        incoming.commits
    )
}

/// `a.rs`, `b.rs`
fn file_list(files: &[String]) -> String {
    files
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn with_warning(reply: String, warning: Option<&str>) -> String {
    match warning {
        Some(warning) => format!("{reply}\n_{warning}_"),
        None => reply,
    }
}

fn up_to_date_reply(shown: &str, head: Oid) -> String {
    format!(
        "This branch already has `{shown}` ({}): it is up to date, nothing changed.",
        update_branch::short(head)
    )
}

/// What became of a clean merge's push.
#[derive(Debug)]
enum MergePush {
    /// Pushed to the branch on GitHub.
    Pushed,
    /// Not pushed: the branch is not on GitHub yet.
    NotOnGitHub,
    /// The push failed.
    Failed(ForgeError),
}

/// What the thread is told after a clean merge, given what became of its push.
fn merged_reply(
    shown: &str,
    incoming: &Incoming,
    pr: Option<&PullRequestRef>,
    push: MergePush,
) -> String {
    let merged = format!(
        "Merged `{shown}` ({}) into this branch",
        what_came_in(incoming)
    );
    match push {
        MergePush::Pushed => match pr {
            Some(pr) => format!("{merged} and pushed; PR #{} updated.", pr.number),
            None => format!("{merged} and pushed."),
        },
        MergePush::NotOnGitHub => {
            format!("{merged}. It is not on GitHub yet: the Coder's pull request will push it.")
        }
        MergePush::Failed(e) => {
            format!("{merged}, but pushing it failed ({e}). Say **rebase** again to push it.")
        }
    }
}

fn conflict_intro(shown: &str, incoming: &Incoming, files: &[String]) -> String {
    format!(
        "Merging `{shown}` ({}) into this branch conflicts in {}. The worktree now holds the merge with conflict markers; I won't guess how to resolve them. Approve to let the Coder resolve them (its commit becomes the merge commit), or Cancel to put the worktree back.",
        what_came_in(incoming),
        file_list(files)
    )
}

/// The plan the Coder gets to resolve a merge's conflicts.
fn resolution_plan(
    shown: &str,
    incoming: &Incoming,
    files: &[String],
    pr: Option<&PullRequestRef>,
) -> Plan {
    let short = update_branch::short(incoming.head);
    let listed = file_list(files);
    let push = match pr {
        Some(pr) => format!(
            "Push it with OpenPR: PR #{} gets the merge commit.",
            pr.number
        ),
        None => "Open the pull request with OpenPR.".to_owned(),
    };
    Plan {
        summary: format!("Resolve the conflicts with `{shown}` ({short}): {listed}"),
        steps: vec![
            format!(
                "The worktree holds `{shown}` ({short}) merged into this branch, with conflict markers (`<<<<<<<`, `=======`, `>>>>>>>`) in {listed}."
            ),
            "Resolve each conflict keeping what both sides meant, remove every marker, then build and run the tests.".to_owned(),
            format!(
                "Commit with GitCommit: that commit becomes the merge commit (its parents: this branch and `{shown}`)."
            ),
            push,
        ],
        files: files.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::git_command::CommandError;

    fn incoming(commits: usize) -> Incoming {
        Incoming {
            head: Oid::from_str("abc1234def5678abc1234def5678abc1234def56").unwrap(),
            commits,
        }
    }

    fn pr() -> PullRequestRef {
        PullRequestRef {
            number: 42,
            url: "https://github.com/acme/app/pull/42".into(),
        }
    }

    #[test]
    fn what_the_thread_is_told() {
        assert_eq!(
            merged_reply("main", &incoming(3), Some(&pr()), MergePush::Pushed),
            "Merged `main` (abc1234, 3 commits) into this branch and pushed; PR #42 updated."
        );
        assert_eq!(
            merged_reply("main", &incoming(1), None, MergePush::Pushed),
            "Merged `main` (abc1234, 1 commit) into this branch and pushed."
        );
        assert_eq!(
            merged_reply("main", &incoming(2), None, MergePush::NotOnGitHub),
            "Merged `main` (abc1234, 2 commits) into this branch. It is not on GitHub yet: the Coder's pull request will push it."
        );
        assert_eq!(
            merged_reply(
                "main",
                &incoming(2),
                Some(&pr()),
                MergePush::Failed(ForgeError::Command(CommandError::Failed {
                    what: "git push".into(),
                    status: "exit status: 1".into(),
                    output: "rejected".into(),
                }))
            ),
            "Merged `main` (abc1234, 2 commits) into this branch, but pushing it failed (git push failed (exit status: 1): rejected). Say **rebase** again to push it."
        );
        assert_eq!(
            up_to_date_reply("main", incoming(0).head),
            "This branch already has `main` (abc1234): it is up to date, nothing changed."
        );
        assert_eq!(
            with_warning("Done.".into(), Some("origin could not be fetched")),
            "Done.\n_origin could not be fetched_"
        );
        assert_eq!(default_name("origin/main"), "main");
        assert_eq!(default_name("HEAD"), "HEAD");
    }

    #[test]
    fn a_conflict_is_proposed_as_a_plan_for_the_coder() {
        let files = vec!["src/a.rs".to_owned(), "b.rs".to_owned()];
        assert_eq!(
            conflict_intro("main", &incoming(3), &files),
            "Merging `main` (abc1234, 3 commits) into this branch conflicts in `src/a.rs`, `b.rs`. The worktree now holds the merge with conflict markers; I won't guess how to resolve them. Approve to let the Coder resolve them (its commit becomes the merge commit), or Cancel to put the worktree back."
        );
        let plan = resolution_plan("main", &incoming(3), &files, Some(&pr()));
        assert_eq!(
            plan.to_markdown(),
            "📋 **Plan:** Resolve the conflicts with `main` (abc1234): `src/a.rs`, `b.rs`\n\n\
             1. The worktree holds `main` (abc1234) merged into this branch, with conflict markers (`<<<<<<<`, `=======`, `>>>>>>>`) in `src/a.rs`, `b.rs`.\n\
             2. Resolve each conflict keeping what both sides meant, remove every marker, then build and run the tests.\n\
             3. Commit with GitCommit: that commit becomes the merge commit (its parents: this branch and `main`).\n\
             4. Push it with OpenPR: PR #42 gets the merge commit.\n\
             \n**Files:** `src/a.rs`, `b.rs`\n"
        );
        let without_pr = resolution_plan("main", &incoming(1), &files, None);
        assert_eq!(
            without_pr.steps.last().map(String::as_str),
            Some("Open the pull request with OpenPR.")
        );
    }
}
