//! What a run's end does with its commits, and the line its summary says about them.
//!
//! A run of a thread whose pull request is open ends with its commits pushed to `origin`
//! ([`publish::push_unpushed`]), whether or not the Coder called OpenPR: a review round's
//! fix, a failing check's fix, a follow-up message and "continue" all commit without
//! opening anything, and their commits must reach the pull request. The summary then names
//! the range `origin`'s branch moved over and the files it changed, or says nothing was
//! committed, or says the push failed and that the next run or "merge" pushes again.
//!
//! A run of a thread with no pull request yet pushes nothing: its commits stay on the
//! thread's branch until the Coder opens the pull request (so "undo" can still move the
//! branch back without a force push, and nothing unreviewed is published before that), and
//! its summary says so.
//!
//! The push belongs to the end's report ([`super::report`]), so a run whose end is reported
//! after a crash pushes too; pushing what `origin` has already does nothing.

use git2::Oid;

use super::SlackCoder;
use crate::domain::{RunRecord, Stage};
use crate::workspace::publish::{self, PublishError};
use crate::workspace::thread_repo;
use crate::workspace::update_branch::short;

/// Most files named in the line.
const MAX_NAMED_FILES: usize = 10;

/// What a run's end did with the thread branch's commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndPush {
    /// The pull request's branch on `origin` moved over `range`.
    Pushed { pr: u64, range: Range },
    /// The pull request is open and the run committed nothing.
    NothingCommitted { pr: u64 },
    /// The push failed; the commits of `range` are on the branch only.
    Failed {
        pr: u64,
        range: Range,
        error: String,
    },
    /// No pull request yet: the run's commits (`range`) stay on `branch`.
    NotPushedYet { branch: String, range: Range },
}

/// Commits `from..to` and the files they changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub from: Oid,
    pub to: Oid,
    pub files: Vec<String>,
}

impl SlackCoder {
    /// Pushes the run's commits when its thread's pull request is open (and says what it
    /// pushed), or says they wait on the branch when the thread has none yet. `None` when
    /// there is nothing to say: a run outside a Slack thread, a closed thread, a run without
    /// a worktree of ours, a thread without a pull request whose run committed nothing.
    pub(super) async fn push_at_end(&self, run: &RunRecord) -> Option<EndPush> {
        if run.worktree.is_empty() || !thread_repo::is_our_branch(&run.branch) {
            return None;
        }
        let record = match self.store.thread_record(&run.thread).await {
            Ok(Some(record)) => record,
            Ok(None) => return None,
            Err(e) => {
                tracing::error!(thread = %run.thread, "read the thread before its run's push: {e}");
                return None;
            }
        };
        let pr = match (record.stage, record.pull_request) {
            (Stage::Closed(_), _) => return None,
            (_, pr) => pr.map(|pr| pr.number),
        };
        let worktree = std::path::PathBuf::from(&run.worktree);
        if let Err(e) = self.prepare.ensure_mounted(&worktree).await {
            tracing::warn!(run = %run.id, "mount the worktree for the run's push: {e}");
        }
        if !worktree.exists() {
            return None;
        }
        let start = self.run_start(run).await;
        let tips = match publish::read_tips(&worktree, &run.branch).await {
            Ok(tips) => tips,
            Err(e) => {
                tracing::error!(run = %run.id, "read the branch at the run's end: {e}");
                return None;
            }
        };
        let Some(pr) = pr else {
            // Not pushed: what the run committed, from where its branch stood at its start
            // (nothing to say when origin has it already: an OpenPR that pushed, then failed
            // to open the pull request).
            let from = start.filter(|s| *s != tips.local && !tips.up_to_date())?;
            let range = self.range(&worktree, from, tips.local).await;
            return Some(EndPush::NotPushedYet {
                branch: run.branch.clone(),
                range,
            });
        };
        if tips.up_to_date() {
            // Pushed already, with the Coder's OpenPR during the run, or nothing committed;
            // which, only the run's start tells (without it, nothing is said rather than a
            // guess).
            let start = start?;
            return Some(if start == tips.local {
                EndPush::NothingCommitted { pr }
            } else {
                EndPush::Pushed {
                    pr,
                    range: self.range(&worktree, start, tips.local).await,
                }
            });
        }
        let from = tips.on_origin_or_base();
        let range = self.range(&worktree, from, tips.local).await;
        match publish::push_unpushed(&self.layout.repo, &worktree, &run.branch).await {
            Ok(_) => {
                tracing::info!(
                    tag = "CLD",
                    "thread {} → pushed {}..{} to PR #{pr}",
                    run.thread,
                    short(range.from),
                    short(range.to)
                );
                Some(EndPush::Pushed { pr, range })
            }
            Err(e) => {
                tracing::warn!(thread = %run.thread, "push the run's commits to PR #{pr}: {e}");
                Some(EndPush::Failed {
                    pr,
                    range,
                    error: e.to_string(),
                })
            }
        }
    }

    /// Where the run's branch stood when it started (its checkpoint), if known.
    async fn run_start(&self, run: &RunRecord) -> Option<Oid> {
        match self.store.latest_checkpoint(&run.thread).await {
            Ok(Some(c)) if c.run_id == run.id => Oid::from_str(&c.head_sha).ok(),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(run = %run.id, "read the run's checkpoint: {e}");
                None
            }
        }
    }

    /// The range `from..to` with the files it changed (none named when they cannot be
    /// read).
    async fn range(&self, worktree: &std::path::Path, from: Oid, to: Oid) -> Range {
        let tree = worktree.to_owned();
        let files = tokio::task::spawn_blocking(move || publish::files_between(&tree, from, to))
            .await
            .map_err(PublishError::from)
            .and_then(|r| r)
            .unwrap_or_else(|e| {
                tracing::warn!("the files of {from}..{to}: {e}");
                Vec::new()
            });
        Range { from, to, files }
    }
}

/// The range as short ids and its files, as Markdown: `` `abc1234..def5678` (`a.rs`, `b.rs`) ``.
fn range_text(range: &Range) -> String {
    let mut text = format!("`{}..{}`", short(range.from), short(range.to));
    if !range.files.is_empty() {
        let named: Vec<String> = range
            .files
            .iter()
            .take(MAX_NAMED_FILES)
            .map(|f| format!("`{}`", f.replace('`', "'")))
            .collect();
        let more = range.files.len().saturating_sub(MAX_NAMED_FILES);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        text.push_str(&format!(" ({}{more})", named.join(", ")));
    }
    text
}

/// An error as one line for an inline code span: no backticks, no line breaks.
fn one_line(error: &str) -> String {
    error
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('`', "'")
}

/// The line the run's summary ends with (Markdown).
pub(super) fn end_push_line(push: &EndPush) -> String {
    match push {
        EndPush::Pushed { pr, range } => {
            format!("Pushed {} to PR #{pr}.", range_text(range))
        }
        EndPush::NothingCommitted { pr } => {
            format!("Nothing was committed in this run; PR #{pr} is unchanged.")
        }
        EndPush::Failed { pr, range, error } => format!(
            "I couldn't push {} to PR #{pr} (`{}`). The commits are on the branch; the next run or **merge** pushes them again.",
            range_text(range),
            one_line(error)
        ),
        EndPush::NotPushedYet { branch, range } => format!(
            "Committed {} on `{}`, not pushed yet: they go to GitHub with the pull request.",
            range_text(range),
            branch.replace('`', "'")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(files: &[&str]) -> Range {
        Range {
            from: Oid::from_str("abc1234aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").unwrap(),
            to: Oid::from_str("def5678bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb").unwrap(),
            files: files.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    #[test]
    fn the_end_push_lines() {
        let many: Vec<String> = (0..12).map(|i| format!("src/f{i:02}.rs")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let lines = [
            EndPush::Pushed {
                pr: 7,
                range: range(&["notes.txt", "src/a`b.rs"]),
            },
            EndPush::Pushed {
                pr: 7,
                range: range(&many),
            },
            EndPush::NothingCommitted { pr: 7 },
            EndPush::Failed {
                pr: 7,
                range: range(&["notes.txt"]),
                error: "git push failed (exit status: 1): To /srv/origin.git\n ! [rejected]  codebutler/add-notes -> codebutler/add-notes (fetch first)".into(),
            },
            EndPush::NotPushedYet {
                branch: "codebutler/add-notes".into(),
                range: range(&["notes.txt"]),
            },
        ]
        .iter()
        .map(end_push_line)
        .collect::<Vec<_>>()
        .join("\n---\n");
        insta::assert_snapshot!(lines);
    }
}
