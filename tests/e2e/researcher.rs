//! The researcher (`@codebutler.researcher`) end to end, through the real daemon, the fake
//! Slack, the fake model and local web servers: a question goes to the researcher's model,
//! which reads a page with `fetch_url` through the controller's fetch rules; the answer is
//! posted in its voice with a "Sources:" line naming the page fetched; a host the rules
//! refuse is an error to the model and receives no request.

use codebutler_test_support::model::Reply;
use codebutler_test_support::web::PageServer;
use serde_json::{Value, json};

use crate::harness::{Env, PM_MODEL, user_messages};

/// The researcher's model in these tests, listed by the fake provider.
const RESEARCHER_MODEL: &str = "test/researcher-model";

/// The tool results of the request `body`, in order.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect()
}

#[tokio::test]
async fn a_question_is_answered_from_the_pages_fetched_with_their_sources() {
    let docs = PageServer::start(&[(
        "/serde/api",
        "text/html; charset=utf-8",
        "<html><body><h1>serde 2</h1><p>Use <code>from_str_strict</code> now.</p></body></html>",
    )])
    .await;
    let refused = PageServer::start(&[("/secret", "text/plain", "internal")]).await;
    let env = Env::with_config(json!({
        "researcher": {"model": RESEARCHER_MODEL},
        "fetch": {"allowInternalHosts": ["127.0.0.1"]}
    }))
    .await;
    env.model.list(RESEARCHER_MODEL);
    let allowed = docs.url("127.0.0.1", "/serde/api");
    let internal = refused.url("localhost", "/secret");
    env.model.script(
        "RESEARCH-SERDE",
        vec![
            Reply::ToolCalls(vec![
                ("fetch_url".into(), json!({ "url": internal }).to_string()),
                ("fetch_url".into(), json!({ "url": allowed }).to_string()),
            ]),
            Reply::text("Use `from_str_strict`: serde 2 replaced `from_str` with it."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("@codebutler.researcher RESEARCH-SERDE what replaced from_str?");
    let answer = say_and_wait_post_in(&env, &thread).await;
    assert_eq!(
        answer,
        format!(
            "*Researcher:* Use `from_str_strict`: serde 2 replaced `from_str` with it.\n\nSources: <{allowed}>"
        )
    );

    // The researcher's model was asked, with the question; it read the page's text and the
    // refusal of the internal host.
    let asked = env.model.requests_for("RESEARCH-SERDE");
    assert_eq!(asked.len(), 2);
    assert!(asked.iter().all(|r| r.body["model"] == RESEARCHER_MODEL));
    assert_ne!(RESEARCHER_MODEL, PM_MODEL);
    assert!(user_messages(&asked[0].body)[0].contains("what replaced from_str?"));
    let results = tool_results(&asked[1].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("error"), "{results:?}");
    assert!(
        results[1].contains("Use from_str_strict now."),
        "{results:?}"
    );
    assert!(!results[1].contains("<code>"), "{results:?}");
    // The page was fetched once; the refused host received nothing.
    assert_eq!(docs.requests(), ["/serde/api"]);
    assert!(refused.requests().is_empty(), "{:?}", refused.requests());
    env.assert_clean();
}

/// Waits for the researcher's answer in `thread`.
async fn say_and_wait_post_in(env: &Env, thread: &str) -> String {
    env.wait_post(thread, |t| t.starts_with("*Researcher:*"))
        .await
}

#[tokio::test]
async fn without_its_own_model_the_researcher_uses_the_pms() {
    let env = Env::new().await;
    env.model.script(
        "RESEARCH-PM-MODEL",
        vec![Reply::text("Nothing to fetch for that.")],
    );
    let _daemon = env.start().await;
    let thread = env.say("@codebutler.researcher RESEARCH-PM-MODEL anything?");
    let answer = say_and_wait_post_in(&env, &thread).await;
    assert_eq!(answer, "*Researcher:* Nothing to fetch for that.");
    let asked = env.model.requests_for("RESEARCH-PM-MODEL");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].body["model"], PM_MODEL);
    env.assert_clean();
}

/// The researcher's model answers 503: `researcher.fallback` answers instead (never the PM's
/// fallback), and the answer names the model that gave it.
#[tokio::test]
async fn a_failing_researcher_model_gives_way_to_its_own_fallback() {
    const MODEL: &str = "test/researcher";
    const FALLBACK: &str = "test/researcher-fallback";
    const PM_FALLBACK: &str = "test/pm-fallback";
    let env = Env::with_config(json!({
        "openrouter": {"maxRetries": 0},
        "productManager": {"fallback": PM_FALLBACK},
        "researcher": {"model": MODEL, "fallback": FALLBACK}
    }))
    .await;
    for model in [MODEL, FALLBACK, PM_FALLBACK] {
        env.model.list(model);
    }
    env.model.respond("RESEARCH-FALLBACK", |body| {
        if body["model"] == MODEL {
            Reply::error(503, "overloaded")
        } else {
            Reply::text(format!(
                "Answered by {}.",
                body["model"].as_str().unwrap_or("?")
            ))
        }
    });
    let _daemon = env.start().await;
    let thread = env.say("@codebutler.researcher RESEARCH-FALLBACK what changed?");
    let answer = say_and_wait_post_in(&env, &thread).await;
    assert_eq!(
        answer,
        format!(
            "*Researcher:* Answered by {FALLBACK}.\n\n_Answered by `{FALLBACK}`: `{MODEL}` is failing, so its fallback stands in._"
        )
    );
    let asked: Vec<Value> = env
        .model
        .requests_for("RESEARCH-FALLBACK")
        .into_iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(asked, [MODEL, FALLBACK]);
    env.assert_clean();
}
