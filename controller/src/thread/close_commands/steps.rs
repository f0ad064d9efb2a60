//! The steps of a close, each a thread's side effect done once: the pull request's
//! description (before the merge, and its Journal after it), the journal committed on the branch, the merge, the remote branch deleted,
//! the worktree removed (or kept, for an abandoned thread's work never pushed).

use crate::history::History;
use crate::journal::description::Summary;
use crate::journal::thread_journal::{self, JournalHead};
use crate::journal::usage;
use crate::thread::close_plan::{CloseKind, Step};
use crate::thread::handler::ThreadHandler;
use crate::workspace::disk::ThreadDisk;
use crate::workspace::pull_request::{self, PrState, WATCH_FIELDS};
use crate::workspace::worktree::{self, Worktree};
use crate::workspace::{branch_files, forge, thread_repo};

use super::{Closing, StepError};

impl ThreadHandler {
    /// Does one step; a note for the last word when it has something to say.
    pub(super) async fn run_step(
        &self,
        c: &Closing<'_>,
        step: Step,
    ) -> Result<Option<String>, StepError> {
        let repo = &self.coder.layout.repo;
        match step {
            Step::Description | Step::DescriptionMerged => {
                let Some(pr) = c.pr else { return Ok(None) };
                // The PM sums the thread up again before the merge; after it, the Journal
                // gains the merge and the summary stays.
                let summary = match step {
                    Step::Description => Summary::Fresh,
                    _ => Summary::Kept,
                };
                self.describer()
                    .refresh(&c.thread, pr, c.tree.as_ref(), summary)
                    .await?;
                Ok(None)
            }
            Step::Journal => self.commit_journal(c).await,
            Step::Merge => {
                let Some(pr) = c.pr else { return Ok(None) };
                // A merge a stop cut off may have happened: never merge twice.
                let status = pull_request::view(&self.pm.gh, repo, pr.number, WATCH_FIELDS).await?;
                if status.state == PrState::Merged {
                    return Ok(None);
                }
                pull_request::merge(&self.pm.gh, repo, pr.number, self.merge_strategy).await?;
                tracing::info!(
                    tag = "INF",
                    "thread {} → merged PR #{} ({})",
                    c.thread,
                    pr.number,
                    self.merge_strategy.as_str()
                );
                Ok(None)
            }
            Step::DeleteRemoteBranch => {
                let Some(tree) = &c.tree else { return Ok(None) };
                pull_request::delete_remote_branch(repo, &tree.branch).await?;
                Ok(None)
            }
            Step::Cleanup => self.cleanup(c).await,
            // The report is the close's end: [`ThreadHandler::finish_close`].
            Step::Report => Ok(None),
        }
    }

    /// Commits the thread's journal on its branch and pushes it, so it reaches the default
    /// branch with the merge. A branch GitHub already deleted (merged there) gets none.
    async fn commit_journal(&self, c: &Closing<'_>) -> Result<Option<String>, StepError> {
        let (Some(tree), Some(pr)) = (&c.tree, c.pr) else {
            return Ok(None);
        };
        let repo = &self.coder.layout.repo;
        if c.kind == CloseKind::MergedOnGitHub
            && !pull_request::remote_has_branch(repo, &tree.branch).await?
        {
            return Ok(None);
        }
        self.coder.prepare.ensure_mounted(&tree.path).await?;
        let history = History::load(&self.store, &c.thread).await?;
        let used = usage::load(&self.store, &c.thread).await?;
        let permalink = match self
            .outbox
            .sender()
            .permalink(&c.thread.channel, &c.thread.thread_ts)
            .await
        {
            Ok(link) => Some(link),
            Err(e) => {
                tracing::warn!(thread = %c.thread, "thread permalink: {e}");
                None
            }
        };
        let title = self.title(&c.thread).await;
        let head = JournalHead {
            title: &title,
            permalink: permalink.as_deref(),
            pr: Some(pr),
            outcome: "merged",
            overridden: c.overridden.as_deref(),
        };
        let text = thread_journal::render(&head, &history, &used);
        let path = thread_journal::journal_path(&c.thread.thread_ts);
        let helper = self.coder.prepare.helper(&tree.path);
        let (main, worktree) = (repo.clone(), tree.path.clone());
        let message = format!("Add the journal of thread {}", c.thread.thread_ts);
        tokio::task::spawn_blocking(move || {
            branch_files::commit_to_thread_branch(
                &helper,
                &main,
                &worktree,
                &[(path, text.into_bytes())],
                &message,
            )
        })
        .await??;
        forge::push_branch(repo, &tree.path, &tree.branch).await?;
        Ok(None)
    }

    /// Removes the thread's worktree, its disk and its local branch — for an abandoned
    /// thread only once its branch is on GitHub (otherwise it is kept, and the thread says
    /// where).
    async fn cleanup(&self, c: &Closing<'_>) -> Result<Option<String>, StepError> {
        let Some(tree) = &c.tree else { return Ok(None) };
        let repo = &self.coder.layout.repo;
        let merged = matches!(c.kind, CloseKind::Merge | CloseKind::MergedOnGitHub);
        let image = ThreadDisk::of(&worktree::disks_dir(repo), &tree.path);
        // Nothing left to look at: removing it only drops its local branch, which a merge
        // made useless and an abandon must keep (it may hold the only copy of the work).
        if !tree.path.exists() && !image.exists() && !merged {
            return Ok(None);
        }
        if !merged {
            let pushed = self.fully_pushed(tree).await;
            if !pushed {
                return Ok(Some(format!(
                    "The worktree is kept at `{}` on branch `{}`: its commits were never pushed.",
                    tree.path.display(),
                    tree.branch
                )));
            }
        }
        worktree::remove(repo, tree).await?;
        tracing::info!(
            tag = "INF",
            "thread {} → removed {} and {}",
            c.thread,
            tree.path.display(),
            tree.branch
        );
        Ok(None)
    }

    /// Whether the worktree's branch is on `origin` as it is locally.
    async fn fully_pushed(&self, tree: &Worktree) -> bool {
        if let Err(e) = self.coder.prepare.ensure_mounted(&tree.path).await {
            tracing::warn!("mount {}: {e}", tree.path.display());
            return false;
        }
        let (path, branch) = (tree.path.clone(), tree.branch.clone());
        tokio::task::spawn_blocking(move || {
            let Ok(repo) = thread_repo::open(&path) else {
                return false;
            };
            let local = repo.refname_to_id(&format!("refs/heads/{branch}"));
            let pushed = repo.refname_to_id(&format!("refs/remotes/origin/{branch}"));
            matches!((local, pushed), (Ok(l), Ok(p)) if l == p)
        })
        .await
        .unwrap_or(false)
    }
}
