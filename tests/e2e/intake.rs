//! Slack intake: what is ignored, retries processed once, reconnection.

use std::time::Duration;

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{BOT_ID, BOT_USER_ID, CHANNEL};
use serde_json::json;

use crate::harness::{Env, USER, WAIT, user_messages};

#[tokio::test]
async fn other_channels_bots_edits_deletions_and_joins_are_ignored() {
    let env = Env::new().await;
    let q = "the one real question";
    env.model.script(q, vec![Reply::text("the answer")]);
    let _daemon = env.start().await;

    let ts = || env.slack.next_ts();
    let ignored = [
        json!({"type": "message", "channel": "C0OTHER", "user": USER, "text": "other channel", "ts": ts()}),
        json!({"type": "message", "channel": CHANNEL, "user": BOT_USER_ID, "bot_id": BOT_ID, "text": "my own", "ts": ts()}),
        json!({"type": "message", "channel": CHANNEL, "subtype": "bot_message", "bot_id": "B0OTHER", "text": "another bot", "ts": ts()}),
        json!({"type": "message", "channel": CHANNEL, "user": "U0OTHER", "bot_id": "B0OTHER", "text": "bot with user", "ts": ts()}),
        json!({"type": "message", "channel": CHANNEL, "subtype": "message_changed", "hidden": true, "ts": ts(),
               "message": {"type": "message", "user": USER, "text": "edited text", "ts": "1.1"}}),
        json!({"type": "message", "channel": CHANNEL, "subtype": "message_deleted", "hidden": true, "ts": ts(), "deleted_ts": "1.1"}),
        json!({"type": "message", "channel": CHANNEL, "subtype": "channel_join", "user": "U0NEW", "text": "<@U0NEW> has joined the channel", "ts": ts()}),
        json!({"type": "reaction_added", "user": USER, "reaction": "eyes", "item": {"type": "message", "channel": CHANNEL, "ts": "1.1"}, "event_ts": ts()}),
    ];
    let sent: Vec<_> = ignored
        .into_iter()
        .map(|e| env.slack.send_event(e))
        .collect();
    for s in &sent {
        assert!(
            env.slack.wait_acked(&s.envelope_id, WAIT).await,
            "ignored events are still acknowledged"
        );
    }
    let thread = env.say(q);
    env.wait_thread_posts(&thread, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let requests = env.model.requests();
    assert_eq!(
        requests.len(),
        1,
        "only the real question reaches the model"
    );
    assert!(user_messages(&requests[0].body)[0].ends_with(q));
    assert_eq!(env.slack.posts().len(), 1);
    env.assert_clean();
}

#[tokio::test]
async fn a_retried_envelope_is_processed_once() {
    let env = Env::new().await;
    let q = "answer me once";
    env.model
        .script(q, vec![Reply::text("once"), Reply::text("twice!")]);
    let _daemon = env.start().await;
    let sent = env.slack.user_message(CHANNEL, USER, q, None);
    assert!(env.slack.wait_acked(&sent.envelope_id, WAIT).await);
    env.slack.resend(&sent.envelope_id);
    env.slack.resend(&sent.envelope_id);
    env.wait_thread_posts(&sent.ts, 1).await;
    let acks = env
        .slack
        .acks()
        .into_iter()
        .filter(|a| a.envelope_id == sent.envelope_id)
        .count();
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.slack
                .acks()
                .into_iter()
                .filter(|a| a.envelope_id == sent.envelope_id)
                .count()
                == 3
        })
        .await;
    assert!(ok, "every delivery is acknowledged (saw {acks})");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(env.model.requests_for(q).len(), 1);
    assert_eq!(env.thread_posts(&sent.ts).len(), 1);
    env.assert_clean();
}

#[tokio::test]
async fn reconnects_after_a_disconnect_message() {
    let env = Env::new().await;
    let q = "still there?";
    env.model.script(q, vec![Reply::text("yes")]);
    let _daemon = env.start().await;
    let before = env.slack.connections_opened();
    env.slack.disconnect_all();
    let reconnected = env
        .slack
        .wait_until(WAIT, || {
            env.slack.connections_opened() > before && env.slack.open_connections() > 0
        })
        .await;
    assert!(reconnected, "no reconnect after disconnect");
    assert!(env.slack.calls_of("apps.connections.open").len() >= 2);
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(posts[0].text, "*PM:* yes");
}

#[tokio::test]
async fn users_outside_the_allow_list_are_told_without_a_model_call() {
    let env = Env::with_config(json!({"access": {"allowedUsers": ["U0BOSS"]}})).await;
    let q = "boss question";
    env.model.script(q, vec![Reply::text("yes boss")]);
    let _daemon = env.start().await;
    let stranger = env.say("can I ask something?");
    let posts = env.wait_thread_posts(&stranger, 1).await;
    assert!(
        posts[0].text.starts_with(
            "*PM:* Sorry, I only take requests from the people on this channel's allow-list"
        ),
        "{}",
        posts[0].text
    );
    let boss = env.slack.user_message(CHANNEL, "U0BOSS", q, None);
    let posts = env.wait_thread_posts(&boss.ts, 1).await;
    assert_eq!(posts[0].text, "*PM:* yes boss");
    assert_eq!(env.model.requests().len(), 1);
}
