//! What the dashboard costs a daemon with 1,000 threads in its store, measured on the real
//! release `codebutler` binary against the fakes.
//!
//! `cargo bench -p codebutler-controller --bench dashboard`
//!
//! The daemon first answers 1,000 new threads (one message each), then stops. It is then
//! started again on that store three ways, each left idle for `IDLE` while its RSS and CPU
//! time (user + system, from `/proc/<pid>/stat`) are read: without the dashboard; with it and
//! nobody looking; with it and a browser's two streams open (the runs page's and the log
//! page's server-sent events). Last, the time to answer each page (threads, costs,
//! `/api/costs`, `/metrics`), `REQUESTS` times each, with the 1,000 threads in the store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::json;

const THREADS: usize = 1000;
const IDLE: Duration = Duration::from_secs(30);
const REQUESTS: usize = 20;
const USER: &str = "U0BENCH";
const TOKEN: &str = "bench-dashboard-token-0123456789";

#[tokio::main]
async fn main() {
    codebutler_controller::tls::ensure_provider();
    let slack = FakeSlack::start().await;
    let model = FakeModel::start().await;
    model.list("moonshotai/kimi-k2");
    model.list("anthropic/claude-opus-4.6");
    model.script(
        "",
        (0..THREADS + 10)
            .map(|i| Reply::text(format!("answer {i}")))
            .collect(),
    );
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    codebutler_test_support::git::init(repo.path());
    std::fs::write(repo.path().join("README.md"), "# bench\n").unwrap();
    let gh = codebutler_test_support::gh::install_fake_gh(&home.path().join("fake-gh"));
    std::fs::create_dir_all(repo.path().join(".codebutler")).unwrap();
    std::fs::write(
        repo.path().join(".codebutler/config.json"),
        json!({
            "github": {"cli": gh.display().to_string()},
            "slack": {"channelID": slack::CHANNEL, "apiUrl": slack.api_url(), "messagesPerSecond": 0},
            "openrouter": {"baseUrl": model.base_url(), "maxRetries": 0}
        })
        .to_string(),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");

    // The store: 1,000 threads answered.
    write_global(home.path(), None);
    let mut child = start(&slack, home.path(), repo.path()).await;
    for i in 0..THREADS {
        slack.user_message(slack::CHANNEL, USER, &format!("thread {i}"), None);
    }
    assert!(
        slack
            .wait_until(Duration::from_secs(300), || {
                slack.calls_of("chat.postMessage").len() >= THREADS
            })
            .await,
        "only {} of {THREADS} threads answered",
        slack.calls_of("chat.postMessage").len()
    );
    stop(&mut child);

    let off = idle_figures(&slack, home.path(), repo.path(), None, &base, false).await;
    let on = idle_figures(&slack, home.path(), repo.path(), Some(port), &base, false).await;
    let watched = idle_figures(&slack, home.path(), repo.path(), Some(port), &base, true).await;
    println!("idle {}s, 1,000 threads in the store:", IDLE.as_secs());
    println!("| daemon | RSS | CPU while idle |");
    println!("|---|---|---|");
    for (name, (rss, cpu)) in [
        ("dashboard off", off),
        ("dashboard on, nobody looking", on),
        ("dashboard on, runs and log pages open", watched),
    ] {
        println!(
            "| {name} | {:.1} MiB | {:.2} % of a core ({} ms) |",
            rss as f64 / 1024.0,
            cpu.as_secs_f64() * 100.0 / IDLE.as_secs_f64(),
            cpu.as_millis()
        );
    }

    // Page times, dashboard on.
    write_global(home.path(), Some(port));
    let mut child = start(&slack, home.path(), repo.path()).await;
    let client = reqwest::Client::new();
    println!("| page | p50 | max |");
    println!("|---|---|---|");
    for path in ["/", "/costs", "/api/costs", "/metrics"] {
        let mut times = Vec::new();
        for _ in 0..REQUESTS {
            let at = Instant::now();
            let response = client
                .get(format!("{base}{path}"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200, "{path}");
            let body = response.bytes().await.unwrap();
            assert!(!body.is_empty());
            times.push(at.elapsed());
        }
        times.sort();
        println!(
            "| `{path}` | {:.2} ms | {:.2} ms |",
            times[times.len() / 2].as_secs_f64() * 1000.0,
            times[times.len() - 1].as_secs_f64() * 1000.0
        );
    }
    stop(&mut child);
}

/// The global config, with the dashboard on at `port` when given.
fn write_global(home: &Path, port: Option<u16>) {
    let mut config = json!({
        "slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN},
        "openrouter": {"apiKey": "sk-or-bench"}
    });
    if let Some(port) = port {
        config["dashboard"] = json!({"listen": format!("127.0.0.1:{port}"), "token": TOKEN});
    }
    std::fs::write(home.join("config.json"), config.to_string()).unwrap();
}

/// Starts the daemon and waits for its Socket Mode connection.
async fn start(slack: &FakeSlack, home: &Path, repo: &Path) -> Child {
    let opened = slack.connections_opened();
    let child = Command::new(env!("CARGO_BIN_EXE_codebutler"))
        .arg("--repo")
        .arg(repo)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CODEBUTLER_HOME", home)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    assert!(
        slack
            .wait_until(Duration::from_secs(30), || slack.connections_opened()
                > opened
                && slack.open_connections() > 0)
            .await
    );
    child
}

fn stop(child: &mut Child) {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    child.wait().unwrap();
}

/// The daemon restarted on the store (with the dashboard at `port` when given), left idle
/// for [`IDLE`] (with the two pages' streams open when `watched`): its RSS at the end (KiB)
/// and the CPU time it used meanwhile.
async fn idle_figures(
    slack: &FakeSlack,
    home: &Path,
    repo: &Path,
    port: Option<u16>,
    base: &str,
    watched: bool,
) -> (u64, Duration) {
    write_global(home, port);
    let mut child = start(slack, home, repo).await;
    let pid = child.id();
    // Let the start's work settle before measuring.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut streams = Vec::new();
    if watched {
        for path in ["/api/runs/events", "/api/logs"] {
            let response = reqwest::Client::new()
                .get(format!("{base}{path}"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            streams.push(response);
        }
    }
    let cpu_before = cpu_time(pid);
    tokio::time::sleep(IDLE).await;
    let cpu = cpu_time(pid) - cpu_before;
    let rss = rss_kib(pid);
    drop(streams);
    stop(&mut child);
    (rss, cpu)
}

/// The process's user + system CPU time, from `/proc/<pid>/stat` (clock ticks of 10 ms).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis: state is the 3rd field overall,
    // utime the 14th and stime the 15th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}
