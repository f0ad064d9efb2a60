//! An approved plan's worktree: branched from freshly fetched `origin` (or, when the fetch
//! fails, from what the thread is told), refused past `access.maxWorktreeDiskMB`, and
//! prepared per platform inside the real sandbox — with the network for that step only —
//! before the Coder starts; an init that fails keeps the Coder from starting.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::Sent;
use codebutler_test_support::{git, merge};
use serde_json::{Value, json};

use crate::harness::{Env, WAIT, runner_bin, thread_with_plan_of, tool_results};

/// An env whose Coder runs in the real sandbox, with `extra` merged into the repo config.
async fn env_with(extra: Value) -> Env {
    let mut config = json!({"coder": {"maxTurns": 5, "timeout": 2}});
    merge(&mut config, extra);
    Env::with_runner(config).await
}

/// The PM proposes a plan titled `summary` for `ask`; the Coder's script follows; the
/// user approves. Returns the thread and the approval.
async fn approved(env: &Env, ask: &str, summary: &str) -> (String, Sent) {
    let plan = json!({"summary": summary, "steps": ["Do it"], "files": ["README.md"]});
    let thread = thread_with_plan_of(env, ask, &plan, "Plan ready; approve it.").await;
    let approval = approve(env, &thread);
    (thread, approval)
}

fn approve(env: &Env, thread: &str) -> Sent {
    env.reply(thread, "LGTM!")
}

async fn wait_reaction(env: &Env, approval: &Sent, name: &str) -> bool {
    env.wait_reaction(&approval.ts, name).await
}

#[tokio::test]
async fn a_node_worktree_is_prepared_in_the_sandbox_before_the_coder_starts() {
    // npm needs more address space than the other tests' 768 MB (the default is 4096).
    let env = env_with(json!({"sandbox": {
        "runnerPath": runner_bin().display().to_string(),
        "memoryMB": 4096
    }}))
    .await;
    git::commit_files(
        env.repo_path(),
        &[
            (
                "package.json",
                r#"{"name":"acme","version":"1.0.0","private":true}"#,
            ),
            (
                "package-lock.json",
                r#"{"name":"acme","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"acme","version":"1.0.0"}}}"#,
            ),
        ],
        "Node project",
    );
    env.model.script(
        "NODE-TOKEN",
        vec![
            Reply::tool_call(
                "Bash",
                r#"{"command": "env | sort; git status --short; python3 -c 'import socket; socket.socket()' 2>&1 | tail -1"}"#,
            ),
            Reply::text("Checked."),
        ],
    );
    let _daemon = env.start().await;
    let (thread, approval) = approved(&env, "check the node setup", "Check NODE-TOKEN").await;
    assert!(
        wait_reaction(&env, &approval, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    let texts = env.thread_texts(&thread);
    let prepared = texts
        .iter()
        .find(|t| t.starts_with("*Coder:* prepared the worktree: `npm ci` ("))
        .unwrap_or_else(|| panic!("no preparation line in {texts:?}"));
    assert!(prepared.ends_with("s)"), "{prepared}");
    // The preparation came before the run's status message.
    let prep_at = texts.iter().position(|t| t == prepared).unwrap();
    let status_at = texts
        .iter()
        .position(|t| t.contains("_Check NODE-TOKEN_"))
        .unwrap();
    assert!(prep_at < status_at, "{texts:?}");

    // The Coder's run has the build-isolation environment, no network, and the caches
    // the init made are not something git would commit.
    let requests = env.model.requests_for("NODE-TOKEN");
    let bash = tool_results(&requests[1].body);
    assert!(
        bash.contains("npm_config_cache=/workspace/.codebutler-cache/npm"),
        "{bash}"
    );
    assert!(bash.contains("npm_config_audit=false"), "{bash}");
    assert!(bash.contains("PermissionError: [Errno 1]"), "{bash}");
    let worktree = env
        .repo_path()
        .join(".codebutler/branches/check-node-token");
    assert!(worktree.join(".codebutler-cache/.gitignore").is_file());
    let repo = git2::Repository::open(&worktree).unwrap();
    let mut options = git2::StatusOptions::new();
    options.include_untracked(true).recurse_untracked_dirs(true);
    let untracked: Vec<String> = repo
        .statuses(Some(&mut options))
        .unwrap()
        .iter()
        .filter_map(|s| s.path().ok().map(str::to_owned))
        .collect();
    assert!(
        !untracked.iter().any(|p| p.starts_with(".codebutler-cache")),
        "git would commit the caches: {untracked:?}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn the_init_has_the_network_and_no_secret_and_the_coder_has_neither() {
    let env = env_with(json!({"build": {
        "initCommand": "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print('INIT-INET-OK')\" > init-net.txt && env > init-env.txt"
    }}))
    .await;
    env.model.script(
        "NET-TOKEN",
        vec![
            Reply::tool_call(
                "Bash",
                r#"{"command": "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print('CODER-INET-OK')\" 2>&1 | tail -1"}"#,
            ),
            Reply::text("Tried."),
        ],
    );
    let _daemon = env.start().await;
    let (thread, approval) = approved(&env, "try the network", "Try NET-TOKEN").await;
    assert!(
        wait_reaction(&env, &approval, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    let worktree = env.repo_path().join(".codebutler/branches/try-net-token");
    let net = std::fs::read_to_string(worktree.join("init-net.txt")).unwrap();
    assert_eq!(net.trim(), "INIT-INET-OK");
    let init_env = std::fs::read_to_string(worktree.join("init-env.txt")).unwrap();
    for secret in [
        "sk-or-test-key",
        "xoxb-",
        "xapp-",
        crate::harness::OUTSIDE_SECRET,
    ] {
        assert!(
            !init_env.contains(secret),
            "{secret} in the init's env:\n{init_env}"
        );
    }
    assert!(init_env.contains("HOME=/tmp/home"), "{init_env}");
    let bash = tool_results(&env.model.requests_for("NET-TOKEN")[1].body);
    assert!(!bash.contains("CODER-INET-OK"), "{bash}");
    assert!(bash.contains("PermissionError"), "{bash}");
    let texts = env.thread_texts(&thread);
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("*Coder:* prepared the worktree: `python3 -c")),
        "{texts:?}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_failed_init_is_reported_and_the_coder_does_not_start() {
    let env = env_with(json!({"build": {
        "initCommand": "echo compiling; echo BROKEN-DEP >&2; exit 3"
    }}))
    .await;
    env.model.script("FAIL-TOKEN", vec![Reply::text("never")]);
    let _daemon = env.start().await;
    let (thread, approval) = approved(&env, "break the build", "Break FAIL-TOKEN").await;
    assert!(
        wait_reaction(&env, &approval, "x").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_texts(&thread)
                .iter()
                .any(|t| t.contains("approve it again to retry"))
        })
        .await;
    let texts = env.thread_texts(&thread);
    assert!(ok, "{texts:?}");
    assert!(
        texts.iter().any(|t| t.starts_with(
            "*Coder:* preparing the worktree failed: `echo compiling; echo BROKEN-DEP &gt;&amp;2; exit 3` failed (exit status: 3) after "
        )),
        "{texts:?}"
    );
    let output = texts
        .iter()
        .find(|t| t.contains("BROKEN-DEP") && t.contains("```"))
        .unwrap_or_else(|| panic!("no output tail in {texts:?}"));
    assert!(output.contains("compiling"), "{output}");
    assert!(
        texts
            .iter()
            .any(|t| t
                .starts_with("*PM:* I couldn't start the Coder (preparing the worktree failed")),
        "{texts:?}"
    );
    assert!(env.model.requests_for("FAIL-TOKEN").is_empty());
    assert!(
        !texts.iter().any(|t| t.contains("working on _Break")),
        "{texts:?}"
    );
    // The unprepared worktree and its branch are gone, so a retry starts clean.
    assert!(
        !env.repo_path()
            .join(".codebutler/branches/break-fail-token")
            .exists()
    );
    env.assert_clean();
}

#[tokio::test]
async fn worktrees_branch_from_origin_and_a_failed_fetch_is_said() {
    let env = env_with(json!({})).await;
    // A bare origin with the fixture's branch, then upstream work the checkout lacks, and
    // local work origin lacks.
    let origin = env.outside.path().join("origin.git");
    let (_, branch) = git::push_to_new_origin(env.repo_path(), &origin);
    let other = env.outside.path().join("other");
    let clone = git2::Repository::clone(origin.to_str().unwrap(), &other).unwrap();
    git::commit_files(&other, &[("UPSTREAM.md", "upstream work\n")], "Upstream");
    clone
        .find_remote("origin")
        .unwrap()
        .push(&[format!("{branch}:{branch}")], None)
        .unwrap();
    git::commit_files(env.repo_path(), &[("LOCAL.md", "local only\n")], "Local");
    for token in ["BASE-ONE", "BASE-TWO"] {
        env.model.script(token, vec![Reply::text("Looked.")]);
    }
    let _daemon = env.start().await;

    let (thread, approval) = approved(&env, "first look", "Look BASE-ONE").await;
    assert!(wait_reaction(&env, &approval, "white_check_mark").await);
    let worktree = env.repo_path().join(".codebutler/branches/look-base-one");
    assert!(worktree.join("UPSTREAM.md").is_file(), "not from origin");
    assert!(!worktree.join("LOCAL.md").exists(), "from the local HEAD");
    assert!(
        !env.thread_texts(&thread)
            .iter()
            .any(|t| t.contains("couldn't fetch")),
    );

    // origin goes away: the run starts from the last fetched origin, and says so.
    std::fs::rename(&origin, env.outside.path().join("gone.git")).unwrap();
    let (thread, approval) = approved(&env, "second look", "Look BASE-TWO").await;
    assert!(wait_reaction(&env, &approval, "white_check_mark").await);
    let short_branch = branch.trim_start_matches("refs/heads/");
    let texts = env.thread_texts(&thread);
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("*Coder:* couldn't fetch origin (")
                && t.contains(&format!(
                    "; starting from the last fetched origin/{short_branch} ("
                ))),
        "{texts:?}"
    );
    let worktree = env.repo_path().join(".codebutler/branches/look-base-two");
    assert!(worktree.join("UPSTREAM.md").is_file());
    env.assert_clean();
}

#[tokio::test]
async fn the_disk_limit_refuses_politely_and_the_plan_can_be_approved_again() {
    let env = env_with(json!({"access": {"maxWorktreeDiskMB": 64}})).await;
    env.model.script("DISK-TOKEN", vec![Reply::text("Done.")]);
    let _daemon = env.start().await;
    // Made once the daemon runs: at start it would have been removed as an orphan.
    let old = env.repo_path().join(".codebutler/branches/old-thread");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("build.bin"), vec![7u8; 60 << 20]).unwrap();
    let (thread, _approval) = approved(&env, "fill the disk", "Fill DISK-TOKEN").await;
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_texts(&thread)
                .iter()
                .any(|t| t.contains("approve it again to retry"))
        })
        .await;
    let texts = env.thread_texts(&thread);
    assert!(ok, "{texts:?}");
    let refusal = texts.last().unwrap();
    assert!(
        refusal.starts_with("*PM:* I couldn't start the Coder (the worktrees' disks already take 61 MB of the 64 MB that access.maxWorktreeDiskMB allows, and a new worktree needs at least 17 MB"),
        "{refusal}"
    );
    assert!(refusal.contains("access.maxWorktreeDiskMB"), "{refusal}");
    assert!(
        !env.repo_path()
            .join(".codebutler/branches/fill-disk-token")
            .exists()
    );
    assert!(env.model.requests_for("DISK-TOKEN").is_empty());

    // After clean-up, approving the same plan again works.
    std::fs::remove_dir_all(&old).unwrap();
    let again = approve(&env, &thread);
    assert!(
        wait_reaction(&env, &again, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    assert_eq!(env.model.requests_for("DISK-TOKEN").len(), 1);
    env.assert_clean();
}

/// The runner starts while the worktree is prepared, and gets its task only once the
/// preparation is done: its process and sandbox are up during the init, the model is not
/// called before it ends, and the Coder's first command sees the prepared worktree. (The
/// cold path, preparing ahead off; prepared ahead, see `prepare_ahead.rs`.)
#[tokio::test]
async fn the_runner_starts_during_the_init_and_its_first_step_waits_for_it() {
    let env = env_with(json!({"build": {
        "initCommand": "sleep 3 && echo ready > prepared.txt",
        "prepareAheadIdleMinutes": 0
    }}))
    .await;
    env.model.script(
        "OVERLAP-TOKEN",
        vec![
            Reply::tool_call("Bash", r#"{"command": "cat prepared.txt"}"#),
            Reply::text("Saw the prepared worktree."),
        ],
    );
    let _daemon = env.start().await;
    let (thread, approval) = approved(&env, "overlap the start", "Overlap OVERLAP-TOKEN").await;

    // During the init, the runner's process is already up, but nothing asked the model yet.
    let mut seen_during_init = false;
    let deadline = std::time::Instant::now() + WAIT;
    let preparing = || {
        env.thread_texts(&thread)
            .iter()
            .any(|t| t.contains("preparing the worktree"))
    };
    while std::time::Instant::now() < deadline && !seen_during_init {
        let show = crate::harness::runnerctl(&env, &["show", &thread, "--json"]).await;
        let show: Value =
            serde_json::from_str(&crate::harness::stdout(&show)).unwrap_or(Value::Null);
        let launched =
            show["summary"]["state"] == "running" && show["runnerPid"].as_i64().is_some();
        if launched && preparing() {
            assert!(
                env.model.requests_for("OVERLAP-TOKEN").is_empty(),
                "the model was called before the worktree was prepared"
            );
            seen_during_init = true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        seen_during_init,
        "the runner never started while the worktree was prepared: {:?}",
        env.thread_texts(&thread)
    );

    assert!(
        wait_reaction(&env, &approval, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    let requests = env.model.requests_for("OVERLAP-TOKEN");
    let bash = tool_results(&requests[1].body);
    assert!(
        bash.contains("ready"),
        "the first command ran before the init ended: {bash}"
    );
    let texts = env.thread_texts(&thread);
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("*Coder:* prepared the worktree")),
        "{texts:?}"
    );
}
