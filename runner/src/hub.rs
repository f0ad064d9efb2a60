//! The runner's side of the hub: the gRPC client on the one socket the controller handed
//! over (fd 3), and the [`HubModel`] through which every model request goes to the
//! controller's gateway (which holds the key and records usage), and the [`HubForge`]
//! through which the controller commits and opens pull requests for the run, the [`HubWeb`]
//! through which it fetches web pages under its policy, and the [`HubMemory`] through which
//! it reads the project's memory, and the [`HubMcp`] through which it calls the remote MCP
//! servers only the controller reaches. The runner holds no secret and has no other way out.

use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use codebutler_proto::runner::v1::runner_hub_client::RunnerHubClient;
use codebutler_proto::runner::v1::{
    CommitRequest, CompleteRequest, FetchRequest, LeftOutReason as ProtoReason, McpCallRequest,
    McpToolsRequest, OpenPullRequestRequest, ReadMemoryRequest, RunnerEvent, complete_chunk::Chunk,
    runner_event,
};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::tools::mcp::{McpAnswer, McpServer};
use crate::tools::{
    CommitResult, FetchFailure, FetchedPage, Forge, ForgeFailure, LeftOut, LeftOutReason,
    MemoryFailure, MemorySource, WebSource,
};
use codebutler_agent::conversation::{ChatMessage, ToolCall, ToolSpec};
use codebutler_agent::mcp::{OfferedTool, ServerTool, offer};
use codebutler_agent::tool::ToolError;
use codebutler_agent::tool_loop::{AssistantReply, ChatModel};

/// A hub call that failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("connect to the controller: {0}")]
    Connect(String),
    #[error("hub call failed: {0}")]
    Call(#[from] tonic::Status),
    #[error("the controller refused the model call: {0}")]
    Refused(String),
    #[error("encode request: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A gRPC channel over an already connected socket. The connector hands the socket out once:
/// if the connection drops there is no way to reconnect, by design.
pub async fn connect(stream: StdUnixStream) -> Result<Channel, HubError> {
    stream
        .set_nonblocking(true)
        .map_err(|e| HubError::Connect(e.to_string()))?;
    let slot = Arc::new(Mutex::new(Some(stream)));
    Endpoint::from_static("http://controller.invalid")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let taken = slot.lock().ok().and_then(|mut s| s.take());
            async move {
                let std_stream = taken.ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotConnected, "the hub socket is gone")
                })?;
                let stream = tokio::net::UnixStream::from_std(std_stream)?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await
        .map_err(|e| HubError::Connect(e.to_string()))
}

/// The model, reached through the hub's `Complete`.
#[derive(Clone, Debug)]
pub struct HubModel {
    client: RunnerHubClient<Channel>,
    /// Where each call's usage is reported as a `Usage` event, if anywhere.
    usage_events: Option<mpsc::Sender<RunnerEvent>>,
}

impl HubModel {
    /// A model on the hub channel.
    pub fn new(channel: Channel) -> Self {
        Self {
            client: RunnerHubClient::new(channel),
            usage_events: None,
        }
    }

    /// Also reports each call's usage as a `Usage` event on `events`.
    pub fn with_usage_events(mut self, events: mpsc::Sender<RunnerEvent>) -> Self {
        self.usage_events = Some(events);
        self
    }
}

#[async_trait]
impl ChatModel for HubModel {
    type Error = HubError;

    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<AssistantReply, HubError> {
        let tools: Vec<serde_json::Value> = tools.iter().map(ToolSpec::to_openai).collect();
        let request = CompleteRequest {
            messages_json: serde_json::to_string(messages)?,
            tools_json: serde_json::to_string(&tools)?,
            max_tokens: None,
        };
        let mut stream = self.client.clone().complete(request).await?.into_inner();
        let mut reply = Accumulator::default();
        while let Some(chunk) = stream.message().await? {
            match chunk.chunk {
                Some(Chunk::Refusal(r)) => return Err(HubError::Refused(r.reason)),
                Some(Chunk::Usage(usage)) => {
                    if let Some(events) = &self.usage_events {
                        let event = RunnerEvent {
                            event: Some(runner_event::Event::Usage(usage)),
                        };
                        if events.send(event).await.is_err() {
                            eprintln!(
                                "codebutler-runner: the controller is gone; a usage event was not delivered"
                            );
                        }
                    }
                }
                Some(chunk) => reply.add(chunk),
                None => {}
            }
        }
        Ok(reply.finish())
    }
}

/// The controller's commits and pull requests, reached through the hub's `Commit` and
/// `OpenPullRequest`.
#[derive(Clone, Debug)]
pub struct HubForge {
    client: RunnerHubClient<Channel>,
    quiescer: crate::quiesce::Quiescer,
}

impl HubForge {
    /// A forge on the hub channel; `quiescer` stops the run's other processes before each
    /// commit, so nothing changes the worktree while the controller stages it.
    pub fn new(channel: Channel, quiescer: crate::quiesce::Quiescer) -> Self {
        Self {
            client: RunnerHubClient::new(channel),
            quiescer,
        }
    }
}

#[async_trait]
impl Forge for HubForge {
    async fn commit(
        &self,
        message: &str,
        include: &[String],
    ) -> Result<CommitResult, ForgeFailure> {
        let stopped = self
            .quiescer
            .stop_others()
            .await
            .map_err(ForgeFailure::Quiesce)?;
        if stopped > 0 {
            eprintln!(
                "codebutler-runner: stopped {stopped} background processes before committing"
            );
        }
        let reply = self
            .client
            .clone()
            .commit(CommitRequest {
                message: message.to_owned(),
                include: include.to_vec(),
            })
            .await
            .map_err(|s| ForgeFailure::Refused(s.message().to_owned()))?
            .into_inner();
        let left_out = reply
            .left_out
            .into_iter()
            .filter_map(|left| {
                let reason = match ProtoReason::try_from(left.reason) {
                    Ok(ProtoReason::Prepared) => LeftOutReason::Prepared,
                    Ok(ProtoReason::Byproduct) => LeftOutReason::Byproduct,
                    Ok(ProtoReason::Unspecified) | Err(_) => return None,
                };
                Some(LeftOut {
                    path: left.path,
                    reason,
                })
            })
            .collect();
        Ok(CommitResult {
            sha: reply.sha,
            files_changed: reply.files_changed,
            nothing_to_commit: reply.nothing_to_commit,
            left_out,
        })
    }

    async fn open_pr(&self, title: &str, body: &str) -> Result<String, ForgeFailure> {
        let reply = self
            .client
            .clone()
            .open_pull_request(OpenPullRequestRequest {
                title: title.to_owned(),
                body: body.to_owned(),
            })
            .await
            .map_err(|s| ForgeFailure::Refused(s.message().to_owned()))?
            .into_inner();
        Ok(reply.url)
    }
}

/// Web pages fetched by the controller, reached through the hub's `Fetch`.
#[derive(Clone, Debug)]
pub struct HubWeb {
    client: RunnerHubClient<Channel>,
}

impl HubWeb {
    /// Web fetches on the hub channel.
    pub fn new(channel: Channel) -> Self {
        Self {
            client: RunnerHubClient::new(channel),
        }
    }
}

/// A failed `Fetch` as the tool reports it: refused by the policy, a bad URL, or the page
/// (or the hub) out of reach.
fn fetch_failure(status: &tonic::Status) -> FetchFailure {
    let message = status.message().to_owned();
    match status.code() {
        tonic::Code::PermissionDenied => FetchFailure::Denied(message),
        tonic::Code::InvalidArgument => FetchFailure::Invalid(message),
        _ => FetchFailure::Unavailable(message),
    }
}

#[async_trait]
impl WebSource for HubWeb {
    async fn fetch(&self, url: &str, max_bytes: u64) -> Result<FetchedPage, FetchFailure> {
        let reply = self
            .client
            .clone()
            .fetch(FetchRequest {
                url: url.to_owned(),
                max_bytes,
            })
            .await
            .map_err(|s| fetch_failure(&s))?
            .into_inner();
        Ok(FetchedPage {
            status: reply.status,
            content_type: reply.content_type,
            body: reply.body,
            truncated: reply.truncated,
            final_url: if reply.final_url.is_empty() {
                url.to_owned()
            } else {
                reply.final_url
            },
        })
    }
}

/// The project's memory, read by the controller, reached through the hub's `ReadMemory`.
#[derive(Clone, Debug)]
pub struct HubMemory {
    client: RunnerHubClient<Channel>,
}

impl HubMemory {
    /// Memory reads on the hub channel.
    pub fn new(channel: Channel) -> Self {
        Self {
            client: RunnerHubClient::new(channel),
        }
    }
}

fn memory_failure(status: &tonic::Status) -> MemoryFailure {
    let message = status.message().to_owned();
    match status.code() {
        tonic::Code::InvalidArgument => MemoryFailure::UnknownRole(message),
        _ => MemoryFailure::Unavailable(message),
    }
}

#[async_trait]
impl MemorySource for HubMemory {
    async fn read_memory(&self, role: &str) -> Result<(String, String), MemoryFailure> {
        let reply = self
            .client
            .clone()
            .read_memory(ReadMemoryRequest {
                role: role.to_owned(),
            })
            .await
            .map_err(|s| memory_failure(&s))?
            .into_inner();
        Ok((reply.role, reply.text))
    }
}

/// Accumulates streamed text and tool-call deltas (by index) into one reply.
#[derive(Debug, Default)]
struct Accumulator {
    text: Option<String>,
    calls: Vec<ToolCall>,
}

impl Accumulator {
    fn add(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::TextDelta(t) => self.text.get_or_insert_with(String::new).push_str(&t),
            Chunk::ToolCallDelta(d) => {
                let index = d.index as usize;
                while self.calls.len() <= index {
                    self.calls.push(ToolCall::new("", "", ""));
                }
                let call = &mut self.calls[index];
                if !d.id.is_empty() {
                    call.id = d.id;
                }
                if !d.name.is_empty() {
                    call.function.name = d.name;
                }
                call.function.arguments.push_str(&d.arguments);
            }
            Chunk::Usage(_) | Chunk::FinishReason(_) | Chunk::Refusal(_) => {}
        }
    }

    fn finish(self) -> AssistantReply {
        AssistantReply {
            content: self.text,
            tool_calls: self.calls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::ToolCallDelta;

    #[test]
    fn hub_statuses_become_tool_failures() {
        assert_eq!(
            fetch_failure(&tonic::Status::permission_denied(
                "x is on the fetch deny list"
            )),
            FetchFailure::Denied("x is on the fetch deny list".into())
        );
        assert_eq!(
            fetch_failure(&tonic::Status::invalid_argument("not a URL")),
            FetchFailure::Invalid("not a URL".into())
        );
        assert_eq!(
            fetch_failure(&tonic::Status::unavailable("resolve x: no such host")),
            FetchFailure::Unavailable("resolve x: no such host".into())
        );
        assert_eq!(
            memory_failure(&tonic::Status::invalid_argument("no memory for role")),
            MemoryFailure::UnknownRole("no memory for role".into())
        );
        assert_eq!(
            memory_failure(&tonic::Status::unavailable("read pm memory: denied")),
            MemoryFailure::Unavailable("read pm memory: denied".into())
        );
    }

    #[test]
    fn deltas_accumulate_by_index() {
        let mut acc = Accumulator::default();
        for chunk in [
            Chunk::TextDelta("Let me ".into()),
            Chunk::ToolCallDelta(ToolCallDelta {
                index: 1,
                id: "b".into(),
                name: "Bash".into(),
                arguments: "{\"command\":".into(),
            }),
            Chunk::ToolCallDelta(ToolCallDelta {
                index: 0,
                id: "a".into(),
                name: "Read".into(),
                arguments: "{}".into(),
            }),
            Chunk::ToolCallDelta(ToolCallDelta {
                index: 1,
                id: String::new(),
                name: String::new(),
                arguments: "\"ls\"}".into(),
            }),
            Chunk::TextDelta("look.".into()),
        ] {
            acc.add(chunk);
        }
        let reply = acc.finish();
        assert_eq!(reply.content.as_deref(), Some("Let me look."));
        assert_eq!(reply.tool_calls[0], ToolCall::new("a", "Read", "{}"));
        assert_eq!(
            reply.tool_calls[1],
            ToolCall::new("b", "Bash", "{\"command\":\"ls\"}")
        );
    }
}

/// One remote MCP server, reached through the controller (which holds its token and applies
/// the fetch host rules).
#[derive(Debug, Clone)]
pub struct HubMcp {
    client: RunnerHubClient<Channel>,
    server: String,
}

impl HubMcp {
    /// The remote servers' tools, as the controller listed and checked them (each checked
    /// again here), with a line for each server or tool that is not offered.
    pub async fn remote_tools(
        channel: Channel,
    ) -> Result<(Vec<(Self, OfferedTool)>, Vec<String>), HubError> {
        let mut client = RunnerHubClient::new(channel);
        let listed = client.mcp_tools(McpToolsRequest {}).await?.into_inner();
        let mut problems = listed.problems;
        let mut by_server: Vec<(String, Vec<ServerTool>)> = Vec::new();
        for tool in listed.tools {
            let input_schema =
                serde_json::from_str(&tool.input_schema_json).unwrap_or(serde_json::Value::Null);
            let server_tool = ServerTool {
                name: tool.name,
                description: tool.description,
                input_schema,
            };
            match by_server.iter_mut().find(|(s, _)| *s == tool.server) {
                Some((_, tools)) => tools.push(server_tool),
                None => by_server.push((tool.server, vec![server_tool])),
            }
        }
        let mut tools = Vec::new();
        for (server, listed) in by_server {
            let (offered, left_out) = offer(&server, listed);
            problems.extend(left_out);
            let hub = Self {
                client: client.clone(),
                server,
            };
            tools.extend(offered.into_iter().map(|o| (hub.clone(), o)));
        }
        Ok((tools, problems))
    }
}

#[async_trait]
impl McpServer for HubMcp {
    async fn call(&self, tool: &str, arguments: serde_json::Value) -> Result<McpAnswer, ToolError> {
        let answer = self
            .client
            .clone()
            .mcp_call(McpCallRequest {
                server: self.server.clone(),
                tool: tool.to_owned(),
                arguments_json: arguments.to_string(),
            })
            .await
            .map_err(|status| {
                ToolError::Failed(format!("MCP server {}: {}", self.server, status.message()))
            })?
            .into_inner();
        Ok(McpAnswer {
            text: answer.text,
            is_error: answer.is_error,
        })
    }
}
