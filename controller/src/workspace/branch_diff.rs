//! What a thread's branch changed since it started: its diff from the thread's base commit
//! to the branch head, read with git2 from the thread's own repository (never from the
//! worktree's files, which the runner wrote). Blocking (git2): call from `spawn_blocking`.

use std::path::Path;

use git2::{Diff, DiffOptions, Repository};

use super::step_error::{GitStepError, git};
use super::thread_repo::{self, ThreadRepoError};

/// One line the branch added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedLine {
    /// Repository-relative path.
    pub path: String,
    /// 1-based line number in the branch's version of the file.
    pub line: u32,
    /// The line, without its end of line.
    pub text: String,
}

/// Lines added and removed in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

/// Why a branch's diff could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error(transparent)]
    Thread(#[from] ThreadRepoError),
    #[error(transparent)]
    Git(#[from] GitStepError),
}

/// The lines the branch `branch` of the worktree `worktree`'s thread repository added since
/// the thread's base, in diff order (binary files left out).
pub fn added_lines(worktree: &Path, branch: &str) -> Result<Vec<AddedLine>, DiffError> {
    let repo = thread_repo::open(worktree)?;
    let diff = branch_diff(&repo, branch)?;
    let mut lines = Vec::new();
    diff.foreach(
        &mut |_, _| true,
        None,
        None,
        Some(&mut |delta, _hunk, line| {
            if line.origin() == '+'
                && let (Some(path), Some(number)) = (
                    delta.new_file().path().and_then(|p| p.to_str()),
                    line.new_lineno(),
                )
            {
                let text = String::from_utf8_lossy(line.content());
                lines.push(AddedLine {
                    path: path.to_owned(),
                    line: number,
                    text: text.trim_end_matches(['\n', '\r']).to_owned(),
                });
            }
            true
        }),
    )
    .map_err(git("read the branch's diff"))?;
    Ok(lines)
}

/// The files the branch changed since the thread's base, with their line counts, sorted
/// by path.
pub fn file_changes(worktree: &Path, branch: &str) -> Result<Vec<FileChange>, DiffError> {
    let repo = thread_repo::open(worktree)?;
    let diff = branch_diff(&repo, branch)?;
    let mut files = Vec::new();
    for index in 0..diff.deltas().len() {
        let Some(delta) = diff.get_delta(index) else {
            continue;
        };
        let path = delta
            .new_file()
            .path()
            .or_else(|| delta.old_file().path())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (added, removed) = match git2::Patch::from_diff(&diff, index)
            .map_err(git("count a file's changed lines"))?
        {
            Some(patch) => {
                let (_, added, removed) = patch
                    .line_stats()
                    .map_err(git("count a file's changed lines"))?;
                (added, removed)
            }
            None => (0, 0),
        };
        files.push(FileChange {
            path,
            added,
            removed,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The diff from the thread's base to `branch`'s head.
fn branch_diff<'r>(repo: &'r Repository, branch: &str) -> Result<Diff<'r>, DiffError> {
    let base = thread_repo::base_of(repo)?;
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(git("read the thread's base"))?;
    let head_tree = repo
        .find_reference(&format!("refs/heads/{branch}"))
        .and_then(|r| r.peel_to_commit())
        .and_then(|c| c.tree())
        .map_err(git("read the branch's head"))?;
    let mut options = DiffOptions::new();
    options.context_lines(0);
    Ok(repo
        .diff_tree_to_tree(Some(&base_tree), Some(&head_tree), Some(&mut options))
        .map_err(git("diff the branch against its base"))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::stage::test_support::{ThreadFixture, commit_worktree};

    #[test]
    fn the_branch_diff_is_read_from_the_thread_repository() {
        let f = ThreadFixture::new(&[("src/a.rs", "fn a() {}\n"), ("old.txt", "x\ny\n")]);
        std::fs::write(
            f.worktree().join("src/a.rs"),
            "fn a() {}\n// TODO: errors\nfn b() {}\n",
        )
        .unwrap();
        std::fs::remove_file(f.worktree().join("old.txt")).unwrap();
        commit_worktree(&f, "change");
        // Uncommitted work is not the branch's.
        std::fs::write(f.worktree().join("new.rs"), "// FIXME later\n").unwrap();

        let added = added_lines(f.worktree(), &f.tree.branch).unwrap();
        assert_eq!(
            added,
            vec![
                AddedLine {
                    path: "src/a.rs".into(),
                    line: 2,
                    text: "// TODO: errors".into()
                },
                AddedLine {
                    path: "src/a.rs".into(),
                    line: 3,
                    text: "fn b() {}".into()
                },
            ]
        );
        assert_eq!(
            file_changes(f.worktree(), &f.tree.branch).unwrap(),
            vec![
                FileChange {
                    path: "old.txt".into(),
                    added: 0,
                    removed: 2
                },
                FileChange {
                    path: "src/a.rs".into(),
                    added: 2,
                    removed: 0
                },
            ]
        );
    }

    #[test]
    fn an_unknown_branch_is_an_error() {
        let f = ThreadFixture::new(&[("a", "a\n")]);
        let err = added_lines(f.worktree(), "codebutler/none").unwrap_err();
        assert!(err.to_string().contains("branch's head"), "{err}");
    }
}
