//! A repository's own files, read the only ways the controller reads them. Anything in a
//! repository may be a link someone committed — a prompt pointing at
//! `~/.codebutler/config.json` or at `/proc/self/environ` — and reading through it would put
//! the daemon's secrets into a model request. So a repository file is read either
//!
//! - as a commit holds it ([`committed`]): a regular blob (mode `100644` or `100755`) of at
//!   most a given size; a link (`120000`), a submodule or a directory is not a file, and
//!   neither is a path through one; or
//! - from the working copy ([`working`]): reached from the repository's root one component
//!   at a time, each directory opened relative to the last with `O_NOFOLLOW`, so a link
//!   anywhere on the path is refused, even one swapped in while the path is walked; only a
//!   regular file of at most a given size is read (never a FIFO or a device).
//!
//! [`default_branch_tip`] is the commit the default branch's files are read at (memory,
//! prompts): `origin`'s default branch as last fetched, else the local HEAD.

use std::fmt;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use git2::{Oid, Repository};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{Mode, SFlag, fstatat};

/// What reading a repository file found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// A regular file, with its bytes.
    File(Vec<u8>),
    /// Nothing at that path.
    Absent,
    /// Something that is not read, and why.
    Refused(Refusal),
}

/// Why something at a repository path was not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The path is a link, or leads through one.
    Link,
    /// A directory, a submodule, a FIFO, a device or a socket; or a file where the path
    /// needs a directory.
    NotRegular,
    /// A regular file larger than the limit (bytes).
    TooLarge { size: u64, max: u64 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Link => f.write_str("a symbolic link (or a path through one)"),
            Self::NotRegular => f.write_str("not a regular file"),
            Self::TooLarge { size, max } => {
                write!(f, "{size} bytes, more than the {max} read")
            }
        }
    }
}

/// Why a repository file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum RepoFileError {
    #[error("`{0}` is not a relative path inside the repository")]
    Path(String),
    #[error("read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("read {path} at {commit}: {source}")]
    Git {
        path: String,
        commit: String,
        #[source]
        source: git2::Error,
    },
}

/// The file `path` (relative, `/`-separated) as `commit` holds it: a regular blob of at
/// most `max` bytes.
pub fn committed(
    repo: &Repository,
    commit: Oid,
    path: &str,
    max: u64,
) -> Result<Found, RepoFileError> {
    let names = components(path)?;
    let git = |source| RepoFileError::Git {
        path: path.to_owned(),
        commit: commit.to_string(),
        source,
    };
    let mut tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(git)?;
    let Some((last, dirs)) = names.split_last() else {
        return Err(RepoFileError::Path(path.to_owned()));
    };
    for name in dirs {
        let (mode, id) = match tree.get_name(name) {
            Some(entry) => (entry.filemode(), entry.id()),
            None => return Ok(Found::Absent),
        };
        match mode {
            0o040_000 => tree = repo.find_tree(id).map_err(git)?,
            0o120_000 => return Ok(Found::Refused(Refusal::Link)),
            _ => return Ok(Found::Refused(Refusal::NotRegular)),
        }
    }
    let Some(entry) = tree.get_name(last) else {
        return Ok(Found::Absent);
    };
    match entry.filemode() {
        0o100_644 | 0o100_755 => {}
        0o120_000 => return Ok(Found::Refused(Refusal::Link)),
        _ => return Ok(Found::Refused(Refusal::NotRegular)),
    }
    // The size from the object's header, before the blob is loaded.
    let (size, _) = repo
        .odb()
        .and_then(|odb| odb.read_header(entry.id()))
        .map_err(git)?;
    let size = u64::try_from(size).unwrap_or(u64::MAX);
    if size > max {
        return Ok(Found::Refused(Refusal::TooLarge { size, max }));
    }
    let blob = repo.find_blob(entry.id()).map_err(git)?;
    Ok(Found::File(blob.content().to_vec()))
}

/// The working copy's file `path` (relative, `/`-separated) under the repository's root
/// `root`, without following a link in any component: a regular file of at most `max`
/// bytes.
pub fn working(root: &Path, path: &str, max: u64) -> Result<Found, RepoFileError> {
    let names = components(path)?;
    let io_err = |source: Errno| RepoFileError::Io {
        path: path.to_owned(),
        source: io::Error::from(source),
    };
    let Some((last, dirs)) = names.split_last() else {
        return Err(RepoFileError::Path(path.to_owned()));
    };
    let mut dir: OwnedFd = open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io_err)?;
    for name in dirs {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        dir = match openat(&dir, *name, flags, Mode::empty()) {
            Ok(next) => next,
            Err(Errno::ENOENT) => return Ok(Found::Absent),
            Err(Errno::ELOOP) => return Ok(Found::Refused(Refusal::Link)),
            // Not a directory: a link (some systems say ENOTDIR for one) or a file.
            Err(Errno::ENOTDIR) => return Ok(Found::Refused(kind_at(&dir, name))),
            Err(e) => return Err(io_err(e)),
        };
    }
    // Non-blocking, so a FIFO put there cannot hold the open; it is refused below.
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let file = match openat(&dir, *last, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::ENOENT) => return Ok(Found::Absent),
        Err(Errno::ELOOP) => return Ok(Found::Refused(Refusal::Link)),
        Err(Errno::ENOTDIR) => return Ok(Found::Refused(kind_at(&dir, last))),
        Err(e) => return Err(io_err(e)),
    };
    let io = |source| RepoFileError::Io {
        path: path.to_owned(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Ok(Found::Refused(Refusal::NotRegular));
    }
    if meta.len() > max {
        return Ok(Found::Refused(Refusal::TooLarge {
            size: meta.len(),
            max,
        }));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > max {
        // It grew while it was read.
        return Ok(Found::Refused(Refusal::TooLarge { size: read, max }));
    }
    Ok(Found::File(bytes))
}

/// What is at `name` in `dir`, without following it: a link, or something else that is not
/// a regular file.
fn kind_at(dir: &OwnedFd, name: &str) -> Refusal {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK => {
            Refusal::Link
        }
        _ => Refusal::NotRegular,
    }
}

/// The names of a relative path's components; `..`, `.`, an absolute path or an empty one
/// is refused.
fn components(path: &str) -> Result<Vec<&str>, RepoFileError> {
    let refuse = || RepoFileError::Path(path.to_owned());
    if path.is_empty() || path.contains('\0') {
        return Err(refuse());
    }
    Path::new(path)
        .components()
        .map(|c| match c {
            Component::Normal(name) => name.to_str().ok_or_else(refuse),
            _ => Err(refuse()),
        })
        .collect()
}

/// The default branch's tip as last fetched: with an `origin`, `origin/HEAD`'s branch, else
/// `origin/main`, else `origin/master`; without one (or before any fetch), the local HEAD.
/// `None` when the repository cannot be opened or has no commit. Blocking.
pub fn default_branch_tip(repo: &Path) -> Option<String> {
    let repository = Repository::open(repo).ok()?;
    if repository.find_remote("origin").is_ok() {
        let origin_head = repository
            .find_reference("refs/remotes/origin/HEAD")
            .ok()
            .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_owned));
        let candidates = origin_head
            .into_iter()
            .chain(["refs/remotes/origin/main", "refs/remotes/origin/master"].map(str::to_owned));
        for name in candidates {
            if let Ok(commit) = repository
                .find_reference(&name)
                .and_then(|r| r.peel_to_commit())
            {
                return Some(commit.id().to_string());
            }
        }
    }
    let head = repository.head().ok()?.peel_to_commit().ok()?;
    Some(head.id().to_string())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use codebutler_test_support::git;

    use super::*;

    const MAX: u64 = 64;

    fn file(text: &str) -> Found {
        Found::File(text.as_bytes().to_vec())
    }

    /// A regular file is read; a link anywhere on the path — to a file outside, to one
    /// inside, a linked directory — is refused, and so are a FIFO, a directory and a file
    /// over the limit.
    #[test]
    fn the_working_copy_is_read_without_following_links() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "outside-secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git::write_files(
            root,
            &[
                ("p/ok.md", "kept"),
                ("p/big.md", &"x".repeat(65)),
                ("elsewhere/inside.md", "inside"),
            ],
        );
        symlink(&secret, root.join("p/out.md")).unwrap();
        symlink("../elsewhere/inside.md", root.join("p/in.md")).unwrap();
        symlink(outside.path(), root.join("linked")).unwrap();
        symlink("/proc/self/environ", root.join("p/environ.md")).unwrap();
        nix::unistd::mkfifo(&root.join("p/fifo.md"), Mode::S_IRWXU).unwrap();

        assert_eq!(working(root, "p/ok.md", MAX).unwrap(), file("kept"));
        assert_eq!(working(root, "p/none.md", MAX).unwrap(), Found::Absent);
        assert_eq!(working(root, "q/none.md", MAX).unwrap(), Found::Absent);
        for linked in ["p/out.md", "p/in.md", "p/environ.md", "linked/secret.txt"] {
            assert_eq!(
                working(root, linked, MAX).unwrap(),
                Found::Refused(Refusal::Link),
                "{linked}"
            );
        }
        for odd in ["p/fifo.md", "p", "p/ok.md/x"] {
            assert_eq!(
                working(root, odd, MAX).unwrap(),
                Found::Refused(Refusal::NotRegular),
                "{odd}"
            );
        }
        assert_eq!(
            working(root, "p/big.md", MAX).unwrap(),
            Found::Refused(Refusal::TooLarge { size: 65, max: MAX })
        );
        for bad in ["../x", "/etc/passwd", "p/../p/ok.md", "", "./p/ok.md"] {
            assert!(
                matches!(working(root, bad, MAX), Err(RepoFileError::Path(_))),
                "{bad}"
            );
        }
    }

    /// A committed regular blob is read; a committed link, a path through one, a
    /// submodule-like entry or a directory is not, nor a blob over the limit.
    #[test]
    fn a_commit_is_read_for_its_regular_blobs_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = git::init(root);
        git::write_files(
            root,
            &[
                ("p/ok.md", "kept"),
                ("p/big.md", &"x".repeat(65)),
                ("d/inner.md", "inner"),
            ],
        );
        symlink("/proc/self/environ", root.join("p/environ.md")).unwrap();
        symlink("d", root.join("dlink")).unwrap();
        let commit = git::commit_all(&repo, "files and links");

        let read = |path| committed(&repo, commit, path, MAX).unwrap();
        assert_eq!(read("p/ok.md"), file("kept"));
        assert_eq!(read("d/inner.md"), file("inner"));
        assert_eq!(read("p/none.md"), Found::Absent);
        assert_eq!(read("p/environ.md"), Found::Refused(Refusal::Link));
        assert_eq!(read("dlink/inner.md"), Found::Refused(Refusal::Link));
        assert_eq!(read("p"), Found::Refused(Refusal::NotRegular));
        assert_eq!(read("p/ok.md/x"), Found::Refused(Refusal::NotRegular));
        assert_eq!(
            read("p/big.md"),
            Found::Refused(Refusal::TooLarge { size: 65, max: MAX })
        );
    }
}
