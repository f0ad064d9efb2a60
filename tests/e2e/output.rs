//! Reply formatting in Slack: splitting, snippets, Slack's own rate limits.

use codebutler_test_support::model::Reply;

use crate::harness::Env;

#[tokio::test]
async fn long_answers_are_split_and_long_code_is_uploaded() {
    let env = Env::new().await;
    let q = "explain everything";
    let paragraph = "This paragraph explains one part of the system in some detail. ".repeat(20);
    let mut answer = String::new();
    for i in 0..12 {
        answer.push_str(&format!("Part {i}: {paragraph}\n\n"));
    }
    answer.push_str("The new version of `src/auth/session.rs` would be:\n\n```rust\n");
    for i in 0..30 {
        answer.push_str(&format!("pub const LINE_{i}: u32 = {i};\n"));
    }
    answer.push_str("```\n\nAnd a short one:\n\n```sh\nmake deploy\n```\n");
    env.model.script(q, vec![Reply::text(answer)]);
    let _daemon = env.start().await;
    let thread = env.say(q);
    // The reply ends with the text after the snippet: wait for it.
    let ok = env
        .slack
        .wait_until(crate::harness::WAIT, || {
            env.thread_posts(&thread)
                .last()
                .is_some_and(|p| p.text.contains("make deploy"))
        })
        .await;
    assert!(ok, "reply incomplete: {:?}", env.thread_posts(&thread));
    let posts = env.thread_posts(&thread);
    assert!(posts.len() >= 3, "{posts:?}");
    assert!(posts[0].text.starts_with("*PM:* Part 0:"));
    for p in &posts {
        assert!(
            p.text.chars().count() < 4000,
            "post of {} chars",
            p.text.chars().count()
        );
        assert_eq!(
            p.text.matches("```").count() % 2,
            0,
            "unbalanced code fence"
        );
    }
    let all: String = posts
        .iter()
        .map(|p| p.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for i in 0..12 {
        assert!(all.contains(&format!("Part {i}: ")), "part {i} missing");
    }
    assert!(
        all.contains("```\nmake deploy\n```"),
        "short code stays inline"
    );
    assert!(!all.contains("LINE_5"), "long code is not posted inline");
    let uploads = env.slack.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].filename, "session.rs");
    assert_eq!(uploads[0].thread_ts.as_deref(), Some(thread.as_str()));
    assert_eq!(uploads[0].content.lines().count(), 30);
    assert!(uploads[0].content.starts_with("pub const LINE_0: u32 = 0;"));
    env.assert_clean();
}

#[tokio::test]
async fn slack_rate_limits_are_waited_out() {
    let env = Env::new().await;
    let q = "quick one";
    env.model.script(q, vec![Reply::text("done")]);
    env.slack.rate_limit("chat.postMessage", 2, 1);
    let _daemon = env.start().await;
    let thread = env.say(q);
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(posts[0].text, "*PM:* done");
    let calls = env.slack.calls_of("chat.postMessage");
    assert_eq!(calls.len(), 3, "two refused, one accepted");
    let waited = calls[1].at - calls[0].at;
    assert!(
        waited >= std::time::Duration::from_millis(900),
        "Retry-After not honoured: {waited:?}"
    );
}
