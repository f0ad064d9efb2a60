//! Crashes at the worst moments. The daemon is SIGKILLed where a crash used to duplicate or
//! lose something: right after Slack did a post but before the daemon heard back (the fake
//! holds its answer), between the parts of a reply, while a run was being started, while the
//! report of an interrupted run was due. Then twenty times at random (seeded) while ten
//! threads ask questions, approve plans and run the Coder. Each time, what the fake Slack
//! received is checked: every message answered, nothing twice, every run finished or
//! reported interrupted and resumable, no worktree or branch without a run, and a store that
//! passes `PRAGMA integrity_check`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codebutler_test_support::git::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{CHANNEL, Post};
use serde_json::{Value, json};
use sqlx::Row;

use crate::harness::{
    self, APPROVE, Env, USER, WAIT, assert_each_effect_posted_once, intent, open_store, runner_bin,
    runner_env,
};

fn texts(posts: &[Post]) -> Vec<&str> {
    posts.iter().map(|p| p.text.as_str()).collect()
}

/// How many of the thread's posts contain `needle`.
fn count(env: &Env, thread: &str, needle: &str) -> usize {
    env.thread_posts(thread)
        .iter()
        .filter(|p| p.text.contains(needle))
        .count()
}

async fn wait_for(env: &Env, what: &str, mut check: impl FnMut() -> bool) {
    assert!(
        env.slack.wait_until(WAIT, &mut check).await,
        "timed out waiting for {what}; posts: {:#?}",
        texts(&env.slack.posts())
    );
}

/// A long answer: two messages (each paragraph near Slack's 4,000 characters), then a
/// 25-line code block (a snippet), then a closing line.
fn long_answer(token: &str) -> String {
    let code: String = (0..25)
        .map(|i| format!("step_{i}(\"snippet {token}\");\n"))
        .collect();
    format!(
        "First part of {token}. {}\n\nPart two of {token}. {}\n\n```rust\n{code}```\n\nLast words of {token}.",
        "a".repeat(3000),
        "b".repeat(3000)
    )
}

#[tokio::test]
async fn a_reply_slack_posted_before_the_crash_is_not_posted_again() {
    let env = Env::new().await;
    let q = "how do we deploy? HELD-REPLY";
    env.model.script(
        q,
        vec![
            Reply::text("Run `make deploy`."),
            Reply::text("A second answer."),
        ],
    );
    let mut daemon = env.start().await;
    let stall = env.slack.stall_next("chat.postMessage");
    let thread = env.say(q);
    assert!(stall.reached(WAIT).await, "the reply was never posted");
    daemon.kill9().await;
    drop(stall);
    assert_eq!(env.thread_posts(&thread).len(), 1, "Slack has the reply");

    let _daemon = env.start().await;
    wait_for(&env, "the ✅ after the reply", || {
        env.slack
            .reactions()
            .iter()
            .any(|r| r.ts == thread && r.name == "white_check_mark")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        texts(&env.thread_posts(&thread)),
        ["*PM:* Run `make deploy`."]
    );
    assert_eq!(
        env.model.requests_for(q).len(),
        1,
        "answered once, never again"
    );
    let reads = env.slack.calls_of("conversations.replies");
    assert_eq!(
        reads.len(),
        1,
        "the thread was read once, to settle the unknown post"
    );
    assert_eq!(reads[0].params["include_all_metadata"], "true");
    assert_each_effect_posted_once(&env);
    env.assert_clean();
}

#[tokio::test]
async fn a_reply_cut_off_between_its_parts_is_finished_once() {
    let env = Env::new().await;
    env.slack.cap_history_pages(2);
    let (q1, q2) = ("explain it all CUT-ONE", "explain it all CUT-TWO");
    env.model.script(q1, vec![Reply::text(long_answer("ONE"))]);
    env.model.script(q2, vec![Reply::text(long_answer("TWO"))]);

    // Killed after the first message of the reply.
    let mut daemon = env.start().await;
    let stall = env.slack.stall_next("chat.postMessage");
    let one = env.say(q1);
    assert!(stall.reached(WAIT).await);
    daemon.kill9().await;
    drop(stall);
    // Killed after the snippet was shared.
    let mut daemon = env.start().await;
    wait_for(&env, "the first reply", || {
        count(&env, &one, "Last words of ONE") == 1
    })
    .await;
    let stall = env.slack.stall_next("files.completeUploadExternal");
    let two = env.say(q2);
    assert!(stall.reached(WAIT).await);
    daemon.kill9().await;
    drop(stall);

    let _daemon = env.start().await;
    wait_for(&env, "the second reply", || {
        count(&env, &two, "Last words of TWO") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (thread, token) in [(&one, "ONE"), (&two, "TWO")] {
        let posts = env.thread_posts(thread);
        assert_eq!(posts.len(), 3, "{:?}", texts(&posts));
        assert!(
            posts[0]
                .text
                .starts_with(&format!("*PM:* First part of {token}"))
        );
        assert!(posts[1].text.starts_with(&format!("Part two of {token}")));
        assert!(posts[2].text.contains(&format!("Last words of {token}")));
        let uploads: Vec<_> = env
            .slack
            .uploads()
            .into_iter()
            .filter(|u| u.content.contains(&format!("snippet {token}")))
            .collect();
        assert_eq!(uploads.len(), 1, "the snippet of {token} is shared once");
        assert_eq!(uploads[0].thread_ts.as_deref(), Some(thread.as_str()));
    }
    assert_eq!(env.model.requests_for(q1).len(), 1);
    assert_eq!(env.model.requests_for(q2).len(), 1);
    assert_each_effect_posted_once(&env);
    env.assert_clean();
}

/// A plan proposed for `ask` (its summary `Work on <token>`), posted once; returns the
/// thread.
async fn thread_with_plan(env: &Env, ask: &str, token: &str) -> String {
    let thread = harness::thread_with_plan(env, ask, token).await;
    wait_for(env, "the plan", || count(env, &thread, "Plan ready.") == 1).await;
    thread
}

#[tokio::test]
async fn the_report_of_a_run_cut_off_by_a_restart_survives_another_crash() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    env.model.script(
        "Work on TWICE-TOKEN",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
            Reply::text("Finished after all."),
        ],
    );
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "please do the twice job", "TWICE-TOKEN").await;
    env.reply(&thread, "go");
    wait_for(&env, "the command to run", || {
        env.model.requests_for("Work on TWICE-TOKEN").len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    daemon.kill9().await;

    // The next start marks the run interrupted, then dies connecting to Slack: before it
    // could say so in the thread.
    let stall = env.slack.stall_next("apps.connections.open");
    let mut daemon = env.spawn();
    assert!(stall.reached(WAIT).await, "log:\n{}", daemon.log());
    daemon.kill9().await;
    drop(stall);

    let _daemon = env.start().await;
    wait_for(&env, "the report", || {
        count(&env, &thread, "I was stopped while working on this") == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count(&env, &thread, "I was stopped while working on this"),
        1
    );
    // The status message ends as stopped, and the approval gets ❌.
    let status = env
        .thread_posts(&thread)
        .into_iter()
        .find(|p| p.text.starts_with("*Coder:* working on"))
        .unwrap();
    let (shown, _) = env.slack.shown(CHANNEL, &status.ts).unwrap();
    assert!(
        shown.starts_with("*Coder:* stopped _Work on TWICE-TOKEN_"),
        "{shown}"
    );
    assert_each_effect_posted_once(&env);
}

#[tokio::test]
async fn continue_after_a_run_died_before_its_first_model_call_keeps_its_message() {
    let env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    env.model.script(
        "Work on EARLY-TOKEN",
        vec![
            Reply::text("First run done."),
            // The follow-up's first call: the daemon dies while it is out.
            Reply::delayed(Duration::from_secs(30), Reply::text("never seen")),
            Reply::text("Docs done too."),
        ],
    );
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "please do the early job", "EARLY-TOKEN").await;
    env.reply(&thread, "go");
    wait_for(&env, "the first run", || {
        count(&env, &thread, "First run done.") == 1
    })
    .await;
    env.reply(&thread, "also do the docs");
    wait_for(&env, "the follow-up's first call", || {
        env.model.requests_for("Work on EARLY-TOKEN").len() == 2
    })
    .await;
    daemon.kill9().await;

    let _daemon = env.start().await;
    wait_for(&env, "the report", || {
        count(&env, &thread, "I was stopped while working on this") == 1
    })
    .await;
    env.reply(&thread, "continue");
    wait_for(&env, "the resumed run", || {
        count(&env, &thread, "Docs done too.") == 1
    })
    .await;
    let resumed = env.model.requests_for("Work on EARLY-TOKEN").pop().unwrap();
    let users = crate::harness::user_messages(&resumed.body);
    assert_eq!(
        users[users.len() - 2..],
        ["<@U0ALICE>: also do the docs", "<@U0ALICE>: continue"],
        "the follow-up the dead run never got to is still there: {users:?}"
    );
    assert_each_effect_posted_once(&env);
}

/// An `origin` whose fetch never answers: an HTTP server that accepts and stays silent.
/// Returns its URL and a counter of connections.
async fn silent_origin() -> (String, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/stuck.git", listener.local_addr().unwrap());
    let connections = Arc::new(Mutex::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            *counted.lock().unwrap() += 1;
            held.push(socket);
        }
    });
    (url, connections)
}

#[tokio::test]
async fn an_approval_cut_off_before_its_run_began_is_reported_and_can_be_given_again() {
    // The cold path: prepared ahead, the plan's own fetch would reach the silent origin
    // before the approval does, and the kill below could come before the approval.
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 5, "timeout": 2},
        "build": {"prepareAheadIdleMinutes": 0}
    }))
    .await;
    let (url, connections) = silent_origin().await;
    let repo = git2::Repository::open(env.repo_path()).unwrap();
    repo.remote("origin", &url).unwrap();
    env.model.script(
        "Work on MIDSTART-TOKEN",
        vec![Reply::text("Done from the start.")],
    );
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "please do the midstart job", "MIDSTART-TOKEN").await;
    // Approved: the daemon takes the plan, then hangs fetching origin.
    env.reply(&thread, "yes");
    wait_for(&env, "the fetch", || *connections.lock().unwrap() > 0).await;
    daemon.kill9().await;
    let branches = env.repo_path().join(".codebutler/branches");
    assert!(!branches.join("work-on-midstart-token").exists());

    // origin now fails at once: the next start from the local HEAD, with a warning.
    repo.remote_set_url("origin", "http://127.0.0.1:9/refused.git")
        .unwrap();
    let _daemon = env.start().await;
    wait_for(&env, "the report", || {
        count(
            &env,
            &thread,
            "restarted while I was getting ready to start",
        ) == 1
    })
    .await;
    let report = env
        .thread_posts(&thread)
        .into_iter()
        .find(|p| p.text.contains("restarted while I was getting ready"))
        .unwrap();
    assert_eq!(
        env.slack
            .buttons(CHANNEL, &report.ts)
            .first()
            .map(String::as_str),
        Some(APPROVE)
    );
    assert_eq!(
        env.model.requests_for("please do the midstart job").len(),
        2,
        "the approval is not handed to the PM as a question"
    );
    assert!(
        env.model.unscripted().is_empty(),
        "{:?}",
        env.model.unscripted()
    );
    let click = env.slack.click(CHANNEL, USER, &report.ts, APPROVE).unwrap();
    assert!(env.slack.wait_acked(&click.envelope_id, WAIT).await);
    wait_for(&env, "the run", || {
        count(&env, &thread, "Done from the start.") == 1
    })
    .await;
    assert_each_effect_posted_once(&env);
}

#[tokio::test]
async fn worktrees_and_branches_no_run_owns_are_removed_at_start() {
    let env = Env::new().await;
    let repo = env.repo_path();
    // What a crash between creating a worktree and recording its run leaves: a checked-out
    // worktree on its branch, a branch whose worktree was never made, a directory claimed
    // for one.
    git(repo, &["branch", "codebutler/orphan"]);
    let orphan = repo.join(".codebutler/branches/orphan");
    std::fs::create_dir_all(orphan.join("src")).unwrap();
    std::fs::write(orphan.join("src/lib.rs"), "pub mod auth;\n").unwrap();
    git(repo, &["branch", "codebutler/half-made"]);
    std::fs::create_dir_all(repo.join(".codebutler/branches/claimed")).unwrap();
    // A worktree of an earlier version (a linked one) whose branch has work of its own, and
    // a directory of files git knows nothing of: both go, the branch stays.
    git(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            ".codebutler/branches/worked",
            "-b",
            "codebutler/worked",
        ],
    );
    std::fs::write(repo.join(".codebutler/branches/worked/new.txt"), "work\n").unwrap();
    git(
        &repo.join(".codebutler/branches/worked"),
        &["add", "new.txt"],
    );
    git(
        &repo.join(".codebutler/branches/worked"),
        &[
            "-c",
            "user.name=A",
            "-c",
            "user.email=a@b",
            "commit",
            "-qm",
            "work",
        ],
    );
    std::fs::create_dir_all(repo.join(".codebutler/branches/not-git")).unwrap();
    std::fs::write(repo.join(".codebutler/branches/not-git/keep.txt"), "mine\n").unwrap();

    let daemon = env.start().await;
    let repository = git2::Repository::open(repo).unwrap();
    let branch = |name: &str| {
        repository
            .find_branch(name, git2::BranchType::Local)
            .is_ok()
    };
    assert!(!repo.join(".codebutler/branches/orphan").exists());
    assert!(!branch("codebutler/orphan"));
    assert!(!branch("codebutler/half-made"));
    assert!(!repo.join(".codebutler/branches/claimed").exists());
    assert!(
        branch("codebutler/worked"),
        "a branch with its own commits is kept"
    );
    assert!(!repo.join(".codebutler/branches/worked").exists());
    assert!(
        repository.find_worktree("worked").is_err(),
        "git forgets the linked worktree"
    );
    assert!(!repo.join(".codebutler/branches/not-git").exists());
    let log = daemon.log();
    assert!(
        log.contains(
            "INF  removed worktree .codebutler/branches/worked (no thread's run uses it); \
             kept branch codebutler/worked: it has commits no other branch holds"
        ),
        "{log}"
    );
}

/// SplitMix64: small and seeded, so a failing run replays with its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Threads that ask question after question, and threads that get a plan approved, run it,
/// then ask for more, as long as the kills go on: each finishes its step after that.
const QUESTION_THREADS: usize = 5;
const PLAN_THREADS: usize = 5;
const KILLS: usize = 20;
/// Where a kill may wait for Slack to have done something before it strikes.
const STALL_AT: [&str; 5] = [
    "chat.postMessage",
    "chat.postMessage",
    "reactions.add",
    "chat.update",
    "files.completeUploadExternal",
];
/// How long Slack waits for an ack before it sends an event again.
const ACK_TIMEOUT: Duration = Duration::from_secs(3);

/// The text of the last message of `role` in a model request.
fn last_of(request: &Value, role: &str) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == role)
        .map(|m| crate::harness::content_text(&m["content"]))
        .unwrap_or_default()
}

/// The number right after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> usize {
    text.split(marker)
        .nth(1)
        .and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(usize::MAX)
}

/// Whether the request's last message is a tool result.
fn after_tool(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool")
}

/// The fake model's side: answers computed from each request, so a conversation a crash
/// cut off is answered the same way when it is retried. Question `k` of thread `t` gets
/// "Answer t.k." (the second one a long answer in parts, with a snippet); a plan thread's
/// PM proposes "Chaos work P<t>"; its Coder writes a file, then says "Done with P<t> step
/// <s>." where `s` counts the thread's requests for more.
fn script_chaos(env: &Env) {
    env.model.respond("CHAOS-Q", |request| {
        let asked = last_of(request, "user");
        let token = format!(
            "{}.{}",
            number_after(&asked, "CHAOS-Q"),
            number_after(&asked, "question ")
        );
        if number_after(&asked, "question ") % 3 == 1 {
            Reply::text(long_answer(&token))
        } else {
            Reply::text(format!("Answer {token}."))
        }
    });
    env.model.respond("CHAOS-P", |request| {
        let t = number_after(&last_of(request, "user"), "CHAOS-P");
        if after_tool(request) {
            Reply::text(format!("Plan for P{t} is ready."))
        } else {
            let plan = json!({"summary": format!("Chaos work P{t}"),
                "steps": [format!("Write p{t}.txt")], "files": [format!("p{t}.txt")]});
            Reply::tool_call("ProposePlan", plan.to_string())
        }
    });
    env.model.respond("Chaos work P", |request| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let users: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| crate::harness::content_text(&m["content"]))
            .collect();
        let t = number_after(users.first().map_or("", String::as_str), "Chaos work P");
        let step = users
            .iter()
            .filter(|u| u.contains("also write more"))
            .count();
        let reply = if after_tool(request) {
            Reply::text(format!("Done with P{t} step {step}."))
        } else {
            let write =
                json!({"file_path": format!("p{t}-{step}.txt"), "content": format!("work {t}\n")});
            Reply::tool_call("Write", write.to_string())
        };
        Reply::delayed(Duration::from_millis(300), reply)
    });
}

/// Where a thread is, from what it shows.
#[derive(Clone, Debug, PartialEq)]
enum Stage {
    /// Asked question `k` of a question thread.
    Asked(usize),
    /// Waiting for the plan.
    AwaitingPlan,
    /// Waiting for run step `s` to end.
    Working(usize),
    Done,
}

/// What a person does next in a thread.
#[derive(Clone, Debug)]
enum Action {
    Say(String),
    /// Approve the plan the post shows (its button, or typed).
    Approve(String),
}

struct ChaosThread {
    /// `Q<t>` or `P<t>`.
    name: String,
    t: usize,
    /// Questions asked, or run steps asked for.
    steps: usize,
    ts: String,
    stage: Stage,
    /// Posts of the thread already acted on.
    seen: usize,
    /// The next action and when it is due (people take a moment to reply).
    next: Option<(Instant, Action)>,
    /// The last thing the person wrote in the thread: what they send again when the
    /// service says it restarted before it could start on their message.
    said: Option<String>,
}

/// The people in the threads: they write the next question once the last is answered,
/// approve plans (typed or clicked), ask for more after a run, say "continue" when a run
/// was cut off, and approve again when a start was.
struct Driver {
    env: Arc<Env>,
    rng: Rng,
    /// Set once the last kill is done: threads finish the step they are on.
    winding_down: bool,
    threads: Vec<ChaosThread>,
    /// Events not acknowledged yet, and when they were last sent: Slack sends them again.
    unacked: Vec<(String, Instant)>,
}

impl Driver {
    fn send(&mut self, text: &str, thread: Option<&str>) -> String {
        let sent = self.env.slack.user_message(CHANNEL, USER, text, thread);
        self.unacked.push((sent.envelope_id, Instant::now()));
        sent.ts
    }

    fn start(&mut self) {
        for t in 0..QUESTION_THREADS {
            let ts = self.send(&format!("CHAOS-Q{t} question 0"), None);
            self.threads.push(ChaosThread {
                name: format!("Q{t}"),
                t,
                steps: 1,
                ts,
                stage: Stage::Asked(0),
                seen: 0,
                next: None,
                said: None,
            });
        }
        for t in 0..PLAN_THREADS {
            let ts = self.send(&format!("CHAOS-P{t} please write p{t}.txt"), None);
            self.threads.push(ChaosThread {
                name: format!("P{t}"),
                t,
                steps: 1,
                ts,
                stage: Stage::AwaitingPlan,
                seen: 0,
                next: None,
                said: None,
            });
        }
    }

    /// Reads what each thread shows and acts on it when due; resends unacknowledged events.
    fn step(&mut self) {
        for i in 0..self.threads.len() {
            let posts = self.env.thread_posts(&self.threads[i].ts);
            while self.threads[i].seen < posts.len() {
                let post = &posts[self.threads[i].seen];
                self.threads[i].seen += 1;
                self.read(i, post);
            }
            if let Some((at, action)) = self.threads[i].next.clone()
                && at <= Instant::now()
            {
                self.threads[i].next = None;
                self.act(i, action);
            }
        }
        let slack = self.env.slack.clone();
        self.unacked.retain(|(id, _)| !slack.is_acked(id));
        for (id, at) in &mut self.unacked {
            if at.elapsed() >= ACK_TIMEOUT {
                slack.resend(id);
                *at = Instant::now();
            }
        }
    }

    /// Decides what to do about a new post of thread `i`.
    fn read(&mut self, i: usize, post: &Post) {
        let t = self.threads[i].t;
        let text = post.text.as_str();
        let (stage, action) = match self.threads[i].stage.clone() {
            Stage::Asked(k) => {
                let answered = if k % 3 == 1 {
                    text.contains(&format!("Last words of {t}.{k}."))
                } else {
                    text.contains(&format!("Answer {t}.{k}."))
                };
                match answered {
                    false => return,
                    true if self.winding_down => (Stage::Done, None),
                    true => {
                        self.threads[i].steps += 1;
                        (
                            Stage::Asked(k + 1),
                            Some(Action::Say(format!("CHAOS-Q{t} question {}", k + 1))),
                        )
                    }
                }
            }
            Stage::AwaitingPlan if text.contains(&format!("Plan for P{t} is ready.")) => {
                (Stage::Working(0), Some(Action::Approve(post.ts.clone())))
            }
            Stage::Working(s) if text.contains(&format!("Done with P{t} step {s}.")) => {
                if self.winding_down {
                    (Stage::Done, None)
                } else {
                    self.threads[i].steps += 1;
                    let more = format!("also write more for P{t}");
                    (Stage::Working(s + 1), Some(Action::Say(more)))
                }
            }
            Stage::Working(s)
                if text.contains("restarted while I was getting ready")
                    || text.contains("I couldn't start the Coder") =>
            {
                (Stage::Working(s), Some(Action::Approve(post.ts.clone())))
            }
            Stage::Working(s)
                if text.contains("I was stopped while working on this")
                    || text.contains("to pick up where I stopped") =>
            {
                (Stage::Working(s), Some(Action::Say("continue".into())))
            }
            Stage::Working(s)
                if text.contains("restarted before I could start on your message") =>
            {
                // The message cut off is the last one written here: "continue" after a
                // stop, or the request for more. Sending the other one would ask twice.
                let again = self.threads[i]
                    .said
                    .clone()
                    .unwrap_or_else(|| "continue".to_owned());
                (Stage::Working(s), Some(Action::Say(again)))
            }
            _ => return,
        };
        let think = Duration::from_millis(100 + self.rng.below(1400));
        self.threads[i].stage = stage;
        self.threads[i].next = action.map(|a| (Instant::now() + think, a));
    }

    fn act(&mut self, i: usize, action: Action) {
        let ts = self.threads[i].ts.clone();
        match action {
            Action::Say(text) => {
                self.send(&text, Some(&ts));
                self.threads[i].said = Some(text);
            }
            Action::Approve(post) => {
                let slack = self.env.slack.clone();
                let clickable = slack.buttons(CHANNEL, &post).iter().any(|b| b == APPROVE);
                let click = (clickable && self.rng.below(2) == 0)
                    .then(|| slack.click(CHANNEL, USER, &post, APPROVE))
                    .flatten();
                match click {
                    Some(click) => self.unacked.push((click.envelope_id, Instant::now())),
                    None => {
                        self.send("yes", Some(&ts));
                    }
                }
            }
        }
    }

    fn done(&self) -> bool {
        self.threads.iter().all(|t| t.stage == Stage::Done)
    }

    /// Where each thread is, and what the unfinished ones show.
    fn report(&self) -> String {
        let mut out = String::new();
        for t in &self.threads {
            out.push_str(&format!("{}: {:?}\n", t.name, t.stage));
            if t.stage != Stage::Done {
                for post in self.env.thread_posts(&t.ts) {
                    let line: String = post.text.chars().take(120).collect();
                    out.push_str(&format!("    {} {line}\n", post.ts));
                }
            }
        }
        out
    }
}

/// Ten threads at work while the daemon is SIGKILLed twenty times at random moments (some
/// right after Slack did something the daemon had not heard back about). Replay a failure
/// with the printed seed: `CHAOS_SEED=<seed> cargo nextest run --workspace -E 'test(chaos)'`.
#[tokio::test]
async fn twenty_kills_while_ten_threads_work_lose_and_repeat_nothing() {
    let started = Instant::now();
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    println!("chaos seed: {seed} (replay: CHAOS_SEED={seed})");
    let env = Arc::new(
        Env::with_config(json!({
            "coder": {"maxTurns": 6, "timeout": 2},
            "access": {"maxClaudeCallsPerHour": 0},
            "sandbox": {"runnerPath": runner_bin().display().to_string(), "memoryMB": 768}
        }))
        .await,
    );
    env.slack.cap_history_pages(15);
    script_chaos(&env);
    let mut rng = Rng(seed);
    let driver = Arc::new(Mutex::new(Driver {
        env: env.clone(),
        rng: Rng(seed ^ 0x5eed),
        winding_down: false,
        threads: Vec::new(),
        unacked: Vec::new(),
    }));
    driver.lock().unwrap().start();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let people = {
        let (driver, stop) = (driver.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                driver.lock().unwrap().step();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let finished_threads = || {
        let driver = driver.lock().unwrap();
        let done = driver
            .threads
            .iter()
            .filter(|t| t.stage == Stage::Done)
            .count();
        format!("{done}/{} threads done", driver.threads.len())
    };
    for kill in 0..KILLS {
        let mut daemon = env.start().await;
        if rng.below(2) == 0 {
            let after = Duration::from_millis(200 + rng.below(1800));
            tokio::time::sleep(after).await;
            daemon.kill9().await;
            println!("kill {kill}: after {after:?}; {}", finished_threads());
        } else {
            let method = STALL_AT[rng.below(STALL_AT.len() as u64) as usize];
            let stall = env.slack.stall_next(method);
            let reached = stall.reached(Duration::from_secs(2)).await;
            daemon.kill9().await;
            drop(stall);
            let how = if reached { "stalled" } else { "not reached" };
            println!("kill {kill}: at {method} ({how}); {}", finished_threads());
        }
    }

    driver.lock().unwrap().winding_down = true;
    let mut daemon = env.start().await;
    let finished = env
        .slack
        .wait_until(Duration::from_secs(60), || driver.lock().unwrap().done())
        .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    people.await.unwrap();
    assert!(
        finished,
        "seed {seed}: threads never finished: {}\nlog:\n{}",
        driver.lock().unwrap().report(),
        daemon.log()
    );
    // Let the last effects (✅ after the last answers) go out, then stop cleanly.
    tokio::time::sleep(Duration::from_millis(500)).await;
    daemon.signal("TERM");
    assert!(daemon.wait_exit(WAIT).await.success(), "{}", daemon.log());
    let steps: Vec<(String, usize)> = driver
        .lock()
        .unwrap()
        .threads
        .iter()
        .map(|t| (t.name.clone(), t.steps))
        .collect();
    println!("chaos: steps per thread {steps:?}");
    check_chaos_outcome(&env, seed, &steps).await;
    println!(
        "chaos: {KILLS} kills, all checks passed in {:?}",
        started.elapsed()
    );
}

/// Everything the chaos test promises, checked against what the fake Slack received, the
/// repository and the store.
async fn check_chaos_outcome(env: &Env, seed: u64, steps: &[(String, usize)]) {
    env.assert_clean();
    assert_each_effect_posted_once(env);
    let threads: Vec<(String, String)> = env
        .slack
        .posts()
        .iter()
        .filter_map(|p| p.thread_ts.clone().map(|t| (t, p.text.clone())))
        .collect();
    let in_any = |needle: &str| {
        threads
            .iter()
            .filter(|(_, text)| text.contains(needle))
            .count()
    };
    let steps_of = |name: &str| {
        steps
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, steps)| *steps)
    };
    // Every question answered once, every part of a long answer once, its snippet once.
    for t in 0..QUESTION_THREADS {
        for k in 0..steps_of(&format!("Q{t}")) {
            let token = format!("{t}.{k}");
            if k % 3 == 1 {
                for part in ["First part of", "Part two of", "Last words of"] {
                    assert_eq!(
                        in_any(&format!("{part} {token}.")),
                        1,
                        "seed {seed}: {part} {token}"
                    );
                }
                let snippets = env
                    .slack
                    .uploads()
                    .into_iter()
                    .filter(|u| u.content.contains(&format!("snippet {token}\"")))
                    .count();
                assert_eq!(snippets, 1, "seed {seed}: snippet {token}");
            } else {
                assert_eq!(
                    in_any(&format!("Answer {token}.")),
                    1,
                    "seed {seed}: answer {token}"
                );
            }
        }
    }
    // Every plan proposed once, and every step carried out once.
    for t in 0..PLAN_THREADS {
        assert_eq!(
            in_any(&format!("Plan for P{t} is ready.")),
            1,
            "seed {seed}: plan P{t}"
        );
        for s in 0..steps_of(&format!("P{t}")) {
            assert_eq!(
                in_any(&format!("Done with P{t} step {s}.")),
                1,
                "seed {seed}: step {s} of P{t}"
            );
        }
    }

    let store = open_store(env).await;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&store)
        .await
        .unwrap();
    assert_eq!(check, "ok", "seed {seed}");
    let unsettled: Vec<(String, String)> =
        sqlx::query_as("SELECT ts, state FROM messages WHERE state <> 'processed'")
            .fetch_all(&store)
            .await
            .unwrap();
    assert!(
        unsettled.is_empty(),
        "seed {seed}: messages left {unsettled:?}"
    );
    let undelivered: Vec<(String, String)> =
        sqlx::query_as("SELECT id, state FROM outbox WHERE state <> 'sent'")
            .fetch_all(&store)
            .await
            .unwrap();
    assert!(
        undelivered.is_empty(),
        "seed {seed}: effects left {undelivered:?}"
    );

    // Every run finished or reported interrupted, its end said once, its work resumable.
    let runs = sqlx::query("SELECT id, state, worktree, branch, reported_at FROM runs")
        .fetch_all(&store)
        .await
        .unwrap();
    assert!(!runs.is_empty());
    let intents: HashSet<String> = env.slack.posts().iter().filter_map(intent).collect();
    let repository = git2::Repository::open(env.repo_path()).unwrap();
    let mut owned = HashSet::new();
    for run in &runs {
        let (id, state): (String, String) = (run.get("id"), run.get("state"));
        let (worktree, branch): (String, String) = (run.get("worktree"), run.get("branch"));
        assert!(
            state == "finished" || state == "interrupted",
            "seed {seed}: run {id} is {state}"
        );
        assert!(
            run.get::<Option<String>, _>("reported_at").is_some(),
            "seed {seed}: run {id} unreported"
        );
        assert!(
            intents.iter().any(|i| i.starts_with(&format!("end:{id}/"))),
            "seed {seed}: the end of run {id} was never said"
        );
        assert!(
            Path::new(&worktree).is_dir(),
            "seed {seed}: run {id} lost {worktree}"
        );
        assert!(
            repository
                .find_branch(&branch, git2::BranchType::Local)
                .is_ok(),
            "seed {seed}: run {id} lost {branch}"
        );
        owned.insert(branch.trim_start_matches("codebutler/").to_owned());
    }
    // Nothing left over that no run owns.
    let mut slugs: Vec<String> = repository
        .worktrees()
        .unwrap()
        .iter()
        .flatten()
        .flatten()
        .map(str::to_owned)
        .collect();
    for (branch, _) in repository
        .branches(Some(git2::BranchType::Local))
        .unwrap()
        .flatten()
    {
        if let Some(slug) = branch
            .name()
            .unwrap()
            .and_then(|n| n.strip_prefix("codebutler/"))
        {
            slugs.push(slug.to_owned());
        }
    }
    for entry in std::fs::read_dir(env.repo_path().join(".codebutler/branches")).unwrap() {
        slugs.push(entry.unwrap().file_name().to_string_lossy().into_owned());
    }
    let orphans: Vec<&String> = slugs.iter().filter(|s| !owned.contains(*s)).collect();
    assert!(
        orphans.is_empty(),
        "seed {seed}: orphaned worktrees or branches {orphans:?}"
    );
    store.close().await;
}
