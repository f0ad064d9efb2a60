//! A Coder run as the controller keeps it.

use super::ThreadKey;

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Queued,
    Running,
    Finished,
    Failed,
    Cancelled,
    Interrupted,
    /// Ended because no Coder model answered (the provider failing): nothing of the work is
    /// lost, and "continue" picks it up once the provider is back.
    Paused,
}

impl RunState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
            Self::Paused => "paused",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Queued,
            Self::Running,
            Self::Finished,
            Self::Failed,
            Self::Cancelled,
            Self::Interrupted,
            Self::Paused,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }

    /// Whether the run has ended.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

/// One run as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub id: String,
    pub thread: ThreadKey,
    pub state: RunState,
    pub plan: String,
    pub model: String,
    pub worktree: String,
    /// The run's own branch (`codebutler/<slug>`); empty for runs recorded before it was kept.
    pub branch: String,
    pub max_turns: i64,
    pub turns: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: f64,
    /// How it ended, in words ("completed: …", "stopped at the turn limit", "sandbox step …").
    pub ending: Option<String>,
    pub exit_code: Option<i64>,
    pub runner_pid: Option<i64>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
}
