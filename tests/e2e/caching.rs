//! Prompt caching through OpenRouter: a Claude Coder's calls carry cache breakpoints on the
//! system prompt and the conversation so far, and the cached tokens the provider reports
//! reach the run's usage.

use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{runner_env, runnerctl, stdout};

#[tokio::test]
async fn a_claude_coder_reads_its_growing_prefix_from_the_prompt_cache() {
    let env =
        runner_env(json!({"model": "anthropic/claude-sonnet-4.5", "maxTurns": 6, "timeout": 1}))
            .await;
    env.model.list("anthropic/claude-sonnet-4.5");
    env.model.script(
        "PLAN-CACHED",
        vec![
            Reply::tool_call("Read", r#"{"file_path": "README.md"}"#),
            Reply::tool_call("Bash", r#"{"command": "ls"}"#),
            Reply::tool_call("Grep", r#"{"pattern": "Deploying"}"#),
            Reply::text("Looked around."),
        ],
    );
    let _daemon = env.start().await;
    let plan = env.outside.path().join("plan.md");
    std::fs::write(&plan, "Look around PLAN-CACHED").unwrap();
    let out = runnerctl(&env, &["run", "--plan", plan.to_str().unwrap()]).await;
    assert!(
        stdout(&out).contains("run finished: completed"),
        "{}",
        stdout(&out)
    );

    let requests = env.model.requests_for("PLAN-CACHED");
    assert_eq!(requests.len(), 4);
    for request in &requests {
        let messages = request.body["messages"].as_array().unwrap();
        let marked: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m["content"][0]["cache_control"]["type"] == "ephemeral")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(marked, [0, messages.len() - 1], "breakpoints: {marked:?}");
    }
    assert!(
        env.model.violations().is_empty(),
        "{:?}",
        env.model.violations()
    );

    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&runnerctl(&env, &["ls", "--json"]).await)).unwrap();
    let thread = listed[0]["thread"].as_str().unwrap().to_owned();
    let logs = stdout(&runnerctl(&env, &["logs", &thread, "--json"]).await);
    let usage: Vec<(u64, u64)> = logs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "usage")
        .map(|e| {
            (
                e["promptTokens"].as_u64().unwrap(),
                e["cachedTokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(usage.len(), 4, "{logs}");
    assert_eq!(usage[0].1, 0, "nothing is cached before the first call");
    for (i, (prompt, cached)) in usage.iter().enumerate().skip(1) {
        assert!(
            *cached > 0 && cached < prompt,
            "call {i}: {cached} of {prompt} prompt tokens cached"
        );
    }
}
