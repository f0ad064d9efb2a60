//! A streamed chat completion (`stream: true`): the provider's server-sent events read as
//! they come, the answer's text handed to a [`TextSink`] piece by piece (so a person can
//! watch the PM write), and the whole assembled into the same reply and usage a
//! non-streamed call gives.
//!
//! OpenRouter's stream: `data: {chunk}` lines, comment lines (`: OPENROUTER PROCESSING`)
//! to ignore, `data: [DONE]` at the end. Each chunk's `choices[0].delta` carries some
//! `content` and tool calls' pieces keyed by `index` (the id and name come once, the
//! arguments in pieces); the last chunk carries `usage`. An error after the stream began
//! comes as a chunk with `error` and `finish_reason: "error"`.

use std::collections::BTreeMap;

use codebutler_agent::conversation::{FunctionCall, ToolCall};
use codebutler_agent::tool_loop::AssistantReply;
use serde::Deserialize;

use super::{GatewayError, ProviderError, Usage};

/// Whoever watches a streamed answer being written.
pub trait TextSink: Send + Sync {
    /// The model wrote `delta`, the next piece of its answer's text.
    fn text(&self, delta: &str);
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<Usage>,
    error: Option<ProviderError>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
    error: Option<ProviderError>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: usize,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// A streamed answer being put together, line by line.
#[derive(Default)]
pub(super) struct Assembly {
    /// Bytes of a line not complete yet.
    partial: Vec<u8>,
    content: Option<String>,
    calls: BTreeMap<usize, (String, String, String)>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl Assembly {
    /// Takes the next bytes of the body, telling `sink` each piece of text.
    pub(super) fn feed(&mut self, bytes: &[u8], sink: &dyn TextSink) -> Result<(), GatewayError> {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            self.line(line.trim_end_matches(['\r', '\n']), sink)?;
        }
        Ok(())
    }

    fn line(&mut self, line: &str, sink: &dyn TextSink) -> Result<(), GatewayError> {
        let Some(data) = line.strip_prefix("data:") else {
            // Comments, event names, blank lines between events.
            return Ok(());
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| GatewayError::Decode(e.to_string()))?;
        if let Some(e) = chunk.error {
            return Err(e.into_error(502, None));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices {
            if let Some(e) = choice.error {
                return Err(e.into_error(502, None));
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            let Some(delta) = choice.delta else {
                continue;
            };
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                sink.text(&text);
                self.content.get_or_insert_default().push_str(&text);
            }
            for piece in delta.tool_calls.into_iter().flatten() {
                let call = self.calls.entry(piece.index).or_default();
                if let Some(id) = piece.id {
                    call.0 = id;
                }
                if let Some(function) = piece.function {
                    if let Some(name) = function.name {
                        call.1.push_str(&name);
                    }
                    if let Some(arguments) = function.arguments {
                        call.2.push_str(&arguments);
                    }
                }
            }
        }
        Ok(())
    }

    /// The whole answer, once the body ended.
    pub(super) fn finish(
        mut self,
        sink: &dyn TextSink,
    ) -> Result<(AssistantReply, Usage), GatewayError> {
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial);
            self.line(String::from_utf8_lossy(&rest).trim_end(), sink)?;
        }
        if self.finish_reason.as_deref() == Some("error") {
            return Err(GatewayError::Http {
                status: 502,
                message: "the provider ended the answer with an error".into(),
                retry_after: None,
            });
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(GatewayError::Decode(
                "the stream ended before the answer did".into(),
            ));
        }
        let usage = self.usage.unwrap_or_else(|| {
            tracing::warn!(
                "the provider's answer has no usage: the call is recorded with no tokens"
            );
            Usage::default()
        });
        let tool_calls = self
            .calls
            .into_values()
            .map(|(id, name, arguments)| ToolCall {
                id,
                kind: "function".to_owned(),
                function: FunctionCall { name, arguments },
            })
            .collect();
        Ok((
            AssistantReply {
                content: self.content,
                tool_calls,
            },
            usage,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Pieces(Mutex<Vec<String>>);

    impl TextSink for Pieces {
        fn text(&self, delta: &str) {
            self.0.lock().unwrap().push(delta.to_owned());
        }
    }

    #[test]
    fn text_and_tool_calls_are_put_together_from_their_pieces() {
        let body = concat!(
            ": OPENROUTER PROCESSING\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Let me \"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"look.\"}}]}\r\n\r\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"ReadFile\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"a.rs\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"cost\":0.5}}\n\n",
            "data: [DONE]\n\n",
        );
        let sink = Pieces::default();
        let mut assembly = Assembly::default();
        // Cut anywhere, even inside a line or a character.
        for piece in body.as_bytes().chunks(7) {
            assembly.feed(piece, &sink).unwrap();
        }
        let (reply, usage) = assembly.finish(&sink).unwrap();
        assert_eq!(reply.content.as_deref(), Some("Let me look."));
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.tool_calls[0].id, "call_1");
        assert_eq!(reply.tool_calls[0].function.name, "ReadFile");
        assert_eq!(reply.tool_calls[0].function.arguments, r#"{"path":"a.rs"}"#);
        assert_eq!((usage.prompt_tokens, usage.cost), (10, Some(0.5)));
        assert_eq!(*sink.0.lock().unwrap(), ["Let me ", "look."]);
    }

    #[test]
    fn an_error_after_the_stream_began_fails_the_call() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Par\"}}]}\n\n",
            "data: {\"error\":{\"code\":502,\"message\":\"upstream died\"},\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"error\"}]}\n\n",
        );
        let sink = Pieces::default();
        let mut assembly = Assembly::default();
        let error = assembly.feed(body.as_bytes(), &sink).unwrap_err();
        assert!(
            matches!(error, GatewayError::Http { status: 502, .. }),
            "{error}"
        );
        let cut = Assembly::default().finish(&sink).unwrap_err();
        assert!(matches!(cut, GatewayError::Decode(_)), "{cut}");
    }
}
