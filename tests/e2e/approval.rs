//! The approval gate's buttons and the thread budget, end to end: Approve/Cancel under a
//! plan, Cancel under a Coder's status message, who may click, the estimate and budget a plan
//! shows, "budget $N", a run stopped at its cap, and interactive payloads that are not ours.

use std::time::Duration;

use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{CHANNEL, Post};
use serde_json::{Value, json};

use crate::harness::{APPROVE, CANCEL_PLAN, CODER_MODEL, Env, STOP_RUN, USER, WAIT, runner_env};

const BOB: &str = "U0BOB";

/// The Coder's limits in these tests.
fn coder() -> Value {
    json!({"maxTurns": 8, "timeout": 2})
}

fn plan(token: &str) -> String {
    json!({"summary": format!("Work on {token}"), "steps": ["Edit README.md"], "files": ["README.md"]})
        .to_string()
}

/// Scripts the PM to propose the plan `token` when asked `ask`, then to answer `later`.
fn script_plan(env: &Env, ask: &str, token: &str, later: &[&str]) {
    let mut replies = vec![
        Reply::tool_call("ProposePlan", plan(token)),
        Reply::text("Here is my plan."),
    ];
    replies.extend(later.iter().map(|t| Reply::text(*t)));
    env.model.script(ask, replies);
}

/// Waits for the thread's post that shows the Approve button; returns it.
async fn plan_post(env: &Env, thread: &str) -> Post {
    let found = env
        .slack
        .wait_until(WAIT, || {
            env.thread_posts(thread)
                .iter()
                .any(|p| env.slack.buttons(CHANNEL, &p.ts).contains(&APPROVE.into()))
        })
        .await;
    assert!(
        found,
        "no plan with buttons: {:?}",
        env.thread_posts(thread)
    );
    env.thread_posts(thread)
        .into_iter()
        .find(|p| env.slack.buttons(CHANNEL, &p.ts).contains(&APPROVE.into()))
        .unwrap()
}

/// The context line that replaced a message's buttons, if any.
fn context_line(env: &Env, ts: &str) -> Option<String> {
    let (_, blocks) = env.slack.shown(CHANNEL, ts)?;
    blocks?
        .as_array()?
        .iter()
        .find(|b| b["type"] == "context")
        .and_then(|b| b["elements"][0]["text"].as_str().map(str::to_owned))
}

async fn runs(env: &Env) -> Vec<Value> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_runnerctl"))
        .arg("--repo")
        .arg(env.repo_path())
        .args(["ls", "--json"])
        .output()
        .await
        .unwrap();
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The main flow with buttons: question → plan with buttons → Approve (clicked twice, as two
/// people racing) → one run that commits and opens a pull request → the PR link in the thread.
#[tokio::test]
async fn the_approve_button_starts_exactly_one_run_through_to_a_pull_request() {
    let env = runner_env(coder()).await;
    git::commit_files(
        env.repo_path(),
        &[(
            ".github/PULL_REQUEST_TEMPLATE.md",
            "## Checklist TEMPLATE-MARK\n- [ ] tests pass\n",
        )],
        "PR template",
    );
    let (bare, _) =
        git::push_to_new_origin(env.repo_path(), &env.outside.path().join("origin.git"));
    script_plan(&env, "mark the deploy section", "BUTTON-FLOW", &[]);
    env.model.script(
        "BUTTON-FLOW",
        vec![
            Reply::tool_call(
                "Edit",
                json!({"file_path": "README.md", "old_string": "## Deploying", "new_string": "## Deploying (marked)"})
                    .to_string(),
            ),
            Reply::tool_call("Bash", r#"{"command": "grep -c marked README.md"}"#),
            Reply::tool_call("GitCommit", r#"{"message": "Mark the deploy section"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Mark it", "body": "Marks it. BUTTON-BODY"}"#),
            Reply::text("Done: the PR is open."),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("mark the deploy section");
    let plan = plan_post(&env, &thread).await;
    assert_eq!(
        env.slack.buttons(CHANNEL, &plan.ts),
        [APPROVE, CANCEL_PLAN],
        "Approve and Cancel under the plan"
    );
    assert!(plan.text.contains("Work on BUTTON-FLOW"), "{}", plan.text);
    assert!(
        plan.text.contains("or type _yes_"),
        "typing works too: {}",
        plan.text
    );

    let first = env.slack.click(CHANNEL, USER, &plan.ts, APPROVE).unwrap();
    let second = env.slack.click(CHANNEL, BOB, &plan.ts, APPROVE).unwrap();
    assert!(env.slack.wait_acked(&first.envelope_id, WAIT).await);
    assert!(env.slack.wait_acked(&second.envelope_id, WAIT).await);

    let base = git::git(
        &env.outside.path().join("origin.git"),
        &["rev-parse", "HEAD"],
    );
    let summary = env
        .wait_post(&thread, |t| t.starts_with("*Coder:* Done: the PR is open."))
        .await;
    assert_eq!(
        summary,
        format!(
            "*Coder:* Done: the PR is open.\n\n{}",
            crate::harness::pushed_line(
                &env.outside.path().join("origin.git"),
                "codebutler/work-on-button-flow",
                &base,
                &["README.md"],
                7
            )
        )
    );
    let posts = env.post_texts(&thread);
    assert!(
        posts.contains(
            &"*Coder:* opened a pull request: https://github.com/acme/app/pull/7".to_owned()
        ),
        "{posts:?}"
    );
    assert_eq!(
        context_line(&env, &plan.ts).as_deref(),
        Some("✅ Approved by <@U0ALICE>")
    );
    assert!(env.slack.buttons(CHANNEL, &plan.ts).is_empty());
    // 👀 then ✅ on the plan message, since the click is not a message of its own. The ✅
    // comes just after the summary is posted.
    assert!(env.wait_reaction(&plan.ts, "white_check_mark").await);
    let names: Vec<String> = env
        .slack
        .reactions()
        .into_iter()
        .filter(|r| r.ts == plan.ts)
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["eyes", "white_check_mark"]);
    // The status message lost its Cancel button when the run ended.
    let status = env
        .thread_posts(&thread)
        .into_iter()
        .find(|p| p.text.starts_with("*Coder:* working on"))
        .unwrap();
    assert!(env.slack.buttons(CHANNEL, &status.ts).is_empty());
    assert!(
        bare.find_reference("refs/heads/codebutler/work-on-button-flow")
            .is_ok(),
        "the branch was pushed"
    );
    assert_eq!(
        runs(&env).await.len(),
        1,
        "the second click started nothing"
    );
    assert_eq!(env.model.requests_for("BUTTON-FLOW").len(), 5);
    // The test command ran in the worktree and saw the edit.
    let after_bash = crate::harness::tool_results(&env.model.requests_for("BUTTON-FLOW")[2].body);
    assert!(after_bash.contains("1\n"), "{after_bash}");
    // The PR body: the model's text, the repository's template, the thread's link.
    let body = codebutler_test_support::gh::gh_pr_body(env.outside.path()).unwrap();
    assert!(body.contains("BUTTON-BODY"), "{body}");
    assert!(body.contains("## Checklist TEMPLATE-MARK"), "{body}");
    let link = format!(
        "https://slack.com/archives/{CHANNEL}/p{}",
        thread.replace('.', "")
    );
    assert!(body.contains(&link), "no thread link {link} in:\n{body}");
    // A redelivery of the same click (Slack retries unacknowledged envelopes) does nothing.
    env.slack.resend(&first.envelope_id);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(&env).await.len(), 1);
    env.assert_clean();
}

/// Cancel under a plan withdraws it: a later "yes" approves nothing.
#[tokio::test]
async fn the_cancel_button_on_a_plan_withdraws_it() {
    let env = Env::new().await;
    script_plan(
        &env,
        "rename the thing",
        "CANCELLED",
        &["What should I change?"],
    );
    let _daemon = env.start().await;
    let thread = env.say("rename the thing");
    let plan = plan_post(&env, &thread).await;
    env.slack
        .click(CHANNEL, USER, &plan.ts, CANCEL_PLAN)
        .unwrap();
    env.wait_post(&thread, |t| t.contains("Plan withdrawn"))
        .await;
    assert_eq!(
        context_line(&env, &plan.ts).as_deref(),
        Some("✖️ Cancelled by <@U0ALICE>")
    );
    assert!(env.slack.buttons(CHANNEL, &plan.ts).is_empty());

    // Nothing is pending now: "yes" goes to the PM.
    env.reply(&thread, "yes");
    env.wait_post(&thread, |t| t == "*PM:* What should I change?")
        .await;
    assert!(env.model.requests_for("CANCELLED").is_empty());
    env.assert_clean();
}

/// Cancel under the Coder's status message stops the run, as "stop" does.
#[tokio::test]
async fn the_cancel_button_on_the_status_message_stops_the_run() {
    let env = runner_env(coder()).await;
    script_plan(&env, "a long job", "LONG-JOB", &[]);
    env.model.script(
        "LONG-JOB",
        vec![
            Reply::tool_call("Bash", r#"{"command": "sleep 300"}"#),
            Reply::text("never"),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("a long job");
    let plan = plan_post(&env, &thread).await;
    env.slack.click(CHANNEL, USER, &plan.ts, APPROVE).unwrap();
    assert!(
        env.slack
            .wait_until(WAIT, || env.model.requests_for("LONG-JOB").len() == 1)
            .await
    );
    // Prepared ahead, the run's first model call can come before its status message is
    // posted (that is recorded once the task went).
    let status_post = || {
        env.thread_posts(&thread)
            .into_iter()
            .find(|p| p.text.starts_with("*Coder:* working on"))
    };
    assert!(
        env.slack.wait_until(WAIT, || status_post().is_some()).await,
        "no status message: {:?}",
        env.post_texts(&thread)
    );
    let status = status_post().unwrap();
    assert_eq!(env.slack.buttons(CHANNEL, &status.ts), [STOP_RUN]);
    env.slack
        .click(CHANNEL, USER, &status.ts, STOP_RUN)
        .unwrap();
    let last = env
        .wait_post(&thread, |t| t.starts_with("*Coder:* cancelled"))
        .await;
    assert!(
        last.starts_with("*Coder:* cancelled: stopped in Slack by <@U0ALICE>"),
        "{last}"
    );
    assert!(env.slack.buttons(CHANNEL, &status.ts).is_empty());
    assert_eq!(env.model.requests_for("LONG-JOB").len(), 1);
    env.assert_clean();
}

/// A click from someone outside `access.allowedUsers` gets a short reply and changes nothing.
#[tokio::test]
async fn a_click_from_someone_not_allowed_changes_nothing() {
    let env = Env::with_config(json!({"access": {"allowedUsers": [USER]}})).await;
    script_plan(&env, "tidy the docs", "NOT-ALLOWED", &[]);
    let _daemon = env.start().await;
    let thread = env.say("tidy the docs");
    let plan = plan_post(&env, &thread).await;
    env.slack.click(CHANNEL, BOB, &plan.ts, APPROVE).unwrap();
    let reply = env.wait_post(&thread, |t| t.contains("allow-list")).await;
    assert!(reply.contains("<@U0BOB>"), "{reply}");
    assert!(reply.contains("Nothing was changed"), "{reply}");
    env.slack
        .click(CHANNEL, BOB, &plan.ts, CANCEL_PLAN)
        .unwrap();
    assert!(
        env.slack
            .wait_until(WAIT, || env
                .thread_posts(&thread)
                .iter()
                .filter(|p| p.text.contains("allow-list"))
                .count()
                == 2)
            .await
    );
    assert_eq!(
        env.slack.buttons(CHANNEL, &plan.ts),
        [APPROVE, CANCEL_PLAN],
        "the buttons stay"
    );
    // A typed approval from the same person is refused the same way.
    env.slack
        .user_message(CHANNEL, BOB, "ship it", Some(&thread));
    assert!(
        env.slack
            .wait_until(WAIT, || env
                .thread_posts(&thread)
                .iter()
                .filter(|p| p.text.contains("allow-list"))
                .count()
                == 3)
            .await
    );
    assert!(env.model.requests_for("NOT-ALLOWED").is_empty());
    assert!(runs(&env).await.is_empty());
}

/// Without earlier runs, the estimate is a typical run at the Coder model's prices, read from
/// the provider's model list.
#[tokio::test]
async fn without_earlier_runs_the_estimate_comes_from_the_models_prices() {
    let env = Env::new().await;
    env.model
        .price(CODER_MODEL, 0.000015, 0.000075, Some(0.0000015));
    env.model.price("openai/gpt-5", 0.00000125, 0.00001, None);
    script_plan(&env, "add a license", "LICENSE-PLAN", &[]);
    let _daemon = env.start().await;
    let thread = env.say("add a license");
    let plan = plan_post(&env, &thread).await;
    // 27,000 fresh and 220,500 cached prompt tokens and 6,000 completion tokens at those prices.
    assert!(
        plan.text.contains(
            "💰 *Estimate:* about $1.19 (a typical run at this model's prices; no earlier runs here yet)"
        ),
        "{}",
        plan.text
    );
}

/// The plan shows an estimate and the budget it runs under; "budget $N" changes the budget.
#[tokio::test]
async fn the_plan_shows_its_budget_and_budget_commands_change_it() {
    let env = Env::with_config(json!({"coder": {"maxCostPerThread": 4}})).await;
    script_plan(&env, "add a changelog", "CHANGELOG", &[]);
    let _daemon = env.start().await;
    let thread = env.say("add a changelog");
    let plan = plan_post(&env, &thread).await;
    assert!(
        plan.text.contains(
            "💰 *Estimate:* no estimate yet (no earlier runs in this repository) · *Budget:* $4.00 for this thread"
        ),
        "{}",
        plan.text
    );
    env.reply(&thread, "budget $5");
    env.wait_post(&thread, |t| {
        t.contains("Budget for this thread set to $5.00")
    })
    .await;
    env.reply(&thread, "set budget to $7.50");
    let ack = env.wait_post(&thread, |t| t.contains("set to $7.50")).await;
    assert!(
        ack.contains("Approving the plan approves this budget too"),
        "{ack}"
    );
    // Budget commands are not for the PM's model.
    let pm_calls = env.model.requests_for("add a changelog");
    assert_eq!(pm_calls.len(), 2, "only the plan's two PM calls");
}

/// The controller refuses the thread's Coder calls once its budget is spent, and the thread
/// says so plainly with how to raise it.
#[tokio::test]
async fn a_run_stops_at_the_threads_budget_and_says_so() {
    let env = runner_env(coder()).await;
    script_plan(&env, "small budget job", "CAPPED", &[]);
    env.model.script(
        "CAPPED",
        vec![
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
            Reply::tool_call("Bash", r#"{"command": "true"}"#),
            Reply::text("never"),
        ],
    );
    let _daemon = env.start().await;
    let thread = env.say("small budget job");
    let plan = plan_post(&env, &thread).await;
    // Each fake model call costs $0.0001: two calls fit, the third is refused.
    env.reply(&thread, "budget $0.00015");
    env.wait_post(&thread, |t| t.contains("set to $0.00015"))
        .await;
    env.slack.click(CHANNEL, USER, &plan.ts, APPROVE).unwrap();
    let summary = env
        .wait_post(&thread, |t| t.contains("Budget reached"))
        .await;
    assert!(
        summary.starts_with(
            "*Coder:* Budget reached: this thread's Coder has spent $0.0002 of its $0.00015 budget"
        ),
        "{summary}"
    );
    assert!(summary.contains("`budget $N`"), "{summary}");
    assert!(!summary.contains("refused the model call"), "{summary}");
    assert_eq!(env.model.requests_for("CAPPED").len(), 2);
    env.assert_clean();
}

/// Interactive payloads that are malformed or not ours are acknowledged and ignored; the
/// daemon goes on answering.
#[tokio::test]
async fn malformed_interactive_payloads_are_acked_and_ignored() {
    let env = Env::new().await;
    env.model.script("still there?", vec![Reply::text("Yes.")]);
    let _daemon = env.start().await;
    let sent = [
        env.slack.send_interactive(json!({"type": "block_actions"})),
        env.slack
            .send_interactive(json!({"type": "no_such_interaction", "x": 1})),
        env.slack.send_interactive(json!("not even an object")),
        env.slack.send_interactive(json!({
            "type": "block_actions", "team": {"id": "T0FAKE"}, "user": {"id": USER},
            "api_app_id": "A0FAKE", "trigger_id": "1.2.3",
            "container": {"type": "message", "message_ts": "1.000001", "channel_id": "C0OTHER"},
            "channel": {"id": "C0OTHER"},
            "message": {"type": "message", "ts": "1.000001", "text": "x", "user": "U0BOT"},
            "actions": [{"type": "button", "action_id": APPROVE, "action_ts": "2.000002"}]
        })),
    ];
    for s in &sent {
        assert!(
            env.slack.wait_acked(&s.envelope_id, WAIT).await,
            "envelope {} not acked",
            s.envelope_id
        );
    }
    let thread = env.say("still there?");
    let posts = env.wait_thread_posts(&thread, 1).await;
    assert_eq!(posts[0].text, "*PM:* Yes.");
    assert_eq!(env.slack.posts().len(), 1, "the payloads caused no post");
    env.assert_clean();
}
