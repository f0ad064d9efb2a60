//! The disk the worktrees take, against `access.maxWorktreeDiskMB`.
//!
//! The total holds while runs write, not only when a worktree is made: each worktree is on a
//! disk of its own ([`crate::workspace::disk`]) whose size the kernel enforces, and a new
//! disk is made at most as large as what the total has left ([`new_disk_mb`]): `sandbox.diskMB`
//! when there is room for it, less when there is not, and none (a refusal naming the
//! figures) when too little is left. What the worktrees take ([`taken`]) counts each disk at
//! its full size — what its run may fill, not what it holds so far — plus the base stores
//! of their history and any worktree without a disk of its own. Without per-thread disks
//! (`sandbox.diskMB` 0) nothing caps what a run writes, so the configuration refuses a
//! total then.

use std::path::Path;

use super::{branches_dir, disks_dir, stores_dir};

/// Megabytes.
const MB: u64 = 1 << 20;
/// Rounding of each file's size in the estimate of a new worktree (a filesystem block).
const BLOCK: u64 = 4096;
/// The least room a new worktree's disk must have beyond its files: the filesystem's
/// journal and inode tables, the thread's `.git`, and some room to work.
pub const HEADROOM_MB: u64 = 16;

/// What the worktrees' disks may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskBudget {
    /// `sandbox.diskMB`: each worktree's own disk at most; 0 for worktrees without one.
    pub disk_mb: u64,
    /// `access.maxWorktreeDiskMB`: all the worktrees' disks together; 0 for no limit.
    /// Held by the disks, so checked only when `disk_mb` is above 0 (the configuration
    /// refuses a total without them).
    pub total_mb: u64,
}

impl DiskBudget {
    /// Worktrees without disks of their own, and no total.
    pub const NONE: Self = Self {
        disk_mb: 0,
        total_mb: 0,
    };

    /// Each worktree on a disk of `disk_mb` MB, without a total.
    pub fn per_disk(disk_mb: u64) -> Self {
        Self {
            disk_mb,
            total_mb: 0,
        }
    }
}

/// A new worktree's disk would not fit in `access.maxWorktreeDiskMB`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the worktrees' disks already take {taken_mb} MB of the {total_mb} MB that \
     access.maxWorktreeDiskMB allows, and a new worktree needs at least {needed_mb} MB. Close \
     finished threads or remove their worktrees, then approve the plan again"
)]
pub struct NoRoom {
    pub taken_mb: u64,
    pub total_mb: u64,
    pub needed_mb: u64,
}

/// The size in MB of a new worktree's disk under `budget`, when the worktrees take `taken`
/// bytes already and the new one's files about `estimate` bytes: `disk_mb`, or what the
/// total has left when that is less, refused when that is less than the files plus
/// [`HEADROOM_MB`].
pub fn new_disk_mb(budget: DiskBudget, taken: u64, estimate: u64) -> Result<u64, NoRoom> {
    if budget.total_mb == 0 {
        return Ok(budget.disk_mb);
    }
    let left = budget.total_mb.saturating_mul(MB).saturating_sub(taken) / MB;
    let size = budget.disk_mb.min(left);
    let needed_mb = estimate.div_ceil(MB) + HEADROOM_MB;
    if size < needed_mb {
        return Err(NoRoom {
            taken_mb: taken.div_ceil(MB),
            total_mb: budget.total_mb,
            needed_mb,
        });
    }
    Ok(size)
}

/// The bytes the worktrees of the repository at `repo` take of the total: each disk image
/// at its full size, what worktrees without a disk hold (mounted disks are not entered), and
/// the base stores. Blocking; reads metadata only.
pub fn taken(repo: &Path) -> u64 {
    let images: u64 = std::fs::read_dir(disks_dir(repo))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "img"))
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    images + disk_usage(&branches_dir(repo)) + disk_usage(&stores_dir(repo))
}

/// Bytes allocated on disk under `dir` (like `du`): symlinks are not followed, other
/// filesystems not entered, unreadable entries skipped. Blocking; reads metadata only.
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(root) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    let device = root.dev();
    let mut total = root.blocks() * 512;
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// About the disk a new worktree of `repo` takes: the sizes its index records for the
/// tracked files, each rounded up to a block. Cheap (one read of the index); 0 when the
/// index cannot be read. Blocking.
pub fn checkout_estimate(repo: &Path) -> u64 {
    let Ok(index) = git2::Repository::open(repo).and_then(|r| r.index()) else {
        return 0;
    };
    index
        .iter()
        .map(|e| u64::from(e.file_size).div_ceil(BLOCK) * BLOCK)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::worktree::testing::repo_with;

    #[test]
    fn disk_usage_counts_blocks_without_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("big"), vec![1u8; 4 << 20]).unwrap();
        let branches = dir.path().join("branches");
        std::fs::create_dir_all(branches.join("a/deep")).unwrap();
        std::fs::write(branches.join("a/deep/f"), vec![1u8; 1 << 20]).unwrap();
        std::os::unix::fs::symlink(outside.path(), branches.join("a/link")).unwrap();
        let used = disk_usage(&branches);
        assert!(used >= 1 << 20, "{used}");
        assert!(used < 2 << 20, "the symlinked 4 MB were counted: {used}");
        assert_eq!(disk_usage(&dir.path().join("missing")), 0);
    }

    #[test]
    fn the_estimate_comes_from_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a"), ("b.txt", &"b".repeat(5000))]);
        assert_eq!(checkout_estimate(&repo), 4096 + 8192);
    }

    #[test]
    fn a_new_disk_gets_what_the_total_has_left_or_is_refused_with_the_figures() {
        let budget = |disk_mb, total_mb| DiskBudget { disk_mb, total_mb };
        // No total: the configured size.
        assert_eq!(new_disk_mb(budget(4096, 0), 1 << 40, 0), Ok(4096));
        // Room for the whole disk.
        assert_eq!(new_disk_mb(budget(64, 1000), 100 * MB, MB), Ok(64));
        // Only what is left, rounded down.
        assert_eq!(new_disk_mb(budget(4096, 64), MB / 2, 0), Ok(63));
        assert_eq!(new_disk_mb(budget(4096, 64), 0, 0), Ok(64));
        // Too little left for the files and the headroom.
        let e = new_disk_mb(budget(4096, 64), 40 * MB, 10 * MB).unwrap_err();
        assert_eq!(
            e,
            NoRoom {
                taken_mb: 40,
                total_mb: 64,
                needed_mb: 26
            }
        );
        assert!(
            e.to_string().starts_with(
                "the worktrees' disks already take 40 MB of the 64 MB that access.maxWorktreeDiskMB \
                 allows, and a new worktree needs at least 26 MB."
            ),
            "{e}"
        );
        // Past the total already.
        assert!(new_disk_mb(budget(16, 64), 100 * MB, 0).is_err());
    }

    #[test]
    fn taken_counts_disks_at_their_full_size_and_plain_worktrees_by_what_they_hold() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::create_dir_all(disks_dir(repo)).unwrap();
        // A sparse image: 64 MB to the kernel's cap, nearly nothing on the host yet.
        let image = std::fs::File::create(disks_dir(repo).join("a.img")).unwrap();
        image.set_len(64 * MB).unwrap();
        std::fs::write(disks_dir(repo).join("notes.txt"), "not a disk").unwrap();
        let plain = branches_dir(repo).join("old");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("blob"), vec![7u8; 2 << 20]).unwrap();
        std::fs::create_dir_all(stores_dir(repo).join("abc")).unwrap();
        std::fs::write(stores_dir(repo).join("abc/pack"), vec![1u8; 1 << 20]).unwrap();
        let taken = taken(repo);
        assert!(taken >= (64 + 2 + 1) * MB, "{taken}");
        assert!(taken < (64 + 2 + 1 + 1) * MB, "{taken}");
    }
}
