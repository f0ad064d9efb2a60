//! The thread's side of the reviewer (`reviewer.model`): the PR watcher saw a head of the
//! thread's pull request not reviewed yet; the thread reviews it once — unless a daily
//! spending cap or the thread's budget is reached — with the plan, the pull request's diff
//! and read-only tools over the head ([`crate::closing::reviewer`]), posts a `COMMENT` review
//! on GitHub with the comments on lines the diff shows, and says one line. The review is
//! marked `posting` in the store before it is posted, so a restart never posts it twice;
//! how it ended is recorded with the line ([`ReviewerChange`]), so the line is said once.

use tokio_util::sync::CancellationToken;

use crate::closing::reviewer::{self, CappedModel, ReviewerError};
use crate::closing::reviewer_tools::{self, AtCommit};
use crate::domain::IncomingMessage;
use crate::gateway::CallContext;
use crate::slack::effects::Effects;
use crate::store::Change;
use crate::store::reviews::{PendingReview, ReviewerChange, ReviewerState};
use crate::thread::handler::{Settle, ThreadHandler};
use crate::thread::replies::answered_by_fallback;
use crate::workspace::{pr_diff, pull_request};

/// How a review ended: its state, the id GitHub gave it, the thread's line.
struct Ended {
    state: ReviewerState,
    review_id: Option<u64>,
    line: String,
}

impl Ended {
    fn not_posted(state: ReviewerState, head: &str, why: &str) -> Self {
        Self {
            state,
            review_id: None,
            line: reviewer::not_posted_line(head, why),
        }
    }
}

impl ThreadHandler {
    /// The watcher saw a head to review: review it once and say so.
    pub(super) async fn reviewer_review(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        let Some(config) = &self.reviewer else {
            return Settle::Processed;
        };
        let pending = match self.store.pending_reviewer_review(&thread).await {
            Ok(Some(pending)) => pending,
            Ok(None) => return Settle::Processed,
            Err(e) => {
                tracing::error!(thread = %thread, "read the review due: {e}");
                return Settle::Failed;
            }
        };
        let ended = if pending.state == ReviewerState::Posting {
            // Cut off while posting: GitHub may have it already; never posted twice.
            tracing::warn!(
                thread = %thread,
                "reviewer: the review of {} was being posted when the daemon stopped; not posted again",
                pending.head_oid
            );
            Ended {
                state: ReviewerState::Failed,
                review_id: None,
                line: String::new(),
            }
        } else {
            self.review_head(msg, &pending, config, cancel).await
        };
        let changes = [
            Change::Reviewer(ReviewerChange {
                thread: &thread,
                head_oid: &pending.head_oid,
                state: ended.state,
                review_id: ended.review_id,
            }),
            Change::Processed(msg),
        ];
        tracing::info!(
            tag = "PM",
            "thread {thread} → reviewer {} {}",
            pending.head_oid,
            ended.state.as_str()
        );
        if ended.line.is_empty() {
            return self.record(msg, &changes, &Effects::new(&thread)).await;
        }
        let effects = Effects::new(&thread).reply(&ended.line, "");
        self.record(msg, &changes, &effects).await
    }

    /// Reviews `pending`'s head and posts the review.
    async fn review_head(
        &self,
        msg: &IncomingMessage,
        pending: &PendingReview,
        config: &crate::config::ReviewerConfig,
        cancel: &CancellationToken,
    ) -> Ended {
        let thread = msg.thread();
        let head = pending.head_oid.as_str();
        if let Some(why) = self.reviewer_refusal(&thread).await {
            return Ended::not_posted(ReviewerState::Skipped, head, &why);
        }
        let repo = self.pm.layout.repo.clone();
        let read = {
            let (repo, head) = (repo.clone(), head.to_owned());
            tokio::task::spawn_blocking(move || {
                pr_diff::read(&repo, &head, reviewer::MAX_DIFF_CHARS)
            })
            .await
        };
        let diff = match read {
            Ok(Ok(diff)) => diff,
            Ok(Err(e)) => {
                tracing::warn!(thread = %thread, "reviewer: read the diff of {head}: {e}");
                return Ended::not_posted(ReviewerState::Failed, head, &e.to_string());
            }
            Err(e) => {
                tracing::error!(thread = %thread, "reviewer: read the diff of {head}: {e}");
                return Ended::not_posted(
                    ReviewerState::Failed,
                    head,
                    "its diff could not be read",
                );
            }
        };
        let plan = match self.store.stored_thread(&thread).await {
            Ok(stored) => stored.plan.map(|p| p.to_markdown()),
            Err(e) => {
                tracing::warn!(thread = %thread, "reviewer: read the plan: {e}");
                None
            }
        };
        let Ok(commit) = git2::Oid::from_str(head) else {
            return Ended::not_posted(ReviewerState::Failed, head, "it is not a commit id");
        };
        let tools = reviewer_tools::tools(AtCommit { repo, commit });
        let model = CappedModel::new(
            &self.pm.gateway,
            CallContext {
                thread: thread.clone(),
                role: reviewer::ROLE,
                model: config.model.clone(),
            },
            cancel.clone(),
            config.max_cost_per_review,
        );
        let request = reviewer::request(pending.pr.number, plan.as_deref(), &diff);
        let review = match reviewer::review(&model, &tools, request, cancel).await {
            Ok(review) => review,
            Err(e @ ReviewerError::Malformed(_)) => {
                tracing::warn!(thread = %thread, "reviewer: {e}");
                return Ended::not_posted(
                    ReviewerState::Refused,
                    head,
                    "the reviewer's answer could not be read, so nothing was posted",
                );
            }
            Err(e @ ReviewerError::OverCost { .. }) => {
                tracing::warn!(thread = %thread, "reviewer: {e}");
                return Ended::not_posted(ReviewerState::Skipped, head, &e.to_string());
            }
            Err(e) => {
                tracing::warn!(thread = %thread, "reviewer: {e}");
                return Ended::not_posted(ReviewerState::Failed, head, &e.to_string());
            }
        };
        let (kept, dropped) = reviewer::keep_shown(&review, &diff);
        if dropped > 0 {
            tracing::info!(
                thread = %thread,
                "reviewer: {dropped} comment(s) on lines the diff does not show dropped"
            );
        }
        match self.store.reviewer_posting(&thread, head).await {
            Ok(true) => {}
            Ok(false) => {
                return Ended {
                    state: ReviewerState::Failed,
                    review_id: None,
                    line: String::new(),
                };
            }
            Err(e) => {
                tracing::error!(thread = %thread, "reviewer: mark the review as posting: {e}");
                return Ended::not_posted(ReviewerState::Failed, head, "the store failed");
            }
        }
        let json = reviewer::review_json(head, &review.summary, &kept);
        match pull_request::post_review(&self.pm.gh, &self.pm.layout.repo, pending.pr.number, &json)
            .await
        {
            Ok(id) => {
                let mut line = reviewer::posted_line(kept.len(), &pending.pr.url);
                if let Some(fallback) = model.fallback_answered() {
                    line.push('\n');
                    line.push_str(&answered_by_fallback(&fallback, &config.model));
                }
                Ended {
                    state: ReviewerState::Posted,
                    review_id: Some(id),
                    line,
                }
            }
            Err(e) => {
                tracing::warn!(thread = %thread, "reviewer: post the review: {e}");
                Ended::not_posted(
                    ReviewerState::Failed,
                    head,
                    "GitHub did not take the review (the log says why)",
                )
            }
        }
    }

    /// Why the reviewer must not run now, if a cap says so: the repository's daily cap
    /// (`access.maxCostPerDay`), then the thread's budget. Fails closed.
    async fn reviewer_refusal(&self, thread: &crate::domain::ThreadKey) -> Option<String> {
        let repository_cap = crate::gateway::caps::Caps {
            per_user_per_day: 0.0,
            ..self.caps
        };
        let now = chrono::Utc::now();
        if let Some(refused) =
            crate::gateway::caps::spend_refusal(&self.store, repository_cap, "", now).await
        {
            return Some(first_sentence(&refused.markdown(now)));
        }
        crate::gateway::budget::refusal(&self.store, thread).await
    }
}

/// The first sentence of `text` (a cap's refusal speaks of plans after it).
fn first_sentence(text: &str) -> String {
    let text = text.strip_prefix("Not started: ").unwrap_or(text);
    match text.find(". ") {
        Some(end) => text[..end].to_owned(),
        None => text.trim_end_matches('.').to_owned(),
    }
}
