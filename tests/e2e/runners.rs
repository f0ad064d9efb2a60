//! Sandboxed Coder runs started and inspected with `runnerctl` against a running controller,
//! with a scripted model: the happy path, each ending, and escape attempts made through the
//! Coder's Bash tool and checked from the host.

use std::path::{Path, PathBuf};

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    Env, OUTSIDE_SECRET, WAIT, runner_bin, runner_env, runnerctl, stdout, tool_results,
    wait_output, worktree_of,
};

/// Starts a run without following it; returns its thread.
async fn start_detached(env: &Env, plan: &str) -> String {
    let path = write_plan(env, plan);
    let out = stdout(
        &runnerctl(
            env,
            &[
                "run",
                "--detach",
                "--json",
                "--plan",
                path.to_str().unwrap(),
            ],
        )
        .await,
    );
    let started: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    started["thread"].as_str().unwrap().to_owned()
}

fn write_plan(env: &Env, text: &str) -> PathBuf {
    let path = env.outside.path().join(format!("plan-{}.md", text.len()));
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn a_run_reads_edits_and_runs_a_command_in_its_worktree() {
    let env = runner_env(json!({"maxTurns": 10, "timeout": 1})).await;
    let plan = "Mark the deploy section PLAN-HAPPY\n\nEdit README.md and check it.";
    env.model.script(
        "PLAN-HAPPY",
        vec![
            Reply::tool_call("Read", r#"{"file_path": "README.md"}"#),
            Reply::tool_call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "## Deploying", "new_string": "## Deploying (reviewed)"})
                    .to_string(),
            ),
            Reply::tool_call("Bash", r#"{"command": "grep -c reviewed README.md && git status --short"}"#),
            Reply::text("Done: marked the section."),
        ],
    );
    let _daemon = env.start().await;
    let plan_file = write_plan(&env, plan);
    let out = runnerctl(&env, &["run", "--plan", plan_file.to_str().unwrap()]).await;
    let text = stdout(&out);
    for expected in [
        "runner 0.1.0 started",
        "turn 1 of 10",
        "→ reading README.md",
        "→ editing README.md",
        "→ running grep -c reviewed README.md && git status --short",
        "✓ Bash",
        "finished (completed): Done: marked the section.",
        "run finished: completed: Done: marked the section.",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // The worktree changed on the host; the main checkout did not.
    let worktree = worktree_of(&env, "mark-the-deploy-section-plan-happy");
    let readme = std::fs::read_to_string(worktree.join("README.md")).unwrap();
    assert!(readme.contains("## Deploying (reviewed)"), "{readme}");
    let main = std::fs::read_to_string(env.repo_path().join("README.md")).unwrap();
    assert!(!main.contains("reviewed"));
    // The command ran inside the worktree, and git works there.
    let requests = env.model.requests_for("PLAN-HAPPY");
    let all = tool_results(&requests[3].body);
    let bash = all.rsplit("\n---\n").next().unwrap();
    assert!(bash.starts_with("1\n M README.md"), "{bash}");
    assert!(bash.contains("exit code: 0"), "{bash}");
    // The model got the Coder's prompt and tools, through the controller's key.
    assert!(
        crate::harness::content_text(&requests[0].body["messages"][0]["content"])
            .starts_with("You are the Coder")
    );
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer sk-or-test-key")
    );
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "Read",
            "Write",
            "Edit",
            "MultiEdit",
            "Bash",
            "Grep",
            "Glob",
            "GitCommit",
            "OpenPR",
            "Notify",
            "WebFetch",
            "ReadMemory",
            "AskUser"
        ]
    );

    // ls / show / logs, text and JSON.
    let ls = stdout(&runnerctl(&env, &["ls"]).await);
    assert!(
        ls.contains("finished") && ls.contains("completed: Done"),
        "{ls}"
    );
    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&runnerctl(&env, &["ls", "--json"]).await)).unwrap();
    let thread = listed[0]["thread"].as_str().unwrap().to_owned();
    assert_eq!(listed[0]["state"], "finished");
    assert_eq!(listed[0]["turns"], 4);
    assert!(listed[0]["promptTokens"].as_u64().unwrap() > 0);
    let show = stdout(&runnerctl(&env, &["show", &thread]).await);
    assert!(
        show.contains("branch:   codebutler/mark-the-deploy-section-plan-happy"),
        "{show}"
    );
    let logs = stdout(&runnerctl(&env, &["logs", &thread, "--json"]).await);
    let events: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["event"], "started");
    assert_eq!(events.last().unwrap()["event"], "finished");
    env.assert_clean();
}

/// Gives the fixture repository a bare `origin` (in `env.outside`) holding its current
/// branch; returns the bare repository and that branch's ref name and commit.
fn bare_origin(env: &Env) -> (git2::Repository, String, git2::Oid) {
    let repo = git2::Repository::open(env.repo_path()).unwrap();
    let id = repo.head().unwrap().target().unwrap();
    let (bare, main) =
        git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    assert_eq!(bare.refname_to_id(&main).unwrap(), id);
    (bare, main, id)
}

#[tokio::test]
async fn a_run_commits_pushes_its_branch_and_opens_a_pull_request() {
    let env = runner_env(json!({"maxTurns": 10, "timeout": 1})).await;
    let (bare, main, main_id) = bare_origin(&env);
    let plan = "Mark the deploy section PLAN-PR\n\nEdit README.md, commit and open a PR.";
    env.model.script(
        "PLAN-PR",
        vec![
            Reply::tool_call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "## Deploying", "new_string": "## Deploying (reviewed)"})
                    .to_string(),
            ),
            Reply::tool_call(
                "GitCommit",
                json!({"message": "Mark the deploy section\n\nReviewed by the Coder."}).to_string(),
            ),
            Reply::tool_call(
                "OpenPR",
                json!({"title": "Mark the deploy section", "body": "Marks the deploy section as reviewed. BODY-MARK"})
                    .to_string(),
            ),
            Reply::text("Opened the pull request."),
        ],
    );
    let _daemon = env.start().await;
    let plan_file = write_plan(&env, plan);
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan_file.to_str().unwrap()]).await);
    assert!(
        out.contains("run finished: completed: Opened the pull request."),
        "{out}"
    );

    // The branch reached origin with the Coder's commit; main did not move.
    let branch = "codebutler/mark-the-deploy-section-plan-pr";
    let pushed = bare
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    assert_eq!(
        pushed.message().ok(),
        Some("Mark the deploy section\n\nReviewed by the Coder.")
    );
    assert_eq!(pushed.author().name().ok(), Some("CodeButler"));
    assert_eq!(pushed.author().email().ok(), Some("codebutler@localhost"));
    assert_eq!(pushed.parent_ids().collect::<Vec<_>>(), [main_id]);
    let readme = pushed
        .tree()
        .unwrap()
        .get_path(Path::new("README.md"))
        .unwrap()
        .to_object(&bare)
        .unwrap()
        .peel_to_blob()
        .unwrap();
    assert!(
        String::from_utf8_lossy(readme.content()).contains("## Deploying (reviewed)"),
        "the commit holds the edit"
    );
    assert_eq!(bare.refname_to_id(&main).unwrap(), main_id);
    let repo = git2::Repository::open(env.repo_path()).unwrap();
    assert_eq!(repo.refname_to_id(&main).unwrap(), main_id);

    // gh was asked for the PR with fixed arguments; the body is the model's, in the layout.
    let log = codebutler_test_support::gh::gh_log(env.outside.path());
    assert!(
        log.iter().any(|l| l
            == &format!("pr create --head {branch} --title Mark the deploy section --body-file -")),
        "{log:?}"
    );
    let body = codebutler_test_support::gh::gh_pr_body(env.outside.path()).unwrap();
    assert!(
        body.starts_with("## Summary\n\nMarks the deploy section as reviewed. BODY-MARK\n"),
        "{body}"
    );
    assert!(body.contains("- Mark the deploy section\n"), "{body}");
    assert!(
        !body.contains("slack.com"),
        "runnerctl runs have no thread: {body}"
    );

    // The model saw the commit and the PR's address.
    let requests = env.model.requests_for("PLAN-PR");
    let results = tool_results(&requests[3].body);
    assert!(
        results.contains("committed ") && results.contains(": 1 file (README.md)"),
        "{results}"
    );
    assert!(
        results.contains("opened pull request #7: https://github.com/acme/app/pull/7"),
        "{results}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn max_turns_and_timeout_end_runs_as_such() {
    let env = runner_env(json!({"maxTurns": 2, "timeout": 0.05})).await;
    env.model.script(
        "PLAN-TURNS",
        vec![
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
        ],
    );
    env.model.script(
        "PLAN-SLOW",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 30"}"#),
            Reply::text("never"),
        ],
    );
    let _daemon = env.start().await;
    let out = stdout(
        &runnerctl(
            &env,
            &[
                "run",
                "--plan",
                write_plan(&env, "PLAN-TURNS").to_str().unwrap(),
            ],
        )
        .await,
    );
    assert!(out.contains("finished (max turns)"), "{out}");
    assert!(
        out.contains("run finished: stopped at the turn limit"),
        "{out}"
    );
    assert_eq!(env.model.requests_for("PLAN-TURNS").len(), 2);

    let out = stdout(
        &runnerctl(
            &env,
            &[
                "run",
                "--plan",
                write_plan(&env, "PLAN-SLOW, a slower plan")
                    .to_str()
                    .unwrap(),
            ],
        )
        .await,
    );
    assert!(out.contains("finished (timeout)"), "{out}");
    assert!(
        out.contains("run finished: stopped at the time limit"),
        "{out}"
    );
}

#[tokio::test]
async fn cancel_stops_a_running_command() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 5})).await;
    env.model.script(
        "PLAN-CANCEL",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
            Reply::text("never"),
        ],
    );
    let _daemon = env.start().await;
    let plan = write_plan(&env, "PLAN-CANCEL");
    let started = stdout(
        &runnerctl(
            &env,
            &[
                "run",
                "--detach",
                "--json",
                "--plan",
                plan.to_str().unwrap(),
            ],
        )
        .await,
    );
    let started: serde_json::Value = serde_json::from_str(started.trim()).unwrap();
    let thread = started["thread"].as_str().unwrap().to_owned();
    wait_output(&env, &["logs", &thread], "→ running sleep 300").await;
    let cancel = runnerctl(&env, &["cancel", &thread]).await;
    assert!(
        stdout(&cancel).contains("cancelling the run"),
        "{}",
        stdout(&cancel)
    );
    wait_output(&env, &["show", &thread], "state:    cancelled").await;
    let logs = stdout(&runnerctl(&env, &["logs", &thread]).await);
    assert!(logs.contains("finished (cancelled)"), "{logs}");
    // No model call after the cancel.
    assert_eq!(env.model.requests_for("PLAN-CANCEL").len(), 1);
}

#[tokio::test]
async fn escape_attempts_through_the_bash_tool_fail() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    let passwd_before = std::fs::read_to_string("/etc/passwd").unwrap();
    let home = env.home.path().display().to_string();
    let repo = env.repo_path().display().to_string();
    let daemon = env.start().await;
    let pid = daemon.pid();
    let commands = [
        // Secrets: the global config, the repository's config, the environment.
        format!("cat {home}/config.json; cat {repo}/.codebutler/config.json; env; cat /proc/1/environ | tr '\\0' '\\n'"),
        // Writes outside the worktree.
        format!("echo pwned > {repo}/README.md; echo pwned > {home}/planted; echo x >> /etc/passwd; echo done"),
        // The network: the host's loopback.
        format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED || echo refused"),
        // The hub: no socket of the runner is reachable from a command.
        "ls -l /proc/[0-9]*/fd 2>&1 | grep -c socket; echo end".to_owned(),
        // Git hooks and config the host's git would run.
        "git config core.hooksPath /tmp/hooks; echo x > $(git rev-parse --git-common-dir)/hooks/post-checkout; echo attempted".to_owned(),
        // The controller's process: its environment and a signal.
        format!("cat /proc/{pid}/environ; kill -TERM {pid} && echo SIGNALLED; echo end"),
        // A memory hog.
        "head -c 8G /dev/zero | tail >/dev/null && echo ALLOCATED || echo contained".to_owned(),
    ];
    let calls: Vec<(String, String)> = commands
        .iter()
        .map(|c| ("Bash".to_owned(), json!({"command": c}).to_string()))
        .collect();
    env.model.script(
        "PLAN-ESCAPE",
        vec![Reply::ToolCalls(calls), Reply::text("tried")],
    );
    let plan = write_plan(&env, "PLAN-ESCAPE");
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await);
    assert!(out.contains("run finished: completed: tried"), "{out}");
    let results = tool_results(&env.model.requests_for("PLAN-ESCAPE")[1].body);
    let parts: Vec<&str> = results.split("\n---\n").collect();
    assert_eq!(parts.len(), 7, "{results}");
    for secret in ["xoxb-", "xapp-", "sk-or-", OUTSIDE_SECRET] {
        assert!(!results.contains(secret), "{secret} visible in:\n{results}");
    }
    assert!(!parts[2].contains("CONNECTED"), "{}", parts[2]);
    assert!(parts[3].starts_with("0\nend"), "{}", parts[3]);
    assert!(!parts[5].contains("SIGNALLED\n"), "{}", parts[5]);
    assert!(parts[6].contains("contained"), "{}", parts[6]);
    // The controller is unharmed and still answers Slack.
    env.model.script("alive?", vec![Reply::text("alive")]);
    let asked = env.say("alive?");
    assert_eq!(
        env.wait_thread_posts(&asked, 1).await[0].text,
        "*PM:* alive"
    );
    drop(daemon);
    // Checked from the host: nothing outside the worktree changed.
    let readme = std::fs::read_to_string(env.repo_path().join("README.md")).unwrap();
    assert!(!readme.contains("pwned"));
    assert!(!env.home.path().join("planted").exists());
    assert_eq!(
        std::fs::read_to_string("/etc/passwd").unwrap(),
        passwd_before
    );
    let git_config = std::fs::read_to_string(env.repo_path().join(".git/config")).unwrap();
    assert!(!git_config.contains("hooksPath"), "{git_config}");
    assert!(!env.repo_path().join(".git/hooks/post-checkout").exists());
}

#[tokio::test]
async fn runnerctl_without_a_controller_says_so() {
    let env = Env::new().await;
    let out = runnerctl(&env, &["ls"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot reach the controller at"),
        "{stderr}"
    );
    assert!(stderr.contains("is `codebutler` running"), "{stderr}");
}

#[tokio::test]
async fn a_failed_sandbox_step_is_reported_and_the_model_is_never_called() {
    // A read-only path that is there at the start (the start's check enters the sandbox)
    // and gone by the run.
    let toolchain = tempfile::tempdir().unwrap();
    let env = Env::with_config(json!({
        "sandbox": {
            "runnerPath": runner_bin().display().to_string(),
            "readOnly": [toolchain.path().display().to_string()]
        }
    }))
    .await;
    env.model
        .script("PLAN-NOSANDBOX", vec![Reply::text("must not be asked")]);
    let _daemon = env.start().await;
    drop(toolchain);
    let plan = write_plan(&env, "PLAN-NOSANDBOX");
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await);
    assert!(
        out.contains("failed at step sandbox: sandbox step `"),
        "{out}"
    );
    assert!(out.contains("run failed: sandbox failed:"), "{out}");
    assert!(
        env.model.requests().is_empty(),
        "the model was called without a sandbox"
    );
}

#[tokio::test]
async fn runs_beyond_the_concurrency_cap_wait_in_a_queue() {
    let env = Env::with_config(json!({
        "coder": {"maxTurns": 5, "timeout": 5},
        "access": {"maxConcurrentThreads": 1},
        "sandbox": {"runnerPath": runner_bin().display().to_string()}
    }))
    .await;
    env.model.script(
        "PLAN-FIRST",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
            Reply::text("never"),
        ],
    );
    env.model
        .script("PLAN-SECOND", vec![Reply::text("second done")]);
    let _daemon = env.start().await;
    let first = start_detached(&env, "PLAN-FIRST").await;
    wait_output(&env, &["logs", &first], "→ running sleep 300").await;
    let second = start_detached(&env, "PLAN-SECOND, the queued one").await;
    let listed = wait_output(&env, &["ls", "--active"], "queued").await;
    assert!(
        listed.contains(&second) && listed.contains("running"),
        "{listed}"
    );
    assert!(
        env.model.requests_for("PLAN-SECOND").is_empty(),
        "the queued run started"
    );
    runnerctl(&env, &["cancel", &first]).await;
    let shown = wait_output(&env, &["show", &second], "state:    finished").await;
    assert!(
        shown.contains("ending:   completed: second done"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_fork_bomb_is_contained_while_the_daemon_keeps_answering() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 5})).await;
    env.model.script(
        "PLAN-BOMB",
        vec![
            Reply::tool_call("Bash", r#"{"command": ":(){ :|:& };:", "timeout": 8}"#),
            Reply::text("bombed"),
        ],
    );
    env.model
        .script("still answering?", vec![Reply::text("yes, still here")]);
    let _daemon = env.start().await;
    let plan = write_plan(&env, "PLAN-BOMB");
    let out = runnerctl(
        &env,
        &[
            "run",
            "--detach",
            "--json",
            "--plan",
            plan.to_str().unwrap(),
        ],
    )
    .await;
    let thread = serde_json::from_str::<serde_json::Value>(stdout(&out).trim()).unwrap()["thread"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_output(&env, &["logs", &thread], "→ running :(){ :|:& };:").await;
    // While the bomb goes off in the sandbox, the daemon answers Slack.
    let asked = env.say("still answering?");
    let posts = env.wait_thread_posts(&asked, 1).await;
    assert_eq!(posts[0].text, "*PM:* yes, still here");
    let shown = wait_output(&env, &["show", &thread], "state:    finished").await;
    assert!(shown.contains("completed: bombed"), "{shown}");
    // The host can still start processes.
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test]
async fn the_controller_refuses_calls_beyond_the_hourly_limit_and_the_run_says_why() {
    let env = Env::with_config(json!({
        "coder": {"maxTurns": 5, "timeout": 2},
        "access": {"maxClaudeCallsPerHour": 1},
        "sandbox": {"runnerPath": runner_bin().display().to_string()}
    }))
    .await;
    env.model.script(
        "PLAN-BUDGET",
        vec![
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
            Reply::text("never"),
        ],
    );
    let _daemon = env.start().await;
    let plan = write_plan(&env, "PLAN-BUDGET");
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await);
    assert!(out.contains("usage: "), "usage events are reported: {out}");
    assert!(
        out.contains("failed at step model: the controller refused the model call: the limit of 1 Coder model calls per hour"),
        "{out}"
    );
    assert_eq!(env.model.requests_for("PLAN-BUDGET").len(), 1);
}

/// A PM plan, approved in the thread, becomes a Coder run whose progress and outcome show in
/// the thread.
#[tokio::test]
async fn an_approved_plan_starts_the_coder_and_the_thread_follows_it() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    let plan = json!({
        "summary": "Mark the deploy section CODER-TOKEN",
        "steps": ["Edit README.md"],
        "files": ["README.md"]
    });
    env.model.script(
        "please mark the deploy section",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Here is the plan. Approve it to start."),
            Reply::text("Tell me what to change."),
        ],
    );
    env.model.script(
        "CODER-TOKEN",
        vec![
            Reply::tool_call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "## Deploying", "new_string": "## Deploying (marked)"})
                    .to_string(),
            ),
            Reply::text("Marked the deploy section in README.md."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("please mark the deploy section");
    env.wait_thread_posts(&thread, 1).await;

    // "yes but …" is not an approval: it goes back to the PM.
    env.slack.user_message(
        codebutler_test_support::slack::CHANNEL,
        crate::harness::USER,
        "yes but use a shorter word",
        Some(&thread),
    );
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(posts[1].text, "*PM:* Tell me what to change.");
    assert!(env.model.requests_for("CODER-TOKEN").is_empty());

    // A plain approval starts the run.
    let approval = env.reply(&thread, "LGTM!");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "no ✅ on the approval; posts: {:?}",
        env.thread_posts(&thread)
    );
    let posts = env.thread_posts(&thread);
    assert!(
        posts[2].text.starts_with("*Coder:* working on _Mark the deploy section CODER-TOKEN_ in `codebutler/mark-the-deploy-section-coder-token`"),
        "{}",
        posts[2].text
    );
    assert_eq!(
        posts.last().unwrap().text,
        "*Coder:* Marked the deploy section in README.md."
    );
    let updates = env.slack.updates();
    let final_status = &updates.last().unwrap().text;
    assert!(
        final_status.starts_with("*Coder:* finished _Mark the deploy section CODER-TOKEN_"),
        "{final_status}"
    );
    assert!(final_status.contains("2 turns"), "{final_status}");
    let names: Vec<String> = env
        .slack
        .reactions()
        .into_iter()
        .filter(|r| r.ts == approval.ts)
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["eyes", "white_check_mark"]);
    let readme = std::fs::read_to_string(
        worktree_of(&env, "mark-the-deploy-section-coder-token").join("README.md"),
    )
    .unwrap();
    assert!(readme.contains("## Deploying (marked)"), "{readme}");
    // The Coder was given the approved plan.
    let first = &env.model.requests_for("CODER-TOKEN")[0].body;
    let task = crate::harness::content_text(&first["messages"][1]["content"]);
    assert!(
        task.contains("📋 **Plan:** Mark the deploy section CODER-TOKEN"),
        "{task}"
    );

    // A second approval starts nothing: the plan was used.
    env.slack.user_message(
        codebutler_test_support::slack::CHANNEL,
        crate::harness::USER,
        "yes",
        Some(&thread),
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(env.model.requests_for("CODER-TOKEN").len(), 2);
    let runs = stdout(&runnerctl(&env, &["ls", "--json"]).await);
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
}

/// Messages in the thread reach the running Coder before its next turn; "stop" stops it.
#[tokio::test]
async fn thread_messages_reach_the_running_coder_and_stop_stops_it() {
    let env = runner_env(json!({"maxTurns": 8, "timeout": 2})).await;
    let plan = |token: &str| {
        json!({"summary": format!("Work on {token}"), "steps": ["Do it"], "files": ["README.md"]})
            .to_string()
    };
    for (ask, token) in [("first job", "JOB-ONE"), ("second job", "JOB-TWO")] {
        env.model.script(
            ask,
            vec![
                Reply::tool_call("ProposePlan", plan(token)),
                Reply::text("Plan ready."),
            ],
        );
    }
    env.model.script(
        "JOB-ONE",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 2"}"#),
            Reply::text("Used tabs as asked."),
        ],
    );
    env.model.script(
        "JOB-TWO",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
            Reply::text("never"),
        ],
    );
    let _daemon = env.start().await;
    let channel = codebutler_test_support::slack::CHANNEL;
    let user = crate::harness::USER;

    let one = env.say("first job");
    env.wait_thread_posts(&one, 1).await;
    env.slack.user_message(channel, user, "go", Some(&one));
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for("JOB-ONE").len() == 1)
            .await
    );
    let note = env
        .slack
        .user_message(channel, user, "use tabs please", Some(&one));
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(&one)
                .iter()
                .any(|p| p.text == "*Coder:* Used tabs as asked.")
        })
        .await;
    assert!(ok, "{:?}", env.thread_posts(&one));
    let second_call = &env.model.requests_for("JOB-ONE")[1].body;
    let users: Vec<String> = crate::harness::user_messages(second_call);
    assert_eq!(
        users.last().unwrap(),
        "<@U0ALICE>: use tabs please",
        "{users:?}"
    );
    assert!(
        env.slack
            .reactions()
            .iter()
            .any(|r| r.ts == note.ts && r.name == "incoming_envelope")
    );

    let two = env.say("second job");
    env.wait_thread_posts(&two, 1).await;
    let approval = env.slack.user_message(channel, user, "dale", Some(&two));
    wait_output(&env, &["logs", &two], "→ running sleep 300").await;
    env.slack.user_message(channel, user, "stop", Some(&two));
    assert!(
        env.wait_reaction(&approval.ts, "x").await,
        "{:?}",
        env.thread_posts(&two)
    );
    let last = env.thread_posts(&two).last().unwrap().text.clone();
    assert!(
        last.starts_with("*Coder:* cancelled: stopped in Slack by <@U0ALICE>"),
        "{last}"
    );
    assert_eq!(env.model.requests_for("JOB-TWO").len(), 1);
}

#[tokio::test]
async fn a_long_run_is_compacted_under_the_configured_context_window() {
    let env = runner_env(json!({"maxTurns": 10, "timeout": 2, "contextWindow": 1000})).await;
    let big = r#"{"command": "head -c 3000 /dev/zero | tr '\\0' x"}"#;
    env.model.script(
        "PLAN-LONG",
        vec![
            Reply::tool_call("Bash", big),
            // The summary call (no tools offered), then the next turn.
            Reply::text("Printed x once; nothing else to do."),
            Reply::text("Finished after compaction."),
        ],
    );
    let _daemon = env.start().await;
    let plan = write_plan(&env, "PLAN-LONG");
    let out = stdout(&runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await);
    assert!(
        out.contains("run finished: completed: Finished after compaction."),
        "{out}"
    );
    assert!(out.contains("coder: (compacted the conversation"), "{out}");
    let requests = env.model.requests_for("PLAN-LONG");
    let summary_call = requests
        .iter()
        .position(|r| r.body.get("tools").is_none())
        .expect("a summary call without tools");
    let after = &requests[summary_call + 1].body;
    let users = crate::harness::user_messages(after);
    assert!(
        users[0].contains("PLAN-LONG"),
        "the plan is kept: {users:?}"
    );
    assert!(
        users[1].starts_with("Summary of the work so far"),
        "{users:?}"
    );
    assert!(users[1].contains("Printed x once"), "{users:?}");
    assert_eq!(after["messages"].as_array().unwrap().len(), 3, "{after}");
}

/// The product's main flow from Slack: question → plan → typed approval → the Coder edits,
/// runs a command, commits and opens a pull request whose body links the thread → the PR
/// link in the thread.
#[tokio::test]
async fn from_a_slack_thread_to_a_pull_request() {
    let env = runner_env(json!({"maxTurns": 8, "timeout": 2})).await;
    let (bare, _main, main_id) = bare_origin(&env);
    let plan = json!({
        "summary": "Mark the deploy section FLOW-TOKEN",
        "steps": ["Edit README.md", "Commit", "Open a pull request"],
        "files": ["README.md"]
    });
    env.model.script(
        "mark the deploy section, then open a PR",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready; approve it."),
        ],
    );
    env.model.script(
        "FLOW-TOKEN",
        vec![
            Reply::tool_call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "## Deploying", "new_string": "## Deploying (marked)"})
                    .to_string(),
            ),
            Reply::tool_call("Bash", r#"{"command": "grep -c marked README.md"}"#),
            Reply::tool_call("Notify", r#"{"message": "README **edited**; committing now."}"#),
            Reply::tool_call("GitCommit", r#"{"message": "Mark the deploy section"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Mark the deploy section", "body": "Marks it. FLOW-BODY"}"#),
            Reply::text("Done: the PR is open."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("mark the deploy section, then open a PR");
    env.wait_thread_posts(&thread, 1).await;
    let approval = env.reply(&thread, "ship it");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.thread_posts(&thread)
    );
    let posts = env.post_texts(&thread);
    assert!(
        posts.contains(
            &"*Coder:* opened a pull request: https://github.com/acme/app/pull/7".to_owned()
        ),
        "{posts:?}"
    );
    assert_eq!(
        posts.last().unwrap(),
        &format!(
            "*Coder:* Done: the PR is open.\n\n{}",
            crate::harness::pushed_line(
                &env.outside.path().join("origin.git"),
                "codebutler/mark-the-deploy-section-flow-token",
                &main_id.to_string(),
                &["README.md"],
                7
            )
        )
    );
    assert!(
        posts.contains(&"*Coder:* README *edited*; committing now.".to_owned()),
        "{posts:?}"
    );
    let branch = "codebutler/mark-the-deploy-section-flow-token";
    assert!(bare.find_reference(&format!("refs/heads/{branch}")).is_ok());
    let body = codebutler_test_support::gh::gh_pr_body(env.outside.path()).unwrap();
    assert!(body.contains("FLOW-BODY"), "{body}");
    let link = format!(
        "https://slack.com/archives/{}/p{}",
        codebutler_test_support::slack::CHANNEL,
        thread.replace('.', "")
    );
    assert!(body.contains(&link), "no thread link {link} in:\n{body}");
}
