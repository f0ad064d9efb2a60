//! What PID 1 does with the address a `connect` gave, decided on PID 1's copy of it by a pure
//! function ([`plan`], tested by equality below).

use std::ffi::CString;

use nix::errno::Errno;

/// `offsetof(struct sockaddr_un, sun_path)`: the family comes first.
const PATH_OFFSET: usize = 2;
/// `sizeof(struct sockaddr_un)`: the longest Unix address the kernel accepts.
const SOCKADDR_UN_LEN: usize = PATH_OFFSET + 108;

/// The decision on one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Connect to the copy as it is: an abstract Unix name (kept inside by the sandbox's
    /// network namespace or Landlock's scope), or any address of an inet socket (only with
    /// `network: true`; an inet socket cannot reach a Unix one).
    AsGiven,
    /// A pathname Unix socket (as the caller would resolve it): open it, check that it lies
    /// on one of the sandbox's own writable mounts, and connect through that descriptor.
    Path(CString),
    /// Answer with this errno.
    Refuse(Errno),
}

/// Decides on `addr`, the bytes a `connect` on a socket of `domain` named, for the calling
/// thread `tid`. Invalid Unix addresses get the kernel's own `EINVAL`; abstract names are
/// refused (`EPERM`, as Landlock would) unless `abstract_allowed`; sockets of any family the
/// sandbox does not create are refused (`EACCES`).
pub fn plan(domain: i32, addr: &[u8], abstract_allowed: bool, tid: i32) -> Plan {
    match domain {
        libc::AF_INET | libc::AF_INET6 => return Plan::AsGiven,
        libc::AF_UNIX => {}
        _ => return Plan::Refuse(Errno::EACCES),
    }
    if addr.len() <= PATH_OFFSET || addr.len() > SOCKADDR_UN_LEN {
        return Plan::Refuse(Errno::EINVAL);
    }
    if u16::from_ne_bytes([addr[0], addr[1]]) != libc::AF_UNIX as u16 {
        return Plan::Refuse(Errno::EINVAL);
    }
    let path = &addr[PATH_OFFSET..];
    if path[0] == 0 {
        return if abstract_allowed {
            Plan::AsGiven
        } else {
            Plan::Refuse(Errno::EPERM)
        };
    }
    // The kernel ends the path at the first NUL, or after all 108 bytes.
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    match CString::new(as_caller(&path[..end], tid)) {
        Ok(p) => Plan::Path(p),
        Err(_) => Plan::Refuse(Errno::EINVAL),
    }
}

/// `/proc/self/…` and `/proc/thread-self/…` name the caller's own entries (a socket reached
/// through an `O_PATH` descriptor, `/proc/self/fd/<n>`, is how long socket paths are
/// connected); PID 1 resolves the path, so they become `/proc/<tid>/…`. A symlink that leads
/// there still resolves against PID 1 — whose descriptors are never on the sandbox's own
/// mounts unless they were allowed already.
fn as_caller(path: &[u8], tid: i32) -> Vec<u8> {
    for prefix in [&b"/proc/self/"[..], &b"/proc/thread-self/"[..]] {
        if let Some(rest) = path.strip_prefix(prefix) {
            let mut out = format!("/proc/{tid}/").into_bytes();
            out.extend_from_slice(rest);
            return out;
        }
    }
    path.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(path: &[u8]) -> Vec<u8> {
        let mut a = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(path);
        a
    }

    fn path(p: &str) -> Plan {
        Plan::Path(CString::new(p).unwrap())
    }

    #[test]
    fn pathnames_are_checked_as_the_kernel_reads_them() {
        assert_eq!(
            plan(libc::AF_UNIX, &unix(b"/etc/x.sock\0"), true, 7),
            path("/etc/x.sock")
        );
        // Relative, and without the terminating NUL (the length ends it).
        assert_eq!(plan(libc::AF_UNIX, &unix(b"run/s"), true, 7), path("run/s"));
        // Bytes after the first NUL are ignored.
        assert_eq!(plan(libc::AF_UNIX, &unix(b"a\0/etc/x"), true, 7), path("a"));
        // All 108 bytes, no NUL.
        let long = vec![b'x'; 108];
        assert_eq!(
            plan(libc::AF_UNIX, &unix(&long), true, 7),
            Plan::Path(CString::new(long.clone()).unwrap())
        );
    }

    #[test]
    fn the_callers_own_proc_entries_stay_its_own() {
        assert_eq!(
            plan(libc::AF_UNIX, &unix(b"/proc/self/fd/5"), true, 42),
            path("/proc/42/fd/5")
        );
        assert_eq!(
            plan(libc::AF_UNIX, &unix(b"/proc/thread-self/fd/5"), true, 42),
            path("/proc/42/fd/5")
        );
        assert_eq!(
            plan(libc::AF_UNIX, &unix(b"/proc/selfish"), true, 42),
            path("/proc/selfish")
        );
    }

    #[test]
    fn abstract_names_go_as_given_where_they_are_scoped() {
        assert_eq!(
            plan(libc::AF_UNIX, &unix(b"\0name"), true, 7),
            Plan::AsGiven
        );
        assert_eq!(plan(libc::AF_UNIX, &unix(b"\0"), true, 7), Plan::AsGiven);
        assert_eq!(
            plan(libc::AF_UNIX, &unix(b"\0name"), false, 7),
            Plan::Refuse(Errno::EPERM)
        );
    }

    #[test]
    fn invalid_unix_addresses_get_the_kernels_einval() {
        let einval = Plan::Refuse(Errno::EINVAL);
        assert_eq!(plan(libc::AF_UNIX, &[], true, 7), einval);
        assert_eq!(plan(libc::AF_UNIX, &unix(b""), true, 7), einval);
        assert_eq!(plan(libc::AF_UNIX, &unix(&[b'x'; 109]), true, 7), einval);
        let mut inet = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        inet.extend_from_slice(b"/etc/x.sock");
        assert_eq!(plan(libc::AF_UNIX, &inet, true, 7), einval);
    }

    #[test]
    fn inet_sockets_go_as_given_and_other_families_are_refused() {
        // An inet socket cannot reach a Unix path, whatever the bytes say.
        assert_eq!(
            plan(libc::AF_INET, &unix(b"/etc/x.sock"), false, 7),
            Plan::AsGiven
        );
        assert_eq!(plan(libc::AF_INET6, &[], false, 7), Plan::AsGiven);
        assert_eq!(
            plan(libc::AF_NETLINK, &unix(b"/x"), true, 7),
            Plan::Refuse(Errno::EACCES)
        );
    }
}
