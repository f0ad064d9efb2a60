//! Orphan cleanup: what threads that are gone left under `.codebutler/`, removed when the
//! daemon starts (before threads resume) and by `codebutler --cleanup-orphans`.
//!
//! An **orphan** is a worktree — its directory `.codebutler/branches/<slug>`, its disk
//! `.codebutler/disks/<slug>.img`, its branch `codebutler/<slug>` in the repository — that no
//! thread's run uses, or whose every run belongs to a closed thread. A worktree that a run of
//! an open thread uses, or that a queued or running run uses, is never touched; nothing
//! outside `.codebutler/` is. An orphan goes the way [`worktree::remove`] takes a worktree
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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::Path;

use crate::domain::{Closure, Stage, ThreadKey};
use crate::layout::Layout;
use crate::store::{Store, StoreError};
use crate::workspace::thread_repo::{self, BASE_REF, BRANCH_PREFIX};
use crate::workspace::worktree::{self, Worktree, branches_dir, disks_dir};

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
            cleanup.failures.push(e);
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
    let admin = crate::admin::server::socket_path(layout);
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
        Err(e) => cleanup.failures.push(e),
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

/// The worktrees found: names under `.codebutler/branches/`, disks under
/// `.codebutler/disks/`, `codebutler/` branches and git's linked worktrees under
/// `.codebutler/branches/` (made by earlier versions).
struct Listing {
    slugs: BTreeSet<String>,
    /// Sources that could not be read: what they hold stays for the next cleanup.
    failures: Vec<String>,
}

/// Lists the worktrees of the repository at `repo`. Blocking.
fn list(repo: &Path) -> Listing {
    let mut listing = Listing {
        slugs: BTreeSet::new(),
        failures: Vec::new(),
    };
    let branches = branches_dir(repo);
    for (dir, suffix) in [(branches.clone(), ""), (disks_dir(repo), ".img")] {
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    match entry {
                        Ok(entry) => {
                            let name = entry.file_name().to_string_lossy().into_owned();
                            if let Some(slug) = name.strip_suffix(suffix)
                                && !slug.is_empty()
                            {
                                listing.slugs.insert(slug.to_owned());
                            }
                        }
                        Err(e) => listing
                            .failures
                            .push(format!("list {}: {e}", dir.display())),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => listing
                .failures
                .push(format!("list {}: {e}", dir.display())),
        }
    }
    let repository = match git2::Repository::open(repo) {
        Ok(r) => r,
        Err(e) => {
            listing
                .failures
                .push(format!("open {}: {}", repo.display(), e.message()));
            return listing;
        }
    };
    match repository.branches(Some(git2::BranchType::Local)) {
        Ok(found) => {
            for (branch, _) in found.flatten() {
                if let Ok(Some(name)) = branch.name()
                    && let Some(slug) = name.strip_prefix(BRANCH_PREFIX)
                {
                    listing.slugs.insert(slug.to_owned());
                }
            }
        }
        Err(e) => listing
            .failures
            .push(format!("list the branches: {}", e.message())),
    }
    match repository.worktrees() {
        Ok(names) => {
            for name in names.iter().flatten().flatten() {
                if linked_worktree(&repository, &branches, name).is_some() {
                    listing.slugs.insert(name.to_owned());
                }
            }
        }
        Err(e) => listing
            .failures
            .push(format!("list the linked worktrees: {}", e.message())),
    }
    listing
}

/// The linked worktree `name` of `repository` if its directory is under `branches` (a
/// person's own linked worktrees elsewhere are not ours).
fn linked_worktree(
    repository: &git2::Repository,
    branches: &Path,
    name: &str,
) -> Option<git2::Worktree> {
    let tree = repository.find_worktree(name).ok()?;
    tree.path().starts_with(branches).then_some(tree)
}

/// What removing one orphan came to.
enum Outcome {
    Removed(Removal),
    /// Left on purpose, with why.
    Left(String),
    /// Nothing to remove (a branch kept, with no worktree).
    Nothing,
}

/// Removes the orphan `slug`: settles its branch (copying unpushed commits to the
/// repository first), then removes the worktree, keeping the branch if it must stay.
async fn remove_orphan(repo: &Path, slug: &str, why: Orphaned) -> Result<Outcome, String> {
    let tree = Worktree {
        path: branches_dir(repo).join(slug),
        branch: format!("{BRANCH_PREFIX}{slug}"),
    };
    let (dir, settling) = (repo.to_owned(), tree.clone());
    let (fate, existed) = blocking(move || settle(&dir, &settling)).await?;
    if fate == BranchFate::Conflict {
        return Ok(Outcome::Left(format!(
            "left worktree .codebutler/branches/{slug} ({why}): its branch {} has commits it \
             never pushed, and the repository's {} has commits of its own; merge them by hand, \
             then run the cleanup again",
            tree.branch, tree.branch
        )));
    }
    let deletes_branch = fate == BranchFate::Delete;
    if !existed && !deletes_branch {
        return Ok(Outcome::Nothing);
    }
    let removed = if deletes_branch {
        worktree::remove(repo, &tree).await
    } else {
        worktree::remove_keeping_branch(repo, &tree).await
    };
    removed.map_err(|e| e.to_string())?;
    let slug = slug.to_owned();
    Ok(Outcome::Removed(if existed {
        Removal::Worktree {
            slug,
            why,
            branch: fate,
        }
    } else {
        Removal::Branch { slug, why }
    }))
}

/// Reads what git says of the orphan's branch and decides its fate; copies the thread's
/// unpushed commits to the repository when the branch is kept for them, and drops git's
/// record of a linked worktree there. Returns the fate and whether the worktree (its
/// directory or disk) exists. Blocking.
fn settle(repo: &Path, tree: &Worktree) -> Result<(BranchFate, bool), String> {
    let main = git2::Repository::open(repo)
        .map_err(|e| format!("open {}: {}", repo.display(), e.message()))?;
    let repo_tip = main
        .find_branch(&tree.branch, git2::BranchType::Local)
        .ok()
        .and_then(|b| b.get().target());
    let entry = std::fs::symlink_metadata(&tree.path).ok();
    let image = worktree::disks_dir(repo).join(format!(
        "{}.img",
        tree.path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let existed = entry.is_some() || image.is_file();
    // A thread repository is read only where the worktree is a real directory.
    let thread = entry
        .as_ref()
        .filter(|m| m.is_dir())
        .and_then(|_| thread_repo::open(&tree.path).ok());
    let mut facts = BranchFacts {
        in_repo: repo_tip.is_some(),
        repo_own_commits: has_own_commits(&main, &tree.branch),
        ..BranchFacts::default()
    };
    if let Some(thread) = &thread
        && let Ok(head) = thread.refname_to_id(&format!("refs/heads/{}", tree.branch))
    {
        facts.unpushed = Some(unpushed(thread, &tree.branch, head)?);
        facts.repo_within_thread = repo_tip.is_some_and(|tip| {
            tip == head || thread.graph_descendant_of(head, tip).unwrap_or(false)
        });
    }
    let fate = branch_fate(facts);
    if let (BranchFate::KeepUnpushed(_), Some(thread)) = (fate, &thread) {
        thread_repo::mirror(repo, thread, &tree.branch)
            .map_err(|e| format!("copy {} to the repository: {e}", tree.branch))?;
    }
    if let Some(entry) = &entry
        && !entry.is_dir()
    {
        // Not a worktree but something in its place: removed itself, never followed.
        std::fs::remove_file(&tree.path)
            .map_err(|e| format!("remove {}: {e}", tree.path.display()))?;
    }
    if fate != BranchFate::Conflict
        && let Some(name) = tree.path.file_name().map(|n| n.to_string_lossy())
        && let Some(linked) = linked_worktree(&main, &branches_dir(repo), &name)
    {
        let mut options = git2::WorktreePruneOptions::new();
        options.valid(true).locked(true).working_tree(false);
        linked
            .prune(Some(&mut options))
            .map_err(|e| format!("forget the linked worktree {name}: {}", e.message()))?;
    }
    Ok((fate, existed))
}

/// The commits on `branch` (at `head`) of the thread repository `thread` that are neither
/// in its base nor recorded as pushed.
fn unpushed(thread: &git2::Repository, branch: &str, head: git2::Oid) -> Result<usize, String> {
    let err = |e: git2::Error| format!("walk {branch}: {}", e.message());
    let mut walk = thread.revwalk().map_err(err)?;
    walk.push(head).map_err(err)?;
    for name in [BASE_REF.to_owned(), format!("refs/remotes/origin/{branch}")] {
        if let Ok(id) = thread.refname_to_id(&name) {
            walk.hide(id).map_err(err)?;
        }
    }
    let mut count = 0;
    for id in walk {
        id.map_err(err)?;
        count += 1;
    }
    Ok(count)
}

/// Whether the local branch `name` holds a commit no other branch or remote ref reaches
/// (work that deleting it would lose). False when there is no such branch; true when git
/// cannot tell.
fn has_own_commits(repository: &git2::Repository, name: &str) -> bool {
    let Ok(branch) = repository.find_branch(name, git2::BranchType::Local) else {
        return false;
    };
    let Some(tip) = branch.get().target() else {
        return false;
    };
    let full = format!("refs/heads/{name}");
    let Ok(mut walk) = repository.revwalk() else {
        return true;
    };
    if walk.push(tip).is_err() {
        return true;
    }
    let Ok(references) = repository.references() else {
        return true;
    };
    for reference in references.flatten() {
        if reference.name().ok() == Some(full.as_str()) {
            continue;
        }
        // Refs to trees or blobs (checkpoints) hold no commits.
        if let Ok(commit) = reference.peel_to_commit()
            && walk.hide(commit.id()).is_err()
        {
            return true;
        }
    }
    walk.next().is_some()
}

/// Removes the stale files of the run directory `run_dir` (see [`stale_run_files`]; `admin`:
/// the admin socket's name). Blocking.
fn remove_stale_run_files(
    run_dir: &Path,
    admin: &str,
    runs: &[RunFact],
    kept: &HashSet<String>,
) -> Cleanup {
    let mut cleanup = Cleanup::default();
    let names: Vec<String> = match std::fs::read_dir(run_dir) {
        Ok(entries) => entries
            .filter_map(|e| match e {
                Ok(e) => Some(e.file_name().to_string_lossy().into_owned()),
                Err(e) => {
                    cleanup
                        .failures
                        .push(format!("list {}: {e}", run_dir.display()));
                    None
                }
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return cleanup,
        Err(e) => {
            cleanup
                .failures
                .push(format!("list {}: {e}", run_dir.display()));
            return cleanup;
        }
    };
    for name in stale_run_files(&names, runs, kept, admin) {
        let path = run_dir.join(&name);
        // remove_file unlinks a symlink or socket itself, never what it points to.
        match std::fs::remove_file(&path) {
            Ok(()) => cleanup.removed.push(Removal::RunFile { name }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => cleanup
                .failures
                .push(format!("remove {}: {e}", path.display())),
        }
    }
    cleanup
}

/// Runs blocking git or file work off the runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("blocking task: {e}"))?
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
