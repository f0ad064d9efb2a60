//! Bringing a thread's branch up to date with the default branch ("rebase" in a thread).
//!
//! The default branch's head is merged into the branch, never rebased onto it: the result is
//! a merge commit whose parents are the branch's head and the default branch's head, so a
//! branch already pushed only gets a new commit and is pushed without force (an open pull
//! request just gets one more commit).
//!
//! Everything runs in the controller with git2 on the thread's own repository
//! ([`super::thread_repo`]), opened by its path, never through the worktree's files: the
//! default branch's new commits are copied in from the main repository, the merge is computed
//! in memory (`merge_commits`: libgit2 runs no hooks, no filter or merge-driver programs, and
//! reads no config the runner could have written, since the thread repository's `.git` is
//! read-only to it). The worktree's files change only through the sandboxed worktree helper
//! ([`super::stage`]), as "undo" changes them.
//!
//! A clean merge is recorded as pending ([`PENDING_REF`]) before anything else changes, then
//! the worktree is given its files, the branch moved to it and copied to the main repository;
//! a crash in between is finished by the next attempt ([`pending`]). A real conflict is not
//! resolved here: the worktree is given the merge's files with conflict markers, and the
//! default branch's head is recorded as the merge in progress ([`MERGE_HEAD_REF`], like git's
//! `MERGE_HEAD`), so the Coder's next commit ([`super::forge::commit_all`]) becomes the merge
//! commit. [`abort_merge`] puts the worktree back to the branch's head.
//!
//! Blocking (git2, the helper): call from `spawn_blocking`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use git2::{IndexEntry, MergeFileOptions, Oid, Repository};

use super::prepared::{self, Prepared};
use super::stage::{self, Helper, StageError};
use super::step_error::{GitStepError, git};
use super::thread_repo::{
    self, BASE_REF, BOT_EMAIL, BOT_NAME, MAX_COMMIT_FILE_BYTES, ThreadRepoError,
};

/// The default branch's head being merged while its conflicts wait for the Coder.
pub const MERGE_HEAD_REF: &str = "refs/codebutler/merge-head";
/// A clean merge commit made and not yet fully applied (worktree, branch, main repository).
pub const PENDING_REF: &str = "refs/codebutler/pending-merge";
/// The stage bits of an index entry's flags.
const STAGE_MASK: u16 = 0x3000;

/// Why the branch could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error(transparent)]
    Thread(#[from] ThreadRepoError),
    #[error("{step}: {source}")]
    Stage {
        step: String,
        #[source]
        source: StageError,
    },
    #[error("the branch {branch} moved while it was being brought up to date")]
    Moved { branch: String },
}

fn staged(step: &str) -> impl FnOnce(StageError) -> UpdateError + '_ {
    move |source| UpdateError::Stage {
        step: step.to_owned(),
        source,
    }
}

/// What the default branch brings that the thread's branch lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// The default branch's head.
    pub head: Oid,
    /// How many of its commits the branch does not have.
    pub commits: usize,
}

/// What merging the default branch into the thread's branch gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// The branch has the default branch's head already: nothing to do.
    UpToDate,
    /// A merge commit (made, not yet on the branch: [`apply_clean`] puts it there).
    Clean { merge: Oid, incoming: Incoming },
    /// Real conflicts: `tree` is the merge's files with conflict markers in `files`.
    Conflicts {
        tree: Oid,
        files: Vec<String>,
        incoming: Incoming,
    },
}

/// What [`bring_up_to_date`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The branch had the default branch's head already: nothing changed.
    UpToDate,
    /// The worktree has files not committed on the branch: nothing changed.
    Uncommitted,
    /// The merge commit `merge` is on the branch, in the worktree and in the main repository.
    /// Call [`clear_pending`] once that is recorded.
    Merged { merge: Oid, incoming: Incoming },
    /// The worktree holds the merge with conflict markers in `files`; the merge is in
    /// progress until the Coder commits it or [`abort_merge`] drops it.
    Conflicts {
        files: Vec<String>,
        incoming: Incoming,
    },
}

/// Brings `branch` of the worktree `worktree` up to date with `default_head` (named
/// `default_name`), everything the steps above in order: a clean merge a crash cut off is
/// finished first; a merge in progress is dropped and computed again; a worktree with
/// uncommitted files is left alone; then [`compute`], and [`apply_clean`] or
/// [`start_conflicted`].
pub fn bring_up_to_date(
    helper: &Helper,
    main: &Path,
    worktree: &Path,
    branch: &str,
    default_head: Oid,
    default_name: &str,
) -> Result<Outcome, UpdateError> {
    if let Some(merge) = finish_pending(helper, main, worktree, branch)? {
        let repo = thread_repo::open(worktree)?;
        let commit = repo.find_commit(merge).map_err(git("read the merge"))?;
        let ours = commit.parent_id(0).map_err(git("read the merge"))?;
        let theirs = commit.parent_id(1).map_err(git("read the merge"))?;
        let incoming = Incoming {
            head: theirs,
            commits: count_new(&repo, theirs, ours)?,
        };
        return Ok(Outcome::Merged { merge, incoming });
    }
    abort_merge(helper, worktree)?;
    if !is_clean(helper, worktree, branch)? {
        return Ok(Outcome::Uncommitted);
    }
    Ok(
        match compute(main, worktree, branch, default_head, default_name)? {
            Update::UpToDate => Outcome::UpToDate,
            Update::Clean { merge, incoming } => {
                apply_clean(helper, main, worktree, branch, merge)?;
                Outcome::Merged { merge, incoming }
            }
            Update::Conflicts {
                tree,
                files,
                incoming,
            } => {
                start_conflicted(helper, worktree, incoming.head, tree)?;
                Outcome::Conflicts { files, incoming }
            }
        },
    )
}

/// Merges `default_head` (the main repository `main`'s commit, named `default_name` for
/// people, e.g. `origin/main`) into `branch` of the thread repository of `worktree`, in
/// memory: copies the default branch's new commits into the thread repository, then makes
/// the merge commit, or the tree with conflict markers. Changes no ref and no file.
pub fn compute(
    main: &Path,
    worktree: &Path,
    branch: &str,
    default_head: Oid,
    default_name: &str,
) -> Result<Update, UpdateError> {
    let repo = thread_repo::open(worktree)?;
    let head = branch_head(&repo, branch)?;
    import(main, &repo, default_head, head)?;
    let contains = repo
        .graph_descendant_of(head, default_head)
        .map_err(git("compare the branch with the default branch"))?;
    if head == default_head || contains {
        return Ok(Update::UpToDate);
    }
    let incoming = Incoming {
        head: default_head,
        commits: count_new(&repo, default_head, head)?,
    };
    let ours = repo.find_commit(head).map_err(git("read the branch"))?;
    let theirs = repo
        .find_commit(default_head)
        .map_err(git("read the default branch"))?;
    let mut index = repo
        .merge_commits(&ours, &theirs, None)
        .map_err(git("merge the default branch"))?;
    if index.has_conflicts() {
        let (tree, files) = marked_tree(&repo, &mut index, branch, default_name)?;
        return Ok(Update::Conflicts {
            tree,
            files,
            incoming,
        });
    }
    let tree_id = index
        .write_tree_to(&repo)
        .map_err(git("write the merged tree"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(git("read the merged tree"))?;
    let signature = git2::Signature::now(BOT_NAME, BOT_EMAIL).map_err(git("make the signature"))?;
    let message = format!(
        "Merge {default_name} ({}) into {branch}\n",
        short(default_head)
    );
    let merge = repo
        .commit(
            None,
            &signature,
            &signature,
            &message,
            &tree,
            &[&ours, &theirs],
        )
        .map_err(git("make the merge commit"))?;
    Ok(Update::Clean { merge, incoming })
}

/// Whether the worktree's files are the branch's head (nothing uncommitted, nothing
/// untracked), read through the sandboxed `helper`. What the worktree's preparation left
/// and the Coder never changed does not count: no commit would take it
/// ([`prepared::select`]).
pub fn is_clean(helper: &Helper, worktree: &Path, branch: &str) -> Result<bool, UpdateError> {
    let repo = thread_repo::open(worktree)?;
    let head = repo
        .find_commit(branch_head(&repo, branch)?)
        .map_err(git("read the branch"))?;
    let files =
        stage::snapshot(helper, &repo, MAX_COMMIT_FILE_BYTES).map_err(staged("read the files"))?;
    if !files.skipped.is_empty() {
        return Ok(false);
    }
    let record = Prepared::read(&repo).map_err(git("read the preparation's record"))?;
    let head_tree = head.tree().map_err(git("read the branch's files"))?;
    let files = prepared::select(files.files, &[], &head_tree, &record, &[]).files;
    let mut index = stage::index_of(&files).map_err(staged("index the files"))?;
    let tree = index
        .write_tree_to(&repo)
        .map_err(git("write the worktree's tree"))?;
    Ok(tree == head.tree_id())
}

/// Puts the clean merge `merge` ([`compute`]) on `branch`: recorded as pending first, then
/// the worktree gets its files (through `helper`), the branch moves to it, the base becomes
/// the default branch's head, and the branch is copied to the main repository `main`. Call
/// [`clear_pending`] once what it did is recorded.
pub fn apply_clean(
    helper: &Helper,
    main: &Path,
    worktree: &Path,
    branch: &str,
    merge: Oid,
) -> Result<(), UpdateError> {
    let repo = thread_repo::open(worktree)?;
    repo.reference(PENDING_REF, merge, true, "codebutler: merge to apply")
        .map_err(git("record the merge"))?;
    apply(helper, main, &repo, branch, merge)
}

/// The pending clean merge of an attempt a crash cut off, finished again (same files, same
/// commit): `Some(merge)` when there was one to finish, `None` otherwise (a stale record is
/// dropped).
pub fn finish_pending(
    helper: &Helper,
    main: &Path,
    worktree: &Path,
    branch: &str,
) -> Result<Option<Oid>, UpdateError> {
    let repo = thread_repo::open(worktree)?;
    let Some(merge) = pending(&repo) else {
        return Ok(None);
    };
    let head = branch_head(&repo, branch)?;
    let first = repo
        .find_commit(merge)
        .and_then(|c| c.parent_id(0))
        .map_err(git("read the pending merge"))?;
    if head != first && head != merge {
        drop_ref(&repo, PENDING_REF)?;
        return Ok(None);
    }
    apply(helper, main, &repo, branch, merge)?;
    Ok(Some(merge))
}

/// Forgets the pending merge once what it did is recorded.
pub fn clear_pending(worktree: &Path) -> Result<(), UpdateError> {
    drop_ref(&thread_repo::open(worktree)?, PENDING_REF)
}

/// The pending clean merge, if any.
fn pending(repo: &Repository) -> Option<Oid> {
    repo.refname_to_id(PENDING_REF).ok()
}

fn apply(
    helper: &Helper,
    main: &Path,
    repo: &Repository,
    branch: &str,
    merge: Oid,
) -> Result<(), UpdateError> {
    let commit = repo.find_commit(merge).map_err(git("read the merge"))?;
    let ours = commit.parent_id(0).map_err(git("read the merge"))?;
    let theirs = commit.parent_id(1).map_err(git("read the merge"))?;
    let head = branch_head(repo, branch)?;
    if head != ours && head != merge {
        return Err(UpdateError::Moved {
            branch: branch.to_owned(),
        });
    }
    // The files are written before the branch moves: a branch at the merge has them.
    if head == ours {
        let files = stage::restore(helper, repo, commit.tree_id())
            .map_err(staged("write the merged files"))?;
        stage::write_index(repo, &files.files).map_err(staged("index the merged files"))?;
    }
    repo.reference(
        &format!("refs/heads/{branch}"),
        merge,
        true,
        "codebutler: merge the default branch",
    )
    .map_err(git(format!("move {branch}")))?;
    merged_base(repo, theirs)?;
    thread_repo::mirror(main, repo, branch)?;
    Ok(())
}

/// Starts the merge of `theirs` (the default branch's head) whose conflicts the Coder will
/// resolve: records it as in progress, then gives the worktree the files of `tree` (the
/// merge with conflict markers) through `helper`.
pub fn start_conflicted(
    helper: &Helper,
    worktree: &Path,
    theirs: Oid,
    tree: Oid,
) -> Result<(), UpdateError> {
    let repo = thread_repo::open(worktree)?;
    repo.reference(
        MERGE_HEAD_REF,
        theirs,
        true,
        "codebutler: merge in progress",
    )
    .map_err(git("record the merge in progress"))?;
    let files =
        stage::restore(helper, &repo, tree).map_err(staged("write the conflicted files"))?;
    stage::write_index(&repo, &files.files).map_err(staged("index the conflicted files"))?;
    Ok(())
}

/// Abandons the merge in progress, if any: the worktree back to the branch's head (through
/// `helper`) and the merge forgotten. Returns the commit that was being merged.
pub fn abort_merge(helper: &Helper, worktree: &Path) -> Result<Option<Oid>, UpdateError> {
    let repo = thread_repo::open(worktree)?;
    let Some(theirs) = merge_head(&repo) else {
        return Ok(None);
    };
    let tree = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .map_err(git("read the branch's head"))?;
    let files =
        stage::restore(helper, &repo, tree.id()).map_err(staged("write the branch's files"))?;
    stage::write_index(&repo, &files.files).map_err(staged("index the branch's files"))?;
    drop_ref(&repo, MERGE_HEAD_REF)?;
    Ok(Some(theirs))
}

/// The commit being merged while its conflicts wait for the Coder, if any.
pub fn merge_head(repo: &Repository) -> Option<Oid> {
    repo.refname_to_id(MERGE_HEAD_REF).ok()
}

/// The merge in progress for a commit on `head`: the commit being merged, unless `head`
/// has it already (a commit of it made before a crash cut off its bookkeeping), in which case
/// the stale record is finished and dropped.
pub fn merge_in_progress(repo: &Repository, head: Oid) -> Result<Option<Oid>, UpdateError> {
    let Some(theirs) = merge_head(repo) else {
        return Ok(None);
    };
    let merged = head == theirs
        || repo
            .graph_descendant_of(head, theirs)
            .map_err(git("compare the branch with the merge in progress"))?;
    if merged {
        merge_committed(repo, theirs)?;
        return Ok(None);
    }
    Ok(Some(theirs))
}

/// Whether the thread repository of `worktree` has a merge in progress.
pub fn merging(worktree: &Path) -> Result<Option<Oid>, UpdateError> {
    Ok(merge_head(&thread_repo::open(worktree)?))
}

/// The merge in progress was committed (with `theirs` as its second parent): the branch's
/// base is now `theirs`, and nothing is in progress any more.
pub fn merge_committed(repo: &Repository, theirs: Oid) -> Result<(), UpdateError> {
    merged_base(repo, theirs)?;
    drop_ref(repo, MERGE_HEAD_REF)
}

/// The files of `tree` that still hold conflict markers (a line starting `<<<<<<< ` or
/// `>>>>>>> `) among those that differ from `ours`: a merge's resolution must remove them
/// all before it is committed.
pub fn markers_left(repo: &Repository, ours: Oid, tree: Oid) -> Result<Vec<String>, UpdateError> {
    let old = repo
        .find_tree(ours)
        .map_err(git("read the branch's tree"))?;
    let new = repo.find_tree(tree).map_err(git("read the new tree"))?;
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(git("diff the resolution"))?;
    let mut left = Vec::new();
    for delta in diff.deltas() {
        let file = delta.new_file();
        if file.id().is_zero() {
            continue;
        }
        let blob = repo
            .find_blob(file.id())
            .map_err(git("read a resolved file"))?;
        let marked = blob
            .content()
            .split(|b| *b == b'\n')
            .any(|line| line.starts_with(b"<<<<<<< ") || line.starts_with(b">>>>>>> "));
        if marked && let Some(path) = file.path() {
            left.push(path.to_string_lossy().into_owned());
        }
    }
    left.sort();
    Ok(left)
}

/// After a merge, the branch's changes are counted from the default branch's head it took
/// in (where GitHub's pull request diff starts too), not from where it first branched.
fn merged_base(repo: &Repository, theirs: Oid) -> Result<(), UpdateError> {
    repo.reference(
        BASE_REF,
        theirs,
        true,
        "codebutler: merged the default branch",
    )
    .map_err(git("record the new base"))?;
    Ok(())
}

fn drop_ref(repo: &Repository, name: &str) -> Result<(), UpdateError> {
    match repo.find_reference(name) {
        Ok(mut reference) => reference.delete().map_err(git(format!("delete {name}")))?,
        Err(e) if e.code() == git2::ErrorCode::NotFound => {}
        Err(e) => return Err(git(format!("read {name}"))(e).into()),
    }
    Ok(())
}

fn branch_head(repo: &Repository, branch: &str) -> Result<Oid, UpdateError> {
    Ok(repo
        .refname_to_id(&format!("refs/heads/{branch}"))
        .map_err(git(format!("read {branch}")))?)
}

/// Copies the commits of the main repository `main` up to `tip` that the thread repository
/// lacks (oldest first, so having `tip` means having its history), with their trees.
fn import(main: &Path, repo: &Repository, tip: Oid, branch_head: Oid) -> Result<(), UpdateError> {
    let to = repo.odb().map_err(git("open the thread's objects"))?;
    if to.exists(tip) {
        return Ok(());
    }
    let source = Repository::open(main).map_err(git(format!("open {}", main.display())))?;
    let from = source.odb().map_err(git("open the repository's objects"))?;
    let mut walk = source.revwalk().map_err(git("walk the default branch"))?;
    walk.push(tip).map_err(git("walk the default branch"))?;
    // What the thread has: its branch (copied to the main repository at every commit) and
    // the history of its base.
    let base = thread_repo::base_of(repo)?;
    for known in [branch_head, base] {
        if from.exists(known) {
            walk.hide(known).map_err(git("walk the default branch"))?;
        }
    }
    let ids = walk
        .collect::<Result<Vec<Oid>, _>>()
        .map_err(git("walk the default branch"))?;
    for id in ids.into_iter().rev() {
        if to.exists(id) {
            continue;
        }
        let commit = source
            .find_commit(id)
            .map_err(git("read a commit of the default branch"))?;
        thread_repo::copy_tree(&from, &to, &source, commit.tree_id())?;
        thread_repo::copy_object(&from, &to, id)?;
    }
    Ok(())
}

/// How many commits `tip` has that `head` does not.
fn count_new(repo: &Repository, tip: Oid, head: Oid) -> Result<usize, UpdateError> {
    let mut walk = repo.revwalk().map_err(git("count the new commits"))?;
    walk.push(tip).map_err(git("count the new commits"))?;
    walk.hide(head).map_err(git("count the new commits"))?;
    let mut count = 0;
    for id in walk {
        id.map_err(git("count the new commits"))?;
        count += 1;
    }
    Ok(count)
}

/// The merge's tree with every conflict written out: both sides with conflict markers
/// (labelled with the branch and `theirs_label`) where both changed a file, the surviving
/// side where one deleted it. Returns the tree and the conflicted paths, sorted.
fn marked_tree(
    repo: &Repository,
    index: &mut git2::Index,
    ours_label: &str,
    theirs_label: &str,
) -> Result<(Oid, Vec<String>), UpdateError> {
    let conflicts = index
        .conflicts()
        .map_err(git("list the conflicts"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(git("list the conflicts"))?;
    let mut files = Vec::new();
    for conflict in conflicts {
        let Some(path) = [&conflict.our, &conflict.their, &conflict.ancestor]
            .into_iter()
            .flatten()
            .map(|e| e.path.clone())
            .next()
        else {
            continue;
        };
        let shown = String::from_utf8_lossy(&path).into_owned();
        index
            .conflict_remove(Path::new(OsStr::from_bytes(&path)))
            .map_err(git(format!("resolve {shown}")))?;
        let resolved = match (&conflict.our, &conflict.their) {
            (Some(our), Some(their)) => {
                let ancestor = match &conflict.ancestor {
                    Some(a) => entry_like(a, a.id, a.file_size),
                    None => empty_entry(repo, our)?,
                };
                let mut options = MergeFileOptions::new();
                options.our_label(ours_label).their_label(theirs_label);
                let merged = repo
                    .merge_file_from_index(&ancestor, our, their, Some(&mut options))
                    .map_err(git(format!("mark the conflicts in {shown}")))?;
                let id = repo
                    .blob(merged.content())
                    .map_err(git(format!("write {shown}")))?;
                let size = u32::try_from(merged.content().len()).unwrap_or(u32::MAX);
                Some(entry_like(our, id, size))
            }
            (Some(one), None) | (None, Some(one)) => Some(entry_like(one, one.id, one.file_size)),
            (None, None) => None,
        };
        if let Some(mut entry) = resolved {
            entry.flags &= !STAGE_MASK;
            index.add(&entry).map_err(git(format!("stage {shown}")))?;
        }
        files.push(shown);
    }
    files.sort();
    let tree = index
        .write_tree_to(repo)
        .map_err(git("write the conflicted tree"))?;
    Ok((tree, files))
}

/// An empty common ancestor for a file both sides added.
fn empty_entry(repo: &Repository, like: &IndexEntry) -> Result<IndexEntry, UpdateError> {
    let id = repo.blob(b"").map_err(git("write an empty file"))?;
    Ok(entry_like(like, id, 0))
}

/// `like` with the content `id` of `file_size` bytes (git2's entries are not `Clone`).
fn entry_like(like: &IndexEntry, id: Oid, file_size: u32) -> IndexEntry {
    IndexEntry {
        ctime: like.ctime,
        mtime: like.mtime,
        dev: like.dev,
        ino: like.ino,
        mode: like.mode,
        uid: like.uid,
        gid: like.gid,
        file_size,
        id,
        flags: like.flags,
        flags_extended: like.flags_extended,
        path: like.path.clone(),
    }
}

/// A commit's short id, as people read it.
pub fn short(id: Oid) -> String {
    id.to_string().chars().take(7).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::stage::test_support::{ThreadFixture, commit_worktree};

    /// Commits `files` on the main repository's `main` (the default branch moving on).
    fn advance_main(f: &ThreadFixture, files: &[(&str, &str)]) -> Oid {
        let repo = Repository::open(f.main()).unwrap();
        let parent = repo.head().unwrap().peel_to_commit().unwrap();
        let mut index = git2::Index::new().unwrap();
        index.read_tree(&parent.tree().unwrap()).unwrap();
        for (path, text) in files {
            let id = repo.blob(text.as_bytes()).unwrap();
            index
                .add(&IndexEntry {
                    ctime: git2::IndexTime::new(0, 0),
                    mtime: git2::IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100_644,
                    uid: 0,
                    gid: 0,
                    file_size: 0,
                    id,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                })
                .unwrap();
        }
        let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.commit(
            Some("refs/heads/main"),
            &sig,
            &sig,
            "main moves",
            &tree,
            &[&parent],
        )
        .unwrap()
    }

    fn read(f: &ThreadFixture, path: &str) -> String {
        std::fs::read_to_string(f.worktree().join(path)).unwrap()
    }

    fn thread(f: &ThreadFixture) -> Repository {
        thread_repo::open(f.worktree()).unwrap()
    }

    fn update(f: &ThreadFixture, theirs: Oid) -> Update {
        compute(
            f.main(),
            f.worktree(),
            "codebutler/t",
            theirs,
            "origin/main",
        )
        .unwrap()
    }

    #[test]
    fn a_clean_merge_becomes_a_two_parent_commit_on_the_branch_and_in_the_worktree() {
        let f = ThreadFixture::new(&[("a.txt", "one\n"), ("b.txt", "two\n")]);
        std::fs::write(f.worktree().join("a.txt"), "one, the thread's\n").unwrap();
        let ours = commit_worktree(&f, "the thread's work");
        let theirs = advance_main(&f, &[("b.txt", "two, main's\n"), ("c.txt", "new\n")]);
        assert!(is_clean(&f.helper(), f.worktree(), "codebutler/t").unwrap());

        let Update::Clean { merge, incoming } = update(&f, theirs) else {
            panic!("expected a clean merge");
        };
        assert_eq!(
            incoming,
            Incoming {
                head: theirs,
                commits: 1
            }
        );
        // Nothing moved yet.
        let repo = thread(&f);
        assert_eq!(branch_head(&repo, "codebutler/t").unwrap(), ours);
        assert_eq!(read(&f, "b.txt"), "two\n");

        apply_clean(&f.helper(), f.main(), f.worktree(), "codebutler/t", merge).unwrap();
        let commit = repo.find_commit(merge).unwrap();
        assert_eq!(commit.parent_ids().collect::<Vec<_>>(), [ours, theirs]);
        assert_eq!(commit.author().name().unwrap(), BOT_NAME);
        assert_eq!(
            commit.message().unwrap(),
            format!("Merge origin/main ({}) into codebutler/t\n", short(theirs))
        );
        assert_eq!(branch_head(&repo, "codebutler/t").unwrap(), merge);
        assert_eq!(thread_repo::base_of(&repo).unwrap(), theirs);
        assert_eq!(
            (read(&f, "a.txt"), read(&f, "b.txt"), read(&f, "c.txt")),
            (
                "one, the thread's\n".to_owned(),
                "two, main's\n".to_owned(),
                "new\n".to_owned()
            )
        );
        assert_eq!(
            f.git_status(),
            "",
            "the worktree is the merge, as git sees it"
        );
        let main = Repository::open(f.main()).unwrap();
        assert_eq!(
            main.refname_to_id("refs/heads/codebutler/t").unwrap(),
            merge,
            "copied to the main repository"
        );
        assert_eq!(pending(&repo), Some(merge));
        clear_pending(f.worktree()).unwrap();
        assert_eq!(pending(&repo), None);

        // Again: nothing to do.
        assert_eq!(update(&f, theirs), Update::UpToDate);
    }

    #[test]
    fn a_branch_that_has_the_default_head_is_up_to_date() {
        let f = ThreadFixture::new(&[("a.txt", "one\n")]);
        let main = Repository::open(f.main()).unwrap();
        let head = main.refname_to_id("refs/heads/main").unwrap();
        assert_eq!(update(&f, head), Update::UpToDate);
        std::fs::write(f.worktree().join("a.txt"), "mine\n").unwrap();
        commit_worktree(&f, "work");
        assert_eq!(update(&f, head), Update::UpToDate);
    }

    #[test]
    fn a_conflict_gives_the_worktree_markers_and_the_next_commit_is_the_merge() {
        let f = ThreadFixture::new(&[("a.txt", "one\n"), ("b.txt", "two\n")]);
        std::fs::write(f.worktree().join("a.txt"), "one, the thread's\n").unwrap();
        let ours = commit_worktree(&f, "the thread's work");
        let theirs = advance_main(
            &f,
            &[("a.txt", "one, main's\n"), ("b.txt", "two, main's\n")],
        );

        let Update::Conflicts {
            tree,
            files,
            incoming,
        } = update(&f, theirs)
        else {
            panic!("expected conflicts");
        };
        assert_eq!(files, ["a.txt"]);
        assert_eq!(incoming.commits, 1);
        start_conflicted(&f.helper(), f.worktree(), theirs, tree).unwrap();
        assert_eq!(
            read(&f, "a.txt"),
            "<<<<<<< codebutler/t\none, the thread's\n=======\none, main's\n>>>>>>> origin/main\n"
        );
        assert_eq!(read(&f, "b.txt"), "two, main's\n", "the clean part merged");
        let repo = thread(&f);
        assert_eq!(merge_head(&repo), Some(theirs));
        assert_eq!(branch_head(&repo, "codebutler/t").unwrap(), ours);

        // A commit that leaves the markers is refused; the merge stays in progress.
        let refused = crate::workspace::forge::commit_all(
            &f.helper(),
            f.main(),
            f.worktree(),
            "resolved?",
            &[],
        );
        assert_eq!(
            refused.unwrap_err().to_string(),
            "conflict markers are still in a.txt: resolve them, then commit again"
        );
        assert_eq!(merge_head(&repo), Some(theirs));
        assert_eq!(branch_head(&repo, "codebutler/t").unwrap(), ours);

        // The Coder resolves and commits: that commit is the merge.
        std::fs::write(f.worktree().join("a.txt"), "one, both\n").unwrap();
        let merge = commit_worktree(&f, "Resolve the conflicts with origin/main");
        let commit = repo.find_commit(merge).unwrap();
        assert_eq!(commit.parent_ids().collect::<Vec<_>>(), [ours, theirs]);
        assert_eq!(merge_head(&repo), None);
        assert_eq!(thread_repo::base_of(&repo).unwrap(), theirs);
        assert_eq!(update(&f, theirs), Update::UpToDate);
        // A record left by a crash after that commit is dropped, not merged twice.
        repo.reference(MERGE_HEAD_REF, theirs, true, "test")
            .unwrap();
        assert_eq!(merge_in_progress(&repo, merge).unwrap(), None);
        assert_eq!(merge_head(&repo), None);
    }

    #[test]
    fn an_aborted_merge_puts_the_branch_head_back() {
        let f = ThreadFixture::new(&[("a.txt", "one\n")]);
        std::fs::write(f.worktree().join("a.txt"), "ours\n").unwrap();
        commit_worktree(&f, "ours");
        let theirs = advance_main(&f, &[("a.txt", "theirs\n"), ("new.txt", "n\n")]);
        let Update::Conflicts { tree, .. } = update(&f, theirs) else {
            panic!("expected conflicts");
        };
        start_conflicted(&f.helper(), f.worktree(), theirs, tree).unwrap();
        assert!(!is_clean(&f.helper(), f.worktree(), "codebutler/t").unwrap());

        assert_eq!(
            abort_merge(&f.helper(), f.worktree()).unwrap(),
            Some(theirs)
        );
        assert_eq!(read(&f, "a.txt"), "ours\n");
        assert!(!f.worktree().join("new.txt").exists());
        assert_eq!(f.git_status(), "");
        assert_eq!(merging(f.worktree()).unwrap(), None);
        assert_eq!(abort_merge(&f.helper(), f.worktree()).unwrap(), None);
    }

    #[test]
    fn a_merge_cut_off_half_way_is_finished_by_the_next_attempt() {
        let f = ThreadFixture::new(&[("a.txt", "one\n"), ("b.txt", "two\n")]);
        std::fs::write(f.worktree().join("a.txt"), "ours\n").unwrap();
        commit_worktree(&f, "ours");
        let theirs = advance_main(&f, &[("b.txt", "theirs\n")]);
        let Update::Clean { merge, .. } = update(&f, theirs) else {
            panic!("expected a clean merge");
        };
        // Recorded, then a crash before anything else.
        let repo = thread(&f);
        repo.reference(PENDING_REF, merge, true, "test").unwrap();

        let finished = finish_pending(&f.helper(), f.main(), f.worktree(), "codebutler/t");
        assert_eq!(finished.unwrap(), Some(merge));
        assert_eq!(branch_head(&repo, "codebutler/t").unwrap(), merge);
        assert_eq!(read(&f, "b.txt"), "theirs\n");
        // Finished again after a crash before it was cleared: the same.
        let again = finish_pending(&f.helper(), f.main(), f.worktree(), "codebutler/t");
        assert_eq!(again.unwrap(), Some(merge));
        clear_pending(f.worktree()).unwrap();
        let none = finish_pending(&f.helper(), f.main(), f.worktree(), "codebutler/t");
        assert_eq!(none.unwrap(), None);
    }

    #[test]
    fn uncommitted_or_untracked_files_make_the_worktree_unclean() {
        let f = ThreadFixture::new(&[("a.txt", "one\n")]);
        assert!(is_clean(&f.helper(), f.worktree(), "codebutler/t").unwrap());
        std::fs::write(f.worktree().join("new.txt"), "x").unwrap();
        assert!(!is_clean(&f.helper(), f.worktree(), "codebutler/t").unwrap());
    }
}
