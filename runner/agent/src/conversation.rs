//! Conversation types in the shape of the OpenAI-compatible chat completions protocol, so
//! a stored conversation can be sent to the model as it is.

use serde::{Deserialize, Serialize};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    /// The system prompt.
    System { content: String },
    /// A person's message (or the controller speaking for one).
    User { content: String },
    /// The model's reply: text, tool calls, or both.
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant_text(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A tool result.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// A tool call the model asked for. `arguments` is the raw JSON text the model produced,
/// which may be anything: it is parsed only when the tool runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".to_owned()
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

impl ToolCall {
    /// A function tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

/// A tool's definition as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

impl ToolSpec {
    /// The `{"type":"function","function":{…}}` object of the chat completions protocol.
    pub fn to_openai(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// The first message of a Coder's fresh run: the approved plan. The runner starts a run
/// with it, and the controller stores it as the start of a run's conversation.
pub fn plan_message(plan: &str) -> ChatMessage {
    ChatMessage::user(format!("Implement this approved plan:\n\n{plan}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_in_openai_shape() {
        let msgs = vec![
            ChatMessage::system("s"),
            ChatMessage::user("u"),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("c1", "Grep", r#"{"pattern":"x"}"#)],
            },
            ChatMessage::tool_result("c1", "r"),
        ];
        let json = serde_json::to_value(&msgs).unwrap();
        assert_eq!(json[2]["role"], "assistant");
        assert_eq!(json[2]["content"], serde_json::Value::Null);
        assert_eq!(json[2]["tool_calls"][0]["type"], "function");
        assert_eq!(json[2]["tool_calls"][0]["function"]["name"], "Grep");
        assert_eq!(json[3]["tool_call_id"], "c1");
        let back: Vec<ChatMessage> = serde_json::from_value(json).unwrap();
        assert_eq!(back, msgs);
    }
}
