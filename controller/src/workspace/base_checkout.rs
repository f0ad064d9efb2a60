//! Writing a base commit's files into a new thread worktree, and its index: the checkout
//! of the thread repository's `init`, done in parallel like git's `checkout.workers`.
//!
//! libgit2's checkout writes one file after another and looks up `.gitattributes` for each
//! of them; this one reads the blobs (inflating them) and writes the files on several
//! threads, each with its own handle on the thread repository's objects, and then writes
//! the index with each file's stat data (as git does after a checkout), so `git status` and
//! git2's diffs compare stat data and rehash nothing.
//!
//! The files are the blobs' plain bytes: no filter, no `.gitattributes` driver, no hook,
//! nothing the repository holds runs. Every path is checked first
//! ([`worktree_wire::check_path`]: no `..`, no `.git` component in any letter case, no
//! absolute path), and nothing already there is followed or replaced: the directories are
//! made one by one before any file (`mkdir`, which fails on anything in its place), then
//! each file is created new (`O_EXCL`, which never follows a symlink in its place) and each
//! symlink is written as a link (`symlink`, never followed). A tree naming one path twice is
//! refused. Submodules (gitlinks) get an empty directory, as git leaves an uninitialised
//! one. Blocking: call from `spawn_blocking`.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::step_error::{GitStepError, IoStepError, git, io};
use codebutler_sandbox::worktree_wire;
use git2::{
    FileMode, IndexEntry, IndexTime, Oid, Repository, RepositoryOpenFlags, TreeWalkMode,
    TreeWalkResult,
};

/// Most threads writing files at once.
const MAX_WORKERS: usize = 8;
/// Entries a worker takes at a time.
const CHUNK: usize = 32;

/// A file of the tree to write: its repository-relative path, blob and mode.
struct Entry {
    path: Vec<u8>,
    id: Oid,
    mode: FileMode,
}

/// Writes the files of the tree `tree` of the repository `repo` into its worktree
/// `worktree` (an empty directory but for `.git`) and replaces the index with them.
pub fn check_out(repo: &Repository, worktree: &Path, tree: Oid) -> Result<(), CheckoutError> {
    let (dirs, files) = list(repo, tree)?;
    for dir in &dirs {
        let path = worktree.join(OsStr::from_bytes(dir));
        fs::create_dir(&path).map_err(io(format!("create {}", path.display())))?;
    }
    let mut entries = write_files(repo.path(), worktree, &files)?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut index = repo.index().map_err(git("open the index"))?;
    index.clear().map_err(git("clear the index"))?;
    for entry in &entries {
        index
            .add(entry)
            .map_err(git(format!("index {}", worktree_wire::show(&entry.path))))?;
    }
    index.write().map_err(git("write the index"))?;
    Ok(())
}

/// The tree's directories (parents first) and its files, submodules and symlinks, each
/// path checked.
fn list(repo: &Repository, tree: Oid) -> Result<(Vec<Vec<u8>>, Vec<Entry>), CheckoutError> {
    let tree = repo.find_tree(tree).map_err(git("read the base's tree"))?;
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut refused = None;
    tree.walk(TreeWalkMode::PreOrder, |parent, entry| {
        let mut path = parent.as_bytes().to_vec();
        path.extend_from_slice(entry.name_bytes());
        if let Err(reason) = worktree_wire::check_path(&path) {
            refused = Some(format!(
                "refusing to check out {:?}: its path {reason}",
                worktree_wire::show(&path)
            ));
            return TreeWalkResult::Abort;
        }
        match entry.filemode() {
            0o040000 => dirs.push(path),
            0o100644 | 0o100664 => files.push(Entry {
                path,
                id: entry.id(),
                mode: FileMode::Blob,
            }),
            0o100755 => files.push(Entry {
                path,
                id: entry.id(),
                mode: FileMode::BlobExecutable,
            }),
            0o120000 => files.push(Entry {
                path,
                id: entry.id(),
                mode: FileMode::Link,
            }),
            0o160000 => {
                dirs.push(path.clone());
                files.push(Entry {
                    path,
                    id: entry.id(),
                    mode: FileMode::Commit,
                });
            }
            other => {
                refused = Some(format!(
                    "refusing to check out {:?}: unknown mode {other:o}",
                    worktree_wire::show(&path)
                ));
                return TreeWalkResult::Abort;
            }
        }
        TreeWalkResult::Ok
    })
    .map_err(|e| match refused.take() {
        Some(reason) => CheckoutError::Invalid(reason),
        None => git("list the base's files")(e).into(),
    })?;
    if let Some(reason) = refused {
        return Err(CheckoutError::Invalid(reason));
    }
    Ok((dirs, files))
}

/// Writes `files` under `worktree` on up to [`MAX_WORKERS`] threads, each reading blobs
/// through its own handle on the repository at `git_dir`; returns their index entries.
fn write_files(
    git_dir: &Path,
    worktree: &Path,
    files: &[Entry],
) -> Result<Vec<IndexEntry>, CheckoutError> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_WORKERS)
        .min(files.len().div_ceil(CHUNK).max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let outcomes: Vec<Result<Vec<IndexEntry>, CheckoutError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let outcome = work(git_dir, worktree, files, &next, &failed);
                    if outcome.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CheckoutError::Invalid(
                        "a checkout thread panicked".to_owned(),
                    ))
                })
            })
            .collect()
    });
    let mut entries = Vec::with_capacity(files.len());
    for outcome in outcomes {
        entries.append(&mut outcome?);
    }
    Ok(entries)
}

/// One worker: takes [`CHUNK`] entries at a time from `next` until none are left or
/// another worker `failed`, and writes them.
fn work(
    git_dir: &Path,
    worktree: &Path,
    files: &[Entry],
    next: &AtomicUsize,
    failed: &AtomicBool,
) -> Result<Vec<IndexEntry>, CheckoutError> {
    // The thread's repository, already opened and checked by the caller: a handle of this
    // worker's own on the same git directory.
    let repo = Repository::open_ext(
        git_dir,
        RepositoryOpenFlags::NO_SEARCH | RepositoryOpenFlags::BARE,
        std::iter::empty::<&str>(),
    )
    .map_err(git(format!("open {}", git_dir.display())))?;
    let odb = repo.odb().map_err(git("open the repository's objects"))?;
    let mut entries = Vec::new();
    loop {
        let start = next.fetch_add(CHUNK, Ordering::Relaxed);
        if start >= files.len() || failed.load(Ordering::Relaxed) {
            return Ok(entries);
        }
        for file in &files[start..(start + CHUNK).min(files.len())] {
            entries.push(write_one(&odb, worktree, file)?);
        }
    }
}

/// Writes one file (or symlink, or a submodule's entry) and returns its index entry.
fn write_one(
    odb: &git2::Odb<'_>,
    worktree: &Path,
    file: &Entry,
) -> Result<IndexEntry, CheckoutError> {
    let path = worktree.join(OsStr::from_bytes(&file.path));
    let shown = || worktree_wire::show(&file.path);
    let meta = match file.mode {
        FileMode::Commit => {
            fs::symlink_metadata(&path).map_err(io(format!("inspect {}", shown())))?
        }
        FileMode::Link => {
            let blob = odb
                .read(file.id)
                .map_err(git(format!("read {}", shown())))?;
            std::os::unix::fs::symlink(OsStr::from_bytes(blob.data()), &path)
                .map_err(io(format!("write the symlink {}", shown())))?;
            fs::symlink_metadata(&path).map_err(io(format!("inspect {}", shown())))?
        }
        _ => {
            let blob = odb
                .read(file.id)
                .map_err(git(format!("read {}", shown())))?;
            let permissions = if file.mode == FileMode::BlobExecutable {
                0o755
            } else {
                0o644
            };
            let mut out = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(permissions)
                .open(&path)
                .map_err(io(format!("create {}", shown())))?;
            out.write_all(blob.data())
                .map_err(io(format!("write {}", shown())))?;
            out.metadata().map_err(io(format!("inspect {}", shown())))?
        }
    };
    Ok(index_entry(file, &meta))
}

/// The index entry of `file` written with the stat data `meta`, as git records it (times,
/// device, inode, ids and size cut to 32 bits).
fn index_entry(file: &Entry, meta: &fs::Metadata) -> IndexEntry {
    let gitlink = file.mode == FileMode::Commit;
    let time = |seconds: i64, nanos: i64| {
        if gitlink {
            IndexTime::new(0, 0)
        } else {
            IndexTime::new(seconds as i32, nanos as u32)
        }
    };
    let stat = |value: u64| if gitlink { 0 } else { value as u32 };
    IndexEntry {
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        dev: stat(meta.dev()),
        ino: stat(meta.ino()),
        mode: u32::from(file.mode),
        uid: stat(u64::from(meta.uid())),
        gid: stat(u64::from(meta.gid())),
        file_size: stat(meta.size()),
        id: file.id,
        flags: 0,
        flags_extended: 0,
        path: file.path.clone(),
    }
}

/// Why a base could not be checked out.
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error(transparent)]
    Io(#[from] IoStepError),
    /// A path or mode the checkout refuses, said for people.
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A new repository in `dir` (its worktree) and nothing else.
    fn empty_worktree(dir: &Path) -> Repository {
        Repository::init(dir).unwrap()
    }

    /// A tree object written byte for byte (no validation), from `(mode, name, id)`.
    fn raw_tree(repo: &Repository, entries: &[(&str, &[u8], Oid)]) -> Oid {
        let mut bytes = Vec::new();
        for (mode, name, id) in entries {
            bytes.extend_from_slice(mode.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(name);
            bytes.push(0);
            bytes.extend_from_slice(id.as_bytes());
        }
        repo.odb()
            .unwrap()
            .write(git2::ObjectType::Tree, &bytes)
            .unwrap()
    }

    /// A tree of `files` (`(path, bytes, mode)`), built through git2's index.
    fn tree_of(repo: &Repository, files: &[(&str, &[u8], FileMode)]) -> Oid {
        let mut index = git2::Index::new().unwrap();
        for (path, bytes, mode) in files {
            let id = repo.blob(bytes).unwrap();
            index
                .add(&IndexEntry {
                    ctime: IndexTime::new(0, 0),
                    mtime: IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: u32::from(*mode),
                    uid: 0,
                    gid: 0,
                    file_size: 0,
                    id,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                })
                .unwrap();
        }
        index.write_tree_to(repo).unwrap()
    }

    fn commit(repo: &Repository, tree: Oid) {
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo.find_tree(tree).unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
    }

    #[test]
    fn writes_plain_files_modes_and_links_with_an_index_git_finds_clean() {
        let dir = tempfile::tempdir().unwrap();
        let repo = empty_worktree(dir.path());
        let mut files: Vec<(String, Vec<u8>, FileMode)> = vec![
            (
                ".gitattributes".into(),
                b"*.txt text eol=crlf ident\n".to_vec(),
                FileMode::Blob,
            ),
            ("notes.txt".into(), b"$Id$\nline\n".to_vec(), FileMode::Blob),
            (
                "run.sh".into(),
                b"#!/bin/sh\necho hi\n".to_vec(),
                FileMode::BlobExecutable,
            ),
            ("link".into(), b"src/a/b/lib.rs".to_vec(), FileMode::Link),
            ("dangling".into(), b"../../outside".to_vec(), FileMode::Link),
            (
                "src/a/b/lib.rs".into(),
                b"pub fn f() {}\n".to_vec(),
                FileMode::Blob,
            ),
        ];
        // Enough files for every worker to take several chunks.
        for i in 0..300 {
            files.push((
                format!("src/m{}/f{i}.rs", i % 7),
                format!("fn f{i}() {{}}\n").into_bytes(),
                FileMode::Blob,
            ));
        }
        let listed: Vec<(&str, &[u8], FileMode)> = files
            .iter()
            .map(|(p, b, m)| (p.as_str(), b.as_slice(), *m))
            .collect();
        let tree = tree_of(&repo, &listed);
        commit(&repo, tree);

        check_out(&repo, dir.path(), tree).unwrap();

        // The blobs' plain bytes: no eol conversion, no ident expansion.
        for (path, bytes, mode) in &files {
            let on_disk = dir.path().join(path);
            let meta = fs::symlink_metadata(&on_disk).unwrap();
            match mode {
                FileMode::Link => {
                    assert!(meta.file_type().is_symlink(), "{path}");
                    assert_eq!(
                        fs::read_link(&on_disk).unwrap().as_os_str().as_bytes(),
                        bytes
                    );
                }
                _ => {
                    assert_eq!(&fs::read(&on_disk).unwrap(), bytes, "{path}");
                    let exec = meta.permissions().mode() & 0o111 != 0;
                    assert_eq!(exec, *mode == FileMode::BlobExecutable, "{path}");
                }
            }
        }
        assert!(!dir.path().parent().unwrap().join("outside").exists());

        // The index: every entry with its file's stat data, so nothing needs rehashing.
        let index = Repository::open(dir.path()).unwrap().index().unwrap();
        assert_eq!(index.len(), files.len());
        for entry in index.iter() {
            let path = String::from_utf8(entry.path.clone()).unwrap();
            let meta = fs::symlink_metadata(dir.path().join(&path)).unwrap();
            assert_eq!(entry.mtime.seconds(), meta.mtime() as i32, "{path}");
            assert_eq!(
                entry.mtime.nanoseconds(),
                meta.mtime_nsec() as u32,
                "{path}"
            );
            assert_eq!(entry.ctime.seconds(), meta.ctime() as i32, "{path}");
            assert_eq!(entry.ino, meta.ino() as u32, "{path}");
            assert_eq!(entry.dev, meta.dev() as u32, "{path}");
            assert_eq!(entry.uid, meta.uid(), "{path}");
            assert_eq!(entry.file_size, meta.size() as u32, "{path}");
            let (_, _, mode) = files.iter().find(|(p, _, _)| *p == path).unwrap();
            assert_eq!(entry.mode, u32::from(*mode), "{path}");
        }
        // git2 and git itself find the new worktree clean.
        let opened = Repository::open(dir.path()).unwrap();
        let statuses = opened
            .statuses(Some(git2::StatusOptions::new().include_untracked(true)))
            .unwrap();
        let changed: Vec<_> = statuses
            .iter()
            .map(|s| s.path().map(str::to_owned))
            .collect();
        assert!(changed.is_empty(), "{changed:?}");
        let status = std::process::Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
        assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    }

    #[test]
    fn a_path_with_dot_dot_or_git_is_refused_before_anything_is_written() {
        for bad in [&b".."[..], b".GIT", b".git", b"."] {
            let dir = tempfile::tempdir().unwrap();
            let worktree = dir.path().join("w");
            fs::create_dir(&worktree).unwrap();
            let repo = empty_worktree(&worktree);
            let blob = repo.blob(b"#!/bin/sh\ntouch pwned\n").unwrap();
            let hooks = raw_tree(&repo, &[("100755", b"post-checkout", blob)]);
            let tree = raw_tree(&repo, &[("100644", b"a.txt", blob), ("40000", bad, hooks)]);
            let err = check_out(&repo, &worktree, tree).unwrap_err().to_string();
            assert!(err.starts_with("refusing to check out"), "{err}");
            assert!(!worktree.join("a.txt").exists());
            assert!(!worktree.join(".git/post-checkout").exists());
            assert!(!dir.path().join("post-checkout").exists());
        }
    }

    #[test]
    fn a_tree_naming_a_path_twice_cannot_write_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap();
        let worktree = dir.path().join("w");
        fs::create_dir(&worktree).unwrap();
        let repo = empty_worktree(&worktree);
        let target = repo.blob(outside.as_os_str().as_bytes()).unwrap();
        let file = repo.blob(b"written through the link").unwrap();
        let inner = raw_tree(&repo, &[("100644", b"f", file)]);
        // `a` a symlink to `outside`, and `a/f` a file: written, `f` would land outside.
        let tree = raw_tree(&repo, &[("120000", b"a", target), ("40000", b"a", inner)]);
        assert!(check_out(&repo, &worktree, tree).is_err());
        assert!(!outside.join("f").exists());
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }
}
