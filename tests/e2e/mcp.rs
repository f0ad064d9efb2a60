//! The Coder's MCP tools (`coder.mcpServers`) against a real MCP server, the reference
//! `server-everything` from npm: over stdio, started by the runner inside its sandbox (no
//! network, none of the controller's environment), and over streamable HTTP, reached only
//! by the controller with its token under the fetch host rules. The scripted model calls
//! `mcp__<server>__<tool>`; the tests check what the model got back and what the server (or
//! the host around it) saw.

use std::io::ErrorKind;

use codebutler_test_support::mcp::{HttpEverything, TokenGate, everything_js};
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{Env, OUTSIDE_SECRET, runnerctl, stdout, tool_results};

/// A secret in the controller's environment: nothing in the sandbox may see it.
const CONTROLLER_SECRET: &str = "mcp-controller-secret-51c2";
/// The remote server's token.
const TOKEN: &str = "mcp-token-9d41e7";

fn write_plan(env: &Env, text: &str) -> std::path::PathBuf {
    let path = env.outside.path().join("plan.md");
    std::fs::write(&path, text).unwrap();
    path
}

/// The tools offered in a recorded model request, by name.
fn offered(body: &Value) -> Vec<(String, Value)> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["function"]["name"].as_str().unwrap().to_owned(),
                t["function"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_stdio_mcp_server_runs_in_the_sandbox_and_its_tools_reach_the_model() {
    // Anything in the sandbox that reached the host's network would connect here.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Node reserves more address space than the harness's 768 MB allow each process (its
    // RLIMIT_AS): the default 4096 MB, as for a Node project's tests.
    let env = Env::with_runner(json!({
        "sandbox": {"memoryMB": 4096},
        "coder": {
            "maxTurns": 6,
            "timeout": 3,
            "mcpServers": {"everything": {
                "command": "node",
                "args": [everything_js().display().to_string(), "stdio"]
            }}
        }
    }))
    .await;
    env.model.script(
        "PLAN-MCP-STDIO",
        vec![
            Reply::ToolCalls(vec![
                (
                    "mcp__everything__echo".to_owned(),
                    json!({"message": "hello from the model"}).to_string(),
                ),
                ("mcp__everything__get-env".to_owned(), "{}".to_owned()),
                (
                    "mcp__everything__gzip-file-as-resource".to_owned(),
                    json!({"data": format!("http://127.0.0.1:{port}/exfiltrate"), "outputType": "resource"})
                        .to_string(),
                ),
            ]),
            // A commit stops every other process of the sandbox, the server among them.
            Reply::tool_call("GitCommit", json!({"message": "Nothing yet"}).to_string()),
            Reply::tool_call(
                "mcp__everything__echo",
                json!({"message": "after the commit"}).to_string(),
            ),
            Reply::text("used the tools"),
        ],
    );
    let _daemon = env
        .start_with_env(&[("MCP_CONTROLLER_SECRET", CONTROLLER_SECRET)])
        .await;
    let plan = write_plan(&env, "PLAN-MCP-STDIO");
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await);
    assert!(
        out.contains("run finished: completed: used the tools"),
        "{out}"
    );

    let requests = env.model.requests_for("PLAN-MCP-STDIO");
    // The server's tools are offered under their own names, with the server's schemas.
    let tools = offered(&requests[0].body);
    let echo = &tools
        .iter()
        .find(|(name, _)| name == "mcp__everything__echo")
        .unwrap_or_else(|| panic!("no echo tool; the run said:\n{out}"))
        .1;
    assert_eq!(echo["description"], "Echoes back the input string");
    assert_eq!(
        echo["parameters"]["properties"]["message"]["type"],
        "string"
    );
    assert!(
        tools
            .iter()
            .any(|(name, _)| name == "mcp__everything__get-env"),
        "{tools:?}"
    );
    // What the server answered is what the model read next.
    let results = tool_results(&requests[1].body);
    let parts: Vec<&str> = results.split("\n---\n").collect();
    assert_eq!(parts.len(), 3, "{results}");
    assert_eq!(parts[0], "Echo: hello from the model");
    // The server's environment is the sandbox's: its own HOME, none of the controller's
    // variables or secrets.
    let server_env: Value = serde_json::from_str(parts[1]).unwrap();
    assert_eq!(server_env["HOME"], "/tmp/home", "{server_env}");
    for secret in [
        CONTROLLER_SECRET,
        "sk-or-",
        "xoxb-",
        "xapp-",
        OUTSIDE_SECRET,
    ] {
        assert!(
            !parts[1].contains(secret),
            "{secret} visible in:\n{}",
            parts[1]
        );
    }
    // It has no network: its fetch failed, and nothing reached the host's loopback.
    assert!(parts[2].starts_with("error: "), "{}", parts[2]);
    assert_eq!(
        listener.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "the MCP server reached the host's network"
    );
    // After the commit stopped it, the server was started again for the next call.
    let last = tool_results(&requests[3].body);
    assert!(last.ends_with("\n---\nEcho: after the commit"), "{last}");
}

#[tokio::test]
async fn a_remote_mcp_server_is_called_by_the_controller_with_its_token() {
    let server = HttpEverything::start().await;
    let gate = TokenGate::start(Some(server.port), TOKEN).await;
    // A server on a host the fetch rules refuse (an internal address not allowed).
    let refused = TokenGate::start(None, TOKEN).await;
    let env = Env::with_runner(json!({
        "coder": {
            "maxTurns": 5,
            "timeout": 3,
            "mcpServers": {
                "remote": {"url": gate.url("127.0.0.1"), "tokenEnv": "CODEBUTLER_TEST_MCP_TOKEN"},
                "internal": {"url": refused.url("localhost")}
            }
        },
        "fetch": {"allowInternalHosts": ["127.0.0.1"]}
    }))
    .await;
    env.model.script(
        "PLAN-MCP-HTTP",
        vec![
            Reply::tool_call(
                "mcp__remote__echo",
                json!({"message": "through the controller"}).to_string(),
            ),
            Reply::text("called it"),
        ],
    );
    let _daemon = env
        .start_with_env(&[("CODEBUTLER_TEST_MCP_TOKEN", TOKEN)])
        .await;
    let plan = write_plan(&env, "PLAN-MCP-HTTP");
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await);
    assert!(out.contains("run finished: completed: called it"), "{out}");

    let requests = env.model.requests_for("PLAN-MCP-HTTP");
    let names: Vec<String> = offered(&requests[0].body)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert!(names.iter().any(|n| n == "mcp__remote__echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__internal__")),
        "{names:?}"
    );
    assert_eq!(
        tool_results(&requests[1].body),
        "Echo: through the controller"
    );
    // The server got every request with the token, the call among them.
    let seen = gate.requests();
    assert!(!seen.is_empty());
    for request in &seen {
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{request:?}"
        );
    }
    assert!(
        seen.iter().any(|r| r.body.contains("tools/call")
            && r.body.contains("\"echo\"")
            && r.body.contains("through the controller")),
        "{seen:?}"
    );
    // The refused host was never contacted.
    assert!(refused.requests().is_empty(), "{:?}", refused.requests());
    // The token never went through the runner: not in anything it sent to the model.
    for request in env.model.requests() {
        assert!(!request.body.to_string().contains(TOKEN));
    }
}
