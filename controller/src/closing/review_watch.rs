//! The PR watcher's review loop, for each open pull request it polls: the comments people
//! left (line comments, review bodies, conversation comments) are stored as first seen —
//! never the controller's own nor those of `github.ignoreBots` ([`feedback::counts`]); those
//! of people who may not steer the Coder (`github.reviewFrom`, decided by
//! [`crate::workspace::write_access`]) without their text — and gathered until none arrived for
//! `github.reviewQuietSecs`; then they become one round, unless the pull request had as many
//! rounds in the last hour as `github.maxSortsPerHour` allows (then they keep gathering).
//! Checks that failed on the head commit become a round of their own, once per (check,
//! head commit), with the end of each failed log. A round is opened with the watcher message
//! that tells its thread (in one transaction, [`Store::open_round`]); the thread's own
//! handler sorts and proposes it. At most one round of a thread is under way at a time, and
//! at most `github.maxReviewRounds` rounds that proposed something per thread: then the
//! thread is told once and waits for a person.
//!
//! With the reviewer on (`reviewer.model`), each head commit the watcher sees is recorded
//! once and its thread told to review it ([`crate::store::Store::reviewer_due`]); the reviewer's line
//! comments are the controller's own, yet count as a person's with write access would — told
//! by the ids of the reviews GitHub gave the controller, never by their text
//! ([`feedback::reviewer_comment_keys`]).
//!
//! The watcher runs on one instance of a shared store (its lease), so a round is opened once.

use std::collections::HashSet;

use crate::closing::checks::{self, FailedCheck};
use crate::closing::feedback::{self, Feedback};
use crate::closing::watcher::PrWatcher;
use crate::domain::{PullRequestRef, ThreadKey};
use crate::store::reviews::{CheckFailure, NewComment, NewRound, Opened, RoundKind, Sighting};
use crate::workspace::pull_request;
use crate::workspace::write_access::Author;

/// Milliseconds since the epoch, now.
pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl PrWatcher {
    /// The login `gh` acts as, read once (`gh api user`); `None` when `gh` failed (logged).
    pub(super) async fn own_login(&self, cached: &mut Option<String>) -> Option<String> {
        if let Some(login) = cached {
            return Some(login.clone());
        }
        let read = match pull_request::api_get(&self.gh, &self.repo, "user", false).await {
            Ok(output) => feedback::parse_user(&output).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match read {
            Ok(login) => {
                tracing::info!("pr watcher: gh acts as {login}");
                *cached = Some(login.clone());
                Some(login)
            }
            Err(e) => {
                tracing::warn!("pr watcher: read the login gh acts as: {e}");
                None
            }
        }
    }

    /// The review loop for the open pull request `pr` of `thread`, from `gh pr view`'s
    /// `output`; false when `gh` failed or printed what it should not.
    pub(super) async fn watch_reviews(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        output: &str,
        own: &mut Option<String>,
    ) -> bool {
        let Some(own) = self.own_login(own).await else {
            return false;
        };
        let feedback = match feedback::parse_feedback(pr.number, &pr.url, output) {
            Ok(feedback) => feedback,
            Err(e) => {
                tracing::warn!(thread = %thread, "pr watcher: {e}");
                return false;
            }
        };
        if self.reviewer_on {
            self.reviewer_due(thread, pr, &feedback.head_oid).await;
        }
        let endpoint = format!("repos/{{owner}}/{{repo}}/pulls/{}/comments", pr.number);
        let output = match pull_request::api_get(&self.gh, &self.repo, &endpoint, true).await {
            Ok(output) => output,
            Err(e) => {
                tracing::warn!(thread = %thread, "pr watcher: PR #{}: {e}", pr.number);
                return false;
            }
        };
        let lines = match feedback::parse_line_comments(pr.number, &output) {
            Ok(lines) => lines,
            Err(e) => {
                tracing::warn!(thread = %thread, "pr watcher: PR #{}: {e}", pr.number);
                return false;
            }
        };
        let reviewer = match self.reviewer_keys(thread, pr, &output, &own).await {
            Some(keys) => keys,
            None => return false,
        };
        let mut all = lines;
        all.extend(feedback.comments.iter().cloned());
        let mut ok = self
            .post_replies(thread, pr, &feedback.head_oid, &all, &own)
            .await;
        ok &= self.gather(thread, pr, &all, &own, &reviewer).await;
        ok &= self.open_next_round(thread, pr, &feedback).await;
        ok
    }

    /// Tells the thread, once per head commit, that the reviewer has `head` to review.
    async fn reviewer_due(&self, thread: &ThreadKey, pr: &PullRequestRef, head: &str) {
        let ts = super::watcher::message_ts();
        match self.store.reviewer_due(thread, pr, head, &ts).await {
            Ok(true) => {
                tracing::info!(
                    tag = "MSG",
                    "pr watcher: PR #{} of thread {thread}: head {head} waits for the reviewer",
                    pr.number
                );
                self.dispatcher.notify(thread);
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: record the head to review: {e}")
            }
        }
    }

    /// The keys of the line comments in `output` the reviewer posted (the controller's own
    /// comments that still count: [`feedback::reviewer_comment_keys`]); `None` when they
    /// cannot be told (logged).
    async fn reviewer_keys(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        output: &str,
        own: &str,
    ) -> Option<HashSet<String>> {
        let ids = match self.store.reviewer_review_ids(thread).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the reviewer's reviews: {e}");
                return None;
            }
        };
        if ids.is_empty() {
            return Some(HashSet::new());
        }
        match feedback::reviewer_comment_keys(pr.number, output, own, &ids) {
            Ok(keys) => Some(keys),
            Err(e) => {
                tracing::warn!(thread = %thread, "pr watcher: PR #{}: {e}", pr.number);
                None
            }
        }
    }

    /// Stores the comments that count and were not seen before, each with whether its
    /// author may steer the Coder; a comment whose author is not decided yet (GitHub not
    /// asked yet, or the question failed) waits for a later poll. The reviewer's comments
    /// (`reviewer`, keys) count and are heeded like those of a person with write access.
    /// False when a question failed.
    async fn gather(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        all: &[NewComment],
        own: &str,
        reviewer: &HashSet<String>,
    ) -> bool {
        let known = match self.store.known_review_comments(thread).await {
            Ok(known) => known,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the known comments: {e}");
                return true;
            }
        };
        let new: Vec<&NewComment> = all
            .iter()
            .filter(|c| !known.contains(&c.key))
            .filter(|c| {
                reviewer.contains(&c.key) || feedback::counts(c, own, &self.reviews.ignore_bots)
            })
            .collect();
        if new.is_empty() {
            return true;
        }
        let authors: Vec<Author<'_>> = new
            .iter()
            .filter(|c| !reviewer.contains(&c.key))
            .map(|c| Author {
                login: &c.author,
                association: c.association.as_deref(),
            })
            .collect();
        let decisions = self.access.decide(&authors).await;
        let seen: Vec<Sighting<'_>> = new
            .iter()
            .filter_map(|comment| {
                if reviewer.contains(&comment.key) {
                    return Some(Sighting {
                        comment,
                        heeded: true,
                    });
                }
                decisions
                    .may_steer(&comment.author)
                    .map(|heeded| Sighting { comment, heeded })
            })
            .collect();
        let waiting = new.len() - seen.len();
        if waiting > 0 {
            tracing::info!(
                thread = %thread,
                "pr watcher: PR #{}: {waiting} comment(s) wait until their authors' write access is known",
                pr.number
            );
        }
        if seen.is_empty() {
            return !decisions.failed;
        }
        match self
            .store
            .record_review_comments(thread, pr.number, &seen, now_ms())
            .await
        {
            Ok(added) => {
                let unheeded = seen.iter().filter(|s| !s.heeded).count();
                tracing::info!(
                    tag = "MSG",
                    "pr watcher: PR #{} of thread {thread}: {added} new review comment(s), {unheeded} by people without write access",
                    pr.number
                );
            }
            Err(e) => tracing::error!(thread = %thread, "pr watcher: store the comments: {e}"),
        }
        !decisions.failed
    }

    /// Opens the thread's next round if one is due: failing checks first, then a batch of
    /// comments once quiet.
    async fn open_next_round(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        feedback: &Feedback,
    ) -> bool {
        match self.store.round_under_way(thread).await {
            Ok(false) => {}
            Ok(true) => return true,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the rounds: {e}");
                return true;
            }
        }
        let known = match self
            .store
            .known_check_failures(thread, &feedback.head_oid)
            .await
        {
            Ok(known) => known,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: read the failed checks: {e}");
                return true;
            }
        };
        let failed: Vec<FailedCheck> = checks::failed_checks(&feedback.checks)
            .into_iter()
            .filter(|c| !known.contains(&c.name))
            .collect();
        let mut ok = true;
        let (kind, reported) = if failed.is_empty() {
            let quiet_since = match self.store.newest_unbatched_comment(thread).await {
                Ok(Some(newest)) => newest,
                Ok(None) => return true,
                Err(e) => {
                    tracing::error!(thread = %thread, "pr watcher: read the comments: {e}");
                    return true;
                }
            };
            let quiet_ms = i64::try_from(self.reviews.quiet.as_millis()).unwrap_or(i64::MAX);
            if now_ms().saturating_sub(quiet_since) < quiet_ms {
                return true;
            }
            (RoundKind::Review, Vec::new())
        } else {
            let mut reported = Vec::new();
            for check in failed {
                let (tail, read) = self.log_tail(&check).await;
                ok &= read;
                reported.push(CheckFailure {
                    name: check.name,
                    head_oid: feedback.head_oid.clone(),
                    log_tail: tail,
                });
            }
            (RoundKind::Checks, reported)
        };
        let ts = super::watcher::message_ts();
        let round = NewRound {
            thread,
            pr,
            kind,
            head_oid: &feedback.head_oid,
            decision: &feedback.decision,
            checks: &reported,
            max_rounds: self.reviews.max_rounds,
            message_ts: &ts,
            max_sorts_per_hour: self.reviews.max_sorts_per_hour,
        };
        match self.store.open_round(&round).await {
            Ok(Opened::Round(n)) => {
                tracing::info!(
                    tag = "MSG",
                    "pr watcher: PR #{} of thread {thread}: round {n} ({kind:?})",
                    pr.number
                );
                self.dispatcher.notify(thread);
            }
            Ok(Opened::Capped { told: true }) => {
                tracing::info!(
                    tag = "MSG",
                    "pr watcher: PR #{} of thread {thread} reached github.maxReviewRounds",
                    pr.number
                );
                self.dispatcher.notify(thread);
            }
            Ok(Opened::Held) => tracing::debug!(
                thread = %thread,
                "pr watcher: PR #{}: comments wait for github.maxSortsPerHour",
                pr.number
            ),
            Ok(Opened::Capped { told: false } | Opened::Busy | Opened::Empty) => {}
            Err(e) => tracing::error!(thread = %thread, "pr watcher: open a round: {e}"),
        }
        ok
    }

    /// The end of a failed check's log, and whether `gh` could read it (a failure is said
    /// in the tail instead, and the check is still reported).
    async fn log_tail(&self, check: &FailedCheck) -> (String, bool) {
        let Some(run_id) = check.run_id else {
            return (
                "(no log: the check is not a GitHub Actions run)".into(),
                true,
            );
        };
        match pull_request::failed_log(&self.gh, &self.repo, run_id).await {
            Ok(log) if log.trim().is_empty() => ("(the failed log is empty)".into(), true),
            Ok(log) => (checks::log_tail(&log), true),
            Err(e) => {
                tracing::warn!("pr watcher: the log of run {run_id}: {e}");
                (
                    format!("(I couldn't read the log of run {run_id}: {e})"),
                    false,
                )
            }
        }
    }
}
