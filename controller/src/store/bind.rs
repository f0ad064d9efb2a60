//! A thread's key bound to a query: every table keys a thread's rows by `(channel_id,
//! thread_ts)`, and most queries bind the two one after the other; [`BindThread`] binds them
//! in one call, so a query cannot bind one without the other or swap them.

use sqlx::Any;
use sqlx::any::AnyArguments;
use sqlx::query::{Query, QueryAs, QueryScalar};

use crate::domain::ThreadKey;

/// Binds a thread's key as the query's next two parameters: its channel, then its
/// `thread_ts`.
pub(super) trait BindThread<'q> {
    /// The query with `thread`'s channel and `thread_ts` bound next.
    fn bind_thread(self, thread: &'q ThreadKey) -> Self;
}

impl<'q> BindThread<'q> for Query<'q, Any, AnyArguments<'q>> {
    fn bind_thread(self, thread: &'q ThreadKey) -> Self {
        self.bind(&thread.channel).bind(&thread.thread_ts)
    }
}

impl<'q, O> BindThread<'q> for QueryAs<'q, Any, O, AnyArguments<'q>> {
    fn bind_thread(self, thread: &'q ThreadKey) -> Self {
        self.bind(&thread.channel).bind(&thread.thread_ts)
    }
}

impl<'q, O> BindThread<'q> for QueryScalar<'q, Any, O, AnyArguments<'q>> {
    fn bind_thread(self, thread: &'q ThreadKey) -> Self {
        self.bind(&thread.channel).bind(&thread.thread_ts)
    }
}
