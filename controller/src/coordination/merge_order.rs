//! The merge-order recommendation: when two or more open pull requests overlap (the same
//! file or directory), one message at the channel's top level lists them smallest change
//! first, with their line and file counts and thread links. It is posted once; when the set
//! of overlapping pull requests or their order changes, the same message is updated, and a
//! message that would say the same is never sent again (its digest is stored with it).
//!
//! [`rank`] and [`render`] are pure. [`MergeOrder::run`] refreshes the message when woken
//! (after a Coder run, after a merge) and at the PR watcher's interval. On a shared store
//! only the instance holding the PR watcher's lease refreshes it, and its write is guarded
//! by that lease and by the digest it replaces ([`crate::store::ScopeChange::MergeOrder`]),
//! so two instances never both post or update it.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::notices::ThreadRef;
use super::overlap;
use crate::closing::watcher::WATCHER_LEASE;
use crate::domain::{Stage, ThreadKey};
use crate::slack::effects::{Effects, MessageRef};
use crate::slack::format::{Outgoing, render_reply};
use crate::slack::outbox::Outbox;
use crate::store::{Change, ScopeChange, Store, StoreError, ThreadScope};

/// An open pull request as the recommendation weighs it.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenPr {
    pub thread: ThreadRef,
    pub number: u64,
    /// The files its branch changes.
    pub files: Vec<String>,
    pub added: usize,
    pub removed: usize,
}

impl OpenPr {
    /// The pull request of an active thread whose PR is open.
    pub fn of(scope: &ThreadScope) -> Option<Self> {
        let pr = scope.pull_request.as_ref()?;
        if scope.stage != Stage::PrOpened {
            return None;
        }
        Some(Self {
            thread: ThreadRef {
                thread: scope.thread.clone(),
                summary: scope.summary.clone(),
                pr: Some(pr.number),
            },
            number: pr.number,
            files: overlap::files_of(scope),
            added: scope.changed.iter().map(|f| f.added).sum(),
            removed: scope.changed.iter().map(|f| f.removed).sum(),
        })
    }

    fn size(&self) -> usize {
        self.added + self.removed
    }
}

/// The open pull requests that overlap at least one other, smallest change first (lines
/// changed, then files, then the older pull request).
pub fn rank(prs: &[OpenPr]) -> Vec<&OpenPr> {
    let mut ranked: Vec<&OpenPr> = prs
        .iter()
        .enumerate()
        .filter(|(i, pr)| {
            prs.iter()
                .enumerate()
                .any(|(j, other)| *i != j && overlap::between(&pr.files, &other.files).is_some())
        })
        .map(|(_, pr)| pr)
        .collect();
    ranked.sort_by_key(|pr| (pr.size(), pr.files.len(), pr.number));
    ranked
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The message for `ranked` (at least two), or the one saying none overlap any more.
pub fn render(ranked: &[&OpenPr]) -> String {
    let head = "📋 **Merge order recommendation**";
    if ranked.len() < 2 {
        return format!("{head}\n\nNo open pull requests overlap any more.");
    }
    let mut out = format!(
        "{head}\n\n{} open pull requests change overlapping files. Merge the smallest change first, so each later rebase stays small:\n\n",
        ranked.len()
    );
    let last = ranked.len() - 1;
    for (i, pr) in ranked.iter().enumerate() {
        let advice = match i {
            0 => "merge first".to_owned(),
            i if i == last => "merge last, after a rebase".to_owned(),
            _ => "then rebase and merge".to_owned(),
        };
        let thread = ThreadRef {
            pr: None,
            ..pr.thread.clone()
        };
        out.push_str(&format!(
            "{}. PR #{} ({}): {}, +{}/−{} lines — {advice}\n",
            i + 1,
            pr.number,
            thread.markdown(),
            plural(pr.files.len(), "file", "files"),
            pr.added,
            pr.removed,
        ));
    }
    out
}

/// The digest of a message's text, stored with it.
pub fn digest(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// Keeps the channel's merge-order message true.
#[derive(Clone)]
pub struct MergeOrder {
    pub store: Store,
    pub outbox: Outbox,
    /// The channel it is posted in.
    pub channel: String,
    /// With several instances on one store: this instance's id (only the holder of the PR
    /// watcher's lease writes the message).
    pub shared_as: Option<String>,
    /// Wakes [`MergeOrder::run`] for a refresh.
    pub wake: Arc<Notify>,
}

impl std::fmt::Debug for MergeOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeOrder")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

/// Why the merge order could not be refreshed.
#[derive(Debug, thiserror::Error)]
pub enum MergeOrderError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a refresh did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refreshed {
    /// Nothing to say, or it says that already.
    Unchanged,
    Posted,
    Updated,
    /// Another instance holds the lease, or wrote first.
    NotHere,
}

impl MergeOrder {
    /// Refreshes when woken and every `interval`, until `cancel`.
    pub async fn run(self, interval: Duration, cancel: CancellationToken) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(interval) => {}
            }
            if let Err(e) = self.refresh().await {
                tracing::warn!("merge order: {e}");
            }
        }
    }

    fn lease_key() -> ThreadKey {
        ThreadKey {
            channel: String::new(),
            thread_ts: WATCHER_LEASE.to_owned(),
        }
    }

    /// Whether this instance writes the message now.
    async fn leads(&self) -> bool {
        let Some(instance) = &self.shared_as else {
            return true;
        };
        match self
            .store
            .claim_thread(&Self::lease_key(), instance, crate::store::LEASE_TTL)
            .await
        {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!("merge order: claim the watcher's lease: {e}");
                false
            }
        }
    }

    /// Posts, updates or leaves the message, as the open pull requests now say.
    pub async fn refresh(&self) -> Result<Refreshed, MergeOrderError> {
        if !self.leads().await {
            return Ok(Refreshed::NotHere);
        }
        let top = ThreadKey {
            channel: self.channel.clone(),
            thread_ts: String::new(),
        };
        // What an earlier holder of the lease recorded but could not deliver (it stopped):
        // the channel's top level is no thread, so no thread's new owner delivers it.
        if !self.store.unsent(&top).await?.is_empty() {
            self.outbox.deliver(&top).await;
        }
        let scopes = self.store.active_scopes().await?;
        let prs: Vec<OpenPr> = scopes
            .iter()
            .filter(|s| s.thread.channel == self.channel)
            .filter_map(OpenPr::of)
            .collect();
        let ranked = rank(&prs);
        let stored = self.store.merge_order(&self.channel).await?;
        if stored.is_none() && ranked.len() < 2 {
            return Ok(Refreshed::Unchanged);
        }
        let markdown = render(&ranked);
        let digest = digest(&markdown);
        if stored.as_ref().is_some_and(|s| s.digest == digest) {
            return Ok(Refreshed::Unchanged);
        }
        let (effects, post_id, previous) = match &stored {
            None => {
                let effects = Effects::new(&top).reply(&markdown, "");
                let id = effects.id(0);
                (effects, id, None)
            }
            Some(stored) => {
                let text = render_reply(&markdown, "")
                    .into_iter()
                    .find_map(|o| match o {
                        Outgoing::Text(t) => Some(t),
                        Outgoing::Snippet { .. } => None,
                    })
                    .unwrap_or_else(|| markdown.clone());
                let effects = Effects::new(&top).update(
                    MessageRef::Post(stored.post_id.clone()),
                    &text,
                    crate::slack::interactive::sections(&text),
                );
                (
                    effects,
                    stored.post_id.clone(),
                    Some(stored.digest.as_str()),
                )
            }
        };
        let lease = Self::lease_key();
        let mut changes = Vec::new();
        if let Some(owner) = &self.shared_as {
            changes.push(Change::LeaseHeld {
                thread: &lease,
                owner,
            });
        }
        changes.push(Change::Scope(ScopeChange::MergeOrder {
            channel: &self.channel,
            post_id: &post_id,
            digest: &digest,
            previous,
        }));
        if !self.store.commit(&changes, &effects.intents()).await? {
            return Ok(Refreshed::NotHere);
        }
        self.outbox.deliver(&top).await;
        tracing::info!(
            tag = "INF",
            "merge order: {} for {} pull request(s)",
            if previous.is_some() {
                "updated"
            } else {
                "posted"
            },
            ranked.len()
        );
        Ok(if previous.is_some() {
            Refreshed::Updated
        } else {
            Refreshed::Posted
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IncomingMessage, Plan, PullRequestRef};
    use crate::store::ScopeFile;

    fn pr(number: u64, files: &[&str], added: usize, removed: usize) -> OpenPr {
        OpenPr {
            thread: ThreadRef {
                thread: ThreadKey {
                    channel: "C1".into(),
                    thread_ts: format!("17000000{number}.000100"),
                },
                summary: Some(format!("Change {number}")),
                pr: Some(number),
            },
            number,
            files: files.iter().map(|f| (*f).to_owned()).collect(),
            added,
            removed,
        }
    }

    #[test]
    fn overlapping_pull_requests_smallest_first_and_the_rest_left_out() {
        let prs = [
            pr(43, &["auth/login.go", "auth/a.go"], 300, 250),
            pr(42, &["auth/login.go"], 3, 2),
            pr(44, &["auth/session.go"], 120, 15),
            pr(45, &["web/app.ts"], 1, 0),
        ];
        let ranked: Vec<u64> = rank(&prs).iter().map(|p| p.number).collect();
        assert_eq!(ranked, [42, 44, 43]);
        // Equal sizes: fewer files, then the older pull request.
        let ties = [
            pr(8, &["a/x", "a/y"], 1, 1),
            pr(9, &["a/x"], 1, 1),
            pr(7, &["a/x"], 1, 1),
        ];
        let ranked: Vec<u64> = rank(&ties).iter().map(|p| p.number).collect();
        assert_eq!(ranked, [7, 9, 8]);
        assert!(rank(&[pr(1, &["a/x"], 1, 1)]).is_empty());
    }

    #[test]
    fn the_message_people_read() {
        let prs = [
            pr(43, &["auth/login.go", "auth/a.go"], 300, 250),
            pr(42, &["auth/login.go"], 3, 2),
            pr(44, &["auth/session.go"], 120, 15),
        ];
        let text = render(&rank(&prs));
        insta::assert_snapshot!(text);
        assert_eq!(
            render(&[]),
            "📋 **Merge order recommendation**\n\nNo open pull requests overlap any more."
        );
        assert_eq!(digest(&text), digest(&render(&rank(&prs))));
        assert_ne!(digest(&text), digest(&render(&rank(&prs[..2]))));
    }

    /// A thread whose PR `number` is open and whose branch adds `added` lines to `file`.
    async fn open_pr(store: &Store, ts: &str, number: u64, file: &str, added: usize) {
        let thread = ThreadKey {
            channel: "C0CHAN".into(),
            thread_ts: ts.into(),
        };
        let msg = IncomingMessage {
            channel: thread.channel.clone(),
            ts: ts.into(),
            thread_ts: ts.into(),
            user: "U1".into(),
            text: "work".into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        };
        store.record_message(&msg).await.unwrap();
        let plan = Plan {
            summary: format!("Change {number}"),
            steps: vec!["Do it".into()],
            files: vec![file.into()],
        };
        store
            .set_plan(&thread, &plan.to_json().unwrap())
            .await
            .unwrap();
        store
            .record_pull_request(
                &thread,
                &PullRequestRef {
                    number,
                    url: format!("https://github.com/acme/app/pull/{number}"),
                },
            )
            .await
            .unwrap();
        let files = [ScopeFile {
            path: file.into(),
            added,
            removed: 0,
        }];
        let change = Change::Scope(ScopeChange::Files {
            thread: &thread,
            head: "abc",
            files: &files,
        });
        assert!(store.commit(&[change], &[]).await.unwrap());
    }

    async fn the_message_is_posted_once_updated_on_change_and_written_by_the_lease_holder(
        store: &Store,
    ) {
        use codebutler_test_support::slack::{BOT_TOKEN, CHANNEL, FakeSlack};
        let slack = FakeSlack::start().await;
        let client =
            crate::slack::api::build_client(slack.api_url().trim_end_matches('/')).unwrap();
        let sender =
            crate::slack::api::Sender::new(client, &crate::secret::Secret::new(BOT_TOKEN), 0.0);
        let order = MergeOrder {
            store: store.clone(),
            outbox: Outbox::new(store.clone(), sender),
            channel: CHANNEL.into(),
            shared_as: None,
            wake: Arc::new(Notify::new()),
        };
        open_pr(store, "1.1", 7, "src/auth/a.rs", 5).await;
        // One open pull request: nothing to order.
        assert_eq!(order.refresh().await.unwrap(), Refreshed::Unchanged);
        open_pr(store, "2.2", 8, "src/auth/b.rs", 1).await;
        assert_eq!(order.refresh().await.unwrap(), Refreshed::Posted);
        assert_eq!(order.refresh().await.unwrap(), Refreshed::Unchanged);
        let posts = slack.posts();
        assert_eq!(posts.len(), 1);
        assert_eq!(posts[0].thread_ts, None);
        assert!(posts[0].text.contains("1. PR #8"), "{}", posts[0].text);
        open_pr(store, "3.3", 9, "src/auth/c.rs", 3).await;
        assert_eq!(order.refresh().await.unwrap(), Refreshed::Updated);
        assert_eq!(slack.posts().len(), 1);
        let updates = slack.updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].ts, posts[0].ts);
        assert!(
            updates[0].text.contains("3 open pull requests"),
            "{}",
            updates[0].text
        );

        // Several instances: only the holder of the PR watcher's lease writes it.
        let other = MergeOrder {
            shared_as: Some("other".into()),
            ..order.clone()
        };
        let holder = MergeOrder {
            shared_as: Some("holder".into()),
            ..order.clone()
        };
        assert!(
            store
                .claim_thread(&MergeOrder::lease_key(), "holder", crate::store::LEASE_TTL)
                .await
                .unwrap()
        );
        open_pr(store, "4.4", 10, "src/auth/d.rs", 2).await;
        assert_eq!(other.refresh().await.unwrap(), Refreshed::NotHere);
        assert_eq!(slack.updates().len(), 1);
        assert_eq!(holder.refresh().await.unwrap(), Refreshed::Updated);
        assert_eq!(slack.updates().len(), 2);
        assert_eq!(slack.posts().len(), 1);
    }

    crate::store::testing::on_both_backends!(
        the_message_is_posted_once_updated_on_change_and_written_by_the_lease_holder,
    );
}
