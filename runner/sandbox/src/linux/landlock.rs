//! Step 8: the Landlock ruleset of [`super::plan::landlock_rules`], with every access right
//! of the kernel's ABI handled and nothing downgraded.
//!
//! The ruleset is built for the ABI the kernel reports (at least [`MIN_ABI`]) with
//! `CompatLevel::HardRequirement`, and the result must be `FullyEnforced`. From ABI 4 TCP
//! bind and connect are handled with no port allowed (unless the spec asks for the network,
//! when they are left to the host's network); from ABI 6 signals and abstract Unix sockets
//! are scoped to the sandbox.

#![allow(unsafe_code)]

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::errno::Errno;

use super::error::{SandboxError, Step};
use super::plan::{FsAccess, LandlockRule};
use super::resolve::NodeKind;

/// The oldest ABI accepted: 3 (Linux 6.2) brings `Refer` (renames across directories, which
/// git and cargo need) and `Truncate`.
pub const MIN_ABI: i32 = 3;

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The kernel's Landlock ABI version; an error if Landlock is missing, disabled or too old.
pub fn kernel_abi() -> Result<i32, SandboxError> {
    // SAFETY: landlock_create_ruleset with a null attribute pointer, size 0 and the VERSION
    // flag only returns the ABI version; no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        let e = Errno::last();
        let why = match e {
            Errno::ENOSYS => "the kernel is built without Landlock",
            Errno::EOPNOTSUPP => "Landlock is disabled at boot (add it to the `lsm=` list)",
            _ => "unexpected error",
        };
        return Err(SandboxError::new(
            Step::ProbeLandlock,
            format!("landlock_create_ruleset(VERSION): {e}: {why}"),
        ));
    }
    let v = i32::try_from(v).unwrap_or(i32::MAX);
    if v < MIN_ABI {
        return Err(SandboxError::new(
            Step::ProbeLandlock,
            format!("Landlock ABI {v} is older than the required {MIN_ABI} (Linux 6.2)"),
        ));
    }
    Ok(v)
}

fn rights(access: FsAccess, kind: NodeKind, abi: ABI) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    let rights = match access {
        FsAccess::ReadOnly => AccessFs::from_read(abi),
        FsAccess::ReadWrite => all & !(AccessFs::MakeChar | AccessFs::MakeBlock),
        FsAccess::Device => {
            (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev)
                & all
        }
    };
    match kind {
        NodeKind::Dir => rights,
        // Only these rights make sense on a file; the kernel refuses the others.
        NodeKind::File => {
            rights
                & (AccessFs::Execute
                    | AccessFs::ReadFile
                    | AccessFs::WriteFile
                    | AccessFs::Truncate
                    | AccessFs::IoctlDev)
        }
    }
}

/// Builds and enforces the ruleset on the calling thread (no-new-privs must be set); with
/// `network`, TCP bind and connect are not restricted.
pub(crate) fn enforce(
    rules: &[LandlockRule],
    abi_version: i32,
    network: bool,
) -> Result<(), SandboxError> {
    let err = |what: &str, e: &dyn std::fmt::Display| {
        SandboxError::new(Step::Landlock, format!("{what}: {e}"))
    };
    let abi = ABI::from(abi_version);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| err("handle filesystem rights", &e))?;
    if abi >= ABI::V4 && !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| err("handle TCP rights", &e))?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| err("scope signals and abstract sockets", &e))?;
    }
    let mut created = ruleset.create().map_err(|e| err("create ruleset", &e))?;
    for rule in rules {
        let fd = PathFd::new(&rule.path)
            .map_err(|e| err(&format!("open {}", rule.path.display()), &e))?;
        created = created
            .add_rule(PathBeneath::new(fd, rights(rule.access, rule.kind, abi)))
            .map_err(|e| err(&format!("rule for {}", rule.path.display()), &e))?;
    }
    let status = created
        .restrict_self()
        .map_err(|e| err("restrict self", &e))?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(SandboxError::new(
            Step::Landlock,
            format!("ruleset not fully enforced: {status:?}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_rules_carry_only_file_rights() {
        let r = rights(FsAccess::ReadWrite, NodeKind::File, ABI::V5);
        assert!(!r.contains(AccessFs::ReadDir));
        assert!(!r.contains(AccessFs::MakeDir));
        assert!(r.contains(AccessFs::WriteFile));
        let ro = rights(FsAccess::ReadOnly, NodeKind::Dir, ABI::V5);
        assert_eq!(
            ro,
            AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir
        );
        let rw = rights(FsAccess::ReadWrite, NodeKind::Dir, ABI::V5);
        assert!(rw.contains(AccessFs::Refer | AccessFs::Truncate | AccessFs::RemoveDir));
        assert!(!rw.contains(AccessFs::MakeChar));
        let dev = rights(FsAccess::Device, NodeKind::File, ABI::V3);
        assert_eq!(
            dev,
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate
        );
    }

    #[test]
    fn this_kernel_has_landlock() {
        // The sandbox refuses to start without it; say so here too.
        let v = kernel_abi().unwrap();
        assert!(v >= MIN_ABI);
    }
}
