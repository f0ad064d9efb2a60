//! How much disk the worktrees use and a new one needs: the `access.maxWorktreeDiskMB` check
//! a preparation makes before anything is created.

use std::path::Path;

/// Rounding of each file's size in the estimate of a new worktree (a filesystem block).
const BLOCK: u64 = 4096;

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

/// The refusal when `used` plus `needed` bytes would pass `limit_mb` (0: no limit).
pub fn disk_refusal(used: u64, needed: u64, limit_mb: u64) -> Option<String> {
    const MB: u64 = 1 << 20;
    if limit_mb == 0 || used.saturating_add(needed) <= limit_mb.saturating_mul(MB) {
        return None;
    }
    Some(format!(
        "the worktrees in .codebutler/branches already use {} MB and a new one needs about {} MB, \
         more than the {limit_mb} MB that access.maxWorktreeDiskMB allows. Close finished \
         threads or remove their worktrees, then approve the plan again",
        used.div_ceil(MB),
        needed.div_ceil(MB).max(1),
    ))
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
    fn the_estimate_comes_from_the_index_and_the_refusal_names_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a"), ("b.txt", &"b".repeat(5000))]);
        assert_eq!(checkout_estimate(&repo), 4096 + 8192);
        assert_eq!(disk_refusal(10 << 20, 1 << 20, 0), None);
        assert_eq!(disk_refusal(10 << 20, 1 << 20, 11), None);
        let refusal = disk_refusal(10 << 20, 2 << 20, 11).unwrap();
        assert!(
            refusal.starts_with("the worktrees in .codebutler/branches already use 10 MB and a new one needs about 2 MB, more than the 11 MB that access.maxWorktreeDiskMB allows"),
            "{refusal}"
        );
    }
}
