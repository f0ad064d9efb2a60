//! The end of every close: the usage report, the closed stage and the last word, recorded
//! together with the message that asked for the close (after a merge, with the notices of
//! the active threads it overlaps), and what follows it (the default branch's memory read
//! again after a merge, a memory pull request proposed for a thread done without one).

use tokio_util::sync::CancellationToken;

use crate::domain::{Closure, PullRequestRef, Role, ThreadKey};
use crate::history::History;
use crate::journal::description::Describer;
use crate::journal::{notes, report, usage};
use crate::memory::MemoryTarget;
use crate::postflight::MEMORY_PROPOSAL;
use crate::slack::effects::Effects;
use crate::store::Change;
use crate::thread::close_plan::{CloseKind, Step};
use crate::thread::handler::{Settle, ThreadHandler, speaker};

use super::Closing;

impl ThreadHandler {
    /// The end of every close: the usage report, the closed stage, the message handled and
    /// the last word, recorded together (so each is said and done once).
    pub(super) async fn finish_close(&self, c: &Closing<'_>, notes_said: &[String]) -> Settle {
        let report = self.usage_report(&c.thread).await;
        let mut last = last_word(c.kind, c.pr, notes_said);
        if let Some(overridden) = &c.overridden {
            last.push_str("\n\n");
            last.push_str(overridden);
        }
        let closure = c.kind.closure();
        // The active threads that overlap what merged are told, with the close.
        let notices = match (closure, c.pr) {
            (Closure::Merged, Some(pr)) => {
                self.coder
                    .coordination
                    .after_merge(&c.thread, pr.number)
                    .await
            }
            _ => Vec::new(),
        };
        let mut changes = vec![
            Change::StepDone {
                thread: &c.thread,
                step: Step::Report.name(),
            },
            Change::Closed {
                thread: &c.thread,
                closure,
            },
            Change::Processed(c.msg),
        ];
        changes.extend(notices.iter().map(|n| n.change()));
        let effects = Effects::new(&c.thread)
            .reply(&report, &speaker(Role::Pm))
            .reply(&last, &speaker(Role::Pm));
        // The files shared in the thread go before its close is recorded, so a closed
        // thread holds none (a failed close keeps what its conversation read of them).
        if let Err(e) = self.pm.attachments.forget(&self.store, &c.thread).await {
            tracing::warn!(thread = %c.thread, "delete the thread's shared files: {e}");
        }
        tracing::info!(tag = "INF", "thread {} → closed ({closure:?})", c.thread);
        match self.outbox.commit(&changes, &effects).await {
            Ok(true) => {
                // The notices' threads post them; the merge order loses this pull request.
                self.coder.coordination.recorded(&notices);
                if closure == Closure::Merged {
                    // What the merge brought (its approved memory among it) reaches the next
                    // thread's PM without waiting for the next approval's fetch.
                    let source = self.memory.source.clone();
                    tokio::spawn(async move { source.tip(true).await });
                }
                if closure == Closure::Done {
                    // A thread done without a pull request: what it taught goes in a memory
                    // PR of its own, once people approve it.
                    let memory = self.memory.clone();
                    let thread = c.thread.clone();
                    tokio::spawn(async move {
                        memory
                            .propose_as_step(
                                &thread,
                                MemoryTarget::NewPullRequest,
                                Some(MEMORY_PROPOSAL),
                            )
                            .await
                    });
                }
                Settle::Settled
            }
            // Closed already (or its report recorded): nothing more to say; the message is
            // handled.
            Ok(false) => Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %c.thread, "record the close: {e}");
                Settle::Failed
            }
        }
    }

    /// The usage report's Markdown.
    async fn usage_report(&self, thread: &ThreadKey) -> String {
        let used = match usage::load(&self.store, thread).await {
            Ok(used) => used,
            Err(e) => {
                tracing::error!(thread = %thread, "read the thread's usage: {e}");
                return format!("📊 The usage report is unavailable ({e}).");
            }
        };
        let history = match History::load(&self.store, thread).await {
            Ok(history) => history.render(),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                String::new()
            }
        };
        let title = self.title(thread).await;
        let summary = report::render(&title, &used, &report::Tips::Efficient);
        let tips = match notes::tips(
            &self.pm,
            thread,
            &summary,
            &history,
            &CancellationToken::new(),
        )
        .await
        {
            Ok(tips) if tips.is_empty() => report::Tips::Efficient,
            Ok(tips) => report::Tips::Some(tips),
            Err(e) => {
                tracing::warn!(thread = %thread, "tips: {e}");
                report::Tips::Unavailable
            }
        };
        // The report counts the tips' own call.
        let used = usage::load(&self.store, thread).await.unwrap_or(used);
        report::render(&title, &used, &tips)
    }

    /// Writes pull request descriptions for this thread's handler.
    pub(in crate::thread) fn describer(&self) -> Describer {
        // The one the steps after a pull request opened use: one refresh at a time.
        self.coder.after_pr.describer.clone()
    }

    /// The thread's title: its plan's summary, else its first message.
    pub(super) async fn title(&self, thread: &ThreadKey) -> String {
        match self.store.stored_thread(thread).await {
            Ok(stored) => {
                if let Some(plan) = stored.plan {
                    return plan.summary;
                }
            }
            Err(e) => tracing::warn!(thread = %thread, "read the thread's plan: {e}"),
        }
        let first = match History::load(&self.store, thread).await {
            Ok(history) => history.first_request().map(str::to_owned),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                None
            }
        };
        first.unwrap_or_else(|| "this thread".to_owned())
    }
}

/// The close's last word in the thread: how it ended, then the notes its steps left.
fn last_word(kind: CloseKind, pr: Option<&PullRequestRef>, notes: &[String]) -> String {
    let mut last = match (kind, pr) {
        (CloseKind::Merge, Some(pr)) => format!("PR #{} merged. Thread closed.", pr.number),
        (CloseKind::MergedOnGitHub, Some(pr)) => {
            format!("PR #{} was merged on GitHub. Thread closed.", pr.number)
        }
        (CloseKind::Abandon, Some(pr)) => format!(
            "Thread closed without merging. PR #{} is left as it is on GitHub.",
            pr.number
        ),
        (CloseKind::ClosedOnGitHub, Some(pr)) => format!(
            "PR #{} was closed on GitHub without merging. Thread closed.",
            pr.number
        ),
        (CloseKind::Abandon | CloseKind::ClosedOnGitHub, None) => {
            "Thread closed without merging.".to_owned()
        }
        _ => "Thread closed.".to_owned(),
    };
    for note in notes {
        last.push(' ');
        last.push_str(note);
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way a close ends, with and without a pull request, and the steps' notes after.
    #[test]
    fn the_last_word_says_how_the_close_ended() {
        let pr = PullRequestRef {
            number: 7,
            url: "https://github.com/acme/app/pull/7".into(),
        };
        let kept =
            "The worktree is kept at `/w` on branch `codebutler/x`: its commits were never pushed."
                .to_owned();
        let cases: Vec<(CloseKind, Option<&PullRequestRef>, Vec<String>, String)> = vec![
            (
                CloseKind::Merge,
                Some(&pr),
                vec![],
                "PR #7 merged. Thread closed.".into(),
            ),
            (
                CloseKind::MergedOnGitHub,
                Some(&pr),
                vec![],
                "PR #7 was merged on GitHub. Thread closed.".into(),
            ),
            (
                CloseKind::Abandon,
                Some(&pr),
                vec![],
                "Thread closed without merging. PR #7 is left as it is on GitHub.".into(),
            ),
            (
                CloseKind::ClosedOnGitHub,
                Some(&pr),
                vec![],
                "PR #7 was closed on GitHub without merging. Thread closed.".into(),
            ),
            (
                CloseKind::Abandon,
                None,
                vec![kept.clone()],
                format!("Thread closed without merging. {kept}"),
            ),
            (
                CloseKind::ClosedOnGitHub,
                None,
                vec![],
                "Thread closed without merging.".into(),
            ),
            (CloseKind::Done, None, vec![], "Thread closed.".into()),
            (CloseKind::Merge, None, vec![], "Thread closed.".into()),
            (
                CloseKind::Done,
                None,
                vec!["one.".into(), "two.".into()],
                "Thread closed. one. two.".into(),
            ),
        ];
        for (kind, pr, notes, expected) in cases {
            assert_eq!(last_word(kind, pr, &notes), expected, "{kind:?} {pr:?}");
        }
    }
}
