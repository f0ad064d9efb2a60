//! Coordination between threads that work on one repository at once: what each thread
//! touches (its scope, kept in the store), how threads overlap, and what is said about it
//! and when.
//!
//! - **Before approval** ([`Coordination::plan_block`]): the plan message lists the active
//!   threads (a plan waiting, the Coder working, a PR open) that change the same files or
//!   directories, and those the PM judges may interact with it though they share neither
//!   ([`semantic`], one call bounded by [`SEMANTIC_WAIT`]).
//! - **After each Coder run** ([`Coordination::after_run`]): the branch's changed files are
//!   read with git; overlaps never told before are told in both threads; an in-memory merge
//!   finds real conflicts with the default branch and with every other thread's branch,
//!   told once per pair of head commits ([`conflicts`]). All of it is recorded with the
//!   run's end report.
//! - **After a merge** ([`Coordination::after_merge`]): every active thread that overlaps
//!   the merged one is told what merged and which of its files it touched, and offered
//!   "rebase" — recorded with the close.
//! - **Merge order** ([`merge_order`]): one channel message, kept true.
//!
//! Every notice is a message stored in its thread together with its exactly-once record
//! ([`Notice`], [`notices`]), in the transaction of what caused it, so a crash neither loses
//! nor repeats one, and the thread's own handler posts it in order, whichever instance owns
//! the thread.

pub mod conflicts;
pub mod merge_order;
pub mod notices;
pub mod overlap;
pub mod semantic;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::dispatch::Dispatcher;
use crate::domain::notice_message;
use crate::domain::{IncomingMessage, Plan, RunRecord, ThreadKey};
use crate::pm::Pm;
use crate::store::{Change, ScopeChange, ScopeFile, Store, StoreError, ThreadScope};
use crate::workspace::{branch_diff, thread_repo, worktree};
use notices::ThreadRef;

/// How long a plan's proposal waits for the PM's semantic judgement before it is posted
/// without it.
pub const SEMANTIC_WAIT: Duration = Duration::from_secs(20);

/// Coordination's hooks, shared by the thread handler and the Coder's end reports; cheap to
/// clone.
#[derive(Clone)]
pub struct Coordination {
    pub store: Store,
    /// The PM, for the semantic judgement and the default branch's tip.
    pub pm: Pm,
    /// The main repository, where threads' branches are mirrored.
    pub repo: PathBuf,
    /// Mounts a worktree's disk before its thread repository is read.
    pub prepare: worktree::Preparer,
    /// Wakes the merge-order refresh ([`merge_order::MergeOrder`]).
    pub merge_order: Arc<Notify>,
    /// Wakes a thread whose notice was stored (set once the dispatcher exists).
    pub dispatcher: Arc<OnceLock<Dispatcher>>,
}

impl std::fmt::Debug for Coordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordination")
            .field("repo", &self.repo)
            .finish_non_exhaustive()
    }
}

/// Why coordination after a run could not be done (logged; nothing is said).
#[derive(Debug, thiserror::Error)]
pub enum CoordinationError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("read the branch's changes: {0}")]
    Diff(#[from] branch_diff::DiffError),
    #[error("read the branch's head: {0}")]
    Head(#[from] thread_repo::ThreadRepoError),
    #[error("mount the worktree: {0}")]
    Mount(#[from] worktree::WorktreeError),
    #[error("merge in memory: {0}")]
    Conflict(#[from] conflicts::ConflictError),
    #[error("git task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

fn thread_ref(scope: &ThreadScope) -> ThreadRef {
    ThreadRef {
        thread: scope.thread.clone(),
        summary: scope.summary.clone(),
        pr: scope.pull_request.as_ref().map(|p| p.number),
    }
}

/// Message ts for notices, in Slack's `seconds.micros` form from now on, one microsecond
/// apart (a message's ts is unique in its channel), so each sorts after what its thread said
/// before.
struct Stamps(i64);

impl Stamps {
    fn now() -> Self {
        Self(chrono::Utc::now().timestamp_micros())
    }

    fn next(&mut self) -> String {
        let ts = format!("{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000);
        self.0 += 1;
        ts
    }
}

/// A notice to give: the message carrying it into its thread and the records of what it
/// tells, recorded with [`Notice::change`] in the transaction of what caused it.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub thread: ThreadKey,
    pub keys: Vec<String>,
    pub message: IncomingMessage,
}

impl Notice {
    fn new(thread: &ThreadKey, keys: Vec<String>, markdown: &str, stamps: &mut Stamps) -> Self {
        Self {
            thread: thread.clone(),
            keys,
            message: notice_message(thread, &stamps.next(), markdown),
        }
    }

    /// The change recording it (nothing when it was given already).
    pub fn change(&self) -> Change<'_> {
        Change::Scope(ScopeChange::Notice {
            thread: &self.thread,
            keys: &self.keys,
            message: &self.message,
        })
    }
}

/// What the end of a run records: the files its branch changes (read at `head`) and the
/// notices that brings.
#[derive(Clone, Debug, PartialEq)]
pub struct AfterRun {
    pub thread: ThreadKey,
    pub head: String,
    pub files: Vec<ScopeFile>,
    pub notices: Vec<Notice>,
}

impl AfterRun {
    /// The changes recording it, for the transaction that reports the run's end.
    pub fn changes(&self) -> Vec<Change<'_>> {
        std::iter::once(Change::Scope(ScopeChange::Files {
            thread: &self.thread,
            head: &self.head,
            files: &self.files,
        }))
        .chain(self.notices.iter().map(Notice::change))
        .collect()
    }
}

impl Coordination {
    /// The plan message's overlap block for `plan`, proposed in `thread` (empty when it
    /// overlaps nothing). Store failures are logged and show nothing.
    pub async fn plan_block(
        &self,
        thread: &ThreadKey,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> String {
        let scopes = match self.store.active_scopes().await {
            Ok(scopes) => scopes,
            Err(e) => {
                tracing::warn!(thread = %thread, "read the active threads: {e}");
                return String::new();
            }
        };
        let others: Vec<ThreadScope> = scopes
            .into_iter()
            .filter(|s| s.thread != *thread && s.thread.channel == thread.channel)
            .collect();
        let found = overlap::against(thread, &plan.files, &others);
        let mut lines: Vec<String> = found
            .iter()
            .map(|f| notices::plan_line(&thread_ref(f.other), &f.overlap))
            .collect();
        let rest: Vec<&ThreadScope> = others
            .iter()
            .filter(|o| !found.iter().any(|f| f.other.thread == o.thread))
            .collect();
        let candidates: Vec<semantic::Candidate> = rest
            .iter()
            .map(|s| semantic::Candidate {
                summary: s
                    .summary
                    .clone()
                    .unwrap_or_else(|| "(no plan summary)".into()),
                files: overlap::files_of(s),
            })
            .collect();
        if !candidates.is_empty() {
            let judged = tokio::time::timeout(
                SEMANTIC_WAIT,
                semantic::judge(&self.pm, thread, plan, &candidates, cancel),
            )
            .await;
            match judged {
                Ok(found) => lines.extend(
                    found
                        .iter()
                        .map(|i| notices::semantic_line(&thread_ref(rest[i.candidate]), &i.reason)),
                ),
                Err(_) => tracing::warn!(
                    thread = %thread,
                    "semantic overlap: no answer within {} s; the plan is posted without it",
                    SEMANTIC_WAIT.as_secs()
                ),
            }
        }
        notices::plan_block(&lines)
    }

    /// What the end of `run` records about its thread's branch: its changed files, read with
    /// git, and the notices of overlaps never told and of real conflicts. `None` for a run
    /// without a branch of ours, or when it cannot be read (logged): the run's end is
    /// reported all the same.
    pub async fn after_run(&self, run: &RunRecord) -> Option<AfterRun> {
        if run.worktree.is_empty() || !thread_repo::is_our_branch(&run.branch) {
            return None;
        }
        match self.try_after_run(run).await {
            Ok(after) => Some(after),
            Err(e) => {
                tracing::warn!(thread = %run.thread, "coordination after run {}: {e}", run.id);
                None
            }
        }
    }

    async fn try_after_run(&self, run: &RunRecord) -> Result<AfterRun, CoordinationError> {
        let thread = &run.thread;
        let worktree = PathBuf::from(&run.worktree);
        self.prepare.ensure_mounted(&worktree).await?;
        let (path, branch) = (worktree.clone(), run.branch.clone());
        let (head, files) = tokio::task::spawn_blocking(
            move || -> Result<(String, Vec<ScopeFile>), CoordinationError> {
                let repo = thread_repo::open(&path)?;
                let head = repo
                    .refname_to_id(&format!("refs/heads/{branch}"))
                    .map_err(|e| {
                        thread_repo::ThreadRepoError::Invalid(format!(
                            "read {branch}: {}",
                            e.message()
                        ))
                    })?;
                let files = branch_diff::file_changes(&path, &branch)?
                    .into_iter()
                    .map(|f| ScopeFile {
                        path: f.path,
                        added: f.added,
                        removed: f.removed,
                    })
                    .collect();
                Ok((head.to_string(), files))
            },
        )
        .await??;
        let mut after = AfterRun {
            thread: thread.clone(),
            head,
            files,
            notices: Vec::new(),
        };
        let scopes = self.store.active_scopes().await?;
        let Some(stored) = scopes.iter().find(|s| s.thread == *thread) else {
            return Ok(after);
        };
        // This thread as it is now that the run ended.
        let mine = ThreadScope {
            head: Some(after.head.clone()),
            changed: after.files.clone(),
            branch: Some(run.branch.clone()),
            ..stored.clone()
        };
        let others: Vec<&ThreadScope> = scopes
            .iter()
            .filter(|s| s.thread != *thread && s.thread.channel == thread.channel)
            .collect();
        let mut stamps = Stamps::now();
        after.notices = self.new_overlaps(&mine, &others, &mut stamps).await?;
        after
            .notices
            .extend(self.conflicts(&mine, &others, &mut stamps).await?);
        Ok(after)
    }

    /// Notices of the overlaps of `mine` with each of `others` that a thread was not told
    /// yet, in both threads.
    async fn new_overlaps(
        &self,
        mine: &ThreadScope,
        others: &[&ThreadScope],
        stamps: &mut Stamps,
    ) -> Result<Vec<Notice>, CoordinationError> {
        let my_files = overlap::files_of(mine);
        let mut out = Vec::new();
        for other in others {
            let Some(found) = overlap::between(&my_files, &overlap::files_of(other)) else {
                continue;
            };
            for (here, there) in [(mine, *other), (*other, mine)] {
                let prefix = format!("overlap:{}:", there.thread.thread_ts);
                let mut told = BTreeSet::new();
                for item in found.items() {
                    if self
                        .store
                        .notice_given(&here.thread, &format!("{prefix}{item}"))
                        .await?
                    {
                        told.insert(item);
                    }
                }
                let Some(new) = found.without(&told) else {
                    continue;
                };
                let keys = new.items().iter().map(|i| format!("{prefix}{i}")).collect();
                let text = notices::overlap_notice(&thread_ref(there), &new);
                out.push(Notice::new(&here.thread, keys, &text, stamps));
            }
        }
        Ok(out)
    }

    /// Notices of real conflicts of `mine`'s branch with the default branch and with each
    /// of `others`' branches, once per pair of head commits.
    async fn conflicts(
        &self,
        mine: &ThreadScope,
        others: &[&ThreadScope],
        stamps: &mut Stamps,
    ) -> Result<Vec<Notice>, CoordinationError> {
        let mut out = Vec::new();
        let Some(my_head) = self.mirrored_head(mine).await? else {
            return Ok(out);
        };
        if let Some(tip) = self.pm.memory.tip(false).await
            && let Ok(tip) = git2::Oid::from_str(&tip)
        {
            let files = self.conflicting(my_head, tip).await?;
            let key = format!("conflict:default:{my_head}:{tip}");
            if !files.is_empty() && !self.store.notice_given(&mine.thread, &key).await? {
                let repo = self.repo.clone();
                let name =
                    tokio::task::spawn_blocking(move || conflicts::default_branch_name(&repo))
                        .await?;
                let text = notices::conflict_notice(None, name.as_deref(), &files);
                out.push(Notice::new(&mine.thread, vec![key], &text, stamps));
            }
        }
        for other in others {
            let Some(their_head) = self.mirrored_head(other).await? else {
                continue;
            };
            let files = self.conflicting(my_head, their_head).await?;
            if files.is_empty() {
                continue;
            }
            for (here, there, ours, theirs) in [
                (mine, *other, my_head, their_head),
                (*other, mine, their_head, my_head),
            ] {
                let key = format!("conflict:{}:{ours}:{theirs}", there.thread.thread_ts);
                if self.store.notice_given(&here.thread, &key).await? {
                    continue;
                }
                let text = notices::conflict_notice(Some(&thread_ref(there)), None, &files);
                out.push(Notice::new(&here.thread, vec![key], &text, stamps));
            }
        }
        Ok(out)
    }

    /// The head of `scope`'s branch as mirrored in the main repository.
    async fn mirrored_head(
        &self,
        scope: &ThreadScope,
    ) -> Result<Option<git2::Oid>, CoordinationError> {
        let Some(branch) = scope.branch.clone() else {
            return Ok(None);
        };
        if !thread_repo::is_our_branch(&branch) {
            return Ok(None);
        }
        let repo = self.repo.clone();
        Ok(tokio::task::spawn_blocking(move || conflicts::branch_head(&repo, &branch)).await??)
    }

    async fn conflicting(
        &self,
        ours: git2::Oid,
        theirs: git2::Oid,
    ) -> Result<Vec<String>, CoordinationError> {
        let repo = self.repo.clone();
        Ok(
            tokio::task::spawn_blocking(move || conflicts::conflicting_files(&repo, ours, theirs))
                .await??,
        )
    }

    /// The notices for every active thread whose files overlap `merged`'s, whose pull
    /// request `pr` merged; recorded with the close. A failure is logged and tells nobody.
    pub async fn after_merge(&self, merged: &ThreadKey, pr: u64) -> Vec<Notice> {
        match self.try_after_merge(merged, pr).await {
            Ok(notices) => notices,
            Err(e) => {
                tracing::warn!(thread = %merged, "coordination after the merge of PR #{pr}: {e}");
                Vec::new()
            }
        }
    }

    async fn try_after_merge(
        &self,
        merged: &ThreadKey,
        pr: u64,
    ) -> Result<Vec<Notice>, CoordinationError> {
        let Some(scope) = self.store.thread_scope(merged).await? else {
            return Ok(Vec::new());
        };
        let merged_files = overlap::files_of(&scope);
        let merged_ref = thread_ref(&scope);
        let mut stamps = Stamps::now();
        let mut out = Vec::new();
        for other in self.store.active_scopes().await? {
            if other.thread == *merged || other.thread.channel != merged.channel {
                continue;
            }
            let Some(found) = overlap::between(&overlap::files_of(&other), &merged_files) else {
                continue;
            };
            let key = format!("merged:{}:{pr}", merged.thread_ts);
            let text = notices::merged_notice(&merged_ref, pr, &found);
            out.push(Notice::new(&other.thread, vec![key], &text, &mut stamps));
        }
        Ok(out)
    }

    /// Once `notices` are recorded: their threads are woken to post them, and the merge
    /// order is refreshed (what a run or a close changed may change it).
    pub fn recorded(&self, notices: &[Notice]) {
        for notice in notices {
            tracing::info!(
                tag = "INF",
                "thread {} → coordination notice",
                notice.thread
            );
            if let Some(dispatcher) = self.dispatcher.get() {
                dispatcher.notify(&notice.thread);
            }
        }
        self.merge_order.notify_one();
    }
}
