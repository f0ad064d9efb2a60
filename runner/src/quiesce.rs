//! Stopping every other process of the sandbox before the controller stages the worktree
//! for a commit: a command left running in the background could otherwise change files
//! (or swap one for a symlink) while they are read. The runner is the only process left.
//!
//! This only makes sense inside the sandbox's own PID namespace, where `/proc` lists the
//! sandbox's processes alone: PID 1 is the sandbox's init, and everything else but the
//! runner itself belongs to the run. Without a sandbox (`mode: none`) [`Quiescer::None`]
//! does nothing, since `/proc` would list the host's processes.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Most rounds of looking for and killing processes (a fork racing the first look is
/// caught by the next).
const ROUNDS: usize = 200;
/// Pause between rounds, for the killed to die.
const PAUSE: Duration = Duration::from_millis(5);

/// How the runner quiets its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiescer {
    /// In the sandbox's PID namespace: kill every process but PID 1 and ourselves.
    Sandboxed,
    /// No sandbox: nothing may be killed (`/proc` is the host's).
    None,
}

/// Why the sandbox could not be quieted.
#[derive(Debug, thiserror::Error)]
pub enum QuiesceError {
    #[error("list the sandbox's processes: {0}")]
    List(std::io::Error),
    #[error("{0} processes of the run were still alive after being killed")]
    Survivors(usize),
}

impl Quiescer {
    /// Kills every other process of the sandbox and waits until none is left (zombies
    /// waiting for the init to reap them count as gone). Returns how many were killed.
    pub async fn stop_others(self) -> Result<usize, QuiesceError> {
        if self == Quiescer::None {
            return Ok(0);
        }
        let me = std::process::id();
        let mut killed = 0;
        for _ in 0..ROUNDS {
            let alive = others(me).map_err(QuiesceError::List)?;
            if alive.is_empty() {
                return Ok(killed);
            }
            for pid in alive {
                let Ok(raw) = i32::try_from(pid) else {
                    continue;
                };
                match kill(Pid::from_raw(raw), Signal::SIGKILL) {
                    Ok(()) => killed += 1,
                    // Gone meanwhile.
                    Err(nix::errno::Errno::ESRCH) => {}
                    Err(e) => tracing::warn!("kill process {pid} of the run: {e}"),
                }
            }
            tokio::time::sleep(PAUSE).await;
        }
        let left = others(me).map_err(QuiesceError::List)?.len();
        if left == 0 {
            Ok(killed)
        } else {
            Err(QuiesceError::Survivors(left))
        }
    }
}

/// The live processes of this PID namespace other than PID 1 and `me`.
fn others(me: u32) -> std::io::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == 1 || pid == me {
            continue;
        }
        // A zombie is dead already; its parent (the init) reaps it.
        match std::fs::read_to_string(entry.path().join("stat")) {
            Ok(stat) if zombie(&stat) => continue,
            Ok(_) => pids.push(pid),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(pids)
}

/// Whether process `pid` is running: it exists and is not a zombie (what [`Quiescer`]
/// leaves of a child of the runner it killed, until the runner reaps it).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !zombie(&stat))
}

/// Whether a `/proc/<pid>/stat` line is a zombie's (state `Z` after the command's `)`).
fn zombie(stat: &str) -> bool {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "Z" || state == "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombies_are_recognised_from_their_stat_line() {
        assert!(zombie("42 (sleep) Z 1 42 42 0 -1"));
        assert!(zombie("42 (a) b) Z 1"));
        assert!(!zombie("42 (sleep) S 1 42 42 0 -1"));
        assert!(!zombie("garbage"));
    }

    #[test]
    fn this_process_is_running_and_a_reaped_one_is_not() {
        assert!(running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!running(pid));
    }

    #[tokio::test]
    async fn without_a_sandbox_nothing_is_killed() {
        assert_eq!(Quiescer::None.stop_others().await.unwrap(), 0);
    }
}
