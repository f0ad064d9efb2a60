//! Path safety: [`RepoRoot`] turns a path sent by a model into a path inside the
//! repository, or refuses it. Absolute paths, `..` that leaves the root, symlinks that
//! point outside, and the private `.git` and `.codebutler` directories are all refused.
//! [`PathStyle`] says how a tool's model names files: relative to the repository (the PM)
//! or also absolute inside the worktree (the Coder, through [`worktree_relative`]).

use std::path::{Component, Path, PathBuf};

use crate::tool::ToolError;

/// Directory names no tool may read: git's internals and the daemon's own state.
const PRIVATE_DIRS: [(&str, &str); 2] = [
    (
        ".git",
        "the .git directory is not readable; use GitLog and GitDiff",
    ),
    (
        ".codebutler",
        "the .codebutler directory is private to the daemon",
    ),
];

/// Why a path component names a private directory, if it does (case-insensitively, for
/// case-insensitive file systems).
pub(crate) fn private_dir_reason(component: &str) -> Option<&'static str> {
    PRIVATE_DIRS
        .iter()
        .find(|(name, _)| component.eq_ignore_ascii_case(name))
        .map(|(_, reason)| *reason)
}

/// The canonicalized root of a repository; every path a tool touches is resolved through it.
#[derive(Debug, Clone)]
pub struct RepoRoot {
    root: PathBuf,
}

impl RepoRoot {
    /// Canonicalizes `root` (which must exist) and keeps it as the confinement boundary.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    /// The canonical root path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks `rel` lexically and returns its normalized form relative to the root, with
    /// `/` separators (`""` for the root itself). The path need not exist; symlinks are
    /// not followed. Used where a path names something in git history rather than on disk.
    pub fn normalize(&self, rel: &str) -> Result<String, ToolError> {
        let refuse = |reason: &str| ToolError::PathRefused {
            path: rel.to_owned(),
            reason: reason.to_owned(),
        };
        if rel.contains('\0') {
            return Err(refuse("path contains a NUL byte"));
        }
        if is_absolute_like(rel) {
            return Err(refuse(
                "absolute paths are not allowed; use a path relative to the repository root",
            ));
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in rel.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(refuse("path leaves the repository"));
                    }
                }
                other => parts.push(other),
            }
        }
        if let Some(reason) = parts.iter().find_map(|p| private_dir_reason(p)) {
            return Err(refuse(reason));
        }
        Ok(parts.join("/"))
    }

    /// Resolves `rel` (relative to the root; `""` and `"."` mean the root) to an existing
    /// canonical path inside the repository, or says why not.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        let normalized = self.normalize(rel)?;
        let joined = if normalized.is_empty() {
            self.root.clone()
        } else {
            self.root.join(&normalized)
        };
        let canonical = match joined.canonicalize() {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::NotFound(format!(
                    "no such file or directory: {rel}"
                )));
            }
            Err(e) => return Err(ToolError::Failed(format!("cannot access {rel}: {e}"))),
        };
        let Ok(inside) = canonical.strip_prefix(&self.root) else {
            return Err(ToolError::PathRefused {
                path: rel.to_owned(),
                reason: "symlink points outside the repository".to_owned(),
            });
        };
        // A symlink inside the repository may still lead into a private directory.
        for component in inside.components() {
            let Component::Normal(name) = component else {
                continue;
            };
            if let Some(reason) = private_dir_reason(&name.to_string_lossy()) {
                return Err(ToolError::PathRefused {
                    path: rel.to_owned(),
                    reason: reason.to_owned(),
                });
            }
        }
        Ok(canonical)
    }

    /// Displays `abs` relative to the root with `/` separators (`"."` for the root itself).
    /// A path outside the root is shown as it is.
    pub fn relative(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(rel) => {
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if parts.is_empty() {
                    ".".to_owned()
                } else {
                    parts.join("/")
                }
            }
            Err(_) => abs.display().to_string(),
        }
    }
}

/// Whether `rel` looks absolute on any platform: `/x`, `\x`, `~`, `C:…`.
fn is_absolute_like(rel: &str) -> bool {
    let bytes = rel.as_bytes();
    rel.starts_with('/')
        || rel.starts_with('\\')
        || rel.starts_with('~')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
        || Path::new(rel).is_absolute()
}

/// How a tool's model names files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStyle {
    /// Relative to the repository root: the PM's ReadFile, Grep and ListFiles.
    Repository,
    /// Absolute inside the worktree, or relative to its root: the Coder's Read, Grep and
    /// Glob (coding models send absolute paths). See [`worktree_relative`].
    Worktree,
}

impl PathStyle {
    /// `path` as a model of this style sent it, relative to `root` (still to be checked by
    /// [`RepoRoot`]).
    pub fn relative(self, root: &RepoRoot, path: &str) -> Result<String, ToolError> {
        match self {
            PathStyle::Repository => Ok(path.to_owned()),
            PathStyle::Worktree => worktree_relative(root, path),
        }
    }
}

/// Turns a path sent by a model into a path relative to the worktree root (still to be
/// checked by [`RepoRoot`]). Relative paths are returned as they are; an absolute path is
/// accepted only when it lies inside the root, lexically or once its longest existing
/// ancestor is resolved (the root may be reached through a symlink).
pub fn worktree_relative(root: &RepoRoot, file_path: &str) -> Result<String, ToolError> {
    if !file_path.starts_with('/') {
        return Ok(file_path.to_owned());
    }
    let refuse = |reason: String| ToolError::PathRefused {
        path: file_path.to_owned(),
        reason,
    };
    if file_path.contains('\0') {
        return Err(refuse("path contains a NUL byte".to_owned()));
    }
    let lexical = lexical_absolute(Path::new(file_path));
    if let Ok(inside) = lexical.strip_prefix(root.root()) {
        return Ok(slash_joined(inside));
    }
    for ancestor in lexical.ancestors() {
        let Ok(canonical) = ancestor.canonicalize() else {
            continue;
        };
        if let (Ok(inside), Ok(tail)) = (
            canonical.strip_prefix(root.root()),
            lexical.strip_prefix(ancestor),
        ) {
            return Ok(slash_joined(&inside.join(tail)));
        }
        break;
    }
    Err(refuse(format!(
        "path is outside the worktree {}; use a path inside it",
        root.root().display()
    )))
}

/// `path` with `.` dropped and `..` applied lexically (never above `/`).
fn lexical_absolute(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A relative path's components joined with `/`.
fn slash_joined(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Helpers shared by the tools' tests, here and in the runner's Coder tools (feature
/// `test-support`): temporary git repositories built with git2. Test code: a failure
/// panics.
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::unwrap_used)]
pub mod test_support {
    use std::path::Path;
    use std::sync::Arc;

    use super::RepoRoot;

    /// Writes `files` (creating parent directories) under `dir`.
    pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
        for (rel, content) in files {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(path, content).unwrap();
        }
    }

    /// Stages everything (respecting .gitignore) and commits it with a fixed signature at
    /// `time` (seconds since the epoch, UTC). Returns the commit id.
    pub fn commit_all(dir: &Path, message: &str, time: i64) -> git2::Oid {
        let repo = git2::Repository::open(dir).unwrap();
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        // Also record deletions of tracked files.
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree_id = index.write_tree().unwrap();
        let tree = repo.find_tree(tree_id).unwrap();
        let sig =
            git2::Signature::new("Ada Lovelace", "ada@example.com", &git2::Time::new(time, 0))
                .unwrap();
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    /// A new git repository holding `files` in one commit ("initial", 2026-01-02 UTC).
    pub fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Arc<RepoRoot>) {
        let dir = tempfile::tempdir().unwrap();
        git2::Repository::init(dir.path()).unwrap();
        write_files(dir.path(), files);
        commit_all(dir.path(), "initial", 1_767_312_000);
        let root = Arc::new(RepoRoot::new(dir.path()).unwrap());
        (dir, root)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::write_files;
    use super::*;
    use std::sync::Arc;

    fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, RepoRoot) {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path(), files);
        let root = RepoRoot::new(dir.path()).unwrap();
        (dir, root)
    }

    fn refusal(result: Result<PathBuf, ToolError>) -> String {
        match result {
            Err(ToolError::PathRefused { reason, .. }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn root_and_plain_paths_resolve_inside() {
        let (_dir, root) = root_with(&[("src/main.rs", "fn main() {}"), ("b.txt", "b")]);
        assert_eq!(root.resolve("").unwrap(), root.root());
        assert_eq!(root.resolve(".").unwrap(), root.root());
        let main = root.resolve("src/main.rs").unwrap();
        assert_eq!(main, root.root().join("src/main.rs"));
        assert_eq!(root.relative(&main), "src/main.rs");
        assert_eq!(root.relative(root.root()), ".");
        assert_eq!(root.resolve("./src//main.rs").unwrap(), main);
    }

    #[test]
    fn dotdot_inside_the_root_is_allowed() {
        let (_dir, root) = root_with(&[("a/x", "x"), ("b", "b")]);
        assert_eq!(root.resolve("a/../b").unwrap(), root.root().join("b"));
        assert_eq!(root.normalize("a/./../b").unwrap(), "b");
    }

    #[test]
    fn absolute_paths_are_refused() {
        let (_dir, root) = root_with(&[("a", "a")]);
        for p in [
            "/etc/passwd",
            "~/x",
            "~",
            "C:\\Windows",
            "c:/x",
            "\\\\server\\x",
        ] {
            let reason = refusal(root.resolve(p));
            assert!(
                reason.starts_with("absolute paths are not allowed"),
                "{p}: {reason}"
            );
        }
        let abs = root.root().join("a");
        let reason = refusal(root.resolve(&abs.to_string_lossy()));
        assert!(reason.starts_with("absolute paths"), "{reason}");
    }

    #[test]
    fn dotdot_escapes_are_refused() {
        let (_dir, root) = root_with(&[("a/x", "x")]);
        for p in ["..", "../x", "a/../../x", "a/x/../../../etc"] {
            assert_eq!(
                refusal(root.resolve(p)),
                "path leaves the repository",
                "{p}"
            );
        }
    }

    #[test]
    fn symlink_escape_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let (dir, root) = root_with(&[("a", "a")]);
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("leak")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("outdir")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("inner")).unwrap();
        assert_eq!(
            refusal(root.resolve("leak")),
            "symlink points outside the repository"
        );
        assert_eq!(
            refusal(root.resolve("outdir/secret")),
            "symlink points outside the repository"
        );
        assert_eq!(root.resolve("inner").unwrap(), root.root().join("a"));
    }

    #[test]
    fn private_directories_are_refused() {
        let (dir, root) = root_with(&[
            (".git/config", "[core]"),
            (".codebutler/config.json", "{\"token\":\"x\"}"),
            ("sub/.git/HEAD", "ref"),
            ("ok.txt", "ok"),
        ]);
        assert!(refusal(root.resolve(".git/config")).contains(".git directory"));
        assert!(refusal(root.resolve(".git")).contains(".git directory"));
        assert!(refusal(root.resolve("sub/.git/HEAD")).contains(".git directory"));
        assert_eq!(
            refusal(root.resolve(".codebutler/config.json")),
            "the .codebutler directory is private to the daemon"
        );
        assert!(refusal(root.resolve("x/../.CodeButler/config.json")).contains(".codebutler"));
        // A symlink into a private directory is refused after resolution.
        std::os::unix::fs::symlink(".codebutler", dir.path().join("cfg")).unwrap();
        assert!(refusal(root.resolve("cfg/config.json")).contains(".codebutler"));
        assert!(root.resolve("ok.txt").is_ok());
    }

    #[test]
    fn missing_paths_are_not_found() {
        let (_dir, root) = root_with(&[("a", "a")]);
        match root.resolve("nope/x.rs") {
            Err(ToolError::NotFound(msg)) => {
                assert_eq!(msg, "no such file or directory: nope/x.rs");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nul_bytes_are_refused() {
        let (_dir, root) = root_with(&[("a", "a")]);
        assert_eq!(refusal(root.resolve("a\0b")), "path contains a NUL byte");
    }

    fn root() -> (tempfile::TempDir, Arc<RepoRoot>) {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(RepoRoot::new(dir.path()).unwrap());
        (dir, root)
    }

    #[test]
    fn absolute_paths_inside_the_root_become_relative() {
        let (_dir, root) = root();
        let abs = format!("{}/src/main.rs", root.root().display());
        assert_eq!(worktree_relative(&root, &abs).unwrap(), "src/main.rs");
        let dotted = format!("{}/src/../x/./y", root.root().display());
        assert_eq!(worktree_relative(&root, &dotted).unwrap(), "x/y");
        assert_eq!(
            worktree_relative(&root, &root.root().display().to_string()).unwrap(),
            ""
        );
        assert_eq!(worktree_relative(&root, "a/b").unwrap(), "a/b");
    }

    #[test]
    fn absolute_paths_through_a_symlinked_root_are_accepted() {
        let (_dir, root) = root();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = elsewhere.path().join("wt");
        std::os::unix::fs::symlink(root.root(), &link).unwrap();
        let abs = format!("{}/new/file.txt", link.display());
        assert_eq!(worktree_relative(&root, &abs).unwrap(), "new/file.txt");
    }

    #[test]
    fn absolute_paths_outside_the_root_are_refused() {
        let (_dir, root) = root();
        let sibling = format!("{}-other/x", root.root().display());
        let escape = format!("{}/../x", root.root().display());
        for p in ["/etc/passwd", "/", sibling.as_str(), escape.as_str()] {
            match worktree_relative(&root, p) {
                Err(ToolError::PathRefused { reason, .. }) => {
                    assert!(reason.starts_with("path is outside the worktree"), "{p}")
                }
                other => panic!("{p}: {other:?}"),
            }
        }
    }
}
