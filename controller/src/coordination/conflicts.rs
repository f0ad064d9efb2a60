//! Real textual conflicts between two commits, found with git2's in-memory merge
//! (`merge_trees` from their merge base) on the main repository, where every thread's
//! branch is mirrored after each commit ([`crate::workspace::thread_repo::mirror`]). No
//! worktree is read or written, no index or ref changes, and libgit2 runs no hooks, no
//! configured merge driver or filter: nothing a runner wrote is executed. Blocking (git2):
//! call from `spawn_blocking`.

use std::path::Path;

use git2::{Oid, Repository};

use crate::workspace::step_error::{GitStepError, git};

/// Why two commits could not be merged in memory: the git2 step that failed.
pub type ConflictError = GitStepError;

/// The commit `refs/heads/<branch>` of the repository at `repo` points at, if it exists.
pub fn branch_head(repo: &Path, branch: &str) -> Result<Option<Oid>, ConflictError> {
    let repo = Repository::open(repo).map_err(git(format!("open {}", repo.display())))?;
    match repo.refname_to_id(&format!("refs/heads/{branch}")) {
        Ok(id) => Ok(Some(id)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(git(format!("read {branch}"))(e)),
    }
}

/// The default branch's name, for messages, as the daemon last fetched it: `origin/HEAD`'s
/// branch, else `origin/main` or `origin/master` (as `origin/<name>`); without an `origin`
/// the local HEAD's branch. `None` when none is known.
pub fn default_branch_name(repo: &Path) -> Option<String> {
    let repo = Repository::open(repo).ok()?;
    if repo.find_remote("origin").is_ok() {
        let origin_head = repo
            .find_reference("refs/remotes/origin/HEAD")
            .ok()
            .and_then(|r| {
                r.symbolic_target_bytes()
                    .map(|t| String::from_utf8_lossy(t).into_owned())
            });
        let candidates = origin_head
            .into_iter()
            .chain(["refs/remotes/origin/main", "refs/remotes/origin/master"].map(str::to_owned));
        for name in candidates {
            if repo.find_reference(&name).is_ok() {
                return name.strip_prefix("refs/remotes/").map(str::to_owned);
            }
        }
    }
    let head = repo.head().ok()?;
    head.shorthand().ok().map(str::to_owned)
}

/// The files that would conflict if `ours` and `theirs` were merged (sorted); empty when
/// they merge cleanly or share no history.
pub fn conflicting_files(
    repo: &Path,
    ours: Oid,
    theirs: Oid,
) -> Result<Vec<String>, ConflictError> {
    let repo = Repository::open(repo).map_err(git(format!("open {}", repo.display())))?;
    let base = match repo.merge_base(ours, theirs) {
        Ok(base) => base,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(git("find the merge base")(e)),
    };
    let tree = |id: Oid, what: &str| {
        repo.find_commit(id)
            .and_then(|c| c.tree())
            .map_err(git(format!("read {what}")))
    };
    let (base, ours, theirs) = (
        tree(base, "the merge base")?,
        tree(ours, "the first branch")?,
        tree(theirs, "the second branch")?,
    );
    let index = repo
        .merge_trees(&base, &ours, &theirs, None)
        .map_err(git("merge in memory"))?;
    if !index.has_conflicts() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for conflict in index.conflicts().map_err(git("read the conflicts"))? {
        let conflict = conflict.map_err(git("read a conflict"))?;
        let entry = conflict.our.or(conflict.their).or(conflict.ancestor);
        if let Some(entry) = entry {
            files.push(String::from_utf8_lossy(&entry.path).into_owned());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::Signature;

    /// A repository with `main` holding `files`, and a helper committing on a branch.
    struct Fixture {
        dir: tempfile::TempDir,
        repo: Repository,
    }

    impl Fixture {
        fn new(files: &[(&str, &str)]) -> (Self, Oid) {
            let dir = tempfile::tempdir().unwrap();
            let repo = Repository::init(dir.path()).unwrap();
            let f = Self { dir, repo };
            let base = f.commit(None, files);
            (f, base)
        }

        fn commit(&self, parent: Option<Oid>, files: &[(&str, &str)]) -> Oid {
            let mut builder = match parent {
                Some(p) => {
                    let tree = self.repo.find_commit(p).unwrap().tree().unwrap();
                    self.repo.treebuilder(Some(&tree)).unwrap()
                }
                None => self.repo.treebuilder(None).unwrap(),
            };
            for (path, text) in files {
                let blob = self.repo.blob(text.as_bytes()).unwrap();
                builder.insert(path, blob, 0o100644).unwrap();
            }
            let tree = self.repo.find_tree(builder.write().unwrap()).unwrap();
            let sig = Signature::now("t", "t@t").unwrap();
            let parents: Vec<git2::Commit> = parent
                .map(|p| self.repo.find_commit(p).unwrap())
                .into_iter()
                .collect();
            let refs: Vec<&git2::Commit> = parents.iter().collect();
            self.repo
                .commit(None, &sig, &sig, "c", &tree, &refs)
                .unwrap()
        }

        fn branch(&self, name: &str, at: Oid) {
            self.repo
                .reference(&format!("refs/heads/{name}"), at, true, "t")
                .unwrap();
        }
    }

    #[test]
    fn the_same_lines_changed_twice_conflict_and_other_lines_do_not() {
        let (f, base) = Fixture::new(&[("login.go", "a\nb\nc\n"), ("other.go", "x\n")]);
        let one = f.commit(Some(base), &[("login.go", "a\nONE\nc\n")]);
        let two = f.commit(
            Some(base),
            &[("login.go", "a\nTWO\nc\n"), ("other.go", "y\n")],
        );
        let elsewhere = f.commit(Some(base), &[("other.go", "x\n"), ("new.go", "n\n")]);
        let path = f.dir.path();
        assert_eq!(conflicting_files(path, one, two).unwrap(), ["login.go"]);
        assert_eq!(conflicting_files(path, two, one).unwrap(), ["login.go"]);
        assert!(conflicting_files(path, one, elsewhere).unwrap().is_empty());
        // Nothing was written: no index, no refs, no files.
        assert!(f.repo.index().unwrap().is_empty());
        assert!(!path.join("login.go").exists());
    }

    #[test]
    fn branches_are_read_by_name_and_unrelated_history_does_not_conflict() {
        let (f, base) = Fixture::new(&[("a.txt", "1\n")]);
        f.branch("codebutler/a", base);
        // No origin, a HEAD on an unborn `main`… then on `codebutler/a`.
        f.repo.set_head("refs/heads/codebutler/a").unwrap();
        assert_eq!(
            default_branch_name(f.dir.path()).as_deref(),
            Some("codebutler/a")
        );
        f.repo.remote("origin", "/nowhere").unwrap();
        f.repo
            .reference("refs/remotes/origin/master", base, true, "t")
            .unwrap();
        assert_eq!(
            default_branch_name(f.dir.path()).as_deref(),
            Some("origin/master")
        );
        assert_eq!(
            branch_head(f.dir.path(), "codebutler/a").unwrap(),
            Some(base)
        );
        assert_eq!(branch_head(f.dir.path(), "codebutler/none").unwrap(), None);
        let orphan = f.commit(None, &[("a.txt", "2\n")]);
        assert!(
            conflicting_files(f.dir.path(), base, orphan)
                .unwrap()
                .is_empty()
        );
    }
}
