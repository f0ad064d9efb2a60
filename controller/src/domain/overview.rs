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

/// A thread's model calls over a time, summed (the weekly report's most expensive threads).
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSpend {
    pub key: ThreadKey,
    /// Who started it; `None` when its first message is not stored.
    pub started_by: Option<String>,
    /// Its first message, as Slack delivered it.
    pub first_message: Option<String>,
    pub calls: i64,
    /// USD.
    pub cost: f64,
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

/// The most characters of a thread's title shown (the dashboard, the weekly report).
pub const TITLE_CHARS: usize = 80;

/// A thread's title: the first non-empty line of its first message, cut to
/// [`TITLE_CHARS`] with an ellipsis.
pub fn thread_title(first_message: Option<&str>) -> String {
    let line = first_message
        .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("");
    if line.chars().count() > TITLE_CHARS {
        let cut: String = line.chars().take(TITLE_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_line_cut() {
        assert_eq!(
            thread_title(Some("\n  fix login  \nmore text")),
            "fix login"
        );
        let long = "x".repeat(200);
        let cut = thread_title(Some(&long));
        assert_eq!(cut.chars().count(), TITLE_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(thread_title(None), "");
    }
}
