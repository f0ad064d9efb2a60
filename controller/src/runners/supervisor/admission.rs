//! The Coder slots a run waits for before its runner gets its task: this instance's
//! `access.maxConcurrentThreads` permits, or on a shared store the slots every live instance
//! shares, asked of the store again until one is free. There is always at least one.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::Store;

/// How often a run queued on a shared store asks for a slot again.
const ADMISSION_POLL: Duration = Duration::from_secs(1);

/// A run's hold on a Coder slot, for as long as it runs: a local permit, or (shared store)
/// the run's admitted row, which stops counting when the run ends.
#[derive(Debug)]
pub(super) enum Admission {
    Local { _permit: OwnedSemaphorePermit },
    Shared,
}

/// The Coder slots runs are admitted to.
pub(super) struct Slots {
    max: usize,
    local: Arc<Semaphore>,
    /// With several instances on one store: this instance's id, and the slots are the
    /// store's.
    shared_as: Option<String>,
}

impl Slots {
    /// `max_concurrent` slots (at least one): this instance's, or with `shared_as` those
    /// every live instance of the store shares.
    pub fn new(max_concurrent: usize, shared_as: Option<String>) -> Self {
        let max = max_concurrent.max(1);
        Self {
            max,
            local: Arc::new(Semaphore::new(max)),
            shared_as,
        }
    }

    /// Waits for a slot for the run `run_id`: a local permit, or on a shared store its
    /// admission by `store` (asked again every [`ADMISSION_POLL`]). `None` when the slots
    /// are gone (shutting down).
    pub async fn admit(&self, store: &Store, run_id: &str) -> Option<Admission> {
        let _queued = crate::metrics::Held::new(&crate::metrics::metrics().queue_depth);
        let Some(instance) = &self.shared_as else {
            return self
                .local
                .clone()
                .acquire_owned()
                .await
                .ok()
                .map(|permit| Admission::Local { _permit: permit });
        };
        let max = i64::try_from(self.max).unwrap_or(i64::MAX);
        loop {
            match store
                .admit_run(run_id, instance, max, crate::store::LEASE_TTL)
                .await
            {
                Ok(true) => return Some(Admission::Shared),
                Ok(false) => {}
                Err(e) => tracing::warn!(run = %run_id, "ask for a Coder slot: {e}"),
            }
            tokio::time::sleep(ADMISSION_POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    /// Runs beyond the slots wait in line: each is admitted when a run before it lets its
    /// slot go, and a limit of none still runs one at a time.
    #[tokio::test]
    async fn runs_beyond_the_slots_wait_until_one_is_let_go() {
        let store = crate::store::testing::sqlite().await;
        for max_concurrent in [0, 1] {
            let slots = Slots::new(max_concurrent, None);
            let first = slots.admit(&store.store, "r1").await;
            assert!(matches!(first, Some(Admission::Local { .. })));
            let mut second = pin!(slots.admit(&store.store, "r2"));
            assert!(
                futures::poll!(second.as_mut()).is_pending(),
                "one slot, taken"
            );
            drop(first);
            assert!(matches!(second.await, Some(Admission::Local { .. })));
        }
        let slots = Slots::new(2, None);
        let first = slots.admit(&store.store, "r1").await;
        let second = slots.admit(&store.store, "r2").await;
        assert!(first.is_some() && second.is_some(), "two slots, two runs");
        let mut third = pin!(slots.admit(&store.store, "r3"));
        assert!(futures::poll!(third.as_mut()).is_pending());
        drop(second);
        assert!(third.await.is_some());
    }
}
