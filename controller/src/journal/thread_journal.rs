//! The thread's journal, `.codebutler/journals/thread-<ts>.md`: a readable narrative of the
//! thread committed on its pull request's branch at close, so the story of a change is
//! reviewed and kept with the change. It is laid out from the thread's [`History`] — the
//! people's messages, what each role said, the PM's tool calls one line each, the Coder's
//! runs with turns and cost, its questions with who answered — then what the thread said
//! about memory, then the usage table. Plain data from plain data, snapshot-tested.

use crate::domain::PrEvent;
use crate::domain::{PullRequestRef, duration_text};
use crate::history::{Event, History};

use super::report::{cost, thousands};
use super::usage::ThreadUsage;

/// Where a thread's journal is committed, relative to the repository.
pub fn journal_path(thread_ts: &str) -> String {
    format!(".codebutler/journals/thread-{thread_ts}.md")
}

/// What the journal says about the thread besides its history.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalHead<'a> {
    /// The thread's title (its plan's summary).
    pub title: &'a str,
    pub permalink: Option<&'a str>,
    pub pr: Option<&'a PullRequestRef>,
    /// How it closed, in words: "merged", "closed without merging".
    pub outcome: &'a str,
    /// What a "merge anyway" merged over (Markdown: who said it, then a list of the
    /// reviewers' objections), if it merged over anything.
    pub overridden: Option<&'a str>,
}

/// The journal's Markdown.
pub fn render(head: &JournalHead<'_>, history: &History, usage: &ThreadUsage) -> String {
    let mut out = format!("# {}\n\n", one_line(head.title));
    out.push_str(&format!("- Slack thread: {}", history.thread.thread_ts));
    if let Some(link) = head.permalink {
        out.push_str(&format!(" ({link})"));
    }
    out.push('\n');
    if let Some(pr) = head.pr {
        out.push_str(&format!("- Pull request: #{} ({})\n", pr.number, pr.url));
    }
    out.push_str(&format!("- Outcome: {}\n", head.outcome));
    if let Some(overridden) = head.overridden {
        out.push_str("\n## Merged anyway\n\n");
        out.push_str(overridden.trim_end());
        out.push('\n');
    }

    out.push_str("\n## What happened\n\n");
    if history.entries.is_empty() {
        out.push_str("(nothing recorded)\n");
    }
    for entry in &history.entries {
        let (first, rest) = narrate(&entry.event);
        out.push_str(&format!("- **{}** {first}\n", clock(&entry.at)));
        for line in rest.lines() {
            out.push_str(&format!("  > {line}\n"));
        }
    }

    out.push_str("\n## Memory\n\n");
    let memory: Vec<&str> = history
        .entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Said { text, .. } if text.to_lowercase().contains("memory") => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect();
    if memory.is_empty() {
        out.push_str("Nothing was said about memory in this thread.\n");
    }
    for (i, text) in memory.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for line in text.lines() {
            out.push_str(&format!("> {line}\n"));
        }
    }

    out.push_str("\n## Usage\n\n");
    out.push_str("| role | calls | turns | tokens in | tokens out | cached | cost | wall time |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for role in &usage.roles {
        let t = &role.totals;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            role.label,
            t.calls,
            role.turns.map(thousands).unwrap_or_else(|| "—".into()),
            thousands(t.prompt_tokens),
            thousands(t.completion_tokens),
            thousands(t.cached_tokens),
            cost(t.cost),
            role.wall.map(duration_text).unwrap_or_else(|| "—".into()),
        ));
    }
    out.push_str(&format!(
        "| **total** | | | | | | **{}** | |\n",
        cost(usage.total_cost())
    ));
    out
}

/// An event's first line, and the text quoted under it.
fn narrate(event: &Event) -> (String, String) {
    match event {
        Event::GitHub(PrEvent::Merged) => (
            "The pull request was merged on GitHub.".into(),
            String::new(),
        ),
        Event::GitHub(PrEvent::Closed) => (
            "The pull request was closed on GitHub without merging.".into(),
            String::new(),
        ),
        Event::Person { user, text } => (format!("<@{user}> wrote:"), text.clone()),
        Event::Clicked { user, action } => (
            format!("<@{user}> clicked {}", action.label()),
            String::new(),
        ),
        Event::Said { role, text } => (format!("{} said:", role.label()), text.clone()),
        Event::PmTool { name, arguments } => (
            format!("PM used `{name}` {}", inline(arguments)),
            String::new(),
        ),
        Event::CoderQuestion {
            number,
            question,
            answer,
            answered_by,
        } => {
            let by = match answered_by.as_deref() {
                Some("pm") => "the PM answered".to_owned(),
                Some(user) => format!("<@{user}> answered"),
                None => "not answered".to_owned(),
            };
            let mut text = format!("Q: {question}");
            if let Some(answer) = answer {
                text.push_str(&format!("\nA: {answer}"));
            }
            (format!("Coder asked question {number}; {by}:"), text)
        }
        Event::Run(run) => (
            format!(
                "Coder run `{}`: {} after {} turns · {} tokens in, {} out · {}",
                run.id,
                run.state.as_str(),
                run.turns,
                thousands(run.prompt_tokens),
                thousands(run.completion_tokens),
                cost(run.cost)
            ),
            String::new(),
        ),
    }
}

/// Arguments as inline code, without backticks that would end it.
fn inline(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    format!("`{}`", text.replace('`', "'"))
}

/// `YYYY-MM-DD HH:MM` of an RFC 3339 time, or the whole string.
fn clock(at: &str) -> String {
    match (at.get(..10), at.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time}"),
        _ => at.to_owned(),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ButtonAction, Role, RunRecord, RunState, ThreadKey, UsageTotals};
    use crate::history::Entry;
    use crate::journal::usage::RoleLine;

    fn at(minute: u32) -> String {
        format!("2026-11-24T10:{minute:02}:00.000000Z")
    }

    fn entry(minute: u32, event: Event) -> Entry {
        Entry {
            at: at(minute),
            event,
        }
    }

    #[test]
    fn the_journal_of_a_merged_thread() {
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1732475000.000100".into(),
        };
        let run = RunRecord {
            id: "r1".into(),
            thread: thread.clone(),
            state: RunState::Finished,
            plan: String::new(),
            model: "m".into(),
            worktree: "w".into(),
            branch: "codebutler/fix".into(),
            max_turns: 25,
            turns: 5,
            prompt_tokens: 18_400,
            completion_tokens: 1_840,
            cost: 0.62,
            ending: None,
            exit_code: None,
            runner_pid: None,
            created_at: at(3),
            started_at: None,
            ended_at: None,
        };
        let history = History {
            thread,
            entries: vec![
                entry(
                    0,
                    Event::Person {
                        user: "U0ALICE".into(),
                        text: "sessions expire too soon\nsee the logs".into(),
                    },
                ),
                entry(
                    1,
                    Event::PmTool {
                        name: "Grep".into(),
                        arguments: r#"{"pattern":"expiry"}"#.into(),
                    },
                ),
                entry(
                    2,
                    Event::Said {
                        role: Role::Pm,
                        text: "Plan: raise the expiry to 30 minutes.".into(),
                    },
                ),
                entry(
                    3,
                    Event::Clicked {
                        user: "U0ALICE".into(),
                        action: ButtonAction::Approve,
                    },
                ),
                entry(3, Event::Run(Box::new(run))),
                entry(
                    4,
                    Event::CoderQuestion {
                        number: 1,
                        question: "JWT or cookies?".into(),
                        answer: Some("JWT".into()),
                        answered_by: Some("pm".into()),
                    },
                ),
                entry(8, Event::GitHub(PrEvent::Merged)),
                entry(
                    9,
                    Event::Said {
                        role: Role::Pm,
                        text: "Memory saved: 1. Sessions use JWT.".into(),
                    },
                ),
            ],
        };
        let usage = ThreadUsage {
            roles: vec![
                RoleLine {
                    label: "PM".into(),
                    totals: UsageTotals {
                        calls: 4,
                        prompt_tokens: 2340,
                        cached_tokens: 0,
                        completion_tokens: 234,
                        cost: 0.004,
                    },
                    turns: None,
                    wall: None,
                },
                RoleLine {
                    label: "Coder".into(),
                    totals: UsageTotals {
                        calls: 5,
                        prompt_tokens: 18_400,
                        cached_tokens: 9_000,
                        completion_tokens: 1_840,
                        cost: 0.62,
                    },
                    turns: Some(5),
                    wall: Some(std::time::Duration::from_secs(95)),
                },
            ],
            pm_tools: vec![("Grep".into(), 1)],
            questions: Vec::new(),
        };
        let pr = PullRequestRef {
            number: 7,
            url: "https://github.com/acme/app/pull/7".into(),
        };
        let head = JournalHead {
            title: "Raise the session expiry",
            permalink: Some("https://acme.slack.com/archives/C1/p1732475000000100"),
            pr: Some(&pr),
            outcome: "merged",
            overridden: None,
        };
        insta::assert_snapshot!(render(&head, &history, &usage));
        // A merge over the reviewers says so under the head, before the story.
        let over = JournalHead {
            overridden: Some(
                "<@U0ALICE> said **merge anyway** over:\n\n- **bob** requested changes",
            ),
            ..head.clone()
        };
        let text = render(&over, &history, &usage);
        assert!(
            text.contains("- Outcome: merged\n\n## Merged anyway\n\n<@U0ALICE> said **merge anyway** over:\n\n- **bob** requested changes\n\n## What happened\n"),
            "{text}"
        );
        assert_eq!(
            journal_path("1732475000.000100"),
            ".codebutler/journals/thread-1732475000.000100.md"
        );
    }
}
