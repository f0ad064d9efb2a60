//! What a worktree's preparation made, kept out of the Coder's commits.
//!
//! The preparation (`npm install`, `pip install -e .`, `build.initCommand`) runs before the
//! Coder's first step and can create or rewrite files git would commit: a lock file `npm
//! install` rewrote, packaging metadata, generated code. None of it is the Coder's work, so:
//!
//! - right after the preparation succeeded, [`record`] reads the worktree's files through
//!   the sandboxed helper and keeps them as a commit of the thread's own repository under
//!   [`PREPARED_REF`]: its parent is the branch's head at that moment, so its diff is
//!   exactly what the preparation created, changed or deleted. It lives in the thread
//!   repository (read-only to the runner, on the thread's disk), so it outlasts "continue",
//!   follow-ups, a restart of the controller and a preparation made ahead of the approval,
//!   and a rebase of the branch does not change what it says;
//! - at every commit, [`select`] leaves out each of those paths whose content is still what
//!   the preparation left (the branch keeps what it had there), unless the Coder named it in
//!   GitCommit's `include`; a path the Coder changed afterwards is committed as it is. It
//!   also names the build by-products git ignores through [`super::byproducts`], so the
//!   Coder learns what its commit left out and why.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use codebutler_sandbox::worktree_wire::{self as wire, Stat};
use git2::{Oid, Repository};

use super::byproducts;
use super::stage::{self, Helper, StageError, Staged};
use super::step_error::{GitStepError, git};
use super::thread_repo::{self, BOT_EMAIL, BOT_NAME, MAX_COMMIT_FILE_BYTES, ThreadRepoError};

/// The thread repository's record of what its worktree's preparation left: a commit whose
/// parent is the branch's head when the preparation ran.
pub const PREPARED_REF: &str = "refs/codebutler/prepared";
/// Most paths GitCommit's `include` may name.
pub const MAX_INCLUDE: usize = 100;

/// Why a preparation could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Thread(#[from] ThreadRepoError),
    #[error("read the prepared worktree's files: {0}")]
    Stage(#[from] StageError),
    #[error(transparent)]
    Git(#[from] GitStepError),
}

/// Records the files of `worktree` as its preparation left them (see the module's
/// documentation); returns how many paths the preparation created, changed or deleted.
/// Nothing is recorded when it changed none. Blocking: call it from `spawn_blocking`, with
/// no process of the run alive in the worktree.
pub fn record(helper: &Helper, worktree: &Path) -> Result<usize, RecordError> {
    let repo = thread_repo::open(worktree)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's head"))?;
    let files = stage::snapshot(helper, &repo, MAX_COMMIT_FILE_BYTES)?;
    for (path, size) in &files.skipped {
        tracing::warn!(
            "the preparation of {} left {path} ({} MB), too large to record or commit",
            worktree.display(),
            size >> 20
        );
    }
    let mut index = stage::index_of(&files.files)?;
    let tree_id = index
        .write_tree_to(&repo)
        .map_err(git("write the prepared tree"))?;
    if tree_id == head.tree_id() {
        return Ok(0);
    }
    let tree = repo
        .find_tree(tree_id)
        .map_err(git("read the prepared tree"))?;
    let signature = git2::Signature::now(BOT_NAME, BOT_EMAIL).map_err(git("make the signature"))?;
    // The command is not named: the runner reads this repository, and an operator's
    // `build.initCommand` is none of its business.
    let message = "What the worktree's preparation left\n\n\
                   Recorded by CodeButler so that the Coder's commits leave it out; never pushed.";
    let commit = repo
        .commit(None, &signature, &signature, message, &tree, &[&head])
        .map_err(git("record the preparation"))?;
    repo.reference(PREPARED_REF, commit, true, "codebutler: prepared")
        .map_err(git("record the preparation"))?;
    Ok(Prepared::read(&repo)
        .map_err(git("read the recorded preparation"))?
        .changed
        .len())
}

/// A file as a tree holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub mode: u32,
    pub id: Oid,
}

/// The paths a worktree's preparation created, changed or deleted, each with what it left
/// there (`None`: it deleted the path).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    pub changed: BTreeMap<Vec<u8>, Option<Entry>>,
}

impl Prepared {
    /// The record of the thread repository `repo`; empty when it has none (nothing was
    /// prepared, or the worktree predates the record). Blocking.
    pub fn read(repo: &Repository) -> Result<Self, git2::Error> {
        let commit = match repo.find_reference(PREPARED_REF) {
            Ok(reference) => reference.peel_to_commit()?,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e),
        };
        let before = commit.parent(0)?.tree()?;
        let after = commit.tree()?;
        let mut options = git2::DiffOptions::new();
        options.include_typechange(true);
        let diff = repo.diff_tree_to_tree(Some(&before), Some(&after), Some(&mut options))?;
        let mut changed = BTreeMap::new();
        for delta in diff.deltas() {
            let new = delta.new_file();
            let Some(path) = new.path_bytes().or_else(|| delta.old_file().path_bytes()) else {
                continue;
            };
            let left = (delta.status() != git2::Delta::Deleted).then(|| Entry {
                mode: u32::from(new.mode()),
                id: new.id(),
            });
            changed.insert(path.to_vec(), left);
        }
        Ok(Self { changed })
    }
}

/// Why a path was left out of a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// The worktree's preparation created, changed or deleted it, and it is still as the
    /// preparation left it.
    Prepared,
    /// A build by-product git ignores ([`super::byproducts`]); a directory stands for what
    /// it holds.
    Byproduct,
}

/// A path a commit left out.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LeftOut {
    pub why: Why,
    pub path: String,
}

/// What a commit takes, and what it left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// The files of the commit's tree.
    pub files: Vec<Staged>,
    /// What it left out, the preparation's paths first, each group sorted.
    pub left_out: Vec<LeftOut>,
}

/// GitCommit's `include` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IncludeError {
    #[error("GitCommit's include names {count} paths; at most {MAX_INCLUDE}")]
    TooMany { count: usize },
    #[error("GitCommit's include names {path:?}, which is not a path in the worktree ({reason})")]
    Invalid { path: String, reason: &'static str },
    #[error(
        "GitCommit's include names {path}, but there is nothing there in the worktree or on the branch"
    )]
    NothingThere { path: String },
}

/// The paths of GitCommit's `include`, worktree-relative with `/` between components (a
/// leading `./` and a trailing `/` are dropped), each checked as a path a git tree can hold.
pub fn include_paths(include: &[String]) -> Result<Vec<String>, IncludeError> {
    if include.len() > MAX_INCLUDE {
        return Err(IncludeError::TooMany {
            count: include.len(),
        });
    }
    include
        .iter()
        .map(|raw| {
            let trimmed = raw.trim();
            let path = trimmed.strip_prefix("./").unwrap_or(trimmed);
            let path = path.trim_end_matches('/');
            let invalid = |reason| IncludeError::Invalid {
                path: raw.chars().take(200).collect(),
                reason,
            };
            if path.len() > wire::MAX_PATH_BYTES {
                return Err(invalid("too long"));
            }
            wire::check_path(path.as_bytes()).map_err(invalid)?;
            Ok(path.to_owned())
        })
        .collect()
}

/// Whether `path` is `include` or lies under it.
fn under(include: &str, path: &[u8]) -> bool {
    let include = include.as_bytes();
    path == include || (path.starts_with(include) && path.get(include.len()) == Some(&b'/'))
}

/// Whether one of `include` covers `path`.
fn covered(include: &[String], path: &[u8]) -> bool {
    include.iter().any(|inc| under(inc, path))
}

/// The entry of `tree` at `path` (a file, a symlink or a submodule), if it has one there.
fn entry_at(tree: &git2::Tree<'_>, path: &[u8]) -> Option<Entry> {
    let entry = tree.get_path(Path::new(OsStr::from_bytes(path))).ok()?;
    (entry.kind() != Some(git2::ObjectType::Tree)).then(|| Entry {
        mode: entry.filemode() as u32,
        id: entry.id(),
    })
}

/// Refuses a path of `include` (checked by [`include_paths`]) under which there is nothing:
/// no file of the worktree's `files`, nothing the branch's `parent` tree holds there, and no
/// path the preparation recorded (a mistyped path is said, not silently ignored).
pub fn check_include(
    files: &[Staged],
    parent: &git2::Tree<'_>,
    prepared: &Prepared,
    include: &[String],
) -> Result<(), IncludeError> {
    for path in include {
        let there = files.iter().any(|f| under(path, &f.path))
            || prepared.changed.keys().any(|p| under(path, p))
            || parent.get_path(Path::new(path)).is_ok();
        if !there {
            return Err(IncludeError::NothingThere { path: path.clone() });
        }
    }
    Ok(())
}

/// What a commit on top of `parent` takes of the worktree's `files` (the helper's
/// snapshot, with `ignored` what git ignores there): every path the preparation recorded in
/// `prepared` that is still as it left it keeps the parent's version (or stays out, when
/// the parent has none) unless `include` (checked by [`include_paths`]) covers it; the
/// by-products among `ignored` that `include` does not cover are named as left out too.
/// Pure apart from reading `parent`.
pub fn select(
    mut files: Vec<Staged>,
    ignored: &[String],
    parent: &git2::Tree<'_>,
    prepared: &Prepared,
    include: &[String],
) -> Selection {
    let mut left_out = Vec::new();
    for (path, left) in &prepared.changed {
        if covered(include, path) {
            continue;
        }
        let at = files.iter().position(|f| &f.path == path);
        let now = at.map(|i| Entry {
            mode: files[i].mode,
            id: files[i].id,
        });
        if now != *left {
            // The Coder changed it since: committed as it is.
            continue;
        }
        let kept = entry_at(parent, path);
        if kept != now {
            left_out.push(LeftOut {
                why: Why::Prepared,
                path: wire::show(path),
            });
        }
        match (at, kept) {
            (Some(i), Some(entry)) => {
                // No stat data: git in the sandbox sees the file differ from the index.
                files[i] = Staged {
                    path: path.clone(),
                    mode: entry.mode,
                    id: entry.id,
                    stat: Stat::default(),
                };
            }
            (Some(i), None) => {
                files.remove(i);
            }
            (None, Some(entry)) => files.push(Staged {
                path: path.clone(),
                mode: entry.mode,
                id: entry.id,
                stat: Stat::default(),
            }),
            (None, None) => {}
        }
    }
    left_out.extend(
        ignored
            .iter()
            .filter(|path| byproducts::is_reported(path) && !covered(include, path.as_bytes()))
            .map(|path| LeftOut {
                why: Why::Byproduct,
                path: path.clone(),
            }),
    );
    left_out.sort();
    left_out.dedup();
    Selection { files, left_out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::forge::{Commit, ForgeError, commit_all};
    use crate::workspace::stage::test_support::ThreadFixture;
    use crate::workspace::update_branch;

    fn commit(f: &ThreadFixture, message: &str, include: &[&str]) -> Result<Commit, ForgeError> {
        let include: Vec<String> = include.iter().map(|s| s.to_string()).collect();
        commit_all(&f.helper(), f.main(), f.worktree(), message, &include)
    }

    fn left(why: Why, path: &str) -> LeftOut {
        LeftOut {
            why,
            path: path.to_owned(),
        }
    }

    /// The content of `path` on the thread's branch, if it has the file.
    fn on_branch(f: &ThreadFixture, path: &str) -> Option<String> {
        let repo = thread_repo::open(f.worktree()).unwrap();
        let tree = repo.head().unwrap().peel_to_tree().unwrap();
        let entry = tree.get_path(Path::new(path)).ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    }

    /// A worktree as `npm install` and `pip install -e .` leave it: the lock file rewritten,
    /// a file generated, one deleted, packaging metadata and installed packages.
    fn prepared_fixture() -> ThreadFixture {
        let f = ThreadFixture::new(&[
            ("package.json", "{\"name\":\"acme\"}\n"),
            ("package-lock.json", "{\"lockfileVersion\":3}\n"),
            ("old.txt", "old\n"),
            ("src/a.js", "a\n"),
        ]);
        let wt = f.worktree();
        std::fs::write(wt.join("package-lock.json"), "{\"rewritten\":true}\n").unwrap();
        std::fs::create_dir_all(wt.join("generated")).unwrap();
        std::fs::write(wt.join("generated/api.js"), "// generated\n").unwrap();
        std::fs::remove_file(wt.join("old.txt")).unwrap();
        std::fs::create_dir_all(wt.join("widgets.egg-info")).unwrap();
        std::fs::write(wt.join("widgets.egg-info/PKG-INFO"), "Name: widgets\n").unwrap();
        std::fs::create_dir_all(wt.join("node_modules/is-number")).unwrap();
        std::fs::write(wt.join("node_modules/is-number/index.js"), "x\n").unwrap();
        let changed = record(&f.helper(), wt).unwrap();
        assert_eq!(
            changed, 3,
            "the lock file, the generated file, the deletion"
        );
        f
    }

    #[test]
    fn what_the_preparation_left_stays_out_until_the_coder_changes_it() {
        let f = prepared_fixture();
        let wt = f.worktree();
        // The Coder's work, and what its checks leave.
        std::fs::write(wt.join("src/b.js"), "b\n").unwrap();
        std::fs::create_dir_all(wt.join("src/__pycache__")).unwrap();
        std::fs::write(wt.join("src/__pycache__/m.cpython-311.pyc"), "pyc").unwrap();
        let first = commit(&f, "Add b", &[]).unwrap();
        assert_eq!(first.files_changed, ["src/b.js"]);
        assert_eq!(
            first.left_out,
            [
                left(Why::Prepared, "generated/api.js"),
                left(Why::Prepared, "old.txt"),
                left(Why::Prepared, "package-lock.json"),
                left(Why::Byproduct, "node_modules"),
                left(Why::Byproduct, "src/__pycache__"),
                left(Why::Byproduct, "widgets.egg-info"),
            ]
        );
        assert_eq!(
            on_branch(&f, "package-lock.json").as_deref(),
            Some("{\"lockfileVersion\":3}\n")
        );
        assert_eq!(on_branch(&f, "old.txt").as_deref(), Some("old\n"));
        assert_eq!(on_branch(&f, "generated/api.js"), None);
        // The Coder's git sees what was left out as uncommitted, as it is.
        let status = f.git_status();
        for line in [" M package-lock.json", " D old.txt", "?? generated/"] {
            assert!(status.lines().any(|l| l == line), "{line}: {status}");
        }
        // Nothing the preparation left counts as uncommitted work for "rebase".
        assert!(update_branch::is_clean(&f.helper(), wt, "codebutler/t").unwrap());

        // A file the Coder changed afterwards is its work: committed as it is.
        std::fs::write(wt.join("package-lock.json"), "{\"coder\":true}\n").unwrap();
        let second = commit(&f, "Update the lock", &[]).unwrap();
        assert_eq!(second.files_changed, ["package-lock.json"]);
        assert_eq!(
            on_branch(&f, "package-lock.json").as_deref(),
            Some("{\"coder\":true}\n")
        );
        assert!(
            !second
                .left_out
                .iter()
                .any(|l| l.path == "package-lock.json")
        );
        // Nothing new: nothing committed, and it still says what it left out.
        let third = commit(&f, "Again", &[]).unwrap();
        assert!(third.nothing_to_commit);
        assert!(third.left_out.contains(&left(Why::Prepared, "old.txt")));
    }

    #[test]
    fn include_commits_a_left_out_path_on_purpose_and_refuses_a_path_with_nothing() {
        let f = prepared_fixture();
        let made = commit(
            &f,
            "Keep them",
            &["generated/", "./widgets.egg-info", "old.txt"],
        )
        .unwrap();
        assert_eq!(
            made.files_changed,
            ["generated/api.js", "old.txt", "widgets.egg-info/PKG-INFO"]
        );
        assert_eq!(on_branch(&f, "old.txt"), None, "the deletion is committed");
        assert_eq!(
            on_branch(&f, "widgets.egg-info/PKG-INFO").as_deref(),
            Some("Name: widgets\n")
        );
        assert_eq!(
            made.left_out,
            [
                left(Why::Prepared, "package-lock.json"),
                left(Why::Byproduct, "node_modules"),
            ]
        );
        let long = "a/".repeat(3000);
        for (bad, why) in [
            ("no/such/file", "nothing there"),
            ("../outside", "not a path in the worktree"),
            (".git/config", "not a path in the worktree"),
            ("/etc/passwd", "not a path in the worktree"),
            (long.as_str(), "too long"),
        ] {
            let e = commit(&f, "Bad", &[bad]).unwrap_err();
            assert!(matches!(e, ForgeError::Include(_)), "{bad}: {e}");
            assert!(e.is_precondition());
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_worktree_without_a_record_commits_as_before() {
        let f = ThreadFixture::new(&[("a.txt", "a\n")]);
        std::fs::write(f.worktree().join("a.txt"), "b\n").unwrap();
        let repo = thread_repo::open(f.worktree()).unwrap();
        assert_eq!(Prepared::read(&repo).unwrap(), Prepared::default());
        let made = commit(&f, "Change a", &[]).unwrap();
        assert_eq!(made.files_changed, ["a.txt"]);
        assert!(made.left_out.is_empty());
        // A preparation that changed nothing records nothing.
        assert_eq!(record(&f.helper(), f.worktree()).unwrap(), 0);
        assert!(repo.find_reference(PREPARED_REF).is_err());
    }
}
