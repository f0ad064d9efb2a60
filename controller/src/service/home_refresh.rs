//! The Home tab kept current: when a thread of a repository changes (opened, a plan
//! proposed, approved, a run finished, closed — every change stamps the thread's
//! `updated_at`), the Home of the person who started it is published again, if they opened
//! their Home before (`home_viewers`; people who never opened it get none).
//!
//! A debounced, best-effort publish rather than an outbox effect: a Home view replaces the
//! last one whole, so a publish lost in a crash is healed by the next change or the next
//! opening, and nothing is duplicated by publishing twice; and reading the changes from the
//! store every [`REFRESH_EVERY`] catches each kind of change without a hook in every place
//! that makes one, while a burst of changes (a message, its answer, a plan) makes one
//! publish per person.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::home::AppHome;

/// How often the repositories' thread changes are read.
pub const REFRESH_EVERY: Duration = Duration::from_secs(2);

impl AppHome {
    /// Publishes again, every `every` until `stop`, the Home of each person who opened it and
    /// one of whose threads changed since the last look.
    pub async fn keep_fresh(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        let start = crate::store::now();
        let mut since = vec![start; self.repos.len()];
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let mut people = BTreeSet::new();
            for (repo, since) in self.repos.iter().zip(since.iter_mut()) {
                match repo.store.threads_changed_since(&repo.channel, since).await {
                    Ok(changed) => {
                        for (started_by, at) in changed {
                            if at > *since {
                                *since = at;
                            }
                            people.extend(started_by);
                        }
                    }
                    Err(e) => {
                        tracing::warn!("app home: read the changes of <#{}>: {e}", repo.channel)
                    }
                }
            }
            for user in people {
                if self.opened_by(&user).await
                    && let Err(e) = self.publish(&user, Utc::now()).await
                {
                    tracing::warn!("publish the app home of {user}: {e}");
                }
            }
        }
    }
}
