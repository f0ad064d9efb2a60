//! The pull request's description as the thread's journal, written when the PR opens and
//! again at each step of the thread after it: **Summary**, **Changes**, **Decisions**,
//! **Journal**, **Participants** and **Slack thread**, then the repository's PR template if
//! it has one. A repository without one gets the built-in default's sections instead
//! (Summary, Changes, **How it was tested**): the last is the PM's reading of the thread
//! (the Coder's test runs as its report gave them), "(not recorded)" when the thread does
//! not say.
//!
//! Changes come from git, never from the model: the branch's diff against its base in the
//! thread's own repository, per file with lines added and removed
//! ([`branch_diff::file_changes`]). Summary and Decisions are the PM's
//! ([`super::notes::summary`]), asked when the pull request opens and at its close and kept
//! in the store between ([`Summary`]); when its answer is missing or malformed the
//! description says "(summary unavailable)" rather than guess. The Journal is the thread's
//! steps as the store recorded them ([`super::timeline`]). Participants are the thread's
//! people by the names Slack shows (`users.info`, falling back to the id), and the link is
//! Slack's permalink of the thread (`chat.getPermalink`). The body is plain data
//! ([`render`]), snapshot-tested.
//!
//! [`Describer::refresh`] is the one way it is written: render from the store, compare with
//! the last body sent (its hash, stored), `gh pr edit` only when it differs, record what
//! was sent. Every step of a thread calls it, so a step that changes nothing sends nothing,
//! and a crash between the edit and the record sends the same text once more, no more.

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::domain::{PrEvent, PullRequestRef, ThreadKey};
use crate::history::{Event, History};
use crate::pm::Pm;
use crate::slack::outbox::Outbox;
use crate::store::{SentDescription, StoreError};
use crate::workspace::branch_diff::{self, FileChange};
use crate::workspace::forge;
use crate::workspace::pull_request::{self, PullRequestError};
use crate::workspace::worktree::{Preparer, Worktree};

use super::notes::{self, PrSummary};
use super::timeline::{self, TimelineFacts};

/// The close's step that merges the pull request (`thread_steps`): done, it is merged.
pub const MERGE_STEP: &str = "merge";
/// Most files listed under Changes; the rest are counted.
const MAX_LISTED_FILES: usize = 100;

/// What the description is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct DescriptionParts {
    /// The PM's Summary and Decisions; `None` when its answer was unusable.
    pub summary: Option<PrSummary>,
    pub changes: Vec<FileChange>,
    /// The people of the thread by the names Slack shows (or their ids), in order.
    pub participants: Vec<String>,
    /// The thread's permalink; `None` when Slack would not give one.
    pub permalink: Option<String>,
    /// The repository's PR template as committed on the branch, if any.
    pub template: Option<String>,
    /// The thread's steps, for the Journal.
    pub timeline: TimelineFacts,
}

/// The description's Markdown.
pub fn render(parts: &DescriptionParts) -> String {
    let mut body = String::from("## Summary\n\n");
    match &parts.summary {
        Some(s) => body.push_str(s.summary.trim()),
        None => body.push_str("(summary unavailable)"),
    }
    body.push_str("\n\n## Changes\n\n");
    if parts.changes.is_empty() {
        body.push_str("- (no changes)\n");
    }
    for change in parts.changes.iter().take(MAX_LISTED_FILES) {
        body.push_str(&format!(
            "- `{}` (+{} −{})\n",
            change.path, change.added, change.removed
        ));
    }
    if parts.changes.len() > MAX_LISTED_FILES {
        body.push_str(&format!(
            "- … and {} more files\n",
            parts.changes.len() - MAX_LISTED_FILES
        ));
    }
    if repository_template(parts).is_none() {
        body.push_str("\n## How it was tested\n\n");
        match parts.summary.as_ref().map(|s| s.tested.trim()) {
            Some(tested) if !tested.is_empty() => body.push_str(tested),
            _ => body.push_str("(not recorded)"),
        }
        body.push('\n');
    }
    body.push_str("\n## Decisions\n\n");
    match &parts.summary {
        None => body.push_str("(summary unavailable)\n"),
        Some(s) if s.decisions.is_empty() => body.push_str("- (none recorded)\n"),
        Some(s) => {
            for decision in &s.decisions {
                body.push_str(&format!("- {}\n", decision.trim()));
            }
        }
    }
    body.push('\n');
    body.push_str(&timeline::render(&parts.timeline));
    body.push_str("\n## Participants\n\n");
    if parts.participants.is_empty() {
        body.push_str("- (none)\n");
    }
    for name in &parts.participants {
        body.push_str(&format!("- {name}\n"));
    }
    body.push_str("\n## Slack thread\n\n");
    match &parts.permalink {
        Some(link) => body.push_str(&format!("{link}\n")),
        None => body.push_str("(link unavailable)\n"),
    }
    if let Some(template) = repository_template(parts) {
        body.push_str("\n---\n\n");
        body.push_str(template);
        body.push('\n');
    }
    body
}

/// The summary kept with the last description sent; `None` when it had none (or it cannot
/// be read back, logged).
fn kept_summary(thread: &ThreadKey, last: &SentDescription) -> Option<PrSummary> {
    let json = last.summary.as_deref()?;
    match serde_json::from_str(json) {
        Ok(summary) => Some(summary),
        Err(e) => {
            tracing::warn!(thread = %thread, "read the kept pr summary: {e}");
            None
        }
    }
}

/// SHA-256 of `text`, lower-case hex.
fn hex_sha256(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// The repository's PR template, when it has one that is not blank.
fn repository_template(parts: &DescriptionParts) -> Option<&str> {
    parts
        .template
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Whether a refresh asks the PM for the Summary and Decisions again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Summary {
    /// Ask the PM (the pull request opened, or the thread closes).
    Fresh,
    /// Keep the ones last sent (a step in between); asked when none was kept.
    Kept,
}

/// What a refresh did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refreshed {
    /// The description changed: `gh pr edit` sent it.
    Sent,
    /// The description is the one last sent: nothing was sent.
    Unchanged,
}

/// Why the description could not be refreshed.
#[derive(Debug, thiserror::Error)]
pub enum DescriptionError {
    #[error(transparent)]
    PullRequest(#[from] PullRequestError),
    #[error("the description's record: {0}")]
    Store(#[from] StoreError),
}

/// Gathers a pull request's description from its thread and writes it.
#[derive(Clone, Debug)]
pub struct Describer {
    /// The PM (its model writes the Summary and Decisions; `gh` is its `github.cli`; the
    /// store is its).
    pub pm: Pm,
    /// Slack, for names and the permalink.
    pub outbox: Outbox,
    /// Mounts a worktree's disk before its repository is read.
    pub prepare: Preparer,
    /// One refresh at a time (shared by every clone): two steps of a thread finishing
    /// together never send an older description after a newer one.
    pub one_at_a_time: Arc<tokio::sync::Mutex<()>>,
}

impl Describer {
    /// A describer of its own (no refresh shares its turn).
    pub fn new(pm: Pm, outbox: Outbox, prepare: Preparer) -> Self {
        Self {
            pm,
            outbox,
            prepare,
            one_at_a_time: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Renders the thread's description from the store, its branch (`tree`, the thread's
    /// worktree) and Slack, and sends it on its pull request (`gh pr edit --body-file -`,
    /// in the main repository) only when it differs from the last one sent; then records it
    /// as sent.
    pub async fn refresh(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        tree: Option<&Worktree>,
        summary: Summary,
    ) -> Result<Refreshed, DescriptionError> {
        let _turn = self.one_at_a_time.lock().await;
        let store = &self.pm.store;
        let last = store.sent_description(thread).await?;
        let kept = match (summary, &last) {
            (Summary::Kept, Some(last)) => Some(kept_summary(thread, last)),
            _ => None,
        };
        let summary = match kept {
            Some(kept) => kept,
            None => self.summary(thread).await,
        };
        let body = self.body(thread, pr, tree, summary.clone()).await;
        let body_sha256 = hex_sha256(&body);
        if last.as_ref().map(|l| l.body_sha256.as_str()) == Some(body_sha256.as_str()) {
            return Ok(Refreshed::Unchanged);
        }
        pull_request::edit_body(&self.pm.gh, &self.pm.layout.repo, pr.number, &body).await?;
        let summary = match &summary {
            Some(summary) => match serde_json::to_string(summary) {
                Ok(json) => Some(json),
                Err(e) => {
                    tracing::warn!(thread = %thread, "keep the pr summary: {e}");
                    None
                }
            },
            None => None,
        };
        store
            .record_sent_description(
                thread,
                &SentDescription {
                    body_sha256,
                    summary,
                },
            )
            .await?;
        tracing::info!(
            tag = "PM",
            "thread {thread} → wrote the description of PR #{}",
            pr.number
        );
        Ok(Refreshed::Sent)
    }

    /// The PM's Summary and Decisions of the thread, from its history; `None` (logged) when
    /// they cannot be had.
    async fn summary(&self, thread: &ThreadKey) -> Option<PrSummary> {
        let history = match History::load(&self.pm.store, thread).await {
            Ok(history) => history,
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                return None;
            }
        };
        let text = history.render();
        match notes::summary(&self.pm, thread, &text, &CancellationToken::new()).await {
            Ok(summary) => Some(summary),
            Err(e) => {
                tracing::warn!(thread = %thread, "pr summary: {e}");
                None
            }
        }
    }

    /// The description of the thread's pull request with `summary`, from its history, the
    /// store's record of its steps, its branch (`tree`) and Slack. What cannot be had is
    /// said so, and logged.
    async fn body(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        tree: Option<&Worktree>,
        summary: Option<PrSummary>,
    ) -> String {
        let history = match History::load(&self.pm.store, thread).await {
            Ok(history) => Some(history),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                None
            }
        };
        let people = history
            .as_ref()
            .map(History::participants)
            .unwrap_or_default();
        let (changes, template) = match tree {
            Some(tree) => self.branch_facts(tree).await,
            None => (Vec::new(), None),
        };
        let participants = self.names(thread, &people).await;
        let permalink = match self
            .outbox
            .sender()
            .permalink(&thread.channel, &thread.thread_ts)
            .await
        {
            Ok(link) => Some(link),
            Err(e) => {
                tracing::warn!(thread = %thread, "thread permalink: {e}");
                None
            }
        };
        let timeline = self.timeline(thread, pr, history.as_ref()).await;
        render(&DescriptionParts {
            summary,
            changes,
            participants,
            permalink,
            template,
            timeline,
        })
    }

    /// What the store recorded of the thread's steps; a part it cannot read is left out
    /// (logged).
    async fn timeline(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        history: Option<&History>,
    ) -> TimelineFacts {
        let store = &self.pm.store;
        let or_empty = |what: &str, e: StoreError| {
            tracing::warn!(thread = %thread, "read the thread's {what} for its journal: {e}");
        };
        let runs = store.thread_runs(thread).await.unwrap_or_else(|e| {
            or_empty("runs", e);
            Vec::new()
        });
        let opened_at = store.pr_opened_at(thread).await.unwrap_or_else(|e| {
            or_empty("pull request", e);
            None
        });
        let rounds = store.thread_rounds(thread).await.unwrap_or_else(|e| {
            or_empty("review rounds", e);
            Vec::new()
        });
        let memory = store.saved_memory(thread).await.unwrap_or_else(|e| {
            or_empty("saved memory", e);
            Vec::new()
        });
        // Merged by the close's merge step, or on GitHub as the PR watcher saw it.
        let merged_at = store
            .step_done_at(thread, MERGE_STEP)
            .await
            .unwrap_or_else(|e| {
                or_empty("merge", e);
                None
            })
            .or_else(|| {
                history?.entries.iter().find_map(|entry| match entry.event {
                    Event::GitHub(PrEvent::Merged) => Some(entry.at.clone()),
                    _ => None,
                })
            });
        let requests = history
            .map(|history| {
                history
                    .entries
                    .iter()
                    .filter_map(|entry| match &entry.event {
                        Event::Person { text, .. } => Some((entry.at.clone(), text.clone())),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        TimelineFacts {
            runs,
            requests,
            pr_opened: Some((pr.number, opened_at)),
            rounds,
            memory,
            merged_at,
        }
    }

    /// The names Slack shows for `people` (each asked once), or their ids.
    async fn names(&self, thread: &ThreadKey, people: &[String]) -> Vec<String> {
        let mut known: HashMap<&str, String> = HashMap::new();
        let mut names = Vec::new();
        for user in people {
            if let Some(name) = known.get(user.as_str()) {
                names.push(name.clone());
                continue;
            }
            let name = match self.outbox.sender().user_name(user).await {
                Ok(Some(name)) => name,
                Ok(None) => user.clone(),
                Err(e) => {
                    tracing::warn!(thread = %thread, "name of {user}: {e}");
                    user.clone()
                }
            };
            known.insert(user, name.clone());
            names.push(name);
        }
        names
    }

    /// The branch's changes and the PR template committed on it, read from the thread's
    /// repository (empty when it cannot be read, logged).
    async fn branch_facts(&self, tree: &Worktree) -> (Vec<FileChange>, Option<String>) {
        if let Err(e) = self.prepare.ensure_mounted(&tree.path).await {
            tracing::warn!("mount {}: {e}", tree.path.display());
            return (Vec::new(), None);
        }
        let (path, branch) = (tree.path.clone(), tree.branch.clone());
        let read = tokio::task::spawn_blocking(move || {
            (
                branch_diff::file_changes(&path, &branch),
                forge::pr_context(&path),
            )
        })
        .await;
        let (changes, context) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!("read {}: {e}", tree.path.display());
                return (Vec::new(), None);
            }
        };
        let changes = changes.unwrap_or_else(|e| {
            tracing::warn!("the branch's changes in {}: {e}", tree.path.display());
            Vec::new()
        });
        let template = match context {
            Ok(context) => context.template,
            Err(e) => {
                tracing::warn!("the PR template in {}: {e}", tree.path.display());
                None
            }
        };
        (changes, template)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> DescriptionParts {
        DescriptionParts {
            summary: Some(PrSummary {
                summary: "Session tokens now expire after 30 minutes of inactivity.".into(),
                decisions: vec![
                    "JWT rather than cookies (the PM, from `docs/auth.md`)".into(),
                    "The old endpoint goes (Alice)".into(),
                ],
                tested: "`cargo test` passed (exit 0).".into(),
            }),
            changes: vec![
                FileChange {
                    path: "src/auth.rs".into(),
                    added: 40,
                    removed: 3,
                },
                FileChange {
                    path: "tests/auth.rs".into(),
                    added: 12,
                    removed: 0,
                },
            ],
            participants: vec!["Alice".into(), "U0BOB".into()],
            permalink: Some("https://acme.slack.com/archives/C0123/p1732475000000100".into()),
            template: None,
            timeline: TimelineFacts {
                pr_opened: Some((7, Some("2026-11-24T19:05:00Z".into()))),
                merged_at: Some("2026-11-24T19:40:00Z".into()),
                ..TimelineFacts::default()
            },
        }
    }

    #[test]
    fn the_five_sections() {
        insta::assert_snapshot!(render(&parts()));
    }

    #[test]
    fn without_a_summary_and_with_the_repositorys_template() {
        let parts = DescriptionParts {
            summary: None,
            template: Some("## Checklist\n\n- [ ] Tests\n".into()),
            permalink: None,
            ..parts()
        };
        insta::assert_snapshot!(render(&parts));
    }
}
