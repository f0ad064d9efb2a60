//! Build by-products: what tools and the Coder's own checks leave in a worktree
//! (`__pycache__/`, `*.egg-info/`, `.pytest_cache/`, coverage data, `node_modules/`…) and no
//! commit of the Coder's should carry.
//!
//! They are named in the thread repository's `info/exclude` ([`write_exclude`]): git's own
//! ignore file of one repository, read after the repository's `.gitignore` files (which
//! still win) and never part of the person's repository or its files. So the commit's
//! snapshot, "undo" and the Coder's own `git status` all leave them alone, and a file the
//! repository tracks is never left out by them (git's rule: ignore patterns do not apply to
//! tracked files). A commit names the by-products it left out ([`is_reported`]), and the
//! Coder can commit one on purpose by naming it in GitCommit's `include`.

use std::io;
use std::path::Path;

use super::platform::CACHE_DIR;
use codebutler_sandbox::spec::ATTACHMENTS_DIR;

/// One ignore pattern: a name (with at most one `*`), for directories only or any entry,
/// anywhere in the tree or only at its top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub name: &'static str,
    pub dir: bool,
    pub top_only: bool,
}

const fn dir(name: &'static str) -> Pattern {
    Pattern {
        name,
        dir: true,
        top_only: false,
    }
}

const fn file(name: &'static str) -> Pattern {
    Pattern {
        name,
        dir: false,
        top_only: false,
    }
}

const fn top_dir(name: &'static str) -> Pattern {
    Pattern {
        name,
        dir: true,
        top_only: true,
    }
}

/// The by-products no commit carries: Python's bytecode, packaging metadata, test, type
/// checker and linter caches, virtual environments and `tox`/`nox` runs; coverage data of
/// Python and JavaScript tools; Node's installed packages; and the worktree's own caches
/// (the preparation's [`CACHE_DIR`] and `.target`, which also ignore themselves).
pub const PATTERNS: &[Pattern] = &[
    dir("__pycache__"),
    file("*.pyc"),
    dir("*.egg-info"),
    dir(".eggs"),
    dir(".pytest_cache"),
    dir(".mypy_cache"),
    dir(".ruff_cache"),
    dir(".hypothesis"),
    dir(".tox"),
    dir(".nox"),
    dir(".venv"),
    file(".coverage"),
    file(".coverage.*"),
    dir("coverage"),
    dir("htmlcov"),
    dir(".nyc_output"),
    dir("node_modules"),
    top_dir(CACHE_DIR),
    top_dir(".target"),
    top_dir(ATTACHMENTS_DIR),
];

/// The worktree's own directories, made by the preparation and documented as never
/// committed: a commit does not name them among what it left out.
const OWN_DIRS: &[&str] = &[CACHE_DIR, ".venv", ".target", ATTACHMENTS_DIR];

/// The text of the thread repository's `info/exclude`: a comment, then [`PATTERNS`] in
/// git's syntax.
pub fn exclude_text() -> String {
    let mut text = String::from(
        "# Written by CodeButler: build by-products no commit of the Coder's carries.\n\
         # Files the repository tracks are never ignored by these lines; GitCommit's\n\
         # `include` commits an ignored path on purpose.\n",
    );
    for pattern in PATTERNS {
        let root = if pattern.top_only { "/" } else { "" };
        let slash = if pattern.dir { "/" } else { "" };
        text.push_str(&format!("{root}{}{slash}\n", pattern.name));
    }
    text
}

/// Writes [`exclude_text`] as the `info/exclude` of the git directory `git_dir` (a thread
/// repository's `.git`, which the controller made and the runner only reads). Blocking.
pub fn write_exclude(git_dir: &Path) -> io::Result<()> {
    let info = git_dir.join("info");
    std::fs::create_dir_all(&info)?;
    std::fs::write(info.join("exclude"), exclude_text())
}

/// Whether an entry git ignores (`path`: worktree-relative, without a trailing `/`; a
/// directory stands for everything in it) is a by-product a commit names among what it
/// left out: its name matches one of [`PATTERNS`], and it is not one of the worktree's own
/// directories.
pub fn is_reported(path: &str) -> bool {
    if OWN_DIRS.contains(&path) {
        return false;
    }
    let top = !path.contains('/');
    let name = path.rsplit('/').next().unwrap_or(path);
    PATTERNS
        .iter()
        .any(|p| (top || !p.top_only) && glob_match(p.name, name))
}

/// Whether `name` matches `pattern`, a name with at most one `*` (any run of characters).
fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exclude_file_names_every_pattern_in_gits_syntax() {
        let text = exclude_text();
        for line in [
            "__pycache__/",
            "*.pyc",
            "*.egg-info/",
            ".pytest_cache/",
            ".coverage",
            ".coverage.*",
            "coverage/",
            "htmlcov/",
            "node_modules/",
            ".tox/",
            ".venv/",
            "/.codebutler-cache/",
            "/.target/",
            "/.codebutler-attachments/",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert!(text.lines().all(|l| l.starts_with('#') || !l.contains(' ')));
    }

    #[test]
    fn git_ignores_what_the_patterns_name_but_never_a_tracked_file() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        write_exclude(repo.path()).unwrap();
        // A file the repository tracks under a by-product's name.
        std::fs::create_dir_all(dir.path().join("coverage")).unwrap();
        std::fs::write(dir.path().join("coverage/badge.svg"), "<svg/>").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("coverage/badge.svg")).unwrap();
        index.write().unwrap();
        for (path, ignored) in [
            ("widgets.egg-info/PKG-INFO", true),
            ("pkg/__pycache__/m.cpython-311.pyc", true),
            ("m.pyc", true),
            ("node_modules/is-number/index.js", true),
            (".pytest_cache/v/cache/lastfailed", true),
            (".coverage", true),
            (".coverage.host.1234", true),
            ("htmlcov/index.html", true),
            ("sub/.venv/bin/python", true),
            (".codebutler-cache/npm/x", true),
            ("sub/.codebutler-cache/x", false),
            (".codebutler-attachments/api.log", true),
            ("src/egg-info.md", false),
            ("src/coverage.rs", false),
            ("package-lock.json", false),
            ("build/out.js", false),
        ] {
            assert_eq!(
                repo.status_should_ignore(Path::new(path)).unwrap(),
                ignored,
                "{path}"
            );
        }
        let status = repo.status_file(Path::new("coverage/badge.svg")).unwrap();
        assert!(
            !status.contains(git2::Status::IGNORED),
            "a tracked file is never ignored: {status:?}"
        );
    }

    #[test]
    fn reported_are_by_products_but_not_the_worktrees_own_directories() {
        for path in [
            "widgets.egg-info",
            "src/widgets.egg-info",
            "widgets/__pycache__",
            "node_modules",
            "web/node_modules",
            ".coverage",
            ".coverage.x.1",
            "coverage",
            "m.pyc",
            ".pytest_cache",
        ] {
            assert!(is_reported(path), "{path}");
        }
        for path in [
            ".codebutler-cache",
            ".venv",
            ".target",
            ".codebutler-attachments",
            "dist",
            "build",
            "secrets.txt",
            "sub/.target",
        ] {
            assert!(!is_reported(path), "{path}");
        }
    }
}
