//! A real browser for the dashboard's tests: Debian's `chromium`, headless, driven over the
//! DevTools protocol (a websocket: JSON commands with ids, answers with the same id). Just
//! what the tests need: open a page, evaluate an expression in it, wait until one holds,
//! and save a screenshot. The browser runs in a profile directory of its own and is
//! killed when the [`Browser`] is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Headless Chromium and its one page.
pub struct Browser {
    child: Child,
    socket: Socket,
    next_id: u64,
    _profile: TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `chromium` binary: Debian's package (`tests/run` installs it when missing).
fn chromium() -> PathBuf {
    for path in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(path).is_file() {
            return PathBuf::from(path);
        }
    }
    panic!("chromium is missing: install Debian's `chromium` (tests/run does)");
}

impl Browser {
    /// Starts the browser at `about:blank` with a window of 1280×900.
    pub async fn start() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(chromium())
            .args([
                "--headless=new",
                // Root in a VM: Chromium's own sandbox needs an unprivileged user.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Chromium writes the port it took to the profile's DevToolsActivePort.
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Some(port) = text.lines().next().and_then(|l| l.parse::<u16>().ok())
            {
                break port;
            }
            assert!(Instant::now() < deadline, "chromium did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let targets: Value = reqwest_json(&format!("http://127.0.0.1:{port}/json/list")).await;
        let page = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .unwrap_or_else(|| panic!("no page among {targets}"));
        let url = page["webSocketDebuggerUrl"].as_str().unwrap().to_owned();
        let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Browser {
            child,
            socket,
            next_id: 0,
            _profile: profile,
        }
    }

    /// Sends `method` with `params` and returns its result (events in between are skipped).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let command = json!({"id": id, "method": method, "params": params});
        self.socket
            .send(Message::text(command.to_string()))
            .await
            .unwrap();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .unwrap()
                .unwrap();
            let Message::Text(text) = message else {
                continue;
            };
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// Opens `url` in the page and waits until it has loaded.
    pub async fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        let loaded = self
            .wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")
            .await;
        assert!(loaded, "{url} did not load");
    }

    /// The value of the JavaScript `expression` in the page.
    pub async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true}),
            )
            .await;
        result["result"]["value"].clone()
    }

    /// Waits up to 30 s until `expression` is true in the page.
    pub async fn wait_for(&mut self, expression: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.eval(expression).await == Value::Bool(true) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// The page's visible text.
    pub async fn text(&mut self) -> String {
        self.eval("document.body.innerText")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Saves a PNG screenshot of the page to `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        let result = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(result["data"].as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

async fn reqwest_json(url: &str) -> Value {
    codebutler_controller::tls::ensure_provider();
    reqwest::get(url).await.unwrap().json().await.unwrap()
}
