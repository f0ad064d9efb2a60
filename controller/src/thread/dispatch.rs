//! Thread dispatch: one tokio task per active Slack thread.
//!
//! The store is the queue: a message is stored before anything else happens, and a thread's
//! task always takes the oldest pending message of its thread from the store. The bounded
//! channel to the task only wakes it, so a full channel never loses a message. A task ends
//! after a minute without messages and is started again by the next one. A panic while
//! handling a message is caught, logged and reported in that thread; it never reaches the
//! daemon or another thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::{IncomingMessage, ThreadKey};
use crate::store::Store;

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
    store: Store,
    idle: Duration,
    tracker: TaskTracker,
    /// Fired at shutdown: tasks take no further messages.
    stopping: CancellationToken,
    /// Fired when the shutdown grace ends: work in flight is cancelled.
    abort: CancellationToken,
}

impl Dispatcher {
    /// A dispatcher whose thread tasks handle messages with `handler`.
    pub fn new(store: Store, handler: Arc<dyn MessageHandler>, idle: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                workers: Mutex::new(HashMap::new()),
                handler,
                store,
                idle,
                tracker: TaskTracker::new(),
                stopping: CancellationToken::new(),
                abort: CancellationToken::new(),
            }),
        }
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
            self.drain(&thread).await;
            tokio::select! {
                biased;
                () = self.stopping.cancelled() => break,
                woke = rx.recv() => if woke.is_none() { break },
                () = tokio::time::sleep(self.idle) => {
                    let Ok(mut workers) = self.workers.lock() else { break };
                    // Under the lock no wake-up can slip in between the check and the removal.
                    if rx.is_empty() {
                        workers.remove(&thread);
                        break;
                    }
                }
            }
        }
        tracing::debug!(thread = %thread, "thread task ended");
    }

    /// Handles the thread's pending messages, oldest first.
    async fn drain(&self, thread: &ThreadKey) {
        while !self.stopping.is_cancelled() {
            let msg = match self.store.next_pending(thread).await {
                Ok(Some(msg)) => msg,
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(thread = %thread, "read pending messages: {e}");
                    return;
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
                return;
            }
            // A handler must settle the message; if it could not (store down), stop here
            // rather than spin on it. The next message or restart tries again.
            match self.store.next_pending(thread).await {
                Ok(Some(next)) if next.ts == ts => {
                    tracing::error!(thread = %thread, "message {ts} was left pending; pausing this thread");
                    return;
                }
                _ => {}
            }
        }
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
    }

    fn msg(ts: &str, thread: &str, text: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: thread.into(),
            user: "U1".into(),
            text: text.into(),
            event_id: None,
        }
    }

    async fn setup(idle: Duration) -> (tempfile::TempDir, Store, Arc<Recorder>, Dispatcher) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let recorder = Arc::new(Recorder {
            store: store.clone(),
            handled: Mutex::new(vec![]),
            panics: Mutex::new(vec![]),
            gate: Notify::new(),
        });
        let dispatcher = Dispatcher::new(store.clone(), recorder.clone(), idle);
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
}
