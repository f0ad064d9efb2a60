//! The file walk shared by Grep and ListFiles: ripgrep's rules (`.gitignore`, `.ignore`,
//! hidden files skipped), never entering `.git` or `.codebutler`, regular files only (a
//! symlink is not followed, so nothing outside the repository is reached).
//!
//! The walk runs on several threads, as ripgrep's does (`ignore`'s `WalkParallel`): each
//! thread gets a [`FileVisitor`] of its own, which sees the regular files and may skip
//! directories; callers that need an order sort what their visitors found, and those that
//! want only the first few in path order ([`FirstInPathOrder`]) skip what comes after.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ignore::{DirEntry, WalkState};

use super::path::{RepoRoot, private_dir_reason};

/// What one walking thread does with what it meets.
pub(crate) trait FileVisitor: Send {
    /// A regular file, with its path relative to the root. `Quit` ends the whole walk.
    fn file(&mut self, rel: String, path: PathBuf) -> WalkState;

    /// A directory about to be entered, with its path relative to the root; `Skip` leaves it
    /// out. Every directory is entered unless a visitor says otherwise.
    fn dir(&mut self, _rel: &str) -> WalkState {
        WalkState::Continue
    }
}

/// Whether a walk may use several threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Threads {
    /// Several, as ripgrep walks: for the PM's tools, in the controller.
    Several,
    /// The calling thread only: for the Coder's tools in the sandbox, where one reply's
    /// read-only calls already run side by side and threads count against its process
    /// limit.
    One,
}

/// Walks the files under `start` (a directory or a single file inside `root`), on several
/// threads each with a visitor made by `visitor`, or on this one. Unreadable entries are
/// skipped.
pub(crate) fn walk<'s, V: FileVisitor + 's>(
    root: &'s RepoRoot,
    start: &Path,
    threads: Threads,
    mut visitor: impl FnMut() -> V + 's,
) {
    let mut builder = ignore::WalkBuilder::new(start);
    builder
        .follow_links(false)
        .threads(0)
        .filter_entry(|entry| {
            entry
                .file_name()
                .to_str()
                .is_none_or(|name| private_dir_reason(name).is_none())
        });
    if threads == Threads::One {
        let mut visitor = visitor();
        // `ignore`'s sequential walk cannot skip a directory: a visitor's `Skip` only saves
        // the work it would do with the files below.
        for entry in builder.build() {
            let state = match entry {
                Ok(entry) => visit(root, &mut visitor, entry),
                Err(e) => {
                    tracing::debug!(error = %e, "skipping an unreadable entry");
                    WalkState::Continue
                }
            };
            if matches!(state, WalkState::Quit) {
                break;
            }
        }
        return;
    }
    builder.build_parallel().run(|| {
        let mut visitor = visitor();
        Box::new(move |entry| match entry {
            Ok(entry) => visit(root, &mut visitor, entry),
            Err(e) => {
                tracing::debug!(error = %e, "skipping an unreadable entry");
                WalkState::Continue
            }
        })
    });
}

fn visit(root: &RepoRoot, visitor: &mut impl FileVisitor, entry: DirEntry) -> WalkState {
    let Some(kind) = entry.file_type() else {
        return WalkState::Continue;
    };
    if !entry.path().starts_with(root.root()) {
        return WalkState::Continue;
    }
    if kind.is_file() {
        let path = entry.into_path();
        visitor.file(root.relative(&path), path)
    } else if kind.is_dir() && entry.depth() > 0 {
        visitor.dir(&root.relative(entry.path()))
    } else {
        WalkState::Continue
    }
}

/// The regular files under `start` (a directory or a single file inside `root`), sorted
/// by their path relative to the root, walked on `threads`. Unreadable entries are skipped.
pub(crate) fn walk_files(
    root: &RepoRoot,
    start: &Path,
    threads: Threads,
) -> Vec<(String, PathBuf)> {
    let found = Mutex::new(Vec::new());
    walk(root, start, threads, || Collect {
        mine: Vec::new(),
        all: &found,
    });
    let mut files = found.into_inner().unwrap_or_else(|p| p.into_inner());
    files.sort();
    files
}

/// Collects one thread's files and hands them over when the thread is done.
struct Collect<'a> {
    mine: Vec<(String, PathBuf)>,
    all: &'a Mutex<Vec<(String, PathBuf)>>,
}

impl FileVisitor for Collect<'_> {
    fn file(&mut self, rel: String, path: PathBuf) -> WalkState {
        self.mine.push((rel, path));
        WalkState::Continue
    }
}

impl Drop for Collect<'_> {
    fn drop(&mut self) {
        lock(self.all).append(&mut self.mine);
    }
}

/// The first lines of an answer given in path order (each file's lines in its own order),
/// gathered from visitors that meet the files in any order: kept are the files in path
/// order up to the first one where more than `limit` lines have come (the cutoff), so
/// files and directories after it need not be read at all ([`Self::wanted`]).
#[derive(Debug)]
pub(crate) struct FirstInPathOrder {
    limit: usize,
    files: BTreeMap<String, Vec<String>>,
    cutoff: Option<String>,
}

impl FirstInPathOrder {
    /// Gathers until more than `limit` lines are known to come first.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            files: BTreeMap::new(),
            cutoff: None,
        }
    }

    /// Whether the file at `rel` (or, for a directory, `rel/`) could still change the answer.
    pub(crate) fn wanted(&self, rel: &str) -> bool {
        self.cutoff.as_deref().is_none_or(|cutoff| rel < cutoff)
    }

    /// Adds the lines of the file `rel` and moves the cutoff.
    pub(crate) fn add(&mut self, rel: String, lines: Vec<String>) {
        if !self.wanted(&rel) || lines.is_empty() {
            return;
        }
        self.files.insert(rel, lines);
        let mut seen = 0;
        let last = self.files.iter().find_map(|(path, lines)| {
            seen += lines.len();
            (seen > self.limit).then(|| path.clone())
        });
        if let Some(last) = last {
            let mut after = self.files.split_off(&last);
            if let Some(lines) = after.remove(&last) {
                self.files.insert(last.clone(), lines);
            }
            self.cutoff = Some(last);
        }
    }

    /// The lines in path order: all of them, or more than `limit` when there were more.
    pub(crate) fn into_lines(self) -> Vec<String> {
        self.files.into_values().flatten().collect()
    }
}

/// Whether a visitor guarding `found` should enter the directory `rel`: every file below
/// sorts after `rel/`.
pub(crate) fn dir_wanted(found: &Mutex<FirstInPathOrder>, rel: &str) -> WalkState {
    if lock(found).wanted(&format!("{rel}/")) {
        WalkState::Continue
    } else {
        WalkState::Skip
    }
}

/// The collector behind `mutex`, also after a visitor thread panicked while holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::super::path::test_support::repo_with;
    use super::*;

    #[test]
    fn walk_respects_gitignore_hidden_and_private_dirs() {
        let (dir, root) = repo_with(&[
            (".gitignore", "target/\n*.log\n"),
            ("src/main.rs", "fn main() {}"),
            ("README.md", "hi"),
            ("b/z.txt", "z"),
        ]);
        super::super::path::test_support::write_files(
            dir.path(),
            &[
                ("target/debug/out", "x"),
                ("run.log", "x"),
                (".codebutler/config.json", "{}"),
                (".hidden/x", "x"),
            ],
        );
        let rels: Vec<String> = walk_files(&root, root.root(), Threads::Several)
            .into_iter()
            .map(|(rel, _)| rel)
            .collect();
        assert_eq!(rels, vec!["README.md", "b/z.txt", "src/main.rs"]);
        let sub: Vec<String> = walk_files(&root, &root.root().join("src"), Threads::One)
            .into_iter()
            .map(|(rel, _)| rel)
            .collect();
        assert_eq!(sub, vec!["src/main.rs"]);
    }

    #[test]
    fn many_files_in_many_directories_come_back_sorted_once_each() {
        let files: Vec<(String, String)> = (0..500)
            .map(|i| (format!("d{}/e{}/f{i}.txt", i % 13, i % 5), format!("{i}")))
            .collect();
        let listed: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let (_dir, root) = repo_with(&listed);
        let rels: Vec<String> = walk_files(&root, root.root(), Threads::Several)
            .into_iter()
            .map(|(rel, _)| rel)
            .collect();
        let mut expected: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
        expected.sort();
        assert_eq!(rels, expected);
    }

    #[test]
    fn first_in_path_order_keeps_the_first_lines_whatever_the_order_files_come_in() {
        let mut found = FirstInPathOrder::new(3);
        found.add("m".into(), vec!["m1".into()]);
        assert!(found.wanted("z"));
        found.add("z".into(), vec!["z1".into(), "z2".into(), "z3".into()]);
        // m1 z1 z2 z3: the fourth line comes with `z`, the cutoff.
        assert!(!found.wanted("zz") && !found.wanted("z/") && found.wanted("y"));
        found.add("zz".into(), vec!["zz1".into()]);
        found.add("b".into(), vec!["b1".into(), "b2".into()]);
        found.add("c".into(), vec![]);
        // b1 b2 m1, then z1: `z` stays the cutoff; `zz` was never kept.
        assert_eq!(found.into_lines(), ["b1", "b2", "m1", "z1", "z2", "z3"]);
        let mut found = FirstInPathOrder::new(3);
        found.add("z".into(), vec!["z1".into(); 5]);
        found.add("a".into(), vec!["a1".into(); 4]);
        assert!(!found.wanted("b"));
        assert_eq!(found.into_lines(), ["a1"; 4]);
    }
}
