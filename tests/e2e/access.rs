//! Who may do what (`access.developers`), end to end: a request from someone who is not a
//! developer gets a plan that waits for a developer, their "yes" starts nothing and names who
//! can approve, a developer's "yes" starts the run, and "merge" from someone who is not a
//! developer leaves the pull request open on origin. And the caps that hold across threads:
//! the repository's and each person's spend per day, each person's Coder calls per hour,
//! with the spend made by runs of the fake model's priced answers.

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::CHANNEL;
use serde_json::json;

use crate::harness::{Env, USER, WAIT, runnerctl, say_and_wait_run, stored_state, thread_with_pr};

/// Someone allowed in the channel who is not a developer.
const BOB: &str = "U0BOB";

/// An env with a runner whose only developer is [`USER`] (Alice).
async fn env_with_developers() -> Env {
    Env::with_runner(json!({
        "coder": {"maxTurns": 6, "timeout": 2},
        "access": {"developers": [USER]}
    }))
    .await
}

/// Bob asks for work: the plan says it waits for Alice; Bob's "yes" gets one answer naming
/// Alice and starts no run (no Coder request, nothing listed by `runnerctl`); Alice's "yes"
/// starts the run, which ends well.
#[tokio::test]
async fn a_non_developers_yes_starts_nothing_and_a_developers_does() {
    let env = env_with_developers().await;
    env.model.script(
        "add a changelog",
        vec![
            Reply::tool_call(
                "ProposePlan",
                json!({"summary": "Work on DEV-GATE", "steps": ["Write CHANGELOG.md"], "files": ["CHANGELOG.md"]})
                    .to_string(),
            ),
            Reply::text("Here is my plan."),
        ],
    );
    env.model.script(
        "DEV-GATE",
        vec![
            crate::harness::write("CHANGELOG.md", "# Changes\n"),
            Reply::text("Wrote the changelog."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env
        .slack
        .user_message(CHANNEL, BOB, "add a changelog", None)
        .ts;
    let plan = env
        .wait_post(&thread, |t| t.contains("Work on DEV-GATE"))
        .await;
    assert!(
        plan.contains("This plan waits for a developer's approval: <@U0ALICE>"),
        "{plan}"
    );

    env.slack.user_message(CHANNEL, BOB, "yes", Some(&thread));
    let refusal = env
        .wait_post(&thread, |t| t.contains("only this channel's developers"))
        .await;
    assert!(refusal.contains("<@U0BOB>"), "{refusal}");
    assert!(refusal.contains("approve a plan"), "{refusal}");
    assert!(refusal.contains("<@U0ALICE>"), "{refusal}");
    assert!(env.model.requests_for("DEV-GATE").is_empty());
    let listed = runnerctl(&env, &["ls", "--json"]).await;
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).trim(),
        "[]",
        "no run for a non-developer's yes"
    );

    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    assert!(!env.model.requests_for("DEV-GATE").is_empty());
    // Bob's "yes" was answered once, whatever came after it.
    assert_eq!(
        env.post_texts(&thread)
            .iter()
            .filter(|t| t.contains("only this channel's developers"))
            .count(),
        1
    );
}

/// "merge" from someone who is not a developer is refused with the developers named, and the
/// pull request stays unmerged: origin's default branch does not move.
#[tokio::test]
async fn merge_from_a_non_developer_is_refused() {
    let env = env_with_developers().await;
    let _daemon = env.start().await;
    let (thread, origin) = thread_with_pr(&env, "DEV-MERGE", vec![]).await;
    let head = git::git(&origin, &["rev-parse", "HEAD"]);
    env.slack.user_message(CHANNEL, BOB, "merge", Some(&thread));
    let refusal = env
        .wait_post(&thread, |t| t.contains("only this channel's developers"))
        .await;
    assert!(refusal.contains("can merge"), "{refusal}");
    assert!(refusal.contains("<@U0ALICE>"), "{refusal}");
    assert_eq!(stored_state(&env, &thread).await, "pr_opened");
    assert_eq!(git::git(&origin, &["rev-parse", "HEAD"]), head);
}

/// Scripts a plan "Work on `token`" for `ask` and a Coder run for it that answers once and
/// ends; waits for the plan's post; returns the thread, started by `user`.
async fn planned_thread(env: &Env, user: &str, ask: &str, token: &str) -> String {
    env.model.script(
        ask,
        vec![
            Reply::tool_call(
                "ProposePlan",
                json!({"summary": format!("Work on {token}"), "steps": ["Look"], "files": []})
                    .to_string(),
            ),
            Reply::text("Plan ready."),
        ],
    );
    env.model
        .script(token, vec![Reply::text(format!("{token} done."))]);
    let thread = env.slack.user_message(CHANNEL, user, ask, None).ts;
    env.wait_post(&thread, |t| t.contains(&format!("Work on {token}")))
        .await;
    thread
}

/// `user` approves the thread's plan; waits for the ✅ or ❌ of its run, or for the refusal.
async fn approve_as(env: &Env, thread: &str, user: &str) -> String {
    let before = env.post_texts(thread).len();
    let yes = env.slack.user_message(CHANNEL, user, "yes", Some(thread));
    let mut outcome = String::new();
    let ok = env
        .slack
        .wait_until(WAIT, || {
            if let Some(r) = env
                .slack
                .reactions()
                .into_iter()
                .find(|r| r.ts == yes.ts && (r.name == "white_check_mark" || r.name == "x"))
            {
                outcome = r.name;
            } else if let Some(t) = env
                .post_texts(thread)
                .into_iter()
                .skip(before)
                .find(|t| t.contains("Not started"))
            {
                outcome = t;
            }
            !outcome.is_empty()
        })
        .await;
    assert!(ok, "no outcome: {:?}", env.post_texts(thread));
    outcome
}

/// The dollar figure after `before` in `text` ("$1.23").
fn dollars_after(text: &str, before: &str) -> f64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} in {text}"));
    let rest = &text[at + before.len()..];
    let figure: String = rest
        .trim_start_matches('$')
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    figure
        .parse()
        .unwrap_or_else(|_| panic!("a figure in {rest}"))
}

/// Each Coder call costs about a dollar here: the Coder model is priced at $0.001 a token.
fn price_the_coder(env: &Env) {
    env.model
        .price(crate::harness::CODER_MODEL, 0.001, 0.001, None);
}

/// The repository spent more than `access.maxCostPerDay` today through a run of the fake
/// model's priced answers: the next approval is refused, naming the cap, the figure spent and
/// the reset at midnight UTC, and no run starts.
#[tokio::test]
async fn an_approval_over_the_repositorys_daily_cap_is_refused_with_the_figure() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 4, "timeout": 2},
        "access": {"maxCostPerDay": 0.5}
    }))
    .await;
    price_the_coder(&env);
    let _daemon = env.start().await;
    let first = planned_thread(&env, USER, "first job", "CAP-DAY-ONE").await;
    assert_eq!(approve_as(&env, &first, USER).await, "white_check_mark");
    let second = planned_thread(&env, USER, "second job", "CAP-DAY-TWO").await;
    let refusal = approve_as(&env, &second, USER).await;
    assert!(
        refusal.contains("this repository's daily cap (`access.maxCostPerDay`, $0.50) is reached"),
        "{refusal}"
    );
    assert!(dollars_after(&refusal, "is reached: ") > 0.5, "{refusal}");
    assert!(refusal.contains("It resets at 00:00 UTC"), "{refusal}");
    assert!(env.model.requests_for("CAP-DAY-TWO").is_empty());
    assert_eq!(env.model.requests_for("CAP-DAY-ONE").len(), 1);
}

/// `access.maxCostPerUserPerDay` holds per person: once Alice's run spent over it, her next
/// approval is refused with her figure, while Bob's approval of another plan still starts
/// its run.
#[tokio::test]
async fn the_per_person_daily_cap_refuses_only_the_person_over_it() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 4, "timeout": 2},
        "access": {"maxCostPerUserPerDay": 0.5}
    }))
    .await;
    price_the_coder(&env);
    let _daemon = env.start().await;
    let first = planned_thread(&env, USER, "alice's first", "CAP-USER-ONE").await;
    assert_eq!(approve_as(&env, &first, USER).await, "white_check_mark");
    let second = planned_thread(&env, USER, "alice's second", "CAP-USER-TWO").await;
    let refusal = approve_as(&env, &second, USER).await;
    assert!(
        refusal
            .contains("<@U0ALICE>'s daily cap (`access.maxCostPerUserPerDay`, $0.50) is reached"),
        "{refusal}"
    );
    assert!(dollars_after(&refusal, "is reached: ") > 0.5, "{refusal}");
    assert!(refusal.contains("It resets at 00:00 UTC"), "{refusal}");
    assert!(env.model.requests_for("CAP-USER-TWO").is_empty());
    // Bob has spent nothing today: his approval starts the run.
    assert_eq!(approve_as(&env, &second, BOB).await, "white_check_mark");
    assert_eq!(env.model.requests_for("CAP-USER-TWO").len(), 1);
}

/// `access.maxClaudeCallsPerHour` counts each person's runs: after Alice's run made its
/// calls, her next approval is refused saying the calls and when one frees up; Bob's starts.
#[tokio::test]
async fn the_hourly_coder_call_cap_is_per_person() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 4, "timeout": 2},
        "access": {"maxClaudeCallsPerHour": 1}
    }))
    .await;
    let _daemon = env.start().await;
    let first = planned_thread(&env, USER, "alice's call", "CAP-CALLS-ONE").await;
    assert_eq!(approve_as(&env, &first, USER).await, "white_check_mark");
    let second = planned_thread(&env, USER, "alice's next call", "CAP-CALLS-TWO").await;
    let refusal = approve_as(&env, &second, USER).await;
    assert!(
        refusal.contains("<@U0ALICE>'s runs made 1 Coder model calls in the last hour, the hourly cap (`access.maxClaudeCallsPerHour`, 1)"),
        "{refusal}"
    );
    assert!(refusal.contains("A call frees up at "), "{refusal}");
    assert!(env.model.requests_for("CAP-CALLS-TWO").is_empty());
    assert_eq!(approve_as(&env, &second, BOB).await, "white_check_mark");
    assert_eq!(env.model.requests_for("CAP-CALLS-TWO").len(), 1);
}

/// The `ts` of the thread's Coder status message.
async fn status_ts(env: &Env, thread: &str) -> String {
    let found = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(thread)
                .iter()
                .any(|p| p.text.starts_with("*Coder:* working on"))
        })
        .await;
    assert!(found, "no status message: {:?}", env.post_texts(thread));
    env.thread_posts(thread)
        .into_iter()
        .find(|p| p.text.starts_with("*Coder:* working on"))
        .map(|p| p.ts)
        .unwrap_or_default()
}

/// Waits until the message `ts` was edited to show `text`.
async fn wait_edit(env: &Env, ts: &str, text: &str) {
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.slack
                .updates()
                .iter()
                .any(|u| u.ts == ts && u.text.contains(text))
        })
        .await;
    let edits: Vec<String> = env
        .slack
        .updates()
        .into_iter()
        .filter(|u| u.ts == ts)
        .map(|u| u.text)
        .collect();
    assert!(ok, "no edit to {text:?}: {edits:?}");
}

/// With one Coder slot (`access.maxConcurrentThreads`) held by a run, two more approved runs
/// wait: each thread's status message shows its place in line; when the first run is
/// stopped the second takes the slot and the third's message moves up to first in line, and
/// when the second is stopped the third runs.
#[tokio::test]
async fn a_queued_run_shows_its_place_and_moves_up_as_runs_finish() {
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 4, "timeout": 2},
        "access": {"maxConcurrentThreads": 1}
    }))
    .await;
    let _daemon = env.start().await;
    // The first run holds the slot: its model takes longer than the test.
    env.model.script(
        "QUEUE-A",
        vec![Reply::delayed(
            std::time::Duration::from_secs(600),
            Reply::text("too late"),
        )],
    );
    env.model.script(
        "hold the slot",
        vec![
            Reply::tool_call(
                "ProposePlan",
                json!({"summary": "Work on QUEUE-A", "steps": ["Wait"], "files": []}).to_string(),
            ),
            Reply::text("Plan ready."),
        ],
    );
    let first = env.say("hold the slot");
    env.wait_post(&first, |t| t.contains("Work on QUEUE-A"))
        .await;
    env.reply(&first, "yes");
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for("QUEUE-A").len() == 1)
            .await,
        "the first run never called its model"
    );

    let second = planned_thread(&env, USER, "second in the queue", "QUEUE-B").await;
    // The second run holds the slot too, once it has it, until it is stopped.
    env.model.respond("QUEUE-B", |_| {
        Reply::delayed(std::time::Duration::from_secs(600), Reply::text("too late"))
    });
    env.reply(&second, "yes");
    let second_status = status_ts(&env, &second).await;
    wait_edit(&env, &second_status, "queued: 1st in line").await;
    let third = planned_thread(&env, USER, "third in the queue", "QUEUE-C").await;
    env.reply(&third, "yes");
    let third_status = status_ts(&env, &third).await;
    wait_edit(&env, &third_status, "queued: 2nd in line").await;
    assert!(env.model.requests_for("QUEUE-B").is_empty());
    assert!(env.model.requests_for("QUEUE-C").is_empty());

    env.reply(&first, "stop");
    wait_edit(&env, &third_status, "queued: 1st in line").await;
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for("QUEUE-B").len() == 1)
            .await,
        "the second run never got the slot"
    );
    assert!(env.model.requests_for("QUEUE-C").is_empty());
    env.reply(&second, "stop");
    env.wait_post(&third, |t| t.contains("QUEUE-C done.")).await;
    assert_eq!(env.model.requests_for("QUEUE-C").len(), 1);
}

/// With `productManager.overBudget`, a question asked once the repository's daily cap is
/// reached is answered by that model (the fake model records which one was asked), and the
/// answer says so, naming the cap and its figure; before the cap, the PM's own model answers.
#[tokio::test]
async fn over_the_daily_cap_the_pm_answers_with_its_over_budget_model() {
    const LEAN: &str = "test/pm-lean";
    let env = Env::with_runner(json!({
        "coder": {"maxTurns": 4, "timeout": 2},
        "access": {"maxCostPerDay": 0.5},
        "productManager": {"overBudget": "lean", "models": {"lean": {"model": LEAN}}}
    }))
    .await;
    env.model.list(LEAN);
    price_the_coder(&env);
    let _daemon = env.start().await;
    let first = planned_thread(&env, USER, "first job", "OVER-BUDGET-ONE").await;
    let asked: Vec<String> = env
        .model
        .requests_for("first job")
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        !asked.is_empty() && asked.iter().all(|m| m == crate::harness::PM_MODEL),
        "{asked:?}"
    );
    assert_eq!(approve_as(&env, &first, USER).await, "white_check_mark");

    env.model.script(
        "what changed today",
        vec![Reply::text("LEAN-ANSWER: the first job landed.")],
    );
    let second = env
        .slack
        .user_message(CHANNEL, BOB, "what changed today", None)
        .ts;
    let answer = env.wait_post(&second, |t| t.contains("LEAN-ANSWER")).await;
    let asked: Vec<String> = env
        .model
        .requests_for("what changed today")
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked, vec![LEAN.to_owned()]);
    assert!(
        answer.contains(&format!(
            "Answered by `{LEAN}` (`productManager.overBudget`)"
        )),
        "{answer}"
    );
    assert!(
        answer.contains("this repository's daily cap (`access.maxCostPerDay`, $0.50;"),
        "{answer}"
    );
}
