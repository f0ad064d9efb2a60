//! `coder.mcpServers`: the MCP servers whose tools the Coder gets, each either a stdio
//! server (`command` and `args`, started by the runner inside its sandbox, so with no
//! secret and no network) or a remote one (`url` of a streamable HTTP endpoint, reached only
//! by the controller, with the token in the environment variable `tokenEnv`).
//!
//! A token is a secret: it is read from the environment when the configuration loads, held
//! as a [`Secret`], and never written in a file the repository could hold.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::origin::Origin;
use super::{ConfigError, Secrets};
use crate::secret::Secret;

/// The configured MCP servers, by kind, each list in the order of the servers' names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpServers {
    /// Started by the runner in its sandbox.
    pub stdio: Vec<StdioMcpServer>,
    /// Reached by the controller.
    pub remote: Vec<RemoteMcpServer>,
}

/// A server the runner starts as a child process in its sandbox.
#[derive(Clone, Debug, PartialEq)]
pub struct StdioMcpServer {
    pub name: String,
    /// The program: a name on the sandbox's `PATH` or an absolute path the sandbox sees.
    pub command: String,
    pub args: Vec<String>,
}

/// A streamable HTTP server the controller calls on the runner's behalf.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteMcpServer {
    pub name: String,
    /// The endpoint, an http(s) URL; the fetch host rules apply to it.
    pub url: String,
    /// Sent as `Authorization: Bearer <token>`; `None` when `tokenEnv` is not set.
    pub token: Option<Secret>,
}

/// What a file may say of one server.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct McpServerFile {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    url: Option<String>,
    token_env: Option<String>,
}

/// The servers of `coder.mcpServers`, checked: plain names, one kind each, http(s) URLs,
/// tokens present in the environment.
pub(super) fn resolve(
    files: BTreeMap<String, McpServerFile>,
    origin: &Origin,
    secrets: &Secrets,
) -> Result<McpServers, ConfigError> {
    let mut servers = McpServers::default();
    for (name, file) in files {
        let field = format!("coder.mcpServers.{name}");
        let error = |message: String| origin.field_error(&field, message);
        if !codebutler_agent::mcp::valid_name(&name) || name.contains("__") {
            return Err(error(
                "a server's name must be letters, digits, `_` or `-` (no `__`), 64 at most"
                    .to_owned(),
            ));
        }
        match (file.command, file.url) {
            (Some(command), None) => {
                if file.token_env.is_some() {
                    return Err(error(
                        "tokenEnv is for remote servers (`url`): a stdio server runs in the \
                         sandbox, which holds no secret"
                            .to_owned(),
                    ));
                }
                if command.trim().is_empty() {
                    return Err(error("command is empty".to_owned()));
                }
                servers.stdio.push(StdioMcpServer {
                    name,
                    command,
                    args: file.args,
                });
            }
            (None, Some(url)) => {
                if !file.args.is_empty() {
                    return Err(error("args are for stdio servers (`command`)".to_owned()));
                }
                match reqwest::Url::parse(&url) {
                    Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                    _ => return Err(error(format!("url {url:?} is not an http(s) URL"))),
                }
                let token = match file.token_env {
                    None => None,
                    Some(var) => Some(secrets.optional(None, &var).ok_or_else(|| {
                        error(format!(
                            "tokenEnv names the environment variable {var}, which is not set"
                        ))
                    })?),
                };
                servers.remote.push(RemoteMcpServer { name, url, token });
            }
            _ => {
                return Err(error(
                    "say either `command` (a stdio server run in the sandbox) or `url` (a \
                     remote streamable HTTP server), not both"
                        .to_owned(),
                ));
            }
        }
    }
    Ok(servers)
}
