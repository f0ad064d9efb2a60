//! Memory people approve in their thread: after a pull request opens (or when a thread
//! without one is done, or a person corrects an answer of the PM's), the memory extraction
//! ([`extraction`]) proposes operations ([`crate::domain::memory_ops`]) that the thread edits and approves
//! ([`proposal`]); approved lines are committed to the thread's pull request branch — or, for
//! a thread without one, to a small pull request of their own — so memory reaches the default
//! branch only through a reviewed merge. The PM reads memory from the default branch's latest
//! commit ([`source`]), starting from seeded defaults ([`seed`]).
//!
//! [`Memory`] is the service: [`Memory::propose`] posts a proposal, [`Memory::save`] commits
//! an approved one. What the thread's replies do is in `thread::memory_commands`; the open
//! proposals are kept by the store (`store/memory.rs`).

pub mod extraction;
pub mod proposal;
pub mod seed;
pub mod source;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::domain::memory_ops::{self, Category, MemoryFile, Op, OpsError};
use crate::domain::{RunRecord, Stage, ThreadKey};
use crate::gateway::{Gateway, GatewayError};
use crate::history::History;
use crate::layout::Layout;
use crate::slack::effects::Effects;
use crate::slack::outbox::{Outbox, OutboxError};
use crate::store::{Change, MemoryChange, OpenProposal, Store, StoreError};
use crate::workspace::forge::{self, ForgeError};
use crate::workspace::step_error::git;
use crate::workspace::worktree::{self, Preparer};
use crate::workspace::{branch_files, thread_repo};
use source::DefaultBranchMemory;

pub use crate::domain::MemoryTarget;

/// What the thread is told when the extraction's answer cannot be used.
pub const UNREADABLE: &str = "I could not read the memory suggestions; nothing was proposed.";

/// Why a proposal could not be made or saved.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error("the memory extraction failed: {0}")]
    Model(#[from] GatewayError),
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error("{0}")]
    Forge(#[from] ForgeError),
    #[error("the thread has no worktree with its pull request branch")]
    NoBranch,
    #[error("the repository has no commit to start the memory branch from")]
    NoBase,
    #[error("{what}: the task failed: {message}")]
    Task { what: &'static str, message: String },
}

/// An approved proposal, committed and pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    /// The commit holding it (full hex).
    pub sha: String,
    /// The memory file's changed lines, `+ …` and `- …`.
    pub diff: Vec<String>,
    /// The pull request opened for it, for a thread without one.
    pub pull_request: Option<forge::PullRequest>,
}

/// Memory proposals and their commits for one repository.
#[derive(Clone, Debug)]
pub struct Memory {
    pub store: Store,
    pub outbox: Outbox,
    pub gateway: Arc<Gateway>,
    /// The extraction's model (`productManager.memoryExtraction`, an OpenRouter model id).
    pub model: String,
    pub layout: Layout,
    /// The default branch's memory.
    pub source: DefaultBranchMemory,
    /// Worktrees: their helper (to write the memory file into one) and their disks.
    pub prepare: Preparer,
    /// The GitHub CLI.
    pub gh: PathBuf,
}

impl Memory {
    /// Runs the extraction for `thread` and posts what it proposes for `target`; says so in
    /// the thread when the model's answer cannot be used, and nothing when it proposes
    /// nothing. Failures are logged.
    pub async fn propose(&self, thread: &ThreadKey, target: MemoryTarget) {
        self.propose_as_step(thread, target, None).await;
    }

    /// [`Memory::propose`], recording the thread's step `step` as done with what it says
    /// (a model or store failure leaves the step to do, for the next start).
    pub async fn propose_as_step(
        &self,
        thread: &ThreadKey,
        target: MemoryTarget,
        step: Option<&str>,
    ) {
        if let Err(e) = self.try_propose(thread, target, step).await {
            tracing::error!(thread = %thread, "memory proposal: {e}");
        }
    }

    async fn try_propose(
        &self,
        thread: &ThreadKey,
        target: MemoryTarget,
        step: Option<&str>,
    ) -> Result<(), MemoryError> {
        let memory = self.current(thread, target, MemoryFile::Pm).await?;
        let coder_prompt = self
            .current(thread, target, MemoryFile::CoderPrompt)
            .await?;
        let coder_notes = memory_ops::section_text(&coder_prompt, Category::Coder);
        let artist_memory = self.current(thread, target, MemoryFile::Artist).await?;
        let artist_style = memory_ops::section_text(&artist_memory, Category::Artist);
        let history = History::load(&self.store, thread).await?;
        let template = crate::prompts::memory_extraction_template(&self.layout).await;
        let prompt = extraction::prompt(
            &template,
            &extraction::Filled {
                memory: &memory,
                coder_notes: &coder_notes,
                artist_style: &artist_style,
                history: &history.render(),
            },
        );
        let answer = extraction::extract(
            &self.gateway,
            thread,
            &self.model,
            &prompt,
            &CancellationToken::new(),
        )
        .await?;
        let mut changes = Vec::new();
        if let Some(step) = step {
            changes.push(Change::StepDone { thread, step });
        }
        let items = match memory_ops::parse(&answer, &memory) {
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(
                    thread = %thread,
                    "the memory extraction's answer was refused, nothing proposed: {e}"
                );
                let effects = Effects::new(thread).reply(UNREADABLE, "*PM:* ");
                self.outbox.commit(&changes, &effects).await?;
                return Ok(());
            }
        };
        if items.is_empty() {
            tracing::info!(tag = "MEM", "thread {thread} → nothing worth remembering");
            self.outbox.commit(&changes, &Effects::new(thread)).await?;
            return Ok(());
        }
        let count = items.len();
        self.post(thread, target, items, &changes).await?;
        tracing::info!(
            tag = "MEM",
            "thread {thread} → memory proposal of {count} item(s)"
        );
        Ok(())
    }

    /// Posts `items` as the thread's proposal, with `changes`: a new proposal, or the open
    /// one with `items` added. Returns false when the proposal moved on meanwhile.
    pub async fn post(
        &self,
        thread: &ThreadKey,
        target: MemoryTarget,
        items: Vec<Op>,
        changes: &[Change<'_>],
    ) -> Result<bool, MemoryError> {
        let open = self.store.open_memory_proposal(thread).await?;
        let all: Vec<Op> = match &open {
            Some(open) => open.items.iter().cloned().chain(items).collect(),
            None => items,
        };
        memory_ops::check_independent(&all)?;
        let effects = Effects::new(thread).reply(&proposal::message(&all), "*PM:* ");
        let post_id = effects.id(0);
        let change = match &open {
            Some(open) => MemoryChange::Edited {
                thread,
                seq: open.seq,
                revision: open.revision,
                items: &all,
                post_id: &post_id,
            },
            None => MemoryChange::Proposed {
                thread,
                target,
                items: &all,
                post_id: &post_id,
            },
        };
        let mut all_changes = changes.to_vec();
        all_changes.push(Change::Memory(change));
        Ok(self.outbox.commit(&all_changes, &effects).await?)
    }

    /// The memory file `file` as it is where `target` commits: the pull request branch's
    /// head, or the default branch's latest commit (the seeded default where there is no
    /// file).
    async fn current(
        &self,
        thread: &ThreadKey,
        target: MemoryTarget,
        file: MemoryFile,
    ) -> Result<String, MemoryError> {
        match target {
            MemoryTarget::PrBranch => {
                let run = self.pr_run(thread).await?;
                let worktree = PathBuf::from(&run.worktree);
                blocking("read the branch's memory", move || {
                    branch_memory(&worktree, file)
                })
                .await?
            }
            MemoryTarget::NewPullRequest => Ok(self.source.file(seed::path_of(file), true).await),
        }
    }

    /// The run whose worktree holds the thread's pull request branch.
    async fn pr_run(&self, thread: &ThreadKey) -> Result<RunRecord, MemoryError> {
        match self.store.latest_run(&thread.thread_ts).await? {
            Some(run) if run.thread == *thread && Path::new(&run.worktree).is_dir() => Ok(run),
            _ => Err(MemoryError::NoBranch),
        }
    }

    /// Commits the open proposal `open` of `thread` where its target says and pushes it. No
    /// process of the thread's run may be alive (the thread's handler makes sure). Done
    /// again after a crash, it finds its lines already there and commits nothing new.
    ///
    /// A proposal for the pull request branch whose thread has closed since (its pull request
    /// merged or abandoned, its worktree gone) goes into a pull request of its own instead.
    pub async fn save(
        &self,
        thread: &ThreadKey,
        open: &OpenProposal,
    ) -> Result<Saved, MemoryError> {
        let pr_open = matches!(
            self.store.thread_record(thread).await?,
            Some(record) if record.stage == Stage::PrOpened
        );
        match open.target {
            MemoryTarget::PrBranch if pr_open => self.save_to_branch(thread, &open.items).await,
            MemoryTarget::PrBranch => {
                tracing::info!(
                    tag = "MEM",
                    "thread {thread} → its pull request is closed: memory goes in a pull request of its own"
                );
                self.save_to_new_pr(thread, &open.items).await
            }
            MemoryTarget::NewPullRequest => self.save_to_new_pr(thread, &open.items).await,
        }
    }

    async fn save_to_branch(&self, thread: &ThreadKey, items: &[Op]) -> Result<Saved, MemoryError> {
        let run = self.pr_run(thread).await?;
        let worktree = PathBuf::from(&run.worktree);
        if let Err(e) = self.prepare.ensure_mounted(&worktree).await {
            tracing::warn!(thread = %thread, "mount the worktree's disk: {e}");
        }
        let changes = {
            let worktree = worktree.clone();
            let items = items.to_vec();
            blocking("read the branch's memory", move || {
                apply_to_files(&items, |file| branch_memory(&worktree, file))
            })
            .await??
        };
        let helper = self.prepare.helper(&worktree);
        let main = self.layout.repo.clone();
        let (tree, files) = (worktree.clone(), written(&changes));
        let commit = blocking("commit the memory", move || {
            branch_files::commit_to_thread_branch(
                &helper,
                &main,
                &tree,
                &files,
                "Memory approved in Slack",
            )
        })
        .await??;
        let sha = if commit.nothing_to_commit {
            let tree = worktree.clone();
            blocking("read the branch", move || head_of(&tree)).await??
        } else {
            commit.sha
        };
        forge::push_branch(&self.layout.repo, &worktree, &run.branch).await?;
        Ok(Saved {
            sha,
            diff: files_diff(&changes),
            pull_request: None,
        })
    }

    async fn save_to_new_pr(&self, thread: &ThreadKey, items: &[Op]) -> Result<Saved, MemoryError> {
        let base = self.source.tip(true).await.ok_or(MemoryError::NoBase)?;
        let repo = self.layout.repo.clone();
        let at = base.clone();
        let items = items.to_vec();
        let changes = blocking("read the default branch's memory", move || {
            apply_to_files(&items, |file| {
                let path = seed::path_of(file);
                let text = source::read_at(&repo, &at, path).map_err(|e| MemoryError::Task {
                    what: "read the default branch's memory",
                    message: e.to_string(),
                })?;
                Ok(text.unwrap_or_else(|| seed::default_for(path).unwrap_or_default().to_owned()))
            })
        })
        .await??;
        let history = History::load(&self.store, thread).await?;
        let topic = history.first_request().unwrap_or_default();
        let branch = format!(
            "codebutler/memory-{}-{}",
            worktree::slug(topic),
            thread.thread_ts.replace('.', "")
        );
        let main = self.layout.repo.clone();
        let (name, files) = (branch.clone(), written(&changes));
        let commit = blocking("commit the memory", move || {
            branch_files::commit_on_new_branch(
                &main,
                &base,
                &name,
                &files,
                "Memory approved in Slack",
            )
        })
        .await??;
        forge::push_to_origin(&self.layout.repo, &branch).await?;
        // The thread's permalink on the workspace's own domain, as the PR description has it.
        let link = match self
            .outbox
            .sender()
            .permalink(&thread.channel, &thread.thread_ts)
            .await
        {
            Ok(link) => link,
            Err(e) => {
                tracing::warn!(thread = %thread, "the thread's permalink for the memory PR: {e}");
                forge::thread_link(&thread.channel, &thread.thread_ts)
            }
        };
        let diff = files_diff(&changes);
        let body = format!(
            "The memory approved in the Slack thread {link}.\n\n```diff\n{}\n```\n",
            diff.join("\n")
        );
        let pull_request = forge::open_pr(
            &self.gh,
            &self.layout.repo,
            &branch,
            "Memory approved in Slack",
            &body,
        )
        .await?;
        Ok(Saved {
            sha: commit.sha,
            diff,
            pull_request: Some(pull_request),
        })
    }
}

/// The memory file `file` at the head of the thread repository of `worktree`, or its
/// seeded default.
fn branch_memory(worktree: &Path, file: MemoryFile) -> Result<String, MemoryError> {
    let repo = thread_repo::open(worktree).map_err(ForgeError::from)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's last commit"))
        .map_err(ForgeError::from)?;
    let path = seed::path_of(file);
    let text = branch_files::read_file_at(&repo, head.id(), path)?;
    Ok(text.map_or_else(
        || seed::default_for(path).unwrap_or_default().to_owned(),
        |b| String::from_utf8_lossy(&b).into_owned(),
    ))
}

/// One memory file an approved proposal changes: where it is, its text before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileChange {
    file: MemoryFile,
    old: String,
    new: String,
}

/// `items` applied to each file they change, each read once with `read`; a file no item
/// changes is left out.
fn apply_to_files(
    items: &[Op],
    read: impl Fn(MemoryFile) -> Result<String, MemoryError>,
) -> Result<Vec<FileChange>, MemoryError> {
    let mut changes = Vec::new();
    for file in MemoryFile::ALL {
        let ops = memory_ops::for_file(items, file);
        if ops.is_empty() {
            continue;
        }
        let old = read(file)?;
        let new = memory_ops::apply(&old, &ops)?;
        changes.push(FileChange { file, old, new });
    }
    Ok(changes)
}

/// The files to commit: each changed file's path and new text.
fn written(changes: &[FileChange]) -> Vec<(String, Vec<u8>)> {
    changes
        .iter()
        .map(|c| (seed::path_of(c.file).to_owned(), c.new.clone().into_bytes()))
        .collect()
}

/// The changed lines of every file ([`diff_lines`]); those of a file other than the PM's
/// memory under a line naming it, so people see where a note went.
fn files_diff(changes: &[FileChange]) -> Vec<String> {
    let mut diff = Vec::new();
    for change in changes {
        if change.file != MemoryFile::Pm {
            diff.push(format!("@@ {} @@", seed::path_of(change.file)));
        }
        diff.extend(diff_lines(&change.old, &change.new));
    }
    diff
}

/// The head commit of the thread repository of `worktree`.
fn head_of(worktree: &Path) -> Result<String, MemoryError> {
    let repo = thread_repo::open(worktree).map_err(ForgeError::from)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(git("read the branch's last commit"))
        .map_err(ForgeError::from)?;
    Ok(head.id().to_string())
}

/// The lines `new` has that `old` has not (`+ …`), then those it lost (`- …`).
pub fn diff_lines(old: &str, new: &str) -> Vec<String> {
    let added = new
        .lines()
        .filter(|l| !l.trim().is_empty() && !old.lines().any(|o| o == *l))
        .map(|l| format!("+ {l}"));
    let removed = old
        .lines()
        .filter(|l| !l.trim().is_empty() && !new.lines().any(|n| n == *l))
        .map(|l| format!("- {l}"));
    removed.chain(added).collect()
}

async fn blocking<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, MemoryError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| MemoryError::Task {
            what,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_back() {
        for target in [MemoryTarget::PrBranch, MemoryTarget::NewPullRequest] {
            assert_eq!(target.as_str().parse(), Ok(target));
        }
        assert_eq!("main".parse::<MemoryTarget>(), Err(()));
    }

    #[test]
    fn a_proposal_changes_each_file_it_names_and_the_diff_says_which() {
        let items = vec![
            Op::Append {
                line: "- Run make lint before committing".into(),
                category: Category::Coder,
            },
            Op::Append {
                line: "- Deploys need a tag".into(),
                category: Category::Project,
            },
        ];
        let read = |file: MemoryFile| {
            Ok(match file {
                MemoryFile::Pm => "## Project Knowledge\n".to_owned(),
                MemoryFile::CoderPrompt => "You are the Coder.\n".to_owned(),
                MemoryFile::Artist => panic!("the Artist's memory was read"),
            })
        };
        let changes = apply_to_files(&items, read).unwrap();
        assert_eq!(
            written(&changes),
            vec![
                (
                    seed::PM_PATH.to_owned(),
                    b"## Project Knowledge\n\n- Deploys need a tag\n".to_vec()
                ),
                (
                    seed::CODER_PROMPT_PATH.to_owned(),
                    b"You are the Coder.\n\n## Notes from the team\n\n- Run make lint before committing\n"
                        .to_vec()
                ),
            ]
        );
        assert_eq!(
            files_diff(&changes),
            vec![
                "+ - Deploys need a tag",
                "@@ .codebutler/prompts/coder.md @@",
                "+ ## Notes from the team",
                "+ - Run make lint before committing",
            ]
        );
        // A style line goes into the Artist's memory, under its own file's line.
        let style = [Op::Append {
            line: "- Icons are flat".into(),
            category: Category::Artist,
        }];
        let changes = apply_to_files(&style, |file| {
            assert_eq!(file, MemoryFile::Artist);
            Ok(seed::ARTIST_DEFAULT.to_owned())
        })
        .unwrap();
        assert_eq!(
            files_diff(&changes),
            vec!["@@ .codebutler/memory/artist.md @@", "+ - Icons are flat"]
        );
        assert!(
            changes[0]
                .new
                .contains("## Visual Style\n\n- Icons are flat\n")
        );
        // Only the Coder's note: the PM's memory is neither read nor written.
        let only = apply_to_files(&items[..1], |file| match file {
            MemoryFile::CoderPrompt => Ok(String::new()),
            other => panic!("{other:?} was read"),
        })
        .unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].file, MemoryFile::CoderPrompt);
    }

    #[test]
    fn the_diff_shows_lost_then_new_lines() {
        assert_eq!(
            diff_lines(
                "## A\n\n- old\n- kept\n",
                "## A\n\n- new\n- kept\n- added\n"
            ),
            vec!["- - old", "+ - new", "+ - added"]
        );
    }
}
