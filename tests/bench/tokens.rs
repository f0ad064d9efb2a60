//! Prompt tokens of a long Coder session, with and without compaction and prompt caching.
//!
//! `cargo bench -p codebutler-controller --bench tokens`
//!
//! One scripted 40-turn session (each turn reads a different 3 KB file, so the conversation
//! grows by about 750 tokens a turn) runs through the real Coder loop, tools and gateway
//! against the fake model:
//! - no compaction (a 1M-token window), a model without explicit caching;
//! - compaction at 80 % of a 16k-token window, the same model;
//! - no compaction, a Claude model (cache breakpoints on the system prompt and last message);
//! - compaction and caching together, with the default head (55 % of the window), and
//!   beside it with no head (only the system prompt and the task before the summary) and
//!   heads of 50 % and 60 % of the window, to show what the head's share trades.
//!
//! Tokens are counted as the fake model counts them (4 characters a token, the tools'
//! definitions included, as a provider counts them) and recorded by the gateway in the
//! store, as in production; the fake's cache follows Anthropic's rules (written at a
//! breakpoint, read back when a later request starts with that prefix, the tools first).
//! Beside the tokens, what the session would cost at Claude Sonnet 4.5's list prices ($3 a
//! million prompt tokens, $3.75 written to the cache, $0.30 read from it, $15 completion):
//! the cached share alone rewards sending more, the cost does not. The figures are
//! deterministic: no timing is involved.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use codebutler_agent::compaction::{Compaction, HEAD_SHARE, SUMMARY_PROMPT};
use codebutler_agent::tool::ToolRegistry;
use codebutler_agent::tools::path::RepoRoot;
use codebutler_controller::config::OpenRouterConfig;
use codebutler_controller::domain::ThreadKey;
use codebutler_controller::gateway::{CallContext, Gateway, RoleModel};
use codebutler_controller::secret::Secret;
use codebutler_controller::store::Store;
use codebutler_runner::agent::{CoderTask, Ending, run_coder};
use codebutler_runner::tools::{BashConfig, coder_tools};
use codebutler_test_support::model::{FakeModel, Reply};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TURNS: usize = 40;
const FILE_BYTES: usize = 3000;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

async fn run() {
    println!(
        "prompt tokens of a {TURNS}-turn Coder session (tokens sent / of which cached / not cached)"
    );
    let claude = "anthropic/claude-sonnet-4.5";
    let gpt = "openai/gpt-5";
    for (name, window, model, head_share) in [
        ("no compaction, no caching", 1_000_000, gpt, HEAD_SHARE),
        (
            "compaction (16k window), no caching",
            16_000,
            gpt,
            HEAD_SHARE,
        ),
        ("no compaction, caching", 1_000_000, claude, HEAD_SHARE),
        (
            "compaction and caching (head 55 %)",
            16_000,
            claude,
            HEAD_SHARE,
        ),
        ("the same, no head", 16_000, claude, 0.0),
        ("the same, head 50 %", 16_000, claude, 0.5),
        ("the same, head 60 %", 16_000, claude, 0.6),
    ] {
        let figures = session(window, model, head_share).await;
        let uncached = figures.sent - figures.cached;
        let caching = model == claude;
        println!(
            "  {name:<38} {:>9} / {:>9} / {:>9}  {:>6.2} % cached  ({} calls, largest prompt {} tokens, ${:.3})",
            figures.sent,
            figures.cached,
            uncached,
            figures.cached as f64 * 100.0 / figures.sent as f64,
            figures.calls,
            figures.largest,
            figures.cost_usd(caching),
        );
        assert!(
            u64::try_from(figures.largest).unwrap() < window,
            "a prompt of {} tokens is over the {window}-token window",
            figures.largest
        );
    }
}

struct Figures {
    sent: i64,
    cached: i64,
    completion: i64,
    calls: usize,
    largest: i64,
}

impl Figures {
    /// What the session would cost at Claude Sonnet 4.5's list prices: with caching, every
    /// uncached prompt token is written to the cache at the last breakpoint (1.25× the
    /// prompt price) and every cached one read (0.1×); without, every prompt token is sent
    /// at the prompt price.
    fn cost_usd(&self, caching: bool) -> f64 {
        const PROMPT: f64 = 3.0;
        let prompt = if caching {
            (self.sent - self.cached) as f64 * PROMPT * 1.25 + self.cached as f64 * PROMPT * 0.1
        } else {
            self.sent as f64 * PROMPT
        };
        (prompt + self.completion as f64 * 15.0) / 1e6
    }
}

async fn session(context_window: u64, model_id: &str, head_share: f64) -> Figures {
    let model = FakeModel::start().await;
    model.list(model_id);
    let mut replies: VecDeque<Reply> = (0..TURNS)
        .map(|i| {
            Reply::tool_call(
                "Read",
                json!({"file_path": format!("src/f{i}.txt")}).to_string(),
            )
        })
        .collect();
    replies.push_back(Reply::text("Read every file."));
    let replies = Mutex::new(replies);
    let summaries = AtomicUsize::new(0);
    let summary = move || {
        let i = summaries.fetch_add(1, Ordering::Relaxed);
        Reply::text(format!("Read files f0 to f{i}; nothing changed yet."))
    };
    let summary = Arc::new(summary);
    // The session's turns, and compaction's summary turns (the conversation, then the
    // instruction) among them.
    model.respond("TOKENS-BENCH", {
        let summary = summary.clone();
        move |body| {
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .map(|m| text_of(&m["content"]))
                .unwrap_or_default();
            if last == SUMMARY_PROMPT {
                summary()
            } else {
                replies.lock().unwrap().pop_front().unwrap()
            }
        }
    });
    // Summary calls over the conversation written out as text (their first user message
    // holds it), when a summary turn would not fit the window.
    model.respond("The conversation so far:", move |_| summary());

    let worktree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(worktree.path().join("src")).unwrap();
    for i in 0..TURNS {
        let line = format!("// file {i}: some code the Coder reads\n");
        let body = line.repeat(FILE_BYTES / line.len());
        std::fs::write(worktree.path().join(format!("src/f{i}.txt")), body).unwrap();
    }
    let root = Arc::new(RepoRoot::new(worktree.path()).unwrap());
    let mut tools = ToolRegistry::new(32 * 1024);
    for tool in coder_tools(root, BashConfig::default()) {
        tools.register(tool);
    }

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).await.unwrap();
    let gateway = Gateway::new(
        &OpenRouterConfig {
            api_key: Secret::new("sk-or-bench"),
            base_url: model.base_url(),
            timeout_secs: 30,
            max_retries: 0,
            breaker_failures: 0,
            breaker_cool_down_secs: 0,
        },
        store.clone(),
    )
    .unwrap();
    let thread = ThreadKey {
        channel: "C1".into(),
        thread_ts: "1.1".into(),
    };
    let role_model = RoleModel::new(
        &gateway,
        CallContext {
            thread: thread.clone(),
            role: "coder",
            model: model_id.into(),
        },
        CancellationToken::new(),
    );
    let task = CoderTask {
        system_prompt: "You are the Coder. ".repeat(200),
        plan: "TOKENS-BENCH: read every file under src/.".into(),
        max_turns: u32::try_from(TURNS).unwrap() + 5,
        timeout: std::time::Duration::from_secs(300),
        resume: Vec::new(),
        disk: None,
    };
    let compaction = Compaction {
        context_window,
        head_share,
        ..Compaction::default()
    };
    let (inbox_tx, mut inbox) = tokio::sync::mpsc::channel(1);
    let (events, mut event_rx) = tokio::sync::mpsc::channel(64);
    let drain = tokio::spawn(async move { while event_rx.recv().await.is_some() {} });
    let (ending, _) = run_coder(&role_model, &tools, task, compaction, &mut inbox, &events).await;
    drop((inbox_tx, events));
    drain.await.unwrap();
    assert!(
        matches!(ending, Ending::Completed { .. }),
        "the session did not complete: {ending:?}"
    );
    assert!(model.violations().is_empty(), "{:?}", model.violations());

    let requests = model.requests();
    let usage = store.usage_totals(&thread).await.unwrap();
    let largest = requests
        .iter()
        .map(|r| {
            let tools = match &r.body["tools"] {
                serde_json::Value::Array(tools) if !tools.is_empty() => {
                    r.body["tools"].to_string().chars().count()
                }
                _ => 0,
            };
            tools
                + r.body["messages"]
                    .as_array()
                    .map_or(0, |m| m.iter().map(message_chars).sum::<usize>())
        })
        .max()
        .unwrap_or(0);
    Figures {
        sent: usage.prompt_tokens,
        cached: usage.cached_tokens,
        completion: usage.completion_tokens,
        calls: requests.len(),
        largest: i64::try_from(largest / 4).unwrap(),
    }
}

/// The text of a message's content: a string, or its text parts.
fn text_of(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).collect()
        }
        _ => String::new(),
    }
}

/// A message's characters as the fake model counts them: its text and its tool calls (the
/// request's tool definitions count beside them).
fn message_chars(m: &serde_json::Value) -> usize {
    let text = match &m["content"] {
        serde_json::Value::String(s) => s.chars().count(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .map(|t| t.chars().count())
            .sum(),
        _ => 0,
    };
    let calls: usize = m["tool_calls"].as_array().map_or(0, |calls| {
        calls
            .iter()
            .map(|c| {
                c["function"]["arguments"].as_str().map_or(0, str::len)
                    + c["function"]["name"].as_str().map_or(0, str::len)
            })
            .sum()
    });
    text + calls
}
