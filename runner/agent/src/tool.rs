//! The tool abstraction and the ordered registry.
//!
//! A tool gets its arguments as parsed JSON and returns text for the model. Every failure —
//! bad arguments, a refused path, a missing file — is a [`ToolError`] that becomes an error
//! result the model can read and correct; nothing a model sends can crash the loop.
//!
//! The registry is an ordered list, not a map: the order in which tools are offered is
//! deterministic and affects how models behave.

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::conversation::{ChatMessage, ToolCall, ToolSpec};
use crate::truncate::truncate_output;

/// Why a tool call failed. The display text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments for {tool}: {reason}")]
    InvalidArguments { tool: String, reason: String },
    #[error("path {path:?} refused: {reason}")]
    PathRefused { path: String, reason: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Failed(String),
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The definition offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Whether the tool only observes. Read-only calls of one reply run concurrently.
    fn read_only(&self) -> bool;

    /// Runs the tool with the model's arguments (already parsed as JSON).
    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError>;
}

/// Parses a tool's arguments into its typed form, naming the tool in the error.
pub fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments {
        tool: tool.to_owned(),
        reason: e.to_string(),
    })
}

/// Runs a tool's blocking work (filesystem, git) off the async runtime, naming the tool if
/// the work could not finish (it panicked or the runtime is shutting down).
pub async fn run_blocking<T, F>(tool: &str, work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Failed(format!("{tool} did not finish: {e}")))?
}

/// An ordered set of tools.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    max_output_bytes: usize,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .field("max_output_bytes", &self.max_output_bytes)
            .finish()
    }
}

/// Default cap on one tool result, in bytes.
pub const DEFAULT_MAX_TOOL_OUTPUT: usize = 8 * 1024;

impl ToolRegistry {
    /// An empty registry whose results are capped at `max_output_bytes`.
    pub fn new(max_output_bytes: usize) -> Self {
        Self {
            tools: Vec::new(),
            max_output_bytes,
        }
    }

    /// Adds a tool at the end of the list.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.push(tool);
        self
    }

    /// The tools' names in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.spec().name).collect()
    }

    /// The definitions offered to the model, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    fn find(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.spec().name == name)
    }

    /// Runs one call and renders its result (or error) as the text the model reads,
    /// capped at the registry's output limit.
    pub async fn execute(&self, call: &ToolCall) -> String {
        let text = match self.run(call).await {
            Ok(text) => text,
            Err(e) => format!("error: {e}"),
        };
        truncate_output(&text, self.max_output_bytes)
    }

    async fn run(&self, call: &ToolCall) -> Result<String, ToolError> {
        let name = &call.function.name;
        let Some(tool) = self.find(name) else {
            return Err(ToolError::NotFound(format!(
                "unknown tool {name:?}; available tools: {}",
                self.names().join(", ")
            )));
        };
        let raw = call.function.arguments.trim();
        let args = if raw.is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::from_str(raw).map_err(|e| ToolError::InvalidArguments {
                tool: name.clone(),
                reason: format!("arguments are not valid JSON ({e}); send one JSON object"),
            })?
        };
        if !args.is_object() {
            return Err(ToolError::InvalidArguments {
                tool: name.clone(),
                reason: "arguments must be a JSON object".to_owned(),
            });
        }
        tool.call(args).await
    }

    /// Whether every call of a reply names a read-only tool.
    pub fn all_read_only(&self, calls: &[ToolCall]) -> bool {
        calls
            .iter()
            .all(|c| self.find(&c.function.name).is_some_and(|t| t.read_only()))
    }

    /// Runs the calls of one model reply and returns one tool-result message per call, in
    /// the calls' order. Read-only calls run concurrently; anything else runs in order.
    pub async fn execute_all(&self, calls: &[ToolCall]) -> Vec<ChatMessage> {
        let outputs: Vec<String> = if self.all_read_only(calls) {
            in_order_concurrently(calls.iter().map(|c| self.execute(c)).collect()).await
        } else {
            let mut out = Vec::with_capacity(calls.len());
            for call in calls {
                out.push(self.execute(call).await);
            }
            out
        };
        calls
            .iter()
            .zip(outputs)
            .map(|(call, content)| ChatMessage::tool_result(call.id.clone(), content))
            .collect()
    }
}

/// How many read-only calls of one reply run at once. A reply may hold hundreds of calls;
/// each blocking one takes a thread, and a runner out of threads (its pids limit) aborts.
pub const MAX_CONCURRENT_CALLS: usize = 8;

/// Runs `calls` at most [`MAX_CONCURRENT_CALLS`] at a time; the outputs keep their order.
pub async fn in_order_concurrently<F: std::future::Future>(calls: Vec<F>) -> Vec<F::Output> {
    use futures::StreamExt;
    futures::stream::iter(calls)
        .buffered(MAX_CONCURRENT_CALLS)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::time::Duration;

    struct Echo;

    #[derive(Deserialize)]
    struct EchoArgs {
        text: String,
    }

    #[async_trait]
    impl Tool for Echo {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "Echo",
                description: "echo",
                parameters: serde_json::json!({"type":"object"}),
            }
        }
        fn read_only(&self) -> bool {
            true
        }
        async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
            let a: EchoArgs = parse_args("Echo", args)?;
            Ok(a.text)
        }
    }

    /// A read-only tool that returns only once `n` calls are in flight at the same time.
    struct Rendezvous(Arc<tokio::sync::Barrier>);

    #[async_trait]
    impl Tool for Rendezvous {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "Rendezvous",
                description: "waits for its peers",
                parameters: serde_json::json!({"type":"object"}),
            }
        }
        fn read_only(&self) -> bool {
            true
        }
        async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
            self.0.wait().await;
            Ok(args.to_string())
        }
    }

    fn registry(cap: usize) -> ToolRegistry {
        let mut r = ToolRegistry::new(cap);
        r.register(Arc::new(Echo));
        r
    }

    #[tokio::test]
    async fn bad_json_and_missing_fields_become_error_results() {
        let r = registry(1000);
        let bad = r.execute(&ToolCall::new("1", "Echo", "{not json")).await;
        assert!(
            bad.starts_with("error: invalid arguments for Echo: arguments are not valid JSON"),
            "{bad}"
        );
        let missing = r.execute(&ToolCall::new("2", "Echo", "{}")).await;
        assert!(missing.contains("missing field `text`"), "{missing}");
        let array = r.execute(&ToolCall::new("3", "Echo", "[1]")).await;
        assert!(array.contains("must be a JSON object"), "{array}");
        let unknown = r.execute(&ToolCall::new("4", "Nope", "{}")).await;
        assert!(
            unknown.contains("unknown tool \"Nope\"; available tools: Echo"),
            "{unknown}"
        );
    }

    #[tokio::test]
    async fn output_is_capped() {
        let r = registry(10);
        let out = r
            .execute(&ToolCall::new("1", "Echo", r#"{"text":"0123456789abc"}"#))
            .await;
        assert!(out.starts_with("0123456789\n[output truncated"), "{out}");
    }

    #[tokio::test]
    async fn read_only_calls_run_concurrently_and_keep_order() {
        let mut r = ToolRegistry::new(1000);
        r.register(Arc::new(Rendezvous(Arc::new(tokio::sync::Barrier::new(5)))));
        let calls: Vec<ToolCall> = (0..5)
            .map(|i| ToolCall::new(format!("c{i}"), "Rendezvous", format!(r#"{{"i":{i}}}"#)))
            .collect();
        // Run one after another, the first call would wait for the others forever.
        let results = tokio::time::timeout(Duration::from_secs(30), r.execute_all(&calls))
            .await
            .expect("read-only calls did not run concurrently");
        assert_eq!(results[3], ChatMessage::tool_result("c3", r#"{"i":3}"#));
    }

    /// A read-only tool that counts how many of its calls are in flight.
    #[derive(Default)]
    struct Counting {
        now: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl Tool for Counting {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "Counting",
                description: "counts",
                parameters: serde_json::json!({"type":"object"}),
            }
        }
        fn read_only(&self) -> bool {
            true
        }
        async fn call(&self, _args: serde_json::Value) -> Result<String, ToolError> {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.now.fetch_sub(1, SeqCst);
            Ok("ok".into())
        }
    }

    #[tokio::test]
    async fn a_reply_of_hundreds_of_calls_runs_a_few_at_a_time() {
        let counting = Arc::new(Counting::default());
        let mut r = ToolRegistry::new(1000);
        r.register(counting.clone());
        let calls: Vec<ToolCall> = (0..300)
            .map(|i| ToolCall::new(format!("c{i}"), "Counting", "{}"))
            .collect();
        let results = r.execute_all(&calls).await;
        assert_eq!(results.len(), 300);
        assert_eq!(results[299], ChatMessage::tool_result("c299", "ok"));
        let most = counting.most.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            (2..=MAX_CONCURRENT_CALLS).contains(&most),
            "{most} calls ran at once"
        );
    }
}
