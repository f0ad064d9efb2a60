//! Overlaps between two threads' files, computed in code: the **same file**, or else the
//! **same directory** (a file's parent directory; files at the repository's root share no
//! directory, since every thread would share it). Pure, so every level is tested by
//! equality. The semantic level — threads that share neither — is the PM's
//! ([`super::semantic`]).

use std::collections::BTreeSet;

use crate::store::ThreadScope;

/// How two threads overlap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Both change these files (sorted).
    SameFile(Vec<String>),
    /// No file in common, but both change files in these directories (sorted, each ending
    /// in `/`).
    SameDirectory(Vec<String>),
}

impl Overlap {
    /// What the overlap is about, one key per file or directory: `file:<path>` or
    /// `dir:<dir>/` — how a notice about it is remembered.
    pub fn items(&self) -> Vec<String> {
        match self {
            Self::SameFile(files) => files.iter().map(|f| format!("file:{f}")).collect(),
            Self::SameDirectory(dirs) => dirs.iter().map(|d| format!("dir:{d}")).collect(),
        }
    }

    /// The overlap without the items in `told` (keys as [`Overlap::items`] makes them);
    /// `None` when nothing is left.
    pub fn without(&self, told: &BTreeSet<String>) -> Option<Self> {
        let keep = |prefix: &str, list: &[String]| -> Vec<String> {
            list.iter()
                .filter(|x| !told.contains(&format!("{prefix}{x}")))
                .cloned()
                .collect()
        };
        let left = match self {
            Self::SameFile(files) => Self::SameFile(keep("file:", files)),
            Self::SameDirectory(dirs) => Self::SameDirectory(keep("dir:", dirs)),
        };
        match &left {
            Self::SameFile(l) | Self::SameDirectory(l) if l.is_empty() => None,
            _ => Some(left),
        }
    }
}

/// A path as both sides write it: no leading `./` or `/`.
fn normal(path: &str) -> &str {
    path.trim_start_matches("./").trim_start_matches('/')
}

/// The directory of `path` with a trailing `/`, or `None` for a file at the root.
pub fn directory(path: &str) -> Option<String> {
    let path = normal(path);
    path.rsplit_once('/')
        .map(|(dir, _)| dir)
        .filter(|dir| !dir.is_empty())
        .map(|dir| format!("{dir}/"))
}

/// How `mine` and `theirs` overlap: the same file first; the same directory only when no
/// file is shared.
pub fn between(mine: &[String], theirs: &[String]) -> Option<Overlap> {
    let set = |files: &[String]| -> BTreeSet<String> {
        files
            .iter()
            .map(|f| normal(f).to_owned())
            .filter(|f| !f.is_empty())
            .collect()
    };
    let (mine, theirs) = (set(mine), set(theirs));
    let files: Vec<String> = mine.intersection(&theirs).cloned().collect();
    if !files.is_empty() {
        return Some(Overlap::SameFile(files));
    }
    let dirs = |files: &BTreeSet<String>| -> BTreeSet<String> {
        files.iter().filter_map(|f| directory(f)).collect()
    };
    let shared: Vec<String> = dirs(&mine).intersection(&dirs(&theirs)).cloned().collect();
    (!shared.is_empty()).then_some(Overlap::SameDirectory(shared))
}

/// The files a thread touches, as far as is known: what its branch changes once a run
/// recorded them (read from git), its plan's predicted files before that.
pub fn files_of(scope: &ThreadScope) -> Vec<String> {
    if scope.head.is_some() {
        scope.changed.iter().map(|f| f.path.clone()).collect()
    } else {
        scope.planned.clone()
    }
}

/// Another thread and how `mine` overlaps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding<'a> {
    pub other: &'a ThreadScope,
    pub overlap: Overlap,
}

/// How `mine` overlaps each of `others` (in their order; `mine`'s own thread and threads
/// without an overlap left out).
pub fn against<'a>(
    thread: &crate::domain::ThreadKey,
    mine: &[String],
    others: &'a [ThreadScope],
) -> Vec<Finding<'a>> {
    others
        .iter()
        .filter(|other| other.thread != *thread)
        .filter_map(|other| {
            between(mine, &files_of(other)).map(|overlap| Finding { other, overlap })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Stage, ThreadKey};
    use crate::store::ScopeFile;

    fn v(files: &[&str]) -> Vec<String> {
        files.iter().map(|f| (*f).to_owned()).collect()
    }

    #[test]
    fn the_same_file_wins_over_the_same_directory() {
        assert_eq!(
            between(
                &v(&["auth/login.go", "auth/session.go"]),
                &v(&["./auth/login.go", "auth/token.go"])
            ),
            Some(Overlap::SameFile(v(&["auth/login.go"])))
        );
        assert_eq!(
            between(&v(&["auth/login.go"]), &v(&["auth/session.go", "web/a.ts"])),
            Some(Overlap::SameDirectory(v(&["auth/"])))
        );
        // Nested directories are different directories.
        assert_eq!(
            between(&v(&["auth/login.go"]), &v(&["auth/oauth/google.go"])),
            None
        );
    }

    #[test]
    fn root_files_share_no_directory_and_nothing_overlaps_nothing() {
        assert_eq!(between(&v(&["README.md"]), &v(&["Cargo.toml"])), None);
        assert_eq!(
            between(&v(&["README.md"]), &v(&["README.md"])),
            Some(Overlap::SameFile(v(&["README.md"])))
        );
        assert_eq!(between(&v(&[]), &v(&["a/b.rs"])), None);
        assert_eq!(directory("a/b/c.rs").as_deref(), Some("a/b/"));
        assert_eq!(directory("/c.rs"), None);
    }

    #[test]
    fn what_was_told_is_left_out() {
        let overlap = Overlap::SameFile(v(&["a/x.rs", "a/y.rs"]));
        assert_eq!(overlap.items(), ["file:a/x.rs", "file:a/y.rs"]);
        let told: BTreeSet<String> = ["file:a/x.rs".to_owned()].into();
        assert_eq!(
            overlap.without(&told),
            Some(Overlap::SameFile(v(&["a/y.rs"])))
        );
        let all: BTreeSet<String> = overlap.items().into_iter().collect();
        assert_eq!(overlap.without(&all), None);
        let dirs = Overlap::SameDirectory(v(&["a/"]));
        assert_eq!(dirs.without(&told), Some(dirs.clone()));
    }

    fn scope(ts: &str, planned: &[&str], changed: Option<&[&str]>) -> ThreadScope {
        ThreadScope {
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: ts.into(),
            },
            stage: Stage::Approved,
            planned: v(planned),
            changed: changed
                .unwrap_or_default()
                .iter()
                .map(|p| ScopeFile {
                    path: (*p).into(),
                    added: 1,
                    removed: 0,
                })
                .collect(),
            head: changed.map(|_| "abc".to_owned()),
            branch: None,
            pull_request: None,
            summary: None,
        }
    }

    #[test]
    fn a_thread_is_compared_by_its_branch_once_it_has_one_and_never_with_itself() {
        let mine = scope("1.1", &["auth/login.go"], None);
        let others = vec![
            mine.clone(),
            // Planned login.go, but its branch changed only web/: no overlap.
            scope("2.2", &["auth/login.go"], Some(&["web/a.ts"])),
            scope("3.3", &["auth/login.go"], None),
            scope("4.4", &[], Some(&["auth/session.go"])),
            scope("5.5", &["docs/x.md"], None),
        ];
        let found = against(&mine.thread, &files_of(&mine), &others);
        let summary: Vec<(&str, &Overlap)> = found
            .iter()
            .map(|f| (f.other.thread.thread_ts.as_str(), &f.overlap))
            .collect();
        assert_eq!(
            summary,
            [
                ("3.3", &Overlap::SameFile(v(&["auth/login.go"]))),
                ("4.4", &Overlap::SameDirectory(v(&["auth/"]))),
            ]
        );
    }
}
