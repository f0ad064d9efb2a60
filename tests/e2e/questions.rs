//! The Coder's ways out of its sandbox, through the real hub: questions (the PM answers
//! first, the thread when the PM cannot), WebFetch against a local server under the fetch
//! policy, and ReadMemory.

use std::path::PathBuf;
use std::process::Output;

use codebutler_controller::domain::ThreadKey;
use codebutler_controller::store::Store;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Env, USER, WAIT, thread_with_plan_of, tool_results};

/// Env whose controller runs Coder runs in the sandbox, with `fetch` as its fetch policy.
async fn coder_env(fetch: Value) -> Env {
    Env::with_runner(json!({
        "coder": {"maxTurns": 8, "timeout": 2},
        "fetch": fetch
    }))
    .await
}

/// Commits `text` as the PM's memory on the repository's default branch (the PM reads
/// memory from there, not from the checkout's files).
fn write_memory(env: &Env, text: &str) {
    codebutler_test_support::git::commit_files(
        env.repo_path(),
        &[(".codebutler/memory/pm.md", text)],
        "Memory",
    );
}

/// Runs a plan with `runnerctl run` to its end; returns its output.
async fn run_plan(env: &Env, plan: &str) -> String {
    let path: PathBuf = env.outside.path().join("plan.md");
    std::fs::write(&path, plan).unwrap();
    let out: Output = tokio::process::Command::new(env!("CARGO_BIN_EXE_runnerctl"))
        .arg("--repo")
        .arg(env.repo_path())
        .args(["run", "--plan", path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts a thread whose PM proposes a plan with `summary`, approves it, and returns the
/// thread and the approval's ts.
async fn approved_thread(env: &Env, ask: &str, summary: &str) -> (String, String) {
    let plan = json!({"summary": summary, "steps": ["Do it"], "files": ["src/auth/session.rs"]});
    let thread = thread_with_plan_of(env, ask, &plan, "Plan ready; approve it.").await;
    let approval = env.reply(&thread, "yes");
    (thread, approval.ts)
}

/// Waits until the run started by `approval` ended with ✅ (or fails showing the thread).
async fn wait_finished(env: &Env, thread: &str, approval: &str) {
    let ok = env
        .wait_reaction_for(approval, "white_check_mark", WAIT * 2)
        .await;
    assert!(ok, "the run did not finish: {:?}", env.thread_posts(thread));
}

async fn questions_of(
    env: &Env,
    thread: &str,
) -> Vec<codebutler_controller::store::QuestionRecord> {
    let store = Store::open(&env.repo_path().join(".codebutler/store.db"))
        .await
        .unwrap();
    store
        .thread_questions(&ThreadKey {
            channel: CHANNEL.into(),
            thread_ts: thread.into(),
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn the_pm_answers_a_question_it_can_settle_and_the_thread_shows_the_exchange() {
    let env = coder_env(json!({})).await;
    write_memory(
        &env,
        "# Decisions\n- Auth: always JWT, never cookies (MEMORY-JWT).\n",
    );
    let question = "JWT or cookies for the QUESTION-ONE login?";
    env.model.script(
        "ASK-PM-TOKEN",
        vec![
            Reply::tool_call("AskUser", json!({"question": question}).to_string()),
            Reply::text("Used JWT as the PM said."),
        ],
    );
    // The PM's side conversation: its first message is the Coder's question.
    env.model.script(
        question,
        vec![
            Reply::tool_call("ReadMemory", "{}"),
            Reply::text("ANSWER: JWT; the memory says always JWT."),
        ],
    );
    let _daemon = env.start().await;
    let (thread, approval) = approved_thread(
        &env,
        "please add the login QUESTIONS-PM",
        "Add login ASK-PM-TOKEN",
    )
    .await;
    wait_finished(&env, &thread, &approval).await;

    // The Coder got the PM's answer as its tool result, and went on to the end.
    let coder = env.model.requests_for("ASK-PM-TOKEN");
    assert_eq!(coder.len(), 2);
    assert_eq!(
        tool_results(&coder[1].body),
        "The PM answered: JWT; the memory says always JWT."
    );
    // The PM was asked with the plan and its memory, offered only read-only tools.
    let pm = env.model.requests_for(question);
    assert_eq!(pm.len(), 2);
    let system = pm[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("Add login ASK-PM-TOKEN"), "{system}");
    assert!(system.contains("MEMORY-JWT"), "{system}");
    assert!(system.contains("ESCALATE:"), "{system}");
    let tools: Vec<&str> = pm[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"ReadMemory") && tools.contains(&"Grep"),
        "{tools:?}"
    );
    assert!(!tools.contains(&"ProposePlan"), "{tools:?}");
    assert!(tool_results(&pm[1].body).contains("MEMORY-JWT"));

    // The thread shows the exchange; the question was not put to the people.
    let posts = env.post_texts(&thread);
    let exchange = posts
        .iter()
        .find(|p| p.starts_with("*Coder → PM:* "))
        .unwrap_or_else(|| panic!("no exchange in {posts:?}"));
    assert!(exchange.contains(question), "{exchange}");
    assert!(
        exchange.contains("*PM → Coder:* JWT; the memory says always JWT."),
        "{exchange}"
    );
    assert!(
        !posts.iter().any(|p| p == &format!("*Coder:* {question}")),
        "{posts:?}"
    );
    assert_eq!(posts.last().unwrap(), "*Coder:* Used JWT as the PM said.");

    // The exchange is on record.
    let asked = questions_of(&env, &thread).await;
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].question, question);
    assert_eq!(asked[0].state, "answered");
    assert_eq!(asked[0].answered_by.as_deref(), Some("pm"));
    assert_eq!(
        asked[0].answer.as_deref(),
        Some("JWT; the memory says always JWT.")
    );
    assert!(
        env.model.unscripted().is_empty(),
        "{:?}",
        env.model.unscripted()
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_question_the_pm_cannot_settle_goes_to_the_thread_and_the_next_reply_answers_it() {
    let env = coder_env(json!({})).await;
    let question = "Delete or archive expired sessions (QUESTION-TWO)?";
    env.model.script(
        "ASK-USER-TOKEN",
        vec![
            Reply::tool_call("AskUser", json!({"question": question}).to_string()),
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
            Reply::text("Archived them as asked."),
        ],
    );
    env.model.script(
        question,
        vec![Reply::text(
            "ESCALATE: the plan does not say; people must decide.",
        )],
    );
    let _daemon = env.start().await;
    let (thread, approval) = approved_thread(
        &env,
        "please tidy the sessions QUESTIONS-USER",
        "Tidy sessions ASK-USER-TOKEN",
    )
    .await;

    // The question is posted as the Coder's.
    let asked = format!("*Coder:* {question}");
    let ok = env
        .slack
        .wait_until(WAIT, || env.post_texts(&thread).contains(&asked))
        .await;
    assert!(ok, "{:?}", env.post_texts(&thread));
    assert_eq!(
        env.model.requests_for("ASK-USER-TOKEN").len(),
        1,
        "it waits"
    );

    // The next reply is the answer; the run goes on to the end.
    let reply = env
        .slack
        .user_message(CHANNEL, USER, "archive them", Some(&thread));
    wait_finished(&env, &thread, &approval).await;
    let coder = env.model.requests_for("ASK-USER-TOKEN");
    assert_eq!(coder.len(), 3);
    assert_eq!(
        tool_results(&coder[1].body),
        "<@U0ALICE> answered: archive them"
    );
    assert!(
        env.slack
            .reactions()
            .iter()
            .any(|r| r.ts == reply.ts && r.name == "incoming_envelope")
    );
    let posts = env.post_texts(&thread);
    assert_eq!(posts.last().unwrap(), "*Coder:* Archived them as asked.");
    assert!(!posts.iter().any(|p| p.contains("PM → Coder")), "{posts:?}");

    let recorded = questions_of(&env, &thread).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].state, "answered");
    assert_eq!(recorded[0].answered_by.as_deref(), Some(USER));
    assert_eq!(recorded[0].answer.as_deref(), Some("archive them"));
    assert_eq!(
        recorded[0].pm_note.as_deref(),
        Some("the plan does not say; people must decide.")
    );
    // The reply went to the Coder only: the PM was not asked about it.
    assert!(
        env.model.unscripted().is_empty(),
        "{:?}",
        env.model.unscripted()
    );
    env.assert_clean();
}

const DOCS_HTML: &str = "<!doctype html><html><head><title>Docs</title>\
    <script>var tracking = 'SCRIPT-NOISE';</script></head><body>\
    <h1>Session API</h1><p>Sessions expire after <b>3600</b> seconds (DOCS-MARK).</p>\
    <a href=\"/changelog\">changelog</a></body></html>";

/// A tiny HTTP/1.1 server on 127.0.0.1: `/docs` (HTML), `/api.json`, `/logo.png`, and 404
/// for anything else. Returns its base URL.
async fn page_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16_384 {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (status, content_type, body): (&str, &str, Vec<u8>) = match path.as_str() {
                    "/docs" => ("200 OK", "text/html; charset=utf-8", DOCS_HTML.into()),
                    "/api.json" => (
                        "200 OK",
                        "application/json",
                        br#"{"expiry": 3600}"#.to_vec(),
                    ),
                    "/logo.png" => (
                        "200 OK",
                        "image/png",
                        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
                    ),
                    _ => ("404 Not Found", "text/plain", b"no such page".to_vec()),
                };
                let header = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(header.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn web_fetch_goes_through_the_hub_under_the_fetch_policy() {
    let base = page_server().await;
    let port = base.rsplit(':').next().unwrap().to_owned();
    let env = coder_env(json!({
        "allow": ["127.0.0.1"],
        "allowInternalHosts": ["127.0.0.1"]
    }))
    .await;
    let fetch = |url: String| Reply::tool_call("WebFetch", json!({"url": url}).to_string());
    env.model.script(
        "PLAN-WEB",
        vec![
            fetch(format!("{base}/docs")),
            fetch(format!("{base}/api.json")),
            fetch(format!("{base}/logo.png")),
            fetch(format!("{base}/missing")),
            // Not on the allow list, though it is the same server.
            fetch(format!("http://localhost:{port}/docs")),
            Reply::tool_call("WebFetch", r#"{"url": 42}"#),
            Reply::text("Read the docs."),
        ],
    );
    let _daemon = env.start().await;
    let out = run_plan(&env, "Read the session docs PLAN-WEB").await;
    assert!(
        out.contains("run finished: completed: Read the docs."),
        "{out}"
    );
    let requests = env.model.requests_for("PLAN-WEB");
    assert_eq!(requests.len(), 7);
    let result = |i: usize| {
        tool_results(&requests[i].body)
            .rsplit("\n---\n")
            .next()
            .unwrap()
            .to_owned()
    };
    let docs = result(1);
    assert!(
        docs.starts_with(&format!(
            "URL: {base}/docs\nContent-Type: text/html; charset=utf-8\n\n# Session API\n"
        )),
        "{docs}"
    );
    assert!(
        docs.contains("Sessions expire after **3600** seconds (DOCS-MARK)."),
        "{docs}"
    );
    assert!(
        !docs.contains("SCRIPT-NOISE") && !docs.contains("<p>"),
        "{docs}"
    );
    assert!(
        result(2).ends_with("\n\n{\"expiry\": 3600}"),
        "{}",
        result(2)
    );
    assert_eq!(
        result(3),
        format!(
            "error: {base}/logo.png is binary content (image/png, 16 bytes); WebFetch only reads text, HTML, JSON and Markdown"
        )
    );
    assert_eq!(
        result(4),
        format!("error: HTTP 404 from {base}/missing; the page says:\nno such page")
    );
    let denied = result(5);
    assert!(
        denied.starts_with(&format!(
            "error: fetching http://localhost:{port}/docs is not allowed: localhost is not on the fetch allow list."
        )),
        "{denied}"
    );
    assert!(
        result(6).starts_with("error: invalid arguments for WebFetch: invalid type"),
        "{}",
        result(6)
    );
    env.assert_clean();
}

#[tokio::test]
async fn the_policy_refuses_internal_addresses_unless_named() {
    let base = page_server().await;
    // On the allow list, but not named as an internal host: refused.
    let env = coder_env(json!({"allow": ["127.0.0.1"]})).await;
    env.model.script(
        "PLAN-INTERNAL",
        vec![
            Reply::tool_call(
                "WebFetch",
                json!({"url": format!("{base}/docs")}).to_string(),
            ),
            Reply::text("Could not read it."),
        ],
    );
    let _daemon = env.start().await;
    let out = run_plan(&env, "Try the internal docs PLAN-INTERNAL").await;
    assert!(out.contains("run finished: completed"), "{out}");
    let requests = env.model.requests_for("PLAN-INTERNAL");
    let result = tool_results(&requests[1].body);
    assert!(
        result.starts_with(&format!(
            "error: fetching {base}/docs is not allowed: 127.0.0.1 is an internal address"
        )),
        "{result}"
    );
    assert!(!result.contains("DOCS-MARK"), "{result}");
}

#[tokio::test]
async fn read_memory_returns_the_memory_files_text() {
    let env = coder_env(json!({})).await;
    write_memory(&env, "# Conventions\n- Tabs, never spaces (MEMORY-TABS).\n");
    env.model.script(
        "PLAN-MEMORY",
        vec![
            Reply::tool_call("ReadMemory", "{}"),
            Reply::tool_call("ReadMemory", r#"{"role": "artist"}"#),
            Reply::tool_call("ReadMemory", r#"{"role": "coder"}"#),
            Reply::text("Noted the conventions."),
        ],
    );
    let _daemon = env.start().await;
    let out = run_plan(&env, "Follow the conventions PLAN-MEMORY").await;
    assert!(out.contains("run finished: completed"), "{out}");
    let requests = env.model.requests_for("PLAN-MEMORY");
    assert_eq!(requests.len(), 4);
    let results: Vec<String> = tool_results(&requests[3].body)
        .split("\n---\n")
        .map(str::to_owned)
        .collect();
    assert_eq!(
        results,
        [
            "# Conventions\n- Tabs, never spaces (MEMORY-TABS).\n",
            // No artist.md on the default branch yet: its seeded default.
            codebutler_controller::memory::seed::ARTIST_DEFAULT,
            "error: invalid arguments for ReadMemory: no memory for role \"coder\": roles with memory are pm, artist",
        ]
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_question_in_a_run_without_a_thread_is_answered_at_once() {
    let env = coder_env(json!({})).await;
    env.model.script(
        "PLAN-UNATTENDED",
        vec![
            Reply::tool_call("AskUser", r#"{"question": "Tabs or spaces?"}"#),
            Reply::text("Chose spaces."),
        ],
    );
    let _daemon = env.start().await;
    let out = run_plan(&env, "Indent things PLAN-UNATTENDED").await;
    assert!(
        out.contains("run finished: completed: Chose spaces."),
        "{out}"
    );
    let requests = env.model.requests_for("PLAN-UNATTENDED");
    assert_eq!(
        tool_results(&requests[1].body),
        codebutler_controller::runners::supervisor::UNATTENDED_ANSWER
    );
}
