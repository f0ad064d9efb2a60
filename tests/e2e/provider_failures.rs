//! A provider's bad day, end to end: a PM model answering server errors is skipped by its
//! breaker while `productManager.fallback` answers (the thread names the fallback, the
//! failing model gets no call until its cool-down), and when no PM model answers the thread
//! says so plainly and the question is answered once the provider is back; a Coder run whose
//! model fails is paused, and "continue" picks it up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{Env, PM_MODEL, WAIT, user_messages};

/// The PM's fallback model in these tests.
const FALLBACK: &str = "test/pm-fallback";

/// An env whose PM falls back to [`FALLBACK`], with the breaker opening after `failures`
/// failures in a row for an hour (longer than any test), and `retries` retries per model.
async fn env_with_fallback(failures: u32, retries: u32) -> Env {
    let env = Env::with_config(json!({
        "openrouter": {"maxRetries": retries, "breakerFailures": failures, "breakerCoolDownSecs": 3600},
        "productManager": {"fallback": FALLBACK}
    }))
    .await;
    env.model.list(FALLBACK);
    env
}

/// The model a request named.
fn model_of(body: &Value) -> &str {
    body["model"].as_str().unwrap_or_default()
}

/// How many requests named `model`.
fn calls_to(env: &Env, model: &str) -> usize {
    env.model
        .requests()
        .iter()
        .filter(|r| model_of(&r.body) == model)
        .count()
}

/// Waits until the thread has `n` posts; returns their texts.
async fn wait_posts(env: &Env, thread: &str, n: usize) -> Vec<String> {
    let ok = env
        .slack
        .wait_until(WAIT, || env.post_texts(thread).len() >= n)
        .await;
    assert!(ok, "fewer than {n} posts: {:?}", env.post_texts(thread));
    env.post_texts(thread)
}

/// The PM's model answers 503 to every call: after two failures its breaker opens, the
/// fallback answers, and the answer says which model gave it; the next question goes to the
/// fallback without calling the failing model again (its cool-down is an hour).
#[tokio::test]
async fn a_failing_pm_model_is_skipped_and_its_fallback_answers_named_in_the_thread() {
    let env = env_with_fallback(2, 3).await;
    env.model.respond("how do we deploy", |body| {
        if model_of(body) == PM_MODEL {
            Reply::error(503, "overloaded")
        } else {
            Reply::text(format!("FALLBACK ANSWER {}", user_messages(body).len()))
        }
    });
    let _daemon = env.start().await;
    let thread = env.say("how do we deploy?");
    let posts = wait_posts(&env, &thread, 1).await;
    assert!(posts[0].starts_with("*PM:* FALLBACK ANSWER 1"), "{posts:?}");
    let named = format!("Answered by `{FALLBACK}`: `{PM_MODEL}` is failing");
    assert_eq!(posts[0].matches(&named).count(), 1, "{posts:?}");
    // The breaker opened at the second failure, before the retries ran out.
    assert_eq!(calls_to(&env, PM_MODEL), 2);

    env.reply(&thread, "and how do we roll back?");
    let posts = wait_posts(&env, &thread, 2).await;
    assert!(posts[1].starts_with("*PM:* FALLBACK ANSWER 2"), "{posts:?}");
    assert_eq!(posts[1].matches(&named).count(), 1, "{posts:?}");
    assert_eq!(
        calls_to(&env, PM_MODEL),
        2,
        "the open breaker skips the PM's model"
    );
    assert_eq!(calls_to(&env, FALLBACK), 2);
}

/// Neither the PM's model nor its fallback answers: the thread says so plainly, naming both;
/// once the provider is back, the next message's answer takes the saved question in too.
#[tokio::test]
async fn no_pm_model_answering_is_said_and_the_question_is_answered_after_recovery() {
    let env = env_with_fallback(100, 0).await;
    let up = Arc::new(AtomicBool::new(false));
    let provider = up.clone();
    env.model.respond("what does the Makefile do", move |body| {
        if provider.load(Ordering::SeqCst) {
            let last = user_messages(body).pop().unwrap_or_default();
            Reply::text(format!("ANSWER to {last}"))
        } else {
            Reply::error(502, "bad gateway")
        }
    });
    let _daemon = env.start().await;
    let thread = env.say("what does the Makefile do?");
    let posts = wait_posts(&env, &thread, 1).await;
    assert!(
        posts[0].starts_with("*PM:* No PM model answered ("),
        "{posts:?}"
    );
    assert!(posts[0].contains(&format!("`{PM_MODEL}`: the provider answered HTTP 502")));
    assert!(posts[0].contains(&format!("`{FALLBACK}`: the provider answered HTTP 502")));
    assert!(posts[0].contains("Your message is saved"), "{posts:?}");

    up.store(true, Ordering::SeqCst);
    env.reply(&thread, "anything?");
    // The saved question and the new message are answered together, in one answer whose
    // request held both, in order (messages waiting for the PM join one turn).
    let posts = wait_posts(&env, &thread, 2).await;
    assert!(
        posts[1].starts_with("*PM:* ANSWER to <@U0ALICE>: anything?"),
        "{posts:?}"
    );
    let answered = env.model.requests_for("what does the Makefile do");
    let asked = user_messages(&answered.last().expect("a request").body);
    let saved = asked
        .iter()
        .position(|m| m.contains("what does the Makefile do?"));
    let new = asked.iter().position(|m| m.contains("anything?"));
    assert!(saved.is_some() && saved < new, "{asked:?}");
    // Nothing is answered twice: the next message gets the next answer.
    env.reply(&thread, "thanks");
    let posts = wait_posts(&env, &thread, 3).await;
    assert!(
        posts[2].starts_with("*PM:* ANSWER to <@U0ALICE>: thanks"),
        "{posts:?}"
    );
}

/// The Coder's model answers 503 to its first call: the run is paused, not failed (the
/// thread says so with how to go on, and the approval gets ⏸ rather than ❌); once the
/// provider is back, "continue" picks the run up and it ends well.
#[tokio::test]
async fn a_coder_run_whose_model_fails_is_paused_and_continue_resumes_it() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 6, "timeout": 2},
        "openrouter": {"maxRetries": 0, "breakerFailures": 100}
    }))
    .await;
    let up = Arc::new(AtomicBool::new(false));
    let provider = up.clone();
    env.model.respond("PAUSE-RUN", move |body| {
        if !provider.load(Ordering::SeqCst) {
            return Reply::error(503, "overloaded");
        }
        let wrote = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if wrote {
            Reply::text("RESUMED AND DONE")
        } else {
            crate::harness::write("paused.txt", "written after the pause\n")
        }
    });
    let _daemon = env.start().await;
    let thread = crate::harness::thread_with_plan(&env, "write the pause file", "PAUSE-RUN").await;
    let yes = env.reply(&thread, "yes");
    assert!(
        env.wait_reaction(&yes.ts, "double_vertical_bar").await,
        "{:?}",
        env.post_texts(&thread)
    );
    let posts = env.post_texts(&thread);
    let paused = posts
        .iter()
        .find(|t| t.contains("Paused: no Coder model answered"))
        .unwrap_or_else(|| panic!("no pause in {posts:?}"));
    assert!(paused.contains("HTTP 503"), "{paused}");
    assert!(paused.contains("say *continue*"), "{paused}");
    assert!(
        !env.slack
            .reactions()
            .iter()
            .any(|r| r.ts == yes.ts && r.name == "x"),
        "a pause is not a failure"
    );

    up.store(true, Ordering::SeqCst);
    assert_eq!(
        crate::harness::say_and_wait_run(&env, &thread, "continue").await,
        "white_check_mark"
    );
    assert!(
        env.post_texts(&thread)
            .iter()
            .any(|t| t.contains("RESUMED AND DONE")),
        "{:?}",
        env.post_texts(&thread)
    );
}

/// The Coder's model answers 503: its breaker opens at the first failure, `coder.fallback`
/// answers the run's calls, the run ends well, and its end names the fallback once; the
/// failing model got that one call only.
#[tokio::test]
async fn a_failing_coder_model_gives_way_to_its_fallback_named_at_the_runs_end() {
    const CODER_FALLBACK: &str = "test/coder-fallback";
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 6, "timeout": 2, "fallback": CODER_FALLBACK},
        "openrouter": {"maxRetries": 0, "breakerFailures": 1, "breakerCoolDownSecs": 3600}
    }))
    .await;
    env.model.list(CODER_FALLBACK);
    env.model.respond("CODER-FALLBACK", |body| {
        if model_of(body) != CODER_FALLBACK {
            return Reply::error(503, "overloaded");
        }
        let wrote = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if wrote {
            Reply::text("FALLBACK CODER DONE")
        } else {
            crate::harness::write("fallback.txt", "written by the fallback\n")
        }
    });
    let _daemon = env.start().await;
    let thread =
        crate::harness::thread_with_plan(&env, "write the fallback file", "CODER-FALLBACK").await;
    assert_eq!(
        crate::harness::say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let end = env
        .post_texts(&thread)
        .into_iter()
        .find(|t| t.contains("FALLBACK CODER DONE"))
        .unwrap_or_else(|| panic!("no end in {:?}", env.post_texts(&thread)));
    let named = format!(
        "answered by `{CODER_FALLBACK}`: `{}` was failing",
        crate::harness::CODER_MODEL
    );
    assert_eq!(end.matches(&named).count(), 1, "{end}");
    assert_eq!(calls_to(&env, crate::harness::CODER_MODEL), 1);
    assert_eq!(calls_to(&env, CODER_FALLBACK), 2);
}
