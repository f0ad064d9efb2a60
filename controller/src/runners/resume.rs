//! The conversation a Coder run leaves behind, and the one a new run of the same thread
//! resumes from: after a run ends, after a crash or restart ("continue"), or after "undo".

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool_loop::AssistantReply;

/// The conversation after one model call (JSON, without the system prompt): what was sent
/// and the reply.
pub fn after_call(
    sent: &[ChatMessage],
    reply: &AssistantReply,
) -> Result<String, serde_json::Error> {
    let mut conversation: Vec<&ChatMessage> = sent
        .iter()
        .filter(|m| !matches!(m, ChatMessage::System { .. }))
        .collect();
    let reply = ChatMessage::Assistant {
        content: reply.content.clone(),
        tool_calls: reply.tool_calls.clone(),
    };
    conversation.push(&reply);
    serde_json::to_string(&conversation)
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
        assert_eq!(
            parse(&after_call(&sent, &reply).unwrap()),
            vec![
                ChatMessage::user("do it"),
                ChatMessage::Assistant {
                    content: Some("on it".into()),
                    tool_calls: vec![call("c1")],
                }
            ]
        );
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
}
