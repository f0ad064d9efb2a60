//! Runner start-up and gateway proxy benchmark.
//!
//! `cargo bench -p codebutler-controller --bench runner`
//!
//! On a repository of 3,000 files, in one run, each measured `ROUNDS` times:
//! - worktree creation (git2, what runs use) against `git clone --shared`;
//! - sandbox start: `codebutler-runner sandbox-exec … -- /bin/true` against spawning
//!   `/bin/true` bare (the difference is the sandbox's set-up and tear-down);
//! - from `StartRun` on the admin socket to the fake model receiving the runner's first
//!   request (worktree + launch + sandbox + hub session + first `Complete`), through the
//!   real daemon;
//! - from a typed approval in a Slack thread (a Socket Mode event from the fake Slack) to the
//!   fake model receiving the Coder's first request: the same plus intake and approval;
//! - a model call through the hub (`Complete` over the runner's socket, then the gateway)
//!   against the same call made with the gateway directly: the proxy's overhead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool_loop::ChatModel;
use codebutler_controller::config::OpenRouterConfig;
use codebutler_controller::domain::ThreadKey;
use codebutler_controller::gateway::{CallContext, Gateway};
use codebutler_controller::runners::fetch::FetchPolicy;
use codebutler_controller::runners::hub::RunHub;
use codebutler_controller::secret::Secret;
use codebutler_controller::store::Store;
use codebutler_controller::workspace::worktree::DiskBudget;
use codebutler_proto::runner::v1::StartRunRequest;
use codebutler_proto::runner::v1::admin_client::AdminClient;
use codebutler_runner::hub::{HubModel, connect};
use codebutler_test_support::git;
use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const FILES: usize = 3000;
const ROUNDS: usize = 20;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let runner = Path::new(env!("CARGO_BIN_EXE_codebutler")).with_file_name("codebutler-runner");
    assert!(
        runner.is_file(),
        "build it first: cargo build --release -p codebutler-runner"
    );
    let repo = tempfile::tempdir().unwrap();
    // The daemon's worktrees are mounts of their own disks: detached however this ends.
    let _mounts = codebutler_test_support::mounts::DetachOnDrop(repo.path().to_owned());
    make_repo(repo.path());

    // Worktrees vs clones.
    let mut worktrees = Vec::new();
    let mut clones = Vec::new();
    let clone_dir = tempfile::tempdir().unwrap();
    for i in 0..ROUNDS {
        let start = Instant::now();
        let tree = codebutler_controller::workspace::worktree::create(
            repo.path(),
            &format!("bench {i}"),
            None,
            DiskBudget::NONE,
        )
        .await
        .unwrap();
        worktrees.push(start.elapsed());
        let start = Instant::now();
        let status = Command::new("git")
            .args(["clone", "--quiet", "--shared"])
            .arg(repo.path())
            .arg(clone_dir.path().join(format!("c{i}")))
            .status()
            .unwrap();
        clones.push(start.elapsed());
        assert!(status.success());
        assert!(tree.path.join("src/f0.rs").is_file());
    }

    // Sandbox start vs a bare process.
    let tree = codebutler_controller::workspace::worktree::create(
        repo.path(),
        "sandbox bench",
        None,
        DiskBudget::NONE,
    )
    .await
    .unwrap();
    let spec = repo.path().join("spec.json");
    std::fs::write(&spec, json!({"worktree": tree.path}).to_string()).unwrap();
    let mut sandboxed = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let status = Command::new("/bin/true").status().unwrap();
        bare.push(start.elapsed());
        assert!(status.success());
        let start = Instant::now();
        let status = Command::new(&runner)
            .args(["sandbox-exec", "--spec"])
            .arg(&spec)
            .args(["--", "/bin/true"])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        sandboxed.push(start.elapsed());
        assert!(status.success());
    }

    let (to_first_request, approval_to_first) = start_to_first_request(repo.path(), &runner).await;
    let (direct, proxied) = proxy_overhead().await;

    println!("runner benchmark ({FILES} files, {ROUNDS} rounds each; p50 / p99)");
    report("worktree creation (git2)", &worktrees);
    report("git clone --shared (comparison)", &clones);
    report("bare process spawn (/bin/true)", &bare);
    report("sandboxed spawn (sandbox-exec /bin/true)", &sandboxed);
    let overhead: Vec<Duration> = sandboxed
        .iter()
        .zip(&bare)
        .map(|(s, b)| s.saturating_sub(*b))
        .collect();
    report("sandbox start (sandboxed − bare)", &overhead);
    report("StartRun to first model request", &to_first_request);
    report("Slack approval to first model request", &approval_to_first);
    report("model call, gateway direct", &direct);
    report("model call through the hub", &proxied);
    let proxy: Vec<Duration> = proxied
        .iter()
        .zip(&direct)
        .map(|(p, d)| p.saturating_sub(*d))
        .collect();
    report("hub proxy overhead (hub − direct)", &proxy);
}

fn make_repo(root: &Path) {
    for i in 0..FILES {
        let dir = root.join(format!("src/m{}", i % 50));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n"),
        )
        .unwrap();
    }
    std::fs::write(root.join("src/f0.rs"), "pub fn zero() {}\n").unwrap();
    let repo = git::init(root);
    git::commit_all(&repo, "files");
}

/// Through the real daemon: StartRun → the fake model sees the runner's first request; then
/// the same from a Slack approval ([`approval_to_first_request`]).
async fn start_to_first_request(repo: &Path, runner: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let slack = FakeSlack::start().await;
    let model = FakeModel::start().await;
    // The provider carries the PM's model the config names and the Coder's default one.
    model.list("bench/pm-model");
    model.list("anthropic/claude-opus-4.6");
    model.script(
        "PLAN-BENCH",
        (0..ROUNDS).map(|_| Reply::text("done")).collect(),
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.json"),
        json!({"slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN}, "openrouter": {"apiKey": "sk-or-bench"}}).to_string(),
    )
    .unwrap();
    // The daemon checks at start that `gh` is logged in: the fake one is.
    let gh = codebutler_test_support::gh::install_fake_gh(&home.path().join("fake-gh"));
    std::fs::create_dir_all(repo.join(".codebutler")).unwrap();
    std::fs::write(
        repo.join(".codebutler/config.json"),
        json!({
            "openrouter": {"baseUrl": model.base_url(), "maxRetries": 0},
            "github": {"cli": gh.display().to_string()},
            "slack": {"channelID": slack::CHANNEL, "apiUrl": slack.api_url(), "messagesPerSecond": 100.0},
            "productManager": {"default": "cheap", "models": {"cheap": {"model": "bench/pm-model"}}},
            "sandbox": {"runnerPath": runner.display().to_string()},
            "access": {"maxConcurrentThreads": 1, "maxClaudeCallsPerHour": 0}
        })
        .to_string(),
    )
    .unwrap();
    let _daemon = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_codebutler"))
            .arg("--repo")
            .arg(repo)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CODEBUTLER_HOME", home.path())
            .env(
                "RUST_LOG",
                std::env::var("BENCH_DAEMON_LOG").unwrap_or_else(|_| "error".into()),
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let socket = repo.join(".codebutler/run/admin.sock");
    assert!(
        slack
            .wait_until(Duration::from_secs(30), || socket.exists())
            .await,
        "no admin socket"
    );
    let socket_path = socket.clone();
    let channel = tonic::transport::Endpoint::from_static("http://controller.invalid")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = socket_path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await
        .unwrap();
    let mut admin = AdminClient::new(channel);
    let mut samples = Vec::new();
    for i in 0..ROUNDS {
        let seen = model.requests_for("PLAN-BENCH").len();
        let start = Instant::now();
        admin
            .start_run(StartRunRequest {
                plan: format!("PLAN-BENCH {i}"),
                thread_ts: Some(format!("bench-{i}")),
            })
            .await
            .unwrap();
        assert!(
            codebutler_test_support::wait_until(Duration::from_secs(30), || {
                model.requests_for("PLAN-BENCH").len() > seen
            })
            .await
        );
        let first = model.requests_for("PLAN-BENCH")[seen].at;
        samples.push(first.saturating_duration_since(start));
        // Let the run finish before the next (one run at a time).
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let approvals = approval_to_first_request(&slack, &model).await;
    (samples, approvals)
}

/// The daemon under test, stopped however the benchmark ends (a failed assertion too).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Through Slack: a thread gets a plan from the PM, then someone types "yes"; measured from
/// the approval's Socket Mode event to the fake model receiving the Coder's first request
/// (intake, approval, worktree, checkpoint, runner launch, sandbox, hub, first `Complete`).
async fn approval_to_first_request(slack: &FakeSlack, model: &FakeModel) -> Vec<Duration> {
    model.script(
        "APPROVAL-BENCH",
        (0..ROUNDS).map(|_| Reply::text("done")).collect(),
    );
    let mut samples = Vec::new();
    for i in 0..ROUNDS {
        let ask = format!("bench job {i}");
        let plan =
            json!({"summary": format!("APPROVAL-BENCH {i}"), "steps": ["Do it"], "files": []});
        model.script(
            &ask,
            vec![
                Reply::tool_call("ProposePlan", plan.to_string()),
                Reply::text("Plan ready."),
            ],
        );
        let thread = slack.user_message(slack::CHANNEL, "U0BENCH", &ask, None).ts;
        let in_thread = |n: usize| {
            slack
                .posts()
                .iter()
                .filter(|p| p.thread_ts.as_deref() == Some(thread.as_str()))
                .count()
                >= n
        };
        assert!(
            slack
                .wait_until(Duration::from_secs(30), || in_thread(1))
                .await,
            "no plan in thread {i}"
        );
        let seen = model.requests_for("APPROVAL-BENCH").len();
        let start = Instant::now();
        slack.user_message(slack::CHANNEL, "U0BENCH", "yes", Some(&thread));
        assert!(
            codebutler_test_support::wait_until(Duration::from_secs(30), || {
                model.requests_for("APPROVAL-BENCH").len() > seen
            })
            .await,
            "the approval in thread {i} started no run"
        );
        let first = model.requests_for("APPROVAL-BENCH")[seen].at;
        samples.push(first.saturating_duration_since(start));
        // Plan, status, summary: the run ended (one run at a time).
        assert!(
            slack
                .wait_until(Duration::from_secs(30), || in_thread(3))
                .await,
            "the run of thread {i} did not end"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    samples
}

/// A model call with the gateway directly, and the same call through a hub over a socket
/// pair, as a runner makes it.
async fn proxy_overhead() -> (Vec<Duration>, Vec<Duration>) {
    let model = FakeModel::start().await;
    model.list("m");
    model.script("", (0..ROUNDS * 2 + 2).map(|_| Reply::text("ok")).collect());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).await.unwrap();
    let gateway = Arc::new(
        Gateway::new(
            &OpenRouterConfig {
                api_key: Secret::new("sk-or-bench"),
                base_url: model.base_url(),
                timeout_secs: 30,
                max_retries: 0,
                breaker_failures: 0,
                breaker_cool_down_secs: 0,
            },
            store.clone(),
        )
        .unwrap(),
    );
    let ctx = CallContext {
        thread: ThreadKey {
            channel: "C".into(),
            thread_ts: "1.1".into(),
        },
        role: "coder",
        model: "m".into(),
    };
    store
        .create_run(codebutler_controller::store::NewRun {
            id: "r1",
            thread: &ctx.thread,
            plan: "p",
            model: "m",
            worktree: "/w",
            branch: "codebutler/bench",
            max_turns: 1,
        })
        .await
        .unwrap();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let (events, _event_rx) = tokio::sync::mpsc::channel(8);
    let (_commands, command_rx) = tokio::sync::mpsc::channel(8);
    let stop = CancellationToken::new();
    let fetch = Arc::new(FetchPolicy::new(vec![], vec![]).unwrap());
    let hub = RunHub {
        images: Default::default(),
        run_id: "r1".into(),
        ctx: ctx.clone(),
        gateway: gateway.clone(),
        store: store.clone(),
        mcp: Arc::new(codebutler_controller::runners::mcp::RemoteMcp::new(
            "r1",
            Vec::new(),
            fetch.clone(),
        )),
        fetch,
        events,
        commands: Mutex::new(Some(command_rx)),
        cancel: stop.clone(),
        tasked: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        calls_per_hour: 0,
        worktree: "/w".into(),
        repo: "/w".into(),
        helper: codebutler_controller::workspace::stage::Helper {
            runner_bin: "/nonexistent".into(),
            spec: codebutler_sandbox::SandboxSpec::for_worktree("/w"),
        },
        branch: "codebutler/bench".into(),
        gh: "gh".into(),
        memory: codebutler_controller::memory::source::DefaultBranchMemory::new(
            std::path::Path::new("/nonexistent"),
        ),
        thread_link: None,
        stored: Default::default(),
        outage: Default::default(),
    };
    tokio::spawn(hub.serve(
        tokio::net::UnixStream::from_std(ours).unwrap(),
        stop.clone(),
    ));
    let client = HubModel::new(connect(theirs).await.unwrap());
    let messages = vec![ChatMessage::system("s"), ChatMessage::user("hello")];
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    // Warm both paths once.
    gateway.complete(&ctx, &messages, &[], &stop).await.unwrap();
    client.complete(&messages, &[]).await.unwrap();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        gateway.complete(&ctx, &messages, &[], &stop).await.unwrap();
        direct.push(start.elapsed());
        let start = Instant::now();
        client.complete(&messages, &[]).await.unwrap();
        proxied.push(start.elapsed());
    }
    stop.cancel();
    (direct, proxied)
}

fn report(name: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let pct = |p: f64| {
        sorted[(((p / 100.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
    };
    println!(
        "{name:<44} p50={:>8.2} ms  p99={:>8.2} ms",
        pct(50.0).as_secs_f64() * 1000.0,
        pct(99.0).as_secs_f64() * 1000.0
    );
}
