//! The pull request's description as the thread's record, written when the PR opens and
//! again at close: **Summary**, **Changes**, **Decisions**, **Participants** and **Slack
//! thread**, then the repository's PR template if it has one. A repository without one gets
//! the built-in default's sections instead (Summary, Changes, **How it was tested**): the
//! last is the PM's reading of the thread (the Coder's test runs as its report gave them),
//! "(not recorded)" when the thread does not say.
//!
//! Changes come from git, never from the model: the branch's diff against its base in the
//! thread's own repository, per file with lines added and removed
//! ([`branch_diff::file_changes`]). Summary and Decisions are the PM's
//! ([`super::notes::summary`]); when its answer is missing or malformed the description
//! says "(summary unavailable)" rather than guess. Participants are the thread's people by
//! the names Slack shows (`users.info`, falling back to the id), and the link is Slack's
//! permalink of the thread (`chat.getPermalink`). The body is plain data ([`render`]),
//! snapshot-tested; [`Describer`] gathers its parts and writes it with `gh pr edit`.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use crate::domain::{PullRequestRef, ThreadKey};
use crate::history::History;
use crate::pm::Pm;
use crate::slack::outbox::Outbox;
use crate::workspace::branch_diff::{self, FileChange};
use crate::workspace::forge;
use crate::workspace::pull_request::{self, PullRequestError};
use crate::workspace::worktree::{Preparer, Worktree};

use super::notes::{self, PrSummary};

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

/// The repository's PR template, when it has one that is not blank.
fn repository_template(parts: &DescriptionParts) -> Option<&str> {
    parts
        .template
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Gathers a pull request's description from its thread and writes it.
#[derive(Clone, Debug)]
pub struct Describer {
    /// The PM (its model writes the Summary and Decisions; `gh` is its `github.cli`).
    pub pm: Pm,
    /// Slack, for names and the permalink.
    pub outbox: Outbox,
    /// Mounts a worktree's disk before its repository is read.
    pub prepare: Preparer,
}

impl Describer {
    /// Writes the thread's description on its pull request (`gh pr edit --body-file -`,
    /// in the main repository).
    pub async fn write(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        tree: Option<&Worktree>,
    ) -> Result<(), PullRequestError> {
        let body = self.body(thread, tree).await;
        pull_request::edit_body(&self.pm.gh, &self.pm.layout.repo, pr.number, &body).await
    }

    /// The description of the thread's pull request, from its history, its branch
    /// (`tree`, the thread's worktree) and Slack. What cannot be had is said so, and logged.
    pub async fn body(&self, thread: &ThreadKey, tree: Option<&Worktree>) -> String {
        let history = match History::load(&self.pm.store, thread).await {
            Ok(history) => Some(history),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's history: {e}");
                None
            }
        };
        let summary = match &history {
            Some(history) => {
                let text = history.render();
                match notes::summary(&self.pm, thread, &text, &CancellationToken::new()).await {
                    Ok(summary) => Some(summary),
                    Err(e) => {
                        tracing::warn!(thread = %thread, "pr summary: {e}");
                        None
                    }
                }
            }
            None => None,
        };
        let (changes, template) = match tree {
            Some(tree) => self.branch_facts(tree).await,
            None => (Vec::new(), None),
        };
        let people = history.map(|h| h.participants()).unwrap_or_default();
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
        render(&DescriptionParts {
            summary,
            changes,
            participants,
            permalink,
            template,
        })
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
