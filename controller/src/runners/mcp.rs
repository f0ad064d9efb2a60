//! Remote MCP servers on a runner's behalf (`coder.mcpServers` entries with a `url`): the
//! runner has no network and no secret, so its hub asks here. The controller connects to
//! each server over streamable HTTP with the server's token, through the fetch policy's
//! streaming HTTP client (the same host rules as `WebFetch`: deny and allow lists, no internal address
//! unless `fetch.allowInternalHosts` names the host, no redirects), lists its tools once per
//! run, and calls only the tools it listed. Every call is logged (server, tool, outcome;
//! never the arguments or the token).
//!
//! What a server says is data: its tool list passes [`codebutler_agent::mcp::offer`] before
//! it reaches the runner, and results are rendered to text the runner caps like any tool
//! output.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use codebutler_agent::mcp::{ServerTool, offer, result_text};
use codebutler_agent::truncate::truncate_output;
use codebutler_proto::runner::v1::{McpCallResponse, McpTool, McpToolsResponse};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tonic::Status;

use super::fetch::FetchPolicy;
use crate::config::RemoteMcpServer;

/// Longest wait for a server to connect and list its tools.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// Most text of one result sent to the runner (which caps it again, lower, for the model).
const MAX_RESULT_BYTES: usize = 256 * 1024;
/// Longest wait for one tool call.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The remote MCP servers of one run.
pub struct RemoteMcp {
    run_id: String,
    servers: Vec<RemoteMcpServer>,
    fetch: Arc<FetchPolicy>,
    /// The servers connected so far, with the tools each listed.
    connected: tokio::sync::Mutex<BTreeMap<String, Connected>>,
}

impl std::fmt::Debug for RemoteMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteMcp")
            .field("run_id", &self.run_id)
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

struct Connected {
    client: RunningService<RoleClient, ()>,
    tools: BTreeSet<String>,
}

/// Why a server could not be listed.
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("refused by the fetch host rules: {0}")]
    Refused(String),
    #[error("connect: {0}")]
    Connect(String),
    #[error("list its tools: {0}")]
    List(String),
    #[error("no answer within {}s", LIST_TIMEOUT.as_secs())]
    Timeout,
}

impl RemoteMcp {
    /// The servers `servers` for run `run_id`, reached under `fetch`'s rules.
    pub fn new(run_id: &str, servers: Vec<RemoteMcpServer>, fetch: Arc<FetchPolicy>) -> Self {
        Self {
            run_id: run_id.to_owned(),
            servers,
            fetch,
            connected: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Connects to every server not connected yet and lists the tools of all of them. A
    /// server that fails is a line in `problems`, not an error.
    pub async fn tools(&self) -> McpToolsResponse {
        let mut connected = self.connected.lock().await;
        let mut response = McpToolsResponse::default();
        for server in &self.servers {
            if !connected.contains_key(&server.name) {
                match tokio::time::timeout(LIST_TIMEOUT, self.connect(server)).await {
                    Ok(Ok((client, listed))) => {
                        let (offered, left_out) = offer(&server.name, listed);
                        response.problems.extend(left_out);
                        tracing::info!(
                            tag = "MCP",
                            run = %self.run_id,
                            server = %server.name,
                            "listed {} tools",
                            offered.len()
                        );
                        let tools = offered.iter().map(|o| o.tool.clone()).collect();
                        response.tools.extend(offered.into_iter().map(|o| McpTool {
                            server: o.server,
                            name: o.tool,
                            description: o.description,
                            input_schema_json: o.parameters.to_string(),
                        }));
                        connected.insert(server.name.clone(), Connected { client, tools });
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(tag = "MCP", run = %self.run_id, server = %server.name, "{e}");
                        response.problems.push(format!("{}: {e}", server.name));
                    }
                    Err(_) => {
                        let e = ListError::Timeout;
                        tracing::warn!(tag = "MCP", run = %self.run_id, server = %server.name, "{e}");
                        response.problems.push(format!("{}: {e}", server.name));
                    }
                }
            }
        }
        response
    }

    async fn connect(
        &self,
        server: &RemoteMcpServer,
    ) -> Result<(RunningService<RoleClient, ()>, Vec<ServerTool>), ListError> {
        let parsed = self
            .fetch
            .check_url(&server.url)
            .map_err(|s| ListError::Refused(s.message().to_owned()))?;
        self.fetch
            .checked_addresses(&parsed)
            .await
            .map_err(|s| ListError::Refused(s.message().to_owned()))?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.as_str());
        if let Some(token) = &server.token {
            config = config.auth_header(token.expose());
        }
        let transport =
            StreamableHttpClientTransport::with_client(self.fetch.streaming_http.clone(), config);
        let client = ().serve(transport).await.map_err(|e| ListError::Connect(e.to_string()))?;
        let tools = client
            .list_all_tools()
            .await
            .map_err(|e| ListError::List(e.to_string()))?
            .into_iter()
            .map(|t| ServerTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect();
        Ok((client, tools))
    }

    /// Calls `tool` of `server` with `arguments_json`, if [`RemoteMcp::tools`] listed it.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments_json: &str,
    ) -> Result<McpCallResponse, Status> {
        let arguments: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(if arguments_json.trim().is_empty() {
                "{}"
            } else {
                arguments_json
            })
            .map_err(|e| Status::invalid_argument(format!("arguments_json: {e}")))?;
        let peer = {
            let connected = self.connected.lock().await;
            let Some(found) = connected.get(server).filter(|c| c.tools.contains(tool)) else {
                return Err(Status::not_found(format!(
                    "no tool {tool:?} of a remote MCP server {server:?} was listed"
                )));
            };
            found.client.peer().clone()
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let outcome = tokio::time::timeout(CALL_TIMEOUT, peer.call_tool(params)).await;
        let result = match outcome {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                tracing::warn!(tag = "MCP", run = %self.run_id, server, tool, "call failed: {e}");
                return Err(Status::unavailable(format!("{server}: {e}")));
            }
            Err(_) => {
                tracing::warn!(tag = "MCP", run = %self.run_id, server, tool, "call timed out");
                return Err(Status::unavailable(format!(
                    "{server}: no answer within {}s",
                    CALL_TIMEOUT.as_secs()
                )));
            }
        };
        let is_error = result.is_error.unwrap_or(false);
        let content: Vec<serde_json::Value> = result
            .content
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .collect();
        let text = truncate_output(&result_text(&content), MAX_RESULT_BYTES);
        tracing::info!(
            tag = "MCP",
            run = %self.run_id,
            server,
            tool,
            "call {} ({} bytes)",
            if is_error { "failed" } else { "answered" },
            text.len()
        );
        Ok(McpCallResponse { text, is_error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str, url: &str) -> RemoteMcpServer {
        RemoteMcpServer {
            name: name.into(),
            url: url.into(),
            token: Some(crate::secret::Secret::new("t-1")),
        }
    }

    #[tokio::test]
    async fn servers_the_host_rules_refuse_are_never_listed_nor_called() {
        let policy = FetchPolicy::new(Vec::new(), vec!["denied.example".into()]).unwrap();
        let mcp = RemoteMcp::new(
            "r1",
            vec![
                remote("internal", "http://10.0.0.1/mcp"),
                remote("denied", "https://mcp.denied.example/mcp"),
            ],
            Arc::new(policy),
        );
        let listed = mcp.tools().await;
        assert!(listed.tools.is_empty());
        assert_eq!(
            listed.problems,
            [
                "internal: refused by the fetch host rules: 10.0.0.1 is an internal address; only public hosts are fetched",
                "denied: refused by the fetch host rules: mcp.denied.example is on the fetch deny list",
            ]
        );
        let call = mcp.call("internal", "echo", "{}").await.unwrap_err();
        assert_eq!(call.code(), tonic::Code::NotFound, "{call}");
        assert!(!format!("{mcp:?}").contains("t-1"));
    }
}
