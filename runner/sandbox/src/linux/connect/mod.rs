//! How the sandbox's PID 1 performs the `connect` calls the connect filter
//! ([`super::notify`]) hands it, so that a sandboxed process reaches no endpoint outside
//! the sandbox but the one it was given (the hub, fd 3, connected before the sandbox began).
//!
//! For each call PID 1:
//! 1. opens the caller's `/proc/<tid>` and a pidfd, then checks that the call is still
//!    pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`), so that both refer to the caller and not to
//!    a process that reused its id ([`caller`]);
//! 2. takes the caller's socket (`pidfd_getfd`: the same open socket, not a new one) and
//!    copies the address out of its memory (`/proc/<tid>/mem`), once: what the caller
//!    writes afterwards changes nothing;
//! 3. decides on the copy ([`address::plan`]): a pathname on a Unix socket is opened
//!    `O_PATH` as the caller would find it (relative to its working directory, symlinks
//!    followed) and must lie on one of the sandbox's own writable mounts — the worktree,
//!    `/tmp`, `/dev/shm`, compared by mount id — or the answer is `EACCES`; PID 1 then
//!    connects through `/proc/self/fd/<n>` of that descriptor, so the path cannot be
//!    swapped in between. An abstract name is connected as given: the sandbox's own network
//!    namespace keeps it inside, or with `network: true` Landlock's abstract-socket scope,
//!    which PID 1 is under as well (on a kernel without that scope, Landlock ABI < 6, an
//!    abstract name is refused with `network: true`). An inet address (only with
//!    `network: true`) is connected as given;
//! 4. connects without blocking ([`attempt`]) and answers with the kernel's result.
//!
//! What differs from the kernel's own `connect`: the listening side sees PID 1 as its peer
//! (`SO_PEERCRED` says pid 1, with the same uid and gid); a process that made itself
//! non-dumpable cannot have its socket taken and gets `EPERM` (the runner itself never
//! connects: the hub is already connected); a process that added a Landlock domain of its
//! own is connected with the sandbox's domain, so its own abstract-socket scope does not
//! apply to `connect`; while PID 1 finishes a connect the kernel would have waited on, only
//! a fatal signal interrupts the caller. The cost is one round trip to PID 1 and a dozen
//! system calls per `connect` (about 70 µs: `cargo bench -p codebutler-runner --bench
//! connect`); nothing else (`send`, `write`, `accept`) is intercepted.

mod address;
mod attempt;
mod caller;

use std::ffi::CString;
use std::path::Path;
use std::time::Instant;

use nix::errno::Errno;

pub use address::{Plan, plan};
pub(crate) use attempt::Pending;
use attempt::{Attempt, Destination};
use caller::{Caller, MAX_ADDRESS};

use super::error::{SandboxError, Step};
use super::notify::{Listener, Notification};

/// What PID 1 lets a `connect` reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Mount ids of the sandbox's own writable mounts: the worktree, `/tmp`, `/dev/shm`.
    pub own_mounts: Vec<u64>,
    /// Whether abstract names may be connected (not with `network: true` on a kernel
    /// without Landlock's abstract-socket scope).
    pub abstract_allowed: bool,
    /// The audit architecture calls must come from.
    pub arch: u32,
}

/// Landlock ABI that scopes abstract Unix sockets.
const ABSTRACT_SCOPE_ABI: i32 = 6;

impl Policy {
    /// Reads the mount ids of the worktree's `mount_point`, `/tmp` and `/dev/shm`, in the
    /// sandbox's new root.
    pub(crate) fn read(
        mount_point: &Path,
        network: bool,
        landlock_abi: i32,
        arch: u32,
    ) -> Result<Self, SandboxError> {
        let mut own_mounts = Vec::new();
        for path in [mount_point, Path::new("/tmp"), Path::new("/dev/shm")] {
            let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
                SandboxError::new(Step::ConnectPolicy, format!("{} has a NUL", path.display()))
            })?;
            let id = caller::path_mount_id(&c).map_err(|e| {
                SandboxError::new(
                    Step::ConnectPolicy,
                    format!("statx {} (STATX_MNT_ID): {e}", path.display()),
                )
            })?;
            own_mounts.push(id);
        }
        Ok(Self {
            own_mounts,
            abstract_allowed: !network || landlock_abi >= ABSTRACT_SCOPE_ABI,
            arch,
        })
    }
}

/// A warning when Yama (`kernel.yama.ptrace_scope` 2 or 3) forbids PID 1 to attach to the
/// sandbox's processes: `pidfd_getfd` and `/proc/<tid>/mem` need that, so every `connect`
/// inside would fail (closed) with `EPERM`. (Scope 1 allows it: PID 1 is every sandboxed
/// process's ancestor.)
pub fn yama_warning() -> Option<String> {
    let scope: u32 = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (scope >= 2).then(|| {
        format!(
            "kernel.yama.ptrace_scope is {scope}: the sandbox cannot perform connect for its \
             processes, so every connect inside fails with EPERM (Unix servers inside \
             cannot be reached)"
        )
    })
}

/// What became of one call.
#[derive(Debug)]
pub(crate) enum Served {
    /// Answer the caller with this.
    Answer(Result<(), Errno>),
    /// The connect goes on; answer when it ends.
    Pending(Pending),
    /// The caller went away; there is no one to answer.
    Gone,
}

/// Performs the `connect` of notification `n` under `policy`.
pub(crate) fn serve(listener: &Listener, n: &Notification, policy: &Policy) -> Served {
    if n.nr != libc::SYS_connect as i32 || n.arch != policy.arch {
        return Served::Answer(Err(Errno::ENOSYS));
    }
    let caller = Caller::open(n.tid);
    if !listener.is_valid(n.id) {
        return Served::Gone;
    }
    match connect_for(caller, n, policy) {
        Ok(Attempt::Done(result)) => Served::Answer(result),
        Ok(Attempt::Pending(p)) => Served::Pending(p),
        Err(e) => Served::Answer(Err(e)),
    }
}

/// Steps 2 to 4, in the kernel's order of errors: the descriptor (`EBADF`), the address
/// (`EINVAL`, `EFAULT`), the socket (`ENOTSOCK`), then the connect itself.
fn connect_for(
    caller: Result<Caller, Errno>,
    n: &Notification,
    policy: &Policy,
) -> Result<Attempt, Errno> {
    let caller = caller?;
    let [fd, addr, len, ..] = n.args;
    let sock = caller.take_fd(fd)?;
    // The kernel reads the length as an int.
    let len = usize::try_from(len as u32 as i32).map_err(|_| Errno::EINVAL)?;
    if len > MAX_ADDRESS {
        return Err(Errno::EINVAL);
    }
    let address = caller.read(addr, len)?;
    let kind = attempt::socket_kind(&sock)?;
    let destination = match plan(kind.0, &address, policy.abstract_allowed, n.tid) {
        Plan::Refuse(e) => return Err(e),
        Plan::AsGiven => Destination::Address(address),
        Plan::Path(path) => {
            let fd = caller.open_path(&path)?;
            if !policy.own_mounts.contains(&caller::mount_id(&fd)?) {
                return Err(Errno::EACCES);
            }
            Destination::Path(fd)
        }
    };
    Ok(attempt::start(
        n.id,
        sock,
        kind,
        destination,
        Instant::now(),
    ))
}
