//! The repository files that say how a worktree is prepared and how its tests run — the
//! Python declarations (`pyproject.toml`, `requirements*.txt`, `setup.cfg`, `tox.ini`, the
//! Poetry and uv locks), `package.json`, `Cargo.toml`, `go.mod`, the `Makefile`, the CI
//! workflows and a sample of the Python test files — read from the worktree's base commit.
//!
//! Read as the commit holds them, never from the worktree's files: the worktree is the
//! runner's to write, and anything in a repository may be a link someone committed
//! (`pyproject.toml` pointing at `~/.codebutler/config.json`). So only regular blobs are
//! read (a link, a submodule or a path through one is not there), each within a size cap,
//! and the walk looking for test files stops after a bounded number of entries. What is
//! read is plain data ([`ProjectFiles`]) the pure plans of [`super::platform`],
//! [`super::python_deps`] and [`super::test_command`] decide from.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use git2::{ObjectType, Oid, Repository, Tree};

use super::thread_repo;

/// Most bytes read of a declaration file.
const MAX_FILE_BYTES: usize = 1 << 20;
/// Most bytes read of a lock file (`uv.lock`, `poetry.lock`).
const MAX_LOCK_BYTES: usize = 8 << 20;
/// Most bytes read of one Python test file.
const MAX_TEST_FILE_BYTES: usize = 256 << 10;
/// Most Python test files read.
const MAX_TEST_FILES: usize = 40;
/// Most CI workflow files read.
const MAX_WORKFLOWS: usize = 20;
/// Most tree entries the walk for test files looks at.
const MAX_WALKED: usize = 5000;
/// Directories the walk for test files never enters: dependencies and build outputs.
const SKIPPED_DIRS: [&str; 11] = [
    ".git",
    "node_modules",
    "vendor",
    ".venv",
    "venv",
    "target",
    "dist",
    "build",
    "site-packages",
    "third_party",
    ".tox",
];
/// Top-level files read when they are regular files.
const TOP_LEVEL_FILES: [&str; 14] = [
    "pyproject.toml",
    "Pipfile",
    "setup.cfg",
    "tox.ini",
    "pytest.ini",
    "poetry.lock",
    "uv.lock",
    "package.json",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "Cargo.toml",
    "go.mod",
    "conftest.py",
];
/// Where GitHub looks for workflows.
pub const WORKFLOWS_DIR: &str = ".github/workflows";

/// What of a commit's files the preparation and the test command are decided from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectFiles {
    /// The names of the top-level entries, whatever they are.
    names: BTreeSet<String>,
    /// The files read, by `/`-separated path.
    texts: BTreeMap<String, String>,
    /// The Python test files the walk found (read or not), by path.
    python_tests: BTreeSet<String>,
}

/// Why a commit's files could not be read.
#[derive(Debug, thiserror::Error)]
#[error("read the project's files at {commit}: {source}")]
pub struct ProjectFilesError {
    commit: String,
    source: git2::Error,
}

impl ProjectFiles {
    /// Files as given (path, text), for tests and callers that have them already; the
    /// top-level names and the Python test files follow from the paths.
    pub fn from_files(files: &[(&str, &str)]) -> Self {
        let mut project = Self::default();
        for (path, text) in files {
            if let Some(top) = path.split('/').next() {
                project.names.insert(top.to_owned());
            }
            if is_python_test(path) {
                project.python_tests.insert((*path).to_owned());
            }
            project.texts.insert((*path).to_owned(), (*text).to_owned());
        }
        project
    }

    /// Whether the commit has a top-level entry `name`.
    pub fn has(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// The top-level entries' names.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// The text of the file at `path`, if it was read (a regular file within its cap).
    pub fn text(&self, path: &str) -> Option<&str> {
        self.texts.get(path).map(String::as_str)
    }

    /// The files read directly in the directory `dir` (`""` for the top level), by path.
    pub fn files_in<'a>(&'a self, dir: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.texts.iter().filter_map(move |(path, text)| {
            let rest = if dir.is_empty() {
                path.as_str()
            } else {
                path.strip_prefix(dir)?.strip_prefix('/')?
            };
            (!rest.contains('/')).then_some((path.as_str(), text.as_str()))
        })
    }

    /// The Python test files found (`test_*.py`, `*_test.py`, `conftest.py`), with their
    /// text when it was read.
    pub fn python_tests(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.python_tests
            .iter()
            .map(|path| (path.as_str(), self.text(path)))
    }
}

/// Whether a path names a Python test file (or pytest's `conftest.py`).
fn is_python_test(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "conftest.py"
        || (name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py")))
}

/// Whether a top-level name is a requirements file (`requirements.txt`,
/// `requirements-dev.txt`, `dev-requirements.txt`, `requirements_test.txt` …).
pub fn is_requirements_file(name: &str) -> bool {
    name.ends_with(".txt") && name.contains("requirements")
}

/// The project files of the worktree at `worktree` as its base commit holds them (the
/// commit its branch started from, `refs/codebutler/base` of its own repository).
/// Blocking.
pub fn read_base(worktree: &Path) -> Result<ProjectFiles, ProjectFilesError> {
    let repo = thread_repo::open(worktree).map_err(|e| ProjectFilesError {
        commit: thread_repo::BASE_REF.to_owned(),
        source: git2::Error::from_str(&e.to_string()),
    })?;
    let base = repo
        .refname_to_id(thread_repo::BASE_REF)
        .map_err(|source| ProjectFilesError {
            commit: thread_repo::BASE_REF.to_owned(),
            source,
        })?;
    read_commit(&repo, base)
}

/// The project files as `commit` holds them. Blocking.
pub fn read_commit(repo: &Repository, commit: Oid) -> Result<ProjectFiles, ProjectFilesError> {
    let error = |source| ProjectFilesError {
        commit: commit.to_string(),
        source,
    };
    let root = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(error)?;
    let mut project = ProjectFiles::default();
    let mut reader = Reader {
        repo,
        project: &mut project,
    };
    reader.top_level(&root).map_err(error)?;
    for dir in ["requirements", WORKFLOWS_DIR] {
        if let Some(tree) = subtree(repo, &root, dir).map_err(error)? {
            reader.directory(dir, &tree).map_err(error)?;
        }
    }
    reader.python_tests(&root).map_err(error)?;
    Ok(project)
}

/// The tree at `path` under `root`, reached through trees only (a link on the way is not a
/// directory).
fn subtree<'r>(
    repo: &'r Repository,
    root: &Tree<'r>,
    path: &str,
) -> Result<Option<Tree<'r>>, git2::Error> {
    let mut tree = root.clone();
    for name in path.split('/') {
        let id = match tree.get_name(name) {
            Some(entry) if entry.kind() == Some(ObjectType::Tree) => entry.id(),
            _ => return Ok(None),
        };
        tree = repo.find_tree(id)?;
    }
    Ok(Some(tree))
}

struct Reader<'a, 'r> {
    repo: &'r Repository,
    project: &'a mut ProjectFiles,
}

impl Reader<'_, '_> {
    /// The top-level names, and the top-level files the plans read.
    fn top_level(&mut self, root: &Tree<'_>) -> Result<(), git2::Error> {
        for entry in root.iter() {
            let Ok(name) = entry.name() else { continue };
            self.project.names.insert(name.to_owned());
            let wanted = TOP_LEVEL_FILES.contains(&name) || is_requirements_file(name);
            if wanted {
                let max = if name.ends_with(".lock") {
                    MAX_LOCK_BYTES
                } else {
                    MAX_FILE_BYTES
                };
                self.read(name, entry.filemode(), entry.id(), max)?;
            }
        }
        Ok(())
    }

    /// The files directly in `dir` the plans read: requirements files, workflows.
    fn directory(&mut self, dir: &str, tree: &Tree<'_>) -> Result<(), git2::Error> {
        let mut read = 0;
        for entry in tree.iter() {
            let Ok(name) = entry.name() else { continue };
            let wanted = if dir == WORKFLOWS_DIR {
                name.ends_with(".yml") || name.ends_with(".yaml")
            } else {
                name.ends_with(".txt")
            };
            if wanted && read < MAX_WORKFLOWS {
                let path = format!("{dir}/{name}");
                if self.read(&path, entry.filemode(), entry.id(), MAX_FILE_BYTES)? {
                    read += 1;
                }
            }
        }
        Ok(())
    }

    /// A breadth-first walk of at most [`MAX_WALKED`] entries for Python test files,
    /// reading the first [`MAX_TEST_FILES`] of them.
    fn python_tests(&mut self, root: &Tree<'_>) -> Result<(), git2::Error> {
        let mut queue: VecDeque<(String, Oid)> = VecDeque::new();
        queue.push_back((String::new(), root.id()));
        let mut walked = 0;
        let mut read = 0;
        while let Some((dir, id)) = queue.pop_front() {
            let tree = self.repo.find_tree(id)?;
            for entry in tree.iter() {
                walked += 1;
                if walked > MAX_WALKED {
                    return Ok(());
                }
                let Ok(name) = entry.name() else { continue };
                let path = if dir.is_empty() {
                    name.to_owned()
                } else {
                    format!("{dir}/{name}")
                };
                match entry.kind() {
                    Some(ObjectType::Tree) if !SKIPPED_DIRS.contains(&name) => {
                        queue.push_back((path, entry.id()));
                    }
                    Some(ObjectType::Blob)
                        if is_python_test(&path) && is_regular(entry.filemode()) =>
                    {
                        self.project.python_tests.insert(path.clone());
                        if read < MAX_TEST_FILES
                            && self.read(
                                &path,
                                entry.filemode(),
                                entry.id(),
                                MAX_TEST_FILE_BYTES,
                            )?
                        {
                            read += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Reads the blob `id` at `path` when it is a regular file of at most `max` bytes;
    /// returns whether it was read.
    fn read(&mut self, path: &str, mode: i32, id: Oid, max: usize) -> Result<bool, git2::Error> {
        if !is_regular(mode) || self.project.texts.contains_key(path) {
            return Ok(false);
        }
        // The size from the object's header, before the blob is loaded.
        let (size, _) = self.repo.odb()?.read_header(id)?;
        if size > max {
            tracing::info!("{path} is {size} bytes, more than the {max} read; not read");
            return Ok(false);
        }
        let blob = self.repo.find_blob(id)?;
        let text = String::from_utf8_lossy(blob.content()).into_owned();
        self.project.texts.insert(path.to_owned(), text);
        Ok(true)
    }
}

/// A regular file's mode (not a link `120000`, a submodule `160000` or a tree).
fn is_regular(mode: i32) -> bool {
    matches!(mode, 0o100_644 | 0o100_755)
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_test_support::git;

    #[test]
    fn only_regular_committed_files_within_their_caps_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.toml"), "token = 'SECRET'").unwrap();
        git::write_files(
            dir.path(),
            &[
                ("requirements-dev.txt", "pytest\n"),
                ("requirements/test.txt", "hypothesis\n"),
                ("requirements/notes.md", "not read\n"),
                (".github/workflows/ci.yml", "jobs: {}\n"),
                ("tests/test_app.py", "import pytest\n"),
                ("src/pkg/conftest.py", "\n"),
                ("node_modules/x/test_vendored.py", "import pytest\n"),
                ("Makefile", "test:\n\tpytest\n"),
            ],
        );
        std::fs::write(dir.path().join("uv.lock"), vec![b'#'; MAX_LOCK_BYTES + 1]).unwrap();
        // A committed link that would read a host file if followed.
        std::os::unix::fs::symlink(
            outside.path().join("secret.toml"),
            dir.path().join("pyproject.toml"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("tox")).unwrap();
        let repo = git::init(dir.path());
        let head = git::commit_all(&repo, "Project");
        // The working copy changes after the commit: only the commit counts.
        std::fs::write(dir.path().join("Makefile"), "test:\n\tnot-this\n").unwrap();

        let files = read_commit(&repo, head).unwrap();
        assert!(files.has("pyproject.toml"), "the name is there");
        assert_eq!(files.text("pyproject.toml"), None, "a link is never read");
        assert_eq!(files.text("uv.lock"), None, "over its cap");
        assert_eq!(files.text("Makefile"), Some("test:\n\tpytest\n"));
        assert_eq!(files.text("requirements-dev.txt"), Some("pytest\n"));
        assert_eq!(files.text("requirements/test.txt"), Some("hypothesis\n"));
        assert_eq!(files.text("requirements/notes.md"), None);
        assert_eq!(
            files.files_in(WORKFLOWS_DIR).collect::<Vec<_>>(),
            [(".github/workflows/ci.yml", "jobs: {}\n")]
        );
        assert_eq!(
            files.python_tests().collect::<Vec<_>>(),
            [
                ("src/pkg/conftest.py", Some("\n")),
                ("tests/test_app.py", Some("import pytest\n"))
            ],
            "dependencies are not walked"
        );
        assert!(
            !files.texts.values().any(|t| t.contains("SECRET")),
            "{files:?}"
        );
    }

    #[test]
    fn files_given_by_path_make_the_same_view() {
        let files = ProjectFiles::from_files(&[
            ("pyproject.toml", "[project]"),
            ("tests/test_a.py", "def test_a(): pass"),
        ]);
        assert!(files.has("tests"));
        assert_eq!(files.files_in("").count(), 1);
        assert_eq!(files.files_in("tests").count(), 1);
        assert_eq!(files.python_tests().count(), 1);
    }
}
