//! What the dashboard reads of a repository's store: each thread as a line of its table,
//! and the spend grouped by day, model, role and person. Plain data; the queries are
//! `store/overview.rs`'s.

use super::{PullRequestRef, Stage, ThreadKey};

/// A thread as the dashboard lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadOverview {
    pub key: ThreadKey,
    pub stage: Stage,
    /// The Slack user who started it (who wrote its first message); `None` when that
    /// message is not stored (a thread started before the service watched the channel).
    pub started_by: Option<String>,
    /// Its first message, as Slack delivered it (the dashboard trims it to a title).
    pub first_message: Option<String>,
    pub pull_request: Option<PullRequestRef>,
    /// What its model calls cost, in USD.
    pub cost: f64,
    /// When it was stored and last changed (RFC 3339, UTC).
    pub created_at: String,
    pub updated_at: String,
}

/// The model calls of one day, model, role and person, summed.
#[derive(Clone, Debug, PartialEq)]
pub struct SpendRow {
    /// The day (UTC), `YYYY-MM-DD`.
    pub day: String,
    pub model: String,
    pub role: String,
    /// Who started the thread the calls were made for; `None` when unknown.
    pub person: Option<String>,
    pub calls: i64,
    pub tokens: i64,
    /// USD.
    pub cost: f64,
}
