//! Exactly once in Slack, across crashes: every post, snippet, reaction and update goes
//! through the outbox.
//!
//! An effect is first recorded in the store, in the same transaction as the change it
//! reports ([`crate::store::Change`]); then [`Outbox`] delivers the thread's effects in
//! order. Before a post or a snippet's sharing is attempted, its row says `sending`: from then
//! on a crash leaves its outcome unknown. A post carries its row's id in its message metadata
//! and a snippet is known by its file id, so whoever delivers the thread next (the next
//! effect in the thread, a retry, or the start after a crash) reads the thread once with
//! `conversations.replies` and marks what it finds there as sent instead of posting it again.
//! The thread is read only then: Slack rate-limits that call hard. Reactions and updates are
//! idempotent, so they are simply done again.
//!
//! Failures: Slack refusing an effect for good gives it up (logged); a failure that leaves it
//! undone or unknown stops the thread's delivery (to keep its order) and retries it later.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slack_morphism::prelude::SlackBlock;

use crate::domain::ThreadKey;
use crate::slack::api::{Outcome, Sender, SlackError, ThreadMarks};
use crate::slack::effects::{Effect, Effects, MessageRef};
use crate::store::{Change, IntentRecord, IntentState, Store, StoreError};

/// How long a thread whose delivery failed waits before it is tried again.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// Why effects could not be recorded or delivered.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Slack(#[from] SlackError),
}

/// Records and delivers effects; cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

struct Inner {
    store: Store,
    sender: Sender,
    /// One delivery at a time per thread.
    locks: Mutex<HashMap<ThreadKey, Arc<tokio::sync::Mutex<()>>>>,
    /// Threads with a retry scheduled.
    retrying: Mutex<HashSet<ThreadKey>>,
    retry_interval: Duration,
    /// The instance whose thread lease every commit requires (several instances on one
    /// store); `None` for the only instance.
    fence: Option<String>,
}

impl Outbox {
    /// An outbox delivering through `sender`, retrying failed threads every
    /// [`RETRY_INTERVAL`].
    pub fn new(store: Store, sender: Sender) -> Self {
        Self::with_retry_interval(store, sender, RETRY_INTERVAL)
    }

    /// Like [`Outbox::new`] with another retry interval.
    pub fn with_retry_interval(store: Store, sender: Sender, retry_interval: Duration) -> Self {
        Self::build(store, sender, retry_interval, None)
    }

    /// An outbox whose commits record nothing unless `instance` holds the thread's lease
    /// ([`Change::LeaseHeld`]): an instance that lost a thread to another neither records nor
    /// says anything more about it. For instances sharing one store.
    pub fn fenced_by(store: Store, sender: Sender, instance: &str) -> Self {
        Self::build(store, sender, RETRY_INTERVAL, Some(instance.to_owned()))
    }

    fn build(
        store: Store,
        sender: Sender,
        retry_interval: Duration,
        fence: Option<String>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                sender,
                locks: Mutex::new(HashMap::new()),
                retrying: Mutex::new(HashSet::new()),
                retry_interval,
                fence,
            }),
        }
    }

    /// The sender, for what needs no outbox: edits of a live status message, which the next
    /// edit supersedes.
    pub fn sender(&self) -> &Sender {
        &self.inner.sender
    }

    /// Records `changes` with `effects` in one transaction, then delivers the thread. Returns
    /// false, recording nothing, when a [`Change::RunReported`] finds the run reported, or
    /// when this instance no longer holds the thread's lease (see [`Outbox::fenced_by`]). An
    /// error means nothing was recorded; a delivery that fails is logged and retried later
    /// (the effects are safe in the store).
    pub async fn commit(
        &self,
        changes: &[Change<'_>],
        effects: &Effects,
    ) -> Result<bool, OutboxError> {
        let thread = effects.thread();
        let fenced: Vec<Change<'_>>;
        let changes = match &self.inner.fence {
            Some(owner) => {
                fenced = std::iter::once(Change::LeaseHeld { thread, owner })
                    .chain(changes.iter().cloned())
                    .collect();
                &fenced[..]
            }
            None => changes,
        };
        if !self.inner.store.commit(changes, &effects.intents()).await? {
            if self.inner.fence.is_some() {
                tracing::warn!(thread = %thread, "not recorded: this instance no longer holds the thread, or it was recorded already");
            }
            return Ok(false);
        }
        self.deliver(effects.thread()).await;
        Ok(true)
    }

    /// Records `effects` and delivers the thread (see [`Outbox::commit`]).
    pub async fn send(&self, effects: &Effects) -> Result<(), OutboxError> {
        self.commit(&[], effects).await.map(|_| ())
    }

    /// The ts of a delivered post, by its outbox id.
    pub async fn posted(&self, id: &str) -> Option<String> {
        match self.inner.store.intent(id).await {
            Ok(found) => found.and_then(|i| i.ts),
            Err(e) => {
                tracing::warn!("read outbox effect {id}: {e}");
                None
            }
        }
    }

    /// Delivers the thread's effects in order. A failure is logged and the thread retried
    /// after the retry interval.
    pub async fn deliver(&self, thread: &ThreadKey) {
        if let Err(e) = self.try_deliver(thread).await {
            tracing::warn!(thread = %thread, "slack effects not delivered yet: {e}; retrying in {}s",
                self.inner.retry_interval.as_secs_f64());
            self.retry_later(thread);
        }
    }

    /// At start: delivers every thread with effects left over, reading those threads whose
    /// last attempt's outcome is unknown. Returns how many threads had some.
    pub async fn recover(&self) -> usize {
        let threads = match self.inner.store.threads_with_unsent().await {
            Ok(threads) => threads,
            Err(e) => {
                tracing::error!("read the outbox: {e}");
                return 0;
            }
        };
        for thread in &threads {
            self.deliver(thread).await;
        }
        threads.len()
    }

    /// Delivers the thread's effects in order, under the thread's lock.
    async fn try_deliver(&self, thread: &ThreadKey) -> Result<(), OutboxError> {
        let lock = self.lock(thread);
        let result = {
            let _held = lock.lock().await;
            self.deliver_unsent(thread).await
        };
        self.release(thread, lock);
        result
    }

    async fn deliver_unsent(&self, thread: &ThreadKey) -> Result<(), OutboxError> {
        let store = &self.inner.store;
        let rows = store.unsent(thread).await?;
        // Whatever a crash left unknown was recorded after the earliest unsent effect.
        let oldest = rows.first().map(|r| slack_ts_before(&r.created_at));
        let mut marks: Option<ThreadMarks> = None;
        for row in rows {
            let effect = match serde_json::from_str::<Effect>(&row.body) {
                Ok(effect) => effect,
                Err(e) => {
                    tracing::error!(thread = %thread, "outbox effect {} is unreadable: {e}; given up", row.id);
                    store
                        .intent_failed(&row.id, &format!("unreadable: {e}"))
                        .await?;
                    continue;
                }
            };
            if row.state == IntentState::Sending {
                if marks.is_none() {
                    tracing::info!(thread = %thread, "checking the thread for effects a crash left unknown");
                    let read = self
                        .inner
                        .sender
                        .thread_marks(
                            &thread.channel,
                            &thread.thread_ts,
                            oldest.as_deref().unwrap_or("0"),
                        )
                        .await?;
                    marks = Some(read);
                }
                if let Some(ts) = marks.as_ref().and_then(|m| shown(m, &row, &effect)) {
                    tracing::info!(thread = %thread, "effect {} was delivered before the crash", row.id);
                    store.intent_sent(&row.id, ts.as_deref()).await?;
                    continue;
                }
            }
            self.attempt(&row, &effect).await?;
        }
        Ok(())
    }

    /// Attempts one effect and records what came of it.
    async fn attempt(&self, row: &IntentRecord, effect: &Effect) -> Result<(), OutboxError> {
        let (store, sender) = (&self.inner.store, &self.inner.sender);
        let (channel, thread_ts) = (&row.thread.channel, &row.thread.thread_ts);
        let result: Result<Option<String>, SlackError> = match effect {
            Effect::Post { text, blocks } => {
                let blocks = match blocks
                    .as_ref()
                    .map(|b| serde_json::from_value::<Vec<SlackBlock>>(b.clone()))
                    .transpose()
                {
                    Ok(blocks) => blocks,
                    Err(e) => {
                        tracing::error!(thread = %row.thread, "outbox effect {} has unreadable blocks: {e}; given up", row.id);
                        store
                            .intent_failed(&row.id, &format!("unreadable blocks: {e}"))
                            .await?;
                        return Ok(());
                    }
                };
                store.intent_sending(&row.id, None).await?;
                sender
                    .post_message(channel, thread_ts, text, blocks, &row.id)
                    .await
                    .map(Some)
            }
            Effect::Snippet {
                filename,
                filetype,
                content,
            } => match sender.upload_file(filename, filetype, content).await {
                // Nothing shows until the file is shared: a failure so far changed nothing.
                Err(e) => Err(e),
                Ok(file_id) => {
                    store.intent_sending(&row.id, Some(&file_id)).await?;
                    sender
                        .share_file(channel, thread_ts, &file_id, filename)
                        .await
                        .map(|()| None)
                }
            },
            Effect::Image {
                filename,
                title,
                png_base64,
            } => {
                use base64::Engine as _;
                let Ok(png) = base64::engine::general_purpose::STANDARD.decode(png_base64) else {
                    tracing::error!(thread = %row.thread, "outbox effect {} has an unreadable image; given up", row.id);
                    store.intent_failed(&row.id, "unreadable image").await?;
                    return Ok(());
                };
                match sender.upload_bytes(filename, None, png, "image/png").await {
                    // Nothing shows until the file is shared: a failure so far changed nothing.
                    Err(e) => Err(e),
                    Ok(file_id) => {
                        store.intent_sending(&row.id, Some(&file_id)).await?;
                        sender
                            .share_file(channel, thread_ts, &file_id, title)
                            .await
                            .map(|()| None)
                    }
                }
            }
            Effect::React { ts, name } => sender.react(channel, ts, name).await.map(|()| None),
            Effect::Update {
                message,
                text,
                blocks,
            } => {
                let ts = match message {
                    MessageRef::Ts(ts) => Some(ts.clone()),
                    MessageRef::Post(id) => store.intent(id).await?.and_then(|post| post.ts),
                };
                let Some(ts) = ts else {
                    tracing::warn!(thread = %row.thread, "effect {}: the message to update was never posted; given up", row.id);
                    store
                        .intent_failed(&row.id, "the message to update was never posted")
                        .await?;
                    return Ok(());
                };
                let blocks = blocks
                    .as_ref()
                    .map(|b| serde_json::from_value::<Vec<SlackBlock>>(b.clone()))
                    .transpose();
                match blocks {
                    Ok(Some(blocks)) => sender.update_blocks(channel, &ts, text, blocks).await,
                    Ok(None) => sender.update(channel, &ts, text).await,
                    Err(e) => {
                        tracing::error!(thread = %row.thread, "outbox effect {} has unreadable blocks: {e}; given up", row.id);
                        store.intent_failed(&row.id, &format!("unreadable blocks: {e}")).await?;
                        return Ok(());
                    }
                }
                .map(|()| None)
            }
        };
        match result {
            Ok(ts) => {
                store.intent_sent(&row.id, ts.as_deref()).await?;
                Ok(())
            }
            Err(e) => match e.outcome() {
                Outcome::Refused => {
                    tracing::error!(thread = %row.thread, "slack refused effect {}: {e}; given up", row.id);
                    store.intent_failed(&row.id, &e.to_string()).await?;
                    Ok(())
                }
                Outcome::NotDone => {
                    store.intent_pending(&row.id).await?;
                    Err(e.into())
                }
                // A post or a shared snippet stays `sending`: the next delivery looks for it
                // in the thread first. Reactions and updates are simply done again.
                Outcome::Unknown => Err(e.into()),
            },
        }
    }

    fn lock(&self, thread: &ThreadKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = match self.inner.locks.lock() {
            Ok(locks) => locks,
            Err(poisoned) => poisoned.into_inner(),
        };
        locks.entry(thread.clone()).or_default().clone()
    }

    /// Forgets the thread's lock when nobody else holds or waits for it.
    fn release(&self, thread: &ThreadKey, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = match self.inner.locks.lock() {
            Ok(locks) => locks,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Ours and the map's.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(thread);
        }
    }

    /// Delivers the thread again after the retry interval (once, however many failures).
    fn retry_later(&self, thread: &ThreadKey) {
        {
            let mut retrying = match self.inner.retrying.lock() {
                Ok(set) => set,
                Err(poisoned) => poisoned.into_inner(),
            };
            if !retrying.insert(thread.clone()) {
                return;
            }
        }
        let outbox = self.clone();
        let thread = thread.clone();
        tokio::spawn(async move {
            tokio::time::sleep(outbox.inner.retry_interval).await;
            // A poisoned set is still a set: leaving the thread in it would end its retries.
            match outbox.inner.retrying.lock() {
                Ok(mut retrying) => retrying.remove(&thread),
                Err(poisoned) => poisoned.into_inner().remove(&thread),
            };
            outbox.deliver(&thread).await;
        });
    }
}

/// How far before an effect's recording the thread is read for it: Slack's clock and ours
/// may disagree a little.
const CLOCK_MARGIN_SECS: i64 = 600;

/// A Slack ts (epoch seconds) [`CLOCK_MARGIN_SECS`] before `recorded` (RFC 3339); "0" (the
/// whole thread) if it cannot be read.
fn slack_ts_before(recorded: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(recorded) {
        Ok(at) => format!("{}.000000", (at.timestamp() - CLOCK_MARGIN_SECS).max(0)),
        Err(e) => {
            tracing::warn!("outbox time {recorded:?} unreadable ({e}); reading the whole thread");
            "0".into()
        }
    }
}

/// Whether the thread shows `row`'s effect: `Some(ts)` if so (the post's ts; `None` for a
/// snippet), `None` if not.
fn shown(marks: &ThreadMarks, row: &IntentRecord, effect: &Effect) -> Option<Option<String>> {
    match effect {
        Effect::Post { .. } => marks.intents.get(&row.id).map(|ts| Some(ts.clone())),
        Effect::Snippet { .. } | Effect::Image { .. } => row
            .file_id
            .as_ref()
            .filter(|f| marks.files.contains(*f))
            .map(|_| None),
        Effect::React { .. } | Effect::Update { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use codebutler_test_support::slack::{BOT_TOKEN, CHANNEL, FakeSlack};
    use serde_json::json;

    use super::*;
    use crate::secret::Secret;
    use crate::slack::api::build_client;

    struct Setup {
        _dir: tempfile::TempDir,
        slack: FakeSlack,
        store: Store,
        outbox: Outbox,
        thread: ThreadKey,
    }

    async fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let slack = FakeSlack::start().await;
        let client = build_client(slack.api_url().trim_end_matches('/')).unwrap();
        let sender = Sender::new(client, &Secret::new(BOT_TOKEN), 0.0);
        let outbox = Outbox::with_retry_interval(store.clone(), sender, Duration::from_millis(200));
        let thread = ThreadKey {
            channel: CHANNEL.into(),
            thread_ts: slack.user_message(CHANNEL, "U1", "hello", None).ts,
        };
        Setup {
            _dir: dir,
            slack,
            store,
            outbox,
            thread,
        }
    }

    fn snippet(name: &str) -> Effect {
        Effect::Snippet {
            filename: name.into(),
            filetype: "text".into(),
            content: format!("content of {name}"),
        }
    }

    #[tokio::test]
    async fn effects_are_delivered_in_order_with_their_ids_in_the_posts_metadata() {
        let s = setup().await;
        let effects = Effects::named("g", &s.thread)
            .reply("first", "*PM:* ")
            .push(snippet("a.txt"))
            .react(&s.thread.thread_ts, "eyes");
        s.outbox.send(&effects).await.unwrap();
        let second = Effects::named("h", &s.thread).reply("second", "");
        s.outbox.send(&second).await.unwrap();
        let posts = s.slack.posts();
        assert_eq!(
            posts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
            ["*PM:* first", "second"]
        );
        assert_eq!(
            posts[0].metadata,
            Some(json!({"event_type": "codebutler_post", "event_payload": {"intent": "g/0"}}))
        );
        assert_eq!(s.slack.uploads().len(), 1);
        assert_eq!(s.slack.reactions().len(), 1);
        assert_eq!(s.outbox.posted("h/0").await, Some(posts[1].ts.clone()));
        assert!(s.store.unsent(&s.thread).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn effects_a_crash_left_unknown_are_looked_up_not_repeated() {
        let s = setup().await;
        s.slack.cap_history_pages(2);
        let effects = Effects::named("g", &s.thread)
            .reply("posted before the crash", "")
            .push(snippet("shared.txt"))
            .reply("never posted", "")
            .push(snippet("never.txt"));
        s.store.commit(&[], &effects.intents()).await.unwrap();
        // What the crashed daemon got done: the first post and the first snippet, both
        // marked `sending`; the second post marked `sending` too, but never made.
        let sender = s.outbox.sender();
        let (channel, ts) = (&s.thread.channel, &s.thread.thread_ts);
        s.store.intent_sending("g/0", None).await.unwrap();
        sender
            .post_message(channel, ts, "posted before the crash", None, "g/0")
            .await
            .unwrap();
        let file = sender.upload_file("shared.txt", "text", "x").await.unwrap();
        s.store.intent_sending("g/1", Some(&file)).await.unwrap();
        sender
            .share_file(channel, ts, &file, "shared.txt")
            .await
            .unwrap();
        s.store.intent_sending("g/2", None).await.unwrap();
        // Some unrelated chatter, so the thread takes several pages.
        for i in 0..3 {
            s.slack
                .user_message(CHANNEL, "U1", &format!("chat {i}"), Some(ts));
        }

        s.outbox.deliver(&s.thread).await;
        let texts: Vec<String> = s.slack.posts().into_iter().map(|p| p.text).collect();
        assert_eq!(texts, ["posted before the crash", "never posted"]);
        assert_eq!(
            s.slack
                .uploads()
                .iter()
                .map(|u| u.filename.as_str())
                .collect::<Vec<_>>(),
            ["shared.txt", "never.txt"]
        );
        assert!(s.store.unsent(&s.thread).await.unwrap().is_empty());
        let reads = s.slack.calls_of("conversations.replies");
        assert!(
            reads.len() >= 3,
            "paged through the thread: {}",
            reads.len()
        );
        let oldest: f64 = reads[0].params["oldest"].as_str().unwrap().parse().unwrap();
        let parent: f64 = s.thread.thread_ts.parse().unwrap();
        assert!(
            (parent - 700.0..parent).contains(&oldest),
            "read from a little before the effects were recorded: {oldest} for {parent}"
        );
        assert!(
            reads
                .iter()
                .all(|c| c.params["include_all_metadata"] == "true")
        );
        assert_eq!(
            s.outbox.posted("g/0").await,
            Some(s.slack.posts()[0].ts.clone()),
            "the ts found in the thread is kept"
        );

        // Once delivered, nothing reads the thread again.
        s.outbox
            .send(&Effects::new(&s.thread).reply("later", ""))
            .await
            .unwrap();
        assert_eq!(s.slack.calls_of("conversations.replies").len(), reads.len());
    }

    #[tokio::test]
    async fn a_top_level_post_a_crash_left_unknown_is_found_in_the_channel() {
        let s = setup().await;
        let top = ThreadKey {
            channel: CHANNEL.into(),
            thread_ts: String::new(),
        };
        let effects = Effects::named("m", &top)
            .reply("posted before the crash", "")
            .reply("never posted", "");
        s.store.commit(&[], &effects.intents()).await.unwrap();
        s.store.intent_sending("m/0", None).await.unwrap();
        s.outbox
            .sender()
            .post_message(CHANNEL, "", "posted before the crash", None, "m/0")
            .await
            .unwrap();
        s.store.intent_sending("m/1", None).await.unwrap();
        // A reply in a thread of the channel is not a top-level message.
        s.slack
            .user_message(CHANNEL, "U1", "chat", Some(&s.thread.thread_ts));

        s.outbox.deliver(&top).await;
        let posts = s.slack.posts();
        let texts: Vec<&str> = posts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts, ["posted before the crash", "never posted"]);
        assert!(posts.iter().all(|p| p.thread_ts.is_none()), "{posts:?}");
        assert_eq!(s.slack.calls_of("conversations.history").len(), 1);
        assert!(s.slack.calls_of("conversations.replies").is_empty());
        assert!(s.store.unsent(&top).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_rate_limited_thread_is_retried_and_a_refused_effect_given_up() {
        let s = setup().await;
        // More 429s than the sender waits out: the post stays undone and is retried.
        s.slack.rate_limit("chat.postMessage", 6, 0);
        let effects = Effects::named("g", &s.thread)
            .reply("eventually", "")
            .react("9.999999", "eyes")
            .reply("after the refusal", "");
        s.outbox.send(&effects).await.unwrap();
        assert!(s.slack.posts().is_empty());
        let row = s.store.intent("g/0").await.unwrap().unwrap();
        assert_eq!(row.state, IntentState::Pending, "certainly not posted");
        assert!(
            s.slack
                .wait_until(Duration::from_secs(5), || s.slack.posts().len() == 2)
                .await,
            "retried: {:?}",
            s.slack.posts()
        );
        let failed = s.store.intent("g/1").await.unwrap().unwrap();
        assert_eq!(
            failed.state,
            IntentState::Failed,
            "no such message to react to"
        );
        assert!(s.slack.calls_of("conversations.replies").is_empty());
    }
}
