//! The Linux implementation of the sandbox: what `codebutler-runner` enters at start, before any other
//! thread exists, so that a model's commands run with the worktree read-write, the system
//! read-only, a private `/tmp`, no network, no secrets and kernel-enforced limits.
//! Every step is checked and named ([`Step`]); any failure is fatal (fail closed); the only
//! opt-out is the spec's explicit `"mode": "none"`.
//!
//! The set-up is computed first as plain data — the host facts ([`resolve::HostLayout`]),
//! the mount plan ([`plan::plan_mounts`]), the Landlock rules ([`plan::landlock_rules`]),
//! the seccomp rules ([`seccomp::rules`]) and the rlimits ([`limits::rlimits`]) — and then
//! applied by thin layers, one checked call per system call.
//!
//! # Processes
//!
//! ```text
//! runner (host PID namespace)            supervisor: waits, forwards SIGTERM/INT/HUP/QUIT,
//!   │ unshare(user, mount, pid, …)       removes the cgroups, exits with the sandbox's status
//!   └─ fork ─ PID 1 of the new namespace  builds the sandbox, then acts as its init: reaps
//!              │                           orphans, forwards signals, performs connects,
//!              │                           exits with its child's status (which kills
//!              │                           everything left inside)
//!              └─ fork ─ the sandboxed process: `enter` returns here
//! ```
//!
//! The sandboxed process is not PID 1, so it keeps ordinary signal semantics (PID 1 ignores
//! signals it has no handler for) and orphans of its commands are reaped for it. PID 1 is
//! not under the connect filter, so that it can perform, after its checks, the `connect`
//! calls the filter hands it ([`notify`], [`connect`], [`init`]): no sandboxed process
//! reaches a Unix socket outside the sandbox's own writable mounts.
//!
//! # Order of operations
//!
//! In the runner (single-threaded, host view):
//! 1. **Resolve** the worktree and its `.git` directory (its thread's own repository; a
//!    `gitdir:` file of a linked worktree is refused, since it would expose the main
//!    repository's metadata) and the object stores its `objects/info/alternates` names: all
//!    must stay read-only inside, since the controller commits there with git2, so the
//!    runner must not plant hooks, change `config` or move refs. Canonicalize the `readOnly` paths; look at `/usr`,
//!    `/bin`, `/lib*`, `/etc`, the secrets under them, the devices; read the mount flags of
//!    every bind source. Validate the spec against all of it; compute the plans; probe the
//!    kernel's Landlock ABI (missing or older than 3 is an error). Create the `pids` and
//!    `memory` cgroups (skipped, and reported, where the cgroup filesystem is missing or
//!    not writable — except that a runner running as host root must have a pids cgroup,
//!    because `RLIMIT_NPROC` does not apply to uid 0; a cgroup it runs in already, which it
//!    cannot write and whose limit is at most the spec's, counts: a container's).
//! 2. Block the signals the supervisors wait for. **`unshare`** the user, mount, PID,
//!    network, IPC and UTS namespaces; write `deny` to `setgroups` and map the current
//!    uid/gid to themselves (`"<uid> <uid> 1"`). For a runner started as root this makes
//!    root-inside the host's root for file ownership: acceptable because every capability
//!    is dropped in step 7 and everything but the worktree, `/tmp` and `/dev/shm` is
//!    mounted read-only (including the `/proc` entries root owns, such as `/proc/sys` and
//!    `/proc/sysrq-trigger`), with Landlock denying writes there as a second layer.
//! 3. **`fork`**: the child is PID 1 of the new PID namespace; the runner becomes the
//!    supervisor (closes every descriptor but its lifeline and the cgroup directories).
//!
//! In PID 1 of the sandbox:
//! - `PR_SET_PDEATHSIG(SIGKILL)` (then check the lifeline pipe, in case the supervisor
//!   died before), join the cgroups, `unshare` the cgroup namespace (rooted at the sandbox's
//!   cgroup), set the hostname.
//! 4. **Mounts** ([`mounts`]): make `/` recursively private; stage a tmpfs over `/tmp` in
//!    this namespace and pivot into it, keeping the host root at `/oldroot`; assemble
//!    `/newroot` from the plan — read-only binds of `/usr`, `/etc` (secrets hidden under
//!    empty files and tmpfs), `/lib*` (symlinks recreated as symlinks) and the `readOnly`
//!    paths (cargo `credentials` hidden); a size-capped tmpfs `/tmp` with `/tmp/home`; the
//!    worktree read-write at the mount point with its `.git` read-only over itself and the
//!    spec's `attachments` read-only at `.codebutler-attachments` in it (through
//!    descriptors that resolve no links: the runner writes that directory); the
//!    object stores of its alternates read-only at their own absolute paths (so git inside
//!    still finds them); a minimal
//!    `/dev`; a new `/proc` with its root-owned knobs re-bound read-only — detach the old
//!    root, `pivot_root` into `/newroot`, remount it read-only, `chdir` to the mount point.
//!    Binds are not recursive: submounts of an exposed path stay invisible — except where
//!    the kernel refuses to separate them (mounts that came locked with the namespace, as
//!    a container engine's `/etc/hostname`): a read-only bind then takes them along, each
//!    remounted read-only.
//! 5. **Network**: bring `lo` up; there is no other interface. With the spec's
//!    `network: true` (only the controller's worktree preparation asks for it) there is no
//!    new network namespace: the host's network stays, and steps 8 and 9 allow TCP and
//!    `AF_INET`/`AF_INET6` sockets; every other step is the same.
//! 6. **Limits**: `RLIMIT_NPROC`, `RLIMIT_AS`, `RLIMIT_FSIZE`, `RLIMIT_CPU`, `RLIMIT_CORE=0`,
//!    `RLIMIT_NOFILE`.
//! 7. **Privileges**: `PR_SET_NO_NEW_PRIVS`, `PR_SET_DUMPABLE 0`, lock the securebits, drop
//!    the bounding, ambient, effective, permitted and inheritable capabilities (verified).
//! 8. **Landlock** with every right of the kernel's ABI handled, fully enforced or an error.
//! 9. **seccomp** ([`seccomp`]): the rule list, which PID 1 and the sandboxed process share
//!    (all but `pidfd_getfd`, which PID 1 needs). Read the mount ids of the worktree,
//!    `/tmp` and `/dev/shm` (the only places a pathname `connect` may lead:
//!    [`connect::Policy`]); make the socket pair the connect filter's listener will cross.
//! - `fork` the sandboxed process; receive the listener from it, acknowledge, and become
//!   its init ([`init`]): reap, forward signals, serve `connect`.
//!
//! In the sandboxed process:
//! 10. **Its own seccomp filters**: refuse `pidfd_getfd`; install the connect filter
//!     ([`notify`]: `connect` is handed to PID 1, with a new listener and killable waits);
//!     send the listener to PID 1, close it (checked), wait for PID 1's acknowledgement.
//! 11. Restore the signal mask, `PR_SET_PDEATHSIG(SIGKILL)`, replace the environment by
//!     [`clean_env`], close every descriptor above 2 not in `keepFds`, and return the
//!     [`SandboxReport`] to the caller (which execs a command, or runs the agent loop).
//!
//! # Must be called single-threaded
//!
//! [`enter`] checks that the process has exactly one thread: namespaces, no-new-privs,
//! Landlock and seccomp apply to the calling thread, and `fork` copies only it. Call it
//! first thing in `main`, before any runtime starts.

#![allow(unsafe_code)]

mod caps;
pub mod cgroup;
pub mod connect;
pub mod error;
pub mod fds;
mod init;
pub mod landlock;
pub mod limits;
mod mounts;
mod net;
pub mod notify;
pub mod plan;
pub mod resolve;
pub mod seccomp;

use std::ffi::OsString;
use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl;
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, signal, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{
    ForkResult, Pid, chdir, fork, getgid, getppid, getuid, pipe2, read, sethostname,
};
use serde::Serialize;

pub use cgroup::{CgroupReport, CgroupStatus};
pub use error::{SandboxError, Step};
pub use limits::Rlimit;

use error::AtStep;

use crate::spec::{HOME_INSIDE, SandboxMode, SandboxSpec, clean_env};

/// What the sandbox came up with; returned in the sandboxed process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxReport {
    /// `enforce`, or `none` when the operator opted out.
    pub mode: SandboxMode,
    /// The Landlock ABI enforced (`None` without a sandbox).
    pub landlock_abi: Option<i32>,
    /// Number of seccomp rules installed.
    pub seccomp_rules: usize,
    /// The cgroups used or skipped (`None` without a sandbox).
    pub cgroup: Option<CgroupReport>,
    /// The rlimits set.
    pub rlimits: Vec<Rlimit>,
    /// Whether the host's network was kept (`network: true` in the spec).
    pub network: bool,
    /// Things an operator should know (a skipped cgroup, a disabled sandbox).
    pub warnings: Vec<String>,
}

/// The warning of `"mode": "none"`.
pub const DISABLED_WARNING: &str = "SANDBOX DISABLED: the spec says \"mode\": \"none\"; \
     commands run with the runner's full rights on this host (no namespaces, no Landlock, \
     no seccomp, no limits)";

/// Signals the supervisor and the sandbox's init wait for (blocked, then `sigwait`ed).
fn supervised_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        set.add(s);
    }
    set
}

/// Everything computed before the first effect.
struct Prepared {
    mounts: Vec<plan::MountOp>,
    landlock_rules: Vec<plan::LandlockRule>,
    landlock_abi: i32,
    seccomp_programs: Vec<seccompiler::BpfProgram>,
    sandboxed_seccomp_programs: Vec<seccompiler::BpfProgram>,
    connect_filter: seccompiler::BpfProgram,
    audit_arch: u32,
    seccomp_rules: usize,
    rlimits: Vec<Rlimit>,
    env: std::collections::BTreeMap<String, String>,
}

/// Enters the sandbox described by `spec`.
///
/// Returns only in the sandboxed process (or with an error of the step that failed, in
/// whichever process it failed). The calling process becomes the supervisor and never
/// returns: it waits for the sandbox and `exit`s with its status (128 + signal if killed).
/// Must be called while the process has a single thread.
pub fn enter(spec: &SandboxSpec) -> Result<SandboxReport, SandboxError> {
    if spec.mode == SandboxMode::None {
        chdir(&spec.worktree).at(Step::ChdirMountPoint, || {
            format!("chdir {}", spec.worktree.display())
        })?;
        return Ok(SandboxReport {
            mode: SandboxMode::None,
            landlock_abi: None,
            seccomp_rules: 0,
            cgroup: None,
            rlimits: Vec::new(),
            network: true,
            warnings: vec![DISABLED_WARNING.to_owned()],
        });
    }

    check_single_thread()?;
    let layout = resolve::resolve(spec)?;
    let seccomp_rules = seccomp::rules(spec.network);
    let arch = seccomp::target_arch()?;
    let prepared = Prepared {
        mounts: plan::plan_mounts(spec, &layout),
        landlock_rules: plan::landlock_rules(spec, &layout),
        landlock_abi: landlock::kernel_abi()?,
        seccomp_programs: seccomp::compile(&seccomp_rules, arch)?,
        sandboxed_seccomp_programs: seccomp::compile_sandboxed_only(arch)?,
        connect_filter: notify::connect_filter(arch),
        audit_arch: notify::audit_arch(arch),
        // The rule list, the sandboxed process's own rules, and `connect` (notified).
        seccomp_rules: seccomp_rules.len() + seccomp::sandboxed_only_rules().len() + 1,
        rlimits: limits::rlimits(&spec.limits),
        env: clean_env(Path::new(HOME_INSIDE), &spec.env),
    };

    let cgroups = cgroup::create(&spec.limits, std::process::id())?;
    let mut warnings = Vec::new();
    for (name, status) in [
        ("pids", &cgroups.report.pids),
        ("memory", &cgroups.report.memory),
    ] {
        if let CgroupStatus::Skipped { reason } = status {
            warnings.push(format!(
                "no {name} cgroup ({reason}); only the rlimits apply"
            ));
        }
    }
    warnings.extend(connect::yama_warning());
    // An enclosing cgroup with a limit at most the spec's holds too (a container's): its
    // status is `Enclosing`, not `Skipped`.
    if getuid().is_root() && matches!(cgroups.report.pids, CgroupStatus::Skipped { .. }) {
        cgroup::cleanup(&cgroups.created);
        return Err(SandboxError::new(
            Step::CreateCgroup,
            "the runner runs as root, which RLIMIT_NPROC does not limit, and no pids cgroup \
             could be created: the process limit would not hold",
        ));
    }
    let report = SandboxReport {
        mode: SandboxMode::Enforce,
        landlock_abi: Some(prepared.landlock_abi),
        seccomp_rules: prepared.seccomp_rules,
        cgroup: Some(cgroups.report.clone()),
        rlimits: prepared.rlimits.clone(),
        network: spec.network,
        warnings,
    };

    let forked = match unshare_and_fork(spec.network) {
        Ok(v) => v,
        Err(e) => {
            cgroup::cleanup(&cgroups.created);
            return Err(e);
        }
    };
    match forked.child {
        Some(child) => supervise(child, &cgroups, forked.lifeline_write),
        None => {
            drop(forked.lifeline_write);
            sandbox_init(
                spec,
                prepared,
                cgroups,
                forked.lifeline_read,
                forked.old_mask,
            )?;
            Ok(report)
        }
    }
}

fn check_single_thread() -> Result<(), SandboxError> {
    let threads = fs::read_dir("/proc/self/task")
        .at(Step::CheckSingleThread, || "read /proc/self/task".into())?
        .count();
    if threads != 1 {
        return Err(SandboxError::new(
            Step::CheckSingleThread,
            format!(
                "the process has {threads} threads; the sandbox must be entered before any other thread starts"
            ),
        ));
    }
    Ok(())
}

/// What steps 2 and 3 leave to each side of the fork.
struct Forked {
    /// The signal mask before the supervised signals were blocked.
    old_mask: SigSet,
    /// The lifeline's read end (for the child).
    lifeline_read: OwnedFd,
    /// The lifeline's write end (kept by the parent only).
    lifeline_write: OwnedFd,
    /// In the parent, the child's pid; `None` in the child.
    child: Option<Pid>,
}

/// Steps 2 and 3: block signals, unshare (the network namespace too unless `network`), map
/// ids, fork.
fn unshare_and_fork(network: bool) -> Result<Forked, SandboxError> {
    // SAFETY: restoring the default disposition of SIGCHLD installs no handler; it makes
    // sure an inherited SIG_IGN does not auto-reap the children the supervisors wait for.
    unsafe { signal(Signal::SIGCHLD, SigHandler::SigDfl) }
        .at(Step::BlockSignals, || "signal(SIGCHLD, SIG_DFL)".into())?;
    let mut old_mask = SigSet::empty();
    sigprocmask(
        SigmaskHow::SIG_BLOCK,
        Some(&supervised_signals()),
        Some(&mut old_mask),
    )
    .at(Step::BlockSignals, || "sigprocmask(SIG_BLOCK)".into())?;

    let uid = getuid();
    let gid = getgid();
    let mut namespaces = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if !network {
        namespaces |= CloneFlags::CLONE_NEWNET;
    }
    unshare(namespaces).at(Step::Unshare, || {
        if network {
            "unshare(user, mount, pid, ipc, uts)".into()
        } else {
            "unshare(user, mount, pid, net, ipc, uts)".into()
        }
    })?;
    fs::write("/proc/self/setgroups", "deny").at(Step::WriteSetgroups, || {
        "write deny to /proc/self/setgroups".into()
    })?;
    fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
        .at(Step::WriteUidMap, || format!("map uid {uid}"))?;
    fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
        .at(Step::WriteGidMap, || format!("map gid {gid}"))?;

    let (lifeline_read, lifeline_write) =
        pipe2(OFlag::O_CLOEXEC).at(Step::CreateLifeline, || "pipe2".into())?;
    // SAFETY: the process is single-threaded (checked by check_single_thread), so the child
    // starts with consistent memory and no lock held by another thread.
    let child = match unsafe { fork() }.at(Step::ForkInit, || "fork".into())? {
        ForkResult::Parent { child } => Some(child),
        ForkResult::Child => None,
    };
    Ok(Forked {
        old_mask,
        lifeline_read,
        lifeline_write,
        child,
    })
}

/// The runner after the fork: wait for the sandbox, forward signals, clean up, exit.
fn supervise(child: Pid, cgroups: &cgroup::Cgroups, lifeline: OwnedFd) -> ! {
    let mut keep: Vec<RawFd> = vec![lifeline.as_raw_fd()];
    for cg in &cgroups.created {
        keep.extend(cg.raw_fds());
    }
    if let Err(e) = fds::close_all_except(&keep) {
        eprintln!("codebutler-runner: supervisor: {e}");
    }
    let code = wait_forwarding(child, &supervised_signals());
    for problem in cgroup::cleanup(&cgroups.created) {
        eprintln!("codebutler-runner: warning: {problem}");
    }
    drop(lifeline);
    std::process::exit(code)
}

/// Waits for `child` while forwarding termination signals to it. Returns the exit code to
/// propagate. (The sandbox's PID 1 has its own loop: [`init`].)
fn wait_forwarding(child: Pid, signals: &SigSet) -> i32 {
    loop {
        let sig = match signals.wait() {
            Ok(s) => s,
            Err(Errno::EINTR) => continue,
            Err(e) => {
                eprintln!("codebutler-runner: sigwait: {e}");
                return 125;
            }
        };
        if sig != Signal::SIGCHLD {
            match kill(child, sig) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => eprintln!("codebutler-runner: forward {sig}: {e}"),
            }
            continue;
        }
        loop {
            match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => return code,
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => return 128 + sig as i32,
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Ok(_) => continue,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    eprintln!("codebutler-runner: waitpid: {e}");
                    return 125;
                }
            }
        }
    }
}

/// PID 1 of the sandbox: steps 4 to 9, then fork the sandboxed process (which runs step 10)
/// and act as init.
/// Returns only in the sandboxed process.
fn sandbox_init(
    spec: &SandboxSpec,
    prepared: Prepared,
    cgroups: cgroup::Cgroups,
    lifeline: OwnedFd,
    old_mask: SigSet,
) -> Result<(), SandboxError> {
    prctl::set_pdeathsig(Signal::SIGKILL).at(Step::ParentDeathSignal, || {
        "prctl(PR_SET_PDEATHSIG, SIGKILL)".into()
    })?;
    // The supervisor holds the only write end: EOF means it is already gone.
    nix::fcntl::fcntl(
        lifeline.as_fd(),
        nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK),
    )
    .at(Step::ParentDeathSignal, || {
        "make the lifeline non-blocking".into()
    })?;
    match read(lifeline.as_fd(), &mut [0u8; 1]) {
        Err(Errno::EAGAIN) => {}
        Ok(_) => {
            return Err(SandboxError::new(
                Step::ParentDeathSignal,
                "the supervisor exited before the sandbox started",
            ));
        }
        Err(e) => {
            return Err(SandboxError::new(
                Step::ParentDeathSignal,
                format!("read the lifeline: {e}"),
            ));
        }
    }
    drop(lifeline);

    cgroup::join(&cgroups.created)?;
    drop(cgroups);
    unshare(CloneFlags::CLONE_NEWCGROUP)
        .at(Step::UnshareCgroupNamespace, || "unshare(cgroup)".into())?;
    sethostname(&spec.hostname).at(Step::SetHostname, || {
        format!("sethostname {}", spec.hostname)
    })?;

    mounts::build_root(&prepared.mounts, &spec.mount_point)?;
    if !spec.network {
        net::loopback_up()?;
    }
    limits::apply(&prepared.rlimits)?;
    caps::no_new_privs()?;
    caps::not_dumpable()?;
    caps::lock_securebits()?;
    caps::drop_all()?;
    landlock::enforce(
        &prepared.landlock_rules,
        prepared.landlock_abi,
        spec.network,
    )?;
    seccomp::install(&prepared.seccomp_programs)?;
    let policy = connect::Policy::read(
        &spec.mount_point,
        spec.network,
        prepared.landlock_abi,
        prepared.audit_arch,
    )?;
    let (init_end, sandboxed_end) = UnixStream::pair().at(Step::ConnectFilter, || {
        "socketpair for the listener's handover".into()
    })?;

    // SAFETY: still single-threaded (this process was forked from a single thread and
    // started none).
    match unsafe { fork() }.at(Step::ForkSandboxed, || "fork".into())? {
        ForkResult::Parent { child } => {
            drop(sandboxed_end);
            // The init keeps nothing the sandboxed process was given (the hub socket).
            if let Err(e) = fds::close_all_except(&[init_end.as_raw_fd()]) {
                eprintln!("codebutler-runner: sandbox init: {e}");
            }
            let code = match notify::take_over(init_end) {
                Ok(listener) => init::run(child, &supervised_signals(), listener, &policy),
                Err(e) => {
                    // Exiting ends the sandboxed process too (it is in this PID namespace).
                    eprintln!("codebutler-runner: {e}");
                    125
                }
            };
            std::process::exit(code)
        }
        ForkResult::Child => {
            drop(init_end);
            sandboxed_filters(&prepared, sandboxed_end)?;
            sandboxed_process(spec, &prepared, &old_mask)
        }
    }
}

/// Step 10, in the sandboxed process: its own seccomp filters — no `pidfd_getfd`, and the
/// connect filter, whose listener goes to PID 1 and nowhere else.
fn sandboxed_filters(prepared: &Prepared, channel: UnixStream) -> Result<(), SandboxError> {
    seccomp::install(&prepared.sandboxed_seccomp_programs)
        .map_err(|e| SandboxError::new(Step::ConnectFilter, e.detail))?;
    let listener = notify::install_connect_filter(&prepared.connect_filter)?;
    let number = listener.as_raw_fd();
    notify::hand_over(channel, listener)?;
    // The listener would let its holder answer its own connects: make sure it is gone. (It
    // is close-on-exec, but `run` does not exec, and `keepFds` could keep its number.)
    // SAFETY: F_GETFD on a descriptor number only reads its flags (or fails with EBADF).
    let rc = unsafe { libc::fcntl(number, libc::F_GETFD) };
    match Errno::result(rc) {
        Err(Errno::EBADF) => Ok(()),
        _ => Err(SandboxError::new(
            Step::ConnectFilter,
            format!("descriptor {number} is still open after the listener's handover"),
        )),
    }
}

/// Step 11, in the sandboxed process.
fn sandboxed_process(
    spec: &SandboxSpec,
    prepared: &Prepared,
    old_mask: &SigSet,
) -> Result<(), SandboxError> {
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(old_mask), None)
        .at(Step::RestoreSignals, || "sigprocmask(SIG_SETMASK)".into())?;
    prctl::set_pdeathsig(Signal::SIGKILL).at(Step::ParentDeathSignal, || {
        "prctl(PR_SET_PDEATHSIG, SIGKILL)".into()
    })?;
    if getppid() != Pid::from_raw(1) {
        return Err(SandboxError::new(
            Step::ParentDeathSignal,
            "the sandbox's init exited before the sandboxed process started",
        ));
    }
    let names: Vec<OsString> = std::env::vars_os().map(|(k, _)| k).collect();
    for name in names {
        // SAFETY: the process is single-threaded, so nothing reads the environment
        // concurrently.
        unsafe { std::env::remove_var(&name) };
    }
    for (k, v) in &prepared.env {
        // SAFETY: as above; names and values were validated (no `=` or NUL in names).
        unsafe { std::env::set_var(k, v) };
    }
    if std::env::vars_os().count() != prepared.env.len() {
        return Err(SandboxError::new(
            Step::CleanEnvironment,
            "the environment still holds variables outside the allow-list",
        ));
    }
    fds::close_all_except(&spec.keep_fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_refuses_a_multithreaded_process() {
        // Fail closed: with a second thread alive nothing may be set up (the namespaces,
        // Landlock and seccomp would cover only the calling thread).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let spec = SandboxSpec::for_worktree("/nonexistent");
        let e = enter(&spec).unwrap_err();
        drop(tx);
        let _ = other.join();
        assert_eq!(e.step, Step::CheckSingleThread, "{e}");
        assert!(e.detail.contains("threads"), "{e}");
    }
}
