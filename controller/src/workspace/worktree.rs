//! Worktrees for runs: `<repo>/.codebutler/branches/<slug>` on branch `codebutler/<slug>`,
//! made with git2 (libgit2 runs no hooks), each a repository of its own with only its base
//! commit's history ([`super::thread_repo`]) on a disk of its own ([`super::disk`]), and
//! their preparation before a Coder starts ([`Preparer`]):
//!
//! 1. the disk the existing worktrees, their images and the base stores use is measured
//!    (allocated blocks, like `du`; no hashing) plus an estimate of the new one from the
//!    index's file sizes, against `access.maxWorktreeDiskMB`;
//! 2. `origin`'s default branch is fetched ([`choose_base`]) with the controller's safe git
//!    settings ([`super::forge::safe_git`]: no hooks, no `ext::`, no repository programs),
//!    from `remote.origin.url` directly, so no `remote.origin.*` setting applies; a failed
//!    fetch falls back to the last fetched `origin/<default>` or the local `HEAD`, and says so;
//! 3. the worktree is created on a new branch from that commit ([`create`]): its slug
//!    claimed, the base store shared or packed, its disk made and mounted, its repository
//!    made and the base's files checked out — all undone again if a step fails;
//! 4. the platforms' init ([`super::platform`]) runs in the sandbox with the network, and
//!    reports in the thread through a [`Progress`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::forge::{self, ForgeError};
use super::platform::{self, InitEnd, InitRequest};
use super::{disk, stage, thread_repo};
use crate::config::{BuildConfig, SandboxConfig};

/// Longest `git ls-remote` or `git fetch` of `origin` may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Rounding of each file's size in the estimate of a new worktree (a filesystem block).
const BLOCK: u64 = 4096;

/// A created worktree.
#[derive(Clone, Debug, PartialEq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
}

/// Why a worktree could not be made.
#[derive(Debug, thiserror::Error)]
#[error("create worktree for {slug}: {message}")]
pub struct WorktreeError {
    slug: String,
    message: String,
}

/// A branch-friendly slug of a plan's first line: lower-case words joined by `-`, at most
/// 40 characters, never empty.
pub fn slug(plan: &str) -> String {
    let line = plan
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let mut slug = String::new();
    for word in line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        "task".to_owned()
    } else {
        slug
    }
}

/// `.codebutler/branches` of the repository at `repo`: the worktrees.
pub fn branches_dir(repo: &Path) -> PathBuf {
    repo.join(".codebutler").join("branches")
}

/// `.codebutler/disks` of the repository at `repo`: the worktrees' disk images.
pub fn disks_dir(repo: &Path) -> PathBuf {
    repo.join(".codebutler").join("disks")
}

/// `.codebutler/git/bases` of the repository at `repo`: the shared base object stores.
pub fn stores_dir(repo: &Path) -> PathBuf {
    repo.join(".codebutler").join("git").join("bases")
}

/// Creates the worktree for `plan` in the repository at `repo`, starting from `base` (the
/// local HEAD when `None`): a slug unique among branches and worktrees, a disk of
/// `disk_mb` MB for it (none when 0; see [`super::disk`]), the thread's own repository in
/// it with the base commit's history only (see [`super::thread_repo`]), the base's files
/// checked out, and the branch `codebutler/<slug>` in the main repository too. Anything made
/// is removed again when a step fails.
pub async fn create(
    repo: &Path,
    plan: &str,
    base: Option<&Base>,
    disk_mb: u64,
) -> Result<Worktree, WorktreeError> {
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
        blocking(move || {
            let fail = |message: String| WorktreeError {
                slug: branch.clone(),
                message,
            };
            if disk_mb > 0 {
                disk::ThreadDisk::of(&images, &path)
                    .create(disk_mb)
                    .map_err(|e| fail(format!("make its disk: {e}")))?;
            }
            let short = branch.trim_start_matches(forge::BRANCH_PREFIX);
            thread_repo::init(
                &main,
                &path,
                &objects,
                &branch,
                &commit,
                upstream.as_deref(),
            )
            .map_err(|e| fail(format!("make the thread's repository for {short}: {e}")))
        })
        .await
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

/// Where a new branch starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// The commit (hex).
    pub commit: String,
    /// What it is, for people: `origin/main` or `HEAD`.
    pub name: String,
    /// Why it is not freshly fetched `origin/<default>`, when the fetch failed: for the
    /// thread.
    pub warning: Option<String>,
}

/// The branch `git ls-remote --symref <url> HEAD refs/heads/main refs/heads/master`
/// names as the remote's default: what `HEAD` points to, else `main`, else `master`.
pub fn default_branch(ls_remote: &str) -> Option<String> {
    let mut symref = None;
    let mut listed = Vec::new();
    for line in ls_remote.lines() {
        let mut parts = line.split('\t');
        let (Some(left), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        match left.strip_prefix("ref: ") {
            Some(target) if name == "HEAD" => symref = Some(target.to_owned()),
            Some(_) => {}
            None => listed.push(name.to_owned()),
        }
    }
    let branch = match symref {
        Some(target) if listed.iter().any(|n| n == "HEAD" || *n == target) => Some(target),
        _ => ["refs/heads/main", "refs/heads/master"]
            .into_iter()
            .find(|b| listed.iter().any(|n| n == b))
            .map(str::to_owned),
    }?;
    let name = branch.strip_prefix("refs/heads/")?;
    let valid = !name.starts_with('-') && git2::Reference::is_valid_name(&branch);
    valid.then(|| name.to_owned())
}

/// The `origin` remote.
struct Origin {
    url: String,
}

fn find_origin(repo: &Path) -> Result<Option<Origin>, git2::Error> {
    let repository = git2::Repository::open(repo)?;
    let Ok(remote) = repository.find_remote("origin") else {
        return Ok(None);
    };
    Ok(remote.url().ok().map(|url| Origin {
        url: url.to_owned(),
    }))
}

/// The commit of `refs/remotes/origin/<branch>`.
fn remote_branch(repo: &Path, branch: &str) -> Option<String> {
    let repository = git2::Repository::open(repo).ok()?;
    let id = repository
        .find_reference(&format!("refs/remotes/origin/{branch}"))
        .ok()?
        .peel_to_commit()
        .ok()?
        .id();
    Some(id.to_string())
}

/// The local HEAD as a base (what `runnerctl run` starts from).
fn offline_head(repo: &Path) -> Result<Base, WorktreeError> {
    let repository = git2::Repository::open(repo).map_err(|e| WorktreeError {
        slug: String::new(),
        message: e.message().to_owned(),
    })?;
    let head = repository
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(|e| WorktreeError {
            slug: String::new(),
            message: format!(
                "the repository has no commit to start from ({})",
                e.message()
            ),
        })?;
    Ok(Base {
        commit: head.id().to_string(),
        name: "HEAD".to_owned(),
        warning: None,
    })
}

/// The best base without the network: the last fetched `origin/<preferred>`, then
/// `origin/HEAD`'s branch, `origin/main`, `origin/master`; else the local HEAD.
fn offline_base(repo: &Path, preferred: Option<&str>) -> Result<Base, WorktreeError> {
    let err = |message: String| WorktreeError {
        slug: String::new(),
        message,
    };
    let repository = git2::Repository::open(repo).map_err(|e| err(e.message().to_owned()))?;
    let origin_head = repository
        .find_reference("refs/remotes/origin/HEAD")
        .ok()
        .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_owned))
        .and_then(|t| t.strip_prefix("refs/remotes/origin/").map(str::to_owned));
    let candidates = preferred
        .map(str::to_owned)
        .into_iter()
        .chain(origin_head)
        .chain(["main".to_owned(), "master".to_owned()]);
    for branch in candidates {
        if let Some(commit) = remote_branch(repo, &branch) {
            return Ok(Base {
                commit,
                name: format!("origin/{branch}"),
                warning: None,
            });
        }
    }
    offline_head(repo)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorktreeError> + Send + 'static,
) -> Result<T, WorktreeError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| WorktreeError {
            slug: String::new(),
            message: format!("blocking task: {e}"),
        })?
}

/// Learns `origin`'s default branch and fetches it (`+refs/heads/<b>:refs/remotes/origin/<b>`,
/// no tags, no submodules, with [`forge::safe_git`]).
async fn fetch_default(repo: &Path, url: &str) -> Result<String, ForgeError> {
    let mut ls = forge::safe_git(repo);
    ls.args([
        "ls-remote",
        "--symref",
        "--",
        url,
        "HEAD",
        "refs/heads/main",
        "refs/heads/master",
    ]);
    let listed = forge::run(ls, None, "git ls-remote origin", FETCH_TIMEOUT).await?;
    let branch = default_branch(&listed).ok_or_else(|| ForgeError::Failed {
        what: "git ls-remote origin".into(),
        status: "no default branch".into(),
        output: "origin has no HEAD, main or master branch".into(),
    })?;
    let refspec = format!("+refs/heads/{branch}:refs/remotes/origin/{branch}");
    let mut fetch = forge::safe_git(repo);
    fetch.args([
        "fetch",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-write-fetch-head",
        "--",
        url,
        &refspec,
    ]);
    forge::run(fetch, None, "git fetch origin", FETCH_TIMEOUT).await?;
    Ok(branch)
}

/// Where a new worktree branches from: `origin/<default>` freshly fetched; without an
/// `origin`, the local HEAD (logged); when the fetch fails, the last fetched
/// `origin/<default>` or the local HEAD, with a warning saying which.
pub async fn choose_base(repo: &Path) -> Result<Base, WorktreeError> {
    let dir = repo.to_owned();
    let origin = blocking(move || {
        find_origin(&dir).map_err(|e| WorktreeError {
            slug: String::new(),
            message: format!("read the origin remote: {}", e.message()),
        })
    })
    .await?;
    let Some(origin) = origin else {
        let dir = repo.to_owned();
        let base = blocking(move || offline_base(&dir, None)).await?;
        tracing::info!(
            "no origin remote: new worktrees branch from {} ({})",
            base.name,
            short(&base.commit)
        );
        return Ok(base);
    };
    let fetched = fetch_default(repo, &origin.url).await;
    let dir = repo.to_owned();
    match fetched {
        Ok(branch) => {
            let found = branch.clone();
            let commit = blocking(move || {
                remote_branch(&dir, &found).ok_or_else(|| WorktreeError {
                    slug: String::new(),
                    message: format!("origin/{found} is missing after the fetch"),
                })
            })
            .await?;
            Ok(Base {
                commit,
                name: format!("origin/{branch}"),
                warning: None,
            })
        }
        Err(e) => {
            tracing::warn!("fetch origin: {e}");
            let mut base = blocking(move || offline_base(&dir, None)).await?;
            let what = if base.name == "HEAD" {
                "the local HEAD".to_owned()
            } else {
                format!("the last fetched {}", base.name)
            };
            base.warning = Some(format!(
                "couldn't fetch origin ({}); starting from {what} ({}) instead",
                one_line(&e.to_string()),
                short(&base.commit)
            ));
            Ok(base)
        }
    }
}

fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// The first line of an error, at most 300 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(300).collect()
}

/// How worktree preparation reports in the thread.
#[async_trait]
pub trait Progress: Send + Sync {
    /// Posts a line; returns a handle for [`Progress::update`] when it was posted.
    async fn post(&self, text: &str) -> Option<String>;
    /// Replaces a posted line.
    async fn update(&self, handle: &str, text: &str);
    /// Posts Markdown (a long code block may become a snippet).
    async fn markdown(&self, markdown: &str);
    /// The preparation failed and the Coder will not start.
    async fn failed(&self);
}

/// Why a worktree could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// `access.maxWorktreeDiskMB` would be passed; nothing was created.
    #[error("{0}")]
    DiskLimit(String),
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    /// The init failed or timed out; the worktree was removed again.
    #[error("preparing the worktree failed: `{command}` {how}")]
    Init { command: String, how: String },
}

/// Prepares worktrees for Coder runs (see the module's documentation).
#[derive(Clone, Debug)]
pub struct Preparer {
    /// The repository's main checkout.
    pub repo: PathBuf,
    /// Where init specs and logs go (`.codebutler/run/`).
    pub run_dir: PathBuf,
    /// The `codebutler-runner` binary.
    pub runner_bin: PathBuf,
    pub sandbox: SandboxConfig,
    pub build: BuildConfig,
    /// `access.maxWorktreeDiskMB`; 0 for no limit.
    pub max_disk_mb: u64,
}

impl Preparer {
    /// [`Preparer::create`] then [`Preparer::init_or_remove`], as a Coder start does them
    /// (with the runner starting in between).
    #[cfg(test)]
    pub async fn prepare(
        &self,
        summary: &str,
        progress: &dyn Progress,
    ) -> Result<Worktree, PrepareError> {
        let tree = self.create(summary, progress).await?;
        self.init_or_remove(&tree, progress).await?;
        Ok(tree)
    }

    /// Checks the disk limit, fetches the base and creates the worktree for the plan titled
    /// `summary` (not yet prepared: see [`Preparer::init_or_remove`]).
    pub async fn create(
        &self,
        summary: &str,
        progress: &dyn Progress,
    ) -> Result<Worktree, PrepareError> {
        if self.max_disk_mb > 0 {
            let repo = self.repo.clone();
            let (used, needed) = tokio::task::spawn_blocking(move || {
                // Plain worktrees, the worktrees' disk images and the shared base stores.
                let used = disk_usage(&branches_dir(&repo))
                    + disk_usage(&disks_dir(&repo))
                    + disk_usage(&repo.join(".codebutler").join("git"));
                (used, checkout_estimate(&repo))
            })
            .await
            .map_err(|e| WorktreeError {
                slug: String::new(),
                message: format!("measure the worktrees: {e}"),
            })?;
            if let Some(refusal) = disk_refusal(used, needed, self.max_disk_mb) {
                tracing::warn!("worktree refused: {refusal}");
                return Err(PrepareError::DiskLimit(refusal));
            }
        }
        let base = choose_base(&self.repo).await?;
        if let Some(warning) = &base.warning {
            progress.post(warning).await;
        }
        let tree = create(&self.repo, summary, Some(&base), self.sandbox.disk_mb).await?;
        tracing::info!(
            "worktree {} on {} from {} ({})",
            tree.path.display(),
            tree.branch,
            base.name,
            short(&base.commit)
        );
        Ok(tree)
    }

    /// Creates a worktree for `plan` from the local HEAD, without fetching or preparing it
    /// (`runnerctl run`).
    pub async fn create_from_head(&self, plan: &str) -> Result<Worktree, WorktreeError> {
        create(&self.repo, plan, None, self.sandbox.disk_mb).await
    }

    /// The sandbox spec of a Coder run in `worktree` (see [`super::run_spec`]).
    pub fn run_spec(&self, worktree: &Path) -> codebutler_sandbox::SandboxSpec {
        super::run_spec(&self.sandbox, &self.build, worktree)
    }

    /// The worktree helper for `worktree`, in the sandbox its runs get (see [`stage`]).
    pub fn helper(&self, worktree: &Path) -> stage::Helper {
        stage::Helper {
            runner_bin: self.runner_bin.clone(),
            spec: self.run_spec(worktree),
        }
    }

    /// Mounts the disk of `worktree` again if a reboot unmounted it.
    pub async fn ensure_mounted(&self, worktree: &Path) -> Result<(), WorktreeError> {
        let disk = disk::ThreadDisk::of(&disks_dir(&self.repo), worktree);
        blocking(move || {
            disk.ensure_mounted().map_err(|e| WorktreeError {
                slug: String::new(),
                message: format!("mount {}: {e}", disk.mount.display()),
            })
        })
        .await
    }

    /// Runs the worktree's init. When it fails, the worktree and its branch are removed (a
    /// retry starts clean) and `progress` is told.
    pub async fn init_or_remove(
        &self,
        tree: &Worktree,
        progress: &dyn Progress,
    ) -> Result<(), PrepareError> {
        let Err(e) = self.init(tree, progress).await else {
            return Ok(());
        };
        if let Err(r) = remove(&self.repo, tree).await {
            tracing::warn!("remove the unprepared worktree: {r}");
        }
        progress.failed().await;
        Err(e)
    }

    /// Detects the platforms, makes the ignored directories and runs the init.
    async fn init(&self, tree: &Worktree, progress: &dyn Progress) -> Result<(), PrepareError> {
        let path = tree.path.clone();
        let project_type = self.build.project_type.clone();
        let (platforms, names) = blocking(move || {
            let platforms = platform::platforms(&path, &project_type);
            platform::make_ignored_dirs(&path, &platforms).map_err(|e| WorktreeError {
                slug: String::new(),
                message: format!("create the worktree's cache directories: {e}"),
            })?;
            Ok((platforms, platform::top_level_names(&path)))
        })
        .await?;
        let command = match &self.build.init_command {
            Some(command) => command.clone(),
            None => {
                let mut commands = Vec::new();
                for step in platform::init_plan(&platforms, &names) {
                    if platform::in_sandbox_path(&step.program) {
                        commands.push(step.command);
                    } else {
                        progress
                            .post(&format!(
                                "no `{}` where the sandbox can run it, so `{}` was skipped; \
                                 builds in the worktree may fail",
                                step.program, step.command
                            ))
                            .await;
                    }
                }
                if commands.is_empty() {
                    return Ok(());
                }
                commands.join(" && ")
            }
        };
        let mut spec = super::run_spec(&self.sandbox, &self.build, &tree.path);
        spec.network = true;
        spec.keep_fds = Vec::new();
        let name = tree
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let request = InitRequest {
            runner_bin: self.runner_bin.clone(),
            spec,
            command: command.clone(),
            spec_path: self.run_dir.join(format!("init-{name}.json")),
            log_path: self.run_dir.join(format!("init-{name}.log")),
            timeout: Duration::try_from_secs_f64(self.build.init_timeout_mins * 60.0)
                .unwrap_or(Duration::from_secs(600)),
        };
        let handle = progress
            .post(&format!("preparing the worktree: `{command}`…"))
            .await;
        tracing::info!(tag = "CLD", "worktree {name}: init `{command}`");
        let failure = |how: String| PrepareError::Init {
            command: command.clone(),
            how,
        };
        let outcome = match platform::run_init(&request).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let e = failure(format!("could not run: {e}"));
                if let Some(h) = &handle {
                    progress.update(h, &e.to_string()).await;
                }
                return Err(e);
            }
        };
        let took = elapsed(outcome.duration);
        let how = match &outcome.end {
            InitEnd::Succeeded => {
                tracing::info!(tag = "CLD", "worktree {name}: prepared in {took}");
                if let Some(h) = &handle {
                    progress
                        .update(h, &format!("prepared the worktree: `{command}` ({took})"))
                        .await;
                }
                return Ok(());
            }
            InitEnd::Failed { status } => format!("failed ({status}) after {took}"),
            InitEnd::TimedOut => format!(
                "did not finish within {} (build.initTimeout)",
                elapsed(request.timeout)
            ),
        };
        let e = failure(how);
        tracing::warn!(tag = "CLD", "worktree {name}: {e}");
        match &handle {
            Some(h) => progress.update(h, &e.to_string()).await,
            None => {
                progress.post(&e.to_string()).await;
            }
        }
        if !outcome.tail.is_empty() {
            progress
                .markdown(&format!(
                    "The end of its output:\n\n```\n{}\n```",
                    outcome.tail.replace("```", "ʼʼʼ")
                ))
                .await;
        }
        Err(e)
    }
}

fn elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(
            slug("Fix the session expiry!\nmore"),
            "fix-the-session-expiry"
        );
        assert_eq!(slug("   \n../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("ünïcode only"), "n-code-only");
        assert_eq!(slug(""), "task");
        assert!(slug(&"word ".repeat(40)).len() <= 40);
    }

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

        let first = create(&repo, "Add a feature", None, 0).await.unwrap();
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

        let second = create(&repo, "Add a feature", None, 0).await.unwrap();
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
        let tree = create(&main, "Shallow", None, 0).await.unwrap();
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
        let tree = create(&repo, "On a disk", None, 32).await.unwrap();
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

    /// A repository at `dir/repo` with one commit of `files`.
    fn repo_with(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
        let path = dir.join("repo");
        let repo = git2::Repository::init(&path).unwrap();
        commit_files(&repo, files, "init");
        path
    }

    fn commit_files(repo: &git2::Repository, files: &[(&str, &str)], message: &str) -> git2::Oid {
        let root = repo.workdir().unwrap().to_owned();
        let mut index = repo.index().unwrap();
        for (name, text) in files {
            std::fs::write(root.join(name), text).unwrap();
            index.add_path(Path::new(name)).unwrap();
        }
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let parents: Vec<git2::Commit<'_>> = repo
            .head()
            .ok()
            .and_then(|h| h.peel_to_commit().ok())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    /// A bare `origin` at `dir/origin.git` holding the repository's branch, then one more
    /// commit pushed to it from elsewhere (so origin is ahead of the local checkout).
    fn origin_ahead(dir: &Path, repo: &Path) -> (String, git2::Oid) {
        let bare_path = dir.join("origin.git");
        git2::Repository::init_bare(&bare_path).unwrap();
        let local = git2::Repository::open(repo).unwrap();
        let branch = local.head().unwrap().name().unwrap().to_owned();
        local
            .remote("origin", bare_path.to_str().unwrap())
            .unwrap()
            .push(&[format!("{branch}:{branch}")], None)
            .unwrap();
        let bare = git2::Repository::open_bare(&bare_path).unwrap();
        bare.set_head(&branch).unwrap();
        // Someone else pushes a commit.
        let other =
            git2::Repository::clone(bare_path.to_str().unwrap(), dir.join("other")).unwrap();
        let id = commit_files(&other, &[("upstream.txt", "new upstream work")], "upstream");
        other
            .find_remote("origin")
            .unwrap()
            .push(&[format!("{branch}:{branch}")], None)
            .unwrap();
        (branch.trim_start_matches("refs/heads/").to_owned(), id)
    }

    #[test]
    fn default_branch_follows_head_then_main_then_master() {
        let out = "ref: refs/heads/develop\tHEAD\n1111\tHEAD\n2222\trefs/heads/main\n";
        assert_eq!(default_branch(out), Some("develop".into()));
        // HEAD pointing at a branch that does not exist (a fresh bare repository).
        let out = "2222\trefs/heads/master\n";
        assert_eq!(default_branch(out), Some("master".into()));
        let out = "2222\trefs/heads/master\n3333\trefs/heads/main\n";
        assert_eq!(default_branch(out), Some("main".into()));
        assert_eq!(default_branch(""), None);
        // A name that could be taken for an option or an invalid ref is refused.
        assert_eq!(default_branch("ref: refs/heads/-x\tHEAD\n1\tHEAD\n"), None);
        assert_eq!(
            default_branch("ref: refs/heads/a..b\tHEAD\n1\tHEAD\n"),
            None
        );
    }

    #[tokio::test]
    async fn without_origin_the_base_is_the_local_head() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let head = git2::Repository::open(&repo)
            .unwrap()
            .head()
            .unwrap()
            .target()
            .unwrap();
        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, "HEAD");
        assert_eq!(base.commit, head.to_string());
        assert_eq!(base.warning, None);
    }

    #[tokio::test]
    async fn the_base_is_origins_default_branch_fetched_without_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let (branch, upstream) = origin_ahead(dir.path(), &repo);
        // A hook that a fetch would run if hooks were on.
        let marker = dir.path().join("hook-ran");
        let hook = repo.join(".git/hooks/reference-transaction");
        std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
        std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();

        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, format!("origin/{branch}"));
        assert_eq!(base.commit, upstream.to_string());
        assert_eq!(base.warning, None);
        assert!(!marker.exists(), "a hook ran during the fetch");

        let tree = create(&repo, "Use upstream", Some(&base), 0).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.path.join("upstream.txt")).unwrap(),
            "new upstream work"
        );
        // The thread knows its base as origin's branch.
        assert_eq!(
            thread_repo::open(&tree.path)
                .unwrap()
                .refname_to_id(&format!("refs/remotes/origin/{branch}"))
                .unwrap(),
            upstream
        );
        // The main checkout did not move.
        assert!(!repo.join("upstream.txt").exists());
    }

    #[tokio::test]
    async fn a_failed_fetch_falls_back_and_says_which_base() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let (branch, upstream) = origin_ahead(dir.path(), &repo);
        choose_base(&repo).await.unwrap();
        // origin goes away: the last fetched origin/<branch> is used.
        std::fs::rename(dir.path().join("origin.git"), dir.path().join("gone.git")).unwrap();
        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, format!("origin/{branch}"));
        assert_eq!(base.commit, upstream.to_string());
        let warning = base.warning.unwrap();
        assert!(warning.starts_with("couldn't fetch origin ("), "{warning}");
        assert!(
            warning.ends_with(&format!(
                "starting from the last fetched origin/{branch} ({}) instead",
                &upstream.to_string()[..7]
            )),
            "{warning}"
        );

        // Never fetched: the local HEAD.
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        git2::Repository::open(&repo)
            .unwrap()
            .remote("origin", dir.path().join("missing.git").to_str().unwrap())
            .unwrap();
        let base = choose_base(&repo).await.unwrap();
        assert_eq!(base.name, "HEAD");
        assert!(
            base.warning
                .unwrap()
                .contains("; starting from the local HEAD ("),
        );
    }

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

    #[tokio::test]
    async fn remove_takes_away_the_worktree_and_its_branch() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a.txt", "a")]);
        let tree = create(&repo, "Short lived", None, 0).await.unwrap();
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
            create(&repo, "Short lived", None, 0).await.unwrap().path,
            tree.path
        );
    }

    /// Records what a preparation reports.
    #[derive(Default)]
    struct Recorded {
        lines: std::sync::Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Progress for Recorded {
        async fn post(&self, text: &str) -> Option<String> {
            let mut lines = self.lines.lock().unwrap();
            lines.push(format!("post {text}"));
            Some(format!("{}", lines.len()))
        }
        async fn update(&self, handle: &str, text: &str) {
            self.lines
                .lock()
                .unwrap()
                .push(format!("update {handle} {text}"));
        }
        async fn markdown(&self, markdown: &str) {
            self.lines
                .lock()
                .unwrap()
                .push(format!("markdown {markdown}"));
        }
        async fn failed(&self) {
            self.lines.lock().unwrap().push("failed".into());
        }
    }

    /// A stand-in for `codebutler-runner sandbox-exec --spec F -- CMD…` that runs CMD
    /// unsandboxed (the real sandbox is tested in the runner's and the e2e suites).
    fn fake_runner(dir: &Path) -> PathBuf {
        let path = dir.join("fake-runner");
        std::fs::write(&path, "#!/bin/sh\nshift 4\nexec \"$@\"\n").unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    }

    fn preparer(dir: &Path, repo: &Path, init: Option<&str>, timeout_mins: f64) -> Preparer {
        Preparer {
            repo: repo.to_owned(),
            run_dir: dir.join("run"),
            runner_bin: fake_runner(dir),
            sandbox: SandboxConfig {
                mode: "enforce".into(),
                max_processes: 64,
                memory_mb: 512,
                file_size_mb: 64,
                cpu_seconds: 60,
                tmp_mb: 64,
                disk_mb: 0,
                read_only: Vec::new(),
                runner_path: None,
            },
            build: BuildConfig {
                project_type: "auto".into(),
                init_command: init.map(str::to_owned),
                init_timeout_mins: timeout_mins,
            },
            max_disk_mb: 0,
        }
    }

    #[tokio::test]
    async fn a_generic_project_is_prepared_silently() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let progress = Recorded::default();
        let tree = preparer(dir.path(), &repo, None, 1.0)
            .prepare("Edit the readme", &progress)
            .await
            .unwrap();
        assert!(tree.path.join("README.md").is_file());
        assert!(progress.lines.lock().unwrap().is_empty());
        assert!(
            tree.path
                .join(super::platform::CACHE_DIR)
                .join(".gitignore")
                .is_file()
        );
    }

    #[tokio::test]
    async fn the_init_reports_progress_and_its_failure_removes_the_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let progress = Recorded::default();
        let ok = preparer(dir.path(), &repo, Some("echo ready > prepared.txt"), 1.0);
        let tree = ok.prepare("First", &progress).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.path.join("prepared.txt")).unwrap(),
            "ready\n"
        );
        let lines = progress.lines.lock().unwrap().clone();
        assert_eq!(
            lines[0],
            "post preparing the worktree: `echo ready > prepared.txt`…"
        );
        assert!(
            lines[1].starts_with("update 1 prepared the worktree: `echo ready > prepared.txt` ("),
            "{lines:?}"
        );

        let progress = Recorded::default();
        let failing = preparer(
            dir.path(),
            &repo,
            Some("echo compiling; echo BROKEN-DEP >&2; exit 3"),
            1.0,
        );
        let e = failing.prepare("Second", &progress).await.unwrap_err();
        assert!(matches!(e, PrepareError::Init { .. }), "{e}");
        assert!(e.to_string().contains("failed (exit status: 3)"), "{e}");
        let lines = progress.lines.lock().unwrap().clone();
        assert!(
            lines[1].starts_with("update 1 preparing the worktree failed: `echo compiling"),
            "{lines:?}"
        );
        assert!(
            lines[2].contains("```\ncompiling\nBROKEN-DEP\n```"),
            "{lines:?}"
        );
        assert_eq!(lines[3], "failed");
        let path = repo.join(".codebutler/branches/second");
        assert!(!path.exists(), "the unprepared worktree is removed");
        assert!(
            git2::Repository::open(&repo)
                .unwrap()
                .find_branch("codebutler/second", git2::BranchType::Local)
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_hung_init_is_killed_at_its_time_limit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let pid_file = dir.path().join("sleeper.pid");
        let command = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let progress = Recorded::default();
        let started = std::time::Instant::now();
        let e = preparer(dir.path(), &repo, Some(&command), 0.05)
            .prepare("Hangs", &progress)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20));
        assert!(
            e.to_string()
                .contains("did not finish within 3s (build.initTimeout)"),
            "{e}"
        );
        // The whole process group went, the background sleeper included (a killed process
        // takes a moment to die on a busy machine, so its end is awaited, not assumed).
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let alive = || {
            Path::new(&format!("/proc/{}", pid.trim())).exists()
                && !std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                    .unwrap_or_default()
                    .contains(") Z ")
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while alive() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(), "the init's child {pid} survived");
    }

    #[tokio::test]
    async fn the_disk_limit_refuses_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let old = repo.join(".codebutler/branches/old");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("blob"), vec![7u8; 3 << 20]).unwrap();
        let mut limited = preparer(dir.path(), &repo, None, 1.0);
        limited.max_disk_mb = 2;
        let progress = Recorded::default();
        let e = limited.prepare("Too much", &progress).await.unwrap_err();
        assert!(matches!(e, PrepareError::DiskLimit(_)), "{e}");
        assert!(e.to_string().contains("access.maxWorktreeDiskMB"), "{e}");
        assert!(!repo.join(".codebutler/branches/too-much").exists());
        // After clean-up the same plan goes through.
        std::fs::remove_file(old.join("blob")).unwrap();
        limited.prepare("Too much", &progress).await.unwrap();
        assert!(repo.join(".codebutler/branches/too-much").is_dir());
    }
}
