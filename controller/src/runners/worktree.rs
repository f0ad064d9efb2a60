//! Worktrees for runs: `<repo>/.codebutler/branches/<slug>` on branch `codebutler/<slug>`,
//! made with git2 (libgit2 runs no hooks) from the repository's current HEAD.

use std::path::{Path, PathBuf};

/// A created worktree.
#[derive(Clone, Debug, PartialEq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
}

/// Why a worktree could not be made.
#[derive(Debug, thiserror::Error)]
#[error("create worktree for {slug}: {message}")]
pub struct WorktreeError {
    slug: String,
    message: String,
}

/// A branch-friendly slug of a plan's first line: lower-case words joined by `-`, at most
/// 40 characters, never empty.
pub fn slug(plan: &str) -> String {
    let line = plan
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let mut slug = String::new();
    for word in line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        "task".to_owned()
    } else {
        slug
    }
}

/// Creates a worktree for `plan` in the repository at `repo`, with a slug unique among
/// existing branches and worktrees. Blocking (git2): call it from `spawn_blocking`.
pub fn create(repo: &Path, plan: &str) -> Result<Worktree, WorktreeError> {
    let base = slug(plan);
    let err = |message: String| WorktreeError {
        slug: base.clone(),
        message,
    };
    let repository = git2::Repository::open(repo).map_err(|e| err(e.message().to_owned()))?;
    let head = repository
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(|e| {
            err(format!(
                "the repository has no commit to start from ({})",
                e.message()
            ))
        })?;
    let branches = repo.join(".codebutler").join("branches");
    std::fs::create_dir_all(&branches)
        .map_err(|e| err(format!("create {}: {e}", branches.display())))?;
    let mut slug = base.clone();
    let mut n = 1;
    loop {
        let branch = format!("codebutler/{slug}");
        let taken = repository
            .find_branch(&branch, git2::BranchType::Local)
            .is_ok()
            || branches.join(&slug).exists()
            || repository.find_worktree(&slug).is_ok();
        if !taken {
            break;
        }
        n += 1;
        slug = format!("{base}-{n}");
    }
    let branch_name = format!("codebutler/{slug}");
    let branch = repository
        .branch(&branch_name, &head, false)
        .map_err(|e| err(e.message().to_owned()))?;
    let path = branches.join(&slug);
    let reference = branch.into_reference();
    let mut options = git2::WorktreeAddOptions::new();
    options.reference(Some(&reference));
    repository
        .worktree(&slug, &path, Some(&options))
        .map_err(|e| err(e.message().to_owned()))?;
    Ok(Worktree {
        path,
        branch: branch_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(
            slug("Fix the session expiry!\nmore"),
            "fix-the-session-expiry"
        );
        assert_eq!(slug("   \n../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("ünïcode only"), "n-code-only");
        assert_eq!(slug(""), "task");
        assert!(slug(&"word ".repeat(40)).len() <= 40);
    }

    #[test]
    fn creates_unique_worktrees_on_their_own_branches() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("a.txt")).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .unwrap();

        let first = create(dir.path(), "Add a feature").unwrap();
        assert_eq!(first.branch, "codebutler/add-a-feature");
        assert!(first.path.join("a.txt").is_file());
        assert!(
            first.path.join(".git").is_file(),
            "a linked worktree has a .git file"
        );
        let second = create(dir.path(), "Add a feature").unwrap();
        assert_eq!(second.branch, "codebutler/add-a-feature-2");
        assert_ne!(first.path, second.path);
    }
}
