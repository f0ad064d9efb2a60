//! The reviewer model's reviews (`reviewer_reviews`): one per head commit of a thread's pull
//! request. The PR watcher records a head it has not seen together with the watcher message
//! that tells the thread ([`Store::reviewer_due`]), in one transaction, so a head is
//! announced once; the thread marks the review `posting` before it posts on GitHub
//! ([`Store::reviewer_posting`]), so a restart never posts it twice, and records how it ended
//! with what it says in the thread ([`ReviewerChange`]). The ids GitHub gave the posted
//! reviews are what lets the watcher tell the reviewer's line comments from the
//! controller's other comments ([`Store::reviewer_review_ids`]).

use sqlx::AnyConnection;

use super::super::bind::BindThread;
use super::super::{Store, StoreError, ThreadKey, now, unknown_value};
use super::pr_column;
use super::rounds::insert_watcher_message;
use crate::domain::{PullRequestRef, ReviewEvent};

/// Where a reviewer's review is (see the migration `20261129000400_reviewer_reviews.sql`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewerState {
    /// Seen by the watcher; the thread has not reviewed it yet.
    Due,
    /// Being posted on GitHub: found so after a restart, it is never posted again.
    Posting,
    /// Posted on GitHub.
    Posted,
    /// Not reviewed: a spending cap, the thread's budget or `reviewer.maxCostPerReview`.
    Skipped,
    /// The model's answer could not be read; nothing was posted.
    Refused,
    /// The diff could not be read, the model call or the post failed.
    Failed,
}

impl ReviewerState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Due => "due",
            Self::Posting => "posting",
            Self::Posted => "posted",
            Self::Skipped => "skipped",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            Self::Due,
            Self::Posting,
            Self::Posted,
            Self::Skipped,
            Self::Refused,
            Self::Failed,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// A head commit waiting for the reviewer, or being posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingReview {
    pub head_oid: String,
    pub pr: PullRequestRef,
    pub state: ReviewerState,
}

/// How the thread's review of a head ended, recorded with what the thread says of it. Records
/// nothing (and so says nothing) unless the review is still due or posting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReviewerChange<'a> {
    pub thread: &'a ThreadKey,
    pub head_oid: &'a str,
    pub state: ReviewerState,
    /// The id GitHub gave the review, when it was posted.
    pub review_id: Option<u64>,
}

/// Applies `change`; false when the review is no longer due or posting.
pub(in crate::store) async fn apply(
    conn: &mut AnyConnection,
    change: &ReviewerChange<'_>,
) -> Result<bool, StoreError> {
    let review_id = change
        .review_id
        .map(|id| {
            i64::try_from(id).map_err(|_| {
                unknown_value("reviewer_reviews.review_id", change.thread, id.to_string())
            })
        })
        .transpose()?;
    let moved = sqlx::query(
        "UPDATE reviewer_reviews SET state = $1, review_id = $2 \
         WHERE channel_id = $3 AND thread_ts = $4 AND head_oid = $5 \
         AND state IN ('due', 'posting')",
    )
    .bind(change.state.as_str())
    .bind(review_id)
    .bind_thread(change.thread)
    .bind(change.head_oid)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(moved == 1)
}

impl Store {
    /// Records that pull request `pr` of `thread` has the head `head_oid`, with the watcher
    /// message (stored at `message_ts`) that asks the thread to review it, unless this head
    /// was recorded before. True when it was new.
    pub async fn reviewer_due(
        &self,
        thread: &ThreadKey,
        pr: &PullRequestRef,
        head_oid: &str,
        message_ts: &str,
    ) -> Result<bool, StoreError> {
        let number = pr_column(thread, pr.number)?;
        let mut tx = self.begin_write().await?;
        let added = sqlx::query(
            "INSERT INTO reviewer_reviews (channel_id, thread_ts, head_oid, pr_number, pr_url, \
             state, created_at) VALUES ($1, $2, $3, $4, $5, 'due', $6) \
             ON CONFLICT (channel_id, thread_ts, head_oid) DO NOTHING",
        )
        .bind_thread(thread)
        .bind(head_oid)
        .bind(number)
        .bind(&pr.url)
        .bind(now())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if added {
            let text = ReviewEvent::Reviewer.to_text(pr.number);
            insert_watcher_message(&mut tx, thread, message_ts, &text).await?;
        }
        tx.commit().await?;
        Ok(added)
    }

    /// The thread's oldest review that is due or being posted, if any.
    pub async fn pending_reviewer_review(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<PendingReview>, StoreError> {
        let row = sqlx::query_as::<_, (String, i64, String, String)>(
            "SELECT head_oid, pr_number, pr_url, state FROM reviewer_reviews \
             WHERE channel_id = $1 AND thread_ts = $2 AND state IN ('due', 'posting') \
             ORDER BY created_at, head_oid LIMIT 1",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        let Some((head_oid, number, url, state)) = row else {
            return Ok(None);
        };
        let number = u64::try_from(number)
            .map_err(|_| unknown_value("reviewer_reviews.pr_number", thread, number.to_string()))?;
        let state = ReviewerState::parse(&state)
            .ok_or_else(|| unknown_value("reviewer_reviews.state", thread, state.clone()))?;
        Ok(Some(PendingReview {
            head_oid,
            pr: PullRequestRef { number, url },
            state,
        }))
    }

    /// Marks the due review of `head_oid` as being posted; false when it was not due (a
    /// restart after it started posting).
    pub async fn reviewer_posting(
        &self,
        thread: &ThreadKey,
        head_oid: &str,
    ) -> Result<bool, StoreError> {
        let moved = sqlx::query(
            "UPDATE reviewer_reviews SET state = 'posting' \
             WHERE channel_id = $1 AND thread_ts = $2 AND head_oid = $3 AND state = 'due'",
        )
        .bind_thread(thread)
        .bind(head_oid)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(moved == 1)
    }

    /// The ids GitHub gave the thread's posted reviews.
    pub async fn reviewer_review_ids(&self, thread: &ThreadKey) -> Result<Vec<u64>, StoreError> {
        let ids = sqlx::query_scalar::<_, i64>(
            "SELECT review_id FROM reviewer_reviews WHERE channel_id = $1 AND thread_ts = $2 \
             AND state = 'posted' AND review_id IS NOT NULL",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        Ok(ids
            .into_iter()
            .filter_map(|id| u64::try_from(id).ok())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Change;
    use crate::store::reviews::tests::{pr, thread};

    async fn a_head_is_due_once_posted_once_and_its_review_id_kept(store: &Store) {
        {
            let t = thread();
            assert!(store.reviewer_due(&t, &pr(), "aaa", "9.1").await.unwrap());
            assert!(!store.reviewer_due(&t, &pr(), "aaa", "9.2").await.unwrap());
            let pending = store.pending_reviewer_review(&t).await.unwrap().unwrap();
            assert_eq!(pending.head_oid, "aaa");
            assert_eq!(pending.state, ReviewerState::Due);
            assert!(store.reviewer_posting(&t, "aaa").await.unwrap());
            assert!(!store.reviewer_posting(&t, "aaa").await.unwrap());
            let posted = Change::Reviewer(ReviewerChange {
                thread: &t,
                head_oid: "aaa",
                state: ReviewerState::Posted,
                review_id: Some(4242),
            });
            assert!(store.commit(&[posted], &[]).await.unwrap());
            // Recorded once: the same change again records nothing.
            assert!(!store.commit(&[posted], &[]).await.unwrap());
            assert_eq!(store.reviewer_review_ids(&t).await.unwrap(), [4242]);
            assert!(store.pending_reviewer_review(&t).await.unwrap().is_none());
        }
    }

    crate::store::testing::on_both_backends!(a_head_is_due_once_posted_once_and_its_review_id_kept);
}
