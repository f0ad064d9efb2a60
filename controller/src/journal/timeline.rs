//! The **Journal** section of the pull request's description: the thread's steps one line
//! each, in time order — the plan approved, the pull request opened, each review round and
//! follow-up run, memory saved, the merge — laid out from what the store recorded of them
//! ([`TimelineFacts`]), never from what a model said. Plain data from plain data: the same
//! facts give the same text, so the description is sent again only when a step changed it.

use crate::domain::{RunRecord, RunState};
use crate::store::SavedMemory;
use crate::store::reviews::{RoundKind, RoundRecord, RoundState};

/// Longest a plan's or a request's summary is shown in an entry.
const MAX_SUMMARY: usize = 120;

/// What the store recorded of the thread's steps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimelineFacts {
    /// The thread's Coder runs, oldest first: the first is its approved plan's.
    pub runs: Vec<RunRecord>,
    /// What people wrote in the thread (when, what), oldest first: a follow-up run is
    /// named by the message that asked for it.
    pub requests: Vec<(String, String)>,
    /// The pull request's number and when it opened (`None` before it opened, or for a
    /// pull request recorded before the time was kept).
    pub pr_opened: Option<(u64, Option<String>)>,
    /// The review rounds the PR watcher opened, oldest first.
    pub rounds: Vec<RoundRecord>,
    /// The memory proposals saved, oldest first.
    pub memory: Vec<SavedMemory>,
    /// When the close merged the pull request (its `merge` step done).
    pub merged_at: Option<String>,
}

/// One line of the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Line {
    /// RFC 3339, UTC; empty when unknown (sorted first).
    at: String,
    text: String,
}

/// The section's Markdown, its heading included.
pub fn render(facts: &TimelineFacts) -> String {
    let mut lines = Vec::new();
    let review_runs = review_runs(facts);
    for (index, run) in facts.runs.iter().enumerate() {
        let asked = facts
            .requests
            .iter()
            .rev()
            .find(|(at, _)| at.as_str() <= run.created_at.as_str())
            .map(|(_, text)| text.as_str());
        let summary = match (index, asked) {
            (0, _) | (_, None) => summary_of(&run.plan),
            (_, Some(asked)) => summary_of(asked),
        };
        let outcome = outcome(run.state);
        let text = match (index, review_runs.iter().find(|(i, _)| *i == index)) {
            (0, _) => format!("**Plan approved**: {summary} — the Coder's run {outcome}"),
            (_, Some((_, round))) => {
                format!("**Follow-up run** for review round {round} — {outcome}")
            }
            _ => format!("**Follow-up run**: {summary} — {outcome}"),
        };
        lines.push(Line {
            at: run.created_at.clone(),
            text,
        });
    }
    if let Some((number, at)) = &facts.pr_opened {
        // Without its time, it follows the run that opened it.
        let at = at
            .clone()
            .or_else(|| facts.runs.first().map(|r| r.created_at.clone()));
        lines.push(Line {
            at: at.unwrap_or_default(),
            text: format!("**Pull request #{number} opened**"),
        });
    }
    for round in &facts.rounds {
        let what = match round.kind {
            RoundKind::Review => "review comments",
            RoundKind::Checks => "failing checks",
        };
        lines.push(Line {
            at: round.created_at.clone(),
            text: format!(
                "**Review round {}** ({what}): {}",
                round.round,
                round_outcome(round.state)
            ),
        });
    }
    for saved in &facts.memory {
        let count = serde_json::from_str::<Vec<serde_json::Value>>(&saved.items)
            .map(|items| items.len())
            .unwrap_or(0);
        let noun = if count == 1 { "change" } else { "changes" };
        lines.push(Line {
            at: saved.saved_at.clone(),
            text: format!("**Memory saved**: {count} {noun} to the project's memory"),
        });
    }
    if let Some(at) = &facts.merged_at {
        lines.push(Line {
            at: at.clone(),
            text: "**Merged**".to_owned(),
        });
    }
    // Stable: what shares a time keeps the order above.
    lines.sort_by(|a, b| a.at.cmp(&b.at));
    let mut out = String::from("## Journal\n\n");
    if lines.is_empty() {
        out.push_str("- (nothing recorded yet)\n");
    }
    for line in lines {
        match minute(&line.at) {
            Some(when) => out.push_str(&format!("- {when} — {}\n", line.text)),
            None => out.push_str(&format!("- {}\n", line.text)),
        }
    }
    out
}

/// The runs that took a review round (by index in `facts.runs`) and the round: the thread's
/// first run created after the round was approved.
fn review_runs(facts: &TimelineFacts) -> Vec<(usize, i64)> {
    facts
        .rounds
        .iter()
        .filter_map(|round| {
            let approved = round.approved_at.as_deref()?;
            let index = facts
                .runs
                .iter()
                .position(|run| run.created_at.as_str() >= approved)?;
            Some((index, round.round))
        })
        .collect()
}

/// A run's first line as its summary: the plan's summary, or the request, on one line and
/// shortened.
fn summary_of(plan: &str) -> String {
    let line = plan.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.strip_prefix("📋 **Plan:** ").unwrap_or(line).trim();
    match line.char_indices().nth(MAX_SUMMARY) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None if line.is_empty() => "(no summary)".to_owned(),
        None => line.to_owned(),
    }
}

/// How a run stands, in words.
fn outcome(state: RunState) -> &'static str {
    match state {
        RunState::Queued => "queued",
        RunState::Running => "running",
        RunState::Finished => "finished",
        RunState::Failed => "failed",
        RunState::Cancelled => "stopped",
        RunState::Interrupted => "interrupted",
        RunState::Paused => "paused (no model answered)",
    }
}

/// How a review round stands, in words.
fn round_outcome(state: RoundState) -> &'static str {
    match state {
        RoundState::New => "announced",
        RoundState::Proposed => "a follow-up proposed",
        RoundState::Nothing => "nothing to change",
        RoundState::Unsorted => "reported unsorted",
        // Its replies posted on GitHub after the run change nothing here.
        RoundState::Approved | RoundState::Done => "follow-up approved",
        RoundState::Declined => "declined",
    }
}

/// An RFC 3339 time to the minute, `2026-11-28 13:50 UTC`; `None` when it is not one.
fn minute(at: &str) -> Option<String> {
    let time = chrono::DateTime::parse_from_rfc3339(at).ok()?;
    Some(
        time.with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M UTC")
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{PullRequestRef, ThreadKey};

    fn run(plan: &str, state: RunState, at: &str) -> RunRecord {
        RunRecord {
            id: format!("run-{at}"),
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.1".into(),
            },
            state,
            plan: plan.into(),
            model: "m".into(),
            worktree: "/w".into(),
            branch: "codebutler/x".into(),
            max_turns: 10,
            turns: 3,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost: 0.0,
            ending: None,
            exit_code: Some(0),
            runner_pid: None,
            created_at: at.into(),
            started_at: None,
            ended_at: None,
        }
    }

    fn round(n: i64, state: RoundState, at: &str, approved: Option<&str>) -> RoundRecord {
        RoundRecord {
            round: n,
            pr: PullRequestRef {
                number: 7,
                url: "https://github.com/acme/app/pull/7".into(),
            },
            kind: RoundKind::Review,
            head_oid: "abc".into(),
            decision: String::new(),
            state,
            approved_at: approved.map(str::to_owned),
            created_at: at.into(),
        }
    }

    #[test]
    fn every_step_in_time_order() {
        let facts = TimelineFacts {
            runs: vec![
                run(
                    "📋 **Plan:** Session tokens expire\n\nsteps…",
                    RunState::Finished,
                    "2026-11-28T13:50:00.000001Z",
                ),
                run(
                    "📋 **Plan:** Session tokens expire",
                    RunState::Finished,
                    "2026-11-28T14:00:00Z",
                ),
                run(
                    "📋 **Plan:** Session tokens expire",
                    RunState::Running,
                    "2026-11-28T14:06:00Z",
                ),
            ],
            requests: vec![
                ("2026-11-28T13:40:00Z".into(), "fix the expiry".into()),
                (
                    "2026-11-28T13:59:00Z".into(),
                    "also check the remember-me box".into(),
                ),
                ("2026-11-28T14:05:50Z".into(), "yes".into()),
            ],
            pr_opened: Some((7, Some("2026-11-28T13:52:10Z".into()))),
            rounds: vec![round(
                1,
                RoundState::Approved,
                "2026-11-28T14:05:00Z",
                Some("2026-11-28T14:05:30Z"),
            )],
            memory: vec![SavedMemory {
                seq: 1,
                items: r#"[{"op":"add"},{"op":"add"}]"#.into(),
                saved_at: "2026-11-28T14:10:00Z".into(),
            }],
            merged_at: Some("2026-11-28T14:20:00Z".into()),
        };
        insta::assert_snapshot!(render(&facts), @r"
        ## Journal

        - 2026-11-28 13:50 UTC — **Plan approved**: Session tokens expire — the Coder's run finished
        - 2026-11-28 13:52 UTC — **Pull request #7 opened**
        - 2026-11-28 14:00 UTC — **Follow-up run**: also check the remember-me box — finished
        - 2026-11-28 14:05 UTC — **Review round 1** (review comments): follow-up approved
        - 2026-11-28 14:06 UTC — **Follow-up run** for review round 1 — running
        - 2026-11-28 14:10 UTC — **Memory saved**: 2 changes to the project's memory
        - 2026-11-28 14:20 UTC — **Merged**
        ");
    }

    #[test]
    fn nothing_yet_and_a_long_request_shortened() {
        assert_eq!(
            render(&TimelineFacts::default()),
            "## Journal\n\n- (nothing recorded yet)\n"
        );
        let long = "x".repeat(300);
        let text = render(&TimelineFacts {
            runs: vec![run(&long, RunState::Failed, "2026-11-28T13:50:00Z")],
            ..TimelineFacts::default()
        });
        assert!(
            text.contains(&format!("{}… — the Coder's run failed", "x".repeat(120))),
            "{text}"
        );
    }

    #[test]
    fn the_same_facts_give_the_same_text() {
        let facts = TimelineFacts {
            runs: vec![run("Plan", RunState::Finished, "2026-11-28T13:50:00Z")],
            pr_opened: Some((7, None)),
            ..TimelineFacts::default()
        };
        assert_eq!(render(&facts), render(&facts.clone()));
        assert!(render(&facts).contains("13:50 UTC — **Pull request #7 opened**"));
    }
}
