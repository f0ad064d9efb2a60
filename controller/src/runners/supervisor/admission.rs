//! The Coder slots a run waits for before its runner gets its task: this instance's
//! `access.maxConcurrentThreads` permits, or on a shared store the slots every live instance
//! shares, asked of the store again until one is free. There is always at least one.
//!
//! The runs waiting for a slot are kept in line, in the order they came, so a thread can
//! show its run's place ([`Slots::place`]). The line is this instance's: on a shared store,
//! runs other hosts queued are not in it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
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
    /// The runs waiting for a slot, first in line first.
    line: Arc<Mutex<VecDeque<String>>>,
}

/// A run's place in the line, given up when it is admitted or stops waiting.
struct InLine {
    line: Arc<Mutex<VecDeque<String>>>,
    run_id: String,
}

impl InLine {
    fn join(line: &Arc<Mutex<VecDeque<String>>>, run_id: &str) -> Self {
        lock(line).push_back(run_id.to_owned());
        Self {
            line: line.clone(),
            run_id: run_id.to_owned(),
        }
    }
}

impl Drop for InLine {
    fn drop(&mut self) {
        lock(&self.line).retain(|id| *id != self.run_id);
    }
}

fn lock(line: &Mutex<VecDeque<String>>) -> std::sync::MutexGuard<'_, VecDeque<String>> {
    // A panic while holding the line leaves a list of ids: still usable.
    line.lock().unwrap_or_else(|e| e.into_inner())
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
            line: Arc::default(),
        }
    }

    /// The place of run `run_id` in the line for a slot (1: next), if it waits for one.
    pub fn place(&self, run_id: &str) -> Option<usize> {
        lock(&self.line)
            .iter()
            .position(|id| id == run_id)
            .map(|i| i + 1)
    }

    /// Waits for a slot for the run `run_id`: a local permit, or on a shared store its
    /// admission by `store` (asked again every [`ADMISSION_POLL`]). `None` when the slots
    /// are gone (shutting down).
    pub async fn admit(&self, store: &Store, run_id: &str) -> Option<Admission> {
        let _queued = crate::metrics::Held::new(&crate::metrics::metrics().queue_depth);
        let Some(instance) = &self.shared_as else {
            if let Ok(permit) = self.local.clone().try_acquire_owned() {
                return Some(Admission::Local { _permit: permit });
            }
            let _in_line = InLine::join(&self.line, run_id);
            return self
                .local
                .clone()
                .acquire_owned()
                .await
                .ok()
                .map(|permit| Admission::Local { _permit: permit });
        };
        let max = i64::try_from(self.max).unwrap_or(i64::MAX);
        let mut in_line = None;
        loop {
            match store
                .admit_run(run_id, instance, max, crate::store::LEASE_TTL)
                .await
            {
                Ok(true) => return Some(Admission::Shared),
                Ok(false) => {
                    in_line.get_or_insert_with(|| InLine::join(&self.line, run_id));
                }
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
            assert_eq!(slots.place("r2"), None, "not waiting yet");
            let mut second = pin!(slots.admit(&store.store, "r2"));
            assert!(
                futures::poll!(second.as_mut()).is_pending(),
                "one slot, taken"
            );
            assert_eq!(slots.place("r2"), Some(1));
            drop(first);
            assert!(matches!(second.await, Some(Admission::Local { .. })));
        }
        let slots = Slots::new(2, None);
        let first = slots.admit(&store.store, "r1").await;
        let second = slots.admit(&store.store, "r2").await;
        assert!(first.is_some() && second.is_some(), "two slots, two runs");
        let mut third = pin!(slots.admit(&store.store, "r3"));
        assert!(futures::poll!(third.as_mut()).is_pending());
        let mut fourth = pin!(slots.admit(&store.store, "r4"));
        assert!(futures::poll!(fourth.as_mut()).is_pending());
        assert_eq!((slots.place("r3"), slots.place("r4")), (Some(1), Some(2)));
        drop(second);
        assert!(third.await.is_some());
        assert_eq!(slots.place("r3"), None, "admitted: out of the line");
        assert_eq!(slots.place("r4"), Some(1), "moved up");
    }
}
