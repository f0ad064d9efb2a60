//! The diff a pull request shows, for the reviewer model: its head commit against the point
//! where it left the default branch (`base...head`, as GitHub shows a pull request), read
//! with git2 from the main repository's objects — the commits the controller pushed — never
//! from a worktree's files. With the text comes where a line comment may go: the lines of
//! each file's new side that the diff shows (added or context lines, three lines of context
//! as GitHub's diff has), since GitHub refuses a comment on any other line (HTTP 422).
//! Blocking (git2): call from `spawn_blocking`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use git2::{DiffFormat, DiffOptions, Oid, Repository};

use super::step_error::{GitStepError, git};
use crate::repo_files;

/// Lines of context around each change, as GitHub's pull request diff has.
pub const CONTEXT_LINES: u32 = 3;

/// A pull request's diff, bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrDiff {
    /// The commit the head left the default branch at.
    pub base: String,
    /// The head commit.
    pub head: String,
    /// The unified diff, cut at the bound with a line saying how much was left out.
    pub text: String,
    /// Per file (its path on the head side), the head-side lines the diff shows: the lines a
    /// line comment may be put on.
    pub commentable: BTreeMap<String, BTreeSet<u32>>,
}

impl PrDiff {
    /// Whether a line comment on `path` at head-side `line` is on a line the diff shows.
    pub fn shows(&self, path: &str, line: u32) -> bool {
        self.commentable
            .get(path)
            .is_some_and(|lines| lines.contains(&line))
    }
}

/// Why a pull request's diff could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PrDiffError {
    #[error("the head commit {0} is not in this repository")]
    NoHead(String),
    #[error("the default branch's commit could not be found")]
    NoDefaultBranch,
    #[error(transparent)]
    Git(#[from] GitStepError),
}

/// The diff of `head` (a commit id) in the main repository `main`, against its merge base
/// with the default branch ([`repo_files::default_branch_tip`]); the text is cut after
/// `max_chars` characters.
pub fn read(main: &Path, head: &str, max_chars: usize) -> Result<PrDiff, PrDiffError> {
    let repo = Repository::open(main).map_err(git("open the repository"))?;
    let head_id = Oid::from_str(head).map_err(|_| PrDiffError::NoHead(head.to_owned()))?;
    let head_commit = repo
        .find_commit(head_id)
        .map_err(|_| PrDiffError::NoHead(head.to_owned()))?;
    let tip = repo_files::default_branch_tip(main)
        .and_then(|t| Oid::from_str(&t).ok())
        .ok_or(PrDiffError::NoDefaultBranch)?;
    let base = repo
        .merge_base(tip, head_id)
        .map_err(git("find where the branch left the default branch"))?;
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(git("read the base's tree"))?;
    let head_tree = head_commit.tree().map_err(git("read the head's tree"))?;
    let mut options = DiffOptions::new();
    options.context_lines(CONTEXT_LINES);
    let diff = repo
        .diff_tree_to_tree(Some(&base_tree), Some(&head_tree), Some(&mut options))
        .map_err(git("diff the pull request"))?;
    let mut text = String::new();
    let mut cut = 0usize;
    let mut commentable: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    diff.print(DiffFormat::Patch, |delta, _hunk, line| {
        if let (Some(path), Some(number), ' ' | '+') =
            (delta.new_file().path(), line.new_lineno(), line.origin())
        {
            commentable
                .entry(path.to_string_lossy().into_owned())
                .or_default()
                .insert(number);
        }
        let content = String::from_utf8_lossy(line.content());
        let piece = match line.origin() {
            origin @ (' ' | '+' | '-') => format!("{origin}{content}"),
            _ => content.into_owned(),
        };
        let room = max_chars.saturating_sub(text.chars().count());
        if cut == 0 && piece.chars().count() <= room {
            text.push_str(&piece);
        } else {
            cut += piece.chars().count();
        }
        true
    })
    .map_err(git("print the diff"))?;
    if cut > 0 {
        text.push_str(&format!("\n[… {cut} more characters of the diff cut]\n"));
    }
    Ok(PrDiff {
        base: base.to_string(),
        head: head.to_owned(),
        text,
        commentable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_test_support::git::git;

    /// A repository whose `main` has `a.txt` of twenty lines, and a branch changing line 10
    /// and adding `b.txt`; the branch's head.
    fn repo_with_branch(dir: &Path) -> String {
        git(dir, &["init", "-q", "-b", "main"]);
        let lines: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        std::fs::write(dir.join("a.txt"), &lines).unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-q", "-m", "start"]);
        git(dir, &["checkout", "-q", "-b", "codebutler/x"]);
        std::fs::write(dir.join("a.txt"), lines.replace("line 10\n", "line ten\n")).unwrap();
        std::fs::write(dir.join("b.txt"), "new\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-q", "-m", "change"]);
        let head = git(dir, &["rev-parse", "HEAD"]);
        git(dir, &["checkout", "-q", "main"]);
        head.trim().to_owned()
    }

    #[test]
    fn the_diff_shows_the_changed_lines_with_three_lines_of_context() {
        let dir = tempfile::tempdir().unwrap();
        let head = repo_with_branch(dir.path());
        let diff = read(dir.path(), &head, 100_000).unwrap();
        assert!(diff.text.contains("-line 10\n+line ten\n"), "{}", diff.text);
        assert!(diff.text.contains("+new\n"), "{}", diff.text);
        assert_eq!(
            diff.commentable["a.txt"]
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            (7..=13).collect::<Vec<_>>()
        );
        assert!(diff.shows("b.txt", 1));
        assert!(!diff.shows("a.txt", 1));
        assert!(!diff.shows("c.txt", 1));

        let short = read(dir.path(), &head, 40).unwrap();
        assert!(
            short.text.contains("more characters of the diff cut]"),
            "{}",
            short.text
        );
        assert_eq!(short.commentable, diff.commentable);

        let missing = "0123456789012345678901234567890123456789";
        assert!(matches!(
            read(dir.path(), missing, 100),
            Err(PrDiffError::NoHead(_))
        ));
    }
}
