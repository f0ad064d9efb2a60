//! Orphan cleanup: what threads that are gone left under `.codebutler/`, removed when the
//! daemon starts (before threads resume) and by `codebutler --cleanup-orphans`.
//!
//! An **orphan** is a worktree — its directory `.codebutler/branches/<slug>`, its disk
//! `.codebutler/disks/<slug>.img`, its branch `codebutler/<slug>` in the repository — that no
//! thread's run uses, or whose every run belongs to a closed thread. A worktree that a run of
//! an open thread uses, or that a queued or running run uses, is never touched; nothing
//! outside `.codebutler/` is. An orphan goes the way [`crate::workspace::worktree::remove`] takes a worktree
//! away: its disk unmounted and deleted, or its directory removed without following the
//! symlinks a runner may have planted inside. Its branch goes with it unless that would lose
//! work: commits the thread never pushed (read from the thread's own repository, as "undo"
//! reads them, and copied to the repository's branch first), or commits that only the
//! repository's branch holds. Then the branch stays, and the cleanup says so.
//!
//! **Stale run files** in `.codebutler/run/` go too: the admin socket a killed daemon left,
//! the runner logs of runs no open thread has, the preparation spec and log of worktrees that
//! are gone. The daemon's lock ([`crate::repo_lock`]) and names the cleanup does not know
//! stay.
//!
//! The decisions are pure ([`judge`], [`branch_fate`], [`stale_run_files`]) and table-tested
//! on plain facts; [`clean_up`] reads the facts (the store's runs and threads, the
//! listings, git) and applies them. It runs under the repository's lock, so no daemon runs
//! beside it and no run is live but those the store still calls queued or running: at
//! start, before anything can start a run; from the command line, only while no daemon runs.
//!
//! Here: the cleanup and what it reports; the decisions are in [`decisions`], what it finds
//! under `.codebutler/` in [`listing`], one orphan's removal in [`removal`].

mod decisions;
mod listing;
mod removal;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

use crate::domain::{Stage, ThreadKey};
use crate::layout::Layout;
use crate::store::{Store, StoreError};
use crate::workspace::step_error::{GitStepError, IoStepError};
use crate::workspace::thread_repo::{BRANCH_PREFIX, ThreadRepoError};
use crate::workspace::worktree::WorktreeError;
pub use decisions::{
    BranchFacts, BranchFate, Orphaned, RunFact, branch_fate, judge, stale_run_files,
};
use listing::{list, remove_stale_run_files};
use removal::{Outcome, remove_orphan};

/// One thing the cleanup removed, said in one line.
#[derive(Clone, Debug, PartialEq)]
pub enum Removal {
    /// A worktree (its directory or disk, and its use of the base store), and what became
    /// of its branch.
    Worktree {
        slug: String,
        why: Orphaned,
        branch: BranchFate,
    },
    /// A branch whose worktree was gone already.
    Branch { slug: String, why: Orphaned },
    /// A stale file in `.codebutler/run/`.
    RunFile { name: String },
}

impl fmt::Display for Removal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Worktree { slug, why, branch } => {
                write!(f, "removed worktree .codebutler/branches/{slug} ({why})")?;
                match branch {
                    BranchFate::Delete => write!(f, "; deleted branch {BRANCH_PREFIX}{slug}"),
                    BranchFate::KeepUnpushed(n) => write!(
                        f,
                        "; kept branch {BRANCH_PREFIX}{slug}: {n} unpushed commit{}",
                        if *n == 1 { "" } else { "s" }
                    ),
                    BranchFate::KeepOwnCommits => write!(
                        f,
                        "; kept branch {BRANCH_PREFIX}{slug}: it has commits no other branch holds"
                    ),
                    BranchFate::NoBranch | BranchFate::Conflict => Ok(()),
                }
            }
            Self::Branch { slug, why } => {
                write!(f, "deleted branch {BRANCH_PREFIX}{slug} ({why})")
            }
            Self::RunFile { name } => write!(f, "removed stale .codebutler/run/{name}"),
        }
    }
}

/// What one cleanup did.
#[derive(Debug, Default, PartialEq)]
pub struct Cleanup {
    /// What it removed.
    pub removed: Vec<Removal>,
    /// Orphans it left on purpose, each with why.
    pub left: Vec<String>,
    /// What it could not do, each with why; the rest was done.
    pub failures: Vec<String>,
}

/// Removes the orphans and stale run files of the repository at `layout` (see the module's
/// documentation), judged from the runs in `store`. Call it only while holding the
/// repository's lock. A failure on one item is recorded and the others are still done; a
/// store that cannot be read removes nothing.
pub async fn clean_up(layout: &Layout, store: &Store) -> Cleanup {
    let mut cleanup = Cleanup::default();
    let runs = match run_facts(store).await {
        Ok(runs) => runs,
        Err(e) => {
            cleanup
                .failures
                .push(format!("read the runs and their threads: {e}"));
            return cleanup;
        }
    };
    let repo = layout.repo.clone();
    let listing = match blocking(move || Ok(list(&repo))).await {
        Ok(listing) => listing,
        Err(e) => {
            cleanup.failures.push(e.to_string());
            return cleanup;
        }
    };
    cleanup.failures.extend(listing.failures);
    let mut kept = HashSet::new();
    for slug in listing.slugs {
        let Some(why) = judge(&slug, &runs) else {
            kept.insert(slug);
            continue;
        };
        match remove_orphan(&layout.repo, &slug, why).await {
            Ok(Outcome::Removed(removal)) => cleanup.removed.push(removal),
            Ok(Outcome::Left(line)) => {
                kept.insert(slug);
                cleanup.left.push(line);
            }
            Ok(Outcome::Nothing) => {}
            Err(e) => {
                kept.insert(slug.clone());
                cleanup
                    .failures
                    .push(format!("remove the orphaned worktree {slug}: {e}"));
            }
        }
    }
    let admin = layout.admin_socket();
    let admin = admin
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let run_dir = layout.dir.join("run");
    match blocking(move || Ok(remove_stale_run_files(&run_dir, &admin, &runs, &kept))).await {
        Ok(done) => {
            cleanup.removed.extend(done.removed);
            cleanup.failures.extend(done.failures);
        }
        Err(e) => cleanup.failures.push(e.to_string()),
    }
    cleanup
}

/// Every run, oldest first, with its thread's stage.
async fn run_facts(store: &Store) -> Result<Vec<RunFact>, StoreError> {
    let mut runs = store.list_runs(false, i64::MAX).await?;
    runs.reverse();
    let mut stages: HashMap<ThreadKey, Option<Stage>> = HashMap::new();
    let mut facts = Vec::with_capacity(runs.len());
    for run in runs {
        let stage = match stages.get(&run.thread) {
            Some(stage) => *stage,
            None => {
                let stage = store.thread_record(&run.thread).await?.map(|t| t.stage);
                stages.insert(run.thread.clone(), stage);
                stage
            }
        };
        facts.push(RunFact {
            worktree: Path::new(&run.worktree)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            branch: run
                .branch
                .strip_prefix(BRANCH_PREFIX)
                .unwrap_or_default()
                .to_owned(),
            live: !run.state.is_final(),
            id: run.id,
            thread: run.thread,
            stage,
        });
    }
    Ok(facts)
}

/// Why one orphan could not be removed (the cleanup goes on with the others and says it).
#[derive(Debug, thiserror::Error)]
enum OrphanError {
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error(transparent)]
    Io(#[from] IoStepError),
    #[error("copy {branch} to the repository: {source}")]
    Copy {
        branch: String,
        source: ThreadRepoError,
    },
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    #[error("blocking task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Runs blocking git or file work off the runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, OrphanError> + Send + 'static,
) -> Result<T, OrphanError> {
    tokio::task::spawn_blocking(work).await?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Closure;

    fn key(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    /// Unpushed work on a worktree no run uses: never overwritten on the repository's branch
    /// when that has commits of its own (the worktree stays), kept on it otherwise.
    #[tokio::test]
    async fn unpushed_work_is_kept_and_never_overwritten() {
        use crate::workspace::stage::test_support::{ThreadFixture, commit_worktree};
        let f = ThreadFixture::new(&[("a.txt", "a")]);
        std::fs::write(f.worktree().join("b.txt"), "b").unwrap();
        let work = commit_worktree(&f, "the thread's work");
        // The person moved the repository's copy of the branch to a commit of their own.
        let main = git2::Repository::open(f.main()).unwrap();
        let base = main.head().unwrap().peel_to_commit().unwrap();
        let sig = git2::Signature::now("p", "p@example.com").unwrap();
        let own = main
            .commit(None, &sig, &sig, "mine", &base.tree().unwrap(), &[&base])
            .unwrap();
        main.reference("refs/heads/codebutler/t", own, true, "test")
            .unwrap();
        let layout = Layout::new(f.main());
        let store = Store::open(&layout.store()).await.unwrap();

        let cleanup = clean_up(&layout, &store).await;
        assert_eq!(cleanup.removed, []);
        assert_eq!(cleanup.failures, Vec::<String>::new());
        assert_eq!(
            cleanup.left,
            [
                "left worktree .codebutler/branches/t (no thread's run uses it): its branch \
              codebutler/t has commits it never pushed, and the repository's codebutler/t has \
              commits of its own; merge them by hand, then run the cleanup again"
            ]
        );
        assert!(f.worktree().join("b.txt").is_file());
        let tip = |main: &git2::Repository| main.refname_to_id("refs/heads/codebutler/t").unwrap();
        assert_eq!(tip(&main), own);

        // Sorted out by hand: the worktree goes, the branch stays with the work.
        main.reference("refs/heads/codebutler/t", base.id(), true, "test")
            .unwrap();
        let cleanup = clean_up(&layout, &store).await;
        assert_eq!(
            cleanup,
            Cleanup {
                removed: vec![Removal::Worktree {
                    slug: "t".into(),
                    why: Orphaned::Unknown,
                    branch: BranchFate::KeepUnpushed(1),
                }],
                left: vec![],
                failures: vec![],
            }
        );
        assert!(!f.worktree().exists());
        assert_eq!(tip(&main), work);
        store.close().await;
    }

    #[test]
    fn removals_read_as_one_line_each() {
        let closed = Orphaned::Closed {
            thread: key("1732.1"),
            closure: Closure::Merged,
        };
        let lines: Vec<String> = [
            Removal::Worktree {
                slug: "add-notes".into(),
                why: closed.clone(),
                branch: BranchFate::Delete,
            },
            Removal::Worktree {
                slug: "try-it".into(),
                why: Orphaned::Closed {
                    thread: key("1732.2"),
                    closure: Closure::Abandoned,
                },
                branch: BranchFate::KeepUnpushed(1),
            },
            Removal::Worktree {
                slug: "stray".into(),
                why: Orphaned::Unknown,
                branch: BranchFate::NoBranch,
            },
            Removal::Worktree {
                slug: "old".into(),
                why: Orphaned::Unknown,
                branch: BranchFate::KeepOwnCommits,
            },
            Removal::Branch {
                slug: "half-made".into(),
                why: Orphaned::Unknown,
            },
            Removal::RunFile {
                name: "run-12.log".into(),
            },
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            lines,
            [
                "removed worktree .codebutler/branches/add-notes (thread 1732.1 is closed (merged)); deleted branch codebutler/add-notes",
                "removed worktree .codebutler/branches/try-it (thread 1732.2 is closed (abandoned)); kept branch codebutler/try-it: 1 unpushed commit",
                "removed worktree .codebutler/branches/stray (no thread's run uses it)",
                "removed worktree .codebutler/branches/old (no thread's run uses it); kept branch codebutler/old: it has commits no other branch holds",
                "deleted branch codebutler/half-made (no thread's run uses it)",
                "removed stale .codebutler/run/run-12.log",
            ]
        );
    }
}
