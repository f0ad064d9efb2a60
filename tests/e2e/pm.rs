//! The PM answering in threads: grounded answers after tool calls, concurrency, tool
//! safety, plans and routing.

use std::time::Duration;

use codebutler_test_support::model::Reply;
use serde_json::json;

use codebutler_controller::domain::ThreadKey;
use codebutler_controller::store::Store;
use codebutler_test_support::slack::{APP_TOKEN, BOT_TOKEN, CHANNEL};

use crate::harness::{Env, OUTSIDE_SECRET, WAIT, tool_results, user_messages};

#[tokio::test]
async fn question_is_answered_after_grep_and_read_file() {
    let env = Env::new().await;
    let q = "where is the session expiry set?";
    env.model.script(
        q,
        vec![
            Reply::tool_call("Grep", r#"{"pattern": "SESSION_EXPIRY", "glob": "*.rs"}"#),
            Reply::tool_call("ReadFile", r#"{"path": "src/auth/session.rs"}"#),
            Reply::text("It is `SESSION_EXPIRY_SECS` in **src/auth/session.rs:4**: 3600 seconds."),
        ],
    );
    let daemon = env.start().await;
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(
        posts[0].text,
        "*PM:* It is `SESSION_EXPIRY_SECS` in *src/auth/session.rs:4*: 3600 seconds."
    );

    let requests = env.model.requests_for(q);
    assert_eq!(requests.len(), 3);
    // The model saw real tool output from the repository.
    let grep = tool_results(&requests[1].body);
    assert!(
        grep.contains("src/auth/session.rs:4:pub const SESSION_EXPIRY_SECS: u64 = 3600;"),
        "{grep}"
    );
    let read = tool_results(&requests[2].body);
    assert!(
        read.contains("    4│ pub const SESSION_EXPIRY_SECS: u64 = 3600;"),
        "{read}"
    );
    // System prompt from the seeded pm.md, the key in the header, the configured model.
    let first = &requests[0].body;
    assert_eq!(first["model"], "test/pm-model");
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are the PM")
    );
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer sk-or-test-key")
    );
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "ReadFile",
            "Grep",
            "ListFiles",
            "GitLog",
            "GitDiff",
            "ReadMemory",
            "ListThreads",
            "GHStatus",
            "ProposePlan"
        ]
    );

    // ✅ on the user's message (the thread's status line said the PM was on it, not 👀).
    let ok = env
        .slack
        .wait_until(WAIT, || {
            let names: Vec<String> = env
                .slack
                .reactions()
                .into_iter()
                .filter(|r| r.ts == thread)
                .map(|r| r.name)
                .collect();
            names == ["white_check_mark"]
        })
        .await;
    assert!(ok, "reactions: {:?}", env.slack.reactions());
    // The bot's own post came back as an event and was ignored: no further model call.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(env.model.requests().len(), 3);
    assert!(
        env.model.unscripted().is_empty(),
        "{:?}",
        env.model.unscripted()
    );
    env.assert_clean();

    // Usage of the three calls is recorded against the thread and role.
    let store = Store::open(&env.repo_path().join(".codebutler/store.db"))
        .await
        .unwrap();
    let key = ThreadKey {
        channel: CHANNEL.into(),
        thread_ts: thread.clone(),
    };
    let totals = store.usage_totals(&key).await.unwrap();
    assert_eq!(totals.calls, 3);
    assert!(
        totals.prompt_tokens > 0 && totals.completion_tokens > 0,
        "{totals:?}"
    );
    assert!((totals.cost - 0.0003).abs() < 1e-9, "{totals:?}");

    // No secret reached the log, even at debug level.
    let log = daemon.log();
    assert!(
        log.contains("MSG  U0ALICE: \"where is the session expiry set?\""),
        "{log}"
    );
    for secret in [BOT_TOKEN, APP_TOKEN, "sk-or-test-key"] {
        assert!(!log.contains(secret), "{secret} in log:\n{log}");
    }
}

#[tokio::test]
async fn json_log_format_prints_one_object_per_line() {
    let env = Env::new().await;
    let q = "json please";
    env.model.script(q, vec![Reply::text("ok")]);
    let daemon = env.start_with(&["--log-format", "json"]).await;
    let thread = env.say(q);
    env.wait_thread_posts(&thread, 1).await;
    let log = daemon.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.iter().any(|l| l["tag"] == "MSG"), "{log}");
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string()),
        "{log}"
    );
}

#[tokio::test]
async fn threads_are_answered_concurrently_and_kept_apart() {
    let env = Env::new().await;
    let questions = ["alpha question", "beta question", "gamma question"];
    for q in questions {
        env.model.script(
            q,
            vec![Reply::delayed(
                Duration::from_secs(2),
                Reply::text(format!("answer to {q}")),
            )],
        );
    }
    let _daemon = env.start().await;
    let threads: Vec<String> = questions.iter().map(|q| env.say(q)).collect();
    for (q, thread) in questions.iter().zip(&threads) {
        let posts = env.wait_thread_posts(thread, 1).await;
        assert_eq!(posts[0].text, format!("*PM:* answer to {q}"));
    }
    // Every request arrived before any answer came back: the threads ran side by side.
    let requests = env.model.requests();
    assert_eq!(requests.len(), 3);
    let first = requests.iter().map(|r| r.at).min().unwrap();
    let last = requests.iter().map(|r| r.at).max().unwrap();
    assert!(
        last - first < Duration::from_secs(2),
        "requests were serialised"
    );
    // No conversation saw another thread's message.
    for r in &requests {
        let users = user_messages(&r.body);
        assert_eq!(users.len(), 1, "{users:?}");
    }
    env.assert_clean();
}

#[tokio::test]
async fn path_escapes_are_refused() {
    let env = Env::new().await;
    let q = "show me some files";
    let outside = env.outside.path().join("secret.txt");
    env.model.script(
        q,
        vec![
            Reply::ToolCalls(vec![
                ("ReadFile".into(), json!({"path": outside}).to_string()),
                (
                    "ReadFile".into(),
                    r#"{"path": "../../../../../../etc/passwd"}"#.into(),
                ),
                ("ReadFile".into(), r#"{"path": "link-out"}"#.into()),
                (
                    "ReadFile".into(),
                    r#"{"path": ".codebutler/config.json"}"#.into(),
                ),
                (
                    "Grep".into(),
                    r#"{"pattern": "outside-secret", "path": "/"}"#.into(),
                ),
                (
                    "ListFiles".into(),
                    r#"{"pattern": "*", "path": "../"}"#.into(),
                ),
            ]),
            Reply::text("I can only read inside the repository."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    env.wait_thread_posts(&thread, 1).await;
    let results = tool_results(&env.model.requests_for(q)[1].body);
    let parts: Vec<&str> = results.split("\n---\n").collect();
    assert_eq!(parts.len(), 6, "{results}");
    for part in &parts {
        assert!(part.starts_with("error: path "), "not refused: {part}");
        assert!(part.contains("refused"), "{part}");
    }
    assert!(
        parts[0].contains("absolute paths are not allowed"),
        "{}",
        parts[0]
    );
    assert!(parts[1].contains("leaves the repository"), "{}", parts[1]);
    assert!(parts[2].contains("symlink points outside"), "{}", parts[2]);
    assert!(parts[3].contains(".codebutler"), "{}", parts[3]);
    assert!(!results.contains(OUTSIDE_SECRET));
    assert!(!results.contains("root:x:0:0"));
    assert!(!results.contains("xoxb-"));
    env.assert_clean();
}

#[tokio::test]
async fn malformed_tool_arguments_get_error_results_the_model_can_fix() {
    let env = Env::new().await;
    let q = "how do we deploy?";
    env.model.script(
        q,
        vec![
            Reply::ToolCalls(vec![
                ("ReadFile".into(), "{not json".into()),
                ("Grep".into(), "{}".into()),
                ("GitLog".into(), r#"{"n": "many"}"#.into()),
                ("NoSuchTool".into(), "{}".into()),
            ]),
            Reply::tool_call("ReadFile", r#"{"path": "README.md"}"#),
            Reply::text("Run `make deploy`; CI deploys `main` on merge."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(
        posts[0].text,
        "*PM:* Run `make deploy`; CI deploys `main` on merge."
    );
    let requests = env.model.requests_for(q);
    let results = tool_results(&requests[1].body);
    assert!(
        results.contains("error: invalid arguments for ReadFile: arguments are not valid JSON"),
        "{results}"
    );
    assert!(results.contains("missing field `pattern`"), "{results}");
    assert!(
        results.contains("error: invalid arguments for GitLog"),
        "{results}"
    );
    assert!(results.contains("unknown tool \"NoSuchTool\""), "{results}");
    assert!(tool_results(&requests[2].body).contains("Run `make deploy`"));
    env.assert_clean();
}

#[tokio::test]
async fn a_proposed_plan_is_stored_and_posted() {
    let env = Env::new().await;
    let q = "make the session expiry configurable";
    let plan = json!({
        "summary": "Read the session expiry from config",
        "steps": ["Replace the constant in `src/auth/session.rs:4` with a config value", "Add a test"],
        "files": ["src/auth/session.rs"]
    });
    env.model.script(
        q,
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Here is the plan. Approve it or tell me what to change."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    let text = &posts[0].text;
    assert!(text.starts_with("*PM:* Here is the plan."), "{text}");
    assert!(
        text.contains("📋 *Plan:* Read the session expiry from config"),
        "{text}"
    );
    assert!(
        text.contains("1. Replace the constant in `src/auth/session.rs:4`"),
        "{text}"
    );
    assert!(text.contains("*Files:* `src/auth/session.rs`"), "{text}");

    // A later ListThreads (in another thread) sees the stored plan.
    let q2 = "what is everyone working on?";
    env.model.script(
        q2,
        vec![
            Reply::tool_call("ListThreads", "{}"),
            Reply::text("One thread has a plan."),
        ],
    );
    let thread2 = env.say(q2);
    env.wait_thread_posts(&thread2, 1).await;
    let listed = tool_results(&env.model.requests_for(q2)[1].body);
    assert!(
        listed.contains(&format!("Thread {thread} [state: planning]")),
        "{listed}"
    );
    assert!(
        listed.contains("Plan: Read the session expiry from config"),
        "{listed}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn messages_for_other_roles_get_the_role_list_without_a_model_call() {
    let env = Env::new().await;
    let _daemon = env.start().await;
    let thread = env.say("@codebutler.reviewer please review the last PR");
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert!(
        posts[0]
            .text
            .starts_with("*PM:* There is no `@codebutler.reviewer` role here."),
        "{}",
        posts[0].text
    );
    assert!(posts[0].text.contains("`@codebutler.coder`"));
    assert!(env.model.requests().is_empty());
}

#[tokio::test]
async fn conversation_continues_in_the_thread_and_gh_status_runs_gh() {
    let env = Env::new().await;
    // Someone opened PR 7 on GitHub from a branch of origin.
    let origin = env.outside.path().join("origin.git");
    let (_, main) = codebutler_test_support::git::push_to_new_origin(env.repo_path(), &origin);
    let git = |args: &[&str]| codebutler_test_support::git::git(env.repo_path(), args);
    git(&["checkout", "-q", "-b", "feature"]);
    codebutler_test_support::git::commit_files(env.repo_path(), &[("f.txt", "f\n")], "Add f");
    git(&["push", "-q", "origin", "feature"]);
    git(&["checkout", "-q", main.trim_start_matches("refs/heads/")]);
    codebutler_test_support::gh::open_pr_on_github(
        env.outside.path(),
        env.repo_path(),
        "feature",
        "Fake PR 7",
    );
    let q = "is PR 7 green?";
    env.model.script(
        q,
        vec![
            Reply::tool_call("GHStatus", r#"{"type": "pr", "number": 7}"#),
            Reply::text("PR 7 is open."),
            Reply::text("You asked about PR 7."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    env.wait_thread_posts(&thread, 1).await;
    let result = tool_results(&env.model.requests_for(q)[1].body);
    assert!(result.contains("\"title\":\"Fake PR 7\""), "{result}");
    // What was asked of GitHub (the start's `gh auth status` aside).
    let log: Vec<String> = codebutler_test_support::gh::gh_log(env.outside.path())
        .into_iter()
        .filter(|l| l != "auth status")
        .collect();
    assert_eq!(
        log.len(),
        2,
        "the PR's creation, then the PM's look: {log:?}"
    );
    assert!(log[1].starts_with("pr view 7 --json "), "{log:?}");

    env.reply(&thread, "what did I ask?");
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(posts[1].text, "*PM:* You asked about PR 7.");
    let last = env.model.requests_for(q).pop().unwrap();
    let users = user_messages(&last.body);
    assert_eq!(users.len(), 2, "{users:?}");
    assert!(users[1].ends_with("what did I ask?"));
    env.assert_clean();
}
