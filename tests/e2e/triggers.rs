//! What starts a request besides a message in the channel, end to end: the reaction
//! `triggers.reaction` on a message of the channel (an app's alert) makes it a request
//! thread, once however many react or however often Slack delivers it, and only for people
//! allowed in the channel; the start names the trigger scopes the bot token lacks.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{self, CHANNEL, Sent};
use serde_json::json;

use crate::harness::{Env, USER, WAIT, user_messages};

/// Someone else allowed in the channel.
const BOB: &str = "U0BOB";
/// Someone in the channel who is not in `access.allowedUsers`.
const MALLORY: &str = "U0MALLORY";
/// The request emoji the tests configure.
const EMOJI: &str = "codebutler";

/// An env whose channel takes [`EMOJI`] as the request reaction, allowing Alice and Bob.
async fn env_with_reaction() -> Env {
    Env::with_config(json!({
        "triggers": {"reaction": format!(":{EMOJI}:")},
        "access": {"allowedUsers": [USER, BOB]}
    }))
    .await
}

/// Another app's message in the channel (as Slack sends a `bot_message`): no request by
/// itself.
fn app_alert(env: &Env, text: &str) -> String {
    let ts = env.slack.next_ts();
    env.slack.send_event(json!({
        "type": "message", "subtype": "bot_message", "bot_id": "B0ALERTS",
        "username": "alerts", "channel": CHANNEL, "text": text, "ts": ts,
        "channel_type": "channel"
    }));
    ts
}

/// The model requests whose newest user message holds `text`: one per PM turn asked about it.
fn turns_about(env: &Env, text: &str) -> usize {
    env.model
        .requests()
        .iter()
        .filter(|r| {
            r.body["messages"].is_array()
                && user_messages(&r.body)
                    .last()
                    .is_some_and(|m| m.contains(text))
        })
        .count()
}

async fn acked(env: &Env, sent: &Sent) {
    assert!(
        env.slack.wait_acked(&sent.envelope_id, WAIT).await,
        "event {} not acknowledged",
        sent.event_id
    );
}

/// Alice reacts to an app's alert: the PM answers in the alert's thread, asked about the
/// alert's words as Alice's request. Bob's reaction and Slack delivering Alice's again make
/// no second request: one PM turn, one answer in the thread.
#[tokio::test]
async fn a_reaction_makes_an_apps_message_one_request_thread() {
    let env = env_with_reaction().await;
    env.model.script(
        "CHECKOUT-ALERT",
        vec![
            Reply::text("Looking at the checkout errors."),
            Reply::text("A second answer: the request was taken twice."),
        ],
    );
    let _daemon = env.start().await;
    let alert = app_alert(&env, "CHECKOUT-ALERT: error rate 7% on /checkout");

    let alice = env
        .slack
        .person_reacts(CHANNEL, &alert, USER, EMOJI)
        .expect("Slack sends the reaction");
    let answer = env
        .wait_post(&alert, |t| t.contains("Looking at the checkout errors"))
        .await;
    assert!(!answer.is_empty());
    let asked: Vec<String> = env
        .model
        .requests_for("CHECKOUT-ALERT")
        .iter()
        .flat_map(|r| user_messages(&r.body))
        .filter(|m| m.contains("CHECKOUT-ALERT"))
        .collect();
    assert!(
        asked
            .iter()
            .any(|m| m.contains("<@U0ALICE>") && m.contains("error rate 7% on /checkout")),
        "the PM is asked about the alert as Alice's request: {asked:?}"
    );

    let bob = env
        .slack
        .person_reacts(CHANNEL, &alert, BOB, EMOJI)
        .expect("Slack sends Bob's reaction");
    acked(&env, &bob).await;
    env.slack.resend(&alice.envelope_id);
    assert!(
        env.slack
            .wait_until(WAIT, || env
                .slack
                .acks()
                .iter()
                .filter(|a| a.envelope_id == alice.envelope_id)
                .count()
                >= 2)
            .await
    );
    // A later request in the channel is answered: what came before it has been handled.
    env.model
        .script("LATER-QUESTION", vec![Reply::text("Later answer.")]);
    let later = env.say("LATER-QUESTION: anything else?");
    env.wait_post(&later, |t| t.contains("Later answer")).await;

    assert_eq!(turns_about(&env, "CHECKOUT-ALERT"), 1, "one PM turn");
    assert_eq!(
        env.post_texts(&alert).len(),
        1,
        "{:?}",
        env.post_texts(&alert)
    );
    env.assert_clean();
}

/// A reaction by someone not in `access.allowedUsers`, and another emoji by Alice, start
/// nothing: no PM turn, nothing posted in the alert's thread, while Alice's request
/// reaction on another alert is answered.
#[tokio::test]
async fn a_reaction_by_someone_not_allowed_or_another_emoji_starts_nothing() {
    let env = env_with_reaction().await;
    env.model
        .script("DISK-ALERT", vec![Reply::text("Should not be asked.")]);
    env.model
        .script("QUEUE-ALERT", vec![Reply::text("Looking at the queue.")]);
    let _daemon = env.start().await;
    let disk = app_alert(&env, "DISK-ALERT: /var at 95%");
    let queue = app_alert(&env, "QUEUE-ALERT: 10k jobs waiting");

    let mallory = env
        .slack
        .person_reacts(CHANNEL, &disk, MALLORY, EMOJI)
        .expect("Slack sends Mallory's reaction");
    acked(&env, &mallory).await;
    let eyes = env
        .slack
        .person_reacts(CHANNEL, &disk, USER, "eyes")
        .expect("Slack sends the reaction");
    acked(&env, &eyes).await;
    env.slack.person_reacts(CHANNEL, &queue, USER, EMOJI);
    env.wait_post(&queue, |t| t.contains("Looking at the queue"))
        .await;

    assert_eq!(turns_about(&env, "DISK-ALERT"), 0);
    assert!(
        env.post_texts(&disk).is_empty(),
        "{:?}",
        env.post_texts(&disk)
    );
    env.assert_clean();
}

/// A bot token without the trigger scopes: the service starts and answers the channel,
/// Slack sends no reaction, and the start names each missing scope, what stays silent and
/// the manifest.
#[tokio::test]
async fn the_start_names_the_trigger_scopes_the_bot_token_lacks() {
    let env = env_with_reaction().await;
    let scopes: Vec<String> = slack::manifest_bot_scopes()
        .into_iter()
        .filter(|s| s != "commands" && s != "reactions:read")
        .collect();
    env.slack
        .set_bot_scopes(&scopes.iter().map(String::as_str).collect::<Vec<_>>());
    env.model
        .script("PLAIN-QUESTION", vec![Reply::text("Plain answer.")]);
    let daemon = env.start().await;
    let thread = env.say("PLAIN-QUESTION: how do we deploy?");
    env.wait_post(&thread, |t| t.contains("Plain answer")).await;
    let alert = app_alert(&env, "SILENT-ALERT: nobody hears this");
    assert!(
        env.slack
            .person_reacts(CHANNEL, &alert, USER, EMOJI)
            .is_none(),
        "Slack sends no reaction without reactions:read"
    );

    let log = daemon.log();
    for (scope, trigger) in [
        ("commands", "the /codebutler command"),
        (
            "reactions:read",
            "the reaction that makes a message a request",
        ),
    ] {
        let line = log
            .lines()
            .find(|l| l.contains(&format!("lacks the Slack scope {scope},")))
            .unwrap_or_else(|| panic!("no line names {scope}:\n{log}"));
        assert!(line.contains(trigger), "{line}");
        assert!(line.contains("deploy/slack-app-manifest.yaml"), "{line}");
    }
}
