//! The controller's side of the worktree helper (`codebutler-runner worktree-io`, frames
//! in [`codebutler_sandbox::worktree_wire`]): a worktree's files come in as frames from a
//! sandboxed process that sees only that worktree, and become blobs, an index and a tree in
//! the thread's repository. The controller itself never opens a file of a worktree.
//!
//! What the helper says is untrusted: paths are checked by the wire decoder, content is
//! written as new blobs, and a file sent "unchanged" by id must name a blob the thread's own
//! object store already has (one the runner could read anyway), so a tree can never take
//! in anything from outside the thread.

use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::step_error::{GitStepError, git};
use codebutler_sandbox::SandboxSpec;
use codebutler_sandbox::worktree_wire::{self as wire, Body, Frame, MODE_GITLINK, Stat, WireError};
use git2::{Oid, Repository};

/// Longest a helper may take.
const HELPER_TIMEOUT: Duration = Duration::from_secs(600);
/// Most bytes of the helper's stderr kept for an error.
const STDERR_TAIL: usize = 2000;
/// Most ignored entries kept from a helper (it sends at most 200; this bounds one that
/// sends more).
const MAX_IGNORED: usize = 256;

/// How to start the helper for one worktree.
#[derive(Clone, Debug)]
pub struct Helper {
    /// The `codebutler-runner` binary.
    pub runner_bin: PathBuf,
    /// The worktree's sandbox spec (the run's; the helper drops the hub descriptor and
    /// refuses the network).
    pub spec: SandboxSpec,
}

/// The helper failed, or what it sent cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("start the worktree helper {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("the worktree helper failed: {0}")]
    Failed(String),
    #[error("the worktree helper did not finish within {} s", HELPER_TIMEOUT.as_secs())]
    Timeout,
    #[error(transparent)]
    Git(#[from] GitStepError),
    #[error("the worktree helper named {path} as unchanged, but this thread has no blob {id}")]
    UnknownBlob { path: String, id: String },
    #[error("prepare the worktree helper: {0}")]
    Spec(String),
}

/// One file as it now is in the thread's object store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    pub path: Vec<u8>,
    pub mode: u32,
    pub id: Oid,
    pub stat: Stat,
}

/// What a helper run produced.
#[derive(Clone, Debug, Default)]
pub struct Files {
    /// Every file, in the helper's order.
    pub files: Vec<Staged>,
    /// Files left out as larger than the limit, with their sizes.
    pub skipped: Vec<(String, u64)>,
    /// What git ignores (a directory for everything in it), when asked for
    /// ([`snapshot_for_commit`]); at most a couple of hundred entries.
    pub ignored: Vec<String>,
}

/// Reads every file git would track in the worktree (regular files up to `max_file_bytes`)
/// into the thread's object store `repo`. Blocking: call from `spawn_blocking`.
pub fn snapshot(
    helper: &Helper,
    repo: &Repository,
    max_file_bytes: u64,
) -> Result<Files, StageError> {
    run(
        helper,
        repo,
        &[
            "snapshot".into(),
            "--max-file-bytes".into(),
            max_file_bytes.to_string(),
        ],
        max_file_bytes,
    )
}

/// [`snapshot`] for a commit: also lists what git ignores ([`Files::ignored`]), and reads
/// the ignored files under the worktree-relative paths `include` (checked by the caller)
/// as if git tracked them. Blocking.
pub fn snapshot_for_commit(
    helper: &Helper,
    repo: &Repository,
    max_file_bytes: u64,
    include: &[String],
) -> Result<Files, StageError> {
    let mut operation = vec![
        "snapshot".to_owned(),
        "--max-file-bytes".to_owned(),
        max_file_bytes.to_string(),
        "--list-ignored".to_owned(),
    ];
    // One argument each, `=`-joined, so a path cannot be taken for an option.
    operation.extend(include.iter().map(|path| format!("--include={path}")));
    run(helper, repo, &operation, max_file_bytes)
}

/// Puts the tree `tree` of the thread's object store back into the worktree; returns the
/// files written. Blocking.
pub fn restore(helper: &Helper, repo: &Repository, tree: Oid) -> Result<Files, StageError> {
    run(
        helper,
        repo,
        &["restore".into(), "--tree".into(), tree.to_string()],
        0,
    )
}

/// A git index of `files` (with their metadata, so git in the sandbox sees them unchanged).
pub fn index_of(files: &[Staged]) -> Result<git2::Index, StageError> {
    let mut index = git2::Index::new().map_err(git("make an index"))?;
    fill(&mut index, files)?;
    Ok(index)
}

/// Replaces the thread repository's own index by `files`, and returns its tree.
pub fn write_index(repo: &Repository, files: &[Staged]) -> Result<Oid, StageError> {
    let mut index = repo.index().map_err(git("open the index"))?;
    index.clear().map_err(git("clear the index"))?;
    fill(&mut index, files)?;
    index.write().map_err(git("write the index"))?;
    Ok(index.write_tree().map_err(git("write the tree"))?)
}

fn fill(index: &mut git2::Index, files: &[Staged]) -> Result<(), StageError> {
    for file in files {
        let time = |secs: u32, nanos: u32| {
            git2::IndexTime::new(i32::try_from(secs).unwrap_or(i32::MAX), nanos)
        };
        let entry = git2::IndexEntry {
            ctime: time(file.stat.ctime_secs, file.stat.ctime_nanos),
            mtime: time(file.stat.mtime_secs, file.stat.mtime_nanos),
            dev: file.stat.dev,
            ino: file.stat.ino,
            mode: file.mode,
            uid: file.stat.uid,
            gid: file.stat.gid,
            file_size: file.stat.size,
            id: file.id,
            flags: u16::try_from(file.path.len().min(0xfff)).unwrap_or(0xfff),
            flags_extended: 0,
            path: file.path.clone(),
        };
        index
            .add(&entry)
            .map_err(git(format!("add {} to the index", wire::show(&file.path))))?;
    }
    Ok(())
}

fn run(
    helper: &Helper,
    repo: &Repository,
    operation: &[String],
    max_content: u64,
) -> Result<Files, StageError> {
    let spec = serde_json::to_string(&helper.spec).map_err(|e| StageError::Spec(e.to_string()))?;
    let program = helper.runner_bin.display().to_string();
    let mut child = Command::new(&helper.runner_bin)
        .arg("worktree-io")
        .arg("--spec-json")
        .arg(spec)
        .args(operation)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| StageError::Spawn { program, source })?;
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Err(e) = pipe.read_to_end(&mut text) {
                return format!("(its error output could not be read: {e})");
            }
            let text = String::from_utf8_lossy(&text);
            let start = text.len().saturating_sub(STDERR_TAIL);
            let start = (start..=text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
            text[start..].trim().to_owned()
        })
    });
    // The watchdog kills a helper that does not finish in time.
    let pid = child.id();
    let (done, timer) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if timer.recv_timeout(HELPER_TIMEOUT) == Err(mpsc::RecvTimeoutError::Timeout) {
            if let Ok(pid) = i32::try_from(pid) {
                if let Err(e) = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                ) {
                    tracing::warn!("kill the worktree helper {pid}: {e}");
                }
            }
            return true;
        }
        false
    });
    let read = match child.stdout.take() {
        Some(stdout) => read_frames(&mut BufReader::new(stdout), repo, max_content),
        None => Err(StageError::Failed("its output was not captured".into())),
    };
    let status = child.wait();
    if done.send(()).is_err() {
        tracing::debug!("the worktree helper's watchdog already ended");
    }
    let timed_out = match watchdog.join() {
        Ok(killed) => killed,
        Err(_) => {
            tracing::warn!("the worktree helper's watchdog panicked");
            false
        }
    };
    let stderr = match stderr.map(std::thread::JoinHandle::join) {
        Some(Ok(text)) => text,
        Some(Err(_)) => "(its error output was lost)".to_owned(),
        None => String::new(),
    };
    if timed_out {
        return Err(StageError::Timeout);
    }
    let status = status.map_err(|e| StageError::Failed(format!("wait for it: {e}")))?;
    match read {
        Ok(files) if status.success() => Ok(files),
        Ok(_) => Err(StageError::Failed(format!(
            "it exited with {status}: {stderr}"
        ))),
        Err(StageError::Failed(message)) => Err(StageError::Failed(message)),
        Err(e) if !status.success() && !stderr.is_empty() => Err(StageError::Failed(format!(
            "{e}; it exited with {status}: {stderr}"
        ))),
        Err(e) => Err(e),
    }
}

/// Reads frames until `Done`, writing each new content as a blob of `repo`.
fn read_frames(
    input: &mut impl Read,
    repo: &Repository,
    max_content: u64,
) -> Result<Files, StageError> {
    let odb = repo.odb().map_err(git("open the thread's objects"))?;
    let mut out = Files::default();
    loop {
        let frame = wire::read_frame(input, max_content)?.ok_or_else(|| {
            StageError::Failed("its output ended before it said it was done".into())
        })?;
        match frame {
            Frame::Entry {
                path,
                mode,
                stat,
                body,
            } => {
                let id = match body {
                    Body::Known(bytes) => {
                        let id = Oid::from_bytes(&bytes).map_err(git("read an object id"))?;
                        if mode != MODE_GITLINK && !odb.exists(id) {
                            return Err(StageError::UnknownBlob {
                                path: wire::show(&path),
                                id: id.to_string(),
                            });
                        }
                        id
                    }
                    Body::Content(bytes) => repo
                        .blob(&bytes)
                        .map_err(git(format!("store {}", wire::show(&path))))?,
                };
                out.files.push(Staged {
                    path,
                    mode,
                    id,
                    stat,
                });
            }
            Frame::Skipped { path, size } => out.skipped.push((wire::show(&path), size)),
            Frame::Ignored { path } => {
                if out.ignored.len() < MAX_IGNORED {
                    out.ignored.push(wire::show(&path));
                }
            }
            Frame::Done { entries } => {
                if entries != out.files.len() as u64 {
                    return Err(StageError::Failed(format!(
                        "it said it sent {entries} files but sent {}",
                        out.files.len()
                    )));
                }
                return Ok(out);
            }
            Frame::Failed { message } => return Err(StageError::Failed(message)),
        }
    }
}

#[cfg(test)]
pub mod test_support {
    //! A main repository with one commit and a thread worktree made from it by the real
    //! [`crate::workspace::worktree::create`], and the worktree helper of the workspace's
    //! `codebutler-runner` binary in the real sandbox.

    use std::path::{Path, PathBuf};

    use codebutler_sandbox::SandboxSpec;

    use super::Helper;
    use crate::workspace::worktree::{self, DiskBudget, Worktree};

    /// The workspace's `codebutler-runner` (built by `cargo nextest run --workspace`).
    pub fn runner_bin() -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("codebutler-runner");
        assert!(
            bin.is_file(),
            "{} is missing: run the tests with --workspace so the runner is built",
            bin.display()
        );
        bin
    }

    /// A thread worktree of a fresh repository.
    #[derive(Debug)]
    pub struct ThreadFixture {
        pub dir: tempfile::TempDir,
        pub tree: Worktree,
    }

    impl ThreadFixture {
        /// A main repository with `files` committed on `main`, and the worktree of the plan
        /// "T" (`.codebutler/branches/t` on `codebutler/t`).
        pub fn new(files: &[(&str, &str)]) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let main = dir.path().join("repo");
            let repo = git2::Repository::init_opts(
                &main,
                git2::RepositoryInitOptions::new().initial_head("main"),
            )
            .unwrap();
            for (path, text) in files {
                let full = main.join(path);
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(full, text).unwrap();
            }
            let mut index = repo.index().unwrap();
            index
                .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
                .unwrap();
            index.write().unwrap();
            let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
            let sig = git2::Signature::now("t", "t@example.com").unwrap();
            repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
                .unwrap();
            // On a thread of its own, so async tests can use the fixture too.
            let tree = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(worktree::create(&main, "T", None, DiskBudget::NONE))
                    .unwrap()
            })
            .join()
            .unwrap();
            Self { dir, tree }
        }

        pub fn main(&self) -> &Path {
            self.tree.path.ancestors().nth(3).unwrap()
        }

        pub fn worktree(&self) -> &Path {
            &self.tree.path
        }

        /// The helper for the worktree, in the real sandbox.
        pub fn helper(&self) -> Helper {
            Helper {
                runner_bin: runner_bin(),
                spec: SandboxSpec::for_worktree(&self.tree.path),
            }
        }

        /// `git status --porcelain` of the worktree, as the Coder's git would print it.
        pub fn git_status(&self) -> String {
            let out = std::process::Command::new("git")
                .args(["-c", "core.hooksPath=/dev/null", "status", "--porcelain"])
                .current_dir(&self.tree.path)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        }
    }

    /// Commits every change of the fixture's worktree as the Coder's GitCommit does.
    pub fn commit_worktree(f: &ThreadFixture, message: &str) -> git2::Oid {
        let commit =
            crate::workspace::forge::commit_all(&f.helper(), f.main(), f.worktree(), message, &[])
                .unwrap();
        git2::Oid::from_str(&commit.sha).unwrap()
    }
}
