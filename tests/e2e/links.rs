//! Links a repository commits under `.codebutler/` are never followed by the daemon.
//!
//! Prompts: a pull request that turns `.codebutler/prompts/shared.md` into a link to a
//! secret outside the repository and `coder.md` into one to `/proc/self/environ` (the
//! daemon's environment, its keys in it), once merged and pulled, used to put both into every
//! PM request and into the Coder's own system prompt. Here the default branch and the
//! checkout hold exactly those links; the requests the fake model received carry neither
//! secret, and the prompts are the shipped defaults.
//!
//! The daemon's own files: `.codebutler/run/` is git-ignored, and git replaces ignored files
//! on checkout, so a merged link there stands where the daemon writes its lock, its logs and
//! its specs. The host file it points at is never written.

use std::os::unix::fs::symlink;

use codebutler_controller::layout::DEFAULT_PROMPTS;
use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    Env, OUTSIDE_SECRET, content_text, runner_env, say_and_wait_run, thread_with_plan,
};

/// The daemon's OpenRouter key, given in its environment: what `/proc/self/environ` holds.
const ENV_SECRET: &str = "sk-or-env-secret-5b1d93";

fn shipped(name: &str) -> &'static str {
    DEFAULT_PROMPTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| text.trim_end())
        .unwrap()
}

#[tokio::test]
async fn prompt_files_made_links_never_reach_a_model_request() {
    let env = runner_env(json!({"maxTurns": 3, "timeout": 2})).await;
    let prompts = env.repo_path().join(".codebutler/prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    symlink(
        env.outside.path().join("secret.txt"),
        prompts.join("shared.md"),
    )
    .unwrap();
    symlink("/proc/self/environ", prompts.join("coder.md")).unwrap();
    let repo = git2::Repository::open(env.repo_path()).unwrap();
    git::commit_paths(
        &repo,
        &[".codebutler/prompts"],
        "Prompts, from a merged pull request",
    );
    env.model
        .script("LINK-TOKEN", vec![Reply::text("Nothing to change.")]);
    let _daemon = env
        .start_with_env(&[("OPENROUTER_API_KEY", ENV_SECRET)])
        .await;

    let ask = "please look at the deploy notes";
    let thread = thread_with_plan(&env, ask, "LINK-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "go").await,
        "white_check_mark"
    );

    let requests = env.model.requests();
    assert!(!env.model.requests_for("LINK-TOKEN").is_empty());
    for request in &requests {
        let body = request.body.to_string();
        assert!(!body.contains(OUTSIDE_SECRET), "the outside secret: {body}");
        assert!(!body.contains(ENV_SECRET), "the environment: {body}");
        assert!(
            !body.contains("CODEBUTLER_HOME="),
            "the environment: {body}"
        );
    }
    let system = |body: &serde_json::Value| content_text(&body["messages"][0]["content"]);
    let pm = system(&env.model.requests_for(ask)[0].body);
    assert!(pm.contains(shipped("shared.md")), "{pm}");
    let coder = system(&env.model.requests_for("LINK-TOKEN")[0].body);
    assert!(
        coder.starts_with(&format!(
            "{}\n\n{}",
            shipped("coder.md"),
            shipped("shared.md")
        )),
        "{coder}"
    );
    env.assert_clean();
}

/// A merged `.codebutler/run/daemon.lock` that is a link to a host file: the daemon refuses
/// to start, saying so, and the host file keeps its content (the old daemon wrote its pid
/// into it).
#[tokio::test]
async fn a_lock_file_made_a_link_is_refused_and_its_target_kept() {
    let env = Env::new().await;
    let target = env.outside.path().join("authorized_keys");
    std::fs::write(&target, "ssh-ed25519 AAAA kept\n").unwrap();
    let run = env.repo_path().join(".codebutler/run");
    std::fs::create_dir_all(&run).unwrap();
    symlink(&target, run.join("daemon.lock")).unwrap();
    let repo = git2::Repository::open(env.repo_path()).unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_path(std::path::Path::new(".codebutler/run/daemon.lock"))
        .unwrap();
    index.write().unwrap();
    git::commit_paths(
        &repo,
        &[".codebutler/run"],
        "A lock, from a merged pull request",
    );

    let mut daemon = env.spawn();
    let status = daemon.wait_exit(std::time::Duration::from_secs(30)).await;
    let log = daemon.log();
    assert_ne!(status.code(), Some(0), "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("codebutler: error:") && l.contains("symbolic link")),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "ssh-ed25519 AAAA kept\n"
    );
}
