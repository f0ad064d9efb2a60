//! Context compaction for long Coder runs: when a conversation nears the model's context
//! window (80 % of it), the model summarises the work so far in one call, and the
//! conversation becomes the system prompt, the task, that summary, and the latest user
//! message.
//!
//! The summary call is made so that a prompt cache keeps working across it: it is the
//! conversation's next turn ([`Compaction::summary_turn`]: the same system prompt, tools and
//! messages, then the instruction), so the provider reads all but the last turn from its
//! cache, and the compacted conversation keeps the system prompt and the task at its head,
//! a prefix the cache holds already, with the summary after them. Only when that turn
//! would not fit the window is the conversation written out as text instead
//! ([`summary_request`], no tools, long tool results cut).
//!
//! Sizes are estimated at four characters per token: cheap, needs no tokenizer, and errs on
//! the side of compacting early for code-heavy conversations.

use crate::conversation::ChatMessage;

/// When to compact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compaction {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// Fraction of the window at which to compact.
    pub threshold: f64,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            context_window: 200_000,
            threshold: 0.8,
        }
    }
}

/// Longest piece of one tool result kept in the text sent for summarising.
const SERIALIZED_TOOL_RESULT: usize = 2_000;

/// The largest share of the window a summary turn may fill, leaving room for the summary.
const SUMMARY_TURN_SHARE: f64 = 0.9;

/// The instruction of the summary call.
pub const SUMMARY_PROMPT: &str = "Summarise the work so far for yourself, to continue it with \
     this summary instead of the full conversation: the task, what was done (files changed and \
     how), what was learned (commands, test results, errors), decisions made, and what remains. \
     Be specific: paths, function names, exact commands. Do not call tools.";

impl Compaction {
    /// Whether `messages` have grown past the threshold.
    pub fn needed(&self, messages: &[ChatMessage]) -> bool {
        estimate_tokens(messages) as f64 > self.context_window as f64 * self.threshold
    }

    /// The summary call as the conversation's next turn, made with the conversation's
    /// tools so its whole prefix can come from the prompt cache: `messages` (system prompt
    /// first), then the instruction. `None` when it would fill more than 90 % of the
    /// window; [`summary_request`] is smaller.
    pub fn summary_turn(&self, messages: &[ChatMessage]) -> Option<Vec<ChatMessage>> {
        let mut turn = messages.to_vec();
        turn.push(ChatMessage::user(SUMMARY_PROMPT));
        let limit = self.context_window as f64 * SUMMARY_TURN_SHARE;
        (estimate_tokens(&turn) as f64 <= limit).then_some(turn)
    }
}

/// Whether `messages` are a summary turn's (see [`Compaction::summary_turn`]): the model's
/// answer to them is a summary, not a step of the conversation.
pub fn is_summary_turn(messages: &[ChatMessage]) -> bool {
    matches!(messages.last(), Some(ChatMessage::User { content }) if content == SUMMARY_PROMPT)
}

/// Estimated tokens of a conversation (characters / 4).
pub fn estimate_tokens(messages: &[ChatMessage]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { content } | ChatMessage::User { content } => content.len(),
            ChatMessage::Tool { content, .. } => content.len() + 16,
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                content.as_deref().map_or(0, str::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.function.name.len() + c.function.arguments.len() + 16)
                        .sum::<usize>()
            }
        })
        .sum();
    (chars / 4) as u64
}

/// The messages of the summary call when the summary turn would not fit: the system prompt,
/// then the conversation written out as text (long tool results cut) followed by the
/// instruction. Made without tools.
pub fn summary_request(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let system = messages
        .first()
        .cloned()
        .unwrap_or_else(|| ChatMessage::system(""));
    let mut text = String::from("The conversation so far:\n\n");
    for m in messages.iter().skip(1) {
        match m {
            ChatMessage::System { content } => text.push_str(&format!("[system] {content}\n\n")),
            ChatMessage::User { content } => text.push_str(&format!("[user] {content}\n\n")),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(c) = content {
                    text.push_str(&format!("[assistant] {c}\n"));
                }
                for call in tool_calls {
                    text.push_str(&format!(
                        "[tool call] {}({})\n",
                        call.function.name, call.function.arguments
                    ));
                }
                text.push('\n');
            }
            ChatMessage::Tool { content, .. } => {
                let cut: String = content.chars().take(SERIALIZED_TOOL_RESULT).collect();
                let more = if cut.len() < content.len() {
                    " […]"
                } else {
                    ""
                };
                text.push_str(&format!("[tool result] {cut}{more}\n\n"));
            }
        }
    }
    text.push_str(SUMMARY_PROMPT);
    vec![system, ChatMessage::user(text)]
}

/// The compacted conversation: system prompt, the task (the first user message: the plan is
/// what the Coder must never lose), the summary, and the latest user message if it is a
/// later one.
pub fn compacted(messages: &[ChatMessage], summary: &str) -> Vec<ChatMessage> {
    let system = messages
        .first()
        .cloned()
        .unwrap_or_else(|| ChatMessage::system(""));
    let mut out = vec![system];
    if let Some(task @ ChatMessage::User { .. }) = messages.get(1) {
        out.push(task.clone());
    }
    out.push(ChatMessage::user(format!(
        "Summary of the work so far (the earlier conversation was compacted):\n\n{summary}"
    )));
    if let Some(last_user) = messages
        .iter()
        .skip(2)
        .rev()
        .find(|m| matches!(m, ChatMessage::User { .. }))
    {
        out.push(last_user.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ToolCall;

    fn long_conversation() -> Vec<ChatMessage> {
        let mut m = vec![ChatMessage::system("sys"), ChatMessage::user("the plan")];
        for i in 0..10 {
            m.push(ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new(
                    format!("c{i}"),
                    "Read",
                    r#"{"file_path":"a.rs"}"#,
                )],
            });
            m.push(ChatMessage::tool_result(format!("c{i}"), "x".repeat(5000)));
        }
        m.push(ChatMessage::user("<@U1>: use tabs"));
        m
    }

    #[test]
    fn the_summary_turn_repeats_the_conversation_then_asks_for_the_summary_if_it_fits() {
        let m = long_conversation();
        let roomy = Compaction {
            context_window: 20_000,
            threshold: 0.8,
        };
        let turn = roomy.summary_turn(&m).unwrap();
        assert_eq!(
            turn[..m.len()],
            m[..],
            "the conversation as sent, unchanged"
        );
        assert_eq!(turn[m.len()], ChatMessage::user(SUMMARY_PROMPT));
        assert_eq!(turn.len(), m.len() + 1);
        assert!(is_summary_turn(&turn));
        assert!(!is_summary_turn(&m));
        assert!(!is_summary_turn(&summary_request(&m)));
        // 12.5k tokens and the instruction are over 90 % of a 13,000-token window.
        let tight = Compaction {
            context_window: 13_000,
            threshold: 0.8,
        };
        assert_eq!(tight.summary_turn(&m), None);
    }

    #[test]
    fn compaction_triggers_at_the_threshold() {
        let c = Compaction {
            context_window: 10_000,
            threshold: 0.8,
        };
        let m = long_conversation();
        assert!(estimate_tokens(&m) > 12_000);
        assert!(c.needed(&m));
        assert!(!c.needed(&m[..3]));
    }

    #[test]
    fn the_summary_request_is_small_and_the_result_keeps_the_latest_user_message() {
        let m = long_conversation();
        let request = summary_request(&m);
        assert_eq!(request.len(), 2);
        assert!(estimate_tokens(&request) < estimate_tokens(&m) / 2);
        let ChatMessage::User { content } = &request[1] else {
            panic!()
        };
        assert!(content.starts_with("The conversation so far:\n\n[user] the plan"));
        assert!(content.ends_with(SUMMARY_PROMPT));
        let out = compacted(&m, "did things");
        assert_eq!(out.len(), 4);
        assert_eq!(out[0], ChatMessage::system("sys"));
        assert_eq!(out[1], ChatMessage::user("the plan"));
        assert!(
            matches!(&out[2], ChatMessage::User { content } if content.ends_with("did things"))
        );
        assert_eq!(out[3], ChatMessage::user("<@U1>: use tabs"));
        // Without a later user message, the task and the summary follow the system prompt.
        let out = compacted(&m[..4], "did things");
        assert_eq!(out.len(), 3);
    }
}
