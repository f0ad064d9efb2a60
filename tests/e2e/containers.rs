//! Coder runs through the container launcher (`runner.launcher: "container"`): real Podman,
//! the image `deploy/build-runner-image.sh` builds from this build's runner, the real
//! sandbox inside. A plan approved in Slack becomes a pull request, and the escape
//! battery's key attempts fail, every outcome checked from the host.
//!
//! A machine that cannot run these (no Podman) fails them with the reason: there is no
//! silent skip. The image is built once per runner binary (its tag is the binary's hash)
//! and reused by every test process after the first.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{
    Env, OUTSIDE_SECRET, WAIT, runner_bin, runnerctl, stdout, tool_results, worktree_of,
};

/// The image's repository; the tag is the hash of what went into it.
const TEST_IMAGE: &str = "localhost/codebutler-runner-test";

/// The runner image of this build, built on first use (under a lock, so concurrent test
/// processes build it once).
fn runner_image() -> String {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(build_runner_image).clone()
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn build_runner_image() -> String {
    match Command::new("podman").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "CONTAINER TESTS CANNOT RUN ON THIS MACHINE: `podman --version` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "CONTAINER TESTS CANNOT RUN ON THIS MACHINE: podman is not installed ({e}); \
             install it with `apt-get install -y podman runc` (.ci/run does)"
        ),
    }
    let bin = runner_bin();
    let script = deploy_dir().join("build-runner-image.sh");
    let mut hasher = DefaultHasher::new();
    for file in [
        bin.clone(),
        script.clone(),
        deploy_dir().join("runner.Containerfile"),
    ] {
        std::fs::read(&file).unwrap().hash(&mut hasher);
    }
    let image = format!("{TEST_IMAGE}:{:016x}", hasher.finish());
    // Build unless present, then remove this test image's older tags (not forced: one in
    // use by a running container stays).
    let started = Instant::now();
    let out = Command::new("flock")
        .arg(std::env::temp_dir().join("codebutler-runner-test-image.lock"))
        .args([
            "sh",
            "-c",
            r#"podman image exists "$1" || "$2" "$3" "$1" >/dev/null || exit 1
               podman images --format '{{.Repository}}:{{.Tag}}' "$4" | grep -vxF "$1" |
                 while read -r old; do podman rmi "$old" >/dev/null 2>&1 || true; done"#,
            "build",
        ])
        .arg(&image)
        .arg(&script)
        .arg(&bin)
        .arg(TEST_IMAGE)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "CONTAINER TESTS CANNOT RUN: building the runner image failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "runner image {image} ready in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    image
}

/// An env whose controller runs the Coder in a container of this build's image, with
/// `config` merged over that into the repository's config. No runtime is configured: the
/// launcher finds one that starts containers on this host.
async fn container_env(config: Value) -> Env {
    let image = runner_image();
    let mut base = json!({
        "runner": {"launcher": "container", "container": {"image": image}}
    });
    codebutler_test_support::merge(&mut base, config);
    Env::with_runner(base).await
}

/// The names of the containers (running or not) started for `worktree`.
async fn containers_of(worktree: &Path) -> Vec<String> {
    let out = tokio::process::Command::new("podman")
        .args(["ps", "--all", "--format", "{{.Names}}", "--filter"])
        .arg(format!("label=codebutler.worktree={}", worktree.display()))
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn bash(command: &str) -> Reply {
    Reply::tool_call("Bash", json!({ "command": command }).to_string())
}

#[tokio::test]
async fn from_a_slack_thread_to_a_pull_request_in_a_container() {
    let env = container_env(json!({"coder": {"maxTurns": 8, "timeout": 2}})).await;
    let (bare, _main) =
        git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    let plan = json!({
        "summary": "Mark the deploy section BOXED-TOKEN",
        "steps": ["Edit README.md", "Commit", "Open a pull request"],
        "files": ["README.md"]
    });
    env.model.script(
        "mark the deploy section in a box",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready; approve it."),
        ],
    );
    env.model.script(
        "BOXED-TOKEN",
        vec![
            Reply::tool_call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "## Deploying", "new_string": "## Deploying (boxed)"})
                    .to_string(),
            ),
            // Long enough for the host to see the container at work.
            bash("cat /etc/codebutler-runner-image; grep -c boxed README.md; sleep 3"),
            Reply::tool_call("GitCommit", r#"{"message": "Mark the deploy section"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Mark the deploy section", "body": "Marks it. BOXED-BODY"}"#),
            Reply::text("Done: the PR is open."),
        ],
    );
    let daemon = env.start().await;
    let thread = env.say("mark the deploy section in a box");
    env.wait_thread_posts(&thread, 1).await;
    let approval = env.reply(&thread, "ship it");

    // From the host: the run is a container of the image, on this thread's worktree.
    let worktree = worktree_of(&env, "mark-the-deploy-section-boxed-token");
    let deadline = Instant::now() + WAIT;
    let seen = loop {
        let names = containers_of(&worktree).await;
        if !names.is_empty() || Instant::now() > deadline {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(seen.len(), 1, "{seen:?}; log:\n{}", daemon.log());
    assert!(seen[0].starts_with("codebutler-run-"), "{seen:?}");

    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}\nlog:\n{}",
        env.thread_posts(&thread),
        daemon.log()
    );
    let posts = env.post_texts(&thread);
    assert!(
        posts.contains(
            &"*Coder:* opened a pull request: https://github.com/acme/app/pull/7".to_owned()
        ),
        "{posts:?}"
    );
    let origin = env.outside.path().join("origin.git");
    let base = git::git(&origin, &["rev-parse", "HEAD"]);
    assert_eq!(
        posts.last().unwrap(),
        &format!(
            "*Coder:* Done: the PR is open.\n\n{}",
            crate::harness::pushed_line(
                &origin,
                "codebutler/mark-the-deploy-section-boxed-token",
                &base,
                &["README.md"],
                7
            )
        )
    );
    // The command ran in the image (its marker file; the host has none) on the worktree.
    let results = tool_results(&env.model.requests_for("BOXED-TOKEN")[2].body);
    assert!(
        results.contains("codebutler-runner ") && results.contains("\n1\n"),
        "{results}"
    );
    assert!(!Path::new("/etc/codebutler-runner-image").exists());
    // The branch reached origin with the edit; the PR body is the model's.
    let branch = "codebutler/mark-the-deploy-section-boxed-token";
    let pushed = bare
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let readme = pushed
        .tree()
        .unwrap()
        .get_path(Path::new("README.md"))
        .unwrap()
        .to_object(&bare)
        .unwrap()
        .peel_to_blob()
        .unwrap();
    assert!(String::from_utf8_lossy(readme.content()).contains("## Deploying (boxed)"));
    let body = codebutler_test_support::gh::gh_pr_body(env.outside.path()).unwrap();
    assert!(body.contains("BOXED-BODY"), "{body}");
    // Nothing of the run is left: the container is gone.
    assert_eq!(containers_of(&worktree).await, Vec::<String>::new());
    env.assert_clean();
}

/// A log shared in the thread is read-only at `.codebutler-attachments/` in the worktree of
/// a run in a container too: the Coder reads it there and cannot change it.
#[tokio::test]
async fn a_shared_log_is_read_only_in_the_worktree_of_a_run_in_a_container() {
    const LOG: &str = "ERROR db: connection refused (port 5433)\n";
    let env = container_env(json!({"coder": {"maxTurns": 6, "timeout": 2}})).await;
    let plan = json!({"summary": "Work on BOXED-LOG", "steps": ["Read the log"], "files": []});
    env.model.script(
        "why does the boxed api crash",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready."),
        ],
    );
    env.model.script(
        "Work on BOXED-LOG",
        vec![
            bash(
                "cat .codebutler-attachments/*.txt; \
                 echo tampered >> .codebutler-attachments/*.txt || echo APPEND-REFUSED",
            ),
            Reply::text("The port is wrong."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env
        .slack
        .user_message_with_files(
            codebutler_test_support::slack::CHANNEL,
            crate::harness::USER,
            "why does the boxed api crash?",
            None,
            &[codebutler_test_support::slack::SharedFile::new(
                "api.log",
                "text/plain",
                LOG,
            )],
        )
        .ts;
    env.wait_thread_posts(&thread, 1).await;
    let approval = env.reply(&thread, "yes");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.post_texts(&thread)
    );
    let results = tool_results(&env.model.requests_for("Work on BOXED-LOG")[1].body);
    assert!(results.contains(LOG.trim_end()), "{results}");
    assert!(results.contains("APPEND-REFUSED"), "{results}");
    env.assert_clean();
}

/// Runs `plan` with `runnerctl run` to its end; returns its output.
async fn run_plan(env: &Env, plan: &str) -> String {
    let path = env
        .outside
        .path()
        .join(format!("plan-{}.md", plan.len() % 1000));
    std::fs::write(&path, plan).unwrap();
    stdout(&runnerctl(env, &["run", "--plan", path.to_str().unwrap()]).await)
}

/// The names in this process's working directory.
fn cwd_entries() -> std::collections::BTreeSet<std::ffi::OsString> {
    std::fs::read_dir(".")
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

/// An address of this host other than loopback, when it has one (a container without its
/// own network would reach the host there).
fn host_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn escape_attempts_from_a_container_fail() {
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let env = container_env(json!({"coder": {"maxTurns": 5, "timeout": 2}})).await;
    let passwd_before = std::fs::read_to_string("/etc/passwd").unwrap();
    let home = env.home.path().display().to_string();
    let repo = env.repo_path().display().to_string();
    let outside = env.outside.path().display().to_string();
    // The daemon's working directory is the test's: nothing may appear there (the
    // engine's monitor writes `oom` into its own working directory after an OOM kill).
    let cwd_before = cwd_entries();
    let daemon = env.start().await;

    // Another thread's run leaves a private file, committed, in its worktree.
    env.model.script(
        "PLAN-OTHER",
        vec![
            crate::harness::write("private.txt", "OTHER-THREAD-PRIVATE-5521\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Private"}"#),
            Reply::text("kept"),
        ],
    );
    let out = run_plan(&env, "PLAN-OTHER\n\nKeep a private file.").await;
    assert!(out.contains("run finished: completed: kept"), "{out}");
    let other = worktree_of(&env, "plan-other");
    let other_s = other.display().to_string();
    assert!(other.join("private.txt").is_file(), "{}", other.display());

    let addresses: Vec<String> = std::iter::once("127.0.0.1".to_owned())
        .chain(host_address().map(|ip| ip.to_string()))
        .collect();
    let network = addresses
        .iter()
        .map(|ip| {
            format!("(exec 3<>/dev/tcp/{ip}/{port} && echo CONNECTED {ip}) 2>/dev/null || echo refused {ip}")
        })
        .collect::<Vec<_>>()
        .join("; ");
    let commands = [
        // Secrets: the global config, the repository's config, a file outside, the
        // environment of the runner and of PID 1.
        format!(
            "cat {home}/config.json; cat {repo}/.codebutler/config.json; cat {outside}/secret.txt; \
             env; cat /proc/1/environ | tr '\\0' '\\n'; echo end"
        ),
        // Writes outside the worktree: the repository, the global config's directory, the
        // system, the other thread's worktree.
        format!(
            "echo pwned > {repo}/README.md; echo pwned > {home}/planted; echo x >> /etc/passwd; \
             echo pwned > {other_s}/planted; echo done"
        ),
        // The other thread's files and history, by path and by search.
        format!(
            "cat {other_s}/private.txt; ls {other_s}; \
             git cat-file --batch-all-objects --batch | grep -c OTHER-THREAD-PRIVATE; \
             grep -rl --exclude-dir=proc --exclude-dir=dev OTHER-THREAD-PRIVATE / 2>/dev/null; echo end"
        ),
        // The network: the host's loopback and its own address.
        network,
        // The hub: no socket of the runner is reachable from a command.
        "ls -l /proc/[0-9]*/fd 2>&1 | grep -c socket; echo end".to_owned(),
        // A memory hog.
        "head -c 8G /dev/zero | tail >/dev/null && echo ALLOCATED || echo contained".to_owned(),
    ];
    let calls: Vec<(String, String)> = commands
        .iter()
        .map(|c| ("Bash".to_owned(), json!({"command": c}).to_string()))
        .collect();
    env.model.script(
        "PLAN-BOXED-ESCAPE",
        vec![Reply::ToolCalls(calls), Reply::text("tried")],
    );
    let out = run_plan(&env, "PLAN-BOXED-ESCAPE").await;
    assert!(
        out.contains("run finished: completed: tried"),
        "{out}\nlog:\n{}",
        daemon.log()
    );
    let results = tool_results(&env.model.requests_for("PLAN-BOXED-ESCAPE")[1].body);
    let parts: Vec<&str> = results.split("\n---\n").collect();
    assert_eq!(parts.len(), commands.len(), "{results}");
    for secret in ["xoxb-", "xapp-", "sk-or-", OUTSIDE_SECRET] {
        assert!(!results.contains(secret), "{secret} visible in:\n{results}");
    }
    assert!(
        !results.contains("OTHER-THREAD-PRIVATE-5521"),
        "the other thread's file is visible:\n{}",
        parts[2]
    );
    assert!(
        parts[2].starts_with("cat: ") && parts[2].contains("\n0\n"),
        "{}",
        parts[2]
    );
    assert!(!parts[3].contains("CONNECTED"), "{}", parts[3]);
    assert!(parts[4].starts_with("0\nend"), "{}", parts[4]);
    assert!(parts[5].contains("contained"), "{}", parts[5]);

    // Checked from the host: nothing outside the worktree changed, nobody connected, no
    // container is left.
    drop(daemon);
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("a connection reached the host: {other:?}"),
    }
    let readme = std::fs::read_to_string(env.repo_path().join("README.md")).unwrap();
    assert!(!readme.contains("pwned"));
    assert!(!env.home.path().join("planted").exists());
    assert!(!other.join("planted").exists());
    assert_eq!(
        std::fs::read_to_string(other.join("private.txt")).unwrap(),
        "OTHER-THREAD-PRIVATE-5521\n"
    );
    assert_eq!(
        std::fs::read_to_string("/etc/passwd").unwrap(),
        passwd_before
    );
    assert_eq!(
        cwd_entries(),
        cwd_before,
        "files appeared in the daemon's directory"
    );
    let escape_tree = worktree_of(&env, "plan-boxed-escape");
    assert_eq!(containers_of(&escape_tree).await, Vec::<String>::new());
    assert_eq!(containers_of(&other).await, Vec::<String>::new());
}

#[tokio::test]
async fn killing_a_runner_removes_its_container() {
    use codebutler_controller::config::ContainerConfig;
    use codebutler_controller::runners::launcher::{LaunchRequest, Launcher};
    let image = runner_image();
    let dir = tempfile::tempdir().unwrap();
    let worktree = dir.path().join("worktree");
    std::fs::create_dir(&worktree).unwrap();
    git::init(&worktree);
    let launcher = codebutler_controller::runners::launcher::ContainerLauncher::new(
        ContainerConfig {
            engine: "podman".into(),
            image,
            runtime: None,
            extra_args: Vec::new(),
        },
        dir.path(),
    )
    .await
    .unwrap();
    let request = LaunchRequest {
        run_id: format!("kill-{}", std::process::id()),
        spec: codebutler_sandbox::SandboxSpec::for_worktree(&worktree),
        log: dir.path().join("run.log"),
    };
    // Nobody serves the hub: the runner waits for its session until it is killed.
    let mut launched = launcher.launch(&request).await.unwrap();
    let deadline = Instant::now() + WAIT;
    while containers_of(&worktree).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no container; log:\n{}",
            std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    launched.process.start_kill().unwrap();
    let status = tokio::time::timeout(WAIT, launched.process.wait())
        .await
        .expect("the killed runner did not end")
        .unwrap();
    assert!(!status.success(), "{status}");
    // The engine's client is gone and so is the container, while the hub is still open:
    // nothing of the run goes on.
    assert_eq!(containers_of(&worktree).await, Vec::<String>::new());
    drop(launched.hub);
}

#[tokio::test]
async fn a_controller_killed_mid_run_leaves_no_runner_container() {
    let env = container_env(json!({"coder": {"maxTurns": 5, "timeout": 2}})).await;
    env.model.script(
        "PLAN-LONG",
        vec![bash("sleep 120; echo slept"), Reply::text("done")],
    );
    let mut daemon = env.start().await;
    let path = env.outside.path().join("plan-long.md");
    std::fs::write(&path, "PLAN-LONG").unwrap();
    let out =
        stdout(&runnerctl(&env, &["run", "--detach", "--plan", path.to_str().unwrap()]).await);
    assert!(!out.is_empty(), "{}", daemon.log());
    let worktree = worktree_of(&env, "plan-long");
    let deadline = Instant::now() + WAIT;
    while containers_of(&worktree).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no container; log:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The Bash command is running when the controller dies.
    let deadline = Instant::now() + WAIT;
    while env.model.requests_for("PLAN-LONG").is_empty() {
        assert!(Instant::now() < deadline, "the run never called the model");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.kill9().await;
    // The runner sees its hub close, stops the command and ends; its container goes.
    let deadline = Instant::now() + WAIT;
    loop {
        let left = containers_of(&worktree).await;
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left:?} still there after the controller died"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A counter of the host's cgroup files of a container (`pids.events` "max", the memory
/// cgroup's "oom_kill"), cgroup v1 or v2; `None` while unreadable.
async fn cgroup_counter(container: &str, v1: (&str, &str), v2: &str, key: &str) -> Option<u64> {
    let out = tokio::process::Command::new("podman")
        .args(["inspect", "--format", "{{.State.CgroupPath}}", container])
        .output()
        .await
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || path.is_empty() {
        return None;
    }
    let root = Path::new("/sys/fs/cgroup");
    let relative = path.trim_start_matches('/');
    let text = std::fs::read_to_string(root.join(v1.0).join(relative).join(v1.1))
        .or_else(|_| std::fs::read_to_string(root.join(relative).join(v2)))
        .ok()?;
    text.lines().find_map(|l| {
        let (name, value) = l.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

#[tokio::test]
async fn the_process_and_memory_limits_hold_on_the_container() {
    let env = container_env(json!({
        "coder": {"maxTurns": 5, "timeout": 2},
        "sandbox": {"maxProcesses": 48, "memoryMB": 256}
    }))
    .await;
    // Forks past the limit fail (the Bash tool's own time limit ends the storm).
    let storm = Reply::tool_call(
        "Bash",
        json!({"command": "seq 200 | xargs -P 200 -n 1 sleep 4; echo storm over", "timeout": 8})
            .to_string(),
    );
    let hog =
        bash("head -c 1G /dev/zero | tail >/dev/null && echo ALLOCATED || echo contained; sleep 4");
    env.model
        .script("PLAN-LIMITS", vec![storm, hog, Reply::text("limited")]);
    let daemon = env.start().await;
    let path = env.outside.path().join("plan-limits.md");
    std::fs::write(&path, "PLAN-LIMITS").unwrap();
    let run = {
        let path = path.clone();
        let repo = env.repo_path().to_owned();
        tokio::spawn(async move {
            tokio::process::Command::new(env!("CARGO_BIN_EXE_runnerctl"))
                .arg("--repo")
                .arg(repo)
                .args(["run", "--plan", path.to_str().unwrap()])
                .output()
                .await
                .unwrap()
        })
    };
    // From the host, while the run goes on: the container's own cgroups refuse forks past
    // the process limit and kill the memory hog.
    let worktree = worktree_of(&env, "plan-limits");
    let deadline = Instant::now() + WAIT;
    let (mut refused_forks, mut oom_kills) = (0, 0);
    while (refused_forks == 0 || oom_kills == 0) && Instant::now() < deadline {
        if let Some(name) = containers_of(&worktree).await.first() {
            let pids = cgroup_counter(name, ("pids", "pids.events"), "pids.events", "max");
            let oom = cgroup_counter(
                name,
                ("memory", "memory.oom_control"),
                "memory.events",
                "oom_kill",
            );
            refused_forks = refused_forks.max(pids.await.unwrap_or(0));
            oom_kills = oom_kills.max(oom.await.unwrap_or(0));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = stdout(&run.await.unwrap());
    assert!(
        out.contains("run finished: completed: limited"),
        "{out}\nlog:\n{}",
        daemon.log()
    );
    assert!(
        refused_forks > 0,
        "no fork was refused by the container's pids cgroup"
    );
    assert!(
        oom_kills > 0,
        "the container's memory cgroup killed nothing"
    );
    let results = tool_results(&env.model.requests_for("PLAN-LIMITS")[2].body);
    assert!(results.contains("contained"), "{results}");
    assert!(!results.contains("ALLOCATED"), "{results}");
}
