//! What a run's live status message shows: the plan, the turn, what the Coder is doing,
//! time, tokens and cost, rendered as inert text.

use std::time::Duration;

use codebutler_proto::runner::v1::runner_event::Event;

use super::PREFIX;
use crate::slack::format::escape_text;

/// Least time between two edits of a status message.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// What the status message shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Status {
    pub(super) summary: String,
    pub(super) branch: String,
    pub(super) turn: u32,
    pub(super) max_turns: u32,
    pub(super) doing: String,
    pub(super) tokens: u64,
    pub(super) cost: f64,
    /// The run's place in the line for a Coder slot, while it waits for one.
    pub(super) queue_place: Option<usize>,
}

impl Status {
    /// Takes one event of the run into account.
    pub(super) fn apply(&mut self, event: &Event) {
        match event {
            Event::TurnBegun(t) => {
                self.turn = t.turn;
                self.max_turns = t.max_turns;
                self.doing = "thinking".into();
            }
            Event::ToolStarted(t) => self.doing = t.summary.clone(),
            Event::Usage(u) => {
                self.tokens += u.prompt_tokens + u.completion_tokens;
                self.cost += u.cost_usd;
            }
            _ => {}
        }
    }

    /// The status text; the plan's title and the Coder's activity are model text, made
    /// inert.
    pub(super) fn render(&self, elapsed: Duration) -> String {
        let mut line = format!(
            "{PREFIX}working on _{}_ in `{}`\n",
            escape_text(&self.summary),
            escape_text(&self.branch)
        );
        if let (0, Some(place)) = (self.turn, self.queue_place) {
            line.push_str(&format!(
                "queued: {} in line for a Coder slot (`access.maxConcurrentThreads`)",
                ordinal(place)
            ));
        } else if self.turn == 0 {
            line.push_str("starting the sandbox…");
        } else {
            line.push_str(&format!(
                "turn {} of {} · {} · {} · {} tokens · ${:.2}",
                self.turn,
                self.max_turns,
                escape_text(&self.doing),
                crate::domain::duration_text(elapsed),
                self.tokens,
                self.cost
            ));
        }
        line
    }
}

/// `1st`, `2nd`, `3rd`, `4th`… `11th`, `12th`, `13th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A plan's one-line summary: the first line of its text, without the "📋 Plan:" label.
pub(super) fn plan_summary(plan: &str) -> String {
    let line = plan.lines().next().unwrap_or_default();
    line.strip_prefix("📋 **Plan:** ")
        .unwrap_or(line)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::{ToolStarted, TurnBegun, Usage};

    #[test]
    fn status_shows_turn_activity_time_tokens_and_cost() {
        let mut s = Status {
            summary: "Fix expiry".into(),
            branch: "codebutler/fix-expiry".into(),
            ..Status::default()
        };
        assert_eq!(
            s.render(Duration::ZERO),
            "*Coder:* working on _Fix expiry_ in `codebutler/fix-expiry`\nstarting the sandbox…"
        );
        s.apply(&Event::TurnBegun(TurnBegun {
            turn: 3,
            max_turns: 25,
        }));
        s.apply(&Event::ToolStarted(ToolStarted {
            call_id: "c".into(),
            tool: "Edit".into(),
            summary: "editing src/auth.rs".into(),
        }));
        s.apply(&Event::Usage(Usage {
            prompt_tokens: 1000,
            completion_tokens: 200,
            cached_tokens: 0,
            cost_usd: 0.125,
        }));
        assert_eq!(
            s.render(Duration::from_secs(72)),
            "*Coder:* working on _Fix expiry_ in `codebutler/fix-expiry`\nturn 3 of 25 · editing src/auth.rs · 1m 12s · 1200 tokens · $0.12"
        );
    }

    #[test]
    fn a_queued_run_shows_its_place_in_line() {
        let mut s = Status {
            summary: "Fix expiry".into(),
            branch: "codebutler/fix-expiry".into(),
            queue_place: Some(2),
            ..Status::default()
        };
        assert_eq!(
            s.render(Duration::ZERO),
            "*Coder:* working on _Fix expiry_ in `codebutler/fix-expiry`\nqueued: 2nd in line for a Coder slot (`access.maxConcurrentThreads`)"
        );
        s.queue_place = None;
        assert!(s.render(Duration::ZERO).ends_with("starting the sandbox…"));
        let places: Vec<String> = [1, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).into();
        assert_eq!(
            places,
            [
                "1st", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }

    #[test]
    fn status_shows_model_text_as_text() {
        let mut s = Status {
            summary: "Ping <!channel> & <https://evil.example|https://good.example>".into(),
            branch: "codebutler/ping".into(),
            ..Status::default()
        };
        s.apply(&Event::TurnBegun(TurnBegun {
            turn: 1,
            max_turns: 25,
        }));
        s.apply(&Event::ToolStarted(ToolStarted {
            call_id: "c".into(),
            tool: "Bash".into(),
            summary: "running `echo <!here>`".into(),
        }));
        assert_eq!(
            s.render(Duration::ZERO),
            "*Coder:* working on _Ping &lt;!channel&gt; &amp; &lt;https://evil.example|https://good.example&gt;_ in `codebutler/ping`\nturn 1 of 25 · running `echo &lt;!here&gt;` · 0s · 0 tokens · $0.00"
        );
    }
}
