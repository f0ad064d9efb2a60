use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http;
use crate::{FakeModel, Reply};

async fn call(fake: &FakeModel, body: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let resp = http()
        .post(format!("{}/chat/completions", fake.base_url()))
        .bearer_auth("sk-or-test")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.json().await.unwrap())
}

fn tools() -> Value {
    json!([{
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }])
}

#[tokio::test]
async fn scripts_follow_their_conversation() {
    let fake = FakeModel::start().await;
    fake.list("m");
    assert!(fake.base_url().starts_with("http://127.0.0.1:"));
    assert!(fake.base_url().ends_with("/v1"));
    fake.list("acme/model-1");
    fake.script(
        "fix the login bug",
        vec![
            Reply::tool_call("read_file", r#"{"path":"src/login.rs"}"#),
            Reply::text("Done: fixed it."),
        ],
    );
    fake.script("write docs", vec![Reply::text("Docs written.")]);

    // First turn of conversation A → tool call.
    let mut messages = vec![
        json!({"role": "system", "content": "You are CodeButler."}),
        json!({"role": "user", "content": "please fix the login bug"}),
    ];
    let (status, _, body) = call(
        &fake,
        &json!({"model": "acme/model-1", "messages": messages, "tools": tools()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "acme/model-1");
    assert_eq!(body["provider"], "Fake");
    assert!(body["id"].as_str().unwrap().starts_with("gen-"));
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call0 = &choice["message"]["tool_calls"][0];
    assert_eq!(call0["type"], "function");
    assert_eq!(call0["function"]["name"], "read_file");
    assert_eq!(call0["function"]["arguments"], r#"{"path":"src/login.rs"}"#);
    let call_id = call0["id"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("call_"));
    let usage = &body["usage"];
    // The tool definitions count among the prompt's tokens, as a provider counts them.
    let prompt_chars =
        tools().to_string().len() + "You are CodeButler.".len() + "please fix the login bug".len();
    assert_eq!(usage["prompt_tokens"], prompt_chars / 4);
    assert_eq!(
        usage["completion_tokens"],
        ("read_file".len() + r#"{"path":"src/login.rs"}"#.len()) / 4 + 1
    );
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(usage["cost"], 0.0001);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);

    // Conversation B in between gets its own script.
    let (status, _, body) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "write docs please"}]}]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["message"]["content"], "Docs written.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");

    // Second turn of A: assistant tool call + tool result.
    messages.push(choice["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": "fn login() {}"}));
    let (status, _, body) = call(
        &fake,
        &json!({"model": "acme/model-1", "messages": messages, "tools": tools()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Done: fixed it.");

    assert_eq!(fake.requests().len(), 3);
    assert_eq!(fake.requests_for("fix the login bug").len(), 2);
    assert_eq!(fake.requests_for("write docs").len(), 1);
    let rec = &fake.requests()[0];
    assert_eq!(rec.authorization.as_deref(), Some("Bearer sk-or-test"));
    assert_eq!(rec.script.as_deref(), Some("fix the login bug"));
    assert_eq!(rec.status, 200);
    assert_eq!(fake.remaining("fix the login bug"), 0);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    assert!(fake.unscripted().is_empty());

    // Script exhausted → 500 + unscripted.
    let (status, _, body) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": "write docs"}]}),
    )
    .await;
    assert_eq!(status, 500);
    assert_eq!(body["error"]["code"], 500);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("fake model: no scripted reply for")
    );
    // No script at all → 500 + unscripted.
    let (status, _, _) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": "something else"}]}),
    )
    .await;
    assert_eq!(status, 500);
    assert_eq!(fake.unscripted().len(), 2);
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn longest_matcher_wins() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.script("bug", vec![Reply::text("short")]);
    fake.script("login bug", vec![Reply::text("long")]);
    let (_, _, body) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": "the login bug"}]}),
    )
    .await;
    assert_eq!(body["choices"][0]["message"]["content"], "long");
}

#[tokio::test]
async fn errors_and_delays() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.script(
        "hello",
        vec![
            Reply::Error {
                status: 429,
                retry_after: Some("3".into()),
                message: "Rate limit exceeded".into(),
            },
            Reply::error(502, "upstream down"),
            Reply::delayed(Duration::from_millis(300), Reply::text("late")),
            Reply::ToolCalls(vec![
                ("a".into(), "{not json".into()),
                ("b".into(), "{}".into()),
            ]),
        ],
    );
    let req = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
    let (status, headers, body) = call(&fake, &req).await;
    assert_eq!(status, 429);
    assert_eq!(headers["retry-after"], "3");
    assert_eq!(
        body,
        json!({"error": {"code": 429, "message": "Rate limit exceeded"}})
    );

    let (status, headers, body) = call(&fake, &req).await;
    assert_eq!(status, 502);
    assert!(headers.get("retry-after").is_none());
    assert_eq!(body["error"]["code"], 502);

    let started = Instant::now();
    let (status, _, body) = call(&fake, &req).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["message"]["content"], "late");

    let (_, _, body) = call(&fake, &req).await;
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["function"]["arguments"], "{not json");
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    assert!(fake.violations().is_empty());
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![429, 502, 200, 200]);
}

#[tokio::test]
async fn protocol_violations_are_rejected_and_recorded() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.script("x", vec![Reply::text("never"); 10]);
    let user = json!({"role": "user", "content": "x"});
    let asst_call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    ]});
    let cases: Vec<(Value, &str)> = vec![
        (json!({"messages": [user]}), "`model`"),
        (json!({"model": "m", "messages": []}), "must not be empty"),
        (
            json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
            "invalid role",
        ),
        (
            json!({"model": "m", "messages": [user, {"role": "tool", "tool_call_id": "call_9", "content": "r"}]}),
            "not an unanswered tool call",
        ),
        (
            json!({"model": "m", "messages": [user, asst_call, {"role": "user", "content": "x again"}]}),
            "comes before the tool results",
        ),
        (
            json!({"model": "m", "messages": [user, asst_call]}),
            "have no tool result",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [{"type": "function", "function": {"name": "bad name!", "parameters": {"type": "object"}}}]}),
            "function.name",
        ),
        (
            json!({"model": "m", "messages": [user], "tools": [{"type": "function", "function": {"name": "ok"}}]}),
            "parameters",
        ),
        (
            json!({"model": "m", "messages": [user, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]}),
            "arguments must be a string",
        ),
    ];
    for (i, (body, needle)) in cases.iter().enumerate() {
        let (status, _, resp) = call(&fake, body).await;
        assert_eq!(status, 400, "case {i}: {resp}");
        assert_eq!(resp["error"]["code"], 400);
        let v = fake.violations();
        assert_eq!(v.len(), i + 1, "case {i}");
        assert!(
            v[i].contains(needle),
            "case {i}: {:?} lacks {needle:?}",
            v[i]
        );
    }
    assert_eq!(
        fake.remaining("x"),
        10,
        "rejected requests consume no reply"
    );

    // Missing key → 401, also a violation.
    let resp = http()
        .post(format!("{}/chat/completions", fake.base_url()))
        .json(&json!({"model": "m", "messages": [user]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert_eq!(fake.violations().len(), cases.len() + 1);

    // Invalid JSON → 400.
    let resp = http()
        .post(format!("{}/chat/completions", fake.base_url()))
        .bearer_auth("k")
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert_eq!(fake.violations().len(), cases.len() + 2);
}

#[tokio::test]
async fn required_api_key() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.require_api_key("sk-right");
    fake.script("hi", vec![Reply::text("ok")]);
    let (status, _, body) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], 401);
    assert_eq!(fake.violations().len(), 1);
}

#[tokio::test]
async fn a_responder_answers_each_request_from_its_content_and_never_runs_out() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.respond("RESPOND", |request| {
        let last = request["messages"].as_array().unwrap().last().unwrap();
        Reply::text(format!("echo {}", last["content"].as_str().unwrap_or("?")))
    });
    assert_eq!(fake.remaining("RESPOND"), usize::MAX);
    for round in 0..3 {
        let messages = json!([
            {"role": "user", "content": "RESPOND please"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": format!("round {round}")},
        ]);
        let (status, _, body) = call(&fake, &json!({"model": "m", "messages": messages})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["choices"][0]["message"]["content"],
            format!("echo round {round}")
        );
    }
    assert_eq!(fake.requests_for("RESPOND").len(), 3);
    assert!(fake.unscripted().is_empty());
}

/// The emulated prompt cache: a breakpoint writes the prompt up to its message; a later
/// request starting with that prefix, with the same model and tools, reads it back, the
/// tools' definitions included, as a provider counts them. Other tools, another model or
/// another beginning read nothing.
#[tokio::test]
async fn the_prompt_cache_serves_a_written_prefix_with_its_tools() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.respond("CACHE-TEST", |_| Reply::text("ok"));
    fake.list("anthropic/claude-sonnet-4.5");
    fake.list("anthropic/claude-opus-4.1");
    let marked = |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]});
    let system = "You are the Coder. ".repeat(20);
    let first = json!({
        "model": "anthropic/claude-sonnet-4.5",
        "tools": tools(),
        "messages": [{"role": "system", "content": system}, marked("CACHE-TEST task")],
    });
    let (status, _, body) = call(&fake, &first).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

    let tools_chars = tools().to_string().len();
    let prefix_chars = tools_chars + system.len() + "CACHE-TEST task".len();
    let mut second = first.clone();
    second["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "and more"}));
    let (_, _, body) = call(&fake, &second).await;
    assert_eq!(
        body["usage"]["prompt_tokens"],
        (prefix_chars + "and more".len()) / 4
    );
    assert_eq!(
        body["usage"]["prompt_tokens_details"]["cached_tokens"],
        prefix_chars / 4
    );

    // The prefix hashes the tools and the model with the messages.
    let mut other_tools = second.clone();
    other_tools["tools"][0]["function"]["description"] = json!("Read a file, changed");
    let (_, _, body) = call(&fake, &other_tools).await;
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let mut other_model = second.clone();
    other_model["model"] = json!("anthropic/claude-opus-4.1");
    let (_, _, body) = call(&fake, &other_model).await;
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn a_prompt_beyond_the_context_window_is_refused_like_a_provider() {
    let fake = FakeModel::start().await;
    fake.list("m");
    fake.script(
        "long one",
        vec![Reply::text("never"), Reply::text("short answer")],
    );
    let long = "x".repeat(crate::model::CONTEXT_LENGTH * 4 + 8);
    let (status, _, body) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": format!("long one {long}")}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("This endpoint's maximum context length is 200000 tokens."),
        "{body}"
    );
    assert_eq!(fake.violations().len(), 1);
    // Nothing of the script was spent on it.
    let (status, _, body) = call(
        &fake,
        &json!({"model": "m", "messages": [{"role": "user", "content": "long one, shorter"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "never");
}

/// `GET /key` answers as OpenRouter's does: the key's details, or 401 for a key the fake
/// does not take.
#[tokio::test]
async fn the_key_is_described_or_refused() {
    let fake = FakeModel::start().await;
    let key = |token: &'static str| {
        let fake = fake.clone();
        async move {
            let resp = http()
                .get(format!("{}/key", fake.base_url()))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = key("sk-or-v1-0123456789abcdef").await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["label"], "sk-or-v1-...def");
    fake.require_api_key("sk-or-v1-other");
    let (status, body) = key("sk-or-v1-0123456789abcdef").await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], 401);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

/// `GET /models` answers in OpenRouter's shape from the models the test listed: text models
/// unless the query asks for other outputs, a price or OpenRouter's `-1`; a request naming a
/// model the fake does not carry is refused as OpenRouter refuses it; a failing list answers
/// OpenRouter's error.
#[tokio::test]
async fn the_model_list_holds_the_listed_models_and_nothing_else_is_served() {
    let fake = FakeModel::start().await;
    fake.list("moonshotai/kimi-k2");
    fake.price(
        "anthropic/claude-opus-4.6",
        0.000005,
        0.000025,
        Some(0.0000005),
    );
    fake.list_image_model("black-forest-labs/flux.2-pro");
    let list = |query: &'static str| {
        let fake = fake.clone();
        async move {
            let resp = http()
                .get(format!("{}/models{query}", fake.base_url()))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            (status, body)
        }
    };
    let ids = |body: &Value| -> Vec<String> {
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, body) = list("").await;
    assert_eq!(status, 200);
    assert_eq!(
        ids(&body),
        ["moonshotai/kimi-k2", "anthropic/claude-opus-4.6"]
    );
    assert_eq!(body["data"][0]["pricing"]["prompt"], "-1");
    assert_eq!(body["data"][1]["pricing"]["prompt"], "0.000005");
    assert_eq!(body["data"][1]["pricing"]["input_cache_read"], "0.0000005");
    let (_, body) = list("?output_modalities=image").await;
    assert_eq!(ids(&body), ["black-forest-labs/flux.2-pro"]);
    assert_eq!(
        body["data"][0]["architecture"]["output_modalities"],
        json!(["image"])
    );
    let (_, body) = list("?output_modalities=all").await;
    assert_eq!(ids(&body).len(), 3);
    let (_, body) = list("?output_modalities=text%2Cimage").await;
    assert_eq!(ids(&body).len(), 3);
    assert_eq!(
        fake.model_list_requests(),
        [
            "",
            "output_modalities=image",
            "output_modalities=all",
            "output_modalities=text%2Cimage"
        ]
    );

    fake.script("hi", vec![Reply::text("ok")]);
    let ask =
        |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, body) = call(&fake, &ask("anthropic/claude-opus-4-6")).await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "anthropic/claude-opus-4-6 is not a valid model ID"
    );
    assert_eq!(fake.violations().len(), 1);
    let (status, _, body) = call(&fake, &ask("anthropic/claude-opus-4.6")).await;
    assert_eq!(status, 200, "{body}");

    fake.fail_model_list(500);
    let (status, body) = list("?output_modalities=all").await;
    assert_eq!(status, 500);
    assert_eq!(body["error"]["code"], 500);
}
