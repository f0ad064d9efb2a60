//! The PM model a thread's people chose for it (`/codebutler pm <model>`), read by every PM
//! turn of the thread. It is written as a [`super::Change::PmModel`], with the thread's line
//! that says so.

use super::bind::BindThread;
use super::{Store, StoreError, ThreadKey};

/// A thread's own PM model: the OpenRouter id, and who chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPmModel {
    pub model: String,
    pub set_by: Option<String>,
}

impl Store {
    /// The PM model chosen for `thread`, if one was.
    pub async fn thread_pm_model(
        &self,
        thread: &ThreadKey,
    ) -> Result<Option<ThreadPmModel>, StoreError> {
        let row = sqlx::query_as::<_, (Option<String>, Option<String>)>(
            "SELECT pm_model, pm_model_set_by FROM threads WHERE channel_id = $1 AND thread_ts = $2",
        )
        .bind_thread(thread)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(|(model, set_by)| model.map(|model| ThreadPmModel { model, set_by })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Change;
    use crate::store::testing::message;

    async fn a_threads_pm_model_is_kept_with_who_chose_it(s: &Store) {
        let msg = message("1.1", "1.1", "hi");
        s.record_message(&msg).await.unwrap();
        let t = msg.thread();
        assert_eq!(s.thread_pm_model(&t).await.unwrap(), None);
        for model in ["a/small", "b/large"] {
            let change = Change::PmModel {
                thread: &t,
                model,
                user: "U2",
            };
            s.commit(&[change], &[]).await.unwrap();
        }
        assert_eq!(
            s.thread_pm_model(&t).await.unwrap(),
            Some(ThreadPmModel {
                model: "b/large".into(),
                set_by: Some("U2".into())
            })
        );
    }

    crate::store::testing::on_both_backends!(a_threads_pm_model_is_kept_with_who_chose_it);
}
