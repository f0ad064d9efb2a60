//! The bookkeeping of speculative preparations, as plain data: which threads have one, in
//! the order they began, and when each thread was last active. Which preparation goes when
//! (the oldest past the limit, the idle ones) is decided here, with the time passed in, so
//! the rules are unit-tested without a clock; [`super::Ahead`] applies the decisions.

use std::time::{Duration, Instant};

/// One thread's entry.
#[derive(Debug)]
struct Entry<T> {
    thread_ts: String,
    last_active: Instant,
    item: T,
}

/// The threads with a speculative preparation, oldest first.
#[derive(Debug)]
pub struct Book<T> {
    entries: Vec<Entry<T>>,
}

impl<T> Default for Book<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

/// What a proposed plan gets.
#[derive(Debug, PartialEq)]
pub enum Proposed<T> {
    /// The thread has a preparation already (a revised plan): it is kept, and the thread is
    /// active again. One that failed is not kept: it is discarded and a new one booked.
    Reused,
    /// A new preparation was booked; `discarded` are the oldest ones it pushed past the limit.
    Booked { discarded: Vec<T> },
    /// No preparation: the limit is 0.
    Off,
}

impl<T> Book<T> {
    /// Books `item` for the thread `thread_ts`, active at `now`, unless the thread has one
    /// that is still `usable`: at most `max` are kept, the oldest discarded first. `item` is
    /// only made when booked.
    pub fn propose(
        &mut self,
        thread_ts: &str,
        now: Instant,
        max: usize,
        usable: impl Fn(&T) -> bool,
        item: impl FnOnce() -> T,
    ) -> Proposed<T> {
        let mut discarded = Vec::new();
        if let Some(at) = self.entries.iter().position(|e| e.thread_ts == thread_ts) {
            if usable(&self.entries[at].item) {
                self.touch(thread_ts, now);
                return Proposed::Reused;
            }
            discarded.push(self.entries.remove(at).item);
        }
        if max == 0 {
            return match discarded.is_empty() {
                true => Proposed::Off,
                false => Proposed::Booked { discarded },
            };
        }
        let over = (self.entries.len() + 1).saturating_sub(max);
        discarded.extend(self.entries.drain(..over).map(|e| e.item));
        self.entries.push(Entry {
            thread_ts: thread_ts.to_owned(),
            last_active: now,
            item: item(),
        });
        Proposed::Booked { discarded }
    }

    /// Marks the thread active at `now`; false when it has no preparation.
    pub fn touch(&mut self, thread_ts: &str, now: Instant) -> bool {
        match self.entries.iter_mut().find(|e| e.thread_ts == thread_ts) {
            Some(entry) => {
                entry.last_active = entry.last_active.max(now);
                true
            }
            None => false,
        }
    }

    /// Takes the thread's preparation out of the book.
    pub fn take(&mut self, thread_ts: &str) -> Option<T> {
        let at = self.entries.iter().position(|e| e.thread_ts == thread_ts)?;
        Some(self.entries.remove(at).item)
    }

    /// Takes the oldest preparation but the thread `except`'s.
    pub fn take_oldest_except(&mut self, except: &str) -> Option<T> {
        let at = self.entries.iter().position(|e| e.thread_ts != except)?;
        Some(self.entries.remove(at).item)
    }

    /// Takes the preparations of threads quiet for `idle` or longer at `now`.
    pub fn take_idle(&mut self, now: Instant, idle: Duration) -> Vec<T> {
        let (quiet, active): (Vec<_>, Vec<_>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|e| now.saturating_duration_since(e.last_active) >= idle);
        self.entries = active;
        quiet.into_iter().map(|e| e.item).collect()
    }

    /// Takes every preparation.
    pub fn take_all(&mut self) -> Vec<T> {
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| e.item)
            .collect()
    }

    /// How many preparations are booked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, mins: u64) -> Instant {
        start + Duration::from_secs(mins * 60)
    }

    fn usable(_: &&str) -> bool {
        true
    }

    #[test]
    fn past_the_limit_the_oldest_is_discarded() {
        let t0 = Instant::now();
        let mut book = Book::default();
        assert_eq!(
            book.propose("a", t0, 2, usable, || "A"),
            Proposed::Booked { discarded: vec![] }
        );
        assert_eq!(
            book.propose("b", at(t0, 1), 2, usable, || "B"),
            Proposed::Booked { discarded: vec![] }
        );
        // "a" is the oldest, though more recently active than "b": the order is the start's.
        assert!(book.touch("a", at(t0, 2)));
        assert_eq!(
            book.propose("c", at(t0, 3), 2, usable, || "C"),
            Proposed::Booked {
                discarded: vec!["A"]
            }
        );
        assert_eq!(book.len(), 2);
        assert_eq!(book.take("a"), None);
        assert_eq!(book.take("b"), Some("B"));
        assert_eq!(book.take("c"), Some("C"));
    }

    #[test]
    fn a_lower_limit_discards_as_many_as_it_takes_and_zero_books_nothing() {
        let t0 = Instant::now();
        let mut book = Book::default();
        for (i, thread) in ["a", "b", "c"].into_iter().enumerate() {
            book.propose(thread, at(t0, i as u64), 3, usable, || thread);
        }
        assert_eq!(
            book.propose("d", at(t0, 4), 1, usable, || "d"),
            Proposed::Booked {
                discarded: vec!["a", "b", "c"]
            }
        );
        assert_eq!(
            book.propose("e", at(t0, 5), 0, usable, || "e"),
            Proposed::Off
        );
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn a_revised_plan_reuses_the_threads_preparation() {
        let t0 = Instant::now();
        let mut book = Book::default();
        book.propose("a", t0, 2, |_| true, || 1);
        let mut made = false;
        assert_eq!(
            book.propose(
                "a",
                at(t0, 10),
                2,
                |_| true,
                || {
                    made = true;
                    2
                }
            ),
            Proposed::Reused
        );
        assert!(!made, "no second preparation is made");
        // One that failed gives way to a new one for the revised plan.
        assert_eq!(
            book.propose("a", at(t0, 11), 2, |item| *item != 1, || 3),
            Proposed::Booked { discarded: vec![1] }
        );
        assert_eq!(book.take("a"), Some(3));
    }

    #[test]
    fn a_quiet_thread_expires_and_activity_keeps_it() {
        let t0 = Instant::now();
        let idle = Duration::from_secs(30 * 60);
        let mut book = Book::default();
        book.propose("quiet", t0, 2, usable, || "quiet");
        book.propose("busy", t0, 2, usable, || "busy");
        assert!(book.take_idle(at(t0, 29), idle).is_empty());
        book.touch("busy", at(t0, 20));
        // A revised plan counts as activity too.
        assert_eq!(book.take_idle(at(t0, 30), idle), vec!["quiet"]);
        assert_eq!(book.take_idle(at(t0, 49), idle), Vec::<&str>::new());
        assert_eq!(
            book.propose("busy", at(t0, 45), 2, usable, || "x"),
            Proposed::Reused
        );
        assert_eq!(book.take_idle(at(t0, 74), idle), Vec::<&str>::new());
        assert_eq!(book.take_idle(at(t0, 75), idle), vec!["busy"]);
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn disk_pressure_takes_the_oldest_of_the_other_threads() {
        let t0 = Instant::now();
        let mut book = Book::default();
        book.propose("a", t0, 3, usable, || "a");
        book.propose("b", at(t0, 1), 3, usable, || "b");
        assert_eq!(book.take_oldest_except("a"), Some("b"));
        assert_eq!(book.take_oldest_except("a"), None);
        assert_eq!(book.take_all(), vec!["a"]);
    }
}
