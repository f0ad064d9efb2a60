//! Compaction in a real run: the summary is asked as the conversation's next turn (with its
//! tools, so a prompt cache serves it), the run goes on from the conversation's head and
//! the summary, and "continue"
//! after the runner is killed resumes the compacted conversation, read back from the rows
//! appended before and after the compaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codebutler_agent::compaction::SUMMARY_PROMPT;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    WAIT, runner_env, runnerctl, say_and_wait_run, stdout, thread_with_plan, user_messages,
    wait_output,
};

/// Prints 4,000 characters: about 1,000 tokens a turn.
const PRINT: &str = r#"{"command": "head -c 4000 /dev/zero | tr '\\0' x"}"#;

/// A message as it reads, whatever its cache breakpoint (a marked text is a one-part array).
fn plain(m: &serde_json::Value) -> serde_json::Value {
    let mut m = m.clone();
    if let Some(text) = m["content"][0]["text"].as_str() {
        m["content"] = json!(text);
    }
    m
}

#[tokio::test]
async fn continue_after_a_compaction_resumes_the_compacted_conversation() {
    // The turns grow the conversation by about 1,000 tokens each, so it passes 80 % of the
    // window with room for the summary turn (under 90 %).
    let env = runner_env(json!({
        "model": "anthropic/claude-sonnet-4.5",
        "maxTurns": 40,
        "timeout": 2,
        "contextWindow": 20000,
    }))
    .await;
    env.model.list("anthropic/claude-sonnet-4.5");
    let compacted = Arc::new(AtomicBool::new(false));
    env.model.respond("COMPACT-TOKEN", {
        let compacted = compacted.clone();
        move |body| {
            let users = user_messages(body);
            let last = users.last().map(String::as_str);
            if last == Some(SUMMARY_PROMPT) {
                compacted.store(true, Ordering::SeqCst);
                Reply::text("Printed x many times; nothing else to do.")
            } else if last == Some("<@U0ALICE>: continue") {
                Reply::text("Finished after continue.")
            } else if compacted.load(Ordering::SeqCst) {
                Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#)
            } else {
                Reply::tool_call("Bash", PRINT)
            }
        }
    });
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please print a lot", "COMPACT-TOKEN").await;
    env.reply(&thread, "go");
    wait_output(&env, &["logs", &thread], "sleep 300").await;

    let requests = env.model.requests_for("COMPACT-TOKEN");
    let at = requests
        .iter()
        .position(|r| user_messages(&r.body).last().map(String::as_str) == Some(SUMMARY_PROMPT))
        .expect("a summary turn");
    assert!(at >= 2, "compacted after {at} turns");
    assert_eq!(
        requests.len(),
        at + 2,
        "the summary turn, then one turn after it"
    );
    // The summary turn: the last turn's tools and messages, its call and result, then the
    // instruction, so all but the new turn can be read from the cache.
    let (last_turn, summary_turn) = (&requests[at - 1].body, &requests[at].body);
    assert_eq!(summary_turn["tools"], last_turn["tools"]);
    let sent: Vec<_> = last_turn["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(plain)
        .collect();
    let asked: Vec<_> = summary_turn["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(plain)
        .collect();
    assert_eq!(asked.len(), sent.len() + 3);
    assert_eq!(asked[..sent.len()], sent[..]);
    assert_eq!(asked[sent.len()]["role"], "assistant");
    assert_eq!(asked[sent.len() + 1]["role"], "tool");
    // The turn after it: the head (the system prompt, the task and the first turns, word
    // for word: a prefix of what the cache holds) and the summary.
    let after: Vec<_> = requests[at + 1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(plain)
        .collect();
    let head = after.len() - 1;
    assert!(head > 2, "the head keeps turns: {after:?}");
    assert_eq!(after[..head], sent[..head]);
    assert!(
        after[head]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Summary of the work so far")),
        "{after:?}"
    );
    assert!(user_messages(&requests[at + 1].body)[0].contains("COMPACT-TOKEN"));

    let show = stdout(&runnerctl(&env, &["show", &thread, "--json"]).await);
    let show: serde_json::Value = serde_json::from_str(&show).unwrap();
    let pid = show["runnerPid"].as_i64().expect("a running run has a pid");
    // The runner process this test's daemon started, and only that one.
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(&thread)
                .last()
                .is_some_and(|p| p.text.contains("Say *continue*"))
        })
        .await;
    assert!(ok, "{:?}", env.thread_posts(&thread));

    assert_eq!(
        say_and_wait_run(&env, &thread, "continue").await,
        "white_check_mark"
    );
    assert_eq!(
        env.thread_posts(&thread).last().unwrap().text,
        "*Coder:* Finished after continue."
    );
    // The resumed run goes on from the compacted conversation (the sleep call, which has
    // no result, dropped), then "continue".
    let requests = env.model.requests_for("COMPACT-TOKEN");
    assert_eq!(requests.len(), at + 3);
    let resumed = &requests[at + 2].body;
    let compacted_turn: Vec<_> = requests[at + 1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(plain)
        .collect();
    let resumed_messages: Vec<_> = resumed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(plain)
        .collect();
    assert_eq!(
        resumed_messages.len(),
        compacted_turn.len() + 2,
        "{resumed}"
    );
    assert_eq!(
        resumed_messages[1..=compacted_turn.len()],
        compacted_turn[..]
    );
    assert_eq!(
        user_messages(resumed).last().map(String::as_str),
        Some("<@U0ALICE>: continue")
    );
    assert!(
        env.model.violations().is_empty(),
        "{:?}",
        env.model.violations()
    );
}
