//! What reaches CodeButler besides a message in the channel, end to end: the reaction
//! `triggers.reaction` on a message of the channel (an app's alert) makes it a request
//! thread, once however many react or however often Slack delivers it, and only for people
//! allowed in the channel; `/codebutler status`, `cost` and `help` are answered in the
//! command's acknowledgement, shown to the person alone; opening the app's Home tab publishes
//! the person's open threads, the runs and the day's spend, and publishes it again when one
//! of their threads changes; the start names the trigger scopes the bot token lacks.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{self, CHANNEL, Sent};
use serde_json::json;

use crate::harness::{Env, PM_MODEL, USER, WAIT, user_messages};

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
/// Slack sends no reaction and no direct message, and the start names each missing scope,
/// what stays silent and the manifest.
#[tokio::test]
async fn the_start_names_the_trigger_scopes_the_bot_token_lacks() {
    let env = env_with_reaction().await;
    let scopes: Vec<String> = slack::manifest_bot_scopes()
        .into_iter()
        .filter(|s| {
            ![
                "commands",
                "reactions:read",
                "im:history",
                "app_mentions:read",
            ]
            .contains(&s.as_str())
        })
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
    assert!(
        env.slack.direct_message(USER, "hello?", None).is_none(),
        "Slack sends no direct message without im:history"
    );

    let log = daemon.log();
    for (scope, trigger) in [
        ("commands", "the /codebutler command"),
        (
            "reactions:read",
            "the reaction that makes a message a request",
        ),
        ("im:history", "people's direct messages to the bot"),
        (
            "app_mentions:read",
            "a mention of the bot outside the repositories' channels",
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

/// `/codebutler status`, `cost` and an unknown word, typed in the channel while a thread
/// waits: each answer is shown to the person who typed it alone (the acknowledgement's
/// ephemeral payload), with the thread and the day's spend as the model provider charged it;
/// nothing is posted in the channel. Someone not allowed gets no figures, and the command
/// typed where no repository is served says where it is.
#[tokio::test]
async fn the_command_answers_status_and_cost_to_the_person_alone() {
    let env = Env::with_config(json!({
        "access": {"allowedUsers": [USER, BOB], "maxCostPerDay": 20.0, "maxCostPerUserPerDay": 5.0}
    }))
    .await;
    // A priced PM model: the day's spend is what the provider charged for its calls.
    env.model.price(PM_MODEL, 0.0001, 0.0002, None);
    env.model
        .script("SLOW-CACHE", vec![Reply::text("Which cache do you mean?")]);
    let _daemon = env.start().await;
    let thread = env.say("SLOW-CACHE: the build cache misses every time");
    env.wait_post(&thread, |t| t.contains("Which cache do you mean?"))
        .await;
    assert!(
        env.slack
            .wait_until(WAIT, || env
                .model
                .requests()
                .iter()
                .all(|r| r.charged > 0.0))
            .await
    );
    let posts_before = env.slack.posts().len();

    env.slack.slash_command(CHANNEL, USER, "status").unwrap();
    let status = env.slack.wait_ephemeral_answers(USER, 1, WAIT).await;
    let status = status.first().expect("a status answer");
    assert!(status.contains("*Open threads (1)*"), "{status}");
    assert!(
        status.contains("“SLOW-CACHE: the build cache misses every time” by <@U0ALICE>: planning"),
        "{status}"
    );
    assert!(
        status.contains("*Coder runs:* 0 running, 0 queued"),
        "{status}"
    );

    let charged: f64 = env.model.requests().iter().map(|r| r.charged).sum();
    let team = format!("${charged:.2}");
    assert_ne!(team, "$0.00", "the PM's calls cost something");
    env.slack.slash_command(CHANNEL, USER, "cost").unwrap();
    let answers = env.slack.wait_ephemeral_answers(USER, 2, WAIT).await;
    let cost = &answers[1];
    assert!(
        cost.contains(&format!("• Today: yours $0.00, the team's {team}")),
        "{cost}"
    );
    assert!(
        cost.contains(&format!(
            "• This week (since Monday): yours $0.00, the team's {team}"
        )),
        "{cost}"
    );
    assert!(
        cost.contains("• Caps: the team $20.00 a day, each person $5.00 a day"),
        "{cost}"
    );

    env.slack.slash_command(CHANNEL, BOB, "deploy now").unwrap();
    let help = env.slack.wait_ephemeral_answers(BOB, 1, WAIT).await;
    assert!(help[0].starts_with("I don't know `deploy`."), "{}", help[0]);
    assert!(help[0].contains("`/codebutler status`"), "{}", help[0]);

    env.slack.slash_command(CHANNEL, MALLORY, "cost").unwrap();
    let refused = env.slack.wait_ephemeral_answers(MALLORY, 1, WAIT).await;
    assert!(refused[0].contains("access.allowedUsers"), "{}", refused[0]);
    assert!(!refused[0].contains('$'), "no figures: {}", refused[0]);

    // A channel no repository is served in (a direct message is the repository's: it is
    // tested in tests/e2e/conversations.rs).
    env.slack.slash_command("C0RANDOM", USER, "status").unwrap();
    let elsewhere = env.slack.wait_ephemeral_answers(USER, 3, WAIT).await;
    assert_eq!(
        elsewhere[2],
        "No repository is served in this conversation: use /codebutler in a repository's \
         channel (<#C0CHAN>)."
    );

    let answers = env.slack.command_answers();
    assert_eq!(answers.len(), 5, "{answers:?}");
    assert!(answers.iter().all(|a| a.ephemeral), "{answers:?}");
    assert_eq!(env.slack.posts().len(), posts_before, "nothing posted");
    env.assert_clean();
}

/// Alice opens the app's Home tab while her thread waits: Slack is given a home view (to her)
/// listing that thread with its state and the day's spend as the provider charged it; Bob's
/// Home tab lists no thread of his.
#[tokio::test]
async fn opening_the_home_tab_publishes_the_persons_threads_and_the_day() {
    let env = Env::new().await;
    env.model.price(PM_MODEL, 0.0001, 0.0002, None);
    env.model
        .script("FLAKY-TEST", vec![Reply::text("Which test is flaky?")]);
    let _daemon = env.start().await;
    let thread = env.say("FLAKY-TEST: the login test fails now and then");
    env.wait_post(&thread, |t| t.contains("Which test is flaky?"))
        .await;
    assert!(
        env.slack
            .wait_until(WAIT, || env
                .model
                .requests()
                .iter()
                .all(|r| r.charged > 0.0))
            .await
    );
    let team: f64 = env.model.requests().iter().map(|r| r.charged).sum();

    let opened = env.slack.open_app_home(USER);
    acked(&env, &opened).await;
    assert!(
        env.slack
            .wait_until(WAIT, || env.slack.home_view(USER).is_some())
            .await,
        "no home view published"
    );
    assert_eq!(env.slack.home_view(USER).unwrap()["type"], "home");
    let home = env.slack.home_text(USER);
    assert!(home.contains("*<#C0CHAN>*"), "{home}");
    assert!(
        home.contains("• “FLAKY-TEST: the login test fails now and then”: planning, $"),
        "{home}"
    );
    assert!(home.contains("Coder runs: 0 running, 0 queued"), "{home}");
    assert!(
        home.contains(&format!("yours $0.00, the team's ${team:.2}")),
        "{home}"
    );

    env.slack.open_app_home(BOB);
    assert!(
        env.slack
            .wait_until(WAIT, || env.slack.home_view(BOB).is_some())
            .await
    );
    let bobs = env.slack.home_text(BOB);
    assert!(bobs.contains("No open threads of yours."), "{bobs}");
    assert!(!bobs.contains("FLAKY-TEST"), "{bobs}");
    env.assert_clean();
}

/// Alice opened her Home tab before she had a thread; Bob never opened his. Bob's thread and
/// then Alice's are answered: Alice's Home is published again with her thread in it without
/// her opening it again, and nothing is ever published to Bob.
#[tokio::test]
async fn the_home_tab_is_published_again_when_a_persons_thread_changes() {
    let env = Env::new().await;
    env.model
        .script("BOB-BUILD", vec![Reply::text("Which job is slow?")]);
    env.model
        .script("SLOW-BUILD", vec![Reply::text("Which step is slow?")]);
    let _daemon = env.start().await;
    let opened = env.slack.open_app_home(USER);
    acked(&env, &opened).await;
    assert!(
        env.slack
            .wait_until(WAIT, || env.slack.home_view(USER).is_some())
            .await,
        "no home view published"
    );
    assert!(
        env.slack
            .home_text(USER)
            .contains("No open threads of yours.")
    );

    let bobs = env
        .slack
        .user_message(CHANNEL, BOB, "BOB-BUILD: CI is slow", None)
        .ts;
    env.wait_post(&bobs, |t| t.contains("Which job is slow?"))
        .await;
    let thread = env.say("SLOW-BUILD: the build takes twenty minutes");
    env.wait_post(&thread, |t| t.contains("Which step is slow?"))
        .await;
    let listed = "• “SLOW-BUILD: the build takes twenty minutes”: planning";
    assert!(
        env.slack
            .wait_until(WAIT, || env.slack.home_text(USER).contains(listed))
            .await,
        "the home tab was not published again: {}",
        env.slack.home_text(USER)
    );
    assert!(
        !env.slack.home_text(USER).contains("BOB-BUILD"),
        "{}",
        env.slack.home_text(USER)
    );
    assert_eq!(env.slack.home_view(BOB), None, "Bob never opened his Home");
    env.assert_clean();
}
