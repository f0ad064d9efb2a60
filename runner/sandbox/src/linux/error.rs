//! The one error type of the sandbox: which step failed, and why.
//!
//! Every set-up step has its own [`Step`] so that an operator (and the controller, which
//! relays the runner's stderr) can tell exactly where a sandbox failed to come up — the
//! firecracker jailer's "one error variant per failed step", flattened into a step name plus
//! a detail string because the details are only ever shown to people.

use std::fmt;

/// One named step of the sandbox set-up, in the order [`super::enter`] runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// The process must have a single thread (namespaces and seccomp apply per thread).
    CheckSingleThread,
    /// The spec's own consistency (paths absolute, no overlapping mounts, env keys).
    ValidateSpec,
    /// Canonicalize the worktree on the host.
    ResolveWorktree,
    /// Check the worktree's `.git` directory and find the object stores it borrows from.
    ResolveGitMetadata,
    /// Canonicalize the extra read-only paths.
    ResolveReadOnly,
    /// Look at the host's system directories (`/usr`, `/bin`, …) and `/etc` secrets.
    ResolveSystem,
    /// Read the mount flags of the bind sources (locked flags must be preserved).
    ReadMountFlags,
    /// Ask the kernel for its Landlock ABI (a missing Landlock is fatal).
    ProbeLandlock,
    /// Create the per-sandbox cgroups and set their limits.
    CreateCgroup,
    /// Block the signals the supervising processes wait for.
    BlockSignals,
    /// `unshare` the user, mount, PID, network, IPC and UTS namespaces.
    Unshare,
    /// Write `deny` to `/proc/self/setgroups`.
    WriteSetgroups,
    /// Write `/proc/self/uid_map`.
    WriteUidMap,
    /// Write `/proc/self/gid_map`.
    WriteGidMap,
    /// Create the lifeline pipe between the supervisor and the sandbox's init.
    CreateLifeline,
    /// `fork` the sandbox's PID 1.
    ForkInit,
    /// `PR_SET_PDEATHSIG` in a child, and the check that the parent is still there.
    ParentDeathSignal,
    /// Move the sandbox's PID 1 into its cgroups.
    JoinCgroup,
    /// `unshare` the cgroup namespace (rooted at the sandbox's own cgroup).
    UnshareCgroupNamespace,
    /// Set the hostname in the new UTS namespace.
    SetHostname,
    /// Make every mount private so nothing propagates back to the host.
    MakeMountsPrivate,
    /// Mount the staging tmpfs and move the old root aside under it.
    PrepareStaging,
    /// One operation of the mount plan (the detail names it).
    Mount,
    /// Detach the host's root from the mount namespace.
    UnmountOldRoot,
    /// `pivot_root` into the new root.
    PivotRoot,
    /// Make the new root's own tmpfs read-only.
    RemountRootReadOnly,
    /// `chdir` to the mount point of the worktree.
    ChdirMountPoint,
    /// Bring the loopback interface up.
    LoopbackUp,
    /// `setrlimit` (the detail names the resource).
    SetRlimit,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// `PR_SET_DUMPABLE 0`.
    NotDumpable,
    /// Lock the securebits so that uid 0 gains nothing on `execve`.
    Securebits,
    /// Drop every capability (bounding, ambient, effective, permitted, inheritable).
    DropCapabilities,
    /// Build and enforce the Landlock ruleset.
    Landlock,
    /// Compile and install the seccomp filters.
    Seccomp,
    /// Read the mount ids of the sandbox's own writable mounts (where a `connect` may lead).
    ConnectPolicy,
    /// `fork` the sandboxed process from the sandbox's init.
    ForkSandboxed,
    /// In the sandboxed process, install its own filters (the connect filter among them) and
    /// hand the connect filter's listener to PID 1; in PID 1, take it.
    ConnectFilter,
    /// Restore the signal mask in the sandboxed process.
    RestoreSignals,
    /// Replace the environment by the spec's allow-list.
    CleanEnvironment,
    /// Close every descriptor that is neither 0–2 nor in `keepFds`.
    CloseFds,
}

impl Step {
    /// The snake_case name shown in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Step::CheckSingleThread => "check_single_thread",
            Step::ValidateSpec => "validate_spec",
            Step::ResolveWorktree => "resolve_worktree",
            Step::ResolveGitMetadata => "resolve_git_metadata",
            Step::ResolveReadOnly => "resolve_read_only",
            Step::ResolveSystem => "resolve_system",
            Step::ReadMountFlags => "read_mount_flags",
            Step::ProbeLandlock => "probe_landlock",
            Step::CreateCgroup => "create_cgroup",
            Step::BlockSignals => "block_signals",
            Step::Unshare => "unshare",
            Step::WriteSetgroups => "write_setgroups",
            Step::WriteUidMap => "write_uid_map",
            Step::WriteGidMap => "write_gid_map",
            Step::CreateLifeline => "create_lifeline",
            Step::ForkInit => "fork_init",
            Step::ParentDeathSignal => "parent_death_signal",
            Step::JoinCgroup => "join_cgroup",
            Step::UnshareCgroupNamespace => "unshare_cgroup_namespace",
            Step::SetHostname => "set_hostname",
            Step::MakeMountsPrivate => "make_mounts_private",
            Step::PrepareStaging => "prepare_staging",
            Step::Mount => "mount",
            Step::UnmountOldRoot => "unmount_old_root",
            Step::PivotRoot => "pivot_root",
            Step::RemountRootReadOnly => "remount_root_read_only",
            Step::ChdirMountPoint => "chdir_mount_point",
            Step::LoopbackUp => "loopback_up",
            Step::SetRlimit => "set_rlimit",
            Step::NoNewPrivs => "no_new_privs",
            Step::NotDumpable => "not_dumpable",
            Step::Securebits => "securebits",
            Step::DropCapabilities => "drop_capabilities",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::ConnectPolicy => "connect_policy",
            Step::ForkSandboxed => "fork_sandboxed",
            Step::ConnectFilter => "connect_filter",
            Step::RestoreSignals => "restore_signals",
            Step::CleanEnvironment => "clean_environment",
            Step::CloseFds => "close_fds",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed sandbox step. Its Display reads
/// ``sandbox step `pivot_root` failed: <detail>``.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sandbox step `{step}` failed: {detail}")]
pub struct SandboxError {
    /// The step that failed.
    pub step: Step,
    /// What was attempted and what the kernel (or the check) said.
    pub detail: String,
}

impl SandboxError {
    /// An error of `step` with a detail.
    pub fn new(step: Step, detail: impl Into<String>) -> Self {
        Self {
            step,
            detail: detail.into(),
        }
    }
}

/// Attaches a step and a context to the error of a checked call.
pub(crate) trait AtStep<T> {
    /// Maps the error to a [`SandboxError`] of `step`, with `what` (lazily built) in front.
    fn at(self, step: Step, what: impl FnOnce() -> String) -> Result<T, SandboxError>;
}

impl<T, E: fmt::Display> AtStep<T> for Result<T, E> {
    fn at(self, step: Step, what: impl FnOnce() -> String) -> Result<T, SandboxError> {
        self.map_err(|e| SandboxError::new(step, format!("{}: {e}", what())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_step() {
        let e = SandboxError::new(Step::PivotRoot, "pivot_root /newroot: EPERM");
        assert_eq!(
            e.to_string(),
            "sandbox step `pivot_root` failed: pivot_root /newroot: EPERM"
        );
    }

    #[test]
    fn at_step_keeps_the_context() {
        let r: Result<(), std::io::Error> = Err(std::io::Error::from_raw_os_error(libc::ENOENT));
        let e = r
            .at(Step::ResolveWorktree, || "canonicalize /nope".into())
            .unwrap_err();
        assert_eq!(e.step, Step::ResolveWorktree);
        assert!(e.detail.starts_with("canonicalize /nope: "), "{}", e.detail);
    }
}
