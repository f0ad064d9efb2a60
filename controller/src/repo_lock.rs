//! One daemon per repository: `.codebutler/run/daemon.lock`, held with `flock` for as long
//! as the daemon runs (the kernel lets go of it when the process dies, however it dies), so
//! a second daemon for the same repository refuses to start instead of answering every
//! message twice. `codebutler --cleanup-orphans` takes the same lock for its work, so it
//! never removes anything under a running daemon. The file holds the holder's pid, for the
//! refusal's message; it is never deleted (a stale one means nothing: only the `flock`
//! counts).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
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
        let run = dir.join("run");
        let io_err = |step, path: &Path| {
            let path = path.to_owned();
            move |source| LockError::Io { step, path, source }
        };
        std::fs::create_dir_all(&run).map_err(io_err("create", &run))?;
        let path = run.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(LockError::Held { path, pid });
            }
            Err((_, errno)) => return Err(io_err("lock", &path)(io::Error::from(errno))),
        };
        lock.set_len(0).map_err(io_err("write", &path))?;
        lock.rewind().map_err(io_err("write", &path))?;
        writeln!(lock, "{}", std::process::id()).map_err(io_err("write", &path))?;
        Ok(Self { _lock: lock })
    }
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
}
