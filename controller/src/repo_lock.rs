//! One daemon per repository: `.codebutler/run/daemon.lock`, held with `flock` for as long
//! as the daemon runs (the kernel lets go of it when the process dies, however it dies), so
//! a second daemon for the same repository refuses to start instead of answering every
//! message twice. `codebutler --cleanup-orphans` takes the same lock for its work, so it
//! never removes anything under a running daemon. The file holds the holder's pid, for the
//! refusal's message; it is never deleted (a stale one means nothing: only the `flock`
//! counts).
//!
//! The same helpers serve every one-process-only lock ([`exclusive`]; the Slack app's is
//! [`crate::service::app_lock`]) and `codebutler --status`, which asks the kernel who holds
//! a lock ([`holder`]) without taking it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// The lock file's name in `.codebutler/run/`.
pub const LOCK_FILE: &str = "daemon.lock";

/// The repository's lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "a CodeButler daemon{} is running for this repository ({}); stop it first",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        path.display()
    )]
    Held { path: PathBuf, pid: Option<u32> },
    #[error(
        "{} is a symbolic link (a repository can commit one there); the daemon never writes \
         through one: remove it",
        path.display()
    )]
    Link { path: PathBuf },
    #[error("{step} {}: {source}", path.display())]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The repository's lock, held until dropped.
#[derive(Debug)]
pub struct RepoLock {
    _lock: Flock<File>,
}

impl RepoLock {
    /// Takes the lock of the repository whose state directory is `dir` (`.codebutler`),
    /// without waiting: [`LockError::Held`] when a daemon (or a cleanup) holds it. Blocking
    /// (a file open and a non-blocking `flock`).
    pub fn take(dir: &Path) -> Result<Self, LockError> {
        let path = dir.join("run").join(LOCK_FILE);
        Ok(Self {
            _lock: exclusive(&path)?,
        })
    }
}

/// The path of the lock of the repository whose state directory is `dir`.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join("run").join(LOCK_FILE)
}

/// Takes an exclusive `flock` on `path` (creating it and its directory), without waiting,
/// and writes this process's pid into it. [`LockError::Held`] carries the pid the holder
/// wrote. Shared by every one-process-only lock (a repository's, a Slack app's).
pub fn exclusive(path: &Path) -> Result<Flock<File>, LockError> {
    let io_err = |step, path: &Path| {
        let path = path.to_owned();
        move |source| LockError::Io { step, path, source }
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    }
    // Never through a link at its place (a repository could commit one under
    // `.codebutler/run/`): the pid would be written into the link's target.
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => LockError::Link {
                path: path.to_owned(),
            },
            _ => io_err("open", path)(source),
        })?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
            let mut text = String::new();
            let pid = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            return Err(LockError::Held {
                path: path.to_owned(),
                pid,
            });
        }
        Err((_, errno)) => return Err(io_err("lock", path)(io::Error::from(errno))),
    };
    lock.set_len(0).map_err(io_err("write", path))?;
    lock.rewind().map_err(io_err("write", path))?;
    writeln!(lock, "{}", std::process::id()).map_err(io_err("write", path))?;
    Ok(lock)
}

/// The pid of the process holding a `flock` on `path`, read from the kernel's lock table
/// (`/proc/locks`) without touching the lock — so asking never makes a starting daemon
/// fail. `None` when nobody holds it (or the file does not exist). Linux only; elsewhere an
/// error.
pub fn holder(path: &Path) -> io::Result<Option<u32>> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let locks = std::fs::read_to_string("/proc/locks")?;
    Ok(holder_in(&locks, meta.dev(), meta.ino()))
}

/// The pid of the `FLOCK` entry of `/proc/locks` text `locks` on the file with device
/// `dev` and inode `ino` (an entry reads `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`,
/// device numbers in hex, the inode in decimal; waiters are marked `->` and skipped).
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let major = nix::sys::stat::major(dev);
    let minor = nix::sys::stat::minor(dev);
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let pid = fields.get(4)?.parse().ok()?;
        let mut id = fields.get(5)?.split(':');
        let (maj, min, inode) = (id.next()?, id.next()?, id.next()?);
        let same = u64::from_str_radix(maj, 16).ok()? == major
            && u64::from_str_radix(min, 16).ok()? == minor
            && inode.parse::<u64>().ok()? == ino;
        same.then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = RepoLock::take(dir.path()).unwrap();
        let e = RepoLock::take(dir.path()).unwrap_err();
        let pid = std::process::id();
        assert!(
            matches!(e, LockError::Held { pid: Some(p), .. } if p == pid),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("a CodeButler daemon (pid {pid}) is running")),
            "{e}"
        );
        drop(first);
        let again = RepoLock::take(dir.path()).unwrap();
        drop(again);
        assert!(dir.path().join("run").join(LOCK_FILE).is_file());
    }

    /// A lock file made a link (to a host file) is refused, and the file it points at is
    /// left as it was: the pid is never written through it.
    #[test]
    fn a_lock_file_that_is_a_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("authorized_keys");
        std::fs::write(&target, "ssh-ed25519 kept\n").unwrap();
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        std::os::unix::fs::symlink(&target, lock_path(dir.path())).unwrap();
        let e = RepoLock::take(dir.path()).unwrap_err();
        assert!(matches!(e, LockError::Link { .. }), "{e:?}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "ssh-ed25519 kept\n"
        );
    }

    #[test]
    fn the_holder_is_read_from_the_kernel_without_taking_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(dir.path());
        assert_eq!(holder(&path).unwrap(), None, "no file, no holder");
        let lock = RepoLock::take(dir.path()).unwrap();
        assert_eq!(holder(&path).unwrap(), Some(std::process::id()));
        // Asking did not take it: it is still ours, and free once dropped.
        assert!(matches!(
            RepoLock::take(dir.path()),
            Err(LockError::Held { .. })
        ));
        drop(lock);
        assert_eq!(holder(&path).unwrap(), None);
    }

    #[test]
    fn proc_locks_lines_are_matched_by_device_and_inode() {
        let dev = nix::sys::stat::makedev(0xfd, 0x01);
        let locks = "1: POSIX  ADVISORY  WRITE 11 fd:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 22 fd:02:77 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 33 fd:01:77 0 EOF\n";
        assert_eq!(holder_in(locks, dev, 77), Some(33));
        assert_eq!(holder_in(locks, dev, 78), None);
    }
}
