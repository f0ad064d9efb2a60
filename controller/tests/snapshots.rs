//! Snapshots of what people and models read, built through the controller's public API: the
//! Slack payload of a plan proposal (text and Approve/Cancel blocks), a running Coder's
//! status blocks, pull request bodies, the PM's and the Coder's system prompts from the
//! shipped defaults, and every tool the PM's model is offered (in a closed thread too, with
//! the closed thread's system prompt). A change to any of them shows as a snapshot diff to review; in CI
//! (`CI` set) insta never writes snapshots and a difference fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use codebutler_agent::tools::path::RepoRoot;
use codebutler_controller::config::OpenRouterConfig;
use codebutler_controller::domain::{Plan, ThreadKey};
use codebutler_controller::gateway::Gateway;
use codebutler_controller::gateway::budget::{Estimate, cost_markdown};
use codebutler_controller::layout::Layout;
use codebutler_controller::pm::{Pm, closed_thread_prompt};
use codebutler_controller::prompts::{coder_system_prompt, pm_system_prompt};
use codebutler_controller::secret::Secret;
use codebutler_controller::slack::effects::Effects;
use codebutler_controller::slack::interactive::{plan_blocks, plan_digest, status_blocks};
use codebutler_controller::store::Store;
use codebutler_controller::workspace::forge::{PrContext, pr_body, thread_link};

fn thread() -> ThreadKey {
    ThreadKey {
        channel: "C0CHANNEL".into(),
        thread_ts: "1700000000.000100".into(),
    }
}

fn plan() -> Plan {
    Plan {
        summary: "Add a login form".into(),
        steps: vec![
            "Add `LoginForm` in src/auth/form.rs".into(),
            "Check the session expiry on submit".into(),
            "Test both paths".into(),
        ],
        files: vec!["src/auth/form.rs".into(), "src/auth/session.rs".into()],
    }
}

/// The effects of a plan proposal as the PM's handler makes them: its answer, the plan with
/// its cost lines, and Approve/Cancel carrying the plan's digest on the last message.
#[test]
fn a_plan_proposal() {
    let plan = plan();
    let cost_line = cost_markdown(&Estimate::from_costs(&[0.42, 0.58, 0.61]), 5.0);
    let markdown = format!(
        "I read src/auth/session.rs; the form fits next to it.\n\n{}",
        plan.proposal_markdown(&cost_line)
    );
    let digest = plan_digest(&serde_json::to_string(&plan).unwrap());
    let effects = Effects::new(&thread())
        .reply_with_blocks(&markdown, "*PM:* ", |text| plan_blocks(text, &digest));
    insta::assert_json_snapshot!(effects.effects());
}

/// A plan proposed with no history to estimate from.
#[test]
fn a_plan_proposal_without_an_estimate() {
    let markdown = plan().proposal_markdown(&cost_markdown(&Estimate::NoHistory, 2.5));
    insta::assert_snapshot!(markdown);
}

/// The status message's blocks (its text, then Cancel), for the status text a run starts
/// with.
#[test]
fn a_coder_status_message() {
    let text = "*Coder:* working on _Add a login form_ in `codebutler/add-a-login-form`\n\
                starting the sandbox…";
    insta::assert_json_snapshot!(status_blocks(text));
}

#[test]
fn a_pr_body_in_the_built_in_layout_with_the_thread_link() {
    let context = PrContext {
        template: None,
        commits: vec!["Add the login form".into(), "Test the login form".into()],
    };
    let link = thread_link(&thread().channel, &thread().thread_ts);
    insta::assert_snapshot!(pr_body(
        &context,
        "Adds a login form that checks the session expiry.\n",
        Some(&link)
    ));
}

#[test]
fn a_pr_body_in_the_repositorys_template_without_a_thread() {
    let context = PrContext {
        template: Some("## What\n\n## Checklist\n- [ ] tests pass\n".into()),
        commits: vec!["Add the login form".into()],
    };
    insta::assert_snapshot!(pr_body(&context, "Adds a login form.", None));
}

/// A repository named `acme` with no prompt files of its own: the shipped defaults.
fn acme() -> (tempfile::TempDir, Layout) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("acme");
    std::fs::create_dir(&repo).unwrap();
    let layout = Layout::new(&repo);
    (dir, layout)
}

#[tokio::test]
async fn the_pm_system_prompt() {
    let (_dir, layout) = acme();
    insta::assert_snapshot!(
        pm_system_prompt(&layout, codebutler_controller::memory::seed::PM_DEFAULT).await
    );
}

#[tokio::test]
async fn the_coder_system_prompt() {
    let (_dir, layout) = acme();
    insta::assert_snapshot!(coder_system_prompt(&layout, None).await);
}

/// The PM of the repository `layout`, with its store in `dir` and a gateway never called.
async fn pm_of(dir: &tempfile::TempDir, layout: Layout) -> Pm {
    let store = Store::open(&dir.path().join("store.db")).await.unwrap();
    let provider = OpenRouterConfig {
        api_key: Secret::new("unused"),
        base_url: "http://127.0.0.1:9".into(),
        timeout_secs: 1,
        max_retries: 0,
        breaker_failures: 0,
        breaker_cool_down_secs: 0,
    };
    let voice_store = store.clone();
    Pm {
        root: Arc::new(RepoRoot::new(&layout.repo).unwrap()),
        gateway: Arc::new(Gateway::new(&provider, store.clone()).unwrap()),
        store,
        model: "pm-model".into(),
        over_budget: None,
        gh: "gh".into(),
        memory: codebutler_controller::memory::source::DefaultBranchMemory::new(&layout.repo),
        write_access: codebutler_controller::workspace::write_access::WriteAccess::new(
            codebutler_controller::config::ReviewFrom::Write,
            "gh".into(),
            layout.repo.clone(),
        ),
        attachments: codebutler_controller::pm::attachments::Attachments {
            fetcher: codebutler_controller::slack::files::FileFetcher::new(
                &Secret::new("xoxb-unused"),
                "http://127.0.0.1:9/api",
            )
            .unwrap(),
            transcriber: codebutler_controller::gateway::transcribe::Transcriber::new(
                &Default::default(),
                &provider,
                &codebutler_controller::config::OpenAiConfig {
                    api_key: None,
                    base_url: "http://127.0.0.1:9/v1".into(),
                },
                voice_store,
            )
            .unwrap(),
            limits: Default::default(),
            layout: layout.clone(),
            configured_models: Vec::new(),
        },
        layout,
    }
}

/// Every tool the PM's model is offered, as the PM builds its list (the repository tools,
/// then the controller's four, then `ask_artist`, offered when the Artist can draw) and in
/// the form sent to the model: name, description and the parameters schema of each, in
/// order.
#[tokio::test]
async fn the_pm_tools() {
    let (dir, layout) = acme();
    let pm = pm_of(&dir, layout).await;
    let handoff = codebutler_controller::pm::artist_handoff::Handoff::default();
    let specs: Vec<serde_json::Value> = pm
        .tools(&thread(), Arc::new(Mutex::new(None)), Some(&handoff))
        .specs()
        .iter()
        .map(|spec| spec.to_openai())
        .collect();
    insta::assert_json_snapshot!(specs);
}

/// The tools the PM's model is offered for a question in a closed thread, in the form sent
/// to the model: the read-only ones, without ProposePlan.
#[tokio::test]
async fn the_pm_tools_in_a_closed_thread() {
    let (dir, layout) = acme();
    let pm = pm_of(&dir, layout).await;
    let specs: Vec<serde_json::Value> = pm
        .read_only_tools()
        .specs()
        .iter()
        .map(|spec| spec.to_openai())
        .collect();
    assert!(
        specs
            .iter()
            .all(|spec| spec["function"]["name"] != "ProposePlan")
    );
    insta::assert_json_snapshot!(specs);
}

/// The PM's system prompt for a question in a closed thread.
#[tokio::test]
async fn the_pm_system_prompt_in_a_closed_thread() {
    let (_dir, layout) = acme();
    insta::assert_snapshot!(closed_thread_prompt(
        &pm_system_prompt(&layout, codebutler_controller::memory::seed::PM_DEFAULT).await
    ));
}
