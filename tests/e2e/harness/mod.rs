//! Shared set-up: a repository with known content, a `CODEBUTLER_HOME` with the global
//! config, the fakes, and the daemon as a child process whose stderr goes to a file; the
//! steps tests repeat in a thread ([`steps`]), around Coder runs ([`runs`]) and to carry a
//! thread to an open pull request ([`pull_requests`]); a headless browser ([`browser`]).

pub mod browser;
mod pull_requests;
mod runs;
mod steps;

pub use pull_requests::{stored_state, thread_with_pr, thread_with_pr_of};
pub use runs::{runner_bin, runner_env, runnerctl, stdout, wait_output, worktree_of};
pub use steps::{
    APPROVE, CANCEL_PLAN, STOP_RUN, say_and_wait_post, say_and_wait_run, thread_with_plan,
    thread_with_plan_of, write,
};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use codebutler_controller::coordination::semantic::REQUEST as OVERLAP_REQUEST;
use codebutler_controller::journal::notes::{SUMMARY_REQUEST, TIPS_REQUEST};
use codebutler_test_support::git;
use codebutler_test_support::merge;
use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack, Post};
use serde_json::{Value, json};
use tempfile::TempDir;

pub const USER: &str = "U0ALICE";
/// What the fake model answers for a pull request's summary unless a test says otherwise.
pub const DEFAULT_SUMMARY: &str =
    r#"{"summary": "The change the thread asked for.", "decisions": []}"#;
pub const WAIT: Duration = Duration::from_secs(30);
/// The PM's model in every env's config: an id of the test's own, listed by the fake
/// provider.
pub const PM_MODEL: &str = "test/pm-model";
/// OpenRouter's id for Claude Opus 4.6, which the Coder uses when a test does not set
/// `coder.model`: the fake provider lists it, as OpenRouter does.
pub const CODER_MODEL: &str = "anthropic/claude-opus-4.6";

/// The secret that lives outside the repository; no test output may contain it.
pub const OUTSIDE_SECRET: &str = "outside-secret-7f3a9c";

pub struct Env {
    pub slack: FakeSlack,
    pub model: FakeModel,
    pub home: TempDir,
    pub repo: TempDir,
    /// Outside the repository: secret files and the fake `gh`.
    pub outside: TempDir,
}

impl Env {
    /// Fakes, a committed repository, and configs (repo settings merged over `overrides`).
    pub async fn new() -> Env {
        Self::with_config(json!({})).await
    }

    pub async fn with_config(overrides: Value) -> Env {
        let slack = FakeSlack::start().await;
        let model = FakeModel::start().await;
        let env = Env {
            slack,
            model,
            home: tempfile::tempdir().unwrap(),
            repo: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        };
        env.make_repo();
        // The provider carries the models the config below names; a test that names others
        // lists them itself.
        env.model.list(PM_MODEL);
        env.model.list(CODER_MODEL);
        std::fs::write(env.outside.path().join("secret.txt"), OUTSIDE_SECRET).unwrap();
        codebutler_test_support::gh::install_fake_gh(env.outside.path());
        // The PM's notes on a finished thread (the PR's summary, the report's tips) get a
        // fixed answer unless a test scripts its own.
        env.model
            .respond(SUMMARY_REQUEST, |_| Reply::text(DEFAULT_SUMMARY));
        env.model
            .respond(TIPS_REQUEST, |_| Reply::text(r#"{"tips": []}"#));
        // The PM's judgement of a new plan against the other active threads finds nothing
        // unless a test scripts its own.
        env.model
            .respond(OVERLAP_REQUEST, |_| Reply::text(r#"{"overlaps": []}"#));
        env.write_global(json!({
            "slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN},
            "openrouter": {"apiKey": "sk-or-test-key"}
        }));
        let mut repo_config = json!({
            "slack": {"channelID": slack::CHANNEL, "apiUrl": env.slack.api_url(), "messagesPerSecond": 100.0, "streaming": false},
            "openrouter": {"baseUrl": env.model.base_url(), "maxRetries": 2, "timeoutSeconds": 20},
            "productManager": {"default": "cheap", "models": {"cheap": {"model": PM_MODEL}}},
            "github": {"cli": env.outside.path().join("gh").display().to_string()}
        });
        merge(&mut repo_config, overrides);
        env.write_repo_config(&repo_config.to_string());
        env
    }

    pub fn repo_path(&self) -> &Path {
        self.repo.path()
    }

    fn make_repo(&self) {
        let root = self.repo.path();
        git::write_files(
            root,
            &[
                (
                    "README.md",
                    "# Acme\n\n## Deploying\n\nRun `make deploy`. CI deploys `main` on merge via .github/workflows/deploy.yml.\n",
                ),
                ("Makefile", "deploy:\n\tkubectl apply -f k8s/\n"),
                (
                    "src/auth/session.rs",
                    "//! Sessions.\n\n/// How long a session lives.\npub const SESSION_EXPIRY_SECS: u64 = 3600;\n",
                ),
                ("src/lib.rs", "pub mod auth;\n"),
            ],
        );
        std::os::unix::fs::symlink(
            self.outside.path().join("secret.txt"),
            root.join("link-out"),
        )
        .unwrap();
        // The link stays untracked: committed are the files above only.
        let repo = git::init(root);
        git::commit_paths(&repo, &["README.md", "Makefile", "src"], "Initial commit");
    }

    pub fn write_global(&self, config: Value) {
        std::fs::write(self.home.path().join("config.json"), config.to_string()).unwrap();
    }

    pub fn write_repo_config(&self, text: &str) {
        let dir = self.repo.path().join(".codebutler");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), text).unwrap();
    }

    /// The daemon's command line, with a clean environment apart from PATH.
    pub fn command(&self) -> Command {
        let mut cmd = codebutler_command(self.home.path());
        cmd.arg("--repo").arg(self.repo.path());
        cmd
    }

    /// Starts the daemon and waits until it has connected to Socket Mode.
    pub async fn start(&self) -> Daemon {
        self.start_with(&[]).await
    }

    /// Starts the daemon with extra arguments and waits until it has connected.
    pub async fn start_with(&self, args: &[&str]) -> Daemon {
        let opened = self.slack.connections_opened();
        let daemon = self.spawn_with(args);
        self.until_connected(daemon, opened).await
    }

    /// Starts the daemon with `vars` added to its environment and waits until it has
    /// connected.
    pub async fn start_with_env(&self, vars: &[(&str, &str)]) -> Daemon {
        let opened = self.slack.connections_opened();
        let mut command = self.command();
        command.envs(vars.iter().copied());
        let log = self.new_log();
        let daemon = Daemon::spawn_logged(command, log);
        self.until_connected(daemon, opened).await
    }

    /// `daemon`, once Slack saw it open a connection after `opened` were opened.
    async fn until_connected(&self, daemon: Daemon, opened: usize) -> Daemon {
        let connected = self
            .slack
            .wait_until(WAIT, || {
                self.slack.connections_opened() > opened && self.slack.open_connections() > 0
            })
            .await;
        assert!(connected, "daemon did not connect; log:\n{}", daemon.log());
        daemon
    }

    pub fn spawn(&self) -> Daemon {
        self.spawn_with(&[])
    }

    /// A fresh file for a daemon's log, outside the repository.
    pub fn new_log(&self) -> PathBuf {
        self.outside
            .path()
            .join(format!("daemon-{}.log", rand_suffix()))
    }

    pub fn spawn_with(&self, args: &[&str]) -> Daemon {
        let log = self.new_log();
        let file = std::fs::File::create(&log).unwrap();
        let child = self
            .command()
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Daemon { child, log }
    }

    /// Sends a top-level user message; returns its ts (the thread's ts).
    pub fn say(&self, text: &str) -> String {
        self.slack.user_message(slack::CHANNEL, USER, text, None).ts
    }

    /// Posts by the bot in one thread.
    pub fn thread_posts(&self, thread_ts: &str) -> Vec<Post> {
        self.slack
            .posts()
            .into_iter()
            .filter(|p| p.thread_ts.as_deref() == Some(thread_ts))
            .collect()
    }

    /// Waits until a post of the thread (as first posted) satisfies `pred`; returns the first
    /// that does.
    pub async fn wait_post(&self, thread_ts: &str, pred: impl Fn(&str) -> bool) -> String {
        let found = || self.post_texts(thread_ts).into_iter().find(|t| pred(t));
        let ok = self.slack.wait_until(WAIT, || found().is_some()).await;
        assert!(ok, "no such post in {:?}", self.post_texts(thread_ts));
        found().unwrap_or_default()
    }

    /// The texts of the bot's posts in one thread, as first posted.
    pub fn post_texts(&self, thread_ts: &str) -> Vec<String> {
        self.thread_posts(thread_ts)
            .into_iter()
            .map(|p| p.text)
            .collect()
    }

    /// The texts of the bot's posts in one thread, each with its last update applied.
    pub fn thread_texts(&self, thread_ts: &str) -> Vec<String> {
        let updates = self.slack.updates();
        self.thread_posts(thread_ts)
            .into_iter()
            .map(|p| {
                updates
                    .iter()
                    .rev()
                    .find(|u| u.ts == p.ts)
                    .map_or(p.text, |u| u.text.clone())
            })
            .collect()
    }

    /// Waits until the thread has at least `n` bot posts and returns them.
    pub async fn wait_thread_posts(&self, thread_ts: &str, n: usize) -> Vec<Post> {
        let ok = self
            .slack
            .wait_until(WAIT, || self.thread_posts(thread_ts).len() >= n)
            .await;
        assert!(
            ok,
            "thread {thread_ts}: expected {n} posts, got {:?}",
            self.thread_posts(thread_ts)
        );
        self.thread_posts(thread_ts)
    }

    /// Asserts both fakes saw only protocol-conformant traffic.
    pub fn assert_clean(&self) {
        assert!(
            self.model.violations().is_empty(),
            "model protocol violations: {:?}",
            self.model.violations()
        );
        assert!(
            self.slack.violations().is_empty(),
            "slack protocol violations: {:?}",
            self.slack.violations()
        );
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// `codebutler` with the global config directory `home` (also its HOME), a clean environment
/// apart from PATH, debug logs and no stdin.
pub fn codebutler_command(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_codebutler"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CODEBUTLER_HOME", home)
        .env(
            "RUST_LOG",
            "warn,codebutler_controller=debug,codebutler=debug",
        )
        .stdin(Stdio::null());
    cmd
}

/// The daemon process; killed when dropped.
pub struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Spawns `cmd` with its stderr in the file `log`.
    pub fn spawn_logged(mut cmd: Command, log: PathBuf) -> Daemon {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(file).spawn().unwrap();
        Daemon { child, log }
    }

    /// Spawns `cmd` with its stdout and its stderr both in the file `log`.
    pub fn spawn_capturing(mut cmd: Command, log: PathBuf) -> Daemon {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Daemon { child, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < timeout,
                "daemon did not exit; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL, and wait until it is gone.
    pub async fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.wait_exit(WAIT).await;
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Env {
    /// Worktrees on disks of their own are mounts under the repository: detach them, so the
    /// temporary directory can go and no loop device outlives the test.
    fn drop(&mut self) {
        codebutler_test_support::mounts::detach_under(self.repo.path());
    }
}

/// The text of every tool result in a recorded request, joined.
pub fn tool_results(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| content_text(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The text of the system message of a recorded request (empty when it has none).
pub fn system_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "system")
        .map(|m| content_text(&m["content"]))
        .unwrap_or_default()
}

/// A message's text: its `content` string, or its text parts joined (the shape of a message
/// with a prompt-cache breakpoint).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The contents of the user messages of a recorded request.
pub fn user_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| content_text(&m["content"]))
        .collect()
}

/// The outbox effect a post delivered: the id in its metadata.
pub fn intent(post: &Post) -> Option<String> {
    let metadata = post.metadata.as_ref()?;
    (metadata["event_type"] == "codebutler_post")
        .then(|| {
            metadata["event_payload"]["intent"]
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

/// Asserts that every post of the bot names its outbox effect and that no effect was
/// posted twice.
pub fn assert_each_effect_posted_once(env: &Env) {
    let mut seen = std::collections::HashMap::new();
    for post in env.slack.posts() {
        let id = intent(&post).unwrap_or_else(|| panic!("a post without its effect id: {post:?}"));
        if let Some(first) = seen.insert(id.clone(), post.text.clone()) {
            panic!("effect {id} posted twice: {first:?} and {:?}", post.text);
        }
    }
}

/// The daemon's store, opened from the outside (the daemon stopped or running).
pub async fn open_store(env: &Env) -> sqlx::SqlitePool {
    let path = env.repo_path().join(".codebutler/store.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(Duration::from_secs(5));
    sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap()
}

/// The line a run's summary ends with when it pushed `branch` of the bare repository
/// `origin` from `from` to the branch's tip there, changing `files`, to PR #`pr`.
pub fn pushed_line(origin: &Path, branch: &str, from: &str, files: &[&str], pr: u64) -> String {
    let tip = git::git(origin, &["rev-parse", &format!("refs/heads/{branch}")]);
    let files: Vec<String> = files.iter().map(|f| format!("`{f}`")).collect();
    format!(
        "Pushed `{}..{}` ({}) to PR #{pr}.",
        &from[..7],
        &tip[..7],
        files.join(", ")
    )
}
