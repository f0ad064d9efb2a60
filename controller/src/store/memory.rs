//! Memory proposals waiting in their threads: at most one open per thread, with its items
//! (the operations, as edited so far) and the outbox id of its latest post.
//!
//! Proposing, each edit and the final yes/no are [`MemoryChange`]s recorded with the post
//! that reports them through [`super::Change::Memory`] (so with the message that asked,
//! marked processed): a crash before leaves the message pending and the proposal as it was,
//! a crash after leaves both done. Each change is guarded by what it read (the open
//! proposal and its revision), so a change can never apply twice or to a proposal that moved
//! on.

use sqlx::AnyConnection;

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey, now};
use crate::domain::MemoryTarget;
use crate::domain::memory_ops::Op;

/// An open proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenProposal {
    /// Its number in the thread (1, 2, …).
    pub seq: i64,
    /// Where its lines go once approved.
    pub target: MemoryTarget,
    /// The operations, as edited so far.
    pub items: Vec<Op>,
    /// How many edits it had.
    pub revision: i64,
}

/// A change to a thread's proposals, recorded by [`super::Store::commit`].
#[derive(Clone, Copy, Debug)]
pub enum MemoryChange<'a> {
    /// A new open proposal; records nothing (the commit returns false) if the thread has one.
    Proposed {
        thread: &'a ThreadKey,
        target: MemoryTarget,
        items: &'a [Op],
        post_id: &'a str,
    },
    /// The open proposal `seq`, read at `revision`, now holds `items`; records nothing if it
    /// is no longer open at that revision.
    Edited {
        thread: &'a ThreadKey,
        seq: i64,
        revision: i64,
        items: &'a [Op],
        post_id: &'a str,
    },
    /// The open proposal `seq` is saved (by `commit_sha`) or discarded (`None`); records
    /// nothing if it is no longer open.
    Settled {
        thread: &'a ThreadKey,
        seq: i64,
        commit_sha: Option<&'a str>,
    },
}

#[derive(sqlx::FromRow)]
struct ProposalRow {
    seq: i64,
    target: String,
    items: String,
    revision: i64,
}

fn corrupt(thread: &ThreadKey) -> impl FnOnce(serde_json::Error) -> StoreError + '_ {
    move |source| StoreError::Corrupt {
        thread: thread.to_string(),
        source,
    }
}

impl Store {
    /// The thread's open memory proposal, if it has one.
    pub async fn open_memory_proposal(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<OpenProposal>, StoreError> {
        let row = sqlx::query_as::<_, ProposalRow>(
            "SELECT seq, target, items, revision FROM memory_proposals \
             WHERE channel_id = $1 AND thread_ts = $2 AND state = 'open'",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let target = row.target.parse().map_err(|_| StoreError::UnknownValue {
            column: "memory_proposals.target",
            row: format!("{thread}/{}", row.seq),
            value: row.target.clone(),
        })?;
        let items = serde_json::from_str(&row.items).map_err(corrupt(thread))?;
        Ok(Some(OpenProposal {
            seq: row.seq,
            target,
            items,
            revision: row.revision,
        }))
    }
}

/// Applies one proposal change; false when its guard says the commit must not happen.
pub(super) async fn apply(
    conn: &mut AnyConnection,
    change: &MemoryChange<'_>,
) -> Result<bool, StoreError> {
    let now = now();
    let changed = match *change {
        MemoryChange::Proposed {
            thread,
            target,
            items,
            post_id,
        } => {
            let open = sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) AS n FROM memory_proposals \
                 WHERE channel_id = $1 AND thread_ts = $2 AND state = 'open'",
            )
            .bind_thread(thread)
            .fetch_one(&mut *conn)
            .await?;
            if open > 0 {
                return Ok(false);
            }
            let items = serde_json::to_string(items).map_err(corrupt(thread))?;
            sqlx::query(
                "INSERT INTO memory_proposals (channel_id, thread_ts, seq, target, items, state, \
                 revision, post_id, created_at, updated_at) \
                 SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, 'open', 0, $5, $6, $7 \
                 FROM memory_proposals WHERE channel_id = $8 AND thread_ts = $9",
            )
            .bind_thread(thread)
            .bind(target.as_str())
            .bind(items)
            .bind(post_id)
            .bind(&now)
            .bind(&now)
            .bind_thread(thread)
            .execute(&mut *conn)
            .await?
            .rows_affected()
        }
        MemoryChange::Edited {
            thread,
            seq,
            revision,
            items,
            post_id,
        } => {
            let items = serde_json::to_string(items).map_err(corrupt(thread))?;
            sqlx::query(
                "UPDATE memory_proposals SET items = $1, revision = revision + 1, post_id = $2, \
                 updated_at = $3 WHERE channel_id = $4 AND thread_ts = $5 AND seq = $6 \
                 AND revision = $7 AND state = 'open'",
            )
            .bind(items)
            .bind(post_id)
            .bind(&now)
            .bind_thread(thread)
            .bind(seq)
            .bind(revision)
            .execute(&mut *conn)
            .await?
            .rows_affected()
        }
        MemoryChange::Settled {
            thread,
            seq,
            commit_sha,
        } => sqlx::query(
            "UPDATE memory_proposals SET state = $1, commit_sha = $2, updated_at = $3 \
             WHERE channel_id = $4 AND thread_ts = $5 AND seq = $6 AND state = 'open'",
        )
        .bind(if commit_sha.is_some() {
            "saved"
        } else {
            "discarded"
        })
        .bind(commit_sha)
        .bind(&now)
        .bind_thread(thread)
        .bind(seq)
        .execute(&mut *conn)
        .await?
        .rows_affected(),
    };
    Ok(changed == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::memory_ops::Category;
    use crate::store::Change;

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    fn item(line: &str) -> Op {
        Op::Append {
            line: line.into(),
            category: Category::Project,
        }
    }

    async fn commit(store: &Store, change: MemoryChange<'_>) -> bool {
        store.commit(&[Change::Memory(change)], &[]).await.unwrap()
    }

    async fn one_open_proposal_per_thread_edited_once_per_revision_then_settled(store: &Store) {
        let t = thread();
        assert_eq!(store.open_memory_proposal(&t).await.unwrap(), None);
        let first = [item("- a"), item("- b")];
        let proposed = MemoryChange::Proposed {
            thread: &t,
            target: MemoryTarget::PrBranch,
            items: &first,
            post_id: "m/0",
        };
        assert!(commit(store, proposed).await);
        assert!(!commit(store, proposed).await, "a second open proposal");
        let open = store.open_memory_proposal(&t).await.unwrap().unwrap();
        assert_eq!(
            open,
            OpenProposal {
                seq: 1,
                target: MemoryTarget::PrBranch,
                items: first.to_vec(),
                revision: 0
            }
        );

        let edited = [item("- a")];
        let edit = MemoryChange::Edited {
            thread: &t,
            seq: 1,
            revision: 0,
            items: &edited,
            post_id: "m/1",
        };
        assert!(commit(store, edit).await);
        assert!(!commit(store, edit).await, "the same edit twice");
        let open = store.open_memory_proposal(&t).await.unwrap().unwrap();
        assert_eq!((open.items, open.revision), (edited.to_vec(), 1));

        let settle = MemoryChange::Settled {
            thread: &t,
            seq: 1,
            commit_sha: Some("abc"),
        };
        assert!(commit(store, settle).await);
        assert!(!commit(store, settle).await);
        assert_eq!(store.open_memory_proposal(&t).await.unwrap(), None);

        // A later proposal is the thread's second.
        assert!(
            commit(
                store,
                MemoryChange::Proposed {
                    thread: &t,
                    target: MemoryTarget::NewPullRequest,
                    items: &first,
                    post_id: "m/2",
                }
            )
            .await
        );
        let open = store.open_memory_proposal(&t).await.unwrap().unwrap();
        assert_eq!((open.seq, open.target), (2, MemoryTarget::NewPullRequest));
    }

    crate::store::testing::on_both_backends!(
        one_open_proposal_per_thread_edited_once_per_revision_then_settled,
    );
}
