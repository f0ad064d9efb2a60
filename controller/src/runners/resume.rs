//! The conversation a Coder run leaves behind, and the one a new run of the same thread
//! resumes from: after a run ends, after a crash or restart ("continue"), or after "undo".
//!
//! After each model call the hub stores only what the call added to the conversation
//! ([`StoredConversation`]), so a long session writes its conversation about once rather
//! than once per call.

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool_loop::AssistantReply;
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreError};

/// The conversation after one model call, without the system prompt: what was sent and the
/// reply, each message as JSON.
pub fn after_call(
    sent: &[ChatMessage],
    reply: &AssistantReply,
) -> Result<Vec<String>, serde_json::Error> {
    let reply = ChatMessage::Assistant {
        content: reply.content.clone(),
        tool_calls: reply.tool_calls.clone(),
    };
    sent.iter()
        .filter(|m| !matches!(m, ChatMessage::System { .. }))
        .chain([&reply])
        .map(serde_json::to_string)
        .collect()
}

/// What of a run's conversation is in the store (a digest per message), so the next call
/// stores only the messages it added, or, after a compaction, what follows the head it
/// shares with the stored conversation.
#[derive(Debug, Default)]
pub struct StoredConversation {
    digests: Vec<[u8; 32]>,
}

/// What to append to the stored conversation to make it the new one.
#[derive(Debug, PartialEq)]
struct Appended {
    /// Stored messages kept (the rest of the stored conversation is cut).
    kept: usize,
    /// The messages after them, as a JSON array.
    added: String,
}

impl StoredConversation {
    /// Stores `conversation` (messages as JSON) as run `run_id`'s, appending only what is
    /// not stored yet. On failure the store keeps what it had, and so does `self`: the next
    /// call stores what this one missed.
    pub async fn save(
        &mut self,
        store: &Store,
        run_id: &str,
        conversation: &[String],
    ) -> Result<(), StoreError> {
        let Some(append) = self.append_for(conversation) else {
            return Ok(());
        };
        store
            .append_run_conversation(run_id, append.kept, &append.added)
            .await?;
        self.stored(append.kept, conversation);
        Ok(())
    }

    /// Notes that the store holds `conversation` now, whose first `kept` messages it held
    /// already.
    fn stored(&mut self, kept: usize, conversation: &[String]) {
        self.digests.truncate(kept);
        self.digests
            .extend(conversation[kept..].iter().map(|m| digest(m)));
    }

    /// What to store for `conversation`, or `None` if it is stored already.
    fn append_for(&self, conversation: &[String]) -> Option<Appended> {
        let kept = self
            .digests
            .iter()
            .zip(conversation)
            .take_while(|(stored, message)| **stored == digest(message))
            .count();
        if kept == conversation.len() && kept == self.digests.len() {
            return None;
        }
        Some(Appended {
            kept,
            added: format!("[{}]", conversation[kept..].join(",")),
        })
    }
}

fn digest(message: &str) -> [u8; 32] {
    Sha256::digest(message.as_bytes()).into()
}

/// The conversation a new run resumes (JSON for the runner's task): the stored one, cut
/// back to its last complete turn, then the new message from the thread.
///
/// A run that stopped between a reply with tool calls and their results (a crash, a kill)
/// left calls without results, which the model would refuse: that reply is dropped and its
/// turn is made again. Unreadable stored JSON is an error rather than a silent fresh start.
pub fn resume_with(stored: &str, message: &str) -> Result<String, serde_json::Error> {
    let mut conversation: Vec<ChatMessage> = if stored.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(stored)?
    };
    while let Some(last) = conversation.last() {
        match last {
            ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                conversation.pop();
            }
            ChatMessage::Tool { .. } if !has_all_results(&conversation) => {
                conversation.pop();
            }
            _ => break,
        }
    }
    conversation.push(ChatMessage::user(message));
    serde_json::to_string(&conversation)
}

/// Whether the last assistant message's tool calls all have results after it.
fn has_all_results(conversation: &[ChatMessage]) -> bool {
    let Some(at) = conversation
        .iter()
        .rposition(|m| matches!(m, ChatMessage::Assistant { .. }))
    else {
        return false;
    };
    let ChatMessage::Assistant { tool_calls, .. } = &conversation[at] else {
        return false;
    };
    tool_calls.iter().all(|call| {
        conversation[at + 1..].iter().any(
            |m| matches!(m, ChatMessage::Tool { tool_call_id, .. } if *tool_call_id == call.id),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ThreadKey;
    use codebutler_agent::conversation::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "Bash", r#"{"command":"ls"}"#)
    }

    fn calls(ids: &[&str]) -> ChatMessage {
        ChatMessage::Assistant {
            content: None,
            tool_calls: ids.iter().map(|id| call(id)).collect(),
        }
    }

    fn parse(json: &str) -> Vec<ChatMessage> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn after_a_call_the_conversation_holds_what_was_sent_and_the_reply() {
        let sent = [ChatMessage::system("s"), ChatMessage::user("do it")];
        let reply = AssistantReply {
            content: Some("on it".into()),
            tool_calls: vec![call("c1")],
        };
        let messages = after_call(&sent, &reply).unwrap();
        assert_eq!(
            parse(&format!("[{}]", messages.join(","))),
            vec![
                ChatMessage::user("do it"),
                ChatMessage::Assistant {
                    content: Some("on it".into()),
                    tool_calls: vec![call("c1")],
                }
            ]
        );
    }

    fn json(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect()
    }

    #[test]
    fn each_call_stores_only_what_it_added_and_a_compaction_what_follows_the_shared_head() {
        let mut stored = StoredConversation::default();
        let first = json(&[ChatMessage::user("plan"), calls(&["a"])]);
        let append = stored.append_for(&first).unwrap();
        assert_eq!(append.kept, 0, "a run's first call starts the conversation");
        assert_eq!(parse(&append.added).len(), 2);
        stored.stored(append.kept, &first);
        assert_eq!(
            stored.append_for(&first),
            None,
            "nothing new, nothing stored"
        );

        let second = json(&[
            ChatMessage::user("plan"),
            calls(&["a"]),
            ChatMessage::tool_result("a", "ok"),
            ChatMessage::assistant_text("done"),
        ]);
        let append = stored.append_for(&second).unwrap();
        assert_eq!(append.kept, 2);
        assert_eq!(
            parse(&append.added),
            vec![
                ChatMessage::tool_result("a", "ok"),
                ChatMessage::assistant_text("done")
            ]
        );
        stored.stored(append.kept, &second);

        // A compaction keeps the plan and replaces the rest with a summary.
        let compacted = json(&[
            ChatMessage::user("plan"),
            ChatMessage::user("Summary: read a"),
            calls(&["b"]),
        ]);
        let append = stored.append_for(&compacted).unwrap();
        assert_eq!(append.kept, 1);
        assert_eq!(parse(&append.added).len(), 2);

        // A conversation cut back without anything new still says where it ends.
        let cut = json(&[ChatMessage::user("plan")]);
        let append = stored.append_for(&cut).unwrap();
        assert_eq!((append.kept, append.added.as_str()), (1, "[]"));
    }

    #[test]
    fn a_finished_conversation_resumes_with_the_new_message() {
        let stored = serde_json::to_string(&[
            ChatMessage::user("do it"),
            ChatMessage::assistant_text("done"),
        ])
        .unwrap();
        assert_eq!(
            parse(&resume_with(&stored, "also the docs").unwrap()),
            vec![
                ChatMessage::user("do it"),
                ChatMessage::assistant_text("done"),
                ChatMessage::user("also the docs"),
            ]
        );
    }

    #[test]
    fn calls_left_without_results_by_a_crash_are_dropped() {
        let stored = serde_json::to_string(&[
            ChatMessage::user("do it"),
            calls(&["a"]),
            ChatMessage::tool_result("a", "ok"),
            calls(&["b", "c"]),
            ChatMessage::tool_result("b", "ok"),
        ])
        .unwrap();
        assert_eq!(
            parse(&resume_with(&stored, "continue").unwrap()),
            vec![
                ChatMessage::user("do it"),
                calls(&["a"]),
                ChatMessage::tool_result("a", "ok"),
                ChatMessage::user("continue"),
            ]
        );
    }

    #[test]
    fn nothing_stored_starts_from_the_message_and_garbage_is_an_error() {
        assert_eq!(
            parse(&resume_with("", "continue").unwrap()),
            vec![ChatMessage::user("continue")]
        );
        assert!(resume_with("{not json", "continue").is_err());
    }

    /// Whatever the calls' conversations, the store reads back the latest one exactly.
    async fn the_store_reads_back_each_calls_conversation_exactly(store: &Store) {
        let calls = |id: &str| ChatMessage::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(id, "Bash", r#"{"command":"ls"}"#)],
        };
        let json = |messages: &[ChatMessage]| -> Vec<String> {
            messages
                .iter()
                .map(|m| serde_json::to_string(m).unwrap())
                .collect()
        };
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        crate::store::testing::create_run(store, "r1", &thread).await;
        let plan = ChatMessage::user("plan");
        let turn = |i: usize| {
            vec![
                calls(&format!("c{i}")),
                ChatMessage::tool_result(format!("c{i}"), format!("out {i} \"quoted\" ✓")),
            ]
        };
        let mut conversations = Vec::new();
        let mut growing = vec![plan.clone()];
        for i in 0..4 {
            growing.extend(turn(i));
            conversations.push(growing.clone());
        }
        // A compaction, turns after it, and a cut back to the plan.
        let mut compacted = vec![plan.clone(), ChatMessage::user("Summary: four turns")];
        conversations.push(compacted.clone());
        compacted.extend(turn(4));
        conversations.push(compacted.clone());
        conversations.push(compacted.clone());
        conversations.push(vec![plan.clone()]);
        conversations.push(vec![plan, ChatMessage::assistant_text("done")]);

        let mut stored = StoredConversation::default();
        for conversation in conversations {
            let json = json(&conversation);
            stored.save(store, "r1", &json).await.unwrap();
            assert_eq!(
                store.run_conversation("r1").await.unwrap(),
                Some(format!("[{}]", json.join(",")))
            );
        }
    }

    crate::store::testing::on_both_backends!(the_store_reads_back_each_calls_conversation_exactly);
}
