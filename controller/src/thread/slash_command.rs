//! The `/codebutler` command, answered to the person who typed it alone: `status` (this
//! repository's open threads, its Coder runs and their queue, the day's spend), `cost` (the
//! day's and the week's spend, yours and the team's, against the caps), `pm <model>` (the
//! model one thread's PM answers with, [`crate::thread::pm_choice`]) and `help`.
//!
//! Slack hands a slash command over Socket Mode in an envelope that must be acknowledged
//! within 3 seconds, and the acknowledgement may carry the answer; so the answer is read from
//! the store at once and returned ([`SlashCommands::answer`]), never posted in the channel. A
//! command names no thread (Slack does not send the thread it was typed in), so every answer
//! is about the channel's repository as a whole (`pm` names its thread in its words, or takes
//! the person's latest). Only people allowed in the channel
//! (`access.allowedUsers`) get figures.
//!
//! The words are parsed by [`parse`] and each answer is made by a pure function of what the
//! store holds ([`status_text`], [`cost_text`]), so both are tested by equality.

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, Duration, Utc};

use crate::domain::{RunRecord, RunState, ThreadOverview, thread_title};
use crate::gateway::caps::Caps;
use crate::slack::format::escape_text;
use crate::store::{Store, StoreError};
use crate::thread::pm_choice::{PmChoice, PmChoiceError};

/// The command as Slack's manifest names it.
pub const COMMAND: &str = "/codebutler";
/// At most this many open threads are listed by `status`.
const LISTED_THREADS: usize = 15;
/// Threads read back for `status` (open ones are found among the latest changed).
const READ_THREADS: i64 = 200;
/// Active runs read back for `status`.
const READ_RUNS: i64 = 100;

/// What the command's words ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Status,
    Cost,
    Help,
    /// `pm …`: the words after `pm`.
    Pm(String),
    /// A word the command does not know (answered with the help).
    Unknown(String),
}

/// The request the command's text makes: its first word, in any case; nothing is `help`.
pub fn parse(text: &str) -> Request {
    let word = text.split_whitespace().next().unwrap_or("").to_lowercase();
    match word.as_str() {
        "status" => Request::Status,
        "cost" | "costs" | "spend" => Request::Cost,
        "" | "help" => Request::Help,
        "pm" => Request::Pm(
            text.trim_start()
                .get(2..)
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
        _ => Request::Unknown(word),
    }
}

/// What answering the command needs: the repository's store, who is allowed, its caps.
#[derive(Clone, Debug)]
pub struct SlashCommands {
    /// The repository's channel: `status` lists its threads.
    pub channel: String,
    pub store: Store,
    /// `access.allowedUsers` (empty: everyone in the channel).
    pub allowed_users: Vec<String>,
    /// The caps across threads, shown beside the spend.
    pub caps: Caps,
    /// `pm <model>`: a thread's PM model.
    pub pm: PmChoice,
}

/// Why the command could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum Unanswered {
    #[error("read the store for {COMMAND}: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    PmChoice(#[from] PmChoiceError),
}

impl SlashCommands {
    /// The answer, in mrkdwn, to `user` typing `/codebutler <text>` in `channel` at `now`.
    pub async fn answer(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        now: DateTime<Utc>,
    ) -> Result<String, Unanswered> {
        if !self.allowed_users.is_empty() && !self.allowed_users.iter().any(|u| u == user) {
            return Ok(format!(
                "{COMMAND} answers the people this channel's CodeButler works for \
                 (`access.allowedUsers`); ask one of them to add you."
            ));
        }
        match parse(text) {
            Request::Help => Ok(help_text(None)),
            Request::Unknown(word) => Ok(help_text(Some(&word))),
            Request::Pm(words) => Ok(self.pm.answer(channel, user, &words).await?),
            Request::Status => {
                // The channel's threads: not the read-only conversations elsewhere.
                let mut threads = self.store.thread_overviews(READ_THREADS).await?;
                threads.retain(|t| t.key.channel == self.channel);
                let runs = self.store.list_runs(true, READ_RUNS).await?;
                let today = self.store.spend_since(&day_start(now)).await?;
                Ok(status_text(&threads, &runs, today))
            }
            Request::Cost => {
                let (day, week) = (day_start(now), week_start(now));
                let figures = Spend {
                    team_today: self.store.spend_since(&day).await?,
                    yours_today: self.store.person_spend_since(user, &day).await?,
                    team_week: self.store.spend_since(&week).await?,
                    yours_week: self.store.person_spend_since(user, &week).await?,
                };
                Ok(cost_text(&figures, self.caps))
            }
        }
    }
}

/// The help, after a line naming a word the command does not know.
pub fn help_text(unknown: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(word) = unknown {
        let _ = writeln!(
            text,
            "I don't know `{}`.",
            escape_text(&word.chars().take(40).collect::<String>()).replace('`', "'")
        );
    }
    text.push_str(&format!(
        "*{COMMAND}* answers you alone, about this channel's repository:\n\
         • `{COMMAND} status`: the open threads (their state, cost and pull request), the \
         Coder's runs and their queue, today's spend\n\
         • `{COMMAND} cost`: today's and this week's spend, yours and the team's, and the caps\n\
         • `{COMMAND} pm <model> [thread link]`: the model the PM answers a thread with (your \
         latest open thread here unless you give its link); `{COMMAND} pm` shows it and the pool\n\
         • `{COMMAND} help`: this\n\
         To ask for work, write in the channel; to steer a thread, write in it."
    ));
    text
}

/// `status`: the open threads, newest change first, the active runs, the day's spend.
pub fn status_text(threads: &[ThreadOverview], runs: &[RunRecord], today: f64) -> String {
    let open: Vec<&ThreadOverview> = threads.iter().filter(|t| !t.stage.is_closed()).collect();
    let mut text = String::new();
    if open.is_empty() {
        text.push_str("*No open threads.*\n");
    } else {
        let _ = writeln!(text, "*Open threads ({})*", open.len());
        for thread in open.iter().take(LISTED_THREADS) {
            let title = thread_title(thread.first_message.as_deref());
            let mut line = format!("• “{}”", escape_text(&title));
            if let Some(who) = &thread.started_by {
                let _ = write!(line, " by <@{who}>");
            }
            let _ = write!(line, ": {}", thread.stage.lifecycle());
            if let Some(pr) = &thread.pull_request {
                let _ = write!(line, ", <{}|PR #{}>", pr.url, pr.number);
            }
            let _ = write!(line, ", {}", dollars(thread.cost));
            let _ = writeln!(text, "{line}");
        }
        if open.len() > LISTED_THREADS {
            let _ = writeln!(text, "…and {} more", open.len() - LISTED_THREADS);
        }
    }
    let running = runs.iter().filter(|r| r.state == RunState::Running).count();
    // Oldest first: the queue's order.
    let mut queued: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.state == RunState::Queued)
        .collect();
    queued.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    let _ = writeln!(
        text,
        "*Coder runs:* {running} running, {} queued",
        queued.len()
    );
    for (place, run) in queued.iter().enumerate() {
        let title = threads
            .iter()
            .find(|t| t.key == run.thread)
            .map(|t| thread_title(t.first_message.as_deref()))
            .unwrap_or_default();
        let _ = writeln!(text, "  {}. “{}”", place + 1, escape_text(&title));
    }
    let _ = write!(text, "*Spent today (UTC):* {}", dollars(today));
    text
}

/// The figures `cost` shows, in USD.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spend {
    /// Every model call of the repository.
    pub team_today: f64,
    /// The Coder runs the person started (what their cap counts).
    pub yours_today: f64,
    pub team_week: f64,
    pub yours_week: f64,
}

/// `cost`: the day's and the week's spend, the person's and the team's, and the caps.
pub fn cost_text(spend: &Spend, caps: Caps) -> String {
    let mut text = String::from("*Spend* (UTC; yours: the Coder runs you started)\n");
    let _ = writeln!(
        text,
        "• Today: yours {}, the team's {}",
        dollars(spend.yours_today),
        dollars(spend.team_today)
    );
    let _ = write!(
        text,
        "• This week (since Monday): yours {}, the team's {}",
        dollars(spend.yours_week),
        dollars(spend.team_week)
    );
    let mut limits = Vec::new();
    if caps.per_day > 0.0 {
        limits.push(format!("the team {} a day", dollars(caps.per_day)));
    }
    if caps.per_user_per_day > 0.0 {
        limits.push(format!(
            "each person {} a day",
            dollars(caps.per_user_per_day)
        ));
    }
    if !limits.is_empty() {
        let _ = write!(text, "\n• Caps: {}", limits.join(", "));
    }
    text
}

fn dollars(cost: f64) -> String {
    format!("${cost:.2}")
}

/// The start of `now`'s UTC day, as the store writes times.
fn day_start(now: DateTime<Utc>) -> String {
    stored_time(now.date_naive())
}

/// The start of `now`'s week (Monday, UTC), as the store writes times.
fn week_start(now: DateTime<Utc>) -> String {
    let monday = now.date_naive() - Duration::days(i64::from(now.weekday().num_days_from_monday()));
    stored_time(monday)
}

fn stored_time(day: chrono::NaiveDate) -> String {
    day.and_hms_opt(0, 0, 0)
        .unwrap_or_default()
        .and_utc()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::domain::{PullRequestRef, Stage, ThreadKey};

    fn thread(ts: &str, stage: Stage, text: &str, cost: f64) -> ThreadOverview {
        ThreadOverview {
            key: ThreadKey {
                channel: "C1".into(),
                thread_ts: ts.into(),
            },
            stage,
            started_by: Some("U1".into()),
            first_message: Some(text.into()),
            pull_request: None,
            cost,
            created_at: "2026-11-28T10:00:00.000000Z".into(),
            updated_at: "2026-11-28T10:00:00.000000Z".into(),
        }
    }

    #[test]
    fn the_first_word_says_what_is_asked() {
        assert_eq!(parse(" STATUS please"), Request::Status);
        assert_eq!(parse("cost"), Request::Cost);
        assert_eq!(parse(""), Request::Help);
        assert_eq!(parse("help"), Request::Help);
        assert_eq!(parse("deploy now"), Request::Unknown("deploy".into()));
        assert_eq!(parse(" PM lean 1.2"), Request::Pm("lean 1.2".into()));
        assert_eq!(parse("pm"), Request::Pm(String::new()));
    }

    #[test]
    fn an_unknown_word_is_named_inert_before_the_help() {
        let text = help_text(Some("<!channel>`x"));
        assert!(
            text.starts_with("I don't know `&lt;!channel&gt;'x`.\n"),
            "{text}"
        );
        assert!(text.contains("`/codebutler status`"), "{text}");
    }

    #[test]
    fn status_lists_open_threads_the_queue_in_order_and_the_day() {
        let mut with_pr = thread("2.0", Stage::PrOpened, "add <b>login</b>\nmore", 1.5);
        with_pr.pull_request = Some(PullRequestRef {
            number: 7,
            url: "https://github.com/o/r/pull/7".into(),
        });
        let threads = vec![
            with_pr,
            thread("3.0", Stage::PlanPending, "fix the cache", 0.25),
            thread(
                "1.0",
                Stage::Closed(crate::domain::Closure::Merged),
                "old",
                9.0,
            ),
            thread("4.0", Stage::Approved, "speed up CI", 0.5),
        ];
        let run = |thread_ts: &str, state: RunState, created_at: &str| RunRecord {
            id: format!("r{thread_ts}"),
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: thread_ts.into(),
            },
            state,
            plan: String::new(),
            model: String::new(),
            worktree: String::new(),
            branch: String::new(),
            max_turns: 0,
            turns: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 0.0,
            ending: None,
            exit_code: None,
            runner_pid: None,
            created_at: created_at.into(),
            started_at: None,
            ended_at: None,
        };
        let runs = vec![
            run("4.0", RunState::Queued, "2026-11-28T10:05:00Z"),
            run("2.0", RunState::Running, "2026-11-28T10:00:00Z"),
            run("3.0", RunState::Queued, "2026-11-28T10:01:00Z"),
        ];
        assert_eq!(
            status_text(&threads, &runs, 3.456),
            "*Open threads (3)*\n\
             • “add &lt;b&gt;login&lt;/b&gt;” by <@U1>: pr_opened, <https://github.com/o/r/pull/7|PR #7>, $1.50\n\
             • “fix the cache” by <@U1>: planning, $0.25\n\
             • “speed up CI” by <@U1>: working, $0.50\n\
             *Coder runs:* 1 running, 2 queued\n  \
             1. “fix the cache”\n  \
             2. “speed up CI”\n\
             *Spent today (UTC):* $3.46"
        );
        assert_eq!(
            status_text(&[], &[], 0.0),
            "*No open threads.*\n*Coder runs:* 0 running, 0 queued\n*Spent today (UTC):* $0.00"
        );
    }

    #[test]
    fn cost_shows_yours_and_the_teams_and_the_caps_set() {
        let spend = Spend {
            team_today: 1.0,
            yours_today: 0.25,
            team_week: 4.5,
            yours_week: 2.0,
        };
        let no_caps = Caps {
            per_day: 0.0,
            per_user_per_day: 0.0,
            calls_per_hour: 0,
        };
        assert_eq!(
            cost_text(&spend, no_caps),
            "*Spend* (UTC; yours: the Coder runs you started)\n\
             • Today: yours $0.25, the team's $1.00\n\
             • This week (since Monday): yours $2.00, the team's $4.50"
        );
        let caps = Caps {
            per_day: 20.0,
            per_user_per_day: 5.0,
            calls_per_hour: 0,
        };
        assert!(
            cost_text(&spend, caps)
                .ends_with("\n• Caps: the team $20.00 a day, each person $5.00 a day")
        );
    }

    #[test]
    fn the_week_starts_on_monday_at_midnight_utc() {
        // 2026-11-28 is a Saturday.
        let now = Utc.with_ymd_and_hms(2026, 11, 28, 15, 4, 5).unwrap();
        assert_eq!(week_start(now), "2026-11-23T00:00:00.000000Z");
        assert_eq!(day_start(now), "2026-11-28T00:00:00.000000Z");
        let monday = Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 1).unwrap();
        assert_eq!(week_start(monday), "2026-11-23T00:00:00.000000Z");
    }
}
