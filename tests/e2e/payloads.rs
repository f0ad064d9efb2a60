//! What Slack receives for a plan proposal and for a running Coder's status message, as the
//! real daemon sends them to the fake Slack, checked against snapshots (see
//! `controller/tests/snapshots.rs` for the same texts built through the library's API).

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::Post;
use serde_json::{Value, json};

use crate::harness::{Env, runner_env, say_and_wait_run, thread_with_plan};

/// A post's text and blocks, as Slack shows them; the ids Slack gives blocks that came
/// without one (a counter in the fake) are redacted.
fn shown(post: &Post) -> Value {
    let mut blocks = post.blocks.clone().unwrap_or(Value::Null);
    for block in blocks.as_array_mut().into_iter().flatten() {
        if block["block_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("fk"))
        {
            block["block_id"] = json!("[given by Slack]");
        }
    }
    json!({"text": post.text, "blocks": blocks})
}

#[tokio::test]
async fn the_plan_and_status_messages_slack_receives_match_their_snapshots() {
    let env: Env = runner_env(json!({"maxTurns": 5, "timeout": 2})).await;
    env.model
        .script("Work on SNAP-STATUS", vec![Reply::text("Done.")]);
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please look at the snapshots", "SNAP-STATUS").await;
    let plan = env.thread_posts(&thread).remove(0);
    insta::assert_json_snapshot!("plan_proposal_post", shown(&plan));

    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let status = env
        .thread_posts(&thread)
        .into_iter()
        .find(|p| p.text.starts_with("*Coder:* working on"))
        .unwrap();
    insta::assert_json_snapshot!("coder_status_post", shown(&status));
    env.assert_clean();
}
