//! A thread's own git repository: the `.git` directory inside its worktree, holding only
//! what the thread may see.
//!
//! A runner sees its worktree's `.git` read-only. If that were a linked worktree of the main
//! repository, it would see every ref and object there: other threads' commits and
//! checkpoints, the person's unpushed branches and stash, and `.git/config` with whatever
//! credentials it holds. So each worktree is a repository of its own:
//!
//! - its objects are the thread's own commits and checkpoints, written by the controller;
//! - its history comes from a **base store** (`.codebutler/git/bases/<commit>/objects`,
//!   named in `objects/info/alternates`): a pack of exactly the base commit's ancestry,
//!   built from the main repository with `git pack-objects` and shared read-only by the
//!   threads that start from the same commit (same commit, same ancestry: nothing leaks);
//! - its refs are its branch `codebutler/<slug>`, `refs/codebutler/base` (where the branch
//!   started) and, when the base is `origin`'s, `refs/remotes/origin/<default>`; its config
//!   is the controller's, with nothing from the person's.
//!
//! The main repository gets a copy of the branch ([`mirror`]) after every commit, so people
//! see `codebutler/<slug>` there and pushes run from it with the person's own remote
//! settings; runners never see the main repository at all.
//!
//! The controller opens a thread repository only by its path ([`open`]): never through the
//! worktree, whose files the runner wrote. Blocking (git2): call from `spawn_blocking`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{Oid, Repository, RepositoryInitOptions, RepositoryOpenFlags};

use super::step_error::{GitStepError, IoStepError, git, io};
use super::{base_checkout, git_command};

/// The identity of every commit the controller makes.
pub const BOT_NAME: &str = "CodeButler";
/// The e-mail address of every commit the controller makes.
pub const BOT_EMAIL: &str = "codebutler@localhost";
/// Largest file a commit takes: GitHub refuses pushes with bigger ones.
pub const MAX_COMMIT_FILE_BYTES: u64 = 100 * 1024 * 1024;

/// The only branches the controller commits on and pushes.
pub const BRANCH_PREFIX: &str = "codebutler/";

/// Whether `branch` is one of ours ([`BRANCH_PREFIX`] and more) and a valid branch name.
pub fn is_our_branch(branch: &str) -> bool {
    branch.len() > BRANCH_PREFIX.len()
        && branch.starts_with(BRANCH_PREFIX)
        && git2::Reference::is_valid_name(&format!("refs/heads/{branch}"))
}

/// Where the branch started: the base commit, for the PR's commit list.
pub const BASE_REF: &str = "refs/codebutler/base";
/// Longest the packing of a base store may take.
const PACK_TIMEOUT: Duration = Duration::from_secs(600);

/// A thread repository could not be made, opened or copied.
#[derive(Debug, thiserror::Error)]
pub enum ThreadRepoError {
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error(transparent)]
    Io(#[from] IoStepError),
    #[error("{0}")]
    Invalid(String),
    #[error("pack the base commit's history: {0}")]
    Pack(String),
    #[error(transparent)]
    Checkout(#[from] base_checkout::CheckoutError),
}

/// The git directory of the worktree at `worktree`.
pub fn git_dir(worktree: &Path) -> PathBuf {
    worktree.join(".git")
}

/// Opens the thread repository of `worktree` as the controller must: its `.git` must be a
/// real directory (not a symlink, not a `gitdir:` file), opened as a bare repository (no
/// working directory: the controller never reads the worktree's files through git2).
pub fn open(worktree: &Path) -> Result<Repository, ThreadRepoError> {
    let dir = git_dir(worktree);
    let meta = fs::symlink_metadata(&dir).map_err(io(format!("inspect {}", dir.display())))?;
    if !meta.is_dir() {
        return Err(ThreadRepoError::Invalid(format!(
            "{} is not a git directory of its own (a worktree made before threads had their own \
             repositories, or one changed by hand); start a new thread",
            dir.display()
        )));
    }
    Ok(Repository::open_ext(
        &dir,
        RepositoryOpenFlags::NO_SEARCH | RepositoryOpenFlags::BARE,
        std::iter::empty::<&str>(),
    )
    .map_err(git(format!("open {}", dir.display())))?)
}

/// Makes the thread repository in the empty directory `worktree`: its objects borrowed from
/// the base store `objects`, `HEAD` on `branch` at `base`, the base recorded in
/// [`BASE_REF`] (and as `refs/remotes/<upstream>` when given, e.g. `origin/main`), the main
/// repository `main`'s shallow boundary if it is a shallow clone, and the base's files
/// checked out with the index ([`base_checkout`]).
pub fn init(
    main: &Path,
    worktree: &Path,
    objects: &Path,
    branch: &str,
    base: &str,
    upstream: Option<&str>,
) -> Result<(), ThreadRepoError> {
    let mut options = RepositoryInitOptions::new();
    options
        .bare(false)
        .no_reinit(true)
        .mkdir(false)
        .external_template(false)
        .initial_head(branch);
    let repo = Repository::init_opts(worktree, &options).map_err(git(format!(
        "create the repository in {}",
        worktree.display()
    )))?;
    let info = git_dir(worktree).join("objects/info");
    fs::create_dir_all(&info).map_err(io(format!("create {}", info.display())))?;
    fs::write(info.join("alternates"), format!("{}\n", objects.display()))
        .map_err(io("write the repository's alternates"))?;
    // A shallow clone's history ends where its `shallow` file says; the thread's too.
    let main_dir = Repository::open(main)
        .map_err(git(format!("open {}", main.display())))?
        .path()
        .to_owned();
    match fs::read(main_dir.join("shallow")) {
        Ok(shallow) => fs::write(git_dir(worktree).join("shallow"), shallow)
            .map_err(io("write the repository's shallow boundary"))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("read the repository's shallow boundary")(e).into()),
    }
    let id = Oid::from_str(base).map_err(git("read the base commit"))?;
    let commit = repo
        .find_commit(id)
        .map_err(git(format!("find the base commit {base}")))?;
    let mut config = repo.config().map_err(git("open the repository's config"))?;
    config
        .set_i32("gc.auto", 0)
        .map_err(git("write the repository's config"))?;
    repo.reference(
        &format!("refs/heads/{branch}"),
        id,
        false,
        "codebutler: new thread",
    )
    .map_err(git(format!("create {branch}")))?;
    repo.reference(BASE_REF, id, true, "codebutler: base")
        .map_err(git("record the base"))?;
    if let Some(upstream) = upstream {
        repo.reference(
            &format!("refs/remotes/{upstream}"),
            id,
            true,
            "codebutler: base",
        )
        .map_err(git(format!("record {upstream}")))?;
    }
    Ok(base_checkout::check_out(&repo, worktree, commit.tree_id())?)
}

/// The directory of the base store for `commit` under `stores` (`.codebutler/git/bases`).
pub fn base_store(stores: &Path, commit: &str) -> PathBuf {
    stores.join(commit)
}

/// Makes sure the base store of `commit` exists (packing its ancestry from the main
/// repository `main` when it does not) and records `user` (a worktree's slug) as using it;
/// returns its `objects` directory.
pub async fn ensure_base_store(
    main: &Path,
    stores: &Path,
    commit: &str,
    user: &str,
) -> Result<PathBuf, ThreadRepoError> {
    Oid::from_str(commit).map_err(git("read the base commit"))?;
    fs::create_dir_all(stores).map_err(io(format!("create {}", stores.display())))?;
    let lock = StoresLock::take(stores).await?;
    let store = base_store(stores, commit);
    let objects = store.join("objects");
    if !objects.join("pack").is_dir() {
        let staging = stores.join(format!(".new-{commit}-{}", std::process::id()));
        if staging.exists() {
            fs::remove_dir_all(&staging).map_err(io(format!("remove {}", staging.display())))?;
        }
        let pack_dir = staging.join("objects/pack");
        fs::create_dir_all(&pack_dir).map_err(io(format!("create {}", pack_dir.display())))?;
        fs::create_dir_all(staging.join("objects/info"))
            .map_err(io("create the store's info directory"))?;
        let mut pack = git_command::safe_git(main);
        pack.args(["pack-objects", "--revs", "--delta-base-offset", "-q"])
            .arg(pack_dir.join("pack"));
        git_command::run(
            pack,
            Some(format!("{commit}\n").as_bytes()),
            "git pack-objects",
            PACK_TIMEOUT,
        )
        .await
        .map_err(|e| ThreadRepoError::Pack(e.to_string()))?;
        if store.exists() {
            fs::remove_dir_all(&store).map_err(io(format!("remove {}", store.display())))?;
        }
        fs::rename(&staging, &store).map_err(io(format!("create {}", store.display())))?;
    }
    let users = store.join("threads");
    fs::create_dir_all(&users).map_err(io(format!("create {}", users.display())))?;
    fs::write(users.join(user), b"").map_err(io("record the store's user"))?;
    drop(lock);
    Ok(objects)
}

/// Forgets `user` (a worktree's slug) in every base store, and removes the stores no
/// worktree uses any more.
pub async fn release_base_stores(stores: &Path, user: &str) -> Result<(), ThreadRepoError> {
    if !stores.is_dir() {
        return Ok(());
    }
    let lock = StoresLock::take(stores).await?;
    let listed = fs::read_dir(stores).map_err(io(format!("list {}", stores.display())))?;
    for entry in listed {
        let entry = entry.map_err(io(format!("list {}", stores.display())))?;
        let name = entry.file_name();
        if Oid::from_str(&name.to_string_lossy()).is_err() {
            continue;
        }
        let store = entry.path();
        let users = store.join("threads");
        match fs::remove_file(users.join(user)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io("forget the store's user")(e).into()),
        }
        let in_use = match fs::read_dir(&users) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io(format!("list {}", users.display()))(e).into()),
        };
        if !in_use {
            fs::remove_dir_all(&store).map_err(io(format!("remove {}", store.display())))?;
        }
    }
    drop(lock);
    Ok(())
}

/// The base commit a thread repository started from.
pub fn base_of(repo: &Repository) -> Result<Oid, ThreadRepoError> {
    Ok(repo
        .refname_to_id(BASE_REF)
        .map_err(git("read the thread's base"))?)
}

/// Copies the thread's branch `branch` into the main repository `main`: the objects its
/// commits since the base need, then `refs/heads/<branch>` set to the same commit. Pushes
/// run from the main repository, with the person's own remote settings.
pub fn mirror(main: &Path, thread: &Repository, branch: &str) -> Result<Oid, ThreadRepoError> {
    if !is_our_branch(branch) {
        return Err(ThreadRepoError::Invalid(format!(
            "refusing to commit or push {branch:?}: only {BRANCH_PREFIX} branches are allowed"
        )));
    }
    let main_repo = Repository::open(main).map_err(git(format!("open {}", main.display())))?;
    let tip = thread
        .refname_to_id(&format!("refs/heads/{branch}"))
        .map_err(git(format!("read {branch}")))?;
    let from = thread.odb().map_err(git("open the thread's objects"))?;
    let to = main_repo
        .odb()
        .map_err(git("open the repository's objects"))?;
    let mut walk = thread.revwalk().map_err(git("walk the branch"))?;
    walk.push(tip).map_err(git("walk the branch"))?;
    if let Ok(base) = base_of(thread) {
        walk.hide(base).map_err(git("walk the branch"))?;
    }
    for id in walk {
        let id = id.map_err(git("walk the branch"))?;
        if to.exists(id) {
            continue;
        }
        let commit = thread.find_commit(id).map_err(git("read a commit"))?;
        copy_tree(&from, &to, thread, commit.tree_id())?;
        copy_object(&from, &to, id)?;
    }
    main_repo
        .reference(
            &format!("refs/heads/{branch}"),
            tip,
            true,
            "codebutler: the thread's branch",
        )
        .map_err(git(format!("update {branch} in the repository")))?;
    Ok(tip)
}

/// Copies the object `id` from the object database `from` to `to`.
pub(super) fn copy_object(
    from: &git2::Odb<'_>,
    to: &git2::Odb<'_>,
    id: Oid,
) -> Result<(), ThreadRepoError> {
    let object = from.read(id).map_err(git("read an object"))?;
    to.write(object.kind(), object.data())
        .map_err(git("copy an object"))?;
    Ok(())
}

/// Copies the tree `id` of the repository `thread` (whose objects are `from`) and every tree
/// and blob it holds that `to` does not have yet.
pub(super) fn copy_tree(
    from: &git2::Odb<'_>,
    to: &git2::Odb<'_>,
    thread: &Repository,
    id: Oid,
) -> Result<(), ThreadRepoError> {
    if to.exists(id) {
        return Ok(());
    }
    let tree = thread.find_tree(id).map_err(git("read a tree"))?;
    for entry in tree.iter() {
        match entry.kind() {
            Some(git2::ObjectType::Tree) => copy_tree(from, to, thread, entry.id())?,
            Some(git2::ObjectType::Blob) if !to.exists(entry.id()) => {
                copy_object(from, to, entry.id())?;
            }
            _ => {}
        }
    }
    copy_object(from, to, id)
}

/// Records that `origin` has `branch` at `id` (after a push), in the thread repository, so
/// "undo" knows which commits others can already see.
pub fn set_pushed(thread: &Repository, branch: &str, id: Oid) -> Result<(), ThreadRepoError> {
    thread
        .reference(
            &format!("refs/remotes/origin/{branch}"),
            id,
            true,
            "codebutler: pushed",
        )
        .map_err(git("record the push"))?;
    Ok(())
}

/// An exclusive lock on the base stores (a `flock` on `.lock` in their directory), so
/// packing, recording and removing stores never interleave, across processes too.
struct StoresLock {
    _lock: nix::fcntl::Flock<fs::File>,
}

impl StoresLock {
    async fn take(stores: &Path) -> Result<Self, ThreadRepoError> {
        let path = stores.join(".lock");
        tokio::task::spawn_blocking(move || {
            let file = fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(io(format!("open {}", path.display())))?;
            let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
                .map_err(|(_, e)| io("lock the base stores")(io::Error::from(e)))?;
            Ok(Self { _lock: lock })
        })
        .await
        .map_err(|e| ThreadRepoError::Invalid(format!("lock the base stores: {e}")))?
    }
}
