//! Coordination between threads that work on one repository at once: what each thread
//! touches (its scope, kept in the store), how threads overlap, and what is said about it
//! and when.
//!
//! - **Before approval** ([`Coordination::plan_block`]): the plan message lists the active
//!   threads (a plan waiting, the Coder working, a PR open) that change the same files or
//!   directories, and those the PM judges may interact with it though they share neither
//!   ([`semantic`], one call bounded by [`SEMANTIC_WAIT`]).
//! - **After each Coder run** ([`Coordination::after_run`]): the branch's changed files are
//!   read with git and stored; overlaps never told before are told in both threads; an
//!   in-memory merge finds real conflicts with the default branch and with every other
//!   thread's branch, told once per pair of head commits ([`conflicts`]).
//! - **After a merge** ([`Coordination::after_merge`]): every active thread that overlaps
//!   the merged one is told what merged and which of its files it touched, and offered
//!   "rebase".
//! - **Merge order** ([`merge_order`]): one channel message, kept true.
//!
//! Every notice is a message stored in its thread together with its exactly-once record
//! ([`notices`]), so the thread's own handler posts it in order, whichever instance owns it.

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

use crate::domain::{Plan, RunRecord, ThreadKey};
use crate::pm::Pm;
use crate::store::{Change, ScopeChange, ScopeFile, Store, StoreError, ThreadScope};
use crate::thread::dispatch::Dispatcher;
use crate::workspace::{branch_diff, thread_repo, worktree};
use notices::{ThreadRef, notice_message};

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

/// A message ts for now, in Slack's `seconds.micros` form, so a notice sorts after what the
/// thread said before.
fn message_ts() -> String {
    let now = chrono::Utc::now();
    format!("{}.{:06}", now.timestamp(), now.timestamp_subsec_micros())
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

    /// After a Coder run of `run`'s thread ended: the branch's changes stored, new overlaps
    /// and real conflicts told, the merge order refreshed. Failures are logged.
    pub async fn after_run(&self, run: &RunRecord) {
        if run.worktree.is_empty() || !thread_repo::is_our_branch(&run.branch) {
            return;
        }
        if let Err(e) = self.try_after_run(run).await {
            tracing::warn!(thread = %run.thread, "coordination after run {}: {e}", run.id);
        }
        self.merge_order.notify_one();
    }

    async fn try_after_run(&self, run: &RunRecord) -> Result<(), CoordinationError> {
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
        let change = Change::Scope(ScopeChange::Files {
            thread,
            head: &head,
            files: &files,
        });
        self.store.commit(&[change], &[]).await?;
        let scopes = self.store.active_scopes().await?;
        let Some(mine) = scopes.iter().find(|s| s.thread == *thread) else {
            return Ok(());
        };
        let others: Vec<&ThreadScope> = scopes
            .iter()
            .filter(|s| s.thread != *thread && s.thread.channel == thread.channel)
            .collect();
        self.tell_new_overlaps(mine, &others).await?;
        self.tell_conflicts(mine, &others).await
    }

    /// Overlaps of `mine` with each of `others` that neither thread was told yet.
    async fn tell_new_overlaps(
        &self,
        mine: &ThreadScope,
        others: &[&ThreadScope],
    ) -> Result<(), CoordinationError> {
        let my_files = overlap::files_of(mine);
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
                let keys: Vec<String> =
                    new.items().iter().map(|i| format!("{prefix}{i}")).collect();
                let text = notices::overlap_notice(&thread_ref(there), &new);
                self.give(&here.thread, &keys, &text).await?;
            }
        }
        Ok(())
    }

    /// Real conflicts of `mine`'s branch with the default branch and with each of
    /// `others`' branches, told once per pair of head commits.
    async fn tell_conflicts(
        &self,
        mine: &ThreadScope,
        others: &[&ThreadScope],
    ) -> Result<(), CoordinationError> {
        let Some(my_head) = self.mirrored_head(mine).await? else {
            return Ok(());
        };
        if let Some(tip) = self.pm.memory.tip(false).await
            && let Ok(tip) = git2::Oid::from_str(&tip)
        {
            let files = self.conflicting(my_head, tip).await?;
            if !files.is_empty() {
                let key = format!("conflict:default:{my_head}:{tip}");
                let repo = self.repo.clone();
                let name =
                    tokio::task::spawn_blocking(move || conflicts::default_branch_name(&repo))
                        .await?;
                let text = notices::conflict_notice(None, &name, &files);
                self.give_once(&mine.thread, &key, &text).await?;
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
                let text = notices::conflict_notice(Some(&thread_ref(there)), "", &files);
                self.give_once(&here.thread, &key, &text).await?;
            }
        }
        Ok(())
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

    /// After the thread `merged` (its pull request `pr`) merged: every active thread whose
    /// files overlap it is told, once. Failures are logged.
    pub async fn after_merge(&self, merged: &ThreadKey, pr: u64) {
        if let Err(e) = self.try_after_merge(merged, pr).await {
            tracing::warn!(thread = %merged, "coordination after the merge of PR #{pr}: {e}");
        }
        self.merge_order.notify_one();
    }

    async fn try_after_merge(&self, merged: &ThreadKey, pr: u64) -> Result<(), CoordinationError> {
        let Some(scope) = self.store.thread_scope(merged).await? else {
            return Ok(());
        };
        let merged_files = overlap::files_of(&scope);
        let merged_ref = thread_ref(&scope);
        for other in self.store.active_scopes().await? {
            if other.thread == *merged || other.thread.channel != merged.channel {
                continue;
            }
            let Some(found) = overlap::between(&overlap::files_of(&other), &merged_files) else {
                continue;
            };
            let key = format!("merged:{}:{pr}", merged.thread_ts);
            let text = notices::merged_notice(&merged_ref, pr, &found);
            self.give_once(&other.thread, &key, &text).await?;
        }
        Ok(())
    }

    async fn give_once(
        &self,
        thread: &ThreadKey,
        key: &str,
        markdown: &str,
    ) -> Result<(), CoordinationError> {
        if self.store.notice_given(thread, key).await? {
            return Ok(());
        }
        self.give(thread, &[key.to_owned()], markdown).await
    }

    /// Stores `markdown` as a notice in `thread` with its records `keys`, in one
    /// transaction (nothing when one of them was given already), and wakes the thread.
    async fn give(
        &self,
        thread: &ThreadKey,
        keys: &[String],
        markdown: &str,
    ) -> Result<(), CoordinationError> {
        let msg = notice_message(thread, &message_ts(), markdown);
        let mut changes: Vec<Change<'_>> = keys
            .iter()
            .map(|notice| Change::Scope(ScopeChange::Notice { thread, notice }))
            .collect();
        changes.push(Change::Scope(ScopeChange::Message(&msg)));
        if self.store.commit(&changes, &[]).await? {
            tracing::info!(tag = "INF", "thread {thread} → coordination notice stored");
            if let Some(dispatcher) = self.dispatcher.get() {
                dispatcher.notify(thread);
            }
        }
        Ok(())
    }
}
