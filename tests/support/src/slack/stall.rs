//! Answers held back after Slack acted on a call ([`super::FakeSlack::stall_next`]), so a
//! test can kill the client between the effect and the answer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{FakeSlack, Inner};

/// The longest a stalled answer is held (the client is normally killed long before).
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// One armed [`FakeSlack::stall_next`].
#[derive(Default)]
pub(super) struct StallPoint {
    reached: Notify,
    released: Notify,
}

impl StallPoint {
    /// Says the call was done, then holds its answer until released (or [`STALL_LIMIT`]).
    pub(super) async fn hold(&self) {
        self.reached.notify_one();
        let _ = tokio::time::timeout(STALL_LIMIT, self.released.notified()).await;
    }
}

/// A stalled call, from [`FakeSlack::stall_next`]. Dropping it releases the answer, or
/// disarms the stall if no call reached it.
pub struct Stall {
    point: Arc<StallPoint>,
    method: String,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stall").finish_non_exhaustive()
    }
}

impl Stall {
    /// Waits until the stalled call was done by Slack (its effect recorded, its answer held).
    pub async fn reached(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.point.reached.notified())
            .await
            .is_ok()
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        if st
            .stalls
            .get(&self.method)
            .is_some_and(|armed| Arc::ptr_eq(armed, &self.point))
        {
            st.stalls.remove(&self.method);
        }
        self.point.released.notify_one();
    }
}

impl FakeSlack {
    /// Arms a stall: the next successful call of `method` takes effect as usual (a post is
    /// posted, a reaction added), but its answer is held until the returned [`Stall`] is
    /// dropped. A test kills the client meanwhile to crash it between Slack doing something
    /// and the client learning of it. Arming again replaces an unused stall.
    pub fn stall_next(&self, method: &str) -> Stall {
        let point = Arc::new(StallPoint::default());
        self.inner
            .lock()
            .stalls
            .insert(method.to_owned(), point.clone());
        Stall {
            point,
            method: method.to_owned(),
            inner: self.inner.clone(),
        }
    }
}
