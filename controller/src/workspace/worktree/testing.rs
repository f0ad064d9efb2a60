//! Git fixtures for the worktree tests.

use std::path::{Path, PathBuf};

/// A repository at `dir/repo` with one commit of `files`.
pub fn repo_with(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let path = dir.join("repo");
    let repo = git2::Repository::init(&path).unwrap();
    commit_files(&repo, files, "init");
    path
}

pub fn commit_files(repo: &git2::Repository, files: &[(&str, &str)], message: &str) -> git2::Oid {
    let root = repo.workdir().unwrap().to_owned();
    let mut index = repo.index().unwrap();
    for (name, text) in files {
        std::fs::write(root.join(name), text).unwrap();
        index.add_path(Path::new(name)).unwrap();
    }
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let parents: Vec<git2::Commit<'_>> = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .into_iter()
        .collect();
    let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
}
