//! Conversation types in the shape of the OpenAI-compatible chat completions protocol, so
//! a stored conversation can be sent to the model as it is.

use serde::{Deserialize, Serialize};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    /// The system prompt.
    System { content: String },
    /// A person's message (or the controller speaking for one): text, or text with images.
    User { content: UserContent },
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
            content: UserContent::Text(content.into()),
        }
    }

    /// A user message of several parts (text and images).
    pub fn user_parts(parts: Vec<ContentPart>) -> Self {
        Self::User {
            content: UserContent::Parts(parts),
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

/// What a user message holds: plain text (the usual `"content": "…"`), or a list of parts
/// (`"content": [{"type": "text", …}, {"type": "image_url", …}]`) when it carries images.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// What an image counts for in a conversation's length, in characters (a model reads an
/// image as about a thousand tokens, whatever its data URI's length).
pub const IMAGE_CHARS: usize = 4_000;

impl UserContent {
    /// The text of it: the text parts, one after the other (images are left out).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Self::Text(text) => std::borrow::Cow::Borrowed(text),
            Self::Parts(parts) => std::borrow::Cow::Owned(
                parts
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(text.as_str()),
                        ContentPart::ImageUrl { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
        }
    }

    /// Its length for a conversation's size: its text's, and [`IMAGE_CHARS`] per image.
    pub fn len(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => text.len(),
                    ContentPart::ImageUrl { .. } => IMAGE_CHARS,
                })
                .sum(),
        }
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq<str> for UserContent {
    fn eq(&self, other: &str) -> bool {
        matches!(self, Self::Text(text) if text == other)
    }
}

impl PartialEq<&str> for UserContent {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

impl std::fmt::Display for UserContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// One part of a user message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Text.
    Text { text: String },
    /// An image, as a URL (a `data:` URI carrying its bytes).
    ImageUrl { image_url: ImageUrl },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image part whose image is at `url` (a `data:` URI carrying its bytes).
    pub fn image_url(url: impl Into<String>) -> Self {
        Self::ImageUrl {
            image_url: ImageUrl { url: url.into() },
        }
    }
}

/// Where an image part's image is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
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
