//! The Coder's MCP tools: each tool of a configured MCP server offered as
//! `mcp__<server>__<tool>` with the server's own input schema (checked and bounded by
//! [`codebutler_agent::mcp::offer`]), its result capped like any tool's by the registry.
//!
//! Two kinds of server stand behind an [`McpServer`]: a stdio server ([`StdioServer`]), a
//! child process the runner starts inside its own sandbox — so it has the sandbox's limits,
//! its clean environment (no secret) and no network — and a remote one, which only the
//! controller reaches (`crate::hub::HubMcp`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::mcp::{OfferedTool, ServerTool, offer, result_text};
use codebutler_agent::tool::{Tool, ToolError};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;

/// Longest wait for a stdio server to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for one tool call.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What a server answered to a call.
#[derive(Debug, Clone, PartialEq)]
pub struct McpAnswer {
    pub text: String,
    /// The server reported the call as failed.
    pub is_error: bool,
}

/// A server whose tools can be called.
#[async_trait]
pub trait McpServer: Send + Sync {
    /// Calls `tool` with `arguments` (a JSON object).
    async fn call(&self, tool: &str, arguments: serde_json::Value) -> Result<McpAnswer, ToolError>;
}

/// One tool of an MCP server, as the model sees it.
pub struct McpTool {
    spec: ToolSpec,
    tool: String,
    server: Arc<dyn McpServer>,
}

impl McpTool {
    /// The tool `offered` of `server`.
    ///
    /// A [`ToolSpec`]'s name and description are `'static` (the built-in tools' are
    /// constants); an MCP tool's are made once per run, when the runner starts, and live as
    /// long as the run's process, so they are leaked here — at most
    /// [`codebutler_agent::mcp::MAX_TOOLS_PER_SERVER`] per server, once.
    pub fn new(offered: OfferedTool, server: Arc<dyn McpServer>) -> Self {
        Self {
            spec: ToolSpec {
                name: Box::leak(offered.name.into_boxed_str()),
                description: Box::leak(offered.description.into_boxed_str()),
                parameters: offered.parameters,
            },
            tool: offered.tool,
            server,
        }
    }
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn read_only(&self) -> bool {
        // A server's own hints are the server's word, not a guarantee: calls run in order.
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let answer = self.server.call(&self.tool, args).await?;
        if answer.is_error {
            Err(ToolError::Failed(answer.text))
        } else {
            Ok(answer.text)
        }
    }
}

/// Why a stdio server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StdioServerError {
    #[error("start {command:?}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("initialize: {0}")]
    Initialize(String),
    #[error("list its tools: {0}")]
    List(String),
    #[error("no answer within {}s", START_TIMEOUT.as_secs())]
    Timeout,
}

/// A stdio MCP server running as a child of the runner, inside the runner's sandbox: it
/// inherits the sandbox (namespaces, Landlock, seccomp, limits) and the runner's clean
/// environment; its working directory is the worktree; its stderr is dropped (a server's
/// chatter is not the run's log). It is killed when the run ends.
///
/// `GitCommit` stops every other process of the sandbox before the worktree is staged
/// (`crate::quiesce`), this server too: a call that finds it stopped starts it again.
pub struct StdioServer {
    name: String,
    command: String,
    args: Vec<String>,
    workdir: PathBuf,
    running: tokio::sync::Mutex<Running>,
}

/// A started server process and the client talking to it.
struct Running {
    client: RunningService<RoleClient, ()>,
    pid: Option<u32>,
}

impl Running {
    /// Whether the process still answers: its pipe is open and it is neither gone nor a
    /// zombie (what `quiesce` leaves of a process it killed).
    fn alive(&self) -> bool {
        !self.client.peer().is_transport_closed() && self.pid.is_some_and(crate::quiesce::running)
    }
}

impl std::fmt::Debug for StdioServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioServer")
            .field("name", &self.name)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl StdioServer {
    /// Starts `command args` in `workdir` and lists its tools. Returns the server and its
    /// tools as offered, with a line for each tool left out.
    pub async fn start(
        name: &str,
        command: &str,
        args: &[String],
        workdir: &Path,
    ) -> Result<(Arc<Self>, Vec<OfferedTool>, Vec<String>), StdioServerError> {
        let running = spawn(command, args, workdir).await?;
        let tools = tokio::time::timeout(START_TIMEOUT, running.client.list_all_tools())
            .await
            .map_err(|_| StdioServerError::Timeout)?
            .map_err(|e| StdioServerError::List(e.to_string()))?;
        let listed = tools
            .into_iter()
            .map(|t| ServerTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect();
        let (offered, left_out) = offer(name, listed);
        let server = Arc::new(Self {
            name: name.to_owned(),
            command: command.to_owned(),
            args: args.to_vec(),
            workdir: workdir.to_owned(),
            running: tokio::sync::Mutex::new(running),
        });
        Ok((server, offered, left_out))
    }
}

/// Starts the server process and completes MCP's initialization with it.
async fn spawn(
    command: &str,
    args: &[String],
    workdir: &Path,
) -> Result<Running, StdioServerError> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).current_dir(workdir).kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| StdioServerError::Spawn {
            command: command.to_owned(),
            source,
        })?;
    let pid = transport.id();
    let client = tokio::time::timeout(START_TIMEOUT, ().serve(transport))
        .await
        .map_err(|_| StdioServerError::Timeout)?
        .map_err(|e| StdioServerError::Initialize(e.to_string()))?;
    Ok(Running { client, pid })
}

#[async_trait]
impl McpServer for StdioServer {
    async fn call(&self, tool: &str, arguments: serde_json::Value) -> Result<McpAnswer, ToolError> {
        let serde_json::Value::Object(arguments) = arguments else {
            return Err(ToolError::InvalidArguments {
                tool: tool.to_owned(),
                reason: "arguments must be a JSON object".to_owned(),
            });
        };
        // One call at a time: a restart must not race another call.
        let mut running = self.running.lock().await;
        if !running.alive() {
            *running = spawn(&self.command, &self.args, &self.workdir)
                .await
                .map_err(|e| {
                    ToolError::Failed(format!(
                        "MCP server {} stopped and could not be started again: {e}",
                        self.name
                    ))
                })?;
        }
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let result = tokio::time::timeout(CALL_TIMEOUT, running.client.call_tool(params))
            .await
            .map_err(|_| {
                ToolError::Failed(format!(
                    "MCP server {} did not answer within {}s",
                    self.name,
                    CALL_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| ToolError::Failed(format!("MCP server {}: {e}", self.name)))?;
        let content: Vec<serde_json::Value> = result
            .content
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .collect();
        Ok(McpAnswer {
            text: result_text(&content),
            is_error: result.is_error.unwrap_or(false),
        })
    }
}
