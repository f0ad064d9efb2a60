//! The last log lines, kept in memory for the dashboard's log page: a ring of the most
//! recent formatted lines (exactly what stderr and the log file get, so nothing a line
//! would not show elsewhere), and a broadcast of each new line. A new reader gets the ring
//! and then every line after it, with none lost or repeated between the two: both are taken
//! under the one lock a line is added under.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;

/// How many lines the ring keeps by default.
pub const DEFAULT_RING_LINES: usize = 1000;

/// Lines waiting for a slow reader before it starts losing them (it is told how many).
const LIVE_BACKLOG: usize = 1024;

/// The recent log lines and their live stream. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LogRing {
    inner: Arc<Mutex<Ring>>,
}

#[derive(Debug)]
struct Ring {
    lines: VecDeque<String>,
    capacity: usize,
    live: broadcast::Sender<String>,
}

impl Default for LogRing {
    fn default() -> Self {
        Self::new(DEFAULT_RING_LINES)
    }
}

impl LogRing {
    /// An empty ring keeping the last `capacity` lines.
    pub fn new(capacity: usize) -> Self {
        let (live, _) = broadcast::channel(LIVE_BACKLOG);
        Self {
            inner: Arc::new(Mutex::new(Ring {
                lines: VecDeque::with_capacity(capacity.min(DEFAULT_RING_LINES)),
                capacity,
                live,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds what one formatted event wrote (one line or more, each ending in a newline).
    pub fn push(&self, written: &[u8]) {
        let text = String::from_utf8_lossy(written);
        let mut ring = self.lock();
        for line in text.lines().filter(|l| !l.is_empty()) {
            if ring.lines.len() == ring.capacity {
                ring.lines.pop_front();
            }
            if ring.capacity > 0 {
                ring.lines.push_back(line.to_owned());
            }
            // Nobody reading is fine: the ring has it.
            let _ = ring.live.send(line.to_owned());
        }
    }

    /// The lines kept now, oldest first, and the lines added after them as they come.
    pub fn follow(&self) -> (Vec<String>, broadcast::Receiver<String>) {
        let ring = self.lock();
        (ring.lines.iter().cloned().collect(), ring.live.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_then_streams_the_next_ones() {
        let ring = LogRing::new(2);
        ring.push(b"one\n");
        ring.push(b"two\nthree\n");
        let (kept, mut live) = ring.follow();
        assert_eq!(kept, ["two", "three"]);
        ring.push(b"four\n");
        assert_eq!(live.try_recv().unwrap(), "four");
        assert!(live.try_recv().is_err());
        assert_eq!(ring.follow().0, ["three", "four"]);
    }
}
