//! Answering addressed comments on GitHub once the Coder's run for an approved round ended:
//! each comment sorted as a change or a question gets one reply — a reply in its line
//! comment's thread (`gh api …/pulls/N/comments/ID/replies`) or a conversation comment
//! (`gh pr comment`) — saying what changed and the commit. The replies wait for the run's
//! end to be reported (its commits are pushed first, [`crate::coder`]) and, when that push
//! failed, for the next push; a run that committed nothing gets no replies (nothing was
//! addressed on GitHub).
//!
//! Each reply is recorded `attempted` before it is posted and `posted` after; a crash in
//! between leaves it `attempted`, and the next poll first looks for its marker
//! ([`proposal::reply_marker`]) among the pull request's comments written as the login `gh`
//! acts as (anyone can type a marker), so a reply is never posted twice. What changed is read with git2 from the main repository, where every
//! commit of the thread's branch is copied (no hooks, nothing of the worktree's run).

use std::path::Path;

use crate::closing::feedback;
use crate::closing::proposal::{self, reply_marker};
use crate::closing::sorting::Kind;
use crate::closing::watcher::PrWatcher;
use crate::domain::{PullRequestRef, ThreadKey};
use crate::store::reviews::{NewComment, RoundRecord, RoundState};
use crate::workspace::pull_request;

/// The files changed between two commits of the main repository `repo`.
fn changed_files(repo: &Path, from: &str, to: &str) -> Result<Vec<String>, git2::Error> {
    let repo = git2::Repository::open(repo)?;
    let tree = |oid: &str| -> Result<git2::Tree<'_>, git2::Error> {
        repo.find_commit(git2::Oid::from_str(oid)?)?.tree()
    };
    let diff = repo.diff_tree_to_tree(Some(&tree(from)?), Some(&tree(to)?), None)?;
    let mut files: Vec<String> = diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.dedup();
    Ok(files)
}

/// Whether `branch` of the main repository `repo` (where every commit of a thread's branch
/// is copied) has moved past `head`, the pull request's head on GitHub: commits that were
/// not pushed.
fn branch_ahead(repo: &Path, branch: &str, head: &str) -> bool {
    let Ok(repo) = git2::Repository::open(repo) else {
        return false;
    };
    let (Ok(local), Ok(head)) = (
        repo.refname_to_id(&format!("refs/heads/{branch}")),
        git2::Oid::from_str(head),
    ) else {
        return false;
    };
    local != head && repo.graph_descendant_of(local, head).unwrap_or(false)
}

/// Whether a reply carrying `marker` is among the pull request's comments `all`, written as
/// `own` (the login `gh` acts as): anyone else's comment may quote a marker.
fn posted_before(all: &[NewComment], marker: &str, own: &str) -> bool {
    all.iter()
        .any(|c| c.body.contains(marker) && feedback::written_by(c, own))
}

/// How long an approved round may wait for its run to start.
const START_GRACE: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Whether a round approved at `approved_at` waited for its run longer than [`START_GRACE`].
fn stale(approved_at: Option<&str>) -> bool {
    approved_at
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .is_some_and(|at| chrono::Utc::now().signed_duration_since(at) > START_GRACE)
}

impl PrWatcher {
    /// Posts the replies due for the thread's approved rounds whose run ended; false when
    /// `gh` failed (the rest is tried at the next poll).
    pub(super) async fn post_replies(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        head: &str,
        all: &[NewComment],
        own: &str,
    ) -> bool {
        let rounds = match self.store.rounds_in(thread, RoundState::Approved).await {
            Ok(rounds) => rounds,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the approved rounds: {e}");
                return true;
            }
        };
        let mut ok = true;
        for round in rounds {
            ok &= self.answer_round(thread, pr, head, all, own, &round).await;
        }
        ok
    }

    async fn answer_round(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        head: &str,
        all: &[NewComment],
        own: &str,
        round: &RoundRecord,
    ) -> bool {
        let run = match self.store.latest_run(&thread.thread_ts).await {
            Ok(Some(run)) => run,
            Ok(None) => return true,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the thread's run: {e}");
                return true;
            }
        };
        let after = round
            .approved_at
            .as_deref()
            .is_some_and(|at| run.created_at.as_str() >= at);
        if !after && stale(round.approved_at.as_deref()) {
            // Approved, and no run started since: a crash came between the approval and
            // the run's start. Let it go rather than hold the loop forever.
            tracing::warn!(
                thread = %thread,
                "pr watcher: review round {} was approved but its run never started; letting it go",
                round.round
            );
            if let Err(e) = self.store.finish_round(thread, round.round).await {
                tracing::error!(thread = %thread, "pr watcher: finish round {}: {e}", round.round);
            }
            return true;
        }
        if !after || !run.state.is_final() {
            // Its run has not started or not ended yet.
            return true;
        }
        match self.store.run_reported(&run.id).await {
            // The run's end pushes its commits before it is reported: until then, GitHub's
            // head may not have them yet.
            Ok(false) => return true,
            Ok(true) => {}
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the run's report: {e}");
                return true;
            }
        }
        if head != round.head_oid {
            let comments = match self.store.round_comments(thread, round.round).await {
                Ok(comments) => comments,
                Err(e) => {
                    tracing::error!(thread = %thread, "pr watcher: read the round's comments: {e}");
                    return true;
                }
            };
            let (repo, from, to) = (self.repo.clone(), round.head_oid.clone(), head.to_owned());
            let files = tokio::task::spawn_blocking(move || changed_files(&repo, &from, &to))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            let files = files.unwrap_or_else(|e| {
                tracing::warn!(thread = %thread, "pr watcher: what the run changed: {e}");
                Vec::new()
            });
            let answer = run
                .ending
                .as_deref()
                .and_then(|e| e.strip_prefix("completed: "))
                .map(str::trim)
                .filter(|a| !a.is_empty());
            for c in comments {
                let Some(kind) = c.sorted.as_deref().and_then(Kind::parse) else {
                    continue;
                };
                if kind == Kind::Discussion || c.reply.as_deref() == Some("posted") {
                    continue;
                }
                let marker = reply_marker(&c.key);
                if c.reply.as_deref() == Some("attempted") && posted_before(all, &marker, own) {
                    // Posted before a crash: found on GitHub.
                    if let Err(e) = self.store.mark_reply(thread, &c.key, "posted").await {
                        tracing::error!(thread = %thread, "pr watcher: record a reply: {e}");
                        return true;
                    }
                    continue;
                }
                let body = proposal::reply_body(&c.key, kind, head, &files, answer);
                if let Err(e) = self.store.mark_reply(thread, &c.key, "attempted").await {
                    tracing::error!(thread = %thread, "pr watcher: record a reply: {e}");
                    return true;
                }
                if let Err(e) = self.reply(pr.number, &c.key, c.reply_to, &body).await {
                    tracing::warn!(thread = %thread, "pr watcher: reply to {}: {e}", c.key);
                    return false;
                }
                tracing::info!(
                    tag = "MSG",
                    "pr watcher: PR #{}: replied to {}",
                    pr.number,
                    c.key
                );
                if let Err(e) = self.store.mark_reply(thread, &c.key, "posted").await {
                    tracing::error!(thread = %thread, "pr watcher: record a reply: {e}");
                    return true;
                }
            }
        } else if branch_ahead(&self.repo, &run.branch, head) {
            // The run committed, but its push failed: the replies wait for the next push (the
            // next run's end, or "merge").
            tracing::info!(
                thread = %thread,
                "pr watcher: round {}'s commits are not on GitHub yet; the replies wait",
                round.round
            );
            return true;
        } else {
            tracing::info!(
                thread = %thread,
                "pr watcher: round {}'s run committed nothing; no replies on GitHub",
                round.round
            );
        }
        if let Err(e) = self.store.finish_round(thread, round.round).await {
            tracing::error!(thread = %thread, "pr watcher: finish round {}: {e}", round.round);
        }
        true
    }

    /// Posts one reply: in a line comment's thread (to its top comment: GitHub takes no
    /// replies to replies), or on the conversation.
    async fn reply(
        &self,
        number: u64,
        key: &str,
        reply_to: Option<i64>,
        body: &str,
    ) -> Result<(), pull_request::PullRequestError> {
        let line = key
            .strip_prefix("line:")
            .and_then(|id| id.parse::<u64>().ok());
        let top = reply_to.and_then(|id| u64::try_from(id).ok());
        match line.map(|id| top.unwrap_or(id)) {
            Some(id) => {
                pull_request::reply_to_review_comment(&self.gh, &self.repo, number, id, body).await
            }
            None => pull_request::comment(&self.gh, &self.repo, number, body).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_changed_between_two_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("repo");
        let repo = git2::Repository::init(&path).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let commit = |files: &[(&str, &str)], parents: &[&git2::Commit<'_>]| {
            for (name, text) in files {
                std::fs::write(path.join(name), text).unwrap();
            }
            let mut index = repo.index().unwrap();
            index
                .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
                .unwrap();
            index.write().unwrap();
            let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
            repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, parents)
                .unwrap()
        };
        let first = commit(&[("a.rs", "1"), ("b.rs", "1")], &[]);
        let first_commit = repo.find_commit(first).unwrap();
        let second = commit(&[("b.rs", "2"), ("c.rs", "new")], &[&first_commit]);
        assert_eq!(
            changed_files(&path, &first.to_string(), &second.to_string()).unwrap(),
            ["b.rs", "c.rs"]
        );
        assert!(changed_files(&path, "not-an-oid", &second.to_string()).is_err());
    }

    #[test]
    fn only_the_controllers_own_comment_proves_a_reply_was_posted() {
        let marker = reply_marker("line:7");
        let by = |author: &str| NewComment {
            key: "conversation:1".into(),
            created_ms: None,
            author: author.into(),
            path: None,
            line: None,
            body: format!("Addressed.\n\n{marker}"),
            url: "u".into(),
            reply_to: None,
            association: Some("NONE".into()),
        };
        assert!(!posted_before(&[by("mallory")], &marker, "codebutler-bot"));
        assert!(posted_before(
            &[by("mallory"), by("CodeButler-Bot")],
            &marker,
            "codebutler-bot"
        ));
        assert!(!posted_before(&[], &marker, "codebutler-bot"));
    }

    #[test]
    fn an_approved_round_waits_ten_minutes_for_its_run() {
        let ago = |minutes| {
            (chrono::Utc::now() - chrono::TimeDelta::minutes(minutes))
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        };
        assert!(!stale(Some(&ago(1))));
        assert!(stale(Some(&ago(11))));
        assert!(!stale(None));
        assert!(!stale(Some("garbage")));
    }
}
