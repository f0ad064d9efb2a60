//! What is under `.codebutler/` for the cleanup to judge: the worktrees (directories,
//! disks, `codebutler/` branches, git's linked worktrees of earlier versions) and the run
//! directory's stale files, removed without following a link. Blocking (git2, the file
//! system).

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use super::{Cleanup, Removal, RunFact, stale_run_files};
use crate::workspace::thread_repo::BRANCH_PREFIX;
use crate::workspace::worktree::{branches_dir, disks_dir};

/// The worktrees found: names under `.codebutler/branches/`, disks under
/// `.codebutler/disks/`, `codebutler/` branches and git's linked worktrees under
/// `.codebutler/branches/` (made by earlier versions).
pub(super) struct Listing {
    pub(super) slugs: BTreeSet<String>,
    /// Sources that could not be read: what they hold stays for the next cleanup.
    pub(super) failures: Vec<String>,
}

/// Lists the worktrees of the repository at `repo`. Blocking.
pub(super) fn list(repo: &Path) -> Listing {
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
pub(super) fn linked_worktree(
    repository: &git2::Repository,
    branches: &Path,
    name: &str,
) -> Option<git2::Worktree> {
    let tree = repository.find_worktree(name).ok()?;
    tree.path().starts_with(branches).then_some(tree)
}

/// Removes the stale files of the run directory `run_dir` (see [`stale_run_files`]; `admin`:
/// the admin socket's name). Blocking.
pub(super) fn remove_stale_run_files(
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
