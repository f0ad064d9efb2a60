//! Who may use the bot and how much (`access`), and how it works with GitHub (`github`:
//! the CLI, the merge strategy, the PR watcher's interval, the review loop's bots, cap,
//! quiet period, whose comments it acts on and how often it sorts them).

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::origin::Origin;

/// How `gh pr merge` merges (`github.mergeStrategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeStrategy {
    /// One commit with every change of the branch (the default).
    #[default]
    Squash,
    /// A merge commit.
    Merge,
    /// The branch's commits replayed on the base.
    Rebase,
}

impl MergeStrategy {
    /// Every strategy, as the configuration names them.
    pub const ALL: [MergeStrategy; 3] = [Self::Squash, Self::Merge, Self::Rebase];

    /// The configuration's name: `squash`, `merge`, `rebase`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Squash => "squash",
            Self::Merge => "merge",
            Self::Rebase => "rebase",
        }
    }

    /// The strategy a configuration names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// Who may use the bot and how much.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessConfig {
    pub max_concurrent_threads: u32,
    /// Coder model calls the runs one person started may make in an hour; 0: no limit.
    pub max_claude_calls_per_hour: u32,
    /// What the whole repository may spend in a UTC day, in USD, before a new Coder run is
    /// refused; 0: no cap.
    pub max_cost_per_day: f64,
    /// What the runs one person started may spend in a UTC day, in USD; 0: no cap.
    pub max_cost_per_user_per_day: f64,
    /// Slack user ids allowed to talk to the bot; empty means everyone in the channel.
    pub allowed_users: Vec<String>,
    /// Slack user ids who may steer the work (approve plans, close, rebase, undo, approve
    /// review rounds and memory); empty means everyone allowed is a developer.
    pub developers: Vec<String>,
    /// Disk the worktrees under `.codebutler/branches/` may use together, in MB; 0 means
    /// no limit.
    pub max_worktree_disk_mb: u64,
}

/// How the daemon works with GitHub.
#[derive(Clone, Debug, PartialEq)]
pub struct GithubConfig {
    /// The `gh` executable (a name looked up on PATH, or a path).
    pub cli: String,
    /// How "merge" in a thread merges its pull request.
    pub merge_strategy: MergeStrategy,
    /// How often the PR watcher polls the open pull requests of the threads.
    pub pr_watch_interval: Duration,
    /// Logins whose comments on a pull request never start a review round.
    pub ignore_bots: Vec<String>,
    /// Most automatic review rounds per pull request.
    pub max_review_rounds: u32,
    /// How long no new review comment must arrive before a batch is proposed.
    pub review_quiet: Duration,
    /// Whose comments on a pull request the review loop acts on.
    pub review_from: ReviewFrom,
    /// Most sorting calls per pull request in any hour, whatever they find.
    pub max_sorts_per_hour: u32,
    /// What reviewers said that makes "merge" wait (`github.mergeChecks`).
    pub merge_checks: MergeChecks,
}

/// What reviewers said that makes "merge" in a thread refuse (until "merge anyway")
/// (`github.mergeChecks`): each check on its own, both on by default, since a repository
/// without branch protection lets GitHub merge over a reviewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeChecks {
    /// A reviewer's latest review requests changes (`changesRequested`).
    pub changes_requested: bool,
    /// A review thread (line comments) is not resolved (`unresolvedThreads`).
    pub unresolved_threads: bool,
}

impl Default for MergeChecks {
    fn default() -> Self {
        Self {
            changes_requested: true,
            unresolved_threads: true,
        }
    }
}

/// What a file may say in `github.mergeChecks`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MergeChecksFile {
    changes_requested: Option<bool>,
    unresolved_threads: Option<bool>,
}

impl MergeChecksFile {
    /// The checks, each on unless the file turns it off.
    fn resolve(self) -> MergeChecks {
        let on = MergeChecks::default();
        MergeChecks {
            changes_requested: self.changes_requested.unwrap_or(on.changes_requested),
            unresolved_threads: self.unresolved_threads.unwrap_or(on.unresolved_threads),
        }
    }
}

/// Whose comments on a pull request the review loop acts on (`github.reviewFrom`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReviewFrom {
    /// People with write access to the repository (the default): anyone else's comments are
    /// named in the thread and never reach a model.
    #[default]
    Write,
    /// Anyone who can comment: on a public repository, anyone on the internet.
    Anyone,
}

impl ReviewFrom {
    /// The configuration's name: `write` or `anyone`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Anyone => "anyone",
        }
    }

    /// The setting a configuration names.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Write, Self::Anyone]
            .into_iter()
            .find(|r| r.as_str() == name)
    }
}

/// Most `github.maxReviewRounds` may be.
const MAX_REVIEW_ROUNDS: u32 = 100;
/// Longest `github.reviewQuietSecs` may be: a day.
const MAX_QUIET_SECS: u64 = 86_400;

/// Most `github.maxSortsPerHour` may be.
const MAX_SORTS_PER_HOUR: u32 = 60;

/// Longest `github.prWatchIntervalSecs` may be: a day.
const MAX_WATCH_INTERVAL_SECS: u64 = 86_400;

/// What a file may say in `access`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct AccessFile {
    max_concurrent_threads: Option<u32>,
    max_claude_calls_per_hour: Option<u32>,
    max_cost_per_day: Option<f64>,
    max_cost_per_user_per_day: Option<f64>,
    #[serde(default)]
    allowed_users: Vec<String>,
    #[serde(default)]
    developers: Vec<String>,
    #[serde(rename = "maxWorktreeDiskMB")]
    max_worktree_disk_mb: Option<u64>,
}

impl AccessFile {
    /// The section with its defaults; every allowed user and developer must look like a
    /// Slack user id.
    pub fn resolve(self, origin: &Origin) -> Result<AccessConfig, ConfigError> {
        for (field, users) in [
            ("access.allowedUsers", &self.allowed_users),
            ("access.developers", &self.developers),
        ] {
            if let Some(user) = users
                .iter()
                .find(|u| !u.starts_with('U') && !u.starts_with('W'))
            {
                return Err(origin.field_error(
                    field,
                    format!("`{user}` is not a Slack user id (they look like U0123ABCD)"),
                ));
            }
        }
        let dollars = |field: &str, value: Option<f64>| match value {
            None => Ok(0.0),
            Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Some(v) => Err(origin.field_error(
                field,
                format!("{v} is not an amount of US dollars (0 or more; 0 means no cap)"),
            )),
        };
        let max_cost_per_day = dollars("access.maxCostPerDay", self.max_cost_per_day)?;
        let max_cost_per_user_per_day = dollars(
            "access.maxCostPerUserPerDay",
            self.max_cost_per_user_per_day,
        )?;
        Ok(AccessConfig {
            max_cost_per_day,
            max_cost_per_user_per_day,
            max_concurrent_threads: self.max_concurrent_threads.unwrap_or(5),
            max_claude_calls_per_hour: self.max_claude_calls_per_hour.unwrap_or(20),
            allowed_users: self.allowed_users,
            developers: self.developers,
            max_worktree_disk_mb: self.max_worktree_disk_mb.unwrap_or(0),
        })
    }
}

/// What a file may say in `github`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct GithubFile {
    cli: Option<String>,
    merge_strategy: Option<String>,
    pr_watch_interval_secs: Option<u64>,
    ignore_bots: Option<Vec<String>>,
    max_review_rounds: Option<u32>,
    review_quiet_secs: Option<u64>,
    review_from: Option<String>,
    max_sorts_per_hour: Option<u32>,
    merge_checks: Option<MergeChecksFile>,
}

impl GithubFile {
    /// The section with its defaults: `gh`, squash, 60 s, no bots, 3 rounds, 90 s, comments
    /// from people with write access, 6 sorting calls an hour, both merge checks on; the strategy must be one of
    /// squash, merge, rebase, the interval between 1 s and a day, the rounds at most 100,
    /// the quiet period at most a day, no bot login empty, `reviewFrom` one of write,
    /// anyone, and the sorting calls between 1 and 60 an hour.
    pub fn resolve(self, origin: &Origin) -> Result<GithubConfig, ConfigError> {
        let merge_strategy = match self.merge_strategy {
            None => MergeStrategy::default(),
            Some(name) => MergeStrategy::parse(&name).ok_or_else(|| {
                origin.field_error(
                    "github.mergeStrategy",
                    format!("`{name}` is not one of squash, merge, rebase"),
                )
            })?,
        };
        let secs = self.pr_watch_interval_secs.unwrap_or(60);
        if !(1..=MAX_WATCH_INTERVAL_SECS).contains(&secs) {
            return Err(origin.field_error(
                "github.prWatchIntervalSecs",
                format!("{secs} is not between 1 and {MAX_WATCH_INTERVAL_SECS} seconds"),
            ));
        }
        let ignore_bots = self.ignore_bots.unwrap_or_default();
        if ignore_bots.iter().any(|login| login.trim().is_empty()) {
            return Err(origin.field_error("github.ignoreBots", "a login is empty".to_owned()));
        }
        let max_review_rounds = self.max_review_rounds.unwrap_or(3);
        if max_review_rounds > MAX_REVIEW_ROUNDS {
            return Err(origin.field_error(
                "github.maxReviewRounds",
                format!("{max_review_rounds} is more than {MAX_REVIEW_ROUNDS}"),
            ));
        }
        let quiet = self.review_quiet_secs.unwrap_or(90);
        if quiet > MAX_QUIET_SECS {
            return Err(origin.field_error(
                "github.reviewQuietSecs",
                format!("{quiet} is more than {MAX_QUIET_SECS} seconds"),
            ));
        }
        let review_from = match self.review_from {
            None => ReviewFrom::default(),
            Some(name) => ReviewFrom::parse(&name).ok_or_else(|| {
                origin.field_error(
                    "github.reviewFrom",
                    format!("`{name}` is not one of write, anyone"),
                )
            })?,
        };
        let max_sorts_per_hour = self.max_sorts_per_hour.unwrap_or(6);
        if !(1..=MAX_SORTS_PER_HOUR).contains(&max_sorts_per_hour) {
            return Err(origin.field_error(
                "github.maxSortsPerHour",
                format!("{max_sorts_per_hour} is not between 1 and {MAX_SORTS_PER_HOUR}"),
            ));
        }
        Ok(GithubConfig {
            cli: self.cli.unwrap_or_else(|| "gh".into()),
            merge_strategy,
            pr_watch_interval: Duration::from_secs(secs),
            ignore_bots,
            max_review_rounds,
            review_quiet: Duration::from_secs(quiet),
            review_from,
            max_sorts_per_hour,
            merge_checks: self.merge_checks.unwrap_or_default().resolve(),
        })
    }
}
