//! Preparing while the plan is discussed, from the outside: a proposed plan's worktree is
//! created and prepared, and its runner launched, before anyone approves; the approval
//! then only sends the task to that runner in that worktree. A cancelled plan's
//! preparation is removed whole, an approval during the preparation waits for it and says
//! so, a failed preparation is reported at the approval as at a cold start, and past
//! `build.maxPreparedAhead`, or when `access.maxWorktreeDiskMB` leaves no room, the oldest
//! preparation goes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::{Value, json};

use crate::harness::{
    CANCEL_PLAN, Env, USER, WAIT, open_store, thread_with_plan_of, tool_results, worktree_of,
};

/// An env whose Coder runs in the real sandbox, with `extra` merged into the repo config.
async fn env_with(extra: Value) -> Env {
    let mut config = json!({"coder": {"maxTurns": 5, "timeout": 2}});
    codebutler_test_support::merge(&mut config, extra);
    Env::with_runner(config).await
}

/// The PM proposes the plan titled `summary` in a new thread asked `ask`.
async fn proposed(env: &Env, ask: &str, summary: &str) -> String {
    let plan = json!({"summary": summary, "steps": ["Do it"], "files": ["README.md"]});
    thread_with_plan_of(env, ask, &plan, "Plan ready; approve it.").await
}

/// The runner processes (`codebutler-runner run --spec-json …`) whose spec names the
/// worktree `path`.
fn processes_naming(path: &Path) -> Vec<u32> {
    let needle = path.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let line = String::from_utf8_lossy(&c);
                line.contains("\0run\0--spec-json\0") && line.contains(&needle)
            })
        })
        .collect()
}

/// The runner logs in `.codebutler/run/` (one per launched runner).
fn runner_logs(env: &Env) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(env.repo_path().join(".codebutler/run"))
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("run-") && n.ends_with(".log"))
                })
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs
}

/// Waits until `slug`'s worktree is prepared and a runner waits in it.
async fn wait_prepared(env: &Env, slug: &str) -> PathBuf {
    let worktree = worktree_of(env, slug);
    let ready = env
        .slack
        .wait_until(WAIT, || {
            worktree.join("README.md").is_file() && !processes_naming(&worktree).is_empty()
        })
        .await;
    assert!(ready, "{} was never prepared ahead", worktree.display());
    worktree
}

/// Waits until the worktree `path`, its branch and every runner in it are gone.
async fn wait_gone(env: &Env, path: &Path) -> bool {
    let slug = path.file_name().unwrap().to_str().unwrap();
    env.slack
        .wait_until(WAIT, || {
            !path.exists() && processes_naming(path).is_empty() && !branch_exists(env, slug)
        })
        .await
}

fn branch_exists(env: &Env, slug: &str) -> bool {
    git2::Repository::open(env.repo_path())
        .unwrap()
        .find_branch(&format!("codebutler/{slug}"), git2::BranchType::Local)
        .is_ok()
}

#[tokio::test]
async fn an_approved_plan_runs_in_the_worktree_and_runner_prepared_before_the_approval() {
    let env = env_with(json!({"build": {"initCommand": "echo ran >> init-count.txt"}})).await;
    env.model.script(
        "AHEAD-READY",
        vec![
            Reply::tool_call("Bash", r#"{"command": "cat init-count.txt; pwd"}"#),
            Reply::text("Ran where it was prepared."),
        ],
    );
    let _daemon = env.start().await;
    let thread = proposed(&env, "prepare it early", "Work on AHEAD-READY").await;
    let worktree = wait_prepared(&env, "work-on-ahead-ready").await;
    // Prepared before anyone approved: the init ran, a runner waits, nothing was asked of
    // the Coder's model and nothing was said in the thread but the plan.
    assert_eq!(
        std::fs::read_to_string(worktree.join("init-count.txt")).unwrap(),
        "ran\n"
    );
    let logs = runner_logs(&env);
    assert_eq!(logs.len(), 1, "{logs:?}");
    let waiting = processes_naming(&worktree);
    assert!(env.model.requests_for("AHEAD-READY").is_empty());
    assert_eq!(env.thread_posts(&thread).len(), 1);
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(&worktree).unwrap().ino();

    let approval = env.reply(&thread, "yes");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    // The same worktree (not created again, its init not run again), the same runner.
    assert_eq!(std::fs::metadata(&worktree).unwrap().ino(), inode);
    let requests = env.model.requests_for("AHEAD-READY");
    let bash = tool_results(&requests[1].body);
    assert!(bash.starts_with("ran\n/workspace"), "{bash}");
    assert_eq!(runner_logs(&env), logs, "no other runner was launched");
    let run_id = logs[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("run-")
        .trim_end_matches(".log")
        .to_owned();
    let pool = open_store(&env).await;
    let runs: Vec<(String, String, i64)> =
        sqlx::query_as("SELECT id, worktree, COALESCE(runner_pid, 0) FROM runs")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].0, run_id);
    assert_eq!(runs[0].1, worktree.display().to_string());
    assert!(
        waiting.contains(&u32::try_from(runs[0].2).unwrap()),
        "the run's runner {} is not the one that waited ({waiting:?})",
        runs[0].2
    );
    // "undo" has its checkpoint, taken while the runner waited.
    let checkpoints: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM run_checkpoints WHERE run_id = $1")
            .bind(&run_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(checkpoints, 1);
    env.assert_clean();
}

#[tokio::test]
async fn a_cancelled_declined_or_closed_plan_leaves_nothing_of_its_preparation() {
    let env = env_with(json!({})).await;
    let _daemon = env.start().await;
    let thread = proposed(&env, "maybe later", "Work on AHEAD-CANCEL").await;
    let worktree = wait_prepared(&env, "work-on-ahead-cancel").await;
    let plan = env.thread_posts(&thread)[0].clone();
    env.slack
        .click(CHANNEL, USER, &plan.ts, CANCEL_PLAN)
        .unwrap();
    assert!(
        wait_gone(&env, &worktree).await,
        "the cancelled plan's worktree or runner stayed"
    );
    assert!(!branch_exists(&env, "work-on-ahead-cancel"));
    assert!(
        !env.repo_path()
            .join(".codebutler/disks/work-on-ahead-cancel.img")
            .exists()
    );

    // A typed "no" to a plan withdraws its preparation too.
    let thread = proposed(&env, "or not", "Work on AHEAD-DECLINE").await;
    env.model
        .script("or not", vec![Reply::text("Fine, what should change?")]);
    let worktree = wait_prepared(&env, "work-on-ahead-decline").await;
    env.reply(&thread, "no");
    assert!(wait_gone(&env, &worktree).await, "declined, yet prepared");
    assert!(!branch_exists(&env, "work-on-ahead-decline"));

    // Closing the thread with its plan still pending discards the preparation as well.
    let thread = proposed(&env, "never mind", "Work on AHEAD-CLOSE").await;
    let worktree = wait_prepared(&env, "work-on-ahead-close").await;
    env.reply(&thread, "done");
    assert!(wait_gone(&env, &worktree).await, "closed, yet prepared");
    assert!(!branch_exists(&env, "work-on-ahead-close"));
    env.assert_clean();
}

#[tokio::test]
async fn an_approval_during_the_preparation_waits_for_it_and_says_so() {
    let env = env_with(json!({"build": {
        "initCommand": "sleep 3 && echo ready > prepared.txt"
    }}))
    .await;
    env.model.script(
        "AHEAD-WAIT",
        vec![
            Reply::tool_call("Bash", r#"{"command": "cat prepared.txt"}"#),
            Reply::text("Saw the prepared worktree."),
        ],
    );
    let _daemon = env.start().await;
    let thread = proposed(&env, "approve at once", "Work on AHEAD-WAIT").await;
    let approval = env.reply(&thread, "yes");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    let texts = env.thread_texts(&thread);
    let waiting = texts
        .iter()
        .position(|t| t.starts_with("*Coder:* waiting for the worktree"))
        .unwrap_or_else(|| panic!("no waiting line in {texts:?}"));
    insta::assert_snapshot!("prepare_ahead_waiting_line", texts[waiting]);
    let prepared = texts
        .iter()
        .position(|t| t.starts_with("*Coder:* prepared the worktree: `sleep 3"))
        .unwrap_or_else(|| panic!("no preparation line in {texts:?}"));
    let status = texts
        .iter()
        .position(|t| t.contains("_Work on AHEAD-WAIT_"))
        .unwrap_or_else(|| panic!("no status in {texts:?}"));
    assert!(waiting < prepared && prepared < status, "{texts:?}");
    let requests = env.model.requests_for("AHEAD-WAIT");
    assert!(
        tool_results(&requests[1].body).contains("ready"),
        "the Coder began before its worktree was prepared"
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_failed_preparation_ahead_says_nothing_until_the_approval_then_reports_as_ever() {
    let env = env_with(json!({"build": {
        "initCommand": "echo compiling; echo BROKEN-DEP >&2; exit 3"
    }}))
    .await;
    env.model.script("AHEAD-FAIL", vec![Reply::text("never")]);
    let _daemon = env.start().await;
    let thread = proposed(&env, "break it early", "Work on AHEAD-FAIL").await;
    let init_log = env
        .repo_path()
        .join(".codebutler/run/init-work-on-ahead-fail.log");
    let worktree = worktree_of(&env, "work-on-ahead-fail");
    let failed = env
        .slack
        .wait_until(WAIT, || {
            std::fs::read_to_string(&init_log).is_ok_and(|l| l.contains("BROKEN-DEP"))
                && !worktree.exists()
        })
        .await;
    assert!(failed, "the preparation ahead did not fail and clean up");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        env.thread_posts(&thread).len(),
        1,
        "a preparation nobody approved says nothing"
    );

    let approval = env.reply(&thread, "yes");
    assert!(env.wait_reaction(&approval.ts, "x").await);
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
    assert!(
        texts
            .iter()
            .any(|t| t.contains("BROKEN-DEP") && t.contains("```")),
        "{texts:?}"
    );
    assert!(env.model.requests_for("AHEAD-FAIL").is_empty());
    assert!(!worktree.exists());
    env.assert_clean();
}

#[tokio::test]
async fn past_the_limit_the_oldest_preparation_goes_and_its_approval_starts_cold() {
    let env = env_with(json!({"build": {"maxPreparedAhead": 2}})).await;
    env.model
        .script("AHEAD-ONE", vec![Reply::text("Done cold.")]);
    let _daemon = env.start().await;
    let first = proposed(&env, "first plan", "Work on AHEAD-ONE").await;
    let one = wait_prepared(&env, "work-on-ahead-one").await;
    proposed(&env, "second plan", "Work on AHEAD-TWO").await;
    let two = wait_prepared(&env, "work-on-ahead-two").await;
    proposed(&env, "third plan", "Work on AHEAD-THREE").await;
    let three = wait_prepared(&env, "work-on-ahead-three").await;
    assert!(wait_gone(&env, &one).await, "the oldest preparation stayed");
    assert!(!branch_exists(&env, "work-on-ahead-one"));
    assert!(two.is_dir() && !processes_naming(&two).is_empty());
    assert!(three.is_dir() && !processes_naming(&three).is_empty());

    // Its approval takes the cold path: the worktree is made again and the run goes.
    let approval = env.reply(&first, "yes");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&first)
    );
    assert!(one.is_dir());
    assert_eq!(env.model.requests_for("AHEAD-ONE").len(), 1);
    env.assert_clean();
}

/// The sizes of the worktrees' disks (their images' lengths: what their runs may fill).
fn disk_sizes(repo: &Path) -> Vec<u64> {
    let disks = codebutler_controller::workspace::worktree::disks_dir(repo);
    std::fs::read_dir(disks)
        .map(|entries| {
            entries
                .map(|e| e.unwrap())
                .filter(|e| e.path().extension().is_some_and(|x| x == "img"))
                .map(|e| e.metadata().unwrap().len())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn with_the_worktrees_disk_full_the_oldest_preparation_makes_room() {
    // Each worktree's disk may be 4096 MB, all of them together 256: the first preparation
    // takes what the total has, and a second one finds no room.
    const LIMIT_MB: u64 = 256;
    let env = env_with(json!({
        "access": {"maxWorktreeDiskMB": LIMIT_MB},
        "sandbox": {"diskMB": 4096}
    }))
    .await;
    env.model
        .script("AHEAD-ROOM-ONE", vec![Reply::text("Done cold.")]);
    let daemon = env.start().await;
    let repo = env.repo_path().to_owned();
    let first = proposed(&env, "first plan", "Work on AHEAD-ROOM-ONE").await;
    let one = wait_prepared(&env, "work-on-ahead-room-one").await;
    let sizes = disk_sizes(&repo);
    assert_eq!(sizes.len(), 1);
    assert!(
        sizes[0] <= LIMIT_MB << 20 && sizes[0] > (LIMIT_MB - 16) << 20,
        "{sizes:?}"
    );

    proposed(&env, "second plan", "Work on AHEAD-ROOM-TWO").await;
    let two = wait_prepared(&env, "work-on-ahead-room-two").await;
    assert!(wait_gone(&env, &one).await, "the oldest preparation stayed");
    assert!(
        daemon
            .log()
            .contains("the oldest preparation goes to make room (access.maxWorktreeDiskMB)"),
        "{}",
        daemon.log()
    );
    assert!(disk_sizes(&repo).iter().sum::<u64>() <= LIMIT_MB << 20);

    // The first plan's approval takes the cold path, which makes room the same way: the
    // second thread's preparation goes, and the first plan runs.
    let approval = env.reply(&first, "yes");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}\n{}",
        env.thread_texts(&first),
        daemon.log()
    );
    assert!(wait_gone(&env, &two).await, "the second preparation stayed");
    assert_eq!(env.model.requests_for("AHEAD-ROOM-ONE").len(), 1);
    assert!(one.is_dir());
    assert!(disk_sizes(&repo).iter().sum::<u64>() <= LIMIT_MB << 20);
    env.assert_clean();
}

#[tokio::test]
async fn a_revised_plan_keeps_the_preparation_and_a_quiet_thread_loses_it() {
    let env = env_with(json!({"build": {"prepareAheadIdleMinutes": 0.25}})).await;
    env.model
        .script("AHEAD-REVISED", vec![Reply::text("Done.")]);
    let _daemon = env.start().await;
    let thread = proposed(&env, "first idea", "Work on AHEAD-FIRST").await;
    let worktree = wait_prepared(&env, "work-on-ahead-first").await;
    let revised = json!({"summary": "Work on AHEAD-REVISED", "steps": ["Do it"], "files": []});
    env.model.script(
        "first idea",
        vec![
            Reply::tool_call("ProposePlan", revised.to_string()),
            Reply::text("Revised."),
        ],
    );
    env.reply(&thread, "rather this");
    env.wait_thread_posts(&thread, 2).await;
    let approval = env.reply(&thread, "yes");
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.thread_texts(&thread)
    );
    // The revised plan ran in the first plan's worktree, on its branch.
    assert!(!worktree_of(&env, "work-on-ahead-revised").exists());
    let pool = open_store(&env).await;
    let (path, branch): (String, String) = sqlx::query_as("SELECT worktree, branch FROM runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(path, worktree.display().to_string());
    assert_eq!(branch, "codebutler/work-on-ahead-first");

    // A plan nobody answers for prepareAheadIdleMinutes (15 s here) loses its preparation.
    proposed(&env, "quiet one", "Work on AHEAD-QUIET").await;
    let quiet = wait_prepared(&env, "work-on-ahead-quiet").await;
    assert!(
        wait_gone(&env, &quiet).await,
        "the quiet thread kept its preparation"
    );
    assert!(!branch_exists(&env, "work-on-ahead-quiet"));
    env.assert_clean();
}

#[tokio::test]
async fn a_restart_leaves_no_preparation_behind() {
    let env = env_with(json!({})).await;
    let mut daemon = env.start().await;
    proposed(&env, "before the crash", "Work on AHEAD-CRASH").await;
    let worktree = wait_prepared(&env, "work-on-ahead-crash").await;
    daemon.kill9().await;
    // The waiting runner ends with its hub; the next start removes the worktree.
    let runner_gone = env
        .slack
        .wait_until(WAIT, || processes_naming(&worktree).is_empty())
        .await;
    assert!(runner_gone, "the waiting runner outlived its controller");
    let _daemon = env.start().await;
    assert!(
        wait_gone(&env, &worktree).await,
        "an orphan preparation stayed"
    );
    assert!(!branch_exists(&env, "work-on-ahead-crash"));
}

/// A runner launched ahead of its plan's approval is answered nothing but its session: a
/// model call through its hub is refused before it reaches the model, whatever the process
/// tries; once the task is sent, the same call goes through.
#[tokio::test]
async fn a_runner_without_its_task_is_answered_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use codebutler_agent::conversation::ChatMessage;
    use codebutler_agent::tool_loop::ChatModel;
    use codebutler_controller::config::OpenRouterConfig;
    use codebutler_controller::domain::ThreadKey;
    use codebutler_controller::gateway::{CallContext, Gateway};
    use codebutler_controller::runners::fetch::FetchPolicy;
    use codebutler_controller::runners::hub::RunHub;
    use codebutler_controller::secret::Secret;
    use codebutler_controller::store::Store;
    use codebutler_runner::hub::{HubModel, connect};
    use codebutler_test_support::model::FakeModel;
    use tokio_util::sync::CancellationToken;

    let model = FakeModel::start().await;
    model.list("m");
    model.script("", vec![Reply::text("ok")]);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).await.unwrap();
    let gateway = Arc::new(
        Gateway::new(
            &OpenRouterConfig {
                api_key: Secret::new("sk-or-test"),
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
    let thread = ThreadKey {
        channel: "C".into(),
        thread_ts: "1.1".into(),
    };
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let (events, _event_rx) = tokio::sync::mpsc::channel(8);
    let (_commands, command_rx) = tokio::sync::mpsc::channel(8);
    let stop = CancellationToken::new();
    let tasked = Arc::new(AtomicBool::new(false));
    let hub = RunHub {
        images: Default::default(),
        run_id: "standby".into(),
        ctx: CallContext {
            thread,
            role: "coder",
            model: "m".into(),
        },
        gateway,
        store,
        mcp: Arc::new(codebutler_controller::runners::mcp::RemoteMcp::new(
            "standby",
            Vec::new(),
            Arc::new(FetchPolicy::new(vec![], vec![]).unwrap()),
        )),
        fetch: Arc::new(FetchPolicy::new(vec![], vec![]).unwrap()),
        events,
        commands: Mutex::new(Some(command_rx)),
        cancel: stop.clone(),
        tasked: tasked.clone(),
        calls_per_hour: 0,
        worktree: "/w".into(),
        repo: "/w".into(),
        helper: codebutler_controller::workspace::stage::Helper {
            runner_bin: "/nonexistent".into(),
            spec: codebutler_sandbox::SandboxSpec::for_worktree("/w"),
        },
        branch: "codebutler/standby".into(),
        gh: "gh".into(),
        memory: codebutler_controller::memory::source::DefaultBranchMemory::new(Path::new(
            "/nonexistent",
        )),
        thread_link: None,
        stored: Default::default(),
        outage: Default::default(),
    };
    tokio::spawn(hub.serve(
        tokio::net::UnixStream::from_std(ours).unwrap(),
        stop.clone(),
    ));
    let channel = connect(theirs).await.unwrap();
    let client = HubModel::new(channel.clone());
    let messages = vec![ChatMessage::system("s"), ChatMessage::user("hello")];

    let refused = client.complete(&messages, &[]).await.unwrap_err();
    assert!(refused.to_string().contains("no task yet"), "{refused}");
    assert!(model.requests().is_empty(), "the model was called");
    // Nor are the remote MCP servers listed or called.
    let mut hub = codebutler_proto::runner::v1::runner_hub_client::RunnerHubClient::new(channel);
    let listing = hub
        .mcp_tools(codebutler_proto::runner::v1::McpToolsRequest {})
        .await
        .unwrap_err();
    assert_eq!(listing.code(), tonic::Code::FailedPrecondition, "{listing}");
    let call = hub
        .mcp_call(codebutler_proto::runner::v1::McpCallRequest {
            server: "any".into(),
            tool: "echo".into(),
            arguments_json: "{}".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(call.code(), tonic::Code::FailedPrecondition, "{call}");

    tasked.store(true, Ordering::Release);
    let reply = client.complete(&messages, &[]).await.unwrap();
    assert_eq!(reply.content.as_deref(), Some("ok"));
    assert_eq!(model.requests().len(), 1);
    stop.cancel();
}
