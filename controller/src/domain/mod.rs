//! The controller's shared vocabulary: threads and messages, their states, plans, roles,
//! runs and usage. Plain data with no database, Slack or network types in it, so every
//! module (the Slack adapter, the store, the PM, the Coder) can speak it without importing
//! another's internals.

mod click;
mod plan;
mod role;
mod run;
mod thread;
mod thread_state;
mod usage;

pub use click::{ButtonAction, Click};
pub use plan::Plan;
pub use role::{Mention, Role};
pub use run::{RunRecord, RunState};
pub use thread::{IncomingMessage, ThreadKey};
pub use thread_state::{Closure, PullRequestRef, Stage, ThreadState};
pub use usage::{ThreadSummary, UsageRecord, UsageTotals};
