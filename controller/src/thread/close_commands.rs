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

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::closing::event::PrEvent;
use crate::domain::{Closure, IncomingMessage, PullRequestRef, Role, RunRecord, ThreadKey};
use crate::journal::description::Describer;
use crate::journal::thread_journal::{self, JournalHead};
use crate::journal::{notes, report, usage};
use crate::memory::MemoryTarget;
use crate::postflight::MEMORY_PROPOSAL;
use crate::slack::effects::Effects;
use crate::store::{Change, StoreError};
use crate::thread::close_plan::{CloseKind, Step};
use crate::thread::handler::{Settle, ThreadHandler, speaker};
use crate::thread::history::History;
use crate::workspace::disk::ThreadDisk;
use crate::workspace::forge::ForgeError;
use crate::workspace::publish::{self, PublishError};
use crate::workspace::pull_request::{
    self, MergeBlocker, PrState, PullRequestError, VIEW_FIELDS, WATCH_FIELDS,
};
use crate::workspace::worktree::{self, Worktree, WorktreeError};
use crate::workspace::{branch_files, forge, thread_repo};

/// The close in progress: the thread, its pull request and its worktree (the latest run's).
struct Closing<'a> {
    msg: &'a IncomingMessage,
    thread: ThreadKey,
    kind: CloseKind,
    pr: Option<&'a PullRequestRef>,
    tree: Option<Worktree>,
}

/// Why a step of a close failed; said in the thread.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    PullRequest(#[from] PullRequestError),
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
    pub(super) async fn merge(&self, msg: &IncomingMessage, pr: &PullRequestRef) -> Settle {
        let thread = msg.thread();
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
                None | Some(MergeBlocker::AlreadyMerged) => {}
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
        self.close(msg, CloseKind::Merge, Some(pr)).await
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
        };
        tracing::info!(
            tag = "INF",
            "thread {} → closing ({kind:?}) for {}",
            closing.thread,
            msg.user
        );
        let mut notes = Vec::new();
        for &step in kind.steps().iter().filter(|s| **s != Step::Report) {
            match self.step_done(&closing.thread, step).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(settle) => return settle,
            }
            match self.run_step(&closing, step).await {
                Ok(note) => {
                    notes.extend(note);
                    let changes = [Change::StepDone {
                        thread: &closing.thread,
                        step: step.name(),
                    }];
                    if let Err(e) = self
                        .outbox
                        .commit(&changes, &Effects::new(&closing.thread))
                        .await
                    {
                        tracing::error!(thread = %closing.thread, "record close step {}: {e}", step.name());
                        return Settle::Failed;
                    }
                }
                Err(e) => {
                    tracing::error!(thread = %closing.thread, "close step {}: {e}", step.name());
                    let reply = format!(
                        "I couldn't {} ({e}). The thread stays open; say **{}** again to go on from there.",
                        step.what(),
                        kind.retry_word()
                    );
                    return self.answer(msg, Role::Pm, &reply).await;
                }
            }
        }
        self.finish_close(&closing, &notes).await
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

    /// Does one step; a note for the last word when it has something to say.
    async fn run_step(&self, c: &Closing<'_>, step: Step) -> Result<Option<String>, StepError> {
        let repo = &self.coder.layout.repo;
        match step {
            Step::Description => {
                let Some(pr) = c.pr else { return Ok(None) };
                self.describer()
                    .write(&c.thread, pr, c.tree.as_ref())
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

    /// The end of every close: the usage report, the closed stage, the message handled and
    /// the last word, recorded together (so each is said and done once).
    async fn finish_close(&self, c: &Closing<'_>, notes_said: &[String]) -> Settle {
        let report = self.usage_report(&c.thread).await;
        let mut last = match (c.kind, c.pr) {
            (CloseKind::Merge, Some(pr)) => format!("PR #{} merged. Thread closed.", pr.number),
            (CloseKind::MergedOnGitHub, Some(pr)) => {
                format!("PR #{} was merged on GitHub. Thread closed.", pr.number)
            }
            (CloseKind::Abandon, Some(pr)) => format!(
                "Thread closed without merging. PR #{} is left as it is on GitHub.",
                pr.number
            ),
            (CloseKind::ClosedOnGitHub, Some(pr)) => format!(
                "PR #{} was closed on GitHub without merging. Thread closed.",
                pr.number
            ),
            (CloseKind::Abandon | CloseKind::ClosedOnGitHub, None) => {
                "Thread closed without merging.".to_owned()
            }
            _ => "Thread closed.".to_owned(),
        };
        for note in notes_said {
            last.push(' ');
            last.push_str(note);
        }
        let closure = c.kind.closure();
        // The active threads that overlap what merged are told, with the close.
        let notices = match (closure, c.pr) {
            (Closure::Merged, Some(pr)) => {
                self.coder
                    .coordination
                    .after_merge(&c.thread, pr.number)
                    .await
            }
            _ => Vec::new(),
        };
        let mut changes = vec![
            Change::StepDone {
                thread: &c.thread,
                step: Step::Report.name(),
            },
            Change::Closed {
                thread: &c.thread,
                closure,
            },
            Change::Processed(c.msg),
        ];
        changes.extend(notices.iter().map(|n| n.change()));
        let effects = Effects::new(&c.thread)
            .reply(&report, speaker(Role::Pm))
            .reply(&last, speaker(Role::Pm));
        tracing::info!(tag = "INF", "thread {} → closed ({closure:?})", c.thread);
        match self.outbox.commit(&changes, &effects).await {
            Ok(true) => {
                // The notices' threads post them; the merge order loses this pull request.
                self.coder.coordination.recorded(&notices);
                if closure == Closure::Merged {
                    // What the merge brought (its approved memory among it) reaches the next
                    // thread's PM without waiting for the next approval's fetch.
                    let source = self.memory.source.clone();
                    tokio::spawn(async move { source.tip(true).await });
                }
                if closure == Closure::Done {
                    // A thread done without a pull request: what it taught goes in a memory
                    // PR of its own, once people approve it.
                    let memory = self.memory.clone();
                    let thread = c.thread.clone();
                    tokio::spawn(async move {
                        memory
                            .propose_as_step(
                                &thread,
                                MemoryTarget::NewPullRequest,
                                Some(MEMORY_PROPOSAL),
                            )
                            .await
                    });
                }
                Settle::Settled
            }
            // Closed already (or its report recorded): nothing more to say; the message is
            // handled.
            Ok(false) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %c.thread, "record the close: {e}");
                Settle::Failed
            }
        }
    }

    /// The usage report's Markdown.
    async fn usage_report(&self, thread: &ThreadKey) -> String {
        let used = match usage::load(&self.store, thread).await {
            Ok(used) => used,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's usage: {e}");
                return format!("📊 The usage report is unavailable ({e}).");
            }
        };
        let history = match History::load(&self.store, thread).await {
            Ok(history) => history.render(),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                String::new()
            }
        };
        let title = self.title(thread).await;
        let summary = report::render(&title, &used, &report::Tips::Efficient);
        let tips = match notes::tips(
            &self.pm,
            thread,
            &summary,
            &history,
            &CancellationToken::new(),
        )
        .await
        {
            Ok(tips) if tips.is_empty() => report::Tips::Efficient,
            Ok(tips) => report::Tips::Some(tips),
            Err(e) => {
                tracing::warn!(thread = %thread, "tips: {e}");
                report::Tips::Unavailable
            }
        };
        // The report counts the tips' own call.
        let used = usage::load(&self.store, thread).await.unwrap_or(used);
        report::render(&title, &used, &tips)
    }

    /// Writes pull request descriptions for this thread's handler.
    pub(super) fn describer(&self) -> Describer {
        Describer {
            pm: self.pm.clone(),
            outbox: self.outbox.clone(),
            prepare: self.coder.prepare.clone(),
        }
    }

    /// The thread's title: its plan's summary, else its first message.
    async fn title(&self, thread: &ThreadKey) -> String {
        match self.store.stored_thread(thread).await {
            Ok(stored) => {
                if let Some(plan) = stored.plan {
                    return plan.summary;
                }
            }
            Err(e) => tracing::warn!(thread = %thread, "read the thread's plan: {e}"),
        }
        let first = match History::load(&self.store, thread).await {
            Ok(history) => history.first_request().map(str::to_owned),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                None
            }
        };
        first.unwrap_or_else(|| "this thread".to_owned())
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
