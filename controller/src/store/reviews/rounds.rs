//! A thread's review rounds: opened with the watcher message that announces them, in one
//! transaction (nothing while another is under way; the cap's notice once instead at the
//! cap; a batch over the sorting rate held), read back, and moved on by what the thread
//! says of them ([`ReviewChange`]), each move guarded by the state it read.

use sqlx::AnyConnection;

use super::super::bind::BindThread;
use super::super::{Store, StoreError, ThreadKey, now, unknown_value};
use super::rate::held;
use super::{CheckFailure, pr_column};
use crate::domain::ReviewEvent;
use crate::domain::WATCHER_USER;
use crate::domain::{Origin, PullRequestRef};

/// What a round is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundKind {
    /// A batch of review comments.
    Review,
    /// Checks that failed on the head commit.
    Checks,
}

impl RoundKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Review => "review",
            Self::Checks => "checks",
        }
    }
}

/// Where a round is (see the migration `20261126000100_review_rounds.sql`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundState {
    New,
    Proposed,
    Nothing,
    Unsorted,
    Approved,
    Declined,
    Done,
}

impl RoundState {
    const ALL: [RoundState; 7] = [
        Self::New,
        Self::Proposed,
        Self::Nothing,
        Self::Unsorted,
        Self::Approved,
        Self::Declined,
        Self::Done,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Proposed => "proposed",
            Self::Nothing => "nothing",
            Self::Unsorted => "unsorted",
            Self::Approved => "approved",
            Self::Declined => "declined",
            Self::Done => "done",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// A round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundRecord {
    /// Its number in the thread (1, 2, …).
    pub round: i64,
    pub pr: PullRequestRef,
    pub kind: RoundKind,
    /// The pull request's head commit when it opened.
    pub head_oid: String,
    /// GitHub's review decision then (`CHANGES_REQUESTED`, `APPROVED`, … or empty).
    pub decision: String,
    pub state: RoundState,
    /// When it was approved.
    pub approved_at: Option<String>,
    /// When the watcher opened it.
    pub created_at: String,
}

#[derive(sqlx::FromRow)]
struct RoundRow {
    round: i64,
    pr_number: i64,
    pr_url: String,
    kind: String,
    head_oid: String,
    decision: String,
    state: String,
    approved_at: Option<String>,
    created_at: String,
}

impl RoundRow {
    fn into_record(self, thread: &ThreadKey) -> Result<RoundRecord, StoreError> {
        let row = format!("{thread} round {}", self.round);
        let kind = match self.kind.as_str() {
            "review" => RoundKind::Review,
            "checks" => RoundKind::Checks,
            _ => return Err(unknown_value("review_rounds.kind", row, self.kind)),
        };
        let state = RoundState::parse(&self.state)
            .ok_or_else(|| unknown_value("review_rounds.state", &row, self.state.clone()))?;
        Ok(RoundRecord {
            round: self.round,
            pr: PullRequestRef {
                number: u64::try_from(self.pr_number).map_err(|_| {
                    unknown_value("review_rounds.pr_number", &row, self.pr_number.to_string())
                })?,
                url: self.pr_url,
            },
            kind,
            head_oid: self.head_oid,
            decision: self.decision,
            state,
            approved_at: self.approved_at,
            created_at: self.created_at,
        })
    }
}

const ROUND_COLUMNS: &str =
    "round, pr_number, pr_url, kind, head_oid, decision, state, approved_at, created_at";

/// A round the watcher wants to open.
#[derive(Clone, Debug)]
pub struct NewRound<'a> {
    pub thread: &'a ThreadKey,
    pub pr: &'a PullRequestRef,
    pub kind: RoundKind,
    pub head_oid: &'a str,
    pub decision: &'a str,
    /// The failing checks it reports (a `checks` round).
    pub checks: &'a [CheckFailure],
    /// `github.maxReviewRounds`.
    pub max_rounds: u32,
    /// The ts of the watcher message announcing it (or the cap).
    pub message_ts: &'a str,
    /// `github.maxSortsPerHour`: most rounds the PM sorts per pull request in any hour.
    pub max_sorts_per_hour: u32,
}

/// What [`Store::open_round`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// Round `n` is open and announced.
    Round(i64),
    /// A round of the thread is still under way (new, proposed or approved): nothing now.
    Busy,
    /// Nothing to open (no comment waits for a batch).
    Empty,
    /// Comments wait, but the pull request had as many rounds in the last hour as the
    /// sorting rate allows (`github.maxSortsPerHour`; one an hour for a batch of comments
    /// that are only named): they keep gathering.
    Held,
    /// The pull request reached the cap; `told` says whether the cap's notice was stored now
    /// (it is stored once per thread).
    Capped { told: bool },
}

/// The step that records the cap's notice once per thread.
const CAP_STEP: &str = "review_cap";

/// A change to a thread's rounds, recorded by [`super::Store::commit`].
#[derive(Clone, Copy, Debug)]
pub enum ReviewChange<'a> {
    /// The new round `round` is sorted: proposed, or left with nothing to propose, or
    /// reported unsorted; `sorted` says what the PM made of each comment. Records nothing if
    /// the round is no longer new.
    Sorted {
        thread: &'a ThreadKey,
        round: i64,
        state: RoundState,
        sorted: &'a [(String, String)],
    },
    /// The proposed round is approved; records nothing if it is no longer proposed.
    Approved { thread: &'a ThreadKey, round: i64 },
    /// The proposed round is declined; records nothing if it is no longer proposed.
    Declined { thread: &'a ThreadKey, round: i64 },
    /// The approved round waits again (its run could not start); records nothing if it is
    /// no longer approved.
    Unapproved { thread: &'a ThreadKey, round: i64 },
}

/// Applies `change`; false when its guard fails.
pub(in crate::store) async fn apply(
    conn: &mut AnyConnection,
    change: &ReviewChange<'_>,
) -> Result<bool, StoreError> {
    let (thread, round, from, to, approved_at) = match *change {
        ReviewChange::Sorted {
            thread,
            round,
            state,
            sorted,
        } => {
            for (key, kind) in sorted {
                sqlx::query(
                    "UPDATE review_comments SET sorted = $1 \
                     WHERE channel_id = $2 AND thread_ts = $3 AND comment_key = $4 AND round = $5",
                )
                .bind(kind)
                .bind_thread(thread)
                .bind(key)
                .bind(round)
                .execute(&mut *conn)
                .await?;
            }
            (thread, round, RoundState::New, state, None)
        }
        ReviewChange::Approved { thread, round } => (
            thread,
            round,
            RoundState::Proposed,
            RoundState::Approved,
            Some(now()),
        ),
        ReviewChange::Declined { thread, round } => (
            thread,
            round,
            RoundState::Proposed,
            RoundState::Declined,
            None,
        ),
        ReviewChange::Unapproved { thread, round } => (
            thread,
            round,
            RoundState::Approved,
            RoundState::Proposed,
            None,
        ),
    };
    let moved = sqlx::query(
        "UPDATE review_rounds SET state = $1, approved_at = COALESCE($2, approved_at) \
         WHERE channel_id = $3 AND thread_ts = $4 AND round = $5 AND state = $6",
    )
    .bind(to.as_str())
    .bind(approved_at)
    .bind_thread(thread)
    .bind(round)
    .bind(from.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(moved == 1)
}

/// Inserts the watcher's message `text` in `thread` (it wakes the thread's handler).
pub(super) async fn insert_watcher_message(
    conn: &mut AnyConnection,
    thread: &ThreadKey,
    ts: &str,
    text: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, event_id, received_at, origin) \
         VALUES ($1, $2, $3, $4, $5, NULL, $6, $7) ON CONFLICT (channel_id, ts) DO NOTHING",
    )
    .bind(&thread.channel)
    .bind(ts)
    .bind(&thread.thread_ts)
    .bind(WATCHER_USER)
    .bind(text)
    .bind(now())
    .bind(Origin::Watcher.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

impl Store {
    /// Opens a round and stores the watcher message announcing it, in one transaction:
    /// nothing while another round of the thread is under way; at the cap
    /// (`max_rounds` rounds that proposed or may propose something), the checks are
    /// recorded unreported and the cap's notice is stored once instead; a batch of comments
    /// over the sorting rate waits ([`Opened::Held`]).
    pub async fn open_round(&self, new: &NewRound<'_>) -> Result<Opened, StoreError> {
        let thread = new.thread;
        let number = pr_column(thread, new.pr.number)?;
        let mut tx = self.begin_write().await?;
        let busy = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM review_rounds WHERE channel_id = $1 AND thread_ts = $2 \
             AND state IN ('new', 'proposed', 'approved')",
        )
        .bind_thread(thread)
        .fetch_one(&mut *tx)
        .await?;
        if busy > 0 {
            return Ok(Opened::Busy);
        }
        let counted = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM review_rounds WHERE channel_id = $1 AND thread_ts = $2 \
             AND state NOT IN ('nothing', 'unsorted')",
        )
        .bind_thread(thread)
        .fetch_one(&mut *tx)
        .await?;
        let capped = counted >= i64::from(new.max_rounds);
        let round = if capped {
            None
        } else {
            let last = sqlx::query_scalar::<_, i64>(
                "SELECT COALESCE(MAX(round), 0) FROM review_rounds \
                 WHERE channel_id = $1 AND thread_ts = $2",
            )
            .bind_thread(thread)
            .fetch_one(&mut *tx)
            .await?;
            Some(last + 1)
        };
        for check in new.checks {
            sqlx::query(
                "INSERT INTO check_failures (channel_id, thread_ts, check_name, head_oid, round, log_tail) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (channel_id, thread_ts, check_name, head_oid) DO NOTHING",
            )
            .bind_thread(thread)
            .bind(&check.name)
            .bind(&check.head_oid)
            .bind(round)
            .bind(&check.log_tail)
            .execute(&mut *tx)
            .await?;
        }
        let Some(round) = round else {
            let told = sqlx::query(
                "INSERT INTO thread_steps (channel_id, thread_ts, step, done_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (channel_id, thread_ts, step) DO NOTHING",
            )
            .bind_thread(thread)
            .bind(CAP_STEP)
            .bind(now())
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if told {
                let text = ReviewEvent::Capped.to_text(new.pr.number);
                insert_watcher_message(&mut tx, thread, new.message_ts, &text).await?;
            }
            tx.commit().await?;
            return Ok(Opened::Capped { told });
        };
        if new.kind == RoundKind::Review && held(&mut tx, new).await? {
            tx.rollback().await?;
            return Ok(Opened::Held);
        }
        if new.kind == RoundKind::Review {
            let taken = sqlx::query(
                "UPDATE review_comments SET round = $1 \
                 WHERE channel_id = $2 AND thread_ts = $3 AND round IS NULL",
            )
            .bind(round)
            .bind_thread(thread)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if taken == 0 {
                tx.rollback().await?;
                return Ok(Opened::Empty);
            }
        } else if new.checks.is_empty() {
            tx.rollback().await?;
            return Ok(Opened::Empty);
        }
        sqlx::query(
            "INSERT INTO review_rounds (channel_id, thread_ts, round, pr_number, pr_url, kind, \
             head_oid, decision, state, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'new', $9)",
        )
        .bind_thread(thread)
        .bind(round)
        .bind(number)
        .bind(&new.pr.url)
        .bind(new.kind.as_str())
        .bind(new.head_oid)
        .bind(new.decision)
        .bind(now())
        .execute(&mut *tx)
        .await?;
        let text = ReviewEvent::Round.to_text(new.pr.number);
        insert_watcher_message(&mut tx, thread, new.message_ts, &text).await?;
        tx.commit().await?;
        Ok(Opened::Round(round))
    }

    /// Whether a round of the thread is under way (new, proposed or approved).
    pub async fn round_under_way(&self, thread: &ThreadKey) -> Result<bool, StoreError> {
        let n = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM review_rounds WHERE channel_id = $1 AND thread_ts = $2 \
             AND state IN ('new', 'proposed', 'approved')",
        )
        .bind_thread(thread)
        .fetch_one(&self.pool)
        .await?;
        Ok(n > 0)
    }

    /// The thread's rounds in `state`, oldest first.
    pub async fn rounds_in(
        &self,
        thread: &ThreadKey,
        state: RoundState,
    ) -> Result<Vec<RoundRecord>, StoreError> {
        let rows = sqlx::query_as::<_, RoundRow>(&format!(
            "SELECT {ROUND_COLUMNS} FROM review_rounds \
             WHERE channel_id = $1 AND thread_ts = $2 AND state = $3 ORDER BY round"
        ))
        .bind_thread(thread)
        .bind(state.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|r| r.into_record(thread)).collect()
    }

    /// Every round of the thread, oldest first.
    pub async fn thread_rounds(&self, thread: &ThreadKey) -> Result<Vec<RoundRecord>, StoreError> {
        let rows = sqlx::query_as::<_, RoundRow>(&format!(
            "SELECT {ROUND_COLUMNS} FROM review_rounds \
             WHERE channel_id = $1 AND thread_ts = $2 ORDER BY round"
        ))
        .bind_thread(thread)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(|r| r.into_record(thread)).collect()
    }

    /// The approved round is done (its run ended, its replies posted).
    pub async fn finish_round(&self, thread: &ThreadKey, round: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE review_rounds SET state = 'done' \
             WHERE channel_id = $1 AND thread_ts = $2 AND round = $3 AND state = 'approved'",
        )
        .bind_thread(thread)
        .bind(round)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
