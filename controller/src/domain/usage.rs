//! What model calls cost, and threads as the PM lists them.

use super::{PullRequestRef, Stage, ThreadKey};

/// The usage of one model call.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageRecord {
    pub thread: ThreadKey,
    pub role: String,
    pub model: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cached_tokens: i64,
    /// Cost in USD as the provider reported it, if it did.
    pub cost: Option<f64>,
    /// How long the call took, retries included (ms).
    pub duration_ms: i64,
}

/// Totals of a thread's usage.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsageTotals {
    pub calls: i64,
    pub prompt_tokens: i64,
    /// The part of `prompt_tokens` read from the provider's prompt cache.
    pub cached_tokens: i64,
    pub completion_tokens: i64,
    pub cost: f64,
}

/// A thread as listed for the PM.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSummary {
    pub key: ThreadKey,
    pub stage: Stage,
    pub plan: Option<String>,
    /// The pull request its Coder opened, if one was.
    pub pull_request: Option<PullRequestRef>,
    pub updated_at: String,
}
