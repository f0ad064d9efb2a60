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
    Ok(over_the_rate(
        sorts,
        &rounds,
        chrono::Utc::now(),
        new.max_sorts_per_hour,
    ))
}

/// Whether a waiting batch is over the rate at `now`: `sorts` says whether the PM is to sort
/// it (it has a heeded comment); `rounds` are the pull request's review rounds, when each
/// opened (RFC 3339) and how many heeded comments it took. Only rounds of the same sort, in
/// the last hour, count.
fn over_the_rate(
    sorts: bool,
    rounds: &[(String, i64)],
    now: chrono::DateTime<chrono::Utc>,
    max_sorts_per_hour: u32,
) -> bool {
    let since = now - SORT_WINDOW;
    let recent = rounds
        .iter()
        .filter(|(created_at, heeded)| {
            (*heeded > 0) == sorts
                && chrono::DateTime::parse_from_rfc3339(created_at).is_ok_and(|at| at >= since)
        })
        .count();
    let allowed = if sorts {
        usize::try_from(max_sorts_per_hour).unwrap_or(usize::MAX)
    } else {
        NOTICES_PER_HOUR
    };
    recent >= allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_waits_once_the_last_hour_had_its_rounds_of_the_same_sort() {
        let now = chrono::Utc::now();
        let at = |minutes_ago: i64| (now - chrono::TimeDelta::minutes(minutes_ago)).to_rfc3339();
        // (the batch is sorted, the rounds (opened, heeded comments), maxSortsPerHour, held)
        type Case = (bool, Vec<(String, i64)>, u32, bool);
        let cases: Vec<Case> = vec![
            (true, vec![], 2, false),
            (true, vec![(at(10), 1)], 2, false),
            (true, vec![(at(10), 1), (at(50), 3)], 2, true),
            // A round more than an hour ago no longer counts.
            (true, vec![(at(10), 1), (at(61), 3)], 2, false),
            // Rounds that only named comments do not count against sorting.
            (true, vec![(at(5), 0), (at(6), 0), (at(7), 1)], 2, false),
            (true, vec![(at(5), 1)], 1, true),
            // A batch of comments that are only named: one round an hour.
            (false, vec![], 10, false),
            (false, vec![(at(30), 0)], 10, true),
            (false, vec![(at(61), 0)], 10, false),
            (false, vec![(at(5), 2), (at(6), 1)], 10, false),
            // A time that does not read back counts as none.
            (true, vec![("yesterday".into(), 1)], 1, false),
        ];
        for (sorts, rounds, max, held) in cases {
            assert_eq!(
                over_the_rate(sorts, &rounds, now, max),
                held,
                "sorts={sorts} {rounds:?} max={max}"
            );
        }
    }
}
