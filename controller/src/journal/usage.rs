//! What a thread used, read from the store for its usage report and journal: each role's
//! calls, tokens and cost (the gateway's `usage` rows), the Coder's runs (turns and wall
//! time from `runs`), the PM's tool calls (counted from its stored conversation) and the
//! Coder's questions with who answered them (`coder_questions`, in the order asked).

use std::collections::BTreeMap;
use std::time::Duration;

use codebutler_agent::conversation::ChatMessage;

use crate::domain::{Role, ThreadKey, UsageTotals};
use crate::store::{QuestionRecord, Store, StoreError};

/// One role's line of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleLine {
    /// What people call the role: `PM`, `Coder`, `Memory extraction`, …
    pub label: String,
    pub totals: UsageTotals,
    /// The Coder's turns over its runs; `None` for roles without turns.
    pub turns: Option<i64>,
    /// The Coder's wall time over its runs; `None` where it is not recorded.
    pub wall: Option<Duration>,
}

/// A Coder question and its answer, as the report numbers them.
#[derive(Clone, Debug, PartialEq)]
pub struct AnsweredQuestion {
    pub question: String,
    /// `None` while unanswered.
    pub answer: Option<String>,
    /// `pm`, or the Slack user id of the person whose reply was the answer.
    pub answered_by: Option<String>,
}

/// Everything the usage report says about what the thread used.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadUsage {
    /// One line per role with usage, PM and Coder first.
    pub roles: Vec<RoleLine>,
    /// The PM's tool calls by tool name, most used first (then by name).
    pub pm_tools: Vec<(String, usize)>,
    /// The Coder's questions, in the order asked.
    pub questions: Vec<AnsweredQuestion>,
}

impl ThreadUsage {
    /// The thread's cost over every role.
    pub fn total_cost(&self) -> f64 {
        self.roles.iter().map(|r| r.totals.cost).sum()
    }
}

/// The label of a role the gateway recorded; roles this version does not know keep their
/// stored name.
pub fn role_label(role: &str) -> String {
    match role {
        crate::memory::extraction::ROLE => "Memory extraction".into(),
        "whisper" => "Whisper".into(),
        crate::closing::reviewer::ROLE => "Reviewer".into(),
        other => Role::parse(other).map_or_else(|| other.into(), |role| role.label().into()),
    }
}

/// Where a role's line goes: PM, Coder, memory extraction, then the others.
fn role_rank(role: &str) -> u8 {
    match role {
        "pm" => 0,
        "coder" => 1,
        crate::memory::extraction::ROLE => 2,
        _ => 3,
    }
}

/// Reads the thread's usage from the store.
pub async fn load(store: &Store, thread: &ThreadKey) -> Result<ThreadUsage, StoreError> {
    let mut by_role = store.usage_by_role(thread).await?;
    by_role.sort_by_key(|r| role_rank(&r.role));
    let runs = store.thread_runs(thread).await?;
    let turns: i64 = runs.iter().map(|r| r.turns).sum();
    let wall: Duration = runs
        .iter()
        .filter_map(|r| span(r.started_at.as_deref()?, r.ended_at.as_deref()?))
        .sum();
    let roles = by_role
        .into_iter()
        .map(|r| {
            let coder = r.role == "coder";
            RoleLine {
                label: role_label(&r.role),
                totals: r.totals,
                turns: coder.then_some(turns),
                // The Coder's is its runs' (tools included); the others' their calls'.
                wall: if coder {
                    Some(wall)
                } else {
                    (!r.model_time.is_zero()).then_some(r.model_time)
                },
            }
        })
        .collect();
    let pm_tools = tool_counts(&store.conversation(thread, "pm").await?);
    let questions = store
        .thread_questions(thread)
        .await?
        .into_iter()
        .map(|q: QuestionRecord| AnsweredQuestion {
            question: q.question,
            answer: q.answer,
            answered_by: q.answered_by,
        })
        .collect();
    Ok(ThreadUsage {
        roles,
        pm_tools,
        questions,
    })
}

/// The time between two stored RFC 3339 instants (none if either is unreadable or they run
/// backwards).
fn span(start: &str, end: &str) -> Option<Duration> {
    let start = chrono::DateTime::parse_from_rfc3339(start).ok()?;
    let end = chrono::DateTime::parse_from_rfc3339(end).ok()?;
    (end - start).to_std().ok()
}

/// The tool calls of a conversation by name, most used first, then by name.
pub fn tool_counts(conversation: &[ChatMessage]) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for message in conversation {
        if let ChatMessage::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                *counts.entry(call.function.name.clone()).or_default() += 1;
            }
        }
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::UsageRecord;

    fn call(name: &str) -> codebutler_agent::conversation::ToolCall {
        serde_json::from_value(serde_json::json!({
            "id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}
        }))
        .unwrap()
    }

    #[test]
    fn tools_are_counted_most_used_first() {
        let conversation = vec![
            ChatMessage::user("hi"),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![call("ReadFile"), call("Grep")],
            },
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![call("ReadFile"), call("GitLog"), call("ReadFile")],
            },
            ChatMessage::Assistant {
                content: Some("done".into()),
                tool_calls: vec![call("Grep")],
            },
        ];
        assert_eq!(
            tool_counts(&conversation),
            [
                ("ReadFile".to_owned(), 3),
                ("Grep".to_owned(), 2),
                ("GitLog".to_owned(), 1)
            ]
        );
    }

    #[tokio::test]
    async fn usage_is_read_per_role_with_the_coders_turns_and_wall_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).await.unwrap();
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        for (role, tokens, cost, ms) in [
            ("coder", 1000, 0.5, 9000),
            ("pm", 100, 0.001, 1200),
            ("memory-extraction", 50, 0.0005, 800),
            ("pm", 100, 0.001, 1300),
            ("coder", 2000, 0.25, 9000),
        ] {
            store
                .record_usage(&UsageRecord {
                    thread: thread.clone(),
                    role: role.into(),
                    model: "m".into(),
                    prompt_tokens: tokens,
                    completion_tokens: tokens / 10,
                    cached_tokens: tokens / 2,
                    cost: Some(cost),
                    duration_ms: ms,
                })
                .await
                .unwrap();
        }
        let usage = load(&store, &thread).await.unwrap();
        let labels: Vec<&str> = usage.roles.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["PM", "Coder", "Memory extraction"]);
        let coder = &usage.roles[1];
        assert_eq!(
            (
                coder.totals.calls,
                coder.totals.prompt_tokens,
                coder.totals.cached_tokens
            ),
            (2, 3000, 1500)
        );
        assert_eq!((coder.turns, coder.wall), (Some(0), Some(Duration::ZERO)));
        // The other roles' wall time is their model calls' (the Coder's is its runs').
        assert_eq!(
            (usage.roles[0].turns, usage.roles[0].wall),
            (None, Some(Duration::from_millis(2500)))
        );
        assert_eq!(usage.roles[2].wall, Some(Duration::from_millis(800)));
        assert!((usage.total_cost() - 0.7525).abs() < 1e-9);
        assert!(usage.pm_tools.is_empty() && usage.questions.is_empty());
    }

    #[test]
    fn spans_between_stored_instants() {
        assert_eq!(
            span("2026-11-24T10:00:00.000000Z", "2026-11-24T10:01:30.500000Z"),
            Some(Duration::from_millis(90_500))
        );
        assert_eq!(span("2026-11-24T10:01:00Z", "2026-11-24T10:00:00Z"), None);
        assert_eq!(span("then", "2026-11-24T10:00:00Z"), None);
    }
}
