//! The steps e2e tests repeat in a Slack thread: a reply, waiting for the bot's reaction on
//! a message, a plan proposed by the scripted PM, a reply that starts a run and its ending
//! reaction, a reply and the post it brings; and the Coder's Write tool call, which many run
//! scripts begin with.

use std::time::Duration;

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{CHANNEL, Sent};
use serde_json::{Value, json};

use super::{Env, USER, WAIT};

/// The `action_id` of a plan's Approve button.
pub const APPROVE: &str = "codebutler_approve";
/// The `action_id` of a plan's Cancel button.
pub const CANCEL_PLAN: &str = "codebutler_cancel_plan";
/// The `action_id` of the Cancel button under a running Coder's status message.
pub const STOP_RUN: &str = "codebutler_stop_run";

impl Env {
    /// Posts `text` as the user in `thread`.
    pub fn reply(&self, thread: &str, text: &str) -> Sent {
        self.slack.user_message(CHANNEL, USER, text, Some(thread))
    }

    /// Waits up to `WAIT` until the message `ts` has the bot's reaction `name`.
    pub async fn wait_reaction(&self, ts: &str, name: &str) -> bool {
        self.wait_reaction_for(ts, name, WAIT).await
    }

    /// Waits up to `timeout` until the message `ts` has the bot's reaction `name`.
    pub async fn wait_reaction_for(&self, ts: &str, name: &str, timeout: Duration) -> bool {
        self.slack
            .wait_until(timeout, || {
                self.slack
                    .reactions()
                    .iter()
                    .any(|r| r.ts == ts && r.name == name)
            })
            .await
    }
}

/// Posts `text` in the thread and waits for the ✅ or ❌ the daemon puts on it when the run
/// it started ends; returns the reaction.
pub async fn say_and_wait_run(env: &Env, thread: &str, text: &str) -> String {
    let msg = env.reply(thread, text);
    let mut ending = String::new();
    let ok =
        env.slack
            .wait_until(WAIT, || {
                let found =
                    env.slack.reactions().into_iter().find(|r| {
                        r.ts == msg.ts && (r.name == "white_check_mark" || r.name == "x")
                    });
                if let Some(r) = found {
                    ending = r.name;
                }
                !ending.is_empty()
            })
            .await;
    assert!(
        ok,
        "the run started by {text:?} never ended; posts: {:?}",
        env.thread_posts(thread)
    );
    ending
}

/// Posts `text` and waits for a post in the thread that starts with `prefix`.
pub async fn say_and_wait_post(env: &Env, thread: &str, text: &str, prefix: &str) -> String {
    let before = env.thread_posts(thread).len();
    env.reply(thread, text);
    let mut found = String::new();
    let ok = env
        .slack
        .wait_until(WAIT, || {
            if let Some(p) = env
                .thread_posts(thread)
                .iter()
                .skip(before)
                .find(|p| p.text.starts_with(prefix))
            {
                found = p.text.clone();
            }
            !found.is_empty()
        })
        .await;
    assert!(
        ok,
        "no {prefix:?} post; posts: {:?}",
        env.thread_posts(thread)
    );
    found
}

/// A thread whose PM proposed a plan with `token` in its summary; returns the thread.
pub async fn thread_with_plan(env: &Env, ask: &str, token: &str) -> String {
    let plan = json!({"summary": format!("Work on {token}"), "steps": ["Do it"], "files": []});
    thread_with_plan_of(env, ask, &plan, "Plan ready.").await
}

/// A thread started with `ask`, whose PM proposed `plan` (the ProposePlan arguments) and
/// then said `answer`; waits for the proposal's post and returns the thread.
pub async fn thread_with_plan_of(env: &Env, ask: &str, plan: &Value, answer: &str) -> String {
    env.model.script(
        ask,
        vec![
            Reply::tool_call("ProposePlan", plan.to_string()),
            Reply::text(answer),
        ],
    );
    let thread = env.say(ask);
    env.wait_thread_posts(&thread, 1).await;
    thread
}

/// The Coder's Write tool call: `content` into `path`.
pub fn write(path: &str, content: &str) -> Reply {
    Reply::tool_call(
        "Write",
        json!({"file_path": path, "content": content}).to_string(),
    )
}
