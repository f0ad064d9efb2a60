//! The worktree helper: every read and write the controller needs of a worktree's files,
//! done where the runner's own view is — inside a sandbox that sees only the worktree
//! (`codebutler-runner worktree-io`), never by the controller itself.
//!
//! A worktree holds whatever the runner left: symlinks to host files, directories it
//! ignores in its own `.gitignore` full of links, files swapped while they are read. The
//! controller used to stage and restore them with git2 on the host, where a symlink can point
//! at `~/.codebutler/config.json`. Here:
//!
//! - [`snapshot`] lists every file git would track (tracked and untracked, ignored ones left
//!   out, judged by libgit2 on the worktree's read-only `.git`, whose `info/exclude` the
//!   controller wrote) and writes each as a
//!   [`wire::Frame`]: unchanged files by their blob id (the controller checks it is already
//!   in the thread's object store), changed and new ones with their content, read with
//!   [`beneath`]'s no-symlink opens. The controller builds blobs and trees from the frames
//!   and reads nothing from the worktree. Nothing new under `.codebutler-attachments/`
//!   (where a run sees the files people shared) is ever sent, whatever the ignore rules say;
//!   the helper's own sandbox has no bind there, so it would only find what a run wrote.
//! - [`restore`] puts a tree of the thread's object store back: it removes every symlink and
//!   every file git does not ignore, then writes the tree's files, never following a symlink
//!   in any path component whatever the ignore rules say, and reports what it wrote so the
//!   controller can rewrite the index.
//!
//! For a commit the controller also asks a snapshot what git ignores (to tell the Coder
//! what its commit left out) and for the ignored files under paths the Coder named to
//! commit on purpose ([`Snapshot`]).
//!
//! In the sandbox a symlink can only lead to the worktree itself or the helper's private
//! `/tmp`; the no-follow file operations are a second layer that also holds with
//! `sandbox.mode: none`.

pub mod beneath;
use codebutler_sandbox::spec::ATTACHMENTS_DIR;
use codebutler_sandbox::worktree_wire as wire;

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Repository, RepositoryOpenFlags, Status, StatusOptions};

use beneath::{Found, Kind, Root, index_stat};
use wire::{
    Body, Frame, MODE_EXECUTABLE, MODE_FILE, MODE_GITLINK, MODE_SYMLINK, check_path, write_frame,
};

/// Why the helper failed.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("{step}: {source}")]
    Git {
        step: String,
        #[source]
        source: git2::Error,
    },
    #[error("{step}: {source}")]
    Io {
        step: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

fn git(step: impl Into<String>) -> impl FnOnce(git2::Error) -> HelperError {
    let step = step.into();
    move |source| HelperError::Git { step, source }
}

fn io(step: impl Into<String>) -> impl FnOnce(std::io::Error) -> HelperError {
    let step = step.into();
    move |source| HelperError::Io { step, source }
}

/// Opens the worktree's repository at exactly `root` (its `.git` directory), without
/// searching upwards.
fn open(root: &Path) -> Result<Repository, HelperError> {
    Repository::open_ext(
        root,
        RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&str>(),
    )
    .map_err(git(format!("open the repository in {}", root.display())))
}

fn rel(path: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(path))
}

/// Most ignored entries a snapshot lists ([`Snapshot::list_ignored`]): they are only named
/// to the Coder, so a repository ignoring thousands of scattered files costs nothing more.
pub const MAX_IGNORED_LISTED: usize = 200;

/// What a snapshot sends.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Regular files larger than this are sent as [`Frame::Skipped`], not read.
    pub max_file_bytes: u64,
    /// Also send what git ignores, as [`Frame::Ignored`] (a directory whose content git
    /// ignores as one entry; at most [`MAX_IGNORED_LISTED`]).
    pub list_ignored: bool,
    /// Paths (files or directories, worktree-relative) whose ignored files are sent too, as
    /// new files: what the Coder asked to commit although an ignore rule leaves it out.
    pub include: Vec<Vec<u8>>,
}

/// Writes the worktree at `root` as frames on `out`: every file git would track, unchanged
/// ones by id, others with their content; regular files over the limit as
/// [`Frame::Skipped`]; and what `options` asks for besides. Returns the number of entries.
pub fn snapshot(root: &Path, options: &Snapshot, out: &mut impl Write) -> Result<u64, HelperError> {
    let repo = open(root)?;
    let index = repo.index().map_err(git("read the index"))?;
    let files = Root::open(root).map_err(io("open the worktree"))?;
    let mut status = StatusOptions::new();
    status
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(options.list_ignored)
        .recurse_ignored_dirs(false)
        .include_unmodified(true)
        .exclude_submodules(true)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false)
        .update_index(false);
    let statuses = repo
        .statuses(Some(&mut status))
        .map_err(git("list the worktree's files"))?;
    let changed = Status::WT_NEW
        | Status::WT_MODIFIED
        | Status::WT_TYPECHANGE
        | Status::WT_RENAMED
        | Status::CONFLICTED;
    let mut entries = 0u64;
    let mut listed_ignored = 0usize;
    let mut emit = |frame: &Frame| write_frame(out, frame).map_err(io("write to the controller"));
    for status in statuses.iter() {
        let path = status.path_bytes().to_vec();
        let flags = status.status();
        if flags.contains(Status::IGNORED) {
            let path = path.strip_suffix(b"/").unwrap_or(&path).to_vec();
            if listed_ignored < MAX_IGNORED_LISTED && check_path(&path).is_ok() {
                emit(&Frame::Ignored { path })?;
                listed_ignored += 1;
            }
            continue;
        }
        // Directories (nested repositories) and anything git could not commit stay out.
        if path.ends_with(b"/") || check_path(&path).is_err() {
            continue;
        }
        // So does anything new where the run sees the shared files, whatever the ignore
        // rules say (a file the repository tracks there is the repository's).
        if in_attachments(&path) && index.get_path(&rel(&path), 0).is_none() {
            continue;
        }
        if flags.contains(Status::WT_DELETED) {
            continue;
        }
        if !flags.intersects(changed)
            && let Some(entry) = index.get_path(&rel(&path), 0)
        {
            if entry.mode == MODE_GITLINK {
                continue;
            }
            // As the index has it: the blob is stored already.
            let Some(stat) = files.lstat(&rel(&path)).map_err(io("inspect a file"))? else {
                continue;
            };
            let mut oid = [0u8; 20];
            oid.copy_from_slice(entry.id.as_bytes());
            emit(&Frame::Entry {
                mode: entry.mode,
                path,
                stat: index_stat(&stat),
                body: Body::Known(oid),
            })?;
            entries += 1;
            continue;
        }
        if flags.contains(Status::INDEX_DELETED) && !flags.intersects(changed) {
            continue;
        }
        entries += emit_content(&files, path, options.max_file_bytes, &mut emit)?;
    }
    if !options.include.is_empty() {
        entries += send_included(&repo, &files, options, &mut emit)?;
    }
    // Submodules are never checked out in a worktree: their commits stay as the index has
    // them.
    for entry in index.iter().filter(|e| e.mode == MODE_GITLINK) {
        if check_path(&entry.path).is_err() {
            continue;
        }
        let mut oid = [0u8; 20];
        oid.copy_from_slice(entry.id.as_bytes());
        emit(&Frame::Entry {
            path: entry.path.clone(),
            mode: MODE_GITLINK,
            stat: wire::Stat::default(),
            body: Body::Known(oid),
        })?;
        entries += 1;
    }
    emit(&Frame::Done { entries })?;
    Ok(entries)
}

/// Whether the worktree-relative `path` is [`ATTACHMENTS_DIR`] or lies in it: where the run
/// sees the files people shared, which no commit carries.
fn in_attachments(path: &[u8]) -> bool {
    path.strip_prefix(ATTACHMENTS_DIR.as_bytes())
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

/// Sends the ignored files under the paths of [`Snapshot::include`] (the others were sent
/// already) with their content; returns how many entries it sent.
fn send_included(
    repo: &Repository,
    files: &Root,
    options: &Snapshot,
    emit: &mut impl FnMut(&Frame) -> Result<(), HelperError>,
) -> Result<u64, HelperError> {
    let mut status = StatusOptions::new();
    status
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(true)
        .recurse_ignored_dirs(true)
        .include_unmodified(false)
        .exclude_submodules(true)
        .disable_pathspec_match(true)
        .update_index(false);
    for path in &options.include {
        check_path(path).map_err(|reason| {
            HelperError::Invalid(format!("include {}: {reason}", wire::show(path)))
        })?;
        if in_attachments(path) {
            return Err(HelperError::Invalid(format!(
                "include {}: the files people shared in the thread are never committed",
                wire::show(path)
            )));
        }
        status.pathspec(std::ffi::OsStr::from_bytes(path));
    }
    let statuses = repo
        .statuses(Some(&mut status))
        .map_err(git("list the included files"))?;
    let mut entries = 0;
    for status in statuses.iter() {
        let path = status.path_bytes().to_vec();
        if !status.status().contains(Status::IGNORED)
            || path.ends_with(b"/")
            || check_path(&path).is_err()
        {
            continue;
        }
        entries += emit_content(files, path, options.max_file_bytes, emit)?;
    }
    Ok(entries)
}

/// Sends the file at `path` with its content (a symlink with its target, a file over
/// `max_file_bytes` as skipped); returns 1 when it sent an entry.
fn emit_content(
    files: &Root,
    path: Vec<u8>,
    max_file_bytes: u64,
    emit: &mut impl FnMut(&Frame) -> Result<(), HelperError>,
) -> Result<u64, HelperError> {
    let shown = wire::show(&path);
    match files
        .read(&rel(&path), max_file_bytes)
        .map_err(io(format!("read {shown}")))?
    {
        Found::File {
            content,
            executable,
            stat,
        } => {
            emit(&Frame::Entry {
                path,
                mode: if executable {
                    MODE_EXECUTABLE
                } else {
                    MODE_FILE
                },
                stat: index_stat(&stat),
                body: Body::Content(content),
            })?;
            Ok(1)
        }
        Found::Symlink { target, stat } => {
            emit(&Frame::Entry {
                path,
                mode: MODE_SYMLINK,
                stat: index_stat(&stat),
                body: Body::Content(target),
            })?;
            Ok(1)
        }
        Found::TooLarge { size } => {
            emit(&Frame::Skipped { path, size })?;
            Ok(0)
        }
        Found::Nothing => Ok(0),
    }
}

/// Puts the tree `tree` (hex id, in the worktree's object store) back into the worktree at
/// `root`: removes every symlink and every file and directory git does not ignore (ignored
/// ones such as build caches stay), writes the tree's files, and reports each as a frame
/// with its new metadata. Returns the number of entries.
pub fn restore(root: &Path, tree: &str, out: &mut impl Write) -> Result<u64, HelperError> {
    let repo = open(root)?;
    let id = git2::Oid::from_str(tree).map_err(git("read the tree id"))?;
    let tree = repo
        .find_tree(id)
        .map_err(git("find the checkpoint's files"))?;
    let files = Root::open(root).map_err(io("open the worktree"))?;

    let mut doomed = Vec::new();
    judge(&repo, &files, Path::new(""), &mut doomed)?;
    for (path, kind) in &doomed {
        let removed = if *kind == Kind::Dir {
            files.remove_empty_dir(path).map(|_| ())
        } else {
            files.remove(path)
        };
        removed.map_err(io(format!("remove {}", path.display())))?;
    }

    let mut blobs = Vec::new();
    let mut bad = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let kind = entry.kind();
        if kind == Some(git2::ObjectType::Blob) || kind == Some(git2::ObjectType::Commit) {
            let mut path = dir.as_bytes().to_vec();
            path.extend_from_slice(entry.name_bytes());
            match check_path(&path) {
                Ok(()) => blobs.push((path, entry.filemode() as u32, entry.id())),
                Err(reason) => {
                    bad = Some(format!("the tree holds {}: {reason}", wire::show(&path)));
                    return git2::TreeWalkResult::Abort;
                }
            }
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(git("walk the checkpoint's files"))?;
    if let Some(bad) = bad {
        return Err(HelperError::Invalid(bad));
    }

    let mut entries = 0u64;
    for (path, mode, id) in blobs {
        let mut oid = [0u8; 20];
        oid.copy_from_slice(id.as_bytes());
        if mode == MODE_GITLINK {
            // A submodule: nothing to write (worktrees never check them out).
            write_frame(
                out,
                &Frame::Entry {
                    path,
                    mode,
                    stat: wire::Stat::default(),
                    body: Body::Known(oid),
                },
            )
            .map_err(io("write to the controller"))?;
            entries += 1;
            continue;
        }
        let blob = repo
            .find_blob(id)
            .map_err(git("read a file of the checkpoint"))?;
        let shown = wire::show(&path);
        let stat = match mode {
            MODE_SYMLINK => files.write_symlink(&rel(&path), blob.content()),
            MODE_EXECUTABLE => files.write_file(&rel(&path), blob.content(), true),
            _ => files.write_file(&rel(&path), blob.content(), false),
        }
        .map_err(io(format!("write {shown}")))?;
        let mode = match mode {
            MODE_SYMLINK | MODE_EXECUTABLE => mode,
            _ => MODE_FILE,
        };
        write_frame(
            out,
            &Frame::Entry {
                path,
                mode,
                stat: index_stat(&stat),
                body: Body::Known(oid),
            },
        )
        .map_err(io("write to the controller"))?;
        entries += 1;
    }
    write_frame(out, &Frame::Done { entries }).map_err(io("write to the controller"))?;
    Ok(entries)
}

/// Lists what [`restore`] removes under `dir`, each directory after its contents: every
/// symlink, and every file and directory git does not ignore. All are judged before any is
/// removed, since removing a `.gitignore` changes what is ignored.
fn judge(
    repo: &Repository,
    files: &Root,
    dir: &Path,
    doomed: &mut Vec<(PathBuf, Kind)>,
) -> Result<(), HelperError> {
    let listed = files
        .list(dir)
        .map_err(io(format!("list {}", dir.display())))?;
    for (name, kind) in listed {
        let path = dir.join(&name);
        if dir.as_os_str().is_empty() && name.as_bytes().eq_ignore_ascii_case(b".git") {
            continue;
        }
        if kind == Kind::Symlink {
            doomed.push((path, kind));
        } else if repo
            .is_path_ignored(&path)
            .map_err(git(format!("check whether {} is ignored", path.display())))?
        {
            continue;
        } else if kind == Kind::Dir {
            judge(repo, files, &path, doomed)?;
            doomed.push((path, kind));
        } else {
            doomed.push((path, kind));
        }
    }
    Ok(())
}
