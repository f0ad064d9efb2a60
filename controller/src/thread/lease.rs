//! Which instance handles a thread when several share one PostgreSQL store: the store's
//! thread leases ([`crate::store::Store::claim_thread`]) behind the dispatcher's
//! [`Ownership`].
//!
//! An instance claims a thread before each of its messages (so a lease lost while it was
//! stalled is noticed before it answers), renews every lease it holds with its heartbeat,
//! and gives a thread up once the thread's task is idle, nothing of it waits in the outbox and
//! no run of it is active here (a run executes on the host that owns its thread). A thread it
//! claims afresh is adopted ([`crate::dispatch::MessageHandler::adopt`]): what an instance
//! that stopped left of it is finished first. Commits are fenced by the lease
//! ([`crate::slack::outbox::Outbox::fenced_by`]), so an owner that lost its lease records and
//! says nothing more about the thread.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::dispatch::{Claim, Ownership};
use crate::domain::ThreadKey;
use crate::runners::supervisor::Supervisor;
pub use crate::store::LEASE_TTL;
use crate::store::{Instance, Store, StoreError};

/// How often an instance renews its leases.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// How often an instance looks for threads waiting without an owner.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);

/// The threads this instance owns in one repository's store.
#[derive(Debug)]
pub struct Leases {
    pub store: Store,
    pub instance: Instance,
    pub supervisor: Supervisor,
    pub ttl: Duration,
    /// The threads claimed and not released, to tell a fresh claim from a renewal.
    held: Mutex<HashSet<ThreadKey>>,
}

impl Leases {
    /// Leases of `instance` in `store`, lasting `ttl`.
    pub fn new(store: Store, instance: Instance, supervisor: Supervisor, ttl: Duration) -> Self {
        Self {
            store,
            instance,
            supervisor,
            ttl,
            held: Mutex::new(HashSet::new()),
        }
    }

    fn forget(&self, thread: &ThreadKey) {
        if let Ok(mut held) = self.held.lock()
            && held.remove(thread)
        {
            crate::metrics::metrics().leases_held.dec();
        }
    }

    /// Whether the thread still needs this instance: a run of it active here, or posts of
    /// it waiting in the outbox.
    async fn still_needed(&self, thread: &ThreadKey) -> bool {
        if self.supervisor.is_active(&thread.thread_ts) {
            return true;
        }
        match self.store.unsent(thread).await {
            Ok(unsent) => !unsent.is_empty(),
            Err(e) => {
                tracing::warn!(thread = %thread, "read the thread's outbox: {e}; keeping its lease");
                true
            }
        }
    }
}

#[async_trait]
impl Ownership for Leases {
    async fn claim(&self, thread: &ThreadKey) -> Result<Claim, StoreError> {
        let claimed = self
            .store
            .claim_thread(thread, &self.instance.id, self.ttl)
            .await?;
        if !claimed {
            self.forget(thread);
            return Ok(Claim::Elsewhere);
        }
        let fresh = self
            .held
            .lock()
            .map(|mut held| held.insert(thread.clone()))
            .unwrap_or(true);
        if fresh {
            crate::metrics::metrics().leases_held.inc();
        }
        Ok(if fresh { Claim::Fresh } else { Claim::Mine })
    }

    async fn release(&self, thread: &ThreadKey) {
        if self.still_needed(thread).await {
            return;
        }
        match self.store.release_thread(thread, &self.instance.id).await {
            Ok(_) => self.forget(thread),
            Err(e) => tracing::warn!(thread = %thread, "release the thread's lease: {e}"),
        }
    }

    /// Threads with messages waiting whose lease this instance could take, and threads whose
    /// owner stopped renewing them (what it left — a post not delivered, a run cut off — is
    /// finished by whoever takes them).
    async fn waiting(&self, store: &Store) -> Result<Vec<ThreadKey>, StoreError> {
        let mut threads = store.claimable_threads(&self.instance.id).await?;
        for lease in store.leases().await? {
            let abandoned = lease.expires_in_ms <= 0 && lease.owner != self.instance.id;
            // The PR watcher's lease names no channel: it is no thread.
            if abandoned && !lease.thread.channel.is_empty() && !threads.contains(&lease.thread) {
                threads.push(lease.thread);
            }
        }
        Ok(threads)
    }
}

/// Until `stop`: renews `instance` and its leases in `store` every [`HEARTBEAT_EVERY`].
pub async fn heartbeat(store: Store, instance: Instance, ttl: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(HEARTBEAT_EVERY) => {}
        }
        if let Err(e) = store.heartbeat(&instance, ttl).await {
            tracing::warn!("renew this instance's leases: {e}");
        }
    }
}
