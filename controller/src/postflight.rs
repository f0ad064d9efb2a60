//! What happens once after a thread's pull request opened: the steps of
//! `plan-v2-long.md` §24.4 — the TODO scan, then the pull request's description written
//! from the thread ([`Describer`]) — run when the run that opened it has been reported
//! ([`AfterPr::run`]), and at start for threads a stop cut off half-way
//! ([`AfterPr::resume_all`]). After them, and after every later run, review round and
//! memory saved, the description's Journal is brought up to date
//! ([`AfterPr::refresh_description`]: one `gh pr edit` when its text changed, none
//! otherwise; at start for every open pull request, so a step a stop cut off is not lost).
//!
//! Each step runs once per thread: it is marked done ([`Change::StepDone`]) in the same
//! transaction as what it says in the thread, so a crash leaves it either not done and
//! unsaid (it runs again) or done and said (it never runs again). A step that fails is
//! logged and left not done, for the next start.

use std::path::PathBuf;

use crate::domain::{Closure, RunRecord, Stage, ThreadKey};
use crate::journal::description::{Describer, Summary};
use crate::memory::{Memory, MemoryTarget};
use crate::slack::effects::Effects;
use crate::slack::outbox::Outbox;
use crate::store::{Change, Store};
use crate::workspace::branch_diff::{self, AddedLine};
use crate::workspace::worktree::Worktree;

/// The steps after a pull request opened, in the order they run.
pub const STEPS: [&str; 3] = [TODO_SCAN, PR_DESCRIPTION, MEMORY_PROPOSAL];
/// The step that tells the thread what TODOs the Coder left.
const TODO_SCAN: &str = "todo_scan";
/// The step that writes the pull request's description from the thread.
const PR_DESCRIPTION: &str = "pr_description";
/// The step that proposes what to remember from the thread ([`crate::memory`]); a thread
/// done without a pull request has it too, after its close.
pub const MEMORY_PROPOSAL: &str = "memory_proposal";
/// Most TODOs listed by file and line.
const MAX_LISTED_TODOS: usize = 5;
/// Longest a TODO's text is shown.
const MAX_TODO_TEXT: usize = 80;

/// Runs the steps after a thread's pull request opened.
#[derive(Clone, Debug)]
pub struct AfterPr {
    pub store: Store,
    pub outbox: Outbox,
    /// Writes the pull request's description (`pr_description`).
    pub describer: Describer,
    /// Memory proposals.
    pub memory: Memory,
}

impl AfterPr {
    /// Runs the thread's steps not done yet, in order, if its pull request is open.
    /// Then brings the description's Journal up to date.
    pub async fn run(&self, thread: &ThreadKey) {
        if let Some(run) = self.pr_run(thread).await {
            self.todo_scan(thread, &run).await;
            self.pr_description(thread, &run).await;
            self.memory_proposal(thread).await;
        }
        self.refresh_description(thread).await;
    }

    /// Runs the steps a stop cut off, for every thread whose pull request is open.
    pub async fn resume_all(&self) {
        let threads = match self
            .store
            .list_threads(|stage| stage == Stage::PrOpened, usize::MAX)
            .await
        {
            Ok(threads) => threads,
            Err(e) => {
                tracing::error!("read the threads with an open pull request: {e}");
                return;
            }
        };
        for thread in threads {
            self.run(&thread.key).await;
        }
        self.resume_done_threads().await;
    }

    /// The memory proposals of threads done without a pull request that a stop cut off
    /// between their close and the proposal.
    async fn resume_done_threads(&self) {
        let done = match self
            .store
            .list_threads(|stage| stage == Stage::Closed(Closure::Done), usize::MAX)
            .await
        {
            Ok(threads) => threads,
            Err(e) => {
                tracing::error!("read the threads closed as done: {e}");
                return;
            }
        };
        for thread in done {
            match self.store.step_done(&thread.key, MEMORY_PROPOSAL).await {
                Ok(true) => {}
                Ok(false) => {
                    self.memory
                        .propose_as_step(
                            &thread.key,
                            MemoryTarget::NewPullRequest,
                            Some(MEMORY_PROPOSAL),
                        )
                        .await
                }
                Err(e) => tracing::error!(thread = %thread.key, "read the thread's steps: {e}"),
            }
        }
    }

    /// The thread's latest run (its worktree and branch), when its pull request is open and
    /// a step is still to do.
    async fn pr_run(&self, thread: &ThreadKey) -> Option<RunRecord> {
        match self.store.thread_record(thread).await {
            Ok(Some(record)) if record.stage == Stage::PrOpened => {}
            Ok(_) => return None,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread after its PR opened: {e}");
                return None;
            }
        }
        let mut all_done = true;
        for step in STEPS {
            match self.store.step_done(thread, step).await {
                Ok(done) => all_done &= done,
                Err(e) => {
                    tracing::error!(thread = %thread, "read the thread's steps: {e}");
                    return None;
                }
            }
        }
        if all_done {
            return None;
        }
        match self.store.latest_run(&thread.thread_ts).await {
            Ok(run) => run,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's latest run: {e}");
                None
            }
        }
    }

    /// Says which TODO and FIXME lines the branch added, if any.
    async fn todo_scan(&self, thread: &ThreadKey, run: &RunRecord) {
        match self.store.step_done(thread, TODO_SCAN).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's steps: {e}");
                return;
            }
        }
        let worktree = std::path::PathBuf::from(&run.worktree);
        let branch = run.branch.clone();
        let added =
            tokio::task::spawn_blocking(move || branch_diff::added_lines(&worktree, &branch)).await;
        let todos: Vec<AddedLine> = match added {
            Ok(Ok(lines)) => lines.into_iter().filter(|l| is_todo(&l.text)).collect(),
            Ok(Err(e)) => {
                tracing::error!(thread = %thread, "scan the branch for TODOs: {e}");
                return;
            }
            Err(e) => {
                tracing::error!(thread = %thread, "scan the branch for TODOs: {e}");
                return;
            }
        };
        let mut effects = Effects::named(format!("todo_scan:{}", thread.thread_ts), thread);
        if let Some(text) = todo_message(&todos) {
            effects = effects.reply(&text, "*PM:* ");
        }
        let step = Change::StepDone {
            thread,
            step: TODO_SCAN,
        };
        match self.outbox.commit(&[step], &effects).await {
            Ok(_) => tracing::info!(
                tag = "PM",
                "thread {thread} → {} TODO(s) left by the Coder",
                todos.len()
            ),
            Err(e) => tracing::error!(thread = %thread, "record the TODO scan: {e}"),
        }
    }
}

impl AfterPr {
    /// Writes the pull request's description from the thread (`gh pr edit`); a failure is
    /// logged and left for the next start.
    async fn pr_description(&self, thread: &ThreadKey, run: &RunRecord) {
        match self.store.step_done(thread, PR_DESCRIPTION).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's steps: {e}");
                return;
            }
        }
        let pr = match self.store.thread_record(thread).await {
            Ok(Some(record)) => record.pull_request,
            Ok(None) => None,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's pull request: {e}");
                return;
            }
        };
        let Some(pr) = pr else { return };
        let tree = Worktree {
            path: PathBuf::from(&run.worktree),
            branch: run.branch.clone(),
        };
        if let Err(e) = self
            .describer
            .refresh(thread, &pr, Some(&tree), Summary::Fresh)
            .await
        {
            tracing::error!(thread = %thread, "write the description of PR #{}: {e}", pr.number);
            return;
        }
        let step = Change::StepDone {
            thread,
            step: PR_DESCRIPTION,
        };
        if let Err(e) = self.outbox.commit(&[step], &Effects::new(thread)).await {
            tracing::error!(thread = %thread, "record the PR description: {e}");
        }
    }

    /// Brings the pull request's description up to date with the thread's steps (its
    /// Journal), once its first description was written: a `gh pr edit` only when the
    /// text changed. Run after every step of a thread whose pull request is open.
    pub async fn refresh_description(&self, thread: &ThreadKey) {
        match self.store.step_done(thread, PR_DESCRIPTION).await {
            Ok(true) => {}
            // The first description is the step's, with the PM's summary.
            Ok(false) => return,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's steps: {e}");
                return;
            }
        }
        let pr = match self.store.thread_record(thread).await {
            Ok(Some(record)) if record.stage == Stage::PrOpened => record.pull_request,
            Ok(_) => None,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's pull request: {e}");
                return;
            }
        };
        let Some(pr) = pr else { return };
        let tree = match self.store.latest_run(&thread.thread_ts).await {
            Ok(run) => run.map(|run| Worktree {
                path: PathBuf::from(&run.worktree),
                branch: run.branch,
            }),
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's latest run: {e}");
                return;
            }
        };
        if let Err(e) = self
            .describer
            .refresh(thread, &pr, tree.as_ref(), Summary::Kept)
            .await
        {
            tracing::error!(thread = %thread, "update the description of PR #{}: {e}", pr.number);
        }
    }

    /// Proposes what to remember from the thread, for its pull request branch.
    async fn memory_proposal(&self, thread: &ThreadKey) {
        match self.store.step_done(thread, MEMORY_PROPOSAL).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's steps: {e}");
                return;
            }
        }
        self.memory
            .propose_as_step(thread, MemoryTarget::PrBranch, Some(MEMORY_PROPOSAL))
            .await;
    }
}

/// Whether a line carries a `TODO` or `FIXME` marker (as a word, in capitals).
fn is_todo(line: &str) -> bool {
    ["TODO", "FIXME"].iter().any(|marker| {
        line.match_indices(marker).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + marker.len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

/// What the thread is told of the TODOs the Coder left; `None` when it left none.
fn todo_message(todos: &[AddedLine]) -> Option<String> {
    if todos.is_empty() {
        return None;
    }
    let count = match todos.len() {
        1 => "1 TODO".to_owned(),
        n => format!("{n} TODOs"),
    };
    let mut text = format!("The Coder left {count} in the pull request:\n");
    for todo in todos.iter().take(MAX_LISTED_TODOS) {
        text.push_str(&format!(
            "• `{}:{}` {}\n",
            todo.path.replace('`', "'"),
            todo.line,
            code(&todo.text)
        ));
    }
    if todos.len() > MAX_LISTED_TODOS {
        text.push_str(&format!("…and {} more.\n", todos.len() - MAX_LISTED_TODOS));
    }
    text.push_str("Want a new thread to resolve them? Start one in the channel.");
    Some(text)
}

/// A TODO's text as inline code: trimmed, shortened, without backticks.
fn code(text: &str) -> String {
    let text = text.trim().replace('`', "'");
    let text = match text.char_indices().nth(MAX_TODO_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    };
    format!("`{text}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(path: &str, line: u32, text: &str) -> AddedLine {
        AddedLine {
            path: path.into(),
            line,
            text: text.into(),
        }
    }

    #[test]
    fn todo_markers_are_words_in_capitals() {
        for yes in [
            "// TODO: errors",
            "# FIXME",
            "x = 1 # TODO(ana) later",
            "/* TODO */",
        ] {
            assert!(is_todo(yes), "{yes}");
        }
        for no in ["todo list", "TODOS", "MY_TODO", "FIXMEs", "let to_do = 1;"] {
            assert!(!is_todo(no), "{no}");
        }
    }

    #[test]
    fn the_message_lists_where_the_todos_are() {
        assert_eq!(todo_message(&[]), None);
        let one = todo_message(&[line("src/a.rs", 40, "    // TODO: handle `None`")]).unwrap();
        insta::assert_snapshot!(one, @r"
        The Coder left 1 TODO in the pull request:
        • `src/a.rs:40` `// TODO: handle 'None'`
        Want a new thread to resolve them? Start one in the channel.
        ");
        let many: Vec<AddedLine> = (1..=7).map(|n| line("b.py", n, "# FIXME")).collect();
        let text = todo_message(&many).unwrap();
        assert!(text.starts_with("The Coder left 7 TODOs"), "{text}");
        assert!(
            text.contains("`b.py:5`") && !text.contains("`b.py:6`"),
            "{text}"
        );
        assert!(text.contains("…and 2 more."), "{text}");
    }
}
