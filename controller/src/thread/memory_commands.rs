//! What the thread's replies to a memory proposal do, and a correction of an answer the Coder
//! got: `yes` commits the proposal ([`crate::memory::Memory::save`]) and shows the diff and
//! the commit, `no` discards it, an edit re-posts the updated list; `correct N: …` proposes a
//! planning note. Each is recorded with its post and the message marked processed in one
//! commit, guarded by the proposal's revision, so a crash neither repeats nor loses one.

use crate::domain::memory_ops::{Category, Op, check_line};
use crate::domain::{IncomingMessage, Role};
use crate::memory::proposal::{self, Reply, correction_note};
use crate::memory::{MemoryError, MemoryTarget, Saved};
use crate::slack::effects::Effects;
use crate::store::{Change, MemoryChange};
use crate::thread::handler::{Settle, ThreadHandler, speaker};

const NO_PROPOSAL: &str = "There is no memory proposal open in this thread.";
const WAIT_FOR_CODER: &str = "The Coder is working on this branch right now; say **yes** again once it has finished and I'll save the memory.";
const DISCARDED: &str = "OK, I saved nothing.";
const NOTHING_LEFT: &str = "Nothing is left to remember, so I saved nothing.";
const MOVED_ON: &str =
    "That memory proposal changed meanwhile; nothing was done. Look at the latest list.";

impl ThreadHandler {
    /// A reply to the thread's open memory proposal.
    pub(super) async fn memory_reply(&self, msg: &IncomingMessage, reply: Reply) -> Settle {
        let thread = msg.thread();
        let open = match self.store.open_memory_proposal(&thread).await {
            Ok(Some(open)) => open,
            Ok(None) => return self.answer(msg, Role::Pm, NO_PROPOSAL).await,
            Err(e) => {
                tracing::error!(thread = %thread, "read the memory proposal: {e}");
                return Settle::Failed;
            }
        };
        match reply {
            Reply::Yes => {
                if self.coder.supervisor.is_active(&thread.thread_ts) {
                    return self.answer(msg, Role::Pm, WAIT_FOR_CODER).await;
                }
                match self.memory.save(&thread, &open).await {
                    Ok(saved) => {
                        tracing::info!(
                            tag = "MEM",
                            "thread {thread} → memory saved in {}",
                            short(&saved.sha)
                        );
                        let settle = MemoryChange::Settled {
                            thread: &thread,
                            seq: open.seq,
                            commit_sha: Some(&saved.sha),
                        };
                        let settled = self
                            .record_memory(msg, settle, &saved_message(&saved))
                            .await;
                        // The memory saved is one of the Journal's entries.
                        self.refresh_description(&thread);
                        settled
                    }
                    Err(e) => {
                        tracing::error!(thread = %thread, "save the memory: {e}");
                        let text =
                            format!("I could not save the memory ({e}). Say **yes** to try again.");
                        self.answer(msg, Role::Pm, &text).await
                    }
                }
            }
            Reply::No => {
                tracing::info!(tag = "MEM", "thread {thread} → memory proposal discarded");
                let settle = MemoryChange::Settled {
                    thread: &thread,
                    seq: open.seq,
                    commit_sha: None,
                };
                self.record_memory(msg, settle, DISCARDED).await
            }
            edit => match proposal::edit(&open.items, &edit) {
                Err(e) => {
                    self.answer(msg, Role::Pm, &format!("{e}; nothing changed."))
                        .await
                }
                Ok(items) if items.is_empty() => {
                    let settle = MemoryChange::Settled {
                        thread: &thread,
                        seq: open.seq,
                        commit_sha: None,
                    };
                    self.record_memory(msg, settle, NOTHING_LEFT).await
                }
                Ok(items) => {
                    let effects =
                        Effects::new(&thread).reply(&proposal::message(&items), &speaker(Role::Pm));
                    let post_id = effects.id(0);
                    let edited = MemoryChange::Edited {
                        thread: &thread,
                        seq: open.seq,
                        revision: open.revision,
                        items: &items,
                        post_id: &post_id,
                    };
                    self.commit_memory(msg, edited, &effects).await
                }
            },
        }
    }

    /// "correct N: <answer>": a planning note from the correction of the Coder's question N
    /// (numbered as the usage report lists them), proposed like any memory.
    pub(super) async fn correct_answer(
        &self,
        msg: &IncomingMessage,
        number: usize,
        answer: &str,
    ) -> Settle {
        let thread = msg.thread();
        let questions = match self.store.thread_questions(&thread).await {
            Ok(questions) => questions,
            Err(e) => {
                tracing::error!(thread = %thread, "read the Coder's questions: {e}");
                return Settle::Failed;
            }
        };
        let Some(question) = number.checked_sub(1).and_then(|i| questions.get(i)) else {
            let text = match questions.len() {
                0 => "The Coder asked no questions in this thread, so there is nothing to correct."
                    .to_owned(),
                n => format!("There is no question {number}: the Coder asked {n}."),
            };
            return self.answer(msg, Role::Pm, &text).await;
        };
        let line = match check_line(&correction_note(&question.question, answer)) {
            Ok(line) => line,
            Err(e) => return self.answer(msg, Role::Pm, &format!("{e}.")).await,
        };
        let target = match self.store.thread_record(&thread).await {
            Ok(Some(record)) if record.stage == crate::domain::Stage::PrOpened => {
                MemoryTarget::PrBranch
            }
            Ok(_) => MemoryTarget::NewPullRequest,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread: {e}");
                return Settle::Failed;
            }
        };
        let item = Op::Append {
            line,
            category: Category::Planning,
        };
        tracing::info!(
            tag = "PM",
            "thread {thread} → correction of question {number}"
        );
        match self
            .memory
            .post(&thread, target, vec![item], &[Change::Processed(msg)])
            .await
        {
            Ok(true) => Settle::Settled,
            Ok(false) => self.answer(msg, Role::Pm, MOVED_ON).await,
            Err(MemoryError::Ops(e)) => {
                self.answer(msg, Role::Pm, &format!("{e}; nothing changed."))
                    .await
            }
            Err(e) => {
                tracing::error!(thread = %thread, "propose the correction: {e}");
                Settle::Failed
            }
        }
    }

    /// Records `change` with the reply `text`, the message processed.
    async fn record_memory(
        &self,
        msg: &IncomingMessage,
        change: MemoryChange<'_>,
        text: &str,
    ) -> Settle {
        let effects = Effects::new(&msg.thread()).reply(text, &speaker(Role::Pm));
        self.commit_memory(msg, change, &effects).await
    }

    /// Records `change` with `effects`, the message processed; says so when the proposal
    /// moved on meanwhile (the change's guard refused it).
    async fn commit_memory(
        &self,
        msg: &IncomingMessage,
        change: MemoryChange<'_>,
        effects: &Effects,
    ) -> Settle {
        let changes = [Change::Processed(msg), Change::Memory(change)];
        match self.outbox.commit(&changes, effects).await {
            Ok(true) => Settle::Settled,
            Ok(false) => self.answer(msg, Role::Pm, MOVED_ON).await,
            Err(e) => {
                tracing::error!(thread = %msg.thread(), "record the memory reply: {e}");
                Settle::Failed
            }
        }
    }
}

/// The first 7 characters of a commit id.
fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// What the thread is told once memory is saved: where, the commit, and the diff.
pub fn saved_message(saved: &Saved) -> String {
    let place = match &saved.pull_request {
        Some(pr) => format!("in a pull request of its own, {}", pr.url),
        None => "on the pull request branch".to_owned(),
    };
    let mut text = format!(
        "💾 Memory saved {place} (commit `{}`):\n```diff\n",
        short(&saved.sha)
    );
    for line in saved.diff.iter().take(MAX_DIFF_LINES) {
        text.push_str(line);
        text.push('\n');
    }
    if saved.diff.len() > MAX_DIFF_LINES {
        text.push_str(&format!(
            "… and {} more lines\n",
            saved.diff.len() - MAX_DIFF_LINES
        ));
    }
    text.push_str("```");
    text
}

/// Most diff lines shown in the thread.
const MAX_DIFF_LINES: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_saved_message() {
        let saved = Saved {
            sha: "0123456789abcdef".into(),
            diff: vec!["- - old".into(), "+ - new".into()],
            pull_request: None,
        };
        insta::assert_snapshot!(saved_message(&saved), @r"
        💾 Memory saved on the pull request branch (commit `0123456`):
        ```diff
        - - old
        + - new
        ```
        ");
    }
}
