//! The connect filter: a seccomp filter that hands every `connect` of the sandboxed process
//! (and of everything it starts) to the sandbox's PID 1, and PID 1's side of it — the
//! listener, its handover, and the three ioctls PID 1 uses.
//!
//! Why: a host process may leave a Unix socket under a path the sandbox sees (the git
//! metadata, `/etc`, `/usr`, a `readOnly` path). Landlock (up to ABI 7) has no say over
//! connecting to a *pathname* socket, a read-only mount does not stop `connect`, and the
//! sandbox runs as the same user as the host's processes. So nothing in the kernel would
//! refuse it; PID 1 does ([`super::connect`]). Unix datagram sockets, which could name a host
//! socket in any `sendmsg`, are refused outright ([`super::seccomp`]).
//!
//! The filter answers `SECCOMP_RET_USER_NOTIF` for `connect` and allows everything else
//! (the other filters refuse what must be refused; a foreign architecture is killed). It is
//! installed with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, which returns the listener, and
//! `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`: once PID 1 has received a call, only a fatal
//! signal ends the caller's wait, so a call PID 1 has performed is never restarted and
//! performed twice. PID 1 never answers `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (the caller
//! could rewrite the address after the check): it performs the call on its own copy.
//!
//! The sandboxed process installs the filter on itself (a filter applies to its installer,
//! and PID 1 must not be under it), sends the listener to PID 1 over a socket pair made
//! before the fork, closes its own copy and waits for PID 1's acknowledgement. Sending works
//! because the filter traps `connect` only.

#![allow(unsafe_code)]

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use seccompiler::{BpfProgram, TargetArch, sock_filter};

use super::error::{AtStep, SandboxError, Step};

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
/// Offsets in `struct seccomp_data`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;

/// The audit architecture of seccompiler's target (what `seccomp_data.arch` holds).
pub fn audit_arch(arch: TargetArch) -> u32 {
    const ARCH_64BIT: u32 = 0x8000_0000;
    const ARCH_LE: u32 = 0x4000_0000;
    let machine = match arch {
        TargetArch::x86_64 => 62,   // EM_X86_64
        TargetArch::aarch64 => 183, // EM_AARCH64
        TargetArch::riscv64 => 243, // EM_RISCV
    };
    machine | ARCH_64BIT | ARCH_LE
}

/// The connect filter for `arch`: notify PID 1 of `connect`, allow the rest, kill a foreign
/// architecture.
pub fn connect_filter(arch: TargetArch) -> BpfProgram {
    let insn = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        insn(BPF_LD_W_ABS, 0, 0, DATA_ARCH),
        insn(BPF_JEQ_K, 1, 0, audit_arch(arch)),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        insn(BPF_LD_W_ABS, 0, 0, DATA_NR),
        insn(BPF_JEQ_K, 0, 1, libc::SYS_connect as u32),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs `program` on the calling thread with a new listener, which it returns
/// (close-on-exec). No-new-privs must be set.
pub(crate) fn install_connect_filter(program: &BpfProgram) -> Result<OwnedFd, SandboxError> {
    let len = u16::try_from(program.len())
        .map_err(|_| SandboxError::new(Step::ConnectFilter, "the connect filter is too long"))?;
    let prog = libc::sock_fprog {
        len,
        // seccompiler's sock_filter is #[repr(C)] with the kernel's layout, like libc's.
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    // SAFETY: `prog` points at `len` valid instructions that outlive the call; the kernel
    // copies the program and returns a new descriptor (or -1).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        let e = Errno::last();
        let why = match e {
            Errno::EINVAL => {
                ": the kernel lacks seccomp user notification with \
                              SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19)"
            }
            _ => "",
        };
        return Err(SandboxError::new(
            Step::ConnectFilter,
            format!("seccomp(SET_MODE_FILTER, NEW_LISTENER | WAIT_KILLABLE_RECV): {e}{why}"),
        ));
    }
    let fd = RawFd::try_from(rc)
        .map_err(|_| SandboxError::new(Step::ConnectFilter, format!("seccomp returned {rc}")))?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// In the sandboxed process: sends `listener` to PID 1, closes it, and waits for PID 1 to
/// acknowledge that it holds it.
pub(crate) fn hand_over(channel: UnixStream, listener: OwnedFd) -> Result<(), SandboxError> {
    let step = Step::ConnectFilter;
    let fds = [listener.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let sent = sendmsg::<()>(
        channel.as_raw_fd(),
        &[IoSlice::new(b"L")],
        &cmsg,
        MsgFlags::empty(),
        None,
    )
    .at(step, || "send the listener to PID 1".into())?;
    if sent != 1 {
        return Err(SandboxError::new(
            step,
            "send the listener to PID 1: short send",
        ));
    }
    drop(listener);
    let mut ack = [0u8; 1];
    let mut channel = channel;
    match channel.read(&mut ack) {
        Ok(1) => Ok(()),
        Ok(_) => Err(SandboxError::new(
            step,
            "PID 1 did not take the connect filter's listener",
        )),
        Err(e) => Err(SandboxError::new(step, format!("wait for PID 1: {e}"))),
    }
}

/// In PID 1: receives the listener from the sandboxed process and acknowledges it.
pub(crate) fn take_over(channel: UnixStream) -> Result<Listener, SandboxError> {
    let step = Step::ConnectFilter;
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        channel.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .at(step, || "receive the listener".into())?;
    let mut received: Vec<OwnedFd> = Vec::new();
    for cmsg in msg.cmsgs().at(step, || "read the control message".into())? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: SCM_RIGHTS just installed this descriptor in our table; nothing
                // else owns it.
                received.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    let listener = match (received.pop(), received.is_empty()) {
        (Some(fd), true) => fd,
        _ => {
            return Err(SandboxError::new(
                step,
                "expected exactly one descriptor from the sandboxed process",
            ));
        }
    };
    let mut channel = channel;
    channel
        .write_all(b"K")
        .at(step, || "acknowledge the listener".into())?;
    Ok(Listener(listener))
}

/// One intercepted call, as `SECCOMP_IOCTL_NOTIF_RECV` returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Notification {
    /// The cookie answers must carry.
    pub id: u64,
    /// The calling thread, in the sandbox's PID namespace.
    pub tid: i32,
    /// The system call number.
    pub nr: i32,
    /// Its audit architecture.
    pub arch: u32,
    /// Its six arguments.
    pub args: [u64; 6],
}

/// PID 1's end of the connect filter.
#[derive(Debug)]
pub(crate) struct Listener(OwnedFd);

impl AsFd for Listener {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl Listener {
    /// Receives one notification. `Ok(None)`: the caller went away before it was received
    /// (`ENOENT`). Blocks when none is pending: call it once per readiness.
    pub(crate) fn receive(&self) -> Result<Option<Notification>, Errno> {
        // SAFETY: an all-zero seccomp_notif is valid, and the kernel requires it zeroed.
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: NOTIF_RECV writes one seccomp_notif into `n`, which is valid and
            // exclusively borrowed for the call.
            let rc = unsafe {
                libc::ioctl(
                    self.0.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                    &mut n as *mut libc::seccomp_notif,
                )
            };
            match Errno::result(rc) {
                Ok(_) => break,
                Err(Errno::EINTR) => continue,
                Err(Errno::ENOENT) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(Notification {
            id: n.id,
            tid: i32::try_from(n.pid).map_err(|_| Errno::EINVAL)?,
            nr: n.data.nr,
            arch: n.data.arch,
            args: n.data.args,
        }))
    }

    /// Whether the call `id` still waits for an answer (its caller is alive and in it).
    pub(crate) fn is_valid(&self, id: u64) -> bool {
        // SAFETY: NOTIF_ID_VALID reads one u64 from the pointer, valid for the call.
        let rc = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
                &id as *const u64,
            )
        };
        rc == 0
    }

    /// Answers the call `id` with `result` (0 or the errno). `Err(ENOENT)`: the caller went
    /// away meanwhile.
    pub(crate) fn respond(&self, id: u64, result: Result<(), Errno>) -> Result<(), Errno> {
        let resp = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: match result {
                Ok(()) => 0,
                Err(e) => -(e as i32),
            },
            flags: 0,
        };
        // SAFETY: NOTIF_SEND reads one seccomp_notif_resp from the pointer, valid for the
        // call.
        let rc = unsafe {
            libc::ioctl(
                self.0.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND as _,
                &resp as *const libc::seccomp_notif_resp,
            )
        };
        Errno::result(rc).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_notifies_connect_only() {
        let arch = super::super::seccomp::target_arch().unwrap();
        let f = connect_filter(arch);
        assert_eq!(f.len(), 7);
        assert_eq!((f[0].code, f[0].k), (BPF_LD_W_ABS, DATA_ARCH));
        assert_eq!((f[1].k, f[1].jt, f[1].jf), (audit_arch(arch), 1, 0));
        assert_eq!(f[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!((f[3].code, f[3].k), (BPF_LD_W_ABS, DATA_NR));
        assert_eq!((f[4].k, f[4].jt, f[4].jf), (libc::SYS_connect as u32, 0, 1));
        assert_eq!(f[5].k, libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(f[6].k, libc::SECCOMP_RET_ALLOW);
    }

    #[test]
    fn audit_arches() {
        assert_eq!(audit_arch(TargetArch::x86_64), 0xc000_003e);
        assert_eq!(audit_arch(TargetArch::aarch64), 0xc000_00b7);
        assert_eq!(audit_arch(TargetArch::riscv64), 0xc000_00f3);
    }
}
