//! Step 11 (descriptors): close every descriptor above 2 that is not in `keepFds`.

#![allow(unsafe_code)]

use std::os::fd::RawFd;

use nix::errno::Errno;

use super::error::{AtStep, SandboxError, Step};

/// The half-open gaps `[from, to]` (inclusive) between the kept descriptors, above 2.
pub fn gaps(keep: &[RawFd]) -> Vec<(u32, u32)> {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter_map(|fd| u32::try_from(*fd).ok())
        .filter(|fd| *fd > 2)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut out = Vec::new();
    let mut from = 3u32;
    for fd in keep {
        if fd > from {
            out.push((from, fd - 1));
        }
        from = fd + 1;
    }
    out.push((from, u32::MAX));
    out
}

/// Closes every descriptor above 2 not listed in `keep` (`close_range`, one call per gap).
pub(crate) fn close_all_except(keep: &[RawFd]) -> Result<(), SandboxError> {
    for (from, to) in gaps(keep) {
        // SAFETY: close_range only closes descriptors; the caller owns none in these ranges
        // that it still uses (Rust objects holding them were dropped or are never used again).
        let rc = unsafe { libc::syscall(libc::SYS_close_range, from, to, 0u32) };
        Errno::result(rc)
            .map(drop)
            .at(Step::CloseFds, || format!("close_range({from}, {to})"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_around_kept_descriptors() {
        assert_eq!(gaps(&[]), vec![(3, u32::MAX)]);
        assert_eq!(gaps(&[3]), vec![(4, u32::MAX)]);
        assert_eq!(gaps(&[5, 3, 9, 9, 1]), vec![(4, 4), (6, 8), (10, u32::MAX)]);
    }
}
