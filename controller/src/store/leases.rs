//! Instances of the service sharing one store, and which of them handles which thread.
//!
//! Several hosts may run the service against one PostgreSQL database; each process is an
//! [`Instance`] registered in `instances` and kept alive by its [`Store::heartbeat`]. A
//! thread's messages are handled by the instance holding its lease (`thread_leases`), in
//! order: an instance [claims](Store::claim_thread) a thread before handling it (a free lease,
//! an expired one or its own), renews its leases with its heartbeat, and
//! [releases](Store::release_thread) a thread it is done with. An instance that stops
//! renewing (killed, partitioned, stuck) loses its leases when they expire, and another
//! instance takes its threads over. [`Change::LeaseHeld`](super::Change::LeaseHeld) fences
//! a commit: what an instance records about a thread is refused once the lease has gone to
//! another, so a stalled owner that wakes up cannot answer a message twice.
//!
//! Every time here is the database's clock ([`super::backend::Backend::now_ms`]), so hosts
//! with skewed clocks agree. A claim is one `INSERT … ON CONFLICT … DO UPDATE … WHERE …
//! RETURNING` statement: atomic on both databases (PostgreSQL locks the conflicting row,
//! SQLite's writer lock serialises it), so of two instances racing for a thread exactly one
//! wins, with no lock held between statements. With SQLite there is one instance, whose
//! claims always succeed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, ThreadRow};

/// How long a lease lasts without renewal: how long a stopped instance's threads wait
/// before another takes them over, and how recent a heartbeat counts as live.
pub const LEASE_TTL: Duration = Duration::from_secs(15);

/// One process of the service, as it registers itself: `<host>:<pid>:<start ms>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    pub host: String,
    pub pid: u32,
}

impl Instance {
    /// The instance of `host`'s process `pid` started at `started` (this host's clock: it
    /// only makes the id unique when a pid is reused).
    pub fn new(host: &str, pid: u32, started: SystemTime) -> Self {
        let ms = started
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Self {
            id: format!("{host}:{pid}:{ms}"),
            host: host.to_owned(),
            pid,
        }
    }

    /// This process, started now.
    pub fn this_process() -> Result<Self, std::io::Error> {
        let host = nix::unistd::gethostname().map_err(std::io::Error::from)?;
        Ok(Self::new(
            &host.to_string_lossy(),
            std::process::id(),
            SystemTime::now(),
        ))
    }
}

/// A registered instance, as [`Store::live_instances`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceRecord {
    pub id: String,
    pub host: String,
    pub pid: i64,
    /// When it registered, in ms since the epoch (the database's clock).
    pub started_at_ms: i64,
    /// How long ago its last heartbeat was.
    pub heartbeat_age: Duration,
}

/// A thread's lease, as [`Store::leases`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseRecord {
    pub thread: ThreadKey,
    /// The instance holding it.
    pub owner: String,
    /// Milliseconds until it expires; 0 or less: expired, free to be claimed.
    pub expires_in_ms: i64,
}

#[derive(sqlx::FromRow)]
struct InstanceRow {
    id: String,
    host: String,
    pid: i64,
    started_at: i64,
    age_ms: i64,
}

#[derive(sqlx::FromRow)]
struct LeaseRow {
    #[sqlx(flatten)]
    thread: ThreadRow,
    owner: String,
    expires_in_ms: i64,
}

/// A duration in whole milliseconds, for SQL.
pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Registers `instance` (or renews it, if it is registered already).
    pub async fn register_instance(&self, instance: &Instance) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        upsert_instance(&mut conn, self.backend.now_ms(), instance).await
    }

    /// Renews `instance` and every lease it holds for `lease_ttl` from now, in one
    /// transaction (registering it again if it was forgotten). Returns how many leases it
    /// holds; a lease another instance took over meanwhile is not among them.
    pub async fn heartbeat(
        &self,
        instance: &Instance,
        lease_ttl: Duration,
    ) -> Result<u64, StoreError> {
        let now = self.backend.now_ms();
        let mut tx = self.begin_write().await?;
        upsert_instance(&mut tx, now, instance).await?;
        let renewed = sqlx::query(&format!(
            "UPDATE thread_leases SET expires_at = {now} + $1 WHERE owner = $2"
        ))
        .bind(millis(lease_ttl))
        .bind(&instance.id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(renewed)
    }

    /// Takes `thread` for `owner` for `ttl` from now if its lease is free, expired or
    /// `owner`'s already (then renewed). Atomic: of instances racing for a thread, exactly
    /// one gets true.
    pub async fn claim_thread(
        &self,
        thread: &ThreadKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let now = self.backend.now_ms();
        let claimed = sqlx::query_scalar::<_, String>(&format!(
            "INSERT INTO thread_leases (channel_id, thread_ts, owner, expires_at) \
             VALUES ($1, $2, $3, {now} + $4) \
             ON CONFLICT (channel_id, thread_ts) DO UPDATE \
             SET owner = excluded.owner, expires_at = excluded.expires_at \
             WHERE thread_leases.owner = excluded.owner OR thread_leases.expires_at <= {now} \
             RETURNING owner"
        ))
        .bind_thread(thread)
        .bind(owner)
        .bind(millis(ttl))
        .fetch_optional(&self.pool)
        .await?;
        Ok(claimed.is_some())
    }

    /// Gives `thread` up, if `owner` holds it. Returns whether it did.
    pub async fn release_thread(
        &self,
        thread: &ThreadKey,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let released = sqlx::query(
            "DELETE FROM thread_leases WHERE channel_id = $1 AND thread_ts = $2 AND owner = $3",
        )
        .bind_thread(thread)
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(released == 1)
    }

    /// At a clean stop: `instance`'s leases are released and it is forgotten, in one
    /// transaction, so its threads are taken over at once rather than when they expire.
    pub async fn deregister_instance(&self, instance: &Instance) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM thread_leases WHERE owner = $1")
            .bind(&instance.id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM instances WHERE id = $1")
            .bind(&instance.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The instances whose last heartbeat is less than `within` old, oldest first.
    pub async fn live_instances(
        &self,
        within: Duration,
    ) -> Result<Vec<InstanceRecord>, StoreError> {
        let now = self.backend.now_ms();
        let rows = sqlx::query_as::<_, InstanceRow>(&format!(
            "SELECT id, host, pid, started_at, {now} - heartbeat_at AS age_ms FROM instances \
             WHERE heartbeat_at > {now} - $1 ORDER BY started_at, id"
        ))
        .bind(millis(within))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| InstanceRecord {
                id: r.id,
                host: r.host,
                pid: r.pid,
                started_at_ms: r.started_at,
                heartbeat_age: Duration::from_millis(u64::try_from(r.age_ms).unwrap_or(0)),
            })
            .collect())
    }

    /// Every thread lease, expired ones included, by thread.
    pub async fn leases(&self) -> Result<Vec<LeaseRecord>, StoreError> {
        let now = self.backend.now_ms();
        let rows = sqlx::query_as::<_, LeaseRow>(&format!(
            "SELECT channel_id, thread_ts, owner, expires_at - {now} AS expires_in_ms \
             FROM thread_leases ORDER BY channel_id, thread_ts"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| LeaseRecord {
                thread: r.thread.into(),
                owner: r.owner,
                expires_in_ms: r.expires_in_ms,
            })
            .collect())
    }

    /// Admits the queued run `id` on `instance` to one of `max` Coder slots shared by every
    /// instance of this store (`access.maxConcurrentThreads`): true if fewer than `max` runs
    /// admitted on instances alive within `live_within` have not ended (then the run is
    /// admitted and counts until it ends), false to wait and ask again. Under the store's
    /// write lock, so two instances cannot both take the last slot; the runs of an instance
    /// that died stop counting once it stops beating.
    pub async fn admit_run(
        &self,
        id: &str,
        instance: &str,
        max: i64,
        live_within: Duration,
    ) -> Result<bool, StoreError> {
        let now = self.backend.now_ms();
        let mut tx = self.begin_write().await?;
        let busy = sqlx::query_scalar::<_, i64>(&format!(
            "SELECT COUNT(*) FROM runs WHERE state IN ('queued', 'running') AND instance IN \
             (SELECT id FROM instances WHERE heartbeat_at > {now} - $1)"
        ))
        .bind(millis(live_within))
        .fetch_one(&mut *tx)
        .await?;
        if busy >= max {
            tx.rollback().await?;
            return Ok(false);
        }
        let admitted = sqlx::query(
            "UPDATE runs SET instance = $1 WHERE id = $2 AND state = 'queued' AND instance IS NULL",
        )
        .bind(instance)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(admitted == 1)
    }

    /// Threads with messages waiting whose lease `owner` could claim (free, expired or its
    /// own), oldest waiting message first: what an instance looks for to take work on. A
    /// thread listed here may still be claimed by another instance first; the claim decides.
    pub async fn claimable_threads(&self, owner: &str) -> Result<Vec<ThreadKey>, StoreError> {
        let now = self.backend.now_ms();
        let rows = sqlx::query_as::<_, ThreadRow>(&format!(
            "SELECT m.channel_id, m.thread_ts, MIN(m.ts) AS first FROM messages m \
             LEFT JOIN thread_leases l ON l.channel_id = m.channel_id AND l.thread_ts = m.thread_ts \
             WHERE m.state = 'pending' AND (l.owner IS NULL OR l.owner = $1 OR l.expires_at <= {now}) \
             GROUP BY m.channel_id, m.thread_ts ORDER BY first"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(ThreadKey::from).collect())
    }
}

/// Registers `instance`, or renews its heartbeat if it is registered (`now`: the database's
/// clock, as [`super::backend::Backend::now_ms`] writes it).
async fn upsert_instance(
    conn: &mut sqlx::AnyConnection,
    now: &str,
    instance: &Instance,
) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO instances (id, host, pid, started_at, heartbeat_at) \
         VALUES ($1, $2, $3, {now}, {now}) \
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
    ))
    .bind(&instance.id)
    .bind(&instance.host)
    .bind(i64::from(instance.pid))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The guard of [`super::Change::LeaseHeld`]: whether `owner` holds `thread`'s lease, unexpired.
pub(super) async fn held(
    conn: &mut sqlx::AnyConnection,
    now: &str,
    thread: &ThreadKey,
    owner: &str,
) -> Result<bool, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT 1 AS held FROM thread_leases WHERE channel_id = $1 AND thread_ts = $2 \
         AND owner = $3 AND expires_at > {now}"
    ))
    .bind_thread(thread)
    .bind(owner)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::IncomingMessage;
    use crate::store::Change;

    const MINUTE: Duration = Duration::from_secs(60);

    fn thread(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    fn instance(host: &str, pid: u32) -> Instance {
        Instance::new(host, pid, UNIX_EPOCH + Duration::from_secs(1_700_000_000))
    }

    fn msg(ts: &str, thread_ts: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: thread_ts.into(),
            user: "U1".into(),
            text: "hi".into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        }
    }

    #[test]
    fn an_instance_is_named_by_its_host_pid_and_start() {
        let a = instance("build-1", 4242);
        assert_eq!(a.id, "build-1:4242:1700000000000");
        assert_eq!((a.host.as_str(), a.pid), ("build-1", 4242));
        let this = Instance::this_process().unwrap();
        assert_eq!(this.pid, std::process::id());
        assert!(this.id.starts_with(&format!("{}:{}:", this.host, this.pid)));
    }

    /// Moves `instance`'s last heartbeat ten minutes back, as if it had stopped beating.
    async fn make_stale(s: &Store, instance: &Instance) {
        sqlx::query("UPDATE instances SET heartbeat_at = heartbeat_at - 600000 WHERE id = $1")
            .bind(&instance.id)
            .execute(&s.pool)
            .await
            .unwrap();
    }

    async fn instances_register_beat_and_leave(s: &Store) {
        let (a, b) = (instance("host-a", 1), instance("host-b", 2));
        s.register_instance(&a).await.unwrap();
        s.register_instance(&b).await.unwrap();
        s.register_instance(&a).await.unwrap();
        let live = s.live_instances(MINUTE).await.unwrap();
        let ids: Vec<_> = live.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains(&a.id.as_str()) && ids.contains(&b.id.as_str()));
        let rec = live.iter().find(|i| i.id == b.id).unwrap();
        assert_eq!((rec.host.as_str(), rec.pid), ("host-b", 2));
        assert!(rec.heartbeat_age < MINUTE, "{rec:?}");
        assert!(
            rec.started_at_ms > 1_700_000_000_000,
            "the database's clock"
        );
        // An instance whose heartbeat is older than the window is not live.
        make_stale(s, &b).await;
        s.heartbeat(&a, MINUTE).await.unwrap();
        let live = s.live_instances(MINUTE).await.unwrap();
        assert_eq!(live.len(), 1, "{live:?}");
        assert_eq!(live[0].id, a.id);
        s.deregister_instance(&a).await.unwrap();
        assert!(
            s.live_instances(MINUTE)
                .await
                .unwrap()
                .iter()
                .all(|i| i.id != a.id)
        );
    }

    async fn a_thread_is_held_by_one_instance_until_released_or_expired(s: &Store) {
        let (a, b) = ("host-a:1:1", "host-b:2:2");
        let t = thread("1.1");
        assert!(s.claim_thread(&t, a, MINUTE).await.unwrap());
        assert!(!s.claim_thread(&t, b, MINUTE).await.unwrap(), "held by a");
        assert!(s.claim_thread(&t, a, MINUTE).await.unwrap(), "a renews");
        assert!(
            !s.release_thread(&t, b).await.unwrap(),
            "not b's to release"
        );
        let leases = s.leases().await.unwrap();
        assert_eq!(leases.len(), 1);
        assert_eq!(
            (leases[0].thread.clone(), leases[0].owner.as_str()),
            (t.clone(), a)
        );
        assert!(leases[0].expires_in_ms > 50_000, "{leases:?}");
        assert!(s.release_thread(&t, a).await.unwrap());
        assert!(s.claim_thread(&t, b, MINUTE).await.unwrap(), "free again");

        // b stops renewing: once its lease expires, a takes the thread over.
        let u = thread("2.2");
        assert!(s.claim_thread(&u, b, Duration::ZERO).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(s.leases().await.unwrap()[1].expires_in_ms <= 0);
        assert!(s.claim_thread(&u, a, MINUTE).await.unwrap(), "expired");
        assert!(!s.claim_thread(&u, b, MINUTE).await.unwrap(), "taken over");
    }

    async fn a_heartbeat_renews_every_lease_of_its_instance(s: &Store) {
        let (a, b) = (instance("host-a", 1), instance("host-b", 2));
        let (t, u) = (thread("1.1"), thread("2.2"));
        s.register_instance(&a).await.unwrap();
        assert!(s.claim_thread(&t, &a.id, Duration::ZERO).await.unwrap());
        assert!(s.claim_thread(&u, &a.id, Duration::ZERO).await.unwrap());
        assert!(s.claim_thread(&thread("3.3"), &b.id, MINUTE).await.unwrap());
        assert_eq!(s.heartbeat(&a, MINUTE).await.unwrap(), 2);
        assert!(!s.claim_thread(&t, &b.id, MINUTE).await.unwrap(), "renewed");
        assert!(!s.claim_thread(&u, &b.id, MINUTE).await.unwrap(), "renewed");
        let mine: Vec<_> = s
            .leases()
            .await
            .unwrap()
            .into_iter()
            .filter(|l| l.owner == a.id)
            .collect();
        assert!(mine.iter().all(|l| l.expires_in_ms > 50_000), "{mine:?}");
        // A lease taken over while a was away is no longer renewed by its heartbeat.
        s.heartbeat(&a, Duration::ZERO).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(s.claim_thread(&t, &b.id, MINUTE).await.unwrap());
        assert_eq!(s.heartbeat(&a, MINUTE).await.unwrap(), 1);
    }

    async fn threads_with_work_are_listed_for_an_instance_that_may_claim_them(s: &Store) {
        let (a, b) = ("host-a:1:1", "host-b:2:2");
        for (ts, thread_ts) in [
            ("1.1", "1.1"),
            ("2.1", "2.1"),
            ("3.1", "3.1"),
            ("4.1", "4.1"),
        ] {
            s.record_message(&msg(ts, thread_ts)).await.unwrap();
        }
        s.mark_processed(&msg("4.1", "4.1")).await.unwrap();
        assert!(s.claim_thread(&thread("1.1"), a, MINUTE).await.unwrap());
        assert!(
            s.claim_thread(&thread("3.1"), b, Duration::ZERO)
                .await
                .unwrap()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        let keys = |v: Vec<ThreadKey>| v.into_iter().map(|k| k.thread_ts).collect::<Vec<_>>();
        assert_eq!(
            keys(s.claimable_threads(b).await.unwrap()),
            ["2.1", "3.1"],
            "1.1 is a's; 3.1 is b's own (expired or not); 4.1 has nothing waiting"
        );
        assert_eq!(
            keys(s.claimable_threads(a).await.unwrap()),
            ["1.1", "2.1", "3.1"],
            "b's lease on 3.1 expired"
        );
    }

    async fn a_commit_fenced_by_a_lease_taken_over_records_nothing(s: &Store) {
        let (a, b) = ("host-a:1:1", "host-b:2:2");
        let m = msg("1.1", "1.1");
        let t = m.thread();
        s.record_message(&m).await.unwrap();
        assert!(s.claim_thread(&t, a, Duration::ZERO).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
        let fenced = |owner| {
            [
                Change::LeaseHeld { thread: &t, owner },
                Change::Processed(&m),
            ]
        };
        assert!(
            !s.commit(&fenced(a), &[]).await.unwrap(),
            "a's lease expired"
        );
        assert!(s.claim_thread(&t, b, MINUTE).await.unwrap());
        assert!(!s.commit(&fenced(a), &[]).await.unwrap(), "b holds it");
        assert_eq!(s.next_pending(&t).await.unwrap(), Some(m.clone()));
        assert!(s.commit(&fenced(b), &[]).await.unwrap());
        assert_eq!(s.next_pending(&t).await.unwrap(), None);
    }

    async fn coder_slots_are_shared_by_every_live_instance(s: &Store) {
        let (a, b) = (instance("host-a", 1), instance("host-b", 2));
        s.register_instance(&a).await.unwrap();
        s.register_instance(&b).await.unwrap();
        for id in ["r1", "r2", "r3", "r4"] {
            crate::store::testing::create_run(s, id, &thread(&format!("{id}.1"))).await;
        }
        assert!(s.admit_run("r1", &a.id, 2, MINUTE).await.unwrap());
        assert!(!s.admit_run("r1", &b.id, 2, MINUTE).await.unwrap(), "once");
        assert!(s.admit_run("r2", &b.id, 2, MINUTE).await.unwrap());
        assert!(
            !s.admit_run("r3", &a.id, 2, MINUTE).await.unwrap(),
            "both slots taken, one on each instance"
        );
        s.finish_run(
            "r1",
            crate::domain::RunState::Finished,
            "completed",
            Some(0),
        )
        .await
        .unwrap();
        assert!(
            s.admit_run("r3", &a.id, 2, MINUTE).await.unwrap(),
            "r1 ended"
        );
        // b stops beating: its run no longer holds a slot.
        make_stale(s, &b).await;
        assert!(s.admit_run("r4", &a.id, 2, MINUTE).await.unwrap());
    }

    crate::store::testing::on_both_backends!(
        instances_register_beat_and_leave,
        coder_slots_are_shared_by_every_live_instance,
        a_thread_is_held_by_one_instance_until_released_or_expired,
        a_heartbeat_renews_every_lease_of_its_instance,
        threads_with_work_are_listed_for_an_instance_that_may_claim_them,
        a_commit_fenced_by_a_lease_taken_over_records_nothing,
    );

    /// Two instances, each with its own pool, race for the same threads many times at once:
    /// every thread ends up with exactly one of them.
    async fn two_instances_racing_for_a_thread_get_it_once(a: Store, b: Store) {
        let mut tasks = Vec::new();
        for round in 0..20 {
            let t = thread(&format!("{round}.1"));
            for (store, owner) in [(&a, "host-a:1:1"), (&b, "host-b:2:2")] {
                for _ in 0..3 {
                    let (store, t) = (store.clone(), t.clone());
                    tasks.push(tokio::spawn(async move {
                        let won = store.claim_thread(&t, owner, MINUTE).await.unwrap();
                        (t.thread_ts, owner, won)
                    }));
                }
            }
        }
        let mut winners = std::collections::HashMap::<String, Vec<&str>>::new();
        for task in tasks {
            let (ts, owner, won) = task.await.unwrap();
            if won {
                winners.entry(ts).or_default().push(owner);
            }
        }
        assert_eq!(winners.len(), 20, "every thread was claimed");
        for (ts, owners) in &winners {
            // The winner's own repeated claims renew it; the other instance never gets it.
            assert!(
                owners.iter().all(|o| *o == owners[0]),
                "thread {ts} went to {owners:?}"
            );
        }
        let leases = b.leases().await.unwrap();
        assert_eq!(leases.len(), 20);
        for lease in leases {
            assert_eq!(winners[&lease.thread.thread_ts][0], lease.owner);
        }
    }

    #[tokio::test]
    async fn sqlite_two_instances_racing_for_a_thread_get_it_once() {
        let (a, b) = crate::store::testing::sqlite_pair().await;
        two_instances_racing_for_a_thread_get_it_once(a.store.clone(), b).await;
    }

    #[tokio::test]
    async fn postgres_two_instances_racing_for_a_thread_get_it_once() {
        let (a, b) = crate::store::testing::postgres_pair().await;
        two_instances_racing_for_a_thread_get_it_once(a.store.clone(), b).await;
    }
}
