//! Approval to the Coder's first model request, prepared ahead or not.
//!
//! `cargo bench -p codebutler-controller --bench approval`
//!
//! Through the real daemon and runner, against the fake Slack and model: a thread gets a
//! plan from the PM, and once the plan has been pending longer than its preparation takes,
//! someone types "yes"; measured from the approval's Socket Mode event to the fake model
//! receiving the Coder's first request. On repositories of 3,000 and 30,000 files, each
//! with preparing ahead on (the default) and off (`build.prepareAheadIdleMinutes: 0`, the
//! cold path: worktree, runner launch, sandbox, hub, checkpoint after the approval), in one
//! run. The whole measurement is repeated `REPEATS` times; each repetition's p50/p99 is
//! printed, then the medians of the repetitions.
//!
//! `BENCH_ROUNDS` sets the approvals per size, mode and repetition (default 10);
//! `BENCH_DAEMON_LOG` the daemon's log filter beyond what the bench needs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codebutler_controller::workspace::worktree::{self, Worktree};
use codebutler_test_support::git;
use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::json;

const SIZES: [usize; 2] = [3_000, 30_000];
const REPEATS: usize = 3;
const WAIT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Ahead,
    Cold,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Ahead => "ahead",
            Self::Cold => "cold",
        }
    }
}

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
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let mut lines = Vec::new();
    for files in SIZES {
        let repo = tempfile::tempdir().unwrap();
        // The daemon's worktrees are mounts of their own disks: detached however this ends.
        let _mounts = codebutler_test_support::mounts::DetachOnDrop(repo.path().to_owned());
        let built = Instant::now();
        make_repo(repo.path(), files);
        eprintln!("{files} files: fixture built in {:?}", built.elapsed());
        let mut results: Vec<(Mode, Vec<(f64, f64)>)> =
            vec![(Mode::Cold, Vec::new()), (Mode::Ahead, Vec::new())];
        for repeat in 0..REPEATS {
            for (mode, per_repeat) in &mut results {
                let samples = approvals(repo.path(), &runner, *mode, files, repeat, rounds).await;
                let (p50, p99) = (pct(&samples, 50.0), pct(&samples, 99.0));
                eprintln!(
                    "{files} files, {} #{repeat}: p50={p50:.1} ms p99={p99:.1} ms",
                    mode.name()
                );
                per_repeat.push((p50, p99));
            }
        }
        for (mode, per_repeat) in &results {
            let p50 = median(per_repeat.iter().map(|r| r.0).collect());
            let p99 = median(per_repeat.iter().map(|r| r.1).collect());
            let runs: Vec<String> = per_repeat
                .iter()
                .map(|(a, b)| format!("{a:.1}/{b:.1}"))
                .collect();
            lines.push(format!(
                "{:<44} p50={p50:>8.1} ms  p99={p99:>8.1} ms  (runs: {})",
                format!(
                    "{files} files, {}",
                    match mode {
                        Mode::Ahead => "prepared ahead",
                        Mode::Cold => "cold (preparing ahead off)",
                    }
                ),
                runs.join(", ")
            ));
        }
    }
    println!(
        "Slack approval to the Coder's first model request ({rounds} approvals per size, mode \
         and run; medians of {REPEATS} runs)"
    );
    for line in lines {
        println!("{line}");
    }
}

/// A repository of `files` small files, committed once (one `add_all`, not a `git add` each).
fn make_repo(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("src/m{}", i % 100));
        if i < 100 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n"),
        )
        .unwrap();
    }
    std::fs::write(root.join("README.md"), "# bench\n").unwrap();
    let repo = git::init(root);
    git::commit_all(&repo, "files");
}

/// One daemon in `mode` on `repo`: `rounds` plans, each approved once it is prepared (in
/// the cold mode, after the same wait); returns the approval → first request times.
async fn approvals(
    repo: &Path,
    runner: &Path,
    mode: Mode,
    files: usize,
    repeat: usize,
    rounds: usize,
) -> Vec<Duration> {
    let slack = FakeSlack::start().await;
    let model = FakeModel::start().await;
    // The provider carries the PM's model the config names and the Coder's default one.
    model.list("bench/pm-model");
    model.list("anthropic/claude-opus-4.6");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.json"),
        json!({"slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN}, "openrouter": {"apiKey": "sk-or-bench"}}).to_string(),
    )
    .unwrap();
    // The daemon checks at start that `gh` is logged in: the fake one is.
    let gh = codebutler_test_support::gh::install_fake_gh(&home.path().join("fake-gh"));
    std::fs::create_dir_all(repo.join(".codebutler")).unwrap();
    let idle = match mode {
        Mode::Ahead => 30.0,
        Mode::Cold => 0.0,
    };
    std::fs::write(
        repo.join(".codebutler/config.json"),
        json!({
            "openrouter": {"baseUrl": model.base_url(), "maxRetries": 0},
            "github": {"cli": gh.display().to_string()},
            "slack": {"channelID": slack::CHANNEL, "apiUrl": slack.api_url(), "messagesPerSecond": 100.0},
            "productManager": {"default": "cheap", "models": {"cheap": {"model": "bench/pm-model"}}},
            "sandbox": {"runnerPath": runner.display().to_string()},
            "access": {"maxConcurrentThreads": 1, "maxClaudeCallsPerHour": 0},
            "build": {"prepareAheadIdleMinutes": idle}
        })
        .to_string(),
    )
    .unwrap();
    let log_path = home.path().join("daemon.log");
    let filter = std::env::var("BENCH_DAEMON_LOG")
        .map(|f| format!("{f},codebutler_controller::coder::ahead=info"))
        .unwrap_or_else(|_| "error,codebutler_controller::coder::ahead=info".into());
    let _daemon = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_codebutler"))
            .arg("--repo")
            .arg(repo)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CODEBUTLER_HOME", home.path())
            .env("RUST_LOG", filter)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let prepared = || {
        std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .matches("prepared ahead:")
            .count()
    };
    let mut samples = Vec::new();
    for i in 0..rounds {
        let summary = format!("Bench {files} {} {repeat} {i}", mode.name());
        let token = format!("BENCH-{files}-{}-{repeat}-{i}", mode.name());
        let ask = format!("bench job {files} {} {repeat} {i}", mode.name());
        let plan = json!({"summary": summary, "steps": [format!("Do {token}")], "files": []});
        model.script(
            &ask,
            vec![
                Reply::tool_call("ProposePlan", plan.to_string()),
                Reply::text("Plan ready."),
            ],
        );
        model.script(&token, vec![Reply::text("done")]);
        let before = prepared();
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
            slack.wait_until(WAIT, || in_thread(1)).await,
            "no plan in thread {i}"
        );
        // The plan stays pending longer than its preparation takes.
        if mode == Mode::Ahead {
            assert!(
                slack.wait_until(WAIT, || prepared() > before).await,
                "the plan of thread {i} was never prepared ahead"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        slack.user_message(slack::CHANNEL, "U0BENCH", "yes", Some(&thread));
        assert!(
            codebutler_test_support::wait_until(WAIT, || !model.requests_for(&token).is_empty())
                .await,
            "the approval in thread {i} started no run"
        );
        let first = model.requests_for(&token)[0].at;
        samples.push(first.saturating_duration_since(start));
        // Plan, status, summary: the run ended (one run at a time).
        assert!(
            slack.wait_until(WAIT, || in_thread(3)).await,
            "the run of thread {i} did not end"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Only disk space: the thread's worktree (a mounted disk) goes before the next.
        let slug = worktree::slug(&summary);
        let tree = Worktree {
            path: repo.join(".codebutler/branches").join(&slug),
            branch: format!("codebutler/{slug}"),
        };
        worktree::remove(repo, &tree).await.unwrap();
    }
    samples
}

/// The daemon under test, stopped however the benchmark ends (a failed assertion too).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pct(samples: &[Duration], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = (((p / 100.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at].as_secs_f64() * 1000.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
