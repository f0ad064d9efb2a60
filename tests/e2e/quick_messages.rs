//! A request typed as several quick messages gets one PM answer, end to end through the real
//! daemon, the fake Slack and the fake model: the PM's reply is held at a gate the test
//! opens, the next message is typed (and stored: Slack's event acknowledged) while the PM
//! thinks, and the thread gets one answer, written by a model request that held both
//! messages; a message that comes alone afterwards is answered by one request, without any
//! batching of its own; and a daemon killed while the PM thinks answers them once when it
//! starts again.

use codebutler_test_support::model::{Gate, Reply};
use codebutler_test_support::slack::{CHANNEL, Reaction};

use crate::harness::{Env, USER, WAIT, user_messages};

/// The PM's posts in the thread.
fn pm_posts(env: &Env, thread: &str) -> Vec<String> {
    env.post_texts(thread)
        .into_iter()
        .filter(|t| t.starts_with("*PM:*"))
        .collect()
}

/// Types `text` in `thread` and waits until the daemon stored it (Slack's event is
/// acknowledged only once the message is stored).
async fn type_in(env: &Env, thread: &str, text: &str) -> String {
    let sent = env.slack.user_message(CHANNEL, USER, text, Some(thread));
    assert!(env.slack.wait_acked(&sent.envelope_id, WAIT).await);
    sent.ts
}

#[tokio::test]
async fn messages_typed_while_the_pm_thinks_get_one_answer_that_saw_them_all() {
    let env = Env::new().await;
    let gate = Gate::new();
    env.model.script(
        "QUICK-FIRST",
        vec![
            // Written before the second message was seen: never posted.
            Reply::held(&gate, Reply::text("A draft that saw only the first.")),
            Reply::text("One answer for both."),
            Reply::text("The answer to the third."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("QUICK-FIRST: add a notes file");
    let held = env.slack.wait_until(WAIT, || gate.arrived()).await;
    assert!(held, "the PM never asked the model");
    let second = type_in(&env, &thread, "and put it under docs/").await;
    gate.open();

    let answered = env
        .slack
        .wait_until(WAIT, || !pm_posts(&env, &thread).is_empty())
        .await;
    assert!(answered, "{:?}", env.post_texts(&thread));
    // The answer's request held both messages, in order.
    let requests = env.model.requests_for("QUICK-FIRST");
    assert_eq!(requests.len(), 2, "the draft's request, then the answer's");
    let asked = user_messages(&requests[1].body);
    let joined = asked.join("\n");
    assert!(
        joined.contains("QUICK-FIRST: add a notes file")
            && joined.contains("and put it under docs/")
            && joined.find("add a notes file") < joined.find("put it under docs/"),
        "{asked:?}"
    );

    // A message alone afterwards: answered in order after the first answer, by exactly one
    // request of its own. Had the second message been left for a turn of its own, that turn
    // would have come first and taken this reply.
    let third = type_in(&env, &thread, "thanks, what else?").await;
    let done = env
        .slack
        .wait_until(WAIT, || pm_posts(&env, &thread).len() >= 2)
        .await;
    assert!(done, "{:?}", env.post_texts(&thread));
    assert_eq!(
        pm_posts(&env, &thread),
        [
            "*PM:* One answer for both.",
            "*PM:* The answer to the third."
        ]
    );
    let requests = env.model.requests_for("QUICK-FIRST");
    assert_eq!(requests.len(), 3);
    assert_eq!(
        user_messages(&requests[2].body).last().map(String::as_str),
        Some(format!("<@{USER}>: thanks, what else?").as_str())
    );
    // Each message is marked answered (the ✅ follows its answer's post: wait for it).
    let answered_mark = |ts: &String| Reaction {
        channel: CHANNEL.into(),
        ts: ts.clone(),
        name: "white_check_mark".into(),
    };
    let all_marked = env
        .slack
        .wait_until(WAIT, || {
            let reactions = env.slack.reactions();
            [&thread, &second, &third]
                .iter()
                .all(|ts| reactions.contains(&answered_mark(ts)))
        })
        .await;
    assert!(all_marked, "{:?}", env.slack.reactions());
    env.assert_clean();
}

#[tokio::test]
async fn a_daemon_killed_while_the_pm_thinks_answers_both_messages_once_after_its_restart() {
    let env = Env::new().await;
    let gate = Gate::new();
    env.model.script(
        "QUICK-CRASH",
        vec![
            // Never answered: the daemon is killed while it waits.
            Reply::held(&gate, Reply::text("Lost with the daemon.")),
            Reply::text("One answer after the restart."),
        ],
    );
    let mut daemon = env.start().await;
    let thread = env.say("QUICK-CRASH: add a notes file");
    let held = env.slack.wait_until(WAIT, || gate.arrived()).await;
    assert!(held, "the PM never asked the model");
    type_in(&env, &thread, "and put it under docs/").await;
    daemon.kill9().await;

    let _daemon = env.start().await;
    let answered = env
        .slack
        .wait_until(WAIT, || !pm_posts(&env, &thread).is_empty())
        .await;
    assert!(answered, "{:?}", env.post_texts(&thread));
    // Nothing more is pending: a lone message now is answered next, by the next request.
    env.model
        .script("QUICK-CRASH", vec![Reply::text("The answer to the third.")]);
    type_in(&env, &thread, "thanks").await;
    let done = env
        .slack
        .wait_until(WAIT, || pm_posts(&env, &thread).len() >= 2)
        .await;
    assert!(done, "{:?}", env.post_texts(&thread));
    assert_eq!(
        pm_posts(&env, &thread),
        [
            "*PM:* One answer after the restart.",
            "*PM:* The answer to the third."
        ]
    );
    let requests = env.model.requests_for("QUICK-CRASH");
    assert_eq!(requests.len(), 3);
    let asked = user_messages(&requests[1].body).join("\n");
    assert!(
        asked.contains("QUICK-CRASH: add a notes file") && asked.contains("and put it under docs/"),
        "{asked}"
    );
    gate.open();
    env.assert_clean();
}
