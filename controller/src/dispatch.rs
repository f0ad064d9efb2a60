//! Thread dispatch: one tokio task per active Slack thread. It runs whatever handles a
//! message ([`MessageHandler`], the thread's handler in [`crate::thread`]) and sits below it,
//! since the PR watcher and coordination, which store messages for threads, wake them
//! through it too.
//!
//! The store is the queue: a message is stored before anything else happens, and a thread's
//! task always takes the oldest pending message of its thread from the store. The bounded
//! channel to the task only wakes it, so a full channel never loses a message. A task ends
//! after a minute without messages and is started again by the next one. A panic while
//! handling a message is caught, logged and reported in that thread; it never reaches the
//! daemon or another thread.
//!
//! Where several instances share one store, a thread's messages are processed only by the
//! instance that owns the thread ([`Ownership`]): a task claims its thread before each message
//! and ends when another instance holds it; a message stored by an instance that does not own
//! its thread is found by the owner's [`Dispatcher::watch_pending`]. With one instance,
//! [`SoleInstance`] owns every thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::{IncomingMessage, ThreadKey};
use crate::slack::effects::Effects;
use crate::slack::outbox::{Outbox, OutboxError};
use crate::store::{Change, Store, StoreError};

/// How long an idle thread task lives.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Wake-ups a thread task can have queued.
const QUEUE_CAPACITY: usize = 100;

/// Handles one message of a thread. Implementations mark the message processed or failed in
/// the store before returning, unless `cancel` fired (then it stays pending for the next
/// start).
#[async_trait]
pub trait MessageHandler: Send + Sync + 'static {
    async fn handle(&self, msg: IncomingMessage, cancel: CancellationToken);

    /// Called when `handle` panicked: report it in the thread and mark the message failed.
    async fn on_panic(&self, msg: IncomingMessage, panic: String);

    /// Called when this instance takes a thread it did not hold, before handling its next
    /// message: finish what another instance may have left of it (Slack posts recorded but
    /// not delivered, a run start cut off).
    async fn adopt(&self, _thread: &ThreadKey) {}
}

/// What claiming a thread found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This instance held the thread already.
    Mine,
    /// This instance took the thread: it was free, or another instance stopped renewing it.
    Fresh,
    /// Another live instance holds the thread: it processes the thread's messages.
    Elsewhere,
}

/// Which instance processes a thread's messages.
#[async_trait]
pub trait Ownership: Send + Sync + 'static {
    /// Takes or keeps the thread for this instance.
    async fn claim(&self, thread: &ThreadKey) -> Result<Claim, StoreError>;

    /// Gives the thread up: its task ended idle. An implementation keeps a thread whose
    /// run is still active on this instance.
    async fn release(&self, thread: &ThreadKey);

    /// The threads [`Dispatcher::watch_pending`] wakes: those with messages waiting (an
    /// implementation adds what it could take over).
    async fn waiting(&self, store: &Store) -> Result<Vec<ThreadKey>, StoreError> {
        store.threads_with_pending().await
    }
}

/// Why [`commit_holding`] recorded nothing.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("take the thread for the moment: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error("another instance holds the thread {0} just now")]
    Elsewhere(ThreadKey),
}

/// Records `changes` with `effects` in `thread` through `outbox`, holding the thread for
/// the moment (given back after, if this took it). This is how what arrives from outside
/// the thread's own messages (a slash command, a direct message's repository choice) is
/// recorded when instances share a store, whose outbox records only for the thread's
/// holder. Returns whether it was recorded (what was recorded already records nothing).
pub async fn commit_holding(
    ownership: &dyn Ownership,
    outbox: &Outbox,
    thread: &ThreadKey,
    changes: &[Change<'_>],
    effects: &Effects,
) -> Result<bool, HoldError> {
    let claim = ownership.claim(thread).await?;
    if claim == Claim::Elsewhere {
        return Err(HoldError::Elsewhere(thread.clone()));
    }
    let recorded = outbox.commit(changes, effects).await;
    if claim == Claim::Fresh {
        ownership.release(thread).await;
    }
    Ok(recorded?)
}

/// The only instance on its store: it owns every thread.
#[derive(Clone, Copy, Debug)]
pub struct SoleInstance;

#[async_trait]
impl Ownership for SoleInstance {
    async fn claim(&self, _thread: &ThreadKey) -> Result<Claim, StoreError> {
        Ok(Claim::Mine)
    }

    async fn release(&self, _thread: &ThreadKey) {}
}

/// Routes messages to thread tasks; cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("active_threads", &self.active_threads())
            .finish()
    }
}

struct Inner {
    workers: Mutex<HashMap<ThreadKey, mpsc::Sender<()>>>,
    handler: Arc<dyn MessageHandler>,
    ownership: Arc<dyn Ownership>,
    store: Store,
    idle: Duration,
    tracker: TaskTracker,
    /// Fired at shutdown: tasks take no further messages.
    stopping: CancellationToken,
    /// Fired when the shutdown grace ends: work in flight is cancelled.
    abort: CancellationToken,
}

impl Dispatcher {
    /// A dispatcher whose thread tasks handle messages with `handler`, on the only instance
    /// of its store.
    pub fn new(store: Store, handler: Arc<dyn MessageHandler>, idle: Duration) -> Self {
        Self::shared(store, handler, Arc::new(SoleInstance), idle)
    }

    /// A dispatcher on one of several instances sharing `store`: a thread's messages are
    /// handled here only while `ownership` says this instance owns it.
    pub fn shared(
        store: Store,
        handler: Arc<dyn MessageHandler>,
        ownership: Arc<dyn Ownership>,
        idle: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                workers: Mutex::new(HashMap::new()),
                handler,
                ownership,
                store,
                idle,
                tracker: TaskTracker::new(),
                stopping: CancellationToken::new(),
                abort: CancellationToken::new(),
            }),
        }
    }

    /// Which instance processes a thread's messages, for what speaks in a thread outside the
    /// thread's task (the question which repository a conversation is about).
    pub fn ownership(&self) -> Arc<dyn Ownership> {
        self.inner.ownership.clone()
    }

    /// Wakes the thread's task, starting one if it has none. The message must already be in
    /// the store.
    pub fn notify(&self, thread: &ThreadKey) {
        if self.inner.stopping.is_cancelled() {
            return;
        }
        let Ok(mut workers) = self.inner.workers.lock() else {
            tracing::error!("thread registry poisoned");
            return;
        };
        if let Some(tx) = workers.get(thread) {
            // Full means a wake-up is already queued; closed means the task is ending and
            // will be replaced below.
            match tx.try_send(()) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(())) => return,
                Err(mpsc::error::TrySendError::Closed(())) => {}
            }
        }
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        workers.insert(thread.clone(), tx);
        let inner = self.inner.clone();
        let thread = thread.clone();
        self.inner
            .tracker
            .spawn(async move { inner.run(thread, rx).await });
    }

    /// Wakes every thread that has messages stored but not processed (after a restart).
    pub async fn resume_pending(&self) -> Result<usize, crate::store::StoreError> {
        self.inner.store.requeue_failed().await?;
        let threads = self.inner.store.threads_with_pending().await?;
        for thread in &threads {
            self.notify(thread);
        }
        Ok(threads.len())
    }

    /// Until `stop`, wakes every `every` the threads with pending messages, so a message
    /// stored by another instance (or left by one that stopped) reaches its owner here.
    pub async fn watch_pending(&self, every: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.inner.stopping.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match self.inner.ownership.waiting(&self.inner.store).await {
                Ok(threads) => {
                    for thread in &threads {
                        self.notify(thread);
                    }
                }
                Err(e) => tracing::warn!("look for pending messages: {e}"),
            }
        }
    }

    /// Threads with a live task.
    pub fn active_threads(&self) -> usize {
        self.inner.workers.lock().map(|w| w.len()).unwrap_or(0)
    }

    /// Stops taking messages, lets work in flight finish for up to `grace`, then cancels
    /// what is left (its messages stay pending for the next start).
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.stopping.cancel();
        self.inner.tracker.close();
        if tokio::time::timeout(grace, self.inner.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("work still running after {grace:?}; cancelling it");
            self.inner.abort.cancel();
            let after = Duration::from_secs(5);
            if tokio::time::timeout(after, self.inner.tracker.wait())
                .await
                .is_err()
            {
                tracing::error!("work still running {after:?} after it was cancelled; not waiting");
            }
        }
    }
}

impl Inner {
    async fn run(self: Arc<Self>, thread: ThreadKey, mut rx: mpsc::Receiver<()>) {
        loop {
            if !self.drain(&thread).await {
                // Another instance owns the thread: it handles the messages. A wake-up
                // queued meanwhile is left to the next `notify`, which starts a new task.
                if let Ok(mut workers) = self.workers.lock() {
                    workers.remove(&thread);
                }
                tracing::debug!(thread = %thread, "thread owned by another instance");
                break;
            }
            tokio::select! {
                biased;
                () = self.stopping.cancelled() => break,
                woke = rx.recv() => if woke.is_none() { break },
                () = tokio::time::sleep(self.idle) => {
                    if self.end_if_idle(&thread, &rx) {
                        self.ownership.release(&thread).await;
                        break;
                    }
                }
            }
        }
        tracing::debug!(thread = %thread, "thread task ended");
    }

    /// Removes the thread's task from the registry unless a wake-up is queued; under the
    /// registry's lock no wake-up can slip in between the check and the removal.
    fn end_if_idle(&self, thread: &ThreadKey, rx: &mpsc::Receiver<()>) -> bool {
        let Ok(mut workers) = self.workers.lock() else {
            return true;
        };
        if !rx.is_empty() {
            return false;
        }
        workers.remove(thread);
        true
    }

    /// Handles the thread's pending messages, oldest first, while this instance owns it.
    /// Returns false when another instance owns the thread.
    async fn drain(&self, thread: &ThreadKey) -> bool {
        while !self.stopping.is_cancelled() {
            match self.ownership.claim(thread).await {
                Ok(Claim::Mine) => {}
                Ok(Claim::Fresh) => self.handler.adopt(thread).await,
                Ok(Claim::Elsewhere) => return false,
                Err(e) => {
                    tracing::error!(thread = %thread, "claim the thread: {e}");
                    return true;
                }
            }
            let msg = match self.store.next_pending(thread).await {
                Ok(Some(msg)) => msg,
                Ok(None) => return true,
                Err(e) => {
                    tracing::error!(thread = %thread, "read pending messages: {e}");
                    return true;
                }
            };
            let ts = msg.ts.clone();
            let work = self.handler.handle(msg.clone(), self.abort.child_token());
            if let Err(panic) = std::panic::AssertUnwindSafe(work).catch_unwind().await {
                let text = panic_message(&*panic);
                tracing::error!(thread = %thread, "handling message {ts} panicked: {text}");
                self.handler.on_panic(msg, text).await;
            }
            if self.abort.is_cancelled() {
                return true;
            }
            // A handler must settle the message; if it could not (store down), stop here
            // rather than spin on it. The next message or restart tries again.
            match self.store.next_pending(thread).await {
                Ok(Some(next)) if next.ts == ts => {
                    tracing::error!(thread = %thread, "message {ts} was left pending; pausing this thread");
                    return true;
                }
                _ => {}
            }
        }
        true
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::IncomingMessage;
    use tokio::sync::Notify;

    /// Records handled messages; panics on text "boom"; waits on a gate for text "slow".
    struct Recorder {
        store: Store,
        handled: Mutex<Vec<String>>,
        panics: Mutex<Vec<String>>,
        adopted: Mutex<Vec<String>>,
        gate: Notify,
    }

    #[async_trait]
    impl MessageHandler for Recorder {
        async fn handle(&self, msg: IncomingMessage, _cancel: CancellationToken) {
            if msg.text == "boom" {
                panic!("boom in handler");
            }
            if msg.text == "slow" {
                self.gate.notified().await;
            }
            self.handled.lock().unwrap().push(msg.text.clone());
            self.store.mark_processed(&msg).await.unwrap();
        }

        async fn on_panic(&self, msg: IncomingMessage, panic: String) {
            self.store.mark_failed(&msg).await.unwrap();
            self.panics.lock().unwrap().push(panic);
        }

        async fn adopt(&self, thread: &ThreadKey) {
            self.adopted.lock().unwrap().push(thread.thread_ts.clone());
        }
    }

    /// Owns the threads listed in `mine`; takes the ones in `stale` once; every other thread
    /// belongs to another instance. Counts releases.
    #[derive(Default)]
    struct Leases {
        mine: Mutex<Vec<String>>,
        stale: Mutex<Vec<String>>,
        released: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Ownership for Leases {
        async fn claim(&self, thread: &ThreadKey) -> Result<Claim, StoreError> {
            let ts = thread.thread_ts.clone();
            if self.mine.lock().unwrap().contains(&ts) {
                return Ok(Claim::Mine);
            }
            let mut stale = self.stale.lock().unwrap();
            if let Some(i) = stale.iter().position(|t| *t == ts) {
                stale.remove(i);
                self.mine.lock().unwrap().push(ts);
                return Ok(Claim::Fresh);
            }
            Ok(Claim::Elsewhere)
        }

        async fn release(&self, thread: &ThreadKey) {
            let ts = thread.thread_ts.clone();
            self.mine.lock().unwrap().retain(|t| *t != ts);
            self.released.lock().unwrap().push(ts);
        }
    }

    fn msg(ts: &str, thread: &str, text: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: thread.into(),
            user: "U1".into(),
            text: text.into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        }
    }

    async fn setup(idle: Duration) -> (tempfile::TempDir, Store, Arc<Recorder>, Dispatcher) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let recorder = Arc::new(Recorder {
            store: store.clone(),
            handled: Mutex::new(vec![]),
            panics: Mutex::new(vec![]),
            adopted: Mutex::new(vec![]),
            gate: Notify::new(),
        });
        let dispatcher = Dispatcher::new(store.clone(), recorder.clone(), idle);
        (dir, store, recorder, dispatcher)
    }

    async fn setup_shared(
        leases: Arc<Leases>,
        idle: Duration,
    ) -> (tempfile::TempDir, Store, Arc<Recorder>, Dispatcher) {
        let (dir, store, recorder, _) = setup(idle).await;
        let dispatcher = Dispatcher::shared(store.clone(), recorder.clone(), leases, idle);
        (dir, store, recorder, dispatcher)
    }

    async fn eventually(mut check: impl FnMut() -> bool) {
        for _ in 0..500 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition not reached");
    }

    #[tokio::test]
    async fn messages_arriving_while_busy_are_handled_in_order() {
        let (_d, store, rec, disp) = setup(IDLE_TIMEOUT).await;
        let first = msg("1.1", "1.1", "slow");
        store.record_message(&first).await.unwrap();
        disp.notify(&first.thread());
        for (ts, text) in [("1.3", "third"), ("1.2", "second")] {
            store.record_message(&msg(ts, "1.1", text)).await.unwrap();
            disp.notify(&first.thread());
        }
        rec.gate.notify_one();
        eventually(|| rec.handled.lock().unwrap().len() == 3).await;
        assert_eq!(
            *rec.handled.lock().unwrap(),
            vec!["slow", "second", "third"]
        );
        assert_eq!(disp.active_threads(), 1);
    }

    #[tokio::test]
    async fn a_panic_is_contained_to_its_message() {
        let (_d, store, rec, disp) = setup(IDLE_TIMEOUT).await;
        let boom = msg("1.1", "1.1", "boom");
        store.record_message(&boom).await.unwrap();
        disp.notify(&boom.thread());
        let other = msg("2.1", "2.1", "fine");
        store.record_message(&other).await.unwrap();
        disp.notify(&other.thread());
        eventually(|| rec.panics.lock().unwrap().len() == 1).await;
        // The next message in the thread retries the failed one first (it panics again),
        // then is handled itself.
        let after = msg("1.2", "1.1", "after");
        store.record_message(&after).await.unwrap();
        disp.notify(&after.thread());
        eventually(|| rec.handled.lock().unwrap().len() == 2).await;
        assert_eq!(
            *rec.panics.lock().unwrap(),
            vec!["boom in handler", "boom in handler"]
        );
        let mut handled = rec.handled.lock().unwrap().clone();
        handled.sort();
        assert_eq!(handled, vec!["after", "fine"]);
    }

    #[tokio::test]
    async fn idle_tasks_end_and_are_revived() {
        let (_d, store, rec, disp) = setup(Duration::from_millis(50)).await;
        let a = msg("1.1", "1.1", "a");
        store.record_message(&a).await.unwrap();
        disp.notify(&a.thread());
        eventually(|| rec.handled.lock().unwrap().len() == 1).await;
        eventually(|| disp.active_threads() == 0).await;
        let b = msg("1.2", "1.1", "b");
        store.record_message(&b).await.unwrap();
        disp.notify(&b.thread());
        eventually(|| rec.handled.lock().unwrap().len() == 2).await;
    }

    #[tokio::test]
    async fn pending_messages_are_resumed_and_shutdown_waits() {
        let (_d, store, rec, disp) = setup(IDLE_TIMEOUT).await;
        for (ts, thread) in [("1.1", "1.1"), ("2.1", "2.1")] {
            store.record_message(&msg(ts, thread, "x")).await.unwrap();
        }
        assert_eq!(disp.resume_pending().await.unwrap(), 2);
        eventually(|| rec.handled.lock().unwrap().len() == 2).await;
        disp.shutdown(Duration::from_secs(5)).await;
        // After shutdown nothing new starts.
        let late = msg("3.1", "3.1", "late");
        store.record_message(&late).await.unwrap();
        disp.notify(&late.thread());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(rec.handled.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_thread_owned_elsewhere_is_left_to_its_owner() {
        let leases = Arc::new(Leases::default());
        leases.mine.lock().unwrap().push("1.1".into());
        let (_d, store, rec, disp) = setup_shared(leases.clone(), IDLE_TIMEOUT).await;
        let ours = msg("1.1", "1.1", "ours");
        let theirs = msg("2.1", "2.1", "theirs");
        for m in [&ours, &theirs] {
            store.record_message(m).await.unwrap();
            disp.notify(&m.thread());
        }
        eventually(|| rec.handled.lock().unwrap().len() == 1).await;
        eventually(|| disp.active_threads() == 1).await;
        assert_eq!(*rec.handled.lock().unwrap(), vec!["ours"]);
        // Still pending: the instance that owns it handles it.
        let pending = store.next_pending(&theirs.thread()).await.unwrap();
        assert_eq!(pending.map(|m| m.ts), Some("2.1".to_owned()));
    }

    #[tokio::test]
    async fn a_taken_over_thread_is_adopted_once_then_released_when_idle() {
        let leases = Arc::new(Leases::default());
        leases.stale.lock().unwrap().push("1.1".into());
        let (_d, store, rec, disp) = setup_shared(leases.clone(), Duration::from_millis(50)).await;
        for (ts, text) in [("1.1", "a"), ("1.2", "b")] {
            store.record_message(&msg(ts, "1.1", text)).await.unwrap();
        }
        disp.notify(&msg("1.1", "1.1", "a").thread());
        eventually(|| rec.handled.lock().unwrap().len() == 2).await;
        assert_eq!(*rec.adopted.lock().unwrap(), vec!["1.1"]);
        eventually(|| leases.released.lock().unwrap().len() == 1).await;
        assert_eq!(disp.active_threads(), 0);
    }

    #[tokio::test]
    async fn pending_messages_stored_elsewhere_are_found_by_the_watch() {
        let (_d, store, rec, disp) = setup(IDLE_TIMEOUT).await;
        let stop = CancellationToken::new();
        let watch = tokio::spawn({
            let disp = disp.clone();
            let stop = stop.clone();
            async move { disp.watch_pending(Duration::from_millis(20), stop).await }
        });
        // Stored as another instance's intake would: no notify here.
        store.record_message(&msg("1.1", "1.1", "x")).await.unwrap();
        eventually(|| rec.handled.lock().unwrap().len() == 1).await;
        stop.cancel();
        watch.await.unwrap();
    }
}
