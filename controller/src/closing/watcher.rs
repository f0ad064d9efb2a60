//! The PR watcher: every `github.prWatchIntervalSecs` it asks GitHub about the open pull
//! request of each `pr_opened` thread (`gh pr view <n> --json state,mergedAt,closedAt,…`). A
//! pull request merged or closed on GitHub becomes a message stored in its thread
//! ([`PrEvent`]), and the thread's task is woken: the thread's own handler then closes it,
//! in order with everything else said in the thread, exactly as a typed "merge" would —
//! the watcher itself changes nothing, so it never races the thread. While the pull request
//! is open, the same answer (with its reviews, comments, checks and head commit) and its line
//! comments feed the review loop ([`super::review_watch`], [`super::replies`]).
//!
//! `gh` failing (GitHub down, a token expired) doubles the wait before the next poll, up
//! to [`MAX_BACKOFF`], and a poll that works goes back to the interval. Each thread's event
//! is stored once per daemon run; threads whose Coder is running are left for a later poll.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::closing::feedback::FEEDBACK_FIELDS;
use crate::dispatch::Dispatcher;
use crate::domain::{IncomingMessage, PullRequestRef, Stage, ThreadKey};
use crate::domain::{PrEvent, WATCHER_USER};
use crate::runners::supervisor::Supervisor;
use crate::store::Store;
use crate::workspace::pull_request::{self, PrState};
use crate::workspace::write_access::WriteAccess;

/// Longest wait between polls after failures.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// Most threads one poll looks at.
const MAX_THREADS: usize = 500;

/// The review loop's settings (`github.ignoreBots`, `.maxReviewRounds`, `.reviewQuietSecs`,
/// `.maxSortsPerHour`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReviewSettings {
    /// Logins whose comments never count.
    pub ignore_bots: Vec<String>,
    /// Most rounds that propose something per pull request.
    pub max_rounds: u32,
    /// How long no new comment must arrive before a batch is proposed.
    pub quiet: Duration,
    /// Most rounds the PM sorts per pull request in any hour.
    pub max_sorts_per_hour: u32,
}

/// Polls the open pull requests of the repository's threads.
pub struct PrWatcher {
    pub store: Store,
    pub dispatcher: Dispatcher,
    pub supervisor: Supervisor,
    /// The `gh` executable.
    pub gh: PathBuf,
    /// The main repository, where `gh` runs.
    pub repo: PathBuf,
    pub interval: Duration,
    /// With several instances on one store: this instance's id. Only the instance holding
    /// the watcher's lease ([`WATCHER_LEASE`]) polls, so a merge is seen once.
    pub shared_as: Option<String>,
    /// The review loop's settings.
    pub reviews: ReviewSettings,
    /// Whose comments may steer the Coder (`github.reviewFrom`), shared with the PM.
    pub access: WriteAccess,
    /// Whether the reviewer model is on (`reviewer.model`): each head seen is reviewed once.
    pub reviewer_on: bool,
}

/// The lease that makes one instance of a shared store the PR watcher: a thread key no
/// Slack thread has.
pub const WATCHER_LEASE: &str = "pr-watcher";

impl std::fmt::Debug for PrWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrWatcher")
            .field("gh", &self.gh)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// The wait before the next poll after `failures` polls in a row in which `gh` failed.
pub fn next_wait(interval: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.min(16));
    interval
        .saturating_mul(factor)
        .min(MAX_BACKOFF.max(interval))
}

impl PrWatcher {
    /// Whether this instance polls now: always when it is the store's only instance,
    /// otherwise while it holds the watcher's lease (renewed with its other leases).
    async fn polls_here(&self) -> bool {
        let Some(instance) = &self.shared_as else {
            return true;
        };
        let key = ThreadKey {
            channel: String::new(),
            thread_ts: WATCHER_LEASE.to_owned(),
        };
        match self
            .store
            .claim_thread(&key, instance, crate::store::LEASE_TTL)
            .await
        {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!("pr watcher: claim the watcher's lease: {e}");
                false
            }
        }
    }

    /// Polls until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut failures = 0;
        let mut stored: HashSet<ThreadKey> = HashSet::new();
        let mut own_login = None;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(next_wait(self.interval, failures)) => {}
            }
            if !self.polls_here().await {
                continue;
            }
            if self.poll(&mut stored, &mut own_login, &cancel).await {
                failures = 0;
            } else {
                failures = failures.saturating_add(1);
                tracing::warn!(
                    "pr watcher: gh failed; next poll in {} s",
                    next_wait(self.interval, failures).as_secs()
                );
            }
        }
    }

    /// One poll; false when `gh` failed for a pull request (the others are still looked at).
    async fn poll(
        &self,
        stored: &mut HashSet<ThreadKey>,
        own_login: &mut Option<String>,
        cancel: &CancellationToken,
    ) -> bool {
        let threads = match self
            .store
            .list_threads(|stage| stage == Stage::PrOpened, MAX_THREADS)
            .await
        {
            Ok(threads) => threads,
            Err(e) => {
                tracing::error!("pr watcher: list the threads: {e}");
                return true;
            }
        };
        let mut ok = true;
        for thread in threads {
            if cancel.is_cancelled() {
                break;
            }
            let Some(pr) = thread.pull_request else {
                continue;
            };
            if stored.contains(&thread.key) || self.supervisor.is_active(&thread.key.thread_ts) {
                continue;
            }
            let output =
                pull_request::view_output(&self.gh, &self.repo, pr.number, FEEDBACK_FIELDS)
                    .await
                    .and_then(|output| {
                        pull_request::parse_status(pr.number, &output)
                            .map(|status| (output, status))
                    });
            let (output, status) = match output {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(thread = %thread.key, "pr watcher: PR #{}: {e}", pr.number);
                    ok = false;
                    continue;
                }
            };
            let event = match status.state {
                PrState::Open => {
                    ok &= self
                        .watch_reviews(&thread.key, &pr, &output, own_login)
                        .await;
                    continue;
                }
                PrState::Merged => PrEvent::Merged,
                PrState::Closed => PrEvent::Closed,
            };
            if self.store_event(&thread.key, &pr, event).await {
                stored.insert(thread.key);
            }
        }
        ok
    }

    /// Stores `event` as a message of `thread` and wakes it; whether it was stored.
    async fn store_event(&self, thread: &ThreadKey, pr: &PullRequestRef, event: PrEvent) -> bool {
        let msg = IncomingMessage {
            channel: thread.channel.clone(),
            ts: message_ts(),
            thread_ts: thread.thread_ts.clone(),
            user: WATCHER_USER.into(),
            text: event.to_text(pr.number),
            event_id: None,
            origin: crate::domain::Origin::Watcher,
        };
        match self.store.record_message(&msg).await {
            Ok(true) => {
                tracing::info!(
                    tag = "MSG",
                    "pr watcher: PR #{} of thread {thread} {event:?} on GitHub",
                    pr.number
                );
                self.dispatcher.notify(thread);
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::error!(thread = %thread, "pr watcher: store the event: {e}");
                false
            }
        }
    }
}

/// A message ts for now, in Slack's `seconds.micros` form, so it sorts after what the thread
/// said before.
pub(super) fn message_ts() -> String {
    let now = chrono::Utc::now();
    format!("{}.{:06}", now.timestamp(), now.timestamp_subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_double_the_wait_up_to_the_cap() {
        let minute = Duration::from_secs(60);
        assert_eq!(next_wait(minute, 0), minute);
        assert_eq!(next_wait(minute, 1), 2 * minute);
        assert_eq!(next_wait(minute, 3), 8 * minute);
        assert_eq!(next_wait(minute, 7), MAX_BACKOFF);
        assert_eq!(next_wait(minute, u32::MAX), MAX_BACKOFF);
        // An interval longer than the cap is kept.
        let day = Duration::from_secs(86_400);
        assert_eq!(next_wait(day, 3), day);
    }

    #[test]
    fn message_ts_look_like_slacks() {
        let ts = message_ts();
        let (secs, micros) = ts.split_once('.').unwrap();
        assert_eq!(micros.len(), 6);
        assert!(secs.parse::<u64>().unwrap() > 1_700_000_000);
    }
}
