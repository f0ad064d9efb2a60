//! Step 5: the new network namespace has only `lo`, down; bring it up so that tools may
//! use loopback. There is no other interface and no route out.

#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

use super::error::{AtStep, SandboxError, Step};

/// `SIOCGIFFLAGS` then `SIOCSIFFLAGS` with `IFF_UP` on `lo`.
pub(crate) fn loopback_up() -> Result<(), SandboxError> {
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .at(Step::LoopbackUp, || "socket(AF_INET, SOCK_DGRAM)".into())?;
    // SAFETY: ifreq is a plain C struct for which all-zero bytes is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `ifr`, a valid,
    // exclusively borrowed ifreq that outlives the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) };
    Errno::result(rc)
        .map(drop)
        .at(Step::LoopbackUp, || "ioctl(SIOCGIFFLAGS, lo)".into())?;
    // SAFETY: after SIOCGIFFLAGS the union holds the flags member.
    unsafe {
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the name and flags from `ifr`, valid for the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) };
    Errno::result(rc)
        .map(drop)
        .at(Step::LoopbackUp, || "ioctl(SIOCSIFFLAGS, lo up)".into())
}
