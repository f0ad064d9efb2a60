//! Load benchmark of the real `codebutler` binary against the fakes.
//!
//! `cargo bench -p codebutler-controller --bench daemon`
//!
//! Phase 1, baseline: events the daemon acknowledges without storing (another channel).
//! Phase 2, load: 50 threads, 200 messages per second for `SECONDS` seconds; the fake model
//! answers each call after `MODEL_DELAY`. Reported: event-to-ack latency (stored before the
//! ack) and the controller's own time per message — from the moment the message could start
//! (sent, and its thread's previous reply posted) to its reply being posted, minus the
//! model's delay. The fake's own HTTP handling is inside that figure, so it is an upper bound.
//! Phase 3: 1,000 new threads answered and left idle; the daemon's RSS then, against its RSS
//! just after start.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codebutler_test_support::model::{FakeModel, Reply};
use codebutler_test_support::slack::{self, FakeSlack};
use serde_json::json;

const THREADS: usize = 50;
const RATE: u64 = 200;
const SECONDS: u64 = 10;
const MODEL_DELAY: Duration = Duration::from_millis(20);
const IDLE_THREADS: usize = 1000;
const USER: &str = "U0BENCH";

#[tokio::main]
async fn main() {
    let slack = FakeSlack::start().await;
    let model = FakeModel::start().await;
    // The provider carries the default PM and Coder models the config leaves in place.
    model.list("moonshotai/kimi-k2");
    model.list("anthropic/claude-opus-4.6");
    let total = (RATE * SECONDS) as usize + IDLE_THREADS + 10;
    model.script(
        "",
        (0..total)
            .map(|i| Reply::delayed(MODEL_DELAY, Reply::text(format!("answer {i}"))))
            .collect(),
    );

    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    codebutler_test_support::git::init(repo.path());
    std::fs::write(repo.path().join("README.md"), "# bench\n").unwrap();
    std::fs::write(
        home.path().join("config.json"),
        json!({
            "slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN},
            "openrouter": {"apiKey": "sk-or-bench"}
        })
        .to_string(),
    )
    .unwrap();
    // The daemon checks at start that `gh` is logged in: the fake one is.
    let gh = codebutler_test_support::gh::install_fake_gh(&home.path().join("fake-gh"));
    std::fs::create_dir_all(repo.path().join(".codebutler")).unwrap();
    std::fs::write(
        repo.path().join(".codebutler/config.json"),
        json!({
            "github": {"cli": gh.display().to_string()},
            // The fake does not rate-limit; pacing posts to Slack's real 1/s per channel
            // would measure Slack's limit, not the controller.
            "slack": {"channelID": slack::CHANNEL, "apiUrl": slack.api_url(), "messagesPerSecond": 0},
            "openrouter": {"baseUrl": model.base_url(), "maxRetries": 0}
        })
        .to_string(),
    )
    .unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_codebutler"))
        .arg("--repo")
        .arg(repo.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CODEBUTLER_HOME", home.path())
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(
        slack
            .wait_until(Duration::from_secs(30), || slack.open_connections() > 0)
            .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_start = rss_kib(pid);

    // Phase 1: baseline acks (ignored: another channel).
    let mut baseline = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    for _ in 0..(RATE * 2) {
        tick.tick().await;
        let ts = slack.next_ts();
        let sent = slack.send_event(json!({"type": "message", "channel": "C0ELSEWHERE", "user": USER, "text": "not for us", "ts": ts}));
        baseline.push(sent.envelope_id);
    }
    let baseline_acks = ack_latencies(&slack, &baseline).await;

    // Phase 2: load.
    let mut threads: Vec<Option<String>> = vec![None; THREADS];
    let mut sent = Vec::new(); // (envelope, thread index, sent at)
    for i in 0..(RATE * SECONDS) as usize {
        tick.tick().await;
        let t = i % THREADS;
        let s = slack.user_message(
            slack::CHANNEL,
            USER,
            &format!("question {i}"),
            threads[t].as_deref(),
        );
        if threads[t].is_none() {
            threads[t] = Some(s.ts.clone());
        }
        sent.push((s.envelope_id.clone(), t, slack.sent_at(&s.envelope_id)));
    }
    let envelopes: Vec<String> = sent.iter().map(|(e, _, _)| e.clone()).collect();
    let load_acks = ack_latencies(&slack, &envelopes).await;
    let expected = sent.len();
    let all_answered = slack
        .wait_until(Duration::from_secs(120), || {
            slack.calls_of("chat.postMessage").len() >= expected
        })
        .await;
    assert!(
        all_answered,
        "only {} of {expected} answered",
        slack.calls_of("chat.postMessage").len()
    );

    // Every message was answered exactly once.
    let mut asked: HashMap<String, usize> = HashMap::new();
    for r in model.requests() {
        let last_user = r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .unwrap();
        *asked.entry(last_user).or_default() += 1;
    }
    assert_eq!(
        asked.len(),
        expected,
        "some messages never reached the model"
    );
    assert!(
        asked.values().all(|n| *n == 1),
        "some messages reached the model twice"
    );
    // Replies per thread, in order.
    let thread_index: HashMap<String, usize> = threads
        .iter()
        .enumerate()
        .map(|(i, ts)| (ts.clone().unwrap(), i))
        .collect();
    let mut replies: Vec<Vec<Instant>> = vec![Vec::new(); THREADS];
    for call in slack.calls_of("chat.postMessage") {
        if call.error.is_some() {
            continue;
        }
        let thread = call.params["thread_ts"].as_str().unwrap_or_default();
        if let Some(&t) = thread_index.get(thread) {
            replies[t].push(call.at);
        }
    }
    let mut overhead = Vec::new();
    let mut next_reply = vec![0usize; THREADS];
    let mut previous: Vec<Option<Instant>> = vec![None; THREADS];
    for (_, t, at) in &sent {
        let k = next_reply[*t];
        next_reply[*t] += 1;
        let posted = replies[*t][k];
        let start = previous[*t].map_or(*at, |p| p.max(*at));
        previous[*t] = Some(posted);
        overhead.push(
            posted
                .saturating_duration_since(start)
                .saturating_sub(MODEL_DELAY),
        );
    }

    // Phase 3: 1,000 idle threads.
    let posts_before = slack.calls_of("chat.postMessage").len();
    for i in 0..IDLE_THREADS {
        tick.tick().await;
        slack.user_message(slack::CHANNEL, USER, &format!("idle thread {i}"), None);
    }
    assert!(
        slack
            .wait_until(Duration::from_secs(120), || slack
                .calls_of("chat.postMessage")
                .len()
                >= posts_before + IDLE_THREADS)
            .await
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_idle = rss_kib(pid);

    child.kill().unwrap();
    child.wait().unwrap();

    println!(
        "codebutler daemon benchmark ({THREADS} threads, {RATE} msg/s for {SECONDS} s, model delay {MODEL_DELAY:?})"
    );
    report("ack latency, ignored events (baseline)", &baseline_acks);
    report("ack latency, stored messages", &load_acks);
    report("controller overhead, event to reply", &overhead);
    println!(
        "RSS: {:.1} MiB after start, {:.1} MiB with {IDLE_THREADS} idle threads",
        rss_start as f64 / 1024.0,
        rss_idle as f64 / 1024.0
    );
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

async fn ack_latencies(slack: &FakeSlack, envelopes: &[String]) -> Vec<Duration> {
    let acked = slack
        .wait_until(Duration::from_secs(60), || {
            envelopes.iter().all(|e| slack.is_acked(e))
        })
        .await;
    assert!(acked, "not every event was acknowledged");
    let acks: HashMap<String, Instant> = slack
        .acks()
        .into_iter()
        .map(|a| (a.envelope_id, a.at))
        .collect();
    envelopes
        .iter()
        .map(|e| acks[e].saturating_duration_since(slack.sent_at(e)))
        .collect()
}

fn report(name: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let pct = |p: f64| {
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    };
    println!(
        "{name:<42} n={:<5} p50={:>8.2} ms  p99={:>8.2} ms  max={:>8.2} ms",
        sorted.len(),
        ms(pct(50.0)),
        ms(pct(99.0)),
        ms(*sorted.last().unwrap())
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}
