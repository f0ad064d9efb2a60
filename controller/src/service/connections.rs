//! Another process on our Slack app, across hosts. Slack spreads an app's events over all
//! its open Socket Mode connections, so a second consumer that does not share our store
//! silently takes part of the stream. Each `hello` says how many connections the app has
//! open (`num_connections`); more than this process opened plus what its peers legitimately
//! hold ([`PeerConnections`]: other instances sharing one PostgreSQL store) means someone
//! else is connected.
//!
//! One count is not proof: a reconnect overlaps the old socket for a moment, and a killed
//! process's socket lingers until Slack notices. So an excess starts a grace period; at its
//! end a short-lived probe connection ([`Probe`]) reads a fresh count (its own connection
//! counted). Still too many: [`SharedApp`], and the service stops, loudly, rather than
//! split the stream. Anything at or under the expected count clears the suspicion.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::slack::socket::ProbeError;

pub use crate::config::DEFAULT_CONNECTION_GRACE as DEFAULT_GRACE;

/// How many Socket Mode connections other live instances of this service hold on the
/// same app: the seam where instances registered in a shared store are counted.
#[async_trait]
pub trait PeerConnections: Send + Sync {
    /// The connections other instances hold right now.
    async fn count(&self) -> u32;
}

/// Several instances on one PostgreSQL store: each other live instance holds one connection
/// of the app.
#[derive(Clone, Debug)]
pub struct LiveInstances {
    pub store: crate::store::Store,
    /// This instance's id, not counted.
    pub me: String,
}

#[async_trait]
impl PeerConnections for LiveInstances {
    async fn count(&self) -> u32 {
        match self.store.live_instances(crate::store::LEASE_TTL).await {
            Ok(live) => {
                let others = live.iter().filter(|i| i.id != self.me).count();
                u32::try_from(others).unwrap_or(u32::MAX)
            }
            Err(e) => {
                // A store that cannot be read is no proof of an intruder.
                tracing::warn!(
                    "count the live instances: {e}; not judging Slack's connection count"
                );
                u32::MAX / 2
            }
        }
    }
}

/// One instance (SQLite, or one host): no peers.
#[derive(Clone, Copy, Debug)]
pub struct NoPeers;

#[async_trait]
impl PeerConnections for NoPeers {
    async fn count(&self) -> u32 {
        0
    }
}

/// Reads the app's connection count afresh, through a connection of its own.
#[async_trait]
pub trait Probe: Send + Sync {
    /// `num_connections` as a new connection's hello reports it (itself included).
    async fn connections(&self) -> Result<u32, ProbeError>;
}

/// Another process shares the Slack app.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "another process is connected to this Slack app: Slack reports {seen} Socket Mode connections \
     where this service expects {expected}, for longer than {grace_secs} s. Slack would split the \
     app's events between them and each would lose the other's, so this service stops. Run one \
     codebutler per Slack app (it serves every repository listed under `repositories`), or give \
     the other deployment its own Slack app"
)]
pub struct SharedApp {
    pub seen: u32,
    pub expected: u32,
    pub grace_secs: u64,
}

/// Watches the hellos of this process's connection (`hellos`) until `stop`; returns
/// [`SharedApp`] when more connections than expected outlast `grace`.
pub async fn watch(
    mut hellos: mpsc::UnboundedReceiver<u32>,
    peers: Arc<dyn PeerConnections>,
    probe: Arc<dyn Probe>,
    grace: Duration,
    stop: CancellationToken,
) -> Option<SharedApp> {
    // The deadline of the grace period an excess started, if one is running.
    let mut suspect: Option<Instant> = None;
    loop {
        let deadline = suspect;
        tokio::select! {
            () = stop.cancelled() => return None,
            hello = hellos.recv() => {
                let seen = hello?;
                let expected = 1 + peers.count().await;
                if seen <= expected {
                    suspect = None;
                } else if suspect.is_none() {
                    tracing::warn!(
                        "slack reports {seen} connections of this app where {expected} are expected: \
                         another process may be connected; checking again in {} s",
                        grace.as_secs()
                    );
                    suspect = Some(Instant::now() + grace);
                }
            }
            () = sleep_until(deadline) => {
                match probe.connections().await {
                    Ok(seen) => {
                        // The probe's own connection is one more.
                        let expected = 2 + peers.count().await;
                        if seen > expected {
                            return Some(SharedApp {
                                seen: seen - 1,
                                expected: expected - 1,
                                grace_secs: grace.as_secs(),
                            });
                        }
                        tracing::info!("slack connections back to what is expected");
                        suspect = None;
                    }
                    Err(e) => {
                        tracing::warn!("count the slack app's connections: {e}; trying again");
                        suspect = Some(Instant::now() + grace);
                    }
                }
            }
        }
    }
}

/// Sleeps until `deadline`, forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A probe that answers from a script and counts its calls.
    struct Scripted(Mutex<Vec<Result<u32, ProbeError>>>);

    #[async_trait]
    impl Probe for Scripted {
        async fn connections(&self) -> Result<u32, ProbeError> {
            self.0.lock().unwrap().remove(0)
        }
    }

    struct Peers(u32);

    #[async_trait]
    impl PeerConnections for Peers {
        async fn count(&self) -> u32 {
            self.0
        }
    }

    const GRACE: Duration = Duration::from_secs(60);

    fn start(
        peers: u32,
        probe: Vec<Result<u32, ProbeError>>,
    ) -> (
        mpsc::UnboundedSender<u32>,
        CancellationToken,
        tokio::task::JoinHandle<Option<SharedApp>>,
        Arc<Scripted>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let probe = Arc::new(Scripted(Mutex::new(probe)));
        let task = tokio::spawn(watch(
            rx,
            Arc::new(Peers(peers)),
            probe.clone(),
            GRACE,
            stop.clone(),
        ));
        (tx, stop, task, probe)
    }

    #[tokio::test(start_paused = true)]
    async fn an_excess_that_outlasts_the_grace_period_stops_the_service() {
        let (tx, _stop, task, _) = start(0, vec![Ok(3)]);
        tx.send(2).unwrap();
        assert_eq!(
            task.await.unwrap(),
            Some(SharedApp {
                seen: 2,
                expected: 1,
                grace_secs: 60
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_passing_overlap_is_forgiven_and_a_later_one_watched_again() {
        // The probe finds the old socket gone; a later excess starts a new grace period.
        let (tx, stop, task, probe) = start(0, vec![Ok(2), Ok(2)]);
        tx.send(2).unwrap();
        tokio::time::sleep(GRACE + Duration::from_secs(1)).await;
        assert_eq!(probe.0.lock().unwrap().len(), 1, "probed once");
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        tokio::time::sleep(GRACE + Duration::from_secs(1)).await;
        assert!(probe.0.lock().unwrap().is_empty(), "probed again");
        stop.cancel();
        assert_eq!(task.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_count_back_to_normal_within_the_grace_period_needs_no_probe() {
        let (tx, stop, task, probe) = start(0, vec![]);
        tx.send(2).unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        tx.send(1).unwrap();
        tokio::time::sleep(GRACE * 2).await;
        stop.cancel();
        assert_eq!(task.await.unwrap(), None);
        assert!(probe.0.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn peers_connections_are_expected_and_a_failed_probe_is_retried() {
        // Two other instances share the store: three connections are expected, four with
        // the probe's.
        let (tx, stop, task, probe) = start(2, vec![Err(ProbeError::NoHello(5)), Ok(4)]);
        tx.send(3).unwrap();
        tokio::time::sleep(GRACE * 3).await;
        assert_eq!(
            probe.0.lock().unwrap().len(),
            2,
            "three are expected: no probe"
        );
        tx.send(4).unwrap();
        tokio::time::sleep(GRACE * 2 + Duration::from_secs(2)).await;
        assert!(
            probe.0.lock().unwrap().is_empty(),
            "retried after the failure"
        );
        assert!(!task.is_finished());
        stop.cancel();
        assert_eq!(task.await.unwrap(), None);
    }
}
