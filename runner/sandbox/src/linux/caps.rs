//! Step 7: no-new-privs, not dumpable, locked securebits, and every capability dropped.
//!
//! Inside its user namespace the sandbox's PID 1 holds a full capability set (over the
//! namespace's resources); all of it must go before any sandboxed code runs. The
//! securebits make uid 0 gain nothing on `execve` (`SECBIT_NOROOT`) and are locked.

#![allow(unsafe_code)]

use nix::errno::Errno;

use super::error::{AtStep, SandboxError, Step};

/// `_LINUX_CAPABILITY_VERSION_3` (64-bit capability sets in two 32-bit words).
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `PR_SET_NO_NEW_PRIVS` (required by Landlock and seccomp without `CAP_SYS_ADMIN`).
pub(crate) fn no_new_privs() -> Result<(), SandboxError> {
    nix::sys::prctl::set_no_new_privs().at(Step::NoNewPrivs, || "prctl(PR_SET_NO_NEW_PRIVS)".into())
}

/// `PR_SET_DUMPABLE 0`: other processes of the sandbox cannot ptrace this one or read its
/// `/proc/<pid>/{mem,environ,fd}` (until it execs something else).
pub(crate) fn not_dumpable() -> Result<(), SandboxError> {
    nix::sys::prctl::set_dumpable(false)
        .at(Step::NotDumpable, || "prctl(PR_SET_DUMPABLE, 0)".into())
}

/// Sets and locks `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP`, `SECBIT_NO_CAP_AMBIENT_RAISE`
/// and locks `SECBIT_KEEP_CAPS` off. Needs `CAP_SETPCAP`, so it comes before the drop.
pub(crate) fn lock_securebits() -> Result<(), SandboxError> {
    let bits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    // SAFETY: prctl with integer arguments only; no memory is passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0) };
    Errno::result(rc).map(drop).at(Step::Securebits, || {
        format!("prctl(PR_SET_SECUREBITS, {bits:#x})")
    })
}

/// Drops the bounding set (every capability the kernel knows), clears the ambient set, then
/// zeroes effective, permitted and inheritable; then checks that nothing is left.
pub(crate) fn drop_all() -> Result<(), SandboxError> {
    let mut cap: libc::c_ulong = 0;
    loop {
        // SAFETY: prctl with integer arguments only.
        let held = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
        if held < 0 {
            match Errno::last() {
                // Past the last capability of this kernel.
                Errno::EINVAL if cap > 0 => break,
                e => {
                    return Err(SandboxError::new(
                        Step::DropCapabilities,
                        format!("prctl(PR_CAPBSET_READ, {cap}): {e}"),
                    ));
                }
            }
        }
        if held == 1 {
            // SAFETY: prctl with integer arguments only.
            let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
            Errno::result(rc).map(drop).at(Step::DropCapabilities, || {
                format!("prctl(PR_CAPBSET_DROP, {cap})")
            })?;
        }
        cap += 1;
    }
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    Errno::result(rc).map(drop).at(Step::DropCapabilities, || {
        "prctl(PR_CAP_AMBIENT_CLEAR_ALL)".into()
    })?;

    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: header and data are valid, properly laid out (repr(C)) for capset's v3
    // interface, which reads two CapData entries; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    };
    Errno::result(rc)
        .map(drop)
        .at(Step::DropCapabilities, || "capset(all empty)".into())?;

    // Verify from the kernel's side.
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut left = [CapData::default(); 2];
    // SAFETY: as above; capget writes two CapData entries into `left`, which is large enough.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            left.as_mut_ptr(),
        )
    };
    Errno::result(rc)
        .map(drop)
        .at(Step::DropCapabilities, || "capget".into())?;
    if left
        .iter()
        .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
    {
        return Err(SandboxError::new(
            Step::DropCapabilities,
            "capabilities remain after capset",
        ));
    }
    for c in 0..cap {
        // SAFETY: prctl with integer arguments only.
        let held = unsafe { libc::prctl(libc::PR_CAPBSET_READ, c, 0, 0, 0) };
        if held != 0 {
            return Err(SandboxError::new(
                Step::DropCapabilities,
                format!("capability {c} remains in the bounding set"),
            ));
        }
    }
    Ok(())
}
