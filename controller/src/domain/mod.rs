//! The controller's shared vocabulary: threads and messages, their states, plans, roles,
//! runs, usage and the Artist's drawings. Plain data with no database, Slack or network types in it, so every
//! module (the Slack adapter, the store, the PM, the Coder) can speak it without importing
//! another's internals.

mod attachment;
mod click;
mod costs;
mod drawing;
mod memory;
pub mod memory_ops;
mod notice;
mod overview;
mod plan;
mod role;
mod run;
mod thread;
mod thread_state;
mod usage;
mod watcher_event;

pub use attachment::{FileKind, FileState, SharedFile, StoredFile, image_part};
pub use click::{ButtonAction, Click};
pub use costs::{Costs, Line, UNKNOWN_PERSON};
pub use drawing::{Drawing, DrawingStage};
pub use memory::MemoryTarget;
pub use notice::{NOTICE_USER, notice_message, parse_notice};
pub use overview::{SpendRow, TITLE_CHARS, ThreadOverview, ThreadSpend, thread_title};
pub use plan::Plan;
pub use role::{Mention, Role};
pub use run::{RunRecord, RunState};
pub use thread::{Conversation, IncomingMessage, Origin, ThreadKey};
pub use thread_state::{Closure, PullRequestRef, Stage, ThreadState};
pub use usage::{ThreadSummary, UsageRecord, UsageTotals};
pub use watcher_event::{PrEvent, ReviewEvent, WATCHER_USER};

/// A duration as the thread shows it: `42s`, `3m 05s`.
pub fn duration_text(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn durations_read_in_seconds_then_minutes() {
        assert_eq!(super::duration_text(Duration::from_millis(999)), "0s");
        assert_eq!(super::duration_text(Duration::from_secs(59)), "59s");
        assert_eq!(super::duration_text(Duration::from_secs(185)), "3m 05s");
    }
}
