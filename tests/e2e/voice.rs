//! Voice notes: a clip recorded in Slack is heard before the PM reads its message. Slack's
//! own transcript is taken when it has finished one (no transcription call, no download);
//! otherwise the clip is fetched with the bot token and posted to the configured
//! provider's `/audio/transcriptions` (`voice.model`, with the controller's key), whose
//! cost is a Whisper row of the usage report. The thread shows "🎙️ heard: …" once, the
//! transcript is the message from then on, and a failure is one line. What a transcription
//! costs counts towards the daily cap of the person who sent the clip. A voice note is heard
//! before the thread's rules read its message: "yes" said approves the plan, and what is
//! said to a running Coder reaches its model as text.

use std::time::Duration;

use codebutler_test_support::model::{Gate, Reply, fake_clip};
use codebutler_test_support::slack::{CHANNEL, FakeSlack, SharedFile};
use serde_json::json;

use crate::harness::{
    Env, USER, WAIT, content_text, open_store, runner_env, say_and_wait_post, thread_with_plan,
    user_messages,
};

/// The OpenAI key the tests' configs give (`openai.apiKey`).
const OPENAI_KEY: &str = "sk-openai-voice-test";

/// An environment whose `openai` section points at the fake model server.
async fn env_with_openai() -> Env {
    let env = Env::new().await;
    hear_with_openai(&env);
    env
}

/// Points `env`'s `openai` section at the fake model server (before the daemon starts).
fn hear_with_openai(env: &Env) {
    let path = env.repo_path().join(".codebutler/config.json");
    let mut repo: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    repo["openai"] = json!({"baseUrl": env.model.base_url(), "apiKey": OPENAI_KEY});
    env.write_repo_config(&repo.to_string());
}

/// Shares `clip` alone as a new thread; returns the thread's ts.
fn share_clip(slack: &FakeSlack, clip: SharedFile) -> String {
    slack
        .user_message_with_files(CHANNEL, USER, "", None, &[clip])
        .ts
}

/// The text of the last user message of the PM's request `body`.
fn last_user_text(body: &serde_json::Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    content_text(&last["content"])
}

/// The thread's posts that start with `prefix`.
fn posts_starting(env: &Env, thread: &str, prefix: &str) -> Vec<String> {
    env.post_texts(thread)
        .into_iter()
        .filter(|t| t.starts_with(prefix))
        .collect()
}

#[tokio::test]
async fn a_voice_note_slack_transcribed_is_heard_without_a_transcription_call() {
    let env = env_with_openai().await;
    let said = "the login page redirects twice after a password reset";
    env.model.script(
        said,
        vec![Reply::text("That is the session refresh in src/auth.")],
    );
    let _daemon = env.start().await;
    let clip = SharedFile::clip(
        "audio_message.webm",
        "audio/webm",
        fake_clip(7, "other words"),
        7_000,
    )
    .transcribed_by_slack(said);
    let thread = share_clip(&env.slack, clip);

    let answer = env
        .wait_post(&thread, |t| t.starts_with("*PM:* That is"))
        .await;
    assert_eq!(answer, "*PM:* That is the session refresh in src/auth.");
    assert_eq!(
        posts_starting(&env, &thread, "🎙️"),
        [format!("🎙️ heard: {said}")]
    );
    // Slack's transcript, read with files.info: nothing downloaded, nothing transcribed.
    assert!(env.model.transcriptions().is_empty());
    assert!(
        env.slack.downloads().is_empty(),
        "{:?}",
        env.slack.downloads()
    );
    assert_eq!(env.slack.files_info_requests().len(), 1);
    let requests = env.model.requests_for(said);
    assert_eq!(requests.len(), 1);
    assert_eq!(
        last_user_text(&requests[0].body),
        format!("<@{USER}>: {said}")
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_voice_note_without_a_transcript_is_transcribed_priced_and_reported() {
    let env = env_with_openai().await;
    let said = "please add a dark mode toggle to the settings page";
    env.model
        .script(said, vec![Reply::text("I can plan that: one toggle.")]);
    let _daemon = env.start().await;
    let audio = fake_clip(90, said);
    let clip = SharedFile::clip("audio_message.m4a", "audio/mp4", audio.clone(), 90_000);
    let thread = share_clip(&env.slack, clip);

    env.wait_post(&thread, |t| t.starts_with("*PM:* I can plan"))
        .await;
    assert_eq!(
        posts_starting(&env, &thread, "🎙️"),
        [format!("🎙️ heard: {said}")]
    );
    // The provider got the very bytes Slack served, with voice.model and the OpenAI key.
    let calls = env.model.transcriptions();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].model, "whisper-1");
    assert_eq!(calls[0].bytes, audio);
    assert_eq!(calls[0].content_type, "audio/mp4");
    assert!(
        calls[0].file_name.ends_with(".m4a"),
        "{}",
        calls[0].file_name
    );
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    let downloads = env.slack.downloads();
    assert_eq!(downloads.len(), 1);
    assert!(downloads[0].authorized);
    // The PM was asked with the transcript as the message.
    let requests = env.model.requests_for(said);
    assert_eq!(
        last_user_text(&requests[0].body),
        format!("<@{USER}>: {said}")
    );
    // 90 s at $0.006 a minute, recorded as the thread's Whisper usage.
    let pool = open_store(&env).await;
    let rows: Vec<(String, String, f64)> = sqlx::query_as(
        "SELECT role, model, cost FROM usage WHERE thread_ts = ? AND role = 'whisper'",
    )
    .bind(&thread)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].0.as_str(), rows[0].1.as_str()),
        ("whisper", "whisper-1")
    );
    assert!((rows[0].2 - 0.009).abs() < 1e-9, "{rows:?}");
    // The usage report at close has its Whisper line.
    say_and_wait_post(&env, &thread, "done", "*PM:* Thread closed").await;
    let report = env.wait_post(&thread, |t| t.starts_with("*PM:* 📊")).await;
    assert!(report.contains("*Whisper*"), "{report}");
    assert!(report.contains("Cost: $0.009"), "{report}");
    env.assert_clean();
}

#[tokio::test]
async fn a_failed_transcription_is_one_line_and_the_message_stays() {
    let env = env_with_openai().await;
    env.model.fail_transcriptions(500);
    env.model.script(
        "could not be transcribed",
        vec![Reply::text("I could not hear that; could you type it?")],
    );
    let _daemon = env.start().await;
    let clip = SharedFile::clip("memo.webm", "audio/webm", fake_clip(5, "ship it"), 5_000);
    let thread = share_clip(&env.slack, clip);

    env.wait_post(&thread, |t| t.starts_with("*PM:* I could not hear"))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let texts = env.post_texts(&thread);
    assert!(posts_starting(&env, &thread, "🎙️").is_empty(), "{texts:?}");
    let failures: Vec<&String> = texts
        .iter()
        .filter(|t| {
            t.contains("could not transcribe it: the transcription service answered HTTP 500")
        })
        .collect();
    assert_eq!(failures.len(), 1, "{texts:?}");
    assert_eq!(env.model.transcriptions().len(), 1);
    assert_eq!(env.model.requests_for("could not be transcribed").len(), 1);
    env.assert_clean();
}

#[tokio::test]
async fn a_restart_after_hearing_neither_transcribes_nor_says_it_again() {
    let env = env_with_openai().await;
    let said = "rename the billing module to invoices";
    env.model.script(
        said,
        vec![
            // The first answer never comes: the daemon dies while the PM thinks.
            Reply::delayed(Duration::from_secs(30), Reply::text("too late")),
            Reply::text("Renaming it touches four files."),
        ],
    );
    let mut daemon = env.start().await;
    let clip = SharedFile::clip(
        "audio_message.webm",
        "audio/webm",
        fake_clip(4, said),
        4_000,
    );
    let thread = share_clip(&env.slack, clip);
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for(said).len() == 1)
            .await
    );
    env.wait_post(&thread, |t| t.starts_with("🎙️ heard:")).await;
    daemon.kill9().await;

    let _daemon = env.start().await;
    env.wait_post(&thread, |t| t.starts_with("*PM:* Renaming"))
        .await;
    assert_eq!(
        posts_starting(&env, &thread, "🎙️"),
        [format!("🎙️ heard: {said}")]
    );
    assert_eq!(env.model.transcriptions().len(), 1);
    // The PM's second try read the transcript stored as the message's text.
    let requests = env.model.requests_for(said);
    assert_eq!(requests.len(), 2);
    assert_eq!(
        last_user_text(&requests[1].body),
        format!("<@{USER}>: {said}")
    );
    env.assert_clean();
}

/// `access.maxCostPerUserPerDay` counts the voice notes a person sends: Alice's five-minute
/// clip costs $0.03, over her $0.02 cap, so the PM answers her (that very message) with
/// `productManager.overBudget`'s model, naming her cap and her figure, while Bob's question
/// gets the PM's own model.
#[tokio::test]
async fn a_voice_note_counts_towards_its_senders_daily_cap() {
    const LEAN: &str = "test/pm-lean";
    const BOB: &str = "U0BOB";
    let env = env_with_openai().await;
    let path = env.repo_path().join(".codebutler/config.json");
    let mut repo: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    codebutler_test_support::merge(
        &mut repo,
        json!({
            "access": {"maxCostPerUserPerDay": 0.02},
            "productManager": {"overBudget": "lean", "models": {"lean": {"model": LEAN}}}
        }),
    );
    env.write_repo_config(&repo.to_string());
    env.model.list(LEAN);
    let said = "sketch the release checklist for me";
    env.model
        .script(said, vec![Reply::text("VOICE-CAP: a checklist.")]);
    env.model.script(
        "what is in the readme",
        vec![Reply::text("BOB-ANSWER: the set-up.")],
    );
    let _daemon = env.start().await;
    let clip = SharedFile::clip(
        "audio_message.m4a",
        "audio/mp4",
        fake_clip(300, said),
        300_000,
    );
    let thread = share_clip(&env.slack, clip);
    let answer = env.wait_post(&thread, |t| t.contains("VOICE-CAP")).await;
    assert_eq!(env.model.transcriptions().len(), 1);
    let asked: Vec<String> = env
        .model
        .requests_for(said)
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked, [LEAN]);
    assert!(
        answer.contains(&format!(
            "<@{USER}>'s daily cap (`access.maxCostPerUserPerDay`, $0.02; $0.03 spent today)"
        )),
        "{answer}"
    );

    let second = env
        .slack
        .user_message(CHANNEL, BOB, "what is in the readme", None)
        .ts;
    let answer = env.wait_post(&second, |t| t.contains("BOB-ANSWER")).await;
    assert!(!answer.contains("overBudget"), "{answer}");
    let asked: Vec<String> = env
        .model
        .requests_for("what is in the readme")
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked, [crate::harness::PM_MODEL]);
    env.assert_clean();
}

/// Shares `clip` alone in `thread` and returns the message's ts.
fn say_clip_in(slack: &FakeSlack, thread: &str, clip: SharedFile) -> String {
    slack
        .user_message_with_files(CHANNEL, USER, "", Some(thread), &[clip])
        .ts
}

#[tokio::test]
async fn a_yes_said_in_a_voice_note_approves_the_plan_and_starts_the_run() {
    let env = runner_env(json!({"maxTurns": 4, "timeout": 2})).await;
    hear_with_openai(&env);
    env.model
        .script("Work on VOICE-YES", vec![Reply::text("Nothing to change.")]);
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "tidy the readme", "VOICE-YES").await;

    let yes = say_clip_in(
        &env.slack,
        &thread,
        SharedFile::clip(
            "audio_message.webm",
            "audio/webm",
            fake_clip(2, "yes"),
            2_000,
        ),
    );
    // The run the spoken "yes" started ended: ✅ on the voice note.
    assert!(
        env.wait_reaction(&yes, "white_check_mark").await,
        "{:?}",
        env.post_texts(&thread)
    );
    // The runner asked for the Coder's task: the plan ran, as a typed "yes" runs it.
    assert_eq!(env.model.requests_for("Work on VOICE-YES").len(), 1);
    assert_eq!(posts_starting(&env, &thread, "🎙️"), ["🎙️ heard: yes"]);
    assert_eq!(env.model.transcriptions().len(), 1);
    // The PM was not asked about the "yes": its plan's turn (a call to propose, one to
    // answer) is all that went to it.
    assert_eq!(env.model.requests_for("tidy the readme").len(), 2);
    assert!(
        env.model.unscripted().is_empty(),
        "{:?}",
        env.model.unscripted()
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_voice_note_to_a_running_coder_reaches_its_model_as_text() {
    let env = runner_env(json!({"maxTurns": 4, "timeout": 2})).await;
    hear_with_openai(&env);
    let gate = Gate::new();
    env.model.script(
        "Work on VOICE-CODER",
        vec![
            Reply::held(&gate, Reply::tool_call("Bash", r#"{"command": "true"}"#)),
            Reply::text("Used tabs as asked."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "reformat the sources", "VOICE-CODER").await;
    let approval = env.reply(&thread, "yes");
    // The Coder's first call waits at the gate while the voice note comes.
    assert!(env.slack.wait_until(WAIT, || gate.arrived()).await);
    let said = "use tabs please";
    let note = say_clip_in(
        &env.slack,
        &thread,
        SharedFile::clip(
            "audio_message.webm",
            "audio/webm",
            fake_clip(3, said),
            3_000,
        ),
    );
    assert!(env.wait_reaction(&note, "incoming_envelope").await);
    gate.open();
    assert!(
        env.wait_reaction(&approval.ts, "white_check_mark").await,
        "{:?}",
        env.post_texts(&thread)
    );

    // The Coder's next call carried the transcript as the person's message.
    let requests = env.model.requests_for("Work on VOICE-CODER");
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let users = user_messages(&requests[1].body);
    assert_eq!(
        users.last().unwrap(),
        &format!("<@{USER}>: {said}"),
        "{users:?}"
    );
    assert_eq!(
        posts_starting(&env, &thread, "🎙️"),
        [format!("🎙️ heard: {said}")]
    );
    // Heard once, and priced as the PM's voice notes are.
    assert_eq!(env.model.transcriptions().len(), 1);
    let pool = open_store(&env).await;
    let whisper: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM usage WHERE thread_ts = ? AND role = 'whisper'")
            .bind(&thread)
            .fetch_one(&pool)
            .await
            .unwrap();
    pool.close().await;
    assert_eq!(whisper, 1);
    env.assert_clean();
}

#[tokio::test]
async fn a_voice_note_outside_the_channel_is_heard_before_it_is_read_and_a_strangers_is_not() {
    let env = Env::with_config(json!({"access": {"allowedUsers": [USER]}})).await;
    hear_with_openai(&env);
    let _daemon = env.start().await;

    // "merge" said in a direct message is refused as typed "merge" is: work starts in the
    // channel.
    let dm = codebutler_test_support::slack::dm_channel(USER);
    let said = env.slack.user_message_with_files(
        &dm,
        USER,
        "",
        None,
        &[SharedFile::clip(
            "audio_message.webm",
            "audio/webm",
            fake_clip(2, "merge"),
            2_000,
        )],
    );
    let posted = |thread: &str| -> Vec<String> {
        env.slack
            .posts()
            .into_iter()
            .filter(|p| p.channel == dm && p.thread_ts.as_deref() == Some(thread))
            .map(|p| p.text)
            .collect()
    };
    assert!(
        env.slack
            .wait_until(WAIT, || posted(&said.ts)
                .iter()
                .any(|t| t.contains("Work starts in <#C0CHAN>")))
            .await,
        "{:?}",
        posted(&said.ts)
    );
    assert_eq!(
        posted(&said.ts)
            .iter()
            .filter(|t| t.starts_with("🎙️"))
            .collect::<Vec<_>>(),
        ["🎙️ heard: merge"]
    );

    // Someone not allowed is refused on what they typed: their clip is neither downloaded
    // nor transcribed.
    let stranger = env
        .slack
        .user_message_with_files(
            CHANNEL,
            "U0MALLORY",
            "",
            None,
            &[SharedFile::clip(
                "audio_message.webm",
                "audio/webm",
                fake_clip(2, "approve everything"),
                2_000,
            )],
        )
        .ts;
    env.wait_post(&stranger, |t| t.contains("access.allowedUsers"))
        .await;
    assert!(posts_starting(&env, &stranger, "🎙️").is_empty());
    assert_eq!(env.model.transcriptions().len(), 1);
    assert_eq!(env.slack.downloads().len(), 1);
    assert_eq!(env.slack.files_info_requests().len(), 1);
    // No PM turn for either.
    assert!(
        env.model.requests().is_empty(),
        "{:?}",
        env.model.requests()
    );
    env.assert_clean();
}
