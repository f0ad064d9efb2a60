//! `build.maxConcurrentBuilds`: how many worktree preparations run at once on this machine.
//! A preparation (an Xcode build, a large Node or Python install) can take the machine, so
//! one limit is shared by every repository the service serves; the others wait in the order
//! they asked (a fair semaphore), and a thread that has to wait is told once how many
//! preparations are ahead of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The machine's preparation slots (cloned, they are the same slots).
#[derive(Clone, Debug, Default)]
pub struct BuildSlots {
    /// `None`: no limit.
    limit: Option<Limit>,
}

#[derive(Clone, Debug)]
struct Limit {
    max: usize,
    slots: Arc<Semaphore>,
    /// Preparations waiting for a slot.
    waiting: Arc<AtomicUsize>,
}

/// A preparation's slot, given back when dropped.
#[derive(Debug)]
pub struct BuildSlot {
    _permit: Option<OwnedSemaphorePermit>,
}

/// Whether a preparation got its slot at once or must wait.
#[derive(Debug)]
pub enum Turn {
    /// Its slot: it goes now.
    Now(BuildSlot),
    /// `ahead` preparations run or wait before it; [`Queued::wait`] gives its slot.
    Queued { ahead: usize, queued: Queued },
}

/// A place in the queue for a slot.
#[derive(Debug)]
pub struct Queued {
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
}

impl BuildSlots {
    /// At most `max` preparations at once; 0 for no limit.
    pub fn new(max: u32) -> Self {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        Self {
            limit: (max > 0).then(|| Limit {
                max,
                slots: Arc::new(Semaphore::new(max)),
                waiting: Arc::new(AtomicUsize::new(0)),
            }),
        }
    }

    /// A slot now if one is free (or there is no limit), else a place in the queue and how
    /// many preparations are ahead of it.
    pub fn take(&self) -> Turn {
        let Some(limit) = &self.limit else {
            return Turn::Now(BuildSlot { _permit: None });
        };
        // Freed slots go to those waiting first, so one is free only when nobody waits.
        if let Ok(permit) = limit.slots.clone().try_acquire_owned() {
            return Turn::Now(BuildSlot {
                _permit: Some(permit),
            });
        }
        let running = limit.max.saturating_sub(limit.slots.available_permits());
        let ahead = running + limit.waiting.fetch_add(1, Ordering::SeqCst);
        Turn::Queued {
            ahead,
            queued: Queued {
                slots: limit.slots.clone(),
                waiting: limit.waiting.clone(),
            },
        }
    }
}

impl Queued {
    /// Waits for the slot, in the order the queue was joined.
    pub async fn wait(self) -> BuildSlot {
        let permit = self.slots.clone().acquire_owned().await.ok();
        BuildSlot { _permit: permit }
    }
}

impl Drop for Queued {
    /// Leaves the queue, whether it got its slot or gave up.
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_limit_every_preparation_goes_at_once() {
        let slots = BuildSlots::new(0);
        let turns: Vec<Turn> = (0..5).map(|_| slots.take()).collect();
        assert!(turns.iter().all(|t| matches!(t, Turn::Now(_))));
    }

    #[tokio::test]
    async fn past_the_limit_each_waits_in_order_knowing_how_many_are_ahead() {
        let slots = BuildSlots::new(1);
        let Turn::Now(first) = slots.take() else {
            panic!("the first preparation waits")
        };
        let Turn::Queued { ahead, queued } = slots.take() else {
            panic!("the second goes at once")
        };
        assert_eq!(ahead, 1);
        let Turn::Queued {
            ahead: third_ahead,
            queued: third,
        } = slots.take()
        else {
            panic!("the third goes at once")
        };
        assert_eq!(third_ahead, 2);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (o2, o3) = (order.clone(), order.clone());
        let second = tokio::spawn(async move {
            let slot = queued.wait().await;
            o2.lock().unwrap().push(2);
            slot
        });
        tokio::task::yield_now().await;
        let third = tokio::spawn(async move {
            let slot = third.wait().await;
            o3.lock().unwrap().push(3);
            slot
        });
        tokio::task::yield_now().await;
        assert!(order.lock().unwrap().is_empty());
        drop(first);
        let second_slot = second.await.unwrap();
        assert_eq!(*order.lock().unwrap(), [2]);
        drop(second_slot);
        drop(third.await.unwrap());
        assert_eq!(*order.lock().unwrap(), [2, 3]);
        // Everyone left the queue: the next goes at once.
        assert!(matches!(slots.take(), Turn::Now(_)));
    }

    #[tokio::test]
    async fn a_preparation_that_gives_up_leaves_the_queue() {
        let slots = BuildSlots::new(1);
        let Turn::Now(_first) = slots.take() else {
            panic!("the first preparation waits")
        };
        let Turn::Queued { queued, .. } = slots.take() else {
            panic!("the second goes at once")
        };
        drop(queued);
        let Turn::Queued { ahead, .. } = slots.take() else {
            panic!("the third goes at once")
        };
        assert_eq!(ahead, 1);
    }
}
