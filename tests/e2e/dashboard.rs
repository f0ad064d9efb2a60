//! The dashboard and `/metrics`, end to end through the real daemon: it listens only when
//! the global config has a `dashboard` section; with a token, a request without it gets a
//! 401 and one with it the pages; `/api/costs` totals what the fake model charged; `/metrics`
//! read with a Prometheus text-format parser counts the messages the fake Slack sent in; and
//! headless Chromium loads each page, sees a Coder run's events arrive while it runs, and
//! saves screenshots under `target/e2e-dashboard/`.

use std::collections::HashSet;
use std::net::TcpListener;

use codebutler_test_support::model::Reply;
use codebutler_test_support::slack;
use serde_json::{Value, json};

use crate::harness::browser::Browser;
use crate::harness::{
    Env, USER, WAIT, open_store, runner_env, say_and_wait_run, thread_with_plan, write,
};

/// The token the tests configure.
const TOKEN: &str = "dashboard-token-for-tests-5b8e1c";

/// A port free on the loopback now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An env whose global config turns the dashboard on at a free port with `token`.
async fn env_with_dashboard(token: Option<&str>) -> (Env, String) {
    let env = Env::new().await;
    let base = dashboard_on(&env, token);
    (env, base)
}

/// Turns the dashboard on in `env`'s global config, at a free port with `token`; returns
/// its address.
fn dashboard_on(env: &Env, token: Option<&str>) -> String {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut dashboard = json!({"listen": listen});
    if let Some(token) = token {
        dashboard["token"] = json!(token);
    }
    env.write_global(json!({
        "slack": {"botToken": slack::BOT_TOKEN, "appToken": slack::APP_TOKEN},
        "openrouter": {"apiKey": "sk-or-test-key"},
        "dashboard": dashboard,
    }));
    format!("http://{listen}")
}

/// The TCP ports `pid` listens on, read from `/proc` on the host: its socket descriptors
/// matched against the kernel's table of listening sockets.
fn listening_ports(pid: i32) -> Vec<u16> {
    let mut inodes = HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let target = target.to_string_lossy().into_owned();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
            {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address, st (0A: LISTEN), inode.
            if fields.len() > 9 && fields[3] == "0A" && inodes.contains(fields[9]) {
                let port = fields[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

fn client() -> reqwest::Client {
    codebutler_controller::tls::ensure_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn get(url: &str, bearer: Option<&str>) -> (u16, String) {
    let mut request = client().get(url);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// Asks the PM `question` in a new thread and waits for its `answer`; returns the thread.
async fn ask(env: &Env, question: &str, answer: &str) -> String {
    env.model.script(question, vec![Reply::text(answer)]);
    let thread = env.say(question);
    let answered = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread).iter().any(|t| t.contains(answer))
        })
        .await;
    assert!(answered, "no answer in {thread}");
    thread
}

/// What the fake model charged in all, in USD.
fn charged(env: &Env) -> f64 {
    env.model.requests().iter().map(|r| r.charged).sum()
}

#[tokio::test]
async fn the_dashboard_listens_only_when_the_global_config_turns_it_on() {
    let env = Env::new().await;
    let daemon = env.start().await;
    assert_eq!(
        listening_ports(daemon.pid()),
        Vec::<u16>::new(),
        "without a dashboard section the daemon listens on no TCP port"
    );
    drop(daemon);

    let (env, base) = env_with_dashboard(None).await;
    let daemon = env.start().await;
    let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(listening_ports(daemon.pid()), vec![port]);
    // On the loopback without a token every request passes.
    assert_eq!(get(&format!("{base}/"), None).await.0, 200);
}

#[tokio::test]
async fn the_dashboard_needs_its_token_and_its_costs_total_what_the_model_charged() {
    let (env, base) = env_with_dashboard(Some(TOKEN)).await;
    let daemon = env.start().await;
    let thread = ask(
        &env,
        "<b>Fix the login</b> please\nSECOND-LINE-STAYS-IN-SLACK",
        "The login lives in src/auth.",
    )
    .await;
    ask(&env, "what does the Makefile do?", "It deploys.").await;

    // Without the token, or with another, nothing is shown.
    for bearer in [None, Some("dashboard-token-for-tests-5b8e1d")] {
        for path in ["/", "/costs", "/api/costs", "/runs", "/logs", "/metrics"] {
            let (status, body) = get(&format!("{base}{path}"), bearer).await;
            assert_eq!(status, 401, "{path} with {bearer:?}");
            assert!(!body.contains("Fix the login"), "{path}: {body}");
        }
    }

    // With it: the threads, their title escaped and cut to its first line, who started them.
    let (status, page) = get(&format!("{base}/"), Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert!(page.contains(&thread), "{page}");
    assert!(
        page.contains("&lt;b&gt;Fix the login&lt;/b&gt; please"),
        "{page}"
    );
    assert!(!page.contains("<b>Fix the login"), "{page}");
    assert!(!page.contains("SECOND-LINE-STAYS-IN-SLACK"), "{page}");
    assert!(page.contains(USER), "{page}");

    // A browser's first load with ?token= gets an HttpOnly, SameSite=Strict cookie and is
    // sent to the page without the token; the cookie then opens the pages.
    let first = client()
        .get(format!("{base}/costs?token={TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status().as_u16(), 303);
    assert_eq!(first.headers()["location"], "/costs");
    let cookie = first.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(
        !cookie.contains(TOKEN),
        "the cookie holds no token: {cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let with_cookie = client()
        .get(format!("{base}/costs"))
        .header("cookie", pair)
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status().as_u16(), 200);

    // The costs total exactly what the fake model charged for the calls it answered.
    let deadline = std::time::Instant::now() + WAIT;
    let costs = loop {
        let (_, body) = get(&format!("{base}/api/costs"), Some(TOKEN)).await;
        let costs: Value = serde_json::from_str(&body).unwrap();
        let total = costs["total"]["costUsd"].as_f64().unwrap();
        if (total - charged(&env)).abs() < 1e-9 {
            break costs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "costs {costs} against {} charged by the fake model",
            charged(&env)
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let answered = env
        .model
        .requests()
        .iter()
        .filter(|r| r.status == 200)
        .count();
    assert_eq!(costs["total"]["calls"], json!(answered));
    let person = &costs["byPerson"][0];
    assert_eq!(person["key"], USER);
    assert!((person["costUsd"].as_f64().unwrap() - charged(&env)).abs() < 1e-9);
    let repository = env.repo_path().file_name().unwrap().to_string_lossy();
    assert_eq!(costs["byRepository"][0]["key"], json!(repository));
    assert_eq!(costs["byRole"][0]["key"], "pm");
    assert!(costs["byDay"][0]["key"].as_str().unwrap().len() == 10);

    // The token is in no log line.
    assert!(!daemon.log().contains(TOKEN));
}

#[tokio::test]
async fn metrics_count_the_messages_the_fake_slack_sent_in() {
    let (env, base) = env_with_dashboard(Some(TOKEN)).await;
    let _daemon = env.start().await;
    let thread = ask(&env, "first question METRICS-1", "ANSWER-1").await;
    ask(&env, "second question METRICS-2", "ANSWER-2").await;
    // A reply in the first thread, and Slack delivering it a second time: one message.
    env.model
        .script("first question METRICS-1", vec![Reply::text("ANSWER-3")]);
    let reply = env
        .slack
        .user_message(slack::CHANNEL, USER, "and more", Some(&thread));
    env.slack.resend(&reply.envelope_id);
    let answered = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.contains("ANSWER-3"))
        })
        .await;
    assert!(answered);

    let (status, _) = get(&format!("{base}/metrics"), None).await;
    assert_eq!(status, 401);
    let (status, text) = get(&format!("{base}/metrics"), Some(TOKEN)).await;
    assert_eq!(status, 200);
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let value = |name: &str| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    };
    assert_eq!(
        value("codebutler_messages_received_total"),
        env.slack.user_messages_sent(slack::CHANNEL) as f64,
        "{text}"
    );
    let answered = env
        .model
        .requests()
        .iter()
        .filter(|r| r.status == 200)
        .count();
    assert_eq!(
        value("codebutler_model_calls_total"),
        answered as f64,
        "{text}"
    );
    assert!((value("codebutler_model_cost_usd_total") - charged(&env)).abs() < 1e-9);
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "codebutler_ack_seconds_count"),
        "{text}"
    );
}

/// Where the browser test leaves its screenshots: under the build's `target/`.
fn screenshots() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-dashboard")
}

#[tokio::test]
async fn a_browser_loads_each_page_and_sees_a_runs_events_arrive_live() {
    let env = runner_env(json!({})).await;
    let base = dashboard_on(&env, Some(TOKEN));
    env.model.script(
        "LIVE-RUN",
        vec![
            write("notes/live.txt", "written while the dashboard watched\n"),
            Reply::text("Wrote the notes."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "please write <i>live</i> notes", "LIVE-RUN").await;
    let mut browser = Browser::start().await;
    let shots = screenshots();

    // The first load carries the token; the page is then reached without it.
    browser.open(&format!("{base}/?token={TOKEN}")).await;
    assert_eq!(
        browser.eval("location.pathname + location.search").await,
        "/"
    );
    let text = browser.text().await;
    assert!(text.contains("please write <i>live</i> notes"), "{text}");
    assert_eq!(
        browser.eval("document.querySelectorAll('i').length").await,
        0,
        "a thread's text became markup"
    );
    assert_eq!(
        browser.eval("document.cookie").await,
        "",
        "the session cookie is HttpOnly: no script reads it"
    );
    browser.screenshot(&shots.join("threads.png")).await;

    // The runs page follows the runs; the run starts only once it is open.
    browser.open(&format!("{base}/runs")).await;
    assert!(
        browser
            .wait_for("document.getElementById('stream').dataset.stream === 'open'")
            .await,
        "the run events' stream did not open"
    );
    assert_eq!(
        browser
            .eval("document.querySelectorAll('li.run-event').length")
            .await,
        0
    );
    assert_eq!(
        say_and_wait_run(&env, &thread, "go").await,
        "white_check_mark"
    );
    assert!(
        browser
            .wait_for("!!document.querySelector('li.run-event[data-kind=ended]')")
            .await,
        "the run's end never reached the page: {}",
        browser.text().await
    );
    // The events on the page are the run the store recorded, from its start to its end.
    let pool = open_store(&env).await;
    let run_id: String = sqlx::query_scalar("SELECT id FROM runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    let kinds = browser
        .eval(&format!(
            "Array.from(document.querySelectorAll('li.run-event[data-run=\"{run_id}\"]')).map(e => e.dataset.kind)"
        ))
        .await;
    let kinds: Vec<String> = serde_json::from_value(kinds).unwrap();
    for kind in ["started", "turn", "tool", "tool-done", "finished", "ended"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} among {kinds:?}");
    }
    assert_eq!(kinds.last().map(String::as_str), Some("ended"));
    let text = browser.text().await;
    assert!(
        text.contains("notes/live.txt"),
        "the Write's summary: {text}"
    );
    assert!(
        !text.contains("written while the dashboard watched"),
        "the page shows what the Coder wrote: {text}"
    );
    browser.screenshot(&shots.join("runs.png")).await;

    // The log: the kept lines, then new ones as they are written.
    browser.open(&format!("{base}/logs")).await;
    assert!(
        browser
            .wait_for("document.getElementById('log').textContent.includes('listening in channel')")
            .await,
        "the log page has no kept lines: {}",
        browser.text().await
    );
    env.model
        .script("LOG-LINE-AFTER-LOAD", vec![Reply::text("Noted.")]);
    env.say("LOG-LINE-AFTER-LOAD");
    assert!(
        browser
            .wait_for("document.getElementById('log').textContent.includes('LOG-LINE-AFTER-LOAD')")
            .await,
        "a line written after the page opened never reached it"
    );
    assert!(!browser.text().await.contains(TOKEN));
    browser.screenshot(&shots.join("log.png")).await;

    // The costs: every call the fake model answered, in all.
    browser.open(&format!("{base}/costs")).await;
    let total = browser
        .eval("document.getElementById('total').textContent")
        .await;
    assert!(total.as_str().unwrap().contains("model calls"), "{total}");
    browser.screenshot(&shots.join("costs.png")).await;
    for shot in ["threads", "runs", "log", "costs"] {
        let png = std::fs::read(shots.join(format!("{shot}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{shot}.png is no PNG");
    }
}
