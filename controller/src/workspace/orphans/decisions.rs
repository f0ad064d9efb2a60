//! What the cleanup decides, with no I/O, from plain facts: whether a worktree is an orphan
//! ([`judge`]), what becomes of its branch ([`branch_fate`]), which run files are stale
//! ([`stale_run_files`]). Table-tested; the cleanup ([`super::clean_up`]) reads the facts
//! and applies the decisions.

use std::collections::HashSet;
use std::fmt;

use crate::domain::{Closure, Stage, ThreadKey};

/// A run, as the cleanup sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFact {
    pub id: String,
    /// The name of its worktree's directory under `.codebutler/branches/`.
    pub worktree: String,
    /// Its branch without `codebutler/` (empty for runs recorded before branches were).
    pub branch: String,
    pub thread: ThreadKey,
    /// Its thread's stage; `None` when the thread is not stored (a run `runnerctl` started).
    pub stage: Option<Stage>,
    /// Queued or running.
    pub live: bool,
}

impl RunFact {
    fn uses(&self, slug: &str) -> bool {
        !slug.is_empty() && (self.worktree == slug || self.branch == slug)
    }

    /// Whether what the run uses must stay: the run is live, or its thread is not closed.
    fn holds(&self) -> bool {
        self.live || !self.stage.is_some_and(Stage::is_closed)
    }
}

/// Why a worktree is an orphan.
#[derive(Clone, Debug, PartialEq)]
pub enum Orphaned {
    /// Every run that used it belongs to a closed thread (`thread`: the latest run's).
    Closed { thread: ThreadKey, closure: Closure },
    /// No thread's run uses it.
    Unknown,
}

impl fmt::Display for Orphaned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed { thread, closure } => write!(
                f,
                "thread {thread} is {}",
                Stage::Closed(*closure).lifecycle()
            ),
            Self::Unknown => f.write_str("no thread's run uses it"),
        }
    }
}

/// Whether the worktree `slug` is an orphan, and why, given every run (oldest first).
pub fn judge(slug: &str, runs: &[RunFact]) -> Option<Orphaned> {
    let mut latest = None;
    for run in runs.iter().filter(|r| r.uses(slug)) {
        if run.holds() {
            return None;
        }
        latest = Some(run);
    }
    let Some(run) = latest else {
        return Some(Orphaned::Unknown);
    };
    match run.stage {
        Some(Stage::Closed(closure)) => Some(Orphaned::Closed {
            thread: run.thread.clone(),
            closure,
        }),
        _ => None,
    }
}

/// What git says of an orphan's branch `codebutler/<slug>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BranchFacts {
    /// The repository has the branch.
    pub in_repo: bool,
    /// Commits on the thread's own branch that were never pushed (past its base and what its
    /// last push recorded); `None` without a readable thread repository.
    pub unpushed: Option<usize>,
    /// The repository's branch is the thread's branch or behind it: nothing of its own.
    pub repo_within_thread: bool,
    /// The repository's branch holds commits that no other ref there reaches.
    pub repo_own_commits: bool,
}

/// What becomes of an orphan's branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchFate {
    /// There is none.
    NoBranch,
    /// Deleted with the worktree: nothing on it would be lost.
    Delete,
    /// Kept, holding the thread's `n` unpushed commits (copied there before the worktree
    /// goes).
    KeepUnpushed(usize),
    /// Kept: the repository's branch has commits of its own.
    KeepOwnCommits,
    /// The thread's unpushed commits cannot be copied to the repository without overwriting
    /// commits its branch has of its own: the worktree stays, for a person to sort out.
    Conflict,
}

/// What becomes of an orphan's branch, from what git says of it.
pub fn branch_fate(facts: BranchFacts) -> BranchFate {
    match facts.unpushed {
        Some(n) if n > 0 && facts.in_repo && !facts.repo_within_thread => BranchFate::Conflict,
        Some(n) if n > 0 => BranchFate::KeepUnpushed(n),
        _ if !facts.in_repo => BranchFate::NoBranch,
        Some(_) if facts.repo_within_thread => BranchFate::Delete,
        Some(_) => BranchFate::KeepOwnCommits,
        None if facts.repo_own_commits => BranchFate::KeepOwnCommits,
        None => BranchFate::Delete,
    }
}

/// The names in `.codebutler/run/` that are stale, given every run, the worktrees that stay
/// and the admin socket's name: the admin socket (the cleanup holds the lock, so no daemon
/// serves it), a runner log `run-<id>.log` whose run is unknown or neither live nor of an
/// open thread, and a preparation's `init-<slug>.json`/`.log` whose worktree does not stay.
/// The lock and other names stay.
pub fn stale_run_files(
    names: &[String],
    runs: &[RunFact],
    worktrees_kept: &HashSet<String>,
    admin_socket: &str,
) -> Vec<String> {
    let stale = |name: &str| {
        if name == admin_socket {
            return true;
        }
        if let Some(id) = name
            .strip_prefix("run-")
            .and_then(|n| n.strip_suffix(".log"))
        {
            return !runs.iter().any(|r| r.id == id && r.holds());
        }
        let init = name
            .strip_prefix("init-")
            .and_then(|n| n.strip_suffix(".json").or_else(|| n.strip_suffix(".log")));
        init.is_some_and(|slug| !worktrees_kept.contains(slug))
    };
    names.iter().filter(|n| stale(n)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    fn run(id: &str, slug: &str, thread: &str, stage: Option<Stage>, live: bool) -> RunFact {
        RunFact {
            id: id.into(),
            worktree: slug.into(),
            branch: slug.into(),
            thread: key(thread),
            stage,
            live,
        }
    }

    #[test]
    fn what_is_an_orphan() {
        let merged = Some(Stage::Closed(Closure::Merged));
        let abandoned = Some(Stage::Closed(Closure::Abandoned));
        let closed = |thread: &str, closure| {
            Some(Orphaned::Closed {
                thread: key(thread),
                closure,
            })
        };
        let runs = vec![
            run("1", "open", "1.1", Some(Stage::PrOpened), false),
            run("2", "merged", "2.1", merged, false),
            run("3", "merged", "2.1", merged, false),
            run("4", "live", "4.1", merged, true),
            run("5", "cli", "runnerctl-1", None, false),
            // A slug used again by a new thread after the first one's worktree went.
            run("6", "reused", "6.1", abandoned, false),
            run("7", "reused", "7.1", Some(Stage::Approved), false),
            run("8", "twice", "8.1", merged, false),
            run("9", "twice", "9.1", abandoned, false),
            RunFact {
                branch: "renamed".into(),
                ..run("10", "dir-of-10", "10.1", Some(Stage::Conversing), false)
            },
        ];
        let cases: Vec<(&str, Option<Orphaned>)> = vec![
            ("open", None),
            ("merged", closed("2.1", Closure::Merged)),
            ("live", None),
            ("cli", None),
            ("reused", None),
            ("twice", closed("9.1", Closure::Abandoned)),
            ("renamed", None),
            ("dir-of-10", None),
            ("stray", Some(Orphaned::Unknown)),
            ("", Some(Orphaned::Unknown)),
        ];
        for (slug, expected) in cases {
            assert_eq!(judge(slug, &runs), expected, "{slug}");
        }
        // Runs recorded without a branch name none.
        let old = vec![RunFact {
            branch: String::new(),
            ..run("1", "w", "1.1", Some(Stage::Approved), false)
        }];
        assert_eq!(judge("x", &old), Some(Orphaned::Unknown));
    }

    #[test]
    fn what_becomes_of_an_orphans_branch() {
        let facts = |in_repo, unpushed, within, own| BranchFacts {
            in_repo,
            unpushed,
            repo_within_thread: within,
            repo_own_commits: own,
        };
        use BranchFate::*;
        let cases = vec![
            // With the thread's own repository: its unpushed commits decide.
            (facts(true, Some(2), true, true), KeepUnpushed(2)),
            (facts(false, Some(1), false, false), KeepUnpushed(1)),
            (facts(true, Some(1), false, true), Conflict),
            (facts(true, Some(0), true, false), Delete),
            // Pushed (the remote-tracking ref in the repository may be gone): still deleted.
            (facts(true, Some(0), true, true), Delete),
            (facts(true, Some(0), false, true), KeepOwnCommits),
            (facts(false, Some(0), false, false), NoBranch),
            // Without one (a stray directory, a worktree of an earlier version): the
            // repository's branch decides.
            (facts(true, None, false, true), KeepOwnCommits),
            (facts(true, None, false, false), Delete),
            (facts(false, None, false, false), NoBranch),
        ];
        for (facts, expected) in cases {
            assert_eq!(branch_fate(facts), expected, "{facts:?}");
        }
    }

    #[test]
    fn which_run_files_are_stale() {
        let runs = vec![
            run("11", "open", "1.1", Some(Stage::PrOpened), false),
            run(
                "12",
                "gone",
                "2.1",
                Some(Stage::Closed(Closure::Merged)),
                false,
            ),
            run(
                "13",
                "gone",
                "2.1",
                Some(Stage::Closed(Closure::Merged)),
                true,
            ),
            run("14", "cli", "runnerctl-1", None, false),
        ];
        let kept: HashSet<String> = ["open".to_owned()].into();
        let names: Vec<String> = [
            "daemon.lock",
            "admin.sock",
            "run-11.log",
            "run-12.log",
            "run-13.log",
            "run-14.log",
            "run-99.log",
            "init-open.json",
            "init-open.log",
            "init-gone.json",
            "init-gone.log",
            "notes.txt",
            "run-12.txt",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(
            stale_run_files(&names, &runs, &kept, "admin.sock"),
            [
                "admin.sock",
                "run-12.log",
                "run-99.log",
                "init-gone.json",
                "init-gone.log"
            ]
        );
    }
}
