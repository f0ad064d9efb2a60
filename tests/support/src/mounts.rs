//! Clean-up of the mounts a daemon under test leaves: each worktree on a disk of its own
//! (`sandbox.diskMB`) is a loop mount under the repository, which a killed daemon leaves
//! behind, and which keeps the test's temporary directory (and a loop device) from going.

use std::path::{Path, PathBuf};

/// The mount points at or below `root`, deepest first.
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(&root))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points
}

/// Detaches every mount at or below `root` (lazily: a sandbox still holding one lets go of
/// it when it ends).
pub fn detach_under(root: &Path) {
    for point in mounts_under(root) {
        if let Err(e) = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH) {
            eprintln!("detach {}: {e}", point.display());
        }
    }
}

/// Detaches the mounts under its directory when dropped (declare it after the
/// `TempDir` it guards, so it drops first).
#[derive(Debug)]
pub struct DetachOnDrop(pub PathBuf);

impl Drop for DetachOnDrop {
    fn drop(&mut self) {
        detach_under(&self.0);
    }
}
