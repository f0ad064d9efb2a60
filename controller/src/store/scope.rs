//! Each thread's scope, as coordination between threads reads it ([`crate::coordination`]):
//! the plan's predicted files (the stored plan), the files its branch changes (recorded
//! after every Coder run, `thread_scope`), its branch (its latest run's), its pull request
//! and its stage — read together for every active thread in one query. Also the notices
//! given once (`coordination_notices`) and the channel's merge-order message (`merge_order`),
//! both written with [`Change::Scope`](super::Change::Scope) in the transaction that records
//! what they say.

use serde::{Deserialize, Serialize};
use sqlx::AnyConnection;

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, now, thread_state, unknown_value};
use crate::domain::{IncomingMessage, Plan, PullRequestRef, Stage};

/// One file a thread's branch changes, with its lines added and removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeFile {
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

/// What a thread touches or will touch, as the store holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadScope {
    pub thread: ThreadKey,
    pub stage: Stage,
    /// The files its plan says it will create or change (empty without a plan).
    pub planned: Vec<String>,
    /// The files its branch changes against its base, as last read (empty before its first
    /// run ended).
    pub changed: Vec<ScopeFile>,
    /// The branch commit `changed` was read at.
    pub head: Option<String>,
    /// Its latest run's branch (`None` before its first run).
    pub branch: Option<String>,
    pub pull_request: Option<PullRequestRef>,
    /// Its plan's one-line summary.
    pub summary: Option<String>,
}

/// A change of coordination state, recorded by [`Store::commit`](super::Store::commit).
#[derive(Clone, Copy, Debug)]
pub enum ScopeChange<'a> {
    /// The files the thread's branch changes, read at `head`.
    Files {
        thread: &'a ThreadKey,
        head: &'a str,
        files: &'a [ScopeFile],
    },
    /// A notice given in `thread`: `message` (stored in the thread, for its handler to post)
    /// with the records `keys` of what it tells. Given once: when one of `keys` was given
    /// already, nothing of it is recorded. It never refuses the commit it is part of (a run's
    /// end report, a close), so those are recorded whatever the notices.
    Notice {
        thread: &'a ThreadKey,
        keys: &'a [String],
        message: &'a IncomingMessage,
    },
    /// The channel's merge-order message, posted as the outbox effect `post_id`, now says
    /// what `digest` digests. Guarded: `previous` must be the stored digest (`None`: no
    /// message yet), so two writers never both post or update it.
    MergeOrder {
        channel: &'a str,
        post_id: &'a str,
        digest: &'a str,
        previous: Option<&'a str>,
    },
}

/// The channel's merge-order message as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeOrderRecord {
    /// The outbox id of its post.
    pub post_id: String,
    /// The digest of what it says.
    pub digest: String,
}

/// Stages in which a thread counts for coordination: a plan waits, the Coder works, or
/// its pull request is open.
pub const ACTIVE_STAGES: [Stage; 3] = [Stage::PlanPending, Stage::Approved, Stage::PrOpened];

#[derive(sqlx::FromRow)]
struct ScopeRow {
    channel_id: String,
    thread_ts: String,
    state: String,
    plan: Option<String>,
    pr_number: Option<i64>,
    pr_url: Option<String>,
    branch: Option<String>,
    head: Option<String>,
    files: Option<String>,
}

const SCOPE_SELECT: &str = "SELECT t.channel_id, t.thread_ts, t.state, t.plan, t.pr_number, t.pr_url, \
     (SELECT r.branch FROM runs r WHERE r.channel_id = t.channel_id AND r.thread_ts = t.thread_ts \
      ORDER BY r.created_at DESC LIMIT 1) AS branch, s.head, s.files \
     FROM threads t LEFT JOIN thread_scope s \
     ON s.channel_id = t.channel_id AND s.thread_ts = t.thread_ts";

fn corrupt(thread: &ThreadKey) -> impl FnOnce(serde_json::Error) -> StoreError + '_ {
    move |source| StoreError::Corrupt {
        thread: thread.to_string(),
        source,
    }
}

impl TryFrom<ScopeRow> for ThreadScope {
    type Error = StoreError;

    fn try_from(r: ScopeRow) -> Result<Self, StoreError> {
        let thread = ThreadKey {
            channel: r.channel_id,
            thread_ts: r.thread_ts,
        };
        let stage = Stage::parse(&r.state)
            .ok_or_else(|| unknown_value("threads.state", &thread, r.state.clone()))?;
        let plan = r
            .plan
            .as_deref()
            .map(Plan::from_json)
            .transpose()
            .map_err(corrupt(&thread))?;
        let changed = match &r.files {
            Some(files) => serde_json::from_str(files).map_err(corrupt(&thread))?,
            None => Vec::new(),
        };
        let pull_request = thread_state::pull_request(&thread, r.pr_number, r.pr_url)?;
        Ok(Self {
            stage,
            planned: plan.as_ref().map(|p| p.files.clone()).unwrap_or_default(),
            summary: plan.map(|p| p.summary),
            changed,
            head: r.head,
            branch: r.branch.filter(|b| !b.is_empty()),
            pull_request,
            thread,
        })
    }
}

impl Store {
    /// The scope of every active thread ([`ACTIVE_STAGES`]), oldest thread first.
    pub async fn active_scopes(&self) -> Result<Vec<ThreadScope>, StoreError> {
        let rows = sqlx::query_as::<_, ScopeRow>(&format!(
            "{SCOPE_SELECT} WHERE t.state IN ($1, $2, $3) ORDER BY t.thread_ts"
        ))
        .bind(ACTIVE_STAGES[0].as_str())
        .bind(ACTIVE_STAGES[1].as_str())
        .bind(ACTIVE_STAGES[2].as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(ThreadScope::try_from).collect()
    }

    /// The scope of one thread, whatever its stage.
    pub async fn thread_scope(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<ThreadScope>, StoreError> {
        let row = sqlx::query_as::<_, ScopeRow>(&format!(
            "{SCOPE_SELECT} WHERE t.channel_id = $1 AND t.thread_ts = $2"
        ))
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        row.map(ThreadScope::try_from).transpose()
    }

    /// Whether `notice` was given in `thread`.
    pub async fn notice_given(&self, thread: &ThreadKey, notice: &str) -> Result<bool, StoreError> {
        let n = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM coordination_notices \
             WHERE channel_id = $1 AND thread_ts = $2 AND notice = $3",
        )
        .bind_thread(thread)
        .bind(notice)
        .fetch_one(&self.pool)
        .await?;
        Ok(n > 0)
    }

    /// The channel's merge-order message, if one was posted.
    pub async fn merge_order(&self, channel: &str) -> Result<Option<MergeOrderRecord>, StoreError> {
        let row = sqlx::query_as::<_, (String, String)>(
            "SELECT post_id, digest FROM merge_order WHERE channel_id = $1",
        )
        .bind(channel)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(post_id, digest)| MergeOrderRecord { post_id, digest }))
    }
}

/// Applies one coordination change; false when its guard says the commit must not happen.
pub(super) async fn apply(
    conn: &mut AnyConnection,
    change: &ScopeChange<'_>,
) -> Result<bool, StoreError> {
    let now = now();
    match *change {
        ScopeChange::Files {
            thread,
            head,
            files,
        } => {
            let files = serde_json::to_string(files).map_err(corrupt(thread))?;
            sqlx::query(
                "INSERT INTO thread_scope (channel_id, thread_ts, head, files, updated_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, thread_ts) \
                 DO UPDATE SET head = excluded.head, files = excluded.files, updated_at = excluded.updated_at",
            )
            .bind_thread(thread)
            .bind(head)
            .bind(&files)
            .bind(&now)
            .execute(&mut *conn)
            .await?;
            Ok(true)
        }
        ScopeChange::Notice {
            thread,
            keys,
            message,
        } => {
            // Inside the write transaction: no other writer can give one of these meanwhile.
            let mut given = 0;
            for key in keys {
                given += sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM coordination_notices \
                     WHERE channel_id = $1 AND thread_ts = $2 AND notice = $3",
                )
                .bind_thread(thread)
                .bind(key)
                .fetch_one(&mut *conn)
                .await?;
            }
            if given > 0 {
                return Ok(true);
            }
            for key in keys {
                sqlx::query(
                    "INSERT INTO coordination_notices (channel_id, thread_ts, notice, given_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind_thread(thread)
                .bind(key)
                .bind(&now)
                .execute(&mut *conn)
                .await?;
            }
            sqlx::query(
                "INSERT INTO messages (channel_id, ts, thread_ts, user_id, text, event_id, received_at, origin) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (channel_id, ts) DO NOTHING",
            )
            .bind(&message.channel)
            .bind(&message.ts)
            .bind(&message.thread_ts)
            .bind(&message.user)
            .bind(&message.text)
            .bind(&message.event_id)
            .bind(&now)
            .bind(message.origin.as_str())
            .execute(&mut *conn)
            .await?;
            Ok(true)
        }
        ScopeChange::MergeOrder {
            channel,
            post_id,
            digest,
            previous,
        } => {
            let written = match previous {
                None => sqlx::query(
                    "INSERT INTO merge_order (channel_id, post_id, digest, updated_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (channel_id) DO NOTHING",
                )
                .bind(channel)
                .bind(post_id)
                .bind(digest)
                .bind(&now)
                .execute(&mut *conn)
                .await?
                .rows_affected(),
                Some(previous) => sqlx::query(
                    "UPDATE merge_order SET digest = $1, updated_at = $2 \
                     WHERE channel_id = $3 AND post_id = $4 AND digest = $5",
                )
                .bind(digest)
                .bind(&now)
                .bind(channel)
                .bind(post_id)
                .bind(previous)
                .execute(&mut *conn)
                .await?
                .rows_affected(),
            };
            Ok(written == 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Change, NewRun};

    fn thread(ts: &str) -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: ts.into(),
        }
    }

    async fn with_plan(store: &Store, ts: &str, files: &[&str]) -> ThreadKey {
        let t = thread(ts);
        let msg = IncomingMessage {
            channel: t.channel.clone(),
            ts: ts.into(),
            thread_ts: ts.into(),
            user: "U1".into(),
            text: "work".into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        };
        store.record_message(&msg).await.unwrap();
        let plan = Plan {
            summary: format!("plan {ts}"),
            steps: vec!["do it".into()],
            files: files.iter().map(|f| (*f).to_owned()).collect(),
        };
        store.set_plan(&t, &plan.to_json().unwrap()).await.unwrap();
        t
    }

    async fn active_threads_carry_plan_branch_files_and_pull_request(store: &Store) {
        let a = with_plan(store, "1.1", &["auth/login.go"]).await;
        let b = with_plan(store, "2.2", &["README.md"]).await;
        // A thread with no plan (here: none of its messages handled yet) is not active.
        let c = thread("3.3");
        store
            .record_message(&IncomingMessage {
                channel: "C1".into(),
                ts: "3.3".into(),
                thread_ts: "3.3".into(),
                user: "U1".into(),
                text: "hi".into(),
                event_id: None,
                origin: crate::domain::Origin::Person,
            })
            .await
            .unwrap();
        store
            .create_run(NewRun {
                id: "r1",
                thread: &a,
                plan: "p",
                model: "m",
                worktree: "/w/a",
                branch: "codebutler/a",
                max_turns: 5,
            })
            .await
            .unwrap();
        store
            .record_pull_request(
                &a,
                &PullRequestRef {
                    number: 42,
                    url: "https://github.com/o/r/pull/42".into(),
                },
            )
            .await
            .unwrap();
        let files = [ScopeFile {
            path: "auth/login.go".into(),
            added: 3,
            removed: 2,
        }];
        let change = Change::Scope(ScopeChange::Files {
            thread: &a,
            head: "abc",
            files: &files,
        });
        assert!(store.commit(&[change], &[]).await.unwrap());
        let scopes = store.active_scopes().await.unwrap();
        let keys: Vec<&ThreadKey> = scopes.iter().map(|s| &s.thread).collect();
        assert_eq!(keys, [&a, &b]);
        let first = &scopes[0];
        assert_eq!(first.stage, Stage::PrOpened);
        assert_eq!(first.planned, ["auth/login.go"]);
        assert_eq!(first.changed, files);
        assert_eq!(first.head.as_deref(), Some("abc"));
        assert_eq!(first.branch.as_deref(), Some("codebutler/a"));
        assert_eq!(first.pull_request.as_ref().map(|p| p.number), Some(42));
        assert_eq!(first.summary.as_deref(), Some("plan 1.1"));
        let second = &scopes[1];
        assert_eq!((second.branch.as_ref(), second.head.as_ref()), (None, None));
        assert!(second.changed.is_empty());
        assert_eq!(
            store.thread_scope(&c).await.unwrap().map(|s| s.stage),
            Some(Stage::Created)
        );
        // Read again after a later run: the newer files replace the older.
        let later = [ScopeFile {
            path: "auth/session.go".into(),
            added: 1,
            removed: 0,
        }];
        let change = Change::Scope(ScopeChange::Files {
            thread: &a,
            head: "def",
            files: &later,
        });
        assert!(store.commit(&[change], &[]).await.unwrap());
        let now = store.thread_scope(&a).await.unwrap().unwrap();
        assert_eq!(
            (now.head.as_deref(), now.changed),
            (Some("def"), later.to_vec())
        );
    }

    async fn a_notice_is_given_once_and_never_refuses_its_commit(store: &Store) {
        let t = with_plan(store, "1.1", &[]).await;
        let keys = ["overlap:2.2:file:a/x.rs".to_owned()];
        let message = |ts: &str| IncomingMessage {
            channel: t.channel.clone(),
            ts: ts.into(),
            thread_ts: t.thread_ts.clone(),
            user: "codebutler:coordination".into(),
            text: "notice".into(),
            event_id: None,
            origin: crate::domain::Origin::Notice,
        };
        let first = message("1.5");
        let notice = Change::Scope(ScopeChange::Notice {
            thread: &t,
            keys: &keys,
            message: &first,
        });
        assert!(!store.notice_given(&t, &keys[0]).await.unwrap());
        assert!(store.commit(&[notice], &[]).await.unwrap());
        assert!(store.notice_given(&t, &keys[0]).await.unwrap());
        // Given again, with another key: the commit goes through, the notice is not stored.
        let again = message("1.6");
        let both = [keys[0].clone(), "dir:b/".to_owned()];
        let step = Change::StepDone {
            thread: &t,
            step: "after",
        };
        let notice = Change::Scope(ScopeChange::Notice {
            thread: &t,
            keys: &both,
            message: &again,
        });
        assert!(store.commit(&[notice, step], &[]).await.unwrap());
        assert!(store.step_done(&t, "after").await.unwrap());
        assert!(!store.notice_given(&t, "dir:b/").await.unwrap());
        let stored: Vec<String> = store
            .thread_messages(&t)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.ts)
            .collect();
        assert!(stored.contains(&"1.5".to_owned()), "{stored:?}");
        assert!(!stored.contains(&"1.6".to_owned()), "{stored:?}");
        assert!(!store.notice_given(&thread("2.2"), &keys[0]).await.unwrap());
    }

    async fn the_merge_order_is_written_against_what_it_said(store: &Store) {
        let first = Change::Scope(ScopeChange::MergeOrder {
            channel: "C1",
            post_id: "g/0",
            digest: "d1",
            previous: None,
        });
        assert!(store.commit(&[first], &[]).await.unwrap());
        // A second first post is refused: there is one message per channel.
        assert!(!store.commit(&[first], &[]).await.unwrap());
        let update = |previous, digest| {
            Change::Scope(ScopeChange::MergeOrder {
                channel: "C1",
                post_id: "g/0",
                digest,
                previous: Some(previous),
            })
        };
        assert!(!store.commit(&[update("stale", "d2")], &[]).await.unwrap());
        assert!(store.commit(&[update("d1", "d2")], &[]).await.unwrap());
        assert_eq!(
            store.merge_order("C1").await.unwrap(),
            Some(MergeOrderRecord {
                post_id: "g/0".into(),
                digest: "d2".into()
            })
        );
        assert_eq!(store.merge_order("C2").await.unwrap(), None);
    }

    crate::store::testing::on_both_backends!(
        active_threads_carry_plan_branch_files_and_pull_request,
        a_notice_is_given_once_and_never_refuses_its_commit,
        the_merge_order_is_written_against_what_it_said,
    );
}
