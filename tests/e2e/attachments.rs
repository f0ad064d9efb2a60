//! Files shared in a thread: the controller fetches them from the fake Slack with the bot
//! token and gives them to the PM with the message — an image as an image part (a data URI
//! of the very bytes Slack served) when the PM's model takes images, a text file as text —
//! and keeps them under `.codebutler/attachments/` with names of its own. A message that is
//! only a file is a request. What is too large, of another type, past the count, or served
//! from a host that is not Slack's is refused with one line in the thread; the bot token
//! goes to no other host, no model request and no log. A file shared while the Coder runs
//! is fetched and named to it with the message, an image reaches its model on the next
//! call, and a Coder's model that cannot see images is said once per run.

use base64::Engine as _;
use codebutler_test_support::git;
use codebutler_test_support::model::{Gate, Reply};
use codebutler_test_support::slack::{BOT_TOKEN, CHANNEL, FakeSlack, SharedFile};
use serde_json::{Value, json};

use crate::harness::{
    Env, PM_MODEL, USER, WAIT, content_text, runner_env, say_and_wait_post, say_and_wait_run,
    thread_with_plan, tool_results, write,
};

/// A screenshot's bytes: not text, so only an image part can carry them.
fn screenshot() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.extend((0..=255u8).cycle().take(3000));
    bytes
}

const LOG: &str = "2026-11-28T10:00:01Z INFO starting api\n2026-11-28T10:00:02Z ERROR db: connection refused (port 5433)\n";

/// The files stored for the thread `thread_ts`: (name, bytes), sorted by name.
fn stored_files(env: &Env, thread_ts: &str) -> Vec<(String, Vec<u8>)> {
    let dir = env
        .repo_path()
        .join(".codebutler/attachments")
        .join(format!("{CHANNEL}-{thread_ts}"));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The image parts of the user messages of a request: their URLs.
fn image_urls(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of the last user message of a request.
fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    content_text(&last["content"])
}

#[tokio::test]
async fn a_screenshot_and_a_log_shared_alone_reach_the_pm_as_an_image_and_text() {
    let env = Env::new().await;
    env.model.list_vision_model(PM_MODEL);
    env.model.script(
        "connection refused",
        vec![
            Reply::text("The API cannot reach the database on port 5433."),
            Reply::text("Yes, the screenshot shows the same error."),
        ],
    );
    let daemon = env.start().await;
    let png = screenshot();
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "",
            None,
            &[
                SharedFile::new("Screenshot 2026-11-28.png", "image/png", png.clone()),
                SharedFile::new("api.log", "text/plain", LOG),
            ],
        )
        .ts;
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(
        posts[0].text,
        "*PM:* The API cannot reach the database on port 5433."
    );

    // The model got the very bytes Slack served as an image part, and the log as text.
    let requests = env.model.requests_for("connection refused");
    assert_eq!(requests.len(), 1);
    let expected = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    assert_eq!(image_urls(&requests[0].body), [expected]);
    let text = last_user_text(&requests[0].body);
    assert!(text.starts_with(&format!("<@{USER}>: ")), "{text}");
    assert!(text.contains(LOG.trim_end()), "{text}");
    assert!(text.contains("`api.log`"), "{text}");

    // Fetched once each, with the bot token, and kept under names of the controller's.
    let downloads = env.slack.downloads();
    assert_eq!(downloads.len(), 2, "{downloads:?}");
    assert!(downloads.iter().all(|d| d.authorized), "{downloads:?}");
    let stored = stored_files(&env, &thread);
    let stem = thread.replace('.', "_");
    assert_eq!(
        stored,
        [
            (format!("{stem}-0.png"), png.clone()),
            (format!("{stem}-1.txt"), LOG.as_bytes().to_vec()),
        ]
    );

    // The next message: the conversation keeps the log and names the image it saw, without
    // sending its bytes again.
    env.slack.user_message(
        CHANNEL,
        USER,
        "Is it the same as in the screenshot?",
        Some(&thread),
    );
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(
        posts[1].text,
        "*PM:* Yes, the screenshot shows the same error."
    );
    let requests = env.model.requests_for("connection refused");
    assert_eq!(requests.len(), 2);
    assert!(image_urls(&requests[1].body).is_empty());
    assert_eq!(env.slack.downloads().len(), 2);

    // Closing the thread deletes its files.
    let last = say_and_wait_post(&env, &thread, "done", "*PM:* Thread closed").await;
    assert_eq!(last, "*PM:* Thread closed.");
    assert!(stored_files(&env, &thread).is_empty());
    assert!(
        !env.repo_path()
            .join(".codebutler/attachments")
            .join(format!("{CHANNEL}-{thread}"))
            .exists()
    );

    // The token reached no model request and no log line.
    for request in env.model.requests() {
        assert!(!request.body.to_string().contains(BOT_TOKEN));
    }
    assert!(!daemon.log().contains(BOT_TOKEN));
    env.assert_clean();
}

#[tokio::test]
async fn files_too_large_of_other_types_past_the_count_or_elsewhere_are_refused_in_one_line() {
    let env = Env::with_config(json!({"attachments": {"maxMB": 1, "maxFiles": 3}})).await;
    env.model.script(
        "DEBUG cache warmed",
        vec![
            Reply::text("Only notes.txt was readable."),
            Reply::text("None of those were readable."),
        ],
    );
    let daemon = env.start().await;
    // Another host, which must never see the bot token.
    let elsewhere = FakeSlack::start().await;
    let big = vec![b'x'; 48 << 20];
    let shared = [
        SharedFile::new("../../../notes.txt", "text/plain", "DEBUG cache warmed\n"),
        SharedFile::new("dump.log", "text/plain", big.clone()),
        SharedFile::new("build.zip", "application/zip", b"PK\x03\x04".to_vec()),
    ];
    let thread = env
        .slack
        .user_message_with_files(CHANNEL, USER, "see attached", None, &shared)
        .ts;
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(
        posts[0].text,
        "📎 Not read: `dump.log` (it is larger than the 1 MB limit (`attachments.maxMB`)); `build.zip` (application/zip: I read images (PNG, JPEG, GIF, WebP), text files, PDFs and voice notes)."
    );
    assert_eq!(posts[1].text, "*PM:* Only notes.txt was readable.");

    // The large file was not read whole: refused on its length, before its body.
    let downloads = env.slack.downloads();
    assert_eq!(
        downloads.len(),
        2,
        "the zip is never asked for: {downloads:?}"
    );
    assert!(
        downloads.iter().all(|d| d.bytes_sent < big.len() / 2),
        "{downloads:?}"
    );
    // The name that climbs is stored under the controller's own.
    let stored = stored_files(&env, &thread);
    assert_eq!(
        stored,
        [(
            format!("{}-0.txt", thread.replace('.', "_")),
            b"DEBUG cache warmed\n".to_vec()
        )]
    );
    assert!(!env.repo_path().join(".codebutler/notes.txt").exists());
    assert!(!env.repo_path().join("notes.txt").exists());

    // Files on other hosts are refused before any request; one past the count is not
    // fetched (an entry without a download URL is no file).
    let file = |name: &str, url: String| json!({"id": format!("F0{}", name.len()), "name": name, "mimetype": "text/plain", "url_private_download": url});
    env.slack.user_message_with_file_entries(
        CHANNEL,
        USER,
        "and these",
        Some(&thread),
        vec![
            file(
                "report.txt",
                format!(
                    "{}/files-pri/T0FAKE-F0X/download/report.txt",
                    elsewhere.base_url()
                ),
            ),
            file(
                "evil.txt",
                "https://files.slack.com.evil.example/download/evil.txt".into(),
            ),
            json!({"id": "F0NOURL", "name": "gone.txt"}),
            file(
                "plain.txt",
                "http://files.slack.com/download/plain.txt".into(),
            ),
            file(
                "fourth.txt",
                format!(
                    "{}/files-pri/T0FAKE-F0Y/download/fourth.txt",
                    env.slack.base_url()
                ),
            ),
        ],
    );
    let posts = env.wait_thread_posts(&thread, 4).await;
    assert_eq!(
        posts[2].text,
        format!(
            "📎 Not read: `report.txt` (it is not served by Slack ({}), and the bot token goes only to Slack); `evil.txt` (it is not served by Slack (https://files.slack.com.evil.example), and the bot token goes only to Slack); `plain.txt` (it is not served by Slack (http://files.slack.com), and the bot token goes only to Slack); `fourth.txt` (a message takes at most 3 files (`attachments.maxFiles`)).",
            elsewhere.base_url()
        )
    );
    assert_eq!(posts[3].text, "*PM:* None of those were readable.");
    assert!(elsewhere.downloads().is_empty());
    assert!(elsewhere.calls().is_empty());
    assert_eq!(env.slack.downloads().len(), 2);
    assert!(!daemon.log().contains(BOT_TOKEN));
    env.assert_clean();
}

#[tokio::test]
async fn a_pm_model_without_images_gets_the_name_and_the_thread_names_a_model_that_sees_them() {
    let env = Env::with_config(json!({
        "productManager": {"models": {"eyes": {"model": "test/vision-model"}}}
    }))
    .await;
    env.model.list_vision_model("test/vision-model");
    env.model.script(
        "what is wrong here",
        vec![Reply::text("I cannot see the image; describe it?")],
    );
    let _daemon = env.start().await;
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "what is wrong here?",
            None,
            &[SharedFile::new("bug.jpg", "image/jpeg", screenshot())],
        )
        .ts;
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(
        posts[0].text,
        format!(
            "🖼️ The PM's model `{PM_MODEL}` cannot see images, so it reads only the name of `bug.jpg`; `test/vision-model` can (`productManager.models`)."
        )
    );
    let request = &env.model.requests_for("what is wrong here")[0];
    assert!(image_urls(&request.body).is_empty());
    assert!(
        last_user_text(&request.body)
            .contains("[image `bug.jpg` shared; your model cannot see images]")
    );
    env.assert_clean();
}

#[tokio::test]
async fn the_coder_greps_the_shared_log_in_its_worktree_and_can_neither_change_nor_commit_it() {
    let env = Env::with_runner(json!({"coder": {"maxTurns": 12, "timeout": 3}})).await;
    git::commit_files(
        env.repo_path(),
        &[("api/db.conf", "port=5433\n")],
        "The api",
    );
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    let plan = json!({"summary": "Work on SHARED-LOG", "steps": ["Read the log"], "files": []});
    env.model.script(
        "why does the api crash",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "why does the api crash?",
            None,
            &[SharedFile::new("api.log", "text/plain", LOG)],
        )
        .ts;
    env.wait_thread_posts(&thread, 1).await;
    let name = format!("{}-0.txt", thread.replace('.', "_"));
    let shared = format!(".codebutler-attachments/{name}");
    let bash = |command: &str| Reply::tool_call("Bash", json!({ "command": command }).to_string());
    env.model.script(
        "Work on SHARED-LOG",
        vec![
            Reply::tool_call(
                "Grep",
                json!({"pattern": "connection refused", "path": ".codebutler-attachments"})
                    .to_string(),
            ),
            Reply::tool_call("Read", json!({ "file_path": shared }).to_string()),
            write(".codebutler-attachments/notes.txt", "planted"),
            bash(&format!(
                "echo tampered >> {shared} || echo APPEND-REFUSED; \
                 rm -f {shared} || echo REMOVE-REFUSED"
            )),
            // A .gitignore that un-ignores the directory does not get it committed either.
            write(".gitignore", "!.codebutler-attachments/\n"),
            write("api/db.conf", "port=5432\n"),
            Reply::tool_call(
                "GitCommit",
                json!({"message": "Use the database's port", "include": []}).to_string(),
            ),
            Reply::tool_call(
                "OpenPR",
                json!({"title": "Use the database's port", "body": "The log said so."}).to_string(),
            ),
            Reply::text("The database port was wrong."),
        ],
    );
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark",
        "{:?}",
        env.thread_texts(&thread)
    );

    let requests = env.model.requests_for("Work on SHARED-LOG");
    // The task names where the files are, relative to the worktree.
    let task = crate::harness::user_messages(&requests[0].body)[0].clone();
    assert!(
        task.contains(
            "Files people shared in this thread are in `.codebutler-attachments/` at the top of \
             the worktree (read-only"
        ) && task.contains(&format!("`{name}`")),
        "{task}"
    );
    // What the model received: Grep and Read found the log in the worktree; the write
    // failed and the shell could neither append nor remove.
    let results: Vec<String> = tool_results(&requests.last().unwrap().body)
        .split("\n---\n")
        .map(str::to_owned)
        .collect();
    assert!(
        results[0].contains(&format!("{shared}:2:")) && results[0].contains("connection refused"),
        "{results:#?}"
    );
    assert!(
        results[1].contains("ERROR db: connection refused (port 5433)"),
        "{results:#?}"
    );
    assert!(!results[2].contains("planted"), "{results:#?}");
    assert!(
        results[3].contains("APPEND-REFUSED") && results[3].contains("REMOVE-REFUSED"),
        "{results:#?}"
    );
    // On the host the thread's files are as Slack served them, and nothing was added.
    assert_eq!(
        stored_files(&env, &thread),
        vec![(name.clone(), LOG.as_bytes().to_vec())]
    );
    // Origin's branch has the Coder's change and nothing of the shared files.
    let branch = "codebutler/work-on-shared-log";
    let paths = git::git(&origin, &["ls-tree", "-r", "--name-only", branch]);
    assert!(paths.lines().any(|p| p == "api/db.conf"), "{paths}");
    assert!(paths.lines().any(|p| p == ".gitignore"), "{paths}");
    assert!(!paths.contains(".codebutler-attachments"), "{paths}");
    assert_eq!(
        git::git(&origin, &["show", &format!("{branch}:api/db.conf")]),
        "port=5432"
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_screenshot_shared_while_the_pm_thinks_gets_a_turn_that_sees_it() {
    let env = Env::new().await;
    env.model.list_vision_model(PM_MODEL);
    let gate = Gate::new();
    env.model.script(
        "QUICK-SHOT",
        vec![
            Reply::held(&gate, Reply::text("First answer.")),
            Reply::text("I see the screenshot."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("QUICK-SHOT: the login page is broken");
    assert!(env.slack.wait_until(WAIT, || gate.arrived()).await);
    let png = screenshot();
    let sent = env.slack.user_message_with_files(
        CHANNEL,
        USER,
        "",
        Some(&thread),
        &[SharedFile::new("login.png", "image/png", png.clone())],
    );
    assert!(env.slack.wait_acked(&sent.envelope_id, WAIT).await);
    gate.open();
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(
        [posts[0].text.as_str(), posts[1].text.as_str()],
        ["*PM:* First answer.", "*PM:* I see the screenshot."]
    );
    let requests = env.model.requests_for("QUICK-SHOT");
    assert_eq!(requests.len(), 2);
    let expected = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    assert_eq!(image_urls(&requests[1].body), [expected]);
    env.assert_clean();
}

#[tokio::test]
async fn a_shared_pdf_reaches_the_pm_as_its_text_and_a_broken_one_is_refused() {
    let env = Env::new().await;
    env.model.script(
        "invoice totals are rounded",
        vec![Reply::text("The rounding happens in src/billing.")],
    );
    let _daemon = env.start().await;
    let pdf = codebutler_test_support::pdf::pdf_with_lines(&[
        "Spec: invoice totals are rounded half-even",
        "Appendix: (cents) never lost",
    ]);
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "see the spec",
            None,
            &[
                SharedFile::new("Billing spec.pdf", "application/pdf", pdf),
                SharedFile::new("scan.pdf", "application/pdf", b"%PDF-1.7\n%broken".to_vec()),
            ],
        )
        .ts;
    let answer = env
        .wait_post(&thread, |t| t.starts_with("*PM:* The rounding"))
        .await;
    assert_eq!(answer, "*PM:* The rounding happens in src/billing.");
    let requests = env.model.requests_for("invoice totals are rounded");
    assert_eq!(requests.len(), 1);
    let text = last_user_text(&requests[0].body);
    assert!(text.contains("`Billing spec.pdf`"), "{text}");
    assert!(
        text.contains("invoice totals are rounded half-even"),
        "{text}"
    );
    assert!(text.contains("(cents) never lost"), "{text}");
    assert!(!text.contains("%PDF"), "{text}");
    assert_eq!(
        env.post_texts(&thread)[0],
        "📎 Not read: `scan.pdf` (it could not be read as a PDF)."
    );
    // Kept as its text, under the controller's name.
    let stored = stored_files(&env, &thread);
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].0, format!("{}-0.txt", thread.replace('.', "_")));
    assert!(String::from_utf8_lossy(&stored[0].1).contains("half-even"));
    env.assert_clean();
}

#[tokio::test]
async fn a_screenshot_in_the_thread_reaches_the_coders_model_as_an_image_part_on_every_call() {
    let env = runner_env(json!({"maxTurns": 8, "timeout": 2})).await;
    env.model.list_vision_model(crate::harness::CODER_MODEL);
    let plan = json!({"summary": "Work on CODER-SHOT", "steps": ["Fix the button"], "files": []});
    env.model.script(
        "the save button is cut off",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready."),
        ],
    );
    env.model.script(
        "Work on CODER-SHOT",
        vec![
            Reply::tool_call("Bash", json!({ "command": "true" }).to_string()),
            Reply::text("Fixed."),
        ],
    );
    let _daemon = env.start().await;
    let png = screenshot();
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "the save button is cut off",
            None,
            &[SharedFile::new("button.png", "image/png", png.clone())],
        )
        .ts;
    // The plan is posted after the line saying the PM's model cannot see the image.
    env.wait_post(&thread, |t| t.contains("CODER-SHOT")).await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );

    // Each call of the run carried the very bytes Slack served, after the task's text.
    let expected = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    let requests = env.model.requests_for("Work on CODER-SHOT");
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for request in &requests {
        assert_eq!(image_urls(&request.body), std::slice::from_ref(&expected));
    }
    let task = crate::harness::user_messages(&requests[0].body)[0].clone();
    assert!(
        task.contains("[images shared in the Slack thread, attached below: `button.png`]"),
        "{task}"
    );
    // The store keeps the run's conversation as text: the image lives only in the request.
    let pool = crate::harness::open_store(&env).await;
    let kept: Vec<String> = sqlx::query_scalar("SELECT messages FROM run_conversation")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert!(
        kept.iter().any(|c| c.contains("Work on CODER-SHOT")),
        "{kept:?}"
    );
    assert!(kept.iter().all(|c| !c.contains("base64,")), "{kept:?}");
    env.assert_clean();
}

#[tokio::test]
async fn a_log_shared_while_the_coder_runs_is_stored_named_to_it_and_read_in_its_worktree() {
    let env = runner_env(json!({"maxTurns": 4, "timeout": 2})).await;
    let gate = Gate::new();
    env.model.script(
        "Work on LOG-MIDRUN",
        vec![
            Reply::held(&gate, Reply::tool_call("Bash", r#"{"command": "true"}"#)),
            Reply::tool_call(
                "Bash",
                r#"{"command": "cat .codebutler-attachments/*.txt"}"#,
            ),
            Reply::text("The port is wrong."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "why does the api crash", "LOG-MIDRUN").await;
    let approval = env.reply(&thread, "yes");
    assert!(env.slack.wait_until(WAIT, || gate.arrived()).await);
    let shared = env.slack.user_message_with_files(
        CHANNEL,
        USER,
        "here is the crash",
        Some(&thread),
        &[SharedFile::new("crash.log", "text/plain", LOG)],
    );
    assert!(env.wait_reaction(&shared.ts, "incoming_envelope").await);
    gate.open();
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.post_texts(&thread)
    );

    // Fetched once with the bot token and kept under the controller's name...
    let stem = shared.ts.replace('.', "_");
    assert_eq!(
        stored_files(&env, &thread),
        [(format!("{stem}-0.txt"), LOG.as_bytes().to_vec())]
    );
    let downloads = env.slack.downloads();
    assert_eq!(downloads.len(), 1, "{downloads:?}");
    assert!(downloads[0].authorized);
    // ...and named to the Coder with the message, on its next call.
    let requests = env.model.requests_for("Work on LOG-MIDRUN");
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let users = crate::harness::user_messages(&requests[1].body);
    assert_eq!(
        users.last().unwrap(),
        &format!(
            "<@{USER}>: here is the crash\n\n[shared files, read-only in .codebutler-attachments/: `crash.log` as `{stem}-0.txt`]"
        ),
        "{users:?}"
    );
    // The run started before the thread had any file, yet it reads the log in its
    // worktree: the read-only view there is live.
    let read = tool_results(&requests[2].body);
    assert!(read.contains(LOG.trim_end()), "{read}");
    env.assert_clean();
}

#[tokio::test]
async fn a_screenshot_shared_while_the_coder_runs_reaches_its_model_on_the_next_call() {
    let env = runner_env(json!({"maxTurns": 4, "timeout": 2})).await;
    env.model.list_vision_model(crate::harness::CODER_MODEL);
    let gate = Gate::new();
    env.model.script(
        "Work on SHOT-MIDRUN",
        vec![
            Reply::held(&gate, Reply::tool_call("Bash", r#"{"command": "true"}"#)),
            Reply::text("Fixed the overlap."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "the menu overlaps the logo", "SHOT-MIDRUN").await;
    let approval = env.reply(&thread, "yes");
    assert!(env.slack.wait_until(WAIT, || gate.arrived()).await);
    let png = screenshot();
    let shared = env.slack.user_message_with_files(
        CHANNEL,
        USER,
        "",
        Some(&thread),
        &[SharedFile::new("menu.png", "image/png", png.clone())],
    );
    assert!(env.wait_reaction(&shared.ts, "incoming_envelope").await);
    gate.open();
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.post_texts(&thread)
    );

    // The first call had no image; the next carried the very bytes Slack served.
    let requests = env.model.requests_for("Work on SHOT-MIDRUN");
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(image_urls(&requests[0].body).is_empty());
    let expected = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    assert_eq!(image_urls(&requests[1].body), [expected]);
    // The stored conversation stays text.
    let pool = crate::harness::open_store(&env).await;
    let kept: Vec<String> = sqlx::query_scalar("SELECT messages FROM run_conversation")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert!(kept.iter().all(|c| !c.contains("base64,")), "{kept:?}");
    env.assert_clean();
}

#[tokio::test]
async fn a_coder_model_without_images_gets_the_line_naming_a_model_that_sees_them() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 4, "timeout": 2},
        "productManager": {"models": {"eyes": {"model": "test/vision-model"}}}
    }))
    .await;
    env.model.list_vision_model("test/vision-model");
    let plan = json!({"summary": "Work on BLIND-CODER", "steps": ["Fix it"], "files": []});
    env.model.script(
        "the chart legend is cut",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready."),
        ],
    );
    env.model.script(
        "Work on BLIND-CODER",
        vec![Reply::text("Fixed the legend.")],
    );
    let _daemon = env.start().await;
    let thread = env
        .slack
        .user_message_with_files(
            CHANNEL,
            USER,
            "the chart legend is cut",
            None,
            &[SharedFile::new("chart.png", "image/png", screenshot())],
        )
        .ts;
    env.wait_post(&thread, |t| t.contains("BLIND-CODER")).await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );

    let line = format!(
        "🖼️ The Coder's model `{}` cannot see images, so it reads only the name of `chart.png`; `test/vision-model` can (`coder.model`).",
        crate::harness::CODER_MODEL
    );
    let said: Vec<String> = env
        .post_texts(&thread)
        .into_iter()
        .filter(|t| t.starts_with("🖼️ The Coder's"))
        .collect();
    assert_eq!(said, [line]);
    let requests = env.model.requests_for("Work on BLIND-CODER");
    assert!(image_urls(&requests[0].body).is_empty());
    env.assert_clean();
}
