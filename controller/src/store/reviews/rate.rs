//! The sorting rate: how many rounds of review comments a pull request gets an hour
//! (`github.maxSortsPerHour` for batches the PM sorts, one for batches of comments that are
//! only named), so comments keep gathering instead of costing a model call each.

use sqlx::AnyConnection;

use super::super::StoreError;
use super::super::bind::BindThread;
use super::NewRound;

/// How long the sorting rate looks back.
const SORT_WINDOW: chrono::TimeDelta = chrono::TimeDelta::hours(1);
/// Most rounds per hour that only name comments of people who may not steer (no sorting).
const NOTICES_PER_HOUR: usize = 1;

/// Whether the batch waiting in `new`'s thread must wait for the sorting rate: a batch the
/// PM is to sort (one heeded comment or more) once `max_sorts_per_hour` rounds of the last
/// hour were sorted, a batch of comments that are only named once [`NOTICES_PER_HOUR`]
/// such rounds were. Each round counts whatever its sorting found.
pub(super) async fn held(conn: &mut AnyConnection, new: &NewRound<'_>) -> Result<bool, StoreError> {
    let thread = new.thread;
    let (waiting, heeded) = sqlx::query_as::<_, (i64, i64)>(
        "SELECT COUNT(*), CAST(COALESCE(SUM(heeded), 0) AS BIGINT) FROM review_comments \
         WHERE channel_id = $1 AND thread_ts = $2 AND round IS NULL",
    )
    .bind_thread(thread)
    .fetch_one(&mut *conn)
    .await?;
    if waiting == 0 {
        return Ok(false);
    }
    let sorts = heeded > 0;
    let rounds = sqlx::query_as::<_, (String, i64)>(
        "SELECT r.created_at, (SELECT COUNT(*) FROM review_comments c \
           WHERE c.channel_id = r.channel_id AND c.thread_ts = r.thread_ts \
           AND c.round = r.round AND c.heeded = 1) \
         FROM review_rounds r \
         WHERE r.channel_id = $1 AND r.thread_ts = $2 AND r.kind = 'review'",
    )
    .bind_thread(thread)
    .fetch_all(&mut *conn)
    .await?;
    let since = chrono::Utc::now() - SORT_WINDOW;
    let recent = rounds
        .iter()
        .filter(|(created_at, heeded)| {
            (*heeded > 0) == sorts
                && chrono::DateTime::parse_from_rfc3339(created_at).is_ok_and(|at| at >= since)
        })
        .count();
    let allowed = if sorts {
        usize::try_from(new.max_sorts_per_hour).unwrap_or(usize::MAX)
    } else {
        NOTICES_PER_HOUR
    };
    Ok(recent >= allowed)
}
