//! The git fixture tests build repositories with: write files, commit them under a fixed
//! identity and clock, run the `git` command line. One copy, so every test's history is made
//! the same way.
//!
//! Commits made here are by [`NAME`] <[`EMAIL`]>, dated [`EPOCH`] or one minute after their
//! parent, whichever is later: the same files and messages give the same commit ids on every
//! run, and a branch's commits still come in order by date.

use std::path::Path;
use std::process::Command;

use git2::{IndexAddOption, Oid, Repository, Signature, Time};

/// The fixture's author and committer name.
pub const NAME: &str = "Alice";
/// The fixture's author and committer e-mail.
pub const EMAIL: &str = "alice@example.com";
/// The date of a repository's first fixture commit (2023-11-14T22:13:20Z), in Unix seconds.
pub const EPOCH: i64 = 1_700_000_000;

/// Creates a repository at `dir` (a directory that may already hold files).
pub fn init(dir: &Path) -> Repository {
    Repository::init(dir).unwrap_or_else(|e| panic!("git init {}: {e}", dir.display()))
}

/// Writes each `(path, text)` under `root`, creating the parent directories.
pub fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

/// Stages everything in the work tree that `.gitignore` does not exclude (new, changed and
/// deleted files; symlinks as symlinks) and commits it on the current branch; returns the
/// new commit.
pub fn commit_all(repo: &Repository, message: &str) -> Oid {
    commit_paths(repo, &["*"], message)
}

/// Stages `pathspecs` (files or directories, as `git add -A` takes them: libgit2's
/// `add_all` also drops the entries of deleted files) and commits the index on the current branch, on top of its last commit if it
/// has one; returns the new commit.
pub fn commit_paths(repo: &Repository, pathspecs: &[&str], message: &str) -> Oid {
    let mut index = repo.index().unwrap();
    index
        .add_all(pathspecs, IndexAddOption::DEFAULT, None)
        .unwrap_or_else(|e| panic!("stage {pathspecs:?}: {e}"));
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let seconds = parent
        .as_ref()
        .map_or(EPOCH, |p| (p.time().seconds() + 60).max(EPOCH));
    let signature = Signature::new(NAME, EMAIL, &Time::new(seconds, 0)).unwrap();
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parents,
    )
    .unwrap_or_else(|e| panic!("commit {message:?}: {e}"))
}

/// Writes `files` into the work tree of the repository at `dir`, stages them and commits on
/// its current branch; returns the new commit.
pub fn commit_files(dir: &Path, files: &[(&str, &str)], message: &str) -> Oid {
    let repo = Repository::open(dir).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    let root = repo.workdir().unwrap().to_owned();
    write_files(&root, files);
    let paths: Vec<&str> = files.iter().map(|(path, _)| *path).collect();
    commit_paths(&repo, &paths, message)
}

/// Runs the `git` command line in `dir` as the fixture's identity; asserts it succeeded and
/// returns its standard output, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", &format!("user.name={NAME}")])
        .args(["-c", &format!("user.email={EMAIL}")])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run git: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Makes a bare repository at `origin`, adds it as the `origin` remote of the repository at
/// `dir` and pushes that repository's current branch to it (the bare repository's HEAD
/// names the branch, as a clone's would); returns the bare repository and the branch's ref
/// name.
pub fn push_to_new_origin(dir: &Path, origin: &Path) -> (Repository, String) {
    let bare = Repository::init_bare(origin)
        .unwrap_or_else(|e| panic!("git init --bare {}: {e}", origin.display()));
    let repo = Repository::open(dir).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    let branch = repo.head().unwrap().name().unwrap().to_owned();
    repo.remote("origin", origin.to_str().unwrap())
        .unwrap()
        .push(&[format!("{branch}:{branch}")], None)
        .unwrap_or_else(|e| panic!("push {branch} to {}: {e}", origin.display()));
    bare.set_head(&branch).unwrap();
    (bare, branch)
}
