//! The comments and checks the PR watcher saw: stored once each as first seen (the text of
//! one whose author may not steer the Coder never), read back by round, and the replies
//! posted on GitHub marked.

use std::collections::HashSet;

use super::super::bind::BindThread;
use super::super::{Store, StoreError, ThreadKey};
use super::pr_column;

/// A round's comments oldest first, as GitHub dates them; undated ones after, in the order
/// they were seen.
macro_rules! oldest_first {
    () => {
        "ORDER BY CASE WHEN created_ms IS NULL THEN 1 ELSE 0 END, created_ms, seen_ms, comment_key"
    };
}

/// A comment the watcher saw for the first time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewComment {
    /// `line:<id>`, `review:<id>` or `conversation:<id>`.
    pub key: String,
    /// When GitHub says it was written (ms since the epoch), if it said: a round's comments
    /// read back oldest first.
    pub created_ms: Option<i64>,
    pub author: String,
    /// The file of a line comment.
    pub path: Option<String>,
    /// Its line (the last of a range), when GitHub still places it.
    pub line: Option<i64>,
    pub body: String,
    pub url: String,
    /// For a line comment that answers another, the top comment of its thread.
    pub reply_to: Option<i64>,
    /// The author's association with the repository as GitHub gave it (`OWNER`, `MEMBER`,
    /// `NONE`…), if it did.
    pub association: Option<String>,
}

/// A comment seen for the first time, and whether its author may steer the Coder.
#[derive(Clone, Copy, Debug)]
pub struct Sighting<'a> {
    pub comment: &'a NewComment,
    /// False: only its author is kept, never its text.
    pub heeded: bool,
}

/// A stored comment whose author may steer the Coder, with what the PM made of it and its
/// reply.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredComment {
    #[sqlx(rename = "comment_key")]
    pub key: String,
    pub author: String,
    pub path: Option<String>,
    pub line: Option<i64>,
    pub body: String,
    pub url: String,
    /// For a line comment that answers another, the top comment of its thread.
    pub reply_to: Option<i64>,
    /// `change`, `question` or `discussion`, once sorted.
    pub sorted: Option<String>,
    /// `attempted` or `posted`, once a reply was tried.
    pub reply: Option<String>,
}

/// A check that failed on a head commit, as reported.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct CheckFailure {
    #[sqlx(rename = "check_name")]
    pub name: String,
    pub head_oid: String,
    /// The end of its failed log, or why there is none.
    pub log_tail: String,
}

impl Store {
    /// The keys of the comments of `thread` already stored.
    pub async fn known_review_comments(
        &self,
        thread: &ThreadKey,
    ) -> Result<HashSet<String>, StoreError> {
        let keys = sqlx::query_scalar::<_, String>(
            "SELECT comment_key FROM review_comments WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        Ok(keys.into_iter().collect())
    }

    /// Stores comments seen for the first time at `seen_ms` (one already stored is left as
    /// it is; the text of one that is not heeded is never stored); returns how many were
    /// new.
    pub async fn record_review_comments(
        &self,
        thread: &ThreadKey,
        pr_number: u64,
        comments: &[Sighting<'_>],
        seen_ms: i64,
    ) -> Result<u64, StoreError> {
        let number = pr_column(thread, pr_number)?;
        let mut tx = self.begin_write().await?;
        let mut added = 0;
        for Sighting { comment: c, heeded } in comments {
            added += sqlx::query(
                "INSERT INTO review_comments (channel_id, thread_ts, comment_key, pr_number, author, \
                 path, line, body, url, reply_to, seen_ms, heeded, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                 ON CONFLICT (channel_id, thread_ts, comment_key) DO NOTHING",
            )
            .bind_thread(thread)
            .bind(&c.key)
            .bind(number)
            .bind(&c.author)
            .bind(&c.path)
            .bind(c.line)
            .bind(if *heeded { c.body.as_str() } else { "" })
            .bind(&c.url)
            .bind(c.reply_to)
            .bind(seen_ms)
            .bind(i64::from(*heeded))
            .bind(c.created_ms)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(added)
    }

    /// When the newest comment waiting for a batch was first seen (ms), if one waits: the
    /// newest heeded one while any waits, so people who may not steer cannot hold a batch
    /// back by commenting more often than the quiet period.
    pub async fn newest_unbatched_comment(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<i64>, StoreError> {
        let newest = sqlx::query_as::<_, (i64, i64)>(
            "SELECT heeded, MAX(seen_ms) FROM review_comments \
             WHERE channel_id = $1 AND thread_ts = $2 AND round IS NULL GROUP BY heeded",
        )
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        Ok(newest
            .iter()
            .max_by_key(|(heeded, _)| *heeded)
            .map(|(_, seen_ms)| *seen_ms))
    }

    /// The names of the checks already recorded as failed on `head_oid`.
    pub async fn known_check_failures(
        &self,
        thread: &ThreadKey,
        head_oid: &str,
    ) -> Result<HashSet<String>, StoreError> {
        let names = sqlx::query_scalar::<_, String>(
            "SELECT check_name FROM check_failures \
             WHERE channel_id = $1 AND thread_ts = $2 AND head_oid = $3",
        )
        .bind_thread(thread)
        .bind(head_oid)
        .fetch_all(&self.pool)
        .await?;
        Ok(names.into_iter().collect())
    }

    /// The round's comments whose authors may steer the Coder, oldest first (as GitHub dates
    /// them; undated ones after, in the order they were seen).
    pub async fn round_comments(
        &self,
        thread: &ThreadKey,
        round: i64,
    ) -> Result<Vec<StoredComment>, StoreError> {
        Ok(sqlx::query_as::<_, StoredComment>(concat!(
            "SELECT comment_key, author, path, line, body, url, reply_to, sorted, reply FROM review_comments \
             WHERE channel_id = $1 AND thread_ts = $2 AND round = $3 AND heeded = 1 ",
            oldest_first!()
        ))
        .bind_thread(thread)
        .bind(round)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The authors of the round's comments that are not heeded, one per comment, oldest
    /// first as [`Store::round_comments`] orders them.
    pub async fn round_unheeded(
        &self,
        thread: &ThreadKey,
        round: i64,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar::<_, String>(concat!(
            "SELECT author FROM review_comments \
             WHERE channel_id = $1 AND thread_ts = $2 AND round = $3 AND heeded = 0 ",
            oldest_first!()
        ))
        .bind_thread(thread)
        .bind(round)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The checks the round reports.
    pub async fn round_checks(
        &self,
        thread: &ThreadKey,
        round: i64,
    ) -> Result<Vec<CheckFailure>, StoreError> {
        Ok(sqlx::query_as::<_, CheckFailure>(
            "SELECT check_name, head_oid, log_tail FROM check_failures \
             WHERE channel_id = $1 AND thread_ts = $2 AND round = $3 ORDER BY check_name",
        )
        .bind_thread(thread)
        .bind(round)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records the reply to comment `key` as `state` (`attempted` before posting it,
    /// `posted` after).
    pub async fn mark_reply(
        &self,
        thread: &ThreadKey,
        key: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE review_comments SET reply = $1 \
             WHERE channel_id = $2 AND thread_ts = $3 AND comment_key = $4",
        )
        .bind(state)
        .bind_thread(thread)
        .bind(key)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
