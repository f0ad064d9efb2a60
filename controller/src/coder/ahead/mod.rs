//! Preparing while the plan is discussed: when the PM proposes a plan, the thread's
//! worktree is created and prepared in the background (fetch, worktree and branch, the
//! platforms' init in the sandbox) and its runner launched up to where it waits for a task
//! ([`crate::runners::supervisor::Supervisor::standby`]), so that an approval only sends
//! the task ([`super::start`]).
//!
//! Nothing speculative holds a secret or calls a model: the init runs as at an approval
//! (network for that step only, no secret), and a waiting runner has only its sandbox and
//! its hub. What the preparation would say in the thread is held ([`relay`]) and said only
//! if the plan is approved.
//!
//! A thread has at most one preparation: a revised plan reuses it (the branch keeps the
//! first plan's slug), unless it failed, when the revised plan is prepared anew. A preparation is discarded — its runner stopped, its worktree and
//! branch removed whole — when the plan is cancelled (its Cancel button, or a typed "no"),
//! when its thread has been quiet for `build.prepareAheadIdleMinutes` (0 turns preparing
//! ahead off), when a new one would pass `build.maxPreparedAhead` (the oldest goes), and
//! when `access.maxWorktreeDiskMB` leaves no room for a worktree (the oldest goes first).
//! [`book`] decides which, as plain data.
//!
//! Preparations live in this instance's memory only: one entry a thread (a token, a task
//! handle, the held lines). A restart forgets them (its runners end with their hub sockets,
//! the orphan cleanup at start removes their worktrees, which no run uses), and an approval
//! handled by another instance sharing the store finds none: both take the cold path.

mod book;
mod relay;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::ThreadKey;
use crate::runners::request::Reporting;
use crate::runners::supervisor::{RunSite, Standby, Supervisor};
use crate::workspace::forge;
use crate::workspace::worktree::{self, PrepareError, Preparer, Worktree};
use book::{Book, Proposed};
pub use relay::{Relay, Said, replay};

/// The longest pause between two looks for quiet threads.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The speculative preparations of this instance's threads; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ahead {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    prepare: Preparer,
    supervisor: Supervisor,
    /// How long a quiet thread keeps its preparation; `None`: preparing ahead is off.
    idle: Option<Duration>,
    max: usize,
    book: Mutex<Book<Speculation>>,
    /// The discards under way, waited for at shutdown.
    discards: TaskTracker,
}

/// One thread's preparation: its task, and what it would say in the thread.
#[derive(Debug)]
pub struct Speculation {
    cancel: CancellationToken,
    /// Set when it ended without a prepared worktree (a revised plan then starts anew).
    failed: Arc<AtomicBool>,
    /// What the preparation says, held until the approval.
    pub relay: Relay,
    /// The preparation; its outcome once it ended.
    pub task: JoinHandle<Outcome>,
    /// Counted in `/metrics` while it is kept.
    _counted: crate::metrics::Held,
}

/// How a preparation ended.
#[derive(Debug)]
pub enum Outcome {
    /// The worktree is prepared and its runner waits for the task.
    Ready {
        tree: Worktree,
        standby: Box<Standby>,
        /// The project's test command, for the task.
        test_command: Option<String>,
    },
    /// The init failed; the worktree is gone, and the failure is said as at an approval.
    Failed(PrepareError),
    /// Nothing is left of it (discarded, refused for disk, its runner could not start): an
    /// approval takes the cold path, which says why if it fails too.
    Nothing,
}

impl Ahead {
    /// The preparations of the worktrees `prepare` makes, with runners `supervisor` launches;
    /// `build.prepareAheadIdleMinutes` and `build.maxPreparedAhead` come from `prepare`.
    pub fn new(prepare: Preparer, supervisor: Supervisor) -> Self {
        let idle = Duration::try_from_secs_f64(prepare.build.prepare_ahead_idle_mins * 60.0)
            .ok()
            .filter(|d| !d.is_zero());
        let max = prepare.build.max_prepared_ahead;
        let inner = Arc::new(Inner {
            prepare,
            supervisor,
            idle,
            max,
            book: Mutex::new(Book::default()),
            discards: TaskTracker::new(),
        });
        if let Some(idle) = idle {
            tokio::spawn(sweep(Arc::downgrade(&inner), idle));
        }
        Self { inner }
    }

    /// A plan titled `summary` was proposed in `thread`: its preparation starts, unless the
    /// thread has one (a revised plan reuses it, unless it failed). Returns at once.
    pub fn propose(&self, thread: &ThreadKey, summary: &str) {
        if self.inner.idle.is_none() {
            return;
        }
        let proposed = self.inner.lock().propose(
            &thread.thread_ts,
            Instant::now(),
            self.inner.max,
            |speculation| !speculation.failed.load(Ordering::Acquire),
            || self.inner.speculate(thread, summary),
        );
        match proposed {
            Proposed::Reused => {
                tracing::info!(
                    tag = "CLD",
                    "thread {thread} → revised plan: its preparation is kept"
                );
            }
            Proposed::Booked { discarded } => {
                tracing::info!(tag = "CLD", "thread {thread} → preparing ahead");
                for speculation in discarded {
                    tracing::info!(
                        tag = "CLD",
                        "a preparation goes: past build.maxPreparedAhead, or it failed before its plan was revised"
                    );
                    self.inner.discard(speculation);
                }
            }
            Proposed::Off => {}
        }
    }

    /// `thread_ts` was active now (its preparation is kept from the idle limit longer).
    pub fn touch(&self, thread_ts: &str) {
        self.inner.lock().touch(thread_ts, Instant::now());
    }

    /// Discards the thread's preparation, if it has one (its plan was cancelled).
    pub fn discard(&self, thread_ts: &str, why: &str) {
        let taken = self.inner.lock().take(thread_ts);
        if let Some(speculation) = taken {
            tracing::info!(
                tag = "CLD",
                "thread {thread_ts} → preparation discarded: {why}"
            );
            self.inner.discard(speculation);
        }
    }

    /// Takes the thread's preparation for its approved plan.
    pub fn take(&self, thread_ts: &str) -> Option<Speculation> {
        self.inner.lock().take(thread_ts)
    }

    /// Discards the oldest preparation of another thread than `except`'s to make room on
    /// the worktrees' disk, and waits until it is gone. False when there is none.
    pub async fn make_room(&self, except: &str) -> bool {
        self.inner.make_room(except).await
    }

    /// Discards every preparation and waits for the discards.
    pub async fn shutdown(&self) {
        let all = self.inner.lock().take_all();
        for speculation in all {
            self.inner.discard(speculation);
        }
        self.inner.discards.close();
        self.inner.discards.wait().await;
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Book<Speculation>> {
        match self.book.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Starts preparing `thread`'s plan titled `summary`.
    fn speculate(self: &Arc<Self>, thread: &ThreadKey, summary: &str) -> Speculation {
        let cancel = CancellationToken::new();
        let relay = Relay::default();
        let failed = Arc::new(AtomicBool::new(false));
        let preparation = prepare_ahead(
            Arc::downgrade(self),
            self.prepare.clone(),
            self.supervisor.clone(),
            thread.clone(),
            summary.to_owned(),
            relay.clone(),
            cancel.clone(),
        );
        let marked = failed.clone();
        let task = tokio::spawn(async move {
            let outcome = preparation.await;
            if !matches!(outcome, Outcome::Ready { .. }) {
                marked.store(true, Ordering::Release);
            }
            outcome
        });
        Speculation {
            cancel,
            failed,
            relay,
            task,
            _counted: crate::metrics::Held::new(&crate::metrics::metrics().prepared_worktrees),
        }
    }

    /// Discards a preparation in the background: it is cancelled, and what it made removed.
    fn discard(&self, speculation: Speculation) -> JoinHandle<()> {
        let repo = self.prepare.repo.clone();
        self.discards.spawn(async move {
            speculation.cancel.cancel();
            match speculation.task.await {
                Ok(Outcome::Ready { tree, standby, .. }) => {
                    standby.stop().await;
                    if let Err(e) = worktree::remove(&repo, &tree).await {
                        tracing::warn!("remove a discarded preparation's worktree: {e}");
                    }
                }
                Ok(Outcome::Failed(_) | Outcome::Nothing) => {}
                Err(e) => tracing::error!("a preparation ended abnormally: {e}"),
            }
        })
    }

    async fn make_room(&self, except: &str) -> bool {
        let taken = self.lock().take_oldest_except(except);
        let Some(speculation) = taken else {
            return false;
        };
        tracing::info!(
            tag = "CLD",
            "the oldest preparation goes to make room (access.maxWorktreeDiskMB)"
        );
        if let Err(e) = self.discard(speculation).await {
            tracing::error!("discarding a preparation ended abnormally: {e}");
        }
        true
    }
}

/// Prepares `thread`'s worktree for the plan titled `summary` and launches its runner,
/// saying what it does to `relay`. Whatever it made is removed again if `cancel` fires
/// before it is ready.
async fn prepare_ahead(
    ahead: Weak<Inner>,
    prepare: Preparer,
    supervisor: Supervisor,
    thread: ThreadKey,
    summary: String,
    relay: Relay,
    cancel: CancellationToken,
) -> Outcome {
    let tree = loop {
        match prepare.create(&summary, &relay).await {
            Ok(tree) => break tree,
            Err(PrepareError::DiskLimit(refusal)) => {
                let room = async {
                    match ahead.upgrade() {
                        Some(ahead) => ahead.make_room(&thread.thread_ts).await,
                        None => false,
                    }
                };
                let made = tokio::select! {
                    made = room => made,
                    () = cancel.cancelled() => false,
                };
                if !made {
                    tracing::info!(
                        tag = "CLD",
                        "thread {thread} → not prepared ahead: {refusal}"
                    );
                    return Outcome::Nothing;
                }
            }
            Err(e) => return Outcome::Failed(e),
        }
    };
    let removed = |why: &str| {
        let repo = prepare.repo.clone();
        let tree = tree.clone();
        let why = why.to_owned();
        let thread = thread.clone();
        async move {
            tracing::info!(tag = "CLD", "thread {thread} → preparation {why}");
            if let Err(e) = worktree::remove(&repo, &tree).await {
                tracing::warn!("remove a discarded preparation's worktree: {e}");
            }
            Outcome::Nothing
        }
    };
    if cancel.is_cancelled() {
        return removed("discarded").await;
    }
    let init = tokio::select! {
        init = prepare.init_or_remove(&tree, &relay) => init,
        // The init is killed with its future; the worktree goes.
        () = cancel.cancelled() => return removed("discarded during its init").await,
    };
    if let Err(e) = init {
        return Outcome::Failed(e);
    }
    let site = RunSite {
        thread: thread.clone(),
        worktree: tree.path.clone(),
        branch: tree.branch.clone(),
        reporting: Reporting::Thread {
            link: forge::thread_link(&thread.channel, &thread.thread_ts),
        },
    };
    let standby = match supervisor.standby(site).await {
        Ok(standby) => standby,
        Err(e) => return removed(&format!("has no runner: {e}")).await,
    };
    let test_command =
        super::task::project_test_command(prepare.build.test_command.as_deref(), &tree.path).await;
    if cancel.is_cancelled() {
        standby.stop().await;
        return removed("discarded").await;
    }
    tracing::info!(
        tag = "CLD",
        "thread {thread} → prepared ahead: {} waits for its task",
        tree.path.display()
    );
    Outcome::Ready {
        tree,
        standby: Box::new(standby),
        test_command,
    }
}

/// Discards the preparations of threads quiet for `idle`, looking every `idle / 4` (at
/// most every [`SWEEP_EVERY`]), until the preparations are gone.
async fn sweep(inner: Weak<Inner>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(100), SWEEP_EVERY);
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let quiet = inner.lock().take_idle(Instant::now(), idle);
        for speculation in quiet {
            tracing::info!(
                tag = "CLD",
                "a quiet thread's preparation goes (build.prepareAheadIdleMinutes)"
            );
            inner.discard(speculation);
        }
    }
}
