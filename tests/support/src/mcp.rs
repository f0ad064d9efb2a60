//! Real MCP servers for the tests of the Coder's MCP tools: the reference server
//! `@modelcontextprotocol/server-everything` from npm (installed by `tests/run` under
//! [`EVERYTHING_DIR`], a pinned version), run over stdio by the runner or over streamable
//! HTTP here ([`HttpEverything`]), behind a recording proxy ([`TokenGate`]) that lets a test
//! see what reached the server: each request's `Authorization` header and body. The gate
//! refuses (401) a request without the expected bearer token, as a server that checks its
//! token would; forwarded requests reach the real server unchanged and its answers come back
//! unchanged (streamed).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Where `tests/run` installs the reference server (`npm install --prefix`), a directory the
/// runner's sandbox can read (under `/usr`).
pub const EVERYTHING_DIR: &str = "/usr/local/lib/codebutler-tests/mcp";

/// The reference server's entry point; panics, saying how to install it, when it is missing.
pub fn everything_js() -> PathBuf {
    let js = PathBuf::from(EVERYTHING_DIR)
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.is_file(),
        "{} is missing: run tests/run, which installs @modelcontextprotocol/server-everything there",
        js.display()
    );
    js
}

/// The reference server over streamable HTTP on a port of 127.0.0.1, killed when dropped.
#[derive(Debug)]
pub struct HttpEverything {
    child: tokio::process::Child,
    pub port: u16,
}

impl HttpEverything {
    /// Starts the server and waits until it listens.
    pub async fn start() -> HttpEverything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = tokio::process::Command::new("node")
            .arg(everything_js())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let listening = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("listening on port") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(listening, Ok(true), "the MCP server did not start");
        // Keep reading its stderr, so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HttpEverything { child, port }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// One request that reached a [`TokenGate`].
#[derive(Debug, Clone)]
pub struct GateRequest {
    pub method: String,
    pub authorization: Option<String>,
    pub body: String,
}

/// A recording proxy on 127.0.0.1 in front of an MCP server at `upstream` (`None`: no
/// server; every request is recorded and refused), letting through only requests with
/// `Authorization: Bearer <token>`.
#[derive(Debug, Clone)]
pub struct TokenGate {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<GateRequest>>>,
}

#[derive(Clone)]
struct Gate {
    upstream: Option<u16>,
    token: String,
    seen: Arc<Mutex<Vec<GateRequest>>>,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Body,
    >,
}

impl TokenGate {
    /// Starts the gate.
    pub async fn start(upstream: Option<u16>, token: &str) -> TokenGate {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let gate = Gate {
            upstream,
            token: token.to_owned(),
            seen: seen.clone(),
            client: hyper_util::client::legacy::Client::builder(
                hyper_util::rt::TokioExecutor::new(),
            )
            .build_http(),
        };
        let app = axum::Router::new().fallback(forward).with_state(gate);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        TokenGate { addr, seen }
    }

    /// The MCP endpoint's URL through the gate, with `host` as its host name.
    pub fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/mcp", self.addr.port())
    }

    /// Every request that reached the gate, in order.
    pub fn requests(&self) -> Vec<GateRequest> {
        self.seen.lock().unwrap().clone()
    }
}

async fn forward(State(gate): State<Gate>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let authorization = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    gate.seen.lock().unwrap().push(GateRequest {
        method: parts.method.to_string(),
        authorization: authorization.clone(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
    });
    let Some(port) = gate.upstream else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    if authorization.as_deref() != Some(format!("Bearer {}", gate.token).as_str()) {
        return (StatusCode::UNAUTHORIZED, "a bearer token is required").into_response();
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    parts.uri = format!("http://127.0.0.1:{port}{path}").parse().unwrap();
    let upstream = axum::http::Request::from_parts(parts, Body::from(bytes));
    match gate.client.request(upstream).await {
        Ok(response) => response.map(Body::new),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}
