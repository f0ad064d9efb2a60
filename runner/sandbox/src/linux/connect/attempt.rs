//! PID 1's own `connect` on the caller's socket, without ever blocking.
//!
//! The socket is the caller's own open file, so its `O_NONBLOCK` flag is the caller's. A
//! caller with a non-blocking socket gets exactly what the kernel says (`EAGAIN` for a full
//! Unix listen backlog, `EINPROGRESS` for a TCP handshake). For a blocking stream or
//! seqpacket socket, PID 1 sets `O_NONBLOCK` for the attempt only (the socket is not yet
//! connected, so nothing else of the caller uses it meanwhile) and, where the kernel would
//! have waited, keeps a [`Pending`] connect that the init loop finishes: a full backlog is
//! retried with a growing pause (the kernel offers nothing to wait on), a handshake is
//! waited for with `poll`. The caller waits all along, as it would in the kernel, until the
//! result or its `SO_SNDTIMEO` (then `EAGAIN` for a Unix socket, `EINPROGRESS` for TCP, as
//! the kernel answers).

#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};

/// Where PID 1 connects the caller's socket.
#[derive(Debug)]
pub(crate) enum Destination {
    /// A checked pathname socket, held open `O_PATH` and reached as `/proc/self/fd/<n>`.
    Path(OwnedFd),
    /// The caller's address, copied.
    Address(Vec<u8>),
}

/// The first pause before a full backlog is tried again, and the longest.
const FIRST_RETRY: Duration = Duration::from_millis(1);
const LONGEST_RETRY: Duration = Duration::from_millis(50);

/// The outcome of [`start`].
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The answer for the caller.
    Done(Result<(), Errno>),
    /// The kernel would have made the caller wait.
    Pending(Pending),
}

/// What the connect waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// A full listen backlog: try again at `at`.
    Retry { at: Instant, pause: Duration },
    /// A handshake under way: the socket turns writable.
    Handshake,
}

/// A connect the caller still waits for.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The call's notification id.
    pub id: u64,
    sock: OwnedFd,
    domain: i32,
    destination: Destination,
    wait: Wait,
    deadline: Option<Instant>,
}

/// The socket's domain and type, or `ENOTSOCK`.
pub(crate) fn socket_kind(sock: &OwnedFd) -> Result<(i32, i32), Errno> {
    Ok((
        int_option(sock, libc::SO_DOMAIN)?,
        int_option(sock, libc::SO_TYPE)?,
    ))
}

fn int_option(sock: &OwnedFd, name: libc::c_int) -> Result<i32, Errno> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `value`, valid for the call.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    Errno::result(rc)?;
    Ok(value)
}

/// The caller's send timeout (`SO_SNDTIMEO`), which bounds a blocking connect.
fn send_timeout(sock: &OwnedFd) -> Result<Option<Duration>, Errno> {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let mut len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `tv`, valid for the call.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&mut tv as *mut libc::timeval).cast(),
            &mut len,
        )
    };
    Errno::result(rc)?;
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u64::try_from(tv.tv_usec).unwrap_or(0);
    let t = Duration::from_secs(secs) + Duration::from_micros(micros);
    Ok((!t.is_zero()).then_some(t))
}

/// Connects `sock` (of `domain` and `socket_type`) to `destination` for the call `id`.
pub(crate) fn start(
    id: u64,
    sock: OwnedFd,
    (domain, socket_type): (i32, i32),
    destination: Destination,
    now: Instant,
) -> Attempt {
    let blocking = match fcntl(&sock, FcntlArg::F_GETFL) {
        Ok(flags) => !OFlag::from_bits_retain(flags).contains(OFlag::O_NONBLOCK),
        Err(e) => return Attempt::Done(Err(e)),
    };
    let may_wait = blocking && matches!(socket_type, libc::SOCK_STREAM | libc::SOCK_SEQPACKET);
    let wait = match connect_once(&sock, &destination, may_wait) {
        Ok(()) => return Attempt::Done(Ok(())),
        Err(Errno::EAGAIN) if may_wait && domain == libc::AF_UNIX => Wait::Retry {
            at: now + FIRST_RETRY,
            pause: FIRST_RETRY,
        },
        Err(Errno::EINPROGRESS) if may_wait => Wait::Handshake,
        Err(e) => return Attempt::Done(Err(e)),
    };
    let deadline = match send_timeout(&sock) {
        Ok(t) => t.map(|t| now + t),
        Err(e) => return Attempt::Done(Err(e)),
    };
    Attempt::Pending(Pending {
        id,
        sock,
        domain,
        destination,
        wait,
        deadline,
    })
}

impl Pending {
    /// The socket to `poll` for writability, while a handshake is under way.
    pub(crate) fn handshake_fd(&self) -> Option<BorrowedFd<'_>> {
        (self.wait == Wait::Handshake).then(|| self.sock.as_fd())
    }

    /// When [`Pending::advance`] must run at the latest.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        let retry = match self.wait {
            Wait::Retry { at, .. } => Some(at),
            Wait::Handshake => None,
        };
        match (retry, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves the connect on at `now` (`ready`: `poll` reported the socket); the answer once
    /// there is one.
    pub(crate) fn advance(&mut self, now: Instant, ready: bool) -> Option<Result<(), Errno>> {
        match self.wait {
            Wait::Handshake if ready => {
                return Some(match int_option(&self.sock, libc::SO_ERROR) {
                    Ok(0) => Ok(()),
                    Ok(e) => Err(Errno::from_raw(e)),
                    Err(e) => Err(e),
                });
            }
            Wait::Retry { at, pause } if now >= at => {
                match connect_once(&self.sock, &self.destination, true) {
                    Err(Errno::EAGAIN) => {
                        let pause = (pause * 2).min(LONGEST_RETRY);
                        self.wait = Wait::Retry {
                            at: now + pause,
                            pause,
                        };
                    }
                    other => return Some(other),
                }
            }
            _ => {}
        }
        if self.deadline.is_some_and(|d| now >= d) {
            return Some(Err(self.timed_out()));
        }
        None
    }

    /// The kernel's answer to a blocking connect whose send timeout expired: `EAGAIN` for a
    /// Unix socket, `EINPROGRESS` for TCP (whose handshake goes on).
    pub(crate) fn timed_out(&self) -> Errno {
        if self.domain == libc::AF_UNIX {
            Errno::EAGAIN
        } else {
            Errno::EINPROGRESS
        }
    }
}

/// One `connect`; where it `may_wait` and the socket is blocking, made non-blocking for
/// the attempt only.
fn connect_once(sock: &OwnedFd, destination: &Destination, may_wait: bool) -> Result<(), Errno> {
    let flags = OFlag::from_bits_retain(fcntl(sock, FcntlArg::F_GETFL)?);
    let toggle = may_wait && !flags.contains(OFlag::O_NONBLOCK);
    if toggle {
        fcntl(sock, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    }
    let result = raw_connect(sock, destination);
    if toggle {
        set_nonblocking(sock, false)?;
    }
    result
}

fn set_nonblocking(sock: &OwnedFd, on: bool) -> Result<(), Errno> {
    let mut flags = OFlag::from_bits_retain(fcntl(sock, FcntlArg::F_GETFL)?);
    flags.set(OFlag::O_NONBLOCK, on);
    fcntl(sock, FcntlArg::F_SETFL(flags)).map(drop)
}

fn raw_connect(sock: &OwnedFd, destination: &Destination) -> Result<(), Errno> {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match destination {
        Destination::Path(fd) => {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            // SAFETY: all-zero bytes are a valid sockaddr_un.
            let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
            un.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (dst, src) in un.sun_path.iter_mut().zip(path.bytes()) {
                *dst = src as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sa_family_t>() + path.len() + 1;
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_un.
            unsafe {
                std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), un);
            }
            len
        }
        Destination::Address(bytes) => {
            let len = bytes
                .len()
                .min(std::mem::size_of::<libc::sockaddr_storage>());
            // SAFETY: at most size_of::<sockaddr_storage>() bytes are copied into it, from a
            // slice at least that long.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
                    len,
                );
            }
            len
        }
    };
    let len = libc::socklen_t::try_from(len).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `storage` holds `len` valid bytes of a socket address and outlives the call.
    let rc = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    Errno::result(rc).map(drop)
}
