//! The Coder slots a run waits for before its runner gets its task: this instance's
//! `access.maxConcurrentThreads` permits, or on a shared store the slots every live instance
//! shares, asked of the store again until one is free.

use std::time::Duration;

use super::Inner;

/// How often a run queued on a shared store asks for a slot again.
const ADMISSION_POLL: Duration = Duration::from_secs(1);

/// A run's hold on a Coder slot, for as long as it runs: a local permit, or (shared store)
/// the run's admitted row, which stops counting when the run ends.
#[derive(Debug)]
pub(super) enum Admission {
    Local {
        _permit: tokio::sync::OwnedSemaphorePermit,
    },
    Shared,
}

impl Inner {
    /// Waits for one of the Coder slots: this instance's, or on a shared store one of those
    /// every live instance shares (asked again every [`ADMISSION_POLL`]). `None` when the
    /// slots are gone (shutting down).
    pub(super) async fn admit(&self, run_id: &str) -> Option<Admission> {
        let Some(instance) = &self.shared_as else {
            return self
                .slots
                .clone()
                .acquire_owned()
                .await
                .ok()
                .map(|permit| Admission::Local { _permit: permit });
        };
        let max = i64::try_from(self.limits.max_concurrent.max(1)).unwrap_or(i64::MAX);
        loop {
            match self
                .store
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
