//! Coder runs from the outside: the runner binary, an env whose controller can start runs in
//! the sandbox, the `runnerctl` client, and where a run's worktree is.

use std::path::{Path, PathBuf};
use std::process::Output;

use codebutler_test_support::merge;
use serde_json::{Value, json};

use super::{Env, WAIT};

impl Env {
    /// An env whose controller runs the Coder in the real sandbox (the workspace's runner,
    /// 768 MB of memory), with `config` merged over that into the repository's config.
    pub async fn with_runner(config: Value) -> Env {
        let mut base = json!({
            "sandbox": {"runnerPath": runner_bin().display().to_string(), "memoryMB": 768}
        });
        merge(&mut base, config);
        Env::with_config(base).await
    }
}

/// An env whose controller runs the Coder in the sandbox with `coder` as its `coder`
/// settings (the test's limits).
pub async fn runner_env(coder: Value) -> Env {
    Env::with_runner(json!({ "coder": coder })).await
}

/// The workspace's runner binary (built by `cargo nextest run --workspace`, or
/// `cargo build -p codebutler-runner`).
pub fn runner_bin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_codebutler")).with_file_name("codebutler-runner");
    assert!(
        bin.is_file(),
        "{} is missing: run the suite with --workspace or `cargo build -p codebutler-runner`",
        bin.display()
    );
    bin
}

/// Runs `runnerctl` without blocking the test's runtime (the fakes live on it).
pub async fn runnerctl(env: &Env, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_runnerctl"))
        .arg("--repo")
        .arg(env.repo_path())
        .args(args)
        .output()
        .await
        .unwrap()
}

/// Polls a `runnerctl` command until its output contains `needle`; returns the output.
pub async fn wait_output(env: &Env, args: &[&str], needle: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let out = stdout(&runnerctl(env, args).await);
        if out.contains(needle) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw {needle:?}; last output:\n{out}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A command's standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The worktree of the run whose branch is `codebutler/<slug>`.
pub fn worktree_of(env: &Env, slug: &str) -> PathBuf {
    env.repo_path().join(".codebutler/branches").join(slug)
}
