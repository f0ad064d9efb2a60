//! Context compaction for long Coder runs: when a conversation nears the model's context
//! window (80 % of it), the model summarises the work so far in one call, and the
//! conversation becomes its head — the system prompt, the task and the first turns, up to
//! [`Compaction::head_share`] of the window, word for word — then that summary and the
//! latest user message.
//!
//! Both are made so that a prompt cache keeps working across a compaction:
//! - the summary call is the conversation's next turn ([`Compaction::summary_turn`]: the
//!   same system prompt, tools and messages, then the instruction), so the provider reads
//!   all but the last turn from its cache. Only when that turn would not fit the window is
//!   the conversation written out as text instead ([`summary_request`], no tools, long tool
//!   results cut);
//! - the compacted conversation starts with a prefix the cache holds already: its head is
//!   the conversation's own beginning, the same at every compaction of the run, so the calls
//!   after a compaction read the head from the cache and send only the summary and the new
//!   turns. Without the head they would start again from about the system prompt and task,
//!   and every call after a compaction would send most of its prompt uncached (the
//!   gateway marks a cache breakpoint at the head's end, [`summary_index`]). The price is
//!   more frequent compactions: each frees the window down to the head, not to nothing.
//!
//! Sizes are estimated at four characters per token: cheap, needs no tokenizer, and errs on
//! the side of compacting early for code-heavy conversations.

use crate::conversation::{ChatMessage, ToolSpec};

/// When to compact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compaction {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// Fraction of the window at which to compact.
    pub threshold: f64,
    /// Largest fraction of the window the compacted conversation keeps of the
    /// conversation's beginning, word for word (see the module's documentation).
    pub head_share: f64,
    /// Estimated tokens of the tool definitions every call sends beside the messages: they
    /// fill the window too ([`Compaction::with_tools`]).
    pub tool_tokens: u64,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            context_window: 200_000,
            threshold: 0.8,
            head_share: HEAD_SHARE,
            tool_tokens: 0,
        }
    }
}

/// The default [`Compaction::head_share`]: 55 % of the window, so with compaction at 80 % a
/// compaction frees at least a quarter of it. A larger head serves more of the prompts from
/// the cache but compacts more often and sends more (cached) tokens, so it costs more; a
/// smaller one costs less and serves less from the cache. 55 % is the smallest share that
/// serves 92 % of a long session's prompt tokens from the cache (tests/bench/README.md:
/// prompt tokens of a long Coder session, where the costs of the other shares are beside
/// it).
pub const HEAD_SHARE: f64 = 0.55;

/// How the compaction's summary starts in the compacted conversation.
const SUMMARY_HEADER: &str =
    "Summary of the work so far (the earlier conversation was compacted):\n\n";

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
    /// The same compaction for calls that send `tools`' definitions with every prompt.
    pub fn with_tools(self, tools: &[ToolSpec]) -> Self {
        let chars: usize = tools.iter().map(|t| t.to_openai().to_string().len()).sum();
        Self {
            tool_tokens: (chars / 4) as u64,
            ..self
        }
    }

    /// Whether `messages` should be compacted: they (and the tools sent with them) have
    /// grown past the threshold, and there is a turn to summarise since the task or the
    /// last compaction — a conversation that is only its beginning cannot get smaller, so
    /// compacting it again would only repeat the summary call.
    pub fn needed(&self, messages: &[ChatMessage]) -> bool {
        let since = summary_index(messages).map_or(2, |summary| summary + 1);
        let new_turn = messages
            .iter()
            .skip(since)
            .any(|m| matches!(m, ChatMessage::Assistant { .. }));
        new_turn && self.over_threshold(messages)
    }

    /// Whether `messages` and the tools sent with them pass the threshold.
    fn over_threshold(&self, messages: &[ChatMessage]) -> bool {
        (estimate_tokens(messages) + self.tool_tokens) as f64
            > self.context_window as f64 * self.threshold
    }

    /// The summary call as the conversation's next turn, made with the conversation's
    /// tools so its whole prefix can come from the prompt cache: `messages` (system prompt
    /// first), then the instruction. `None` when it would fill more than 90 % of the
    /// window; [`summary_request`] is smaller.
    pub fn summary_turn(&self, messages: &[ChatMessage]) -> Option<Vec<ChatMessage>> {
        let mut turn = messages.to_vec();
        turn.push(ChatMessage::user(SUMMARY_PROMPT));
        let limit = self.context_window as f64 * SUMMARY_TURN_SHARE;
        ((estimate_tokens(&turn) + self.tool_tokens) as f64 <= limit).then_some(turn)
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
            ChatMessage::System { content } => content.len(),
            ChatMessage::User { content } => content.len(),
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

impl Compaction {
    /// The compacted conversation: its head (the system prompt, the task — the plan is what
    /// the Coder must never lose — and as many whole turns after it as fit
    /// [`Compaction::head_share`] of the window), the summary, and the latest user message
    /// if the head does not hold it. When that would still need compacting (a long
    /// summary), the head is only the system prompt and the task.
    pub fn compacted(&self, messages: &[ChatMessage], summary: &str) -> Vec<ChatMessage> {
        let budget = (self.context_window as f64 * self.head_share) as u64;
        let out = compacted_with_head(messages, summary, head_len(messages, budget));
        if self.over_threshold(&out) {
            compacted_with_head(messages, summary, head_len(messages, 0))
        } else {
            out
        }
    }
}

/// The number of messages of the head that fits `budget` tokens: the system prompt and the
/// task always, then whole turns (an assistant message and the tool results that answer
/// it, or a user message) while they fit. A turn's tool results are never split from its
/// call: a provider refuses a tool result without its call.
fn head_len(messages: &[ChatMessage], budget: u64) -> usize {
    let mut len = match messages.get(1) {
        Some(ChatMessage::User { .. }) => 2,
        _ => messages.len().min(1),
    };
    let mut used = estimate_tokens(&messages[..len]);
    while len < messages.len() {
        let mut end = len + 1;
        while matches!(messages.get(end), Some(ChatMessage::Tool { .. })) {
            end += 1;
        }
        // A turn still waiting for its results is not whole yet.
        if end == messages.len() && matches!(messages[len], ChatMessage::Assistant { .. }) {
            break;
        }
        let turn = estimate_tokens(&messages[len..end]);
        if used + turn > budget {
            break;
        }
        used += turn;
        len = end;
    }
    len
}

fn compacted_with_head(messages: &[ChatMessage], summary: &str, head: usize) -> Vec<ChatMessage> {
    let mut out = if messages.is_empty() {
        vec![ChatMessage::system("")]
    } else {
        messages[..head].to_vec()
    };
    out.push(ChatMessage::user(format!("{SUMMARY_HEADER}{summary}")));
    if let Some(last_user) = messages
        .iter()
        .skip(head.max(2))
        .rev()
        .find(|m| matches!(m, ChatMessage::User { content } if !is_summary(&content.text())))
    {
        out.push(last_user.clone());
    }
    out
}

fn is_summary(text: &str) -> bool {
    text.starts_with(SUMMARY_HEADER)
}

/// Where the latest compaction's summary is in `messages`, if they were compacted: the
/// messages before it are the head every call since then repeats, worth a cache breakpoint.
pub fn summary_index(messages: &[ChatMessage]) -> Option<usize> {
    messages
        .iter()
        .rposition(|m| matches!(m, ChatMessage::User { content } if is_summary(&content.text())))
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
            ..Compaction::default()
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
            ..Compaction::default()
        };
        assert_eq!(tight.summary_turn(&m), None);
    }

    /// The tools' definitions go with every call, so they fill the window beside the
    /// messages: a conversation under the threshold alone is over it with large tools.
    #[test]
    fn the_tools_definitions_count_toward_the_threshold() {
        let m = long_conversation();
        let c = Compaction {
            context_window: 20_000,
            ..Compaction::default()
        };
        assert!(!c.needed(&m), "12.5k tokens are under 16k");
        let big = ToolSpec {
            name: "Big",
            description: "a tool with a long schema",
            parameters: serde_json::json!({"type": "object", "description": "x".repeat(16_000)}),
        };
        let with_tools = c.with_tools(&[big]);
        assert!(
            with_tools.tool_tokens >= 4_000,
            "{}",
            with_tools.tool_tokens
        );
        assert!(with_tools.needed(&m));
        assert_eq!(c.with_tools(&[]).tool_tokens, 0);

        // Tools past the threshold on their own: a conversation without a turn since its
        // task, or since its last compaction, has nothing to summarise.
        let tiny = Compaction {
            context_window: 4_000,
            ..with_tools
        };
        assert!(!tiny.needed(&m[..2]), "only the system prompt and the task");
        assert!(tiny.needed(&m[..4]), "a turn to summarise");
        let compacted = tiny.compacted(&m, "did things");
        assert!(!tiny.needed(&compacted), "nothing new since the summary");
        let mut grown = compacted.clone();
        grown.extend_from_slice(&m[2..4]);
        assert!(tiny.needed(&grown));
    }

    #[test]
    fn compaction_triggers_at_the_threshold() {
        let c = Compaction {
            context_window: 10_000,
            ..Compaction::default()
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
        assert!(
            content
                .text()
                .starts_with("The conversation so far:\n\n[user] the plan")
        );
        assert!(content.text().ends_with(SUMMARY_PROMPT));
        let no_head = Compaction {
            head_share: 0.0,
            ..Compaction::default()
        };
        let out = no_head.compacted(&m, "did things");
        assert_eq!(out.len(), 4);
        assert_eq!(out[0], ChatMessage::system("sys"));
        assert_eq!(out[1], ChatMessage::user("the plan"));
        assert!(
            matches!(&out[2], ChatMessage::User { content } if content.text().ends_with("did things"))
        );
        assert_eq!(out[3], ChatMessage::user("<@U1>: use tabs"));
        // Without a later user message, the task and the summary follow the system prompt.
        let out = no_head.compacted(&m[..4], "did things");
        assert_eq!(out.len(), 3);
        assert_eq!(summary_index(&out), Some(2));
        assert_eq!(summary_index(&m), None);
    }

    /// The head is the conversation's own beginning in whole turns within its share of the
    /// window, and the next compaction keeps the very same head: the prefix the prompt
    /// cache holds.
    #[test]
    fn the_compacted_conversation_keeps_the_same_head_of_whole_turns() {
        let m = long_conversation();
        // Each turn is about 1,260 tokens; 3,000 hold the task and two turns.
        let c = Compaction {
            context_window: 10_000,
            head_share: 0.3,
            ..Compaction::default()
        };
        let first = c.compacted(&m, "did things");
        assert_eq!(first[..6], m[..6]);
        assert!(
            matches!(&first[6], ChatMessage::User { content } if content.text().ends_with("did things"))
        );
        assert_eq!(first[7], ChatMessage::user("<@U1>: use tabs"));
        assert_eq!(first.len(), 8);
        assert_eq!(summary_index(&first), Some(6));
        assert!(!c.needed(&first));

        let mut grown = first.clone();
        grown.extend_from_slice(&m[6..18]);
        assert!(c.needed(&grown));
        let second = c.compacted(&grown, "did more");
        assert_eq!(second[..6], m[..6], "the same head as the first compaction");
        assert_eq!(summary_index(&second), Some(second.len() - 1));
        assert!(!c.needed(&second));
    }

    /// A turn's tool results stay with their call: a turn that does not fit whole is left
    /// out whole.
    #[test]
    fn the_head_never_splits_a_call_from_its_results() {
        let mut m = vec![ChatMessage::system("sys"), ChatMessage::user("the plan")];
        m.push(ChatMessage::Assistant {
            content: None,
            tool_calls: vec![
                ToolCall::new("a", "Read", r#"{"file_path":"a.rs"}"#),
                ToolCall::new("b", "Read", r#"{"file_path":"b.rs"}"#),
            ],
        });
        m.push(ChatMessage::tool_result("a", "x".repeat(400)));
        m.push(ChatMessage::tool_result("b", "x".repeat(400)));
        m.push(ChatMessage::user("go on"));
        // 150 tokens hold the first result but not both.
        let c = Compaction {
            context_window: 1_000,
            threshold: 1.0,
            head_share: 0.15,
            ..Compaction::default()
        };
        let out = c.compacted(&m, "s");
        assert_eq!(out[..2], m[..2]);
        assert_eq!(summary_index(&out), Some(2));
        let roomy = Compaction {
            head_share: 0.3,
            ..c
        };
        let out = roomy.compacted(&m, "s");
        assert_eq!(out[..6], m[..6], "the whole turn and the user's message");
        assert_eq!(
            out.len(),
            7,
            "the latest user message is in the head already"
        );
    }

    /// A summary so long that head and summary would need compacting again keeps only the
    /// system prompt and the task before it: a compaction never leads to another at once.
    #[test]
    fn a_long_summary_gives_up_the_head_rather_than_compact_again() {
        let m = long_conversation();
        let c = Compaction {
            context_window: 10_000,
            head_share: 0.4,
            ..Compaction::default()
        };
        let out = c.compacted(&m, &"word ".repeat(5_000));
        assert_eq!(out[..2], m[..2]);
        assert_eq!(summary_index(&out), Some(2));
    }
}
