//! Making and removing a worktree: its slug claimed, its branch, disk and repository made,
//! and all of it taken away again.

use std::path::Path;

use super::base::offline_head;
use super::space::{DiskBudget, checkout_estimate, new_disk_mb, taken};
use super::{
    Base, CreateError, Worktree, WorktreeError, blocking, branches_dir, disks_dir, slug, stores_dir,
};
use crate::workspace::{byproducts, disk, thread_repo};

/// Creates the worktree for `plan` in the repository at `repo`, starting from `base` (the
/// local HEAD when `None`): a slug unique among branches and worktrees, a disk for it as
/// `disks` allows ([`super::space::new_disk_mb`]; none when its `disk_mb` is 0; see
/// [`crate::workspace::disk`]), the thread's own repository in
/// it with the base commit's history only (see [`crate::workspace::thread_repo`]) and the
/// build by-products ignored in it ([`crate::workspace::byproducts`]), the base's files
/// checked out, and the branch `codebutler/<slug>` in the main repository too. Anything made
/// is removed again when a step fails.
pub async fn create(
    repo: &Path,
    plan: &str,
    base: Option<&Base>,
    disks: DiskBudget,
) -> Result<Worktree, CreateError> {
    let wanted = slug(plan);
    let err = |message: String| WorktreeError {
        slug: wanted.clone(),
        message,
    };
    let base = match base {
        Some(base) => base.clone(),
        None => {
            let dir = repo.to_owned();
            blocking(move || offline_head(&dir)).await?
        }
    };
    let (dir, first, commit) = (repo.to_owned(), wanted.clone(), base.commit.clone());
    let tree = blocking(move || reserve(&dir, &first, &commit)).await?;
    let name = tree_name(&tree);
    let made = async {
        let objects = thread_repo::ensure_base_store(repo, &stores_dir(repo), &base.commit, &name)
            .await
            .map_err(|e| err(format!("share the base's history: {e}")))?;
        let (path, branch, commit) = (tree.path.clone(), tree.branch.clone(), base.commit.clone());
        let upstream = (base.name != "HEAD").then(|| base.name.clone());
        let (images, main) = (disks_dir(repo), repo.to_owned());
        let made = tokio::task::spawn_blocking(move || {
            let fail = |message: String| WorktreeError {
                slug: branch.clone(),
                message,
            };
            if disks.disk_mb > 0 {
                // One disk is sized and made at a time: two creations cannot both take
                // what the total has left.
                let _lock = disk::lock_images(&images)
                    .map_err(|e| fail(format!("lock the worktrees' disks: {e}")))?;
                let size = new_disk_mb(disks, taken(&main), checkout_estimate(&main))?;
                disk::ThreadDisk::of(&images, &path)
                    .create(size)
                    .map_err(|e| fail(format!("make its disk: {e}")))?;
            }
            let short = branch.trim_start_matches(thread_repo::BRANCH_PREFIX);
            thread_repo::init(
                &main,
                &path,
                &objects,
                &branch,
                &commit,
                upstream.as_deref(),
            )
            .map_err(|e| fail(format!("make the thread's repository for {short}: {e}")))?;
            byproducts::write_exclude(&thread_repo::git_dir(&path))
                .map_err(|e| fail(format!("write the thread repository's ignore rules: {e}")))?;
            Ok::<_, CreateError>(())
        })
        .await;
        made.map_err(|e| WorktreeError {
            slug: wanted.clone(),
            message: format!("blocking task: {e}"),
        })?
    };
    match made.await {
        Ok(()) => Ok(tree),
        Err(e) => {
            if let Err(r) = remove(repo, &tree).await {
                tracing::warn!("remove the half-made worktree {}: {r}", tree.path.display());
            }
            Err(e)
        }
    }
}

/// The worktree's directory name (its slug).
fn tree_name(tree: &Worktree) -> String {
    tree.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Picks a free slug from `wanted` (`wanted-2`, `wanted-3`… when taken) and claims it: the
/// worktree's directory is made (atomically: a directory that exists is taken) and the
/// branch `codebutler/<slug>` is created in the main repository at `commit`.
fn reserve(repo: &Path, wanted: &str, commit: &str) -> Result<Worktree, WorktreeError> {
    let err = |message: String| WorktreeError {
        slug: wanted.to_owned(),
        message,
    };
    let repository = git2::Repository::open(repo).map_err(|e| err(e.message().to_owned()))?;
    let start = git2::Oid::from_str(commit)
        .and_then(|id| repository.find_commit(id))
        .map_err(|e| err(format!("find the start commit {commit}: {}", e.message())))?;
    let branches = branches_dir(repo);
    std::fs::create_dir_all(&branches)
        .map_err(|e| err(format!("create {}: {e}", branches.display())))?;
    let images = disks_dir(repo);
    let mut slug = wanted.to_owned();
    let mut n = 1;
    loop {
        let branch = format!("codebutler/{slug}");
        let path = branches.join(&slug);
        let taken = repository
            .find_branch(&branch, git2::BranchType::Local)
            .is_ok()
            || images.join(format!("{slug}.img")).exists()
            || repository.find_worktree(&slug).is_ok();
        if !taken {
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    repository
                        .branch(&branch, &start, false)
                        .map_err(|e| err(e.message().to_owned()))?;
                    return Ok(Worktree { path, branch });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(format!("create {}: {e}", path.display()))),
            }
        }
        n += 1;
        slug = format!("{wanted}-{n}");
    }
}

/// Removes a worktree made by [`create`]: its disk (or directory), the branch in the main
/// repository, and its use of the base store. Used when a preparation failed, so
/// approving again starts clean.
pub async fn remove(repo: &Path, tree: &Worktree) -> Result<(), WorktreeError> {
    remove_with(repo, tree, true).await
}

/// Removes a worktree as [`remove`] does but keeps its branch in the main repository (the
/// orphan cleanup, for a branch with commits that would otherwise be lost).
pub async fn remove_keeping_branch(repo: &Path, tree: &Worktree) -> Result<(), WorktreeError> {
    remove_with(repo, tree, false).await
}

async fn remove_with(
    repo: &Path,
    tree: &Worktree,
    delete_branch: bool,
) -> Result<(), WorktreeError> {
    let name = tree_name(tree);
    let err = |message: String| WorktreeError {
        slug: name.clone(),
        message,
    };
    let (dir, gone) = (repo.to_owned(), tree.clone());
    blocking(move || {
        let fail = |message: String| WorktreeError {
            slug: tree_name(&gone),
            message,
        };
        let image = disk::ThreadDisk::of(&disks_dir(&dir), &gone.path);
        if image.exists() {
            image.remove().map_err(|e| fail(e.to_string()))?;
        } else if gone.path.exists() {
            // std's remove_dir_all never follows the symlinks it meets.
            std::fs::remove_dir_all(&gone.path)
                .map_err(|e| fail(format!("remove {}: {e}", gone.path.display())))?;
        }
        if !delete_branch {
            return Ok(());
        }
        let repository = git2::Repository::open(&dir).map_err(|e| fail(e.message().to_owned()))?;
        if let Ok(mut branch) = repository.find_branch(&gone.branch, git2::BranchType::Local) {
            branch
                .delete()
                .map_err(|e| fail(format!("delete {}: {}", gone.branch, e.message())))?;
        }
        Ok(())
    })
    .await?;
    thread_repo::release_base_stores(&stores_dir(repo), &name)
        .await
        .map_err(|e| err(format!("release the base's history: {e}")))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::worktree::testing::{commit_files, repo_with};

    #[tokio::test]
    async fn creates_unique_worktrees_each_with_a_repository_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        // Things of the person and of other threads the new worktree must not see.
        let main = git2::Repository::open(&repo).unwrap();
        let head = main.head().unwrap().peel_to_commit().unwrap();
        main.branch("my-unpushed-work", &head, false).unwrap();
        let secret_blob = main.blob(b"SECRET OF ANOTHER THREAD").unwrap();
        let mut config = main.config().unwrap();
        config
            .set_str("http.extraheader", "AUTHORIZATION: basic c2VjcmV0")
            .unwrap();

        let first = create(&repo, "Add a feature", None, DiskBudget::NONE)
            .await
            .unwrap();
        assert_eq!(first.branch, "codebutler/add-a-feature");
        assert!(first.path.join("a.txt").is_file());
        assert!(
            std::fs::symlink_metadata(first.path.join(".git"))
                .unwrap()
                .is_dir(),
            "a repository of its own, not a linked worktree"
        );
        let own = thread_repo::open(&first.path).unwrap();
        assert_eq!(
            own.head().unwrap().name().ok(),
            Some("refs/heads/codebutler/add-a-feature")
        );
        assert_eq!(own.head().unwrap().target(), Some(head.id()));
        // Only its own branch and base; the base's history through the shared store.
        let refs: Vec<String> = own
            .references()
            .unwrap()
            .map(|r| r.unwrap().name().unwrap().to_owned())
            .collect();
        assert_eq!(
            refs,
            [
                "refs/codebutler/base",
                "refs/heads/codebutler/add-a-feature"
            ]
        );
        assert!(own.find_object(secret_blob, None).is_err());
        let own_config = std::fs::read_to_string(first.path.join(".git/config")).unwrap();
        assert!(!own_config.contains("extraheader"), "{own_config}");
        // The main repository has the branch too.
        assert!(
            main.find_branch("codebutler/add-a-feature", git2::BranchType::Local)
                .is_ok()
        );

        let second = create(&repo, "Add a feature", None, DiskBudget::NONE)
            .await
            .unwrap();
        assert_eq!(second.branch, "codebutler/add-a-feature-2");
        assert_ne!(first.path, second.path);
        // Both share one base store for the one base commit.
        let stores: Vec<_> = std::fs::read_dir(stores_dir(&repo))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        assert_eq!(stores, [head.id().to_string()]);
        remove(&repo, &first).await.unwrap();
        assert!(stores_dir(&repo).join(head.id().to_string()).is_dir());
        remove(&repo, &second).await.unwrap();
        assert!(
            !stores_dir(&repo).join(head.id().to_string()).exists(),
            "the last user removes the store"
        );
    }

    #[tokio::test]
    async fn a_shallow_clone_gives_worktrees_whose_history_git_can_read() {
        let dir = tempfile::tempdir().unwrap();
        let origin = repo_with(dir.path(), &[("a.txt", "a")]);
        let o = git2::Repository::open(&origin).unwrap();
        commit_files(&o, &[("b.txt", "b")], "second");
        commit_files(&o, &[("c.txt", "c")], "third");
        let main = dir.path().join("main");
        let cloned = std::process::Command::new("git")
            .args(["clone", "-q", "--depth", "1"])
            .arg(format!("file://{}", origin.display()))
            .arg(&main)
            .status()
            .unwrap();
        assert!(cloned.success());
        let tree = create(&main, "Shallow", None, DiskBudget::NONE)
            .await
            .unwrap();
        let log = std::process::Command::new("git")
            .args(["log", "--format=%s"])
            .current_dir(&tree.path)
            .output()
            .unwrap();
        assert!(log.status.success(), "{log:?}");
        assert_eq!(String::from_utf8_lossy(&log.stdout), "third\n");
    }

    #[tokio::test]
    async fn a_worktree_on_its_own_disk_is_capped_and_removed_whole() {
        disk::probe().expect("these machines run the tests as root with loop devices");
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let tree = create(&repo, "On a disk", None, DiskBudget::per_disk(32))
            .await
            .unwrap();
        let image = disks_dir(&repo).join("on-a-disk.img");
        assert!(image.is_file());
        assert_eq!(
            std::fs::read_to_string(tree.path.join("a.txt")).unwrap(),
            "a"
        );
        let stat = nix::sys::statvfs::statvfs(&tree.path).unwrap();
        let size = stat.blocks() * stat.fragment_size();
        assert!(size <= 32 << 20, "{size}");
        assert!(!tree.path.join("lost+found").exists());
        remove(&repo, &tree).await.unwrap();
        assert!(!image.exists());
        assert!(!tree.path.exists());
    }

    #[tokio::test]
    async fn remove_takes_away_the_worktree_and_its_branch() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let tree = create(&repo, "Short lived", None, DiskBudget::NONE)
            .await
            .unwrap();
        std::fs::create_dir_all(tree.path.join(".codebutler-cache/npm")).unwrap();
        remove(&repo, &tree).await.unwrap();
        assert!(!tree.path.exists());
        let r = git2::Repository::open(&repo).unwrap();
        assert!(
            r.find_branch(&tree.branch, git2::BranchType::Local)
                .is_err()
        );
        assert!(r.find_worktree("short-lived").is_err());
        // The same plan gets the same slug again.
        assert_eq!(
            create(&repo, "Short lived", None, DiskBudget::NONE)
                .await
                .unwrap()
                .path,
            tree.path
        );
    }
}
