//! Talking to CodeButler outside a plain channel message, end to end: `/codebutler pm
//! <model>` switches the model a thread's PM answers with (what the model provider is asked
//! for on the thread's next turn), and refuses a model outside the pool.

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::json;

use crate::harness::{Env, PM_MODEL, USER, WAIT};

/// The second model of the PM's pool the tests configure.
const LEAN_MODEL: &str = "test/lean-model";

/// An env whose PM pool holds `cheap` (the default) and `lean`.
async fn env_with_two_pm_models() -> Env {
    let env = Env::with_config(json!({
        "productManager": {"default": "cheap", "models": {
            "cheap": {"model": PM_MODEL}, "lean": {"model": LEAN_MODEL}
        }}
    }))
    .await;
    env.model.list(LEAN_MODEL);
    env
}

/// The models the provider was asked for by the conversations `matcher` scripts, in order.
fn models_asked(env: &Env, matcher: &str) -> Vec<String> {
    env.model
        .requests_for(matcher)
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Alice's thread talks with the default PM model. `/codebutler pm gigantic` is refused with
/// the pool's keys; `/codebutler pm lean`, typed in the channel, switches her latest open
/// thread: she alone is told, the thread is told who chose what, and the provider is asked
/// for the lean model on the thread's next turn.
#[tokio::test]
async fn the_pm_command_switches_the_model_of_the_persons_latest_thread() {
    let env = env_with_two_pm_models().await;
    env.model.script(
        "COLD-CACHE",
        vec![Reply::text("First answer."), Reply::text("Second answer.")],
    );
    let _daemon = env.start().await;
    let thread = env.say("COLD-CACHE: why is the build cache cold every morning?");
    env.wait_post(&thread, |t| t.contains("First answer."))
        .await;

    env.slack
        .slash_command(CHANNEL, USER, "pm gigantic")
        .unwrap();
    let refused = env.slack.wait_ephemeral_answers(USER, 1, WAIT).await;
    assert!(
        refused[0].contains("`gigantic` is not in the PM's pool"),
        "{}",
        refused[0]
    );
    assert!(refused[0].contains("`cheap`, `lean`"), "{}", refused[0]);

    env.slack.slash_command(CHANNEL, USER, "pm lean").unwrap();
    let answers = env.slack.wait_ephemeral_answers(USER, 2, WAIT).await;
    assert!(
        answers[1].contains("answers with `test/lean-model` from its next turn"),
        "{}",
        answers[1]
    );
    assert!(answers[1].contains("COLD-CACHE"), "{}", answers[1]);
    env.wait_post(&thread, |t| {
        t.contains("PM model is now `test/lean-model`, set by <@U0ALICE>")
    })
    .await;

    env.slack
        .user_message(CHANNEL, USER, "and the warm-up job?", Some(&thread));
    env.wait_post(&thread, |t| t.contains("Second answer."))
        .await;
    assert_eq!(models_asked(&env, "COLD-CACHE"), [PM_MODEL, LEAN_MODEL]);

    env.slack.slash_command(CHANNEL, USER, "pm").unwrap();
    let shown = env.slack.wait_ephemeral_answers(USER, 3, WAIT).await;
    assert!(
        shown[2].contains("answers with `test/lean-model` (chosen by <@U0ALICE>)"),
        "{}",
        shown[2]
    );
    assert!(
        shown[2].contains("`lean` (test/lean-model)"),
        "{}",
        shown[2]
    );
    env.assert_clean();
}
