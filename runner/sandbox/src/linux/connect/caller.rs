//! The caller of an intercepted `connect`, as PID 1 reaches it: its `/proc/<tid>` directory
//! and a pidfd, opened before the call's validity is checked so that both then refer to the
//! caller and not to a process that reused its id; through them its socket
//! (`pidfd_getfd`: the same open socket), its memory (`/proc/<tid>/mem`) and its working
//! directory.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::Mode;
use nix::sys::uio::pread;

/// The longest address `connect` accepts (`sizeof(struct sockaddr_storage)`).
pub const MAX_ADDRESS: usize = 128;

/// An open handle on the calling thread.
#[derive(Debug)]
pub(crate) struct Caller {
    proc_dir: OwnedFd,
    pidfd: OwnedFd,
}

fn owned(rc: libc::c_long) -> Result<OwnedFd, Errno> {
    let rc = Errno::result(rc)?;
    let fd = RawFd::try_from(rc).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Caller {
    /// Opens `/proc/<tid>` and a pidfd for the thread `tid` (of its process on kernels
    /// before 6.9, which have no `PIDFD_THREAD`). Check the call's validity after this.
    pub(crate) fn open(tid: i32) -> Result<Caller, Errno> {
        let proc_dir = nix::fcntl::open(
            format!("/proc/{tid}").as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let thread = unsafe {
            libc::syscall(
                libc::SYS_pidfd_open,
                tid,
                libc::PIDFD_THREAD as libc::c_uint,
            )
        };
        let pidfd = match owned(thread) {
            Ok(fd) => fd,
            Err(Errno::EINVAL) => {
                let tgid = thread_group(&proc_dir)?;
                // SAFETY: as above.
                owned(unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0 as libc::c_uint) })?
            }
            Err(e) => return Err(e),
        };
        Ok(Caller { proc_dir, pidfd })
    }

    /// The caller's descriptor `fd` (close-on-exec in PID 1): `EBADF` if it has none.
    pub(crate) fn take_fd(&self, fd: u64) -> Result<OwnedFd, Errno> {
        // The kernel reads the descriptor as an int: its low 32 bits.
        let fd = fd as u32 as i32;
        // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags (0), and returns
        // a new descriptor or -1.
        owned(unsafe {
            libc::syscall(
                libc::SYS_pidfd_getfd,
                self.pidfd.as_raw_fd(),
                fd,
                0 as libc::c_uint,
            )
        })
    }

    /// `len` bytes of the caller's memory at `addr`; `EFAULT` if they cannot all be read.
    pub(crate) fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; len];
        if len == 0 {
            return Ok(buf);
        }
        let mem = openat(
            &self.proc_dir,
            "mem",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let offset = i64::try_from(addr).map_err(|_| Errno::EFAULT)?;
        match pread(&mem, &mut buf, offset) {
            Ok(n) if n == len => Ok(buf),
            Ok(_) | Err(Errno::EIO) | Err(Errno::EFAULT) => Err(Errno::EFAULT),
            Err(e) => Err(e),
        }
    }

    /// Opens `path` `O_PATH` as the caller's lookup would find it: relative to its working
    /// directory, symlinks followed. (Its root is PID 1's: the sandbox forbids `chroot`,
    /// `pivot_root` and new mount namespaces.)
    pub(crate) fn open_path(&self, path: &CStr) -> Result<OwnedFd, Errno> {
        let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
        if path.to_bytes().first() == Some(&b'/') {
            return nix::fcntl::open(path, flags, Mode::empty());
        }
        let cwd = openat(
            &self.proc_dir,
            "cwd",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        openat(&cwd, path, flags, Mode::empty())
    }
}

/// The caller's thread group id, from `/proc/<tid>/status`.
fn thread_group(proc_dir: &OwnedFd) -> Result<i32, Errno> {
    let status = openat(
        proc_dir,
        "status",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(status), &mut text)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Errno::ESRCH)
}

/// The mount id of the file behind `fd` (`statx` `STATX_MNT_ID`).
pub(crate) fn mount_id(fd: &OwnedFd) -> Result<u64, Errno> {
    statx_mount_id(fd.as_raw_fd(), c"", AtFlags::AT_EMPTY_PATH)
}

/// The mount id of `path` itself (not followed if a symlink).
pub(crate) fn path_mount_id(path: &CStr) -> Result<u64, Errno> {
    statx_mount_id(libc::AT_FDCWD, path, AtFlags::AT_SYMLINK_NOFOLLOW)
}

fn statx_mount_id(dirfd: RawFd, path: &CStr, flags: AtFlags) -> Result<u64, Errno> {
    // SAFETY: an all-zero statx is a valid value for the kernel to overwrite.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stx` is valid and exclusively borrowed for the
    // call, which writes one statx.
    let rc = unsafe {
        libc::statx(
            dirfd,
            path.as_ptr(),
            flags.bits(),
            libc::STATX_MNT_ID,
            &mut stx,
        )
    };
    Errno::result(rc)?;
    if stx.stx_mask & libc::STATX_MNT_ID == 0 {
        // Fail closed: no mount id, no connect.
        return Err(Errno::EACCES);
    }
    Ok(stx.stx_mnt_id)
}
