//! Failures: the daemon killed mid-answer, model rate limits and outages, graceful stop.

use std::time::Duration;

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;

use crate::harness::{Env, USER, WAIT, user_messages};

#[tokio::test]
async fn killed_after_the_ack_and_restarted_answers_exactly_once() {
    let env = Env::new().await;
    let q = "how do we deploy?";
    env.model.script(
        q,
        vec![
            // The first attempt never completes: the daemon dies while waiting for it.
            Reply::delayed(Duration::from_secs(30), Reply::text("too late")),
            Reply::text("Run `make deploy`."),
        ],
    );
    let mut daemon = env.start().await;
    let sent = env.slack.user_message(CHANNEL, USER, q, None);
    assert!(env.slack.wait_acked(&sent.envelope_id, WAIT).await);
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for(q).len() == 1)
            .await
    );
    daemon.kill9().await;
    assert!(env.thread_posts(&sent.ts).is_empty());

    let _daemon = env.start().await;
    let posts = env.wait_thread_posts(&sent.ts, 1).await;
    assert_eq!(posts[0].text, "*PM:* Run `make deploy`.");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        env.thread_posts(&sent.ts).len(),
        1,
        "answered more than once"
    );
    assert_eq!(env.model.requests_for(q).len(), 2);
    env.assert_clean();
}

#[tokio::test]
async fn conversation_survives_a_restart() {
    let env = Env::new().await;
    let q = "remember the word pineapple";
    env.model.script(
        q,
        vec![Reply::text("Noted."), Reply::text("You said pineapple.")],
    );
    let mut daemon = env.start().await;
    let thread = env.say(q);
    env.wait_thread_posts(&thread, 1).await;
    daemon.signal("TERM");
    assert!(daemon.wait_exit(WAIT).await.success());

    let _daemon = env.start().await;
    env.reply(&thread, "what was the word?");
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(posts[1].text, "*PM:* You said pineapple.");
    let last = env.model.requests_for(q).pop().unwrap();
    let messages = last.body["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        4,
        "system, first question, first answer, second question"
    );
    assert_eq!(messages[2]["content"], "Noted.");
}

#[tokio::test]
async fn rate_limited_model_call_waits_for_retry_after_then_succeeds() {
    let env = Env::new().await;
    let q = "rate limited question";
    env.model.script(
        q,
        vec![
            Reply::Error {
                status: 429,
                retry_after: Some("1".into()),
                message: "Rate limit exceeded".into(),
            },
            Reply::text("made it"),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(posts[0].text, "*PM:* made it");
    let requests = env.model.requests_for(q);
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After not honoured: {waited:?}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn exhausted_retries_give_a_clear_message_and_keep_the_message() {
    // maxRetries 2 from the harness: three attempts, all failing.
    let env = Env::new().await;
    let q = "will the model come back?";
    let outage = || Reply::Error {
        status: 503,
        retry_after: Some("0".into()),
        message: "no providers available".into(),
    };
    env.model.script(
        q,
        vec![
            outage(),
            outage(),
            outage(),
            Reply::text("Back: first answer."),
            Reply::text("Second answer."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(
        posts[0].text,
        "*PM:* I couldn't reach the model (the provider answered HTTP 503 after 3 attempts). Your message is saved: I'll try it again when you next write in this thread, or when I restart."
    );
    assert_eq!(env.model.requests_for(q).len(), 3);

    // The next message in the thread brings the stored one back: it is asked again, and the
    // new one, there before its answer, joins its turn: one answer for both.
    env.reply(&thread, "try again");
    let posts = env.wait_thread_posts(&thread, 2).await;
    assert_eq!(posts[1].text, "*PM:* Back: first answer.");
    let last = env.model.requests_for(q).pop().unwrap();
    let users = user_messages(&last.body);
    assert_eq!(users.len(), 2);
    assert!(
        users[0].ends_with(q) && users[1].ends_with("try again"),
        "{users:?}"
    );
    // Neither is left for another turn: the next message gets the next answer.
    env.reply(&thread, "and now?");
    let posts = env.wait_thread_posts(&thread, 3).await;
    assert_eq!(posts[2].text, "*PM:* Second answer.");
    assert_eq!(posts.len(), 3);
    assert_eq!(env.model.requests_for(q).len(), 5);
    env.assert_clean();
}

#[tokio::test]
async fn sigterm_lets_work_in_flight_finish_then_exits_cleanly() {
    let env = Env::new().await;
    let q = "slow question";
    env.model.script(
        q,
        vec![Reply::delayed(
            Duration::from_secs(2),
            Reply::text("finished"),
        )],
    );
    let mut daemon = env.start().await;
    let thread = env.say(q);
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for(q).len() == 1)
            .await
    );
    daemon.signal("TERM");
    let status = daemon.wait_exit(WAIT).await;
    assert!(
        status.success(),
        "exit status {status:?}; log:\n{}",
        daemon.log()
    );
    let posts = env.thread_posts(&thread);
    assert_eq!(posts.len(), 1, "work in flight finished before exit");
    assert_eq!(posts[0].text, "*PM:* finished");
    let log = daemon.log();
    assert!(log.contains("INF  shutting down"), "{log}");
    assert!(log.contains("INF  stopped"), "{log}");
    assert!(
        !env.repo_path().join(".codebutler/run/admin.sock").exists(),
        "the admin socket is removed at exit"
    );
}
