//! Slack's AI-app surface as a thread meets it: the status line while the PM works (and the
//! 👀 reaction where Slack shows none), the PM's answer streamed as the model writes it and
//! ending as the message the plain path posts, once, even across a crash; checked by what
//! the fake Slack received and shows.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{CHANNEL, TEAM_ID};
use serde_json::{Value, json};

use crate::harness::{Env, USER, WAIT, say_and_wait_run, write};

/// An environment whose answers are streamed (the product's default; the harness turns it
/// off for the tests of the plain path).
async fn streaming_env() -> Env {
    Env::with_config(json!({"slack": {"streaming": true}})).await
}

/// What the thread shows of the bot's, without the message ids: each message's text,
/// blocks and shared files' titles, oldest first.
fn shown(env: &Env, thread: &str) -> Vec<Value> {
    env.slack
        .bot_replies(CHANNEL, thread)
        .into_iter()
        .map(|m| {
            let files: Vec<Value> = m["files"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| f["title"].clone())
                .collect();
            json!({"text": m["text"], "blocks": m["blocks"], "files": files})
        })
        .collect()
}

/// A long answer: over Slack's 4,000 characters, with a code block long enough for a
/// snippet, and words that would mention the channel if they were not made inert.
fn long_answer() -> String {
    let code: String = (0..30).map(|i| format!("let x{i} = {i};\n")).collect();
    format!(
        "Tell <!channel> & everyone: it is in `src/auth/session.rs`.\n\n```rust\n{code}```\n\n{}\n\n{}",
        "a".repeat(3500),
        "b".repeat(3500)
    )
}

/// The statuses Slack took for `thread`, in order.
fn statuses(env: &Env, thread: &str) -> Vec<String> {
    env.slack
        .statuses()
        .into_iter()
        .filter(|s| s.channel == CHANNEL && s.thread_ts == thread)
        .map(|s| s.status)
        .collect()
}

/// The bot's reactions on the message `ts`, in order.
fn reactions_on(env: &Env, ts: &str) -> Vec<String> {
    env.slack
        .reactions()
        .into_iter()
        .filter(|r| r.ts == ts)
        .map(|r| r.name)
        .collect()
}

#[tokio::test]
async fn the_thread_status_says_what_the_pm_reads_and_the_answer_clears_it() {
    let env = Env::new().await;
    let q = "where is STATUS-LINE's expiry set?";
    env.model.script(
        q,
        vec![
            Reply::tool_call("Grep", r#"{"pattern": "SESSION_EXPIRY"}"#),
            Reply::tool_call("ReadFile", r#"{"path": "src/auth/session.rs"}"#),
            Reply::text("In `src/auth/session.rs`."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    assert!(env.wait_reaction(&thread, "white_check_mark").await);
    assert_eq!(
        statuses(&env, &thread),
        [
            "is thinking…",
            "is searching for SESSION_EXPIRY…",
            "is reading src/auth/session.rs…"
        ]
    );
    // The status stood in for 👀; the answer's post cleared it, as Slack does.
    assert_eq!(reactions_on(&env, &thread), ["white_check_mark"]);
    assert_eq!(env.slack.thread_status(CHANNEL, &thread), None);
    let calls: Vec<String> = env
        .slack
        .calls()
        .into_iter()
        .map(|c| c.method)
        .filter(|m| m == "assistant.threads.setStatus" || m == "chat.postMessage")
        .collect();
    assert_eq!(
        calls.last().map(String::as_str),
        Some("chat.postMessage"),
        "the answer came after every status: {calls:?}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn where_slack_refuses_the_status_the_pm_reacts_with_eyes_and_asks_once_per_channel() {
    let env = Env::new().await;
    env.slack
        .refuse("assistant.threads.setStatus", "feature_not_enabled");
    env.model
        .script("first NO-STATUS question", vec![Reply::text("First.")]);
    env.model
        .script("second NO-STATUS question", vec![Reply::text("Second.")]);
    let _daemon = env.start().await;
    let first = env.say("first NO-STATUS question");
    assert!(env.wait_reaction(&first, "white_check_mark").await);
    let second = env.say("second NO-STATUS question");
    assert!(env.wait_reaction(&second, "white_check_mark").await);
    assert_eq!(reactions_on(&env, &first), ["eyes", "white_check_mark"]);
    assert_eq!(reactions_on(&env, &second), ["eyes", "white_check_mark"]);
    assert_eq!(
        env.slack.calls_of("assistant.threads.setStatus").len(),
        1,
        "the channel is remembered as one without a status"
    );
    assert_eq!(env.post_texts(&second), ["*PM:* Second."]);
}

#[tokio::test]
async fn with_the_ai_surface_off_the_pm_reacts_with_eyes_and_sets_no_status() {
    let env = Env::with_config(json!({"slack": {"aiSurface": false}})).await;
    env.model
        .script("a PLAIN-PATH question", vec![Reply::text("Plainly.")]);
    let _daemon = env.start().await;
    let thread = env.say("a PLAIN-PATH question");
    assert!(env.wait_reaction(&thread, "white_check_mark").await);
    assert_eq!(reactions_on(&env, &thread), ["eyes", "white_check_mark"]);
    assert!(env.slack.calls_of("assistant.threads.setStatus").is_empty());
}

#[tokio::test]
async fn a_streamed_answer_ends_as_the_messages_the_plain_path_posts() {
    let env = streaming_env().await;
    let answer = long_answer();
    env.model.script(
        "STREAMED question",
        vec![
            Reply::tool_call("ReadFile", r#"{"path": "src/auth/session.rs"}"#),
            Reply::text(answer.clone()),
        ],
    );
    env.model
        .script("PLAIN question", vec![Reply::text(answer.clone())]);
    let _daemon = env.start().await;
    let streamed = env.say("STREAMED question");
    assert!(env.wait_reaction(&streamed, "white_check_mark").await);
    // Then streaming is refused: the next answer is posted the plain way.
    env.slack.refuse("chat.startStream", "feature_not_enabled");
    let plain = env.say("PLAIN question");
    assert!(env.wait_reaction(&plain, "white_check_mark").await);

    let (streamed_shows, plain_shows) = (shown(&env, &streamed), shown(&env, &plain));
    assert_eq!(streamed_shows, plain_shows);
    assert!(
        plain_shows.len() >= 3,
        "split and a snippet: {plain_shows:?}"
    );
    assert!(
        plain_shows[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("*PM:* Tell &lt;!channel&gt; &amp; everyone"),
        "{plain_shows:?}"
    );

    // The first message was the stream, written in pieces as the model wrote, inert.
    let streams = env.slack.streams();
    assert_eq!(streams.len(), 1, "{streams:?}");
    let stream = &streams[0];
    assert_eq!(stream.thread_ts, streamed);
    assert_eq!(stream.recipient_user_id.as_deref(), Some(USER));
    assert_eq!(stream.recipient_team_id.as_deref(), Some(TEAM_ID));
    assert!(stream.stopped);
    assert!(!env.slack.calls_of("chat.appendStream").is_empty());
    let raw = stream
        .chunks
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<String>();
    assert!(
        raw.starts_with("Tell &lt;!channel&gt; &amp; everyone"),
        "{raw}"
    );
    assert!(!raw.contains("<!channel>"), "{raw}");
    let mut start = env.slack.calls_of("chat.startStream")[0].params.clone();
    start["thread_ts"] = json!("[the thread]");
    insta::assert_json_snapshot!("pm_answer_stream_start", start);
    // The streamed message holds the first part: one post fewer in its thread.
    assert_eq!(
        env.thread_posts(&streamed).len() + 1,
        env.thread_posts(&plain).len()
    );
    env.assert_clean();
}

/// Kills the daemon while Slack holds its answer to `method` (the stream made, or added
/// to, and the daemon not told), starts it again, and checks the thread holds one answer:
/// the streamed message, updated to the second attempt's words.
async fn one_answer_after_a_kill_during(method: &str, q: &str) {
    let env = streaming_env().await;
    env.model.script(
        q,
        vec![
            Reply::text("The first try, cut off by the crash."),
            Reply::text("Run `make deploy` after the tests pass."),
        ],
    );
    let mut daemon = env.start().await;
    let stall = env.slack.stall_next(method);
    let thread = env.say(q);
    assert!(stall.reached(WAIT).await, "{method} was never called");
    daemon.kill9().await;
    drop(stall);
    assert_eq!(env.slack.bot_replies(CHANNEL, &thread).len(), 1);

    let _daemon = env.start().await;
    assert!(env.wait_reaction(&thread, "white_check_mark").await);
    let shows = shown(&env, &thread);
    assert_eq!(
        shows,
        [
            json!({"text": "*PM:* Run `make deploy` after the tests pass.", "blocks": null, "files": []})
        ],
        "one message, the streamed one, holding the answer"
    );
    assert!(
        env.thread_posts(&thread).is_empty(),
        "nothing posted besides"
    );
    assert_eq!(env.slack.streams().len(), 1, "no second stream");
    env.assert_clean();
}

#[tokio::test]
async fn a_restart_mid_stream_replaces_the_streamed_message_and_posts_no_second_answer() {
    one_answer_after_a_kill_during("chat.appendStream", "how do we deploy? MID-STREAM").await;
}

#[tokio::test]
async fn a_crash_before_the_streams_ts_is_recorded_still_leaves_one_answer() {
    // The daemon dies after Slack made the message and before it heard the message's ts.
    one_answer_after_a_kill_during("chat.startStream", "how do we deploy? STREAM-START-CRASH")
        .await;
}

#[tokio::test]
async fn a_coder_run_shows_its_steps_as_task_cards_in_one_streamed_plan() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 5, "timeout": 2},
        "slack": {"streaming": true}
    }))
    .await;
    let plan = json!({"summary": "Work on TASK-CARDS", "steps": ["Write the note"], "files": []});
    env.model.script(
        "please write the TASK-CARDS note",
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text("Plan ready."),
        ],
    );
    env.model.script(
        "Work on TASK-CARDS",
        vec![write("notes/cards.txt", "cards\n"), Reply::text("Done.")],
    );
    let _daemon = env.start().await;
    let thread = env.say("please write the TASK-CARDS note");
    assert!(env.wait_reaction(&thread, "white_check_mark").await);
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );

    let cards: Vec<_> = env
        .slack
        .streams()
        .into_iter()
        .filter(|s| s.task_display_mode.is_some())
        .collect();
    assert_eq!(cards.len(), 1, "one card per run: {cards:?}");
    let card = &cards[0];
    assert_eq!(card.thread_ts, thread);
    assert!(card.stopped, "the card ended with the run");
    insta::assert_json_snapshot!(
        "coder_task_cards",
        json!({
            "task_display_mode": card.task_display_mode,
            "plan": card.plan_title(),
            // The ids are the model's call ids: how many calls came before is not the point.
            "tasks": card.tasks().into_iter().map(|mut t| {
                t["id"] = json!("[call id]");
                t
            }).collect::<Vec<_>>(),
        })
    );
    // The status message stays beside the card.
    assert!(
        env.post_texts(&thread)
            .iter()
            .any(|t| t.starts_with("*Coder:* working on")),
        "{:?}",
        env.post_texts(&thread)
    );
    env.assert_clean();
}
