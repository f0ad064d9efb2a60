//! Coordination between threads end to end, through the real daemon, git, the sandboxed
//! Coder, the fake Slack, the fake model and the fake `gh`: a plan shows the active threads
//! it overlaps (same file, same directory, and the PM's semantic judgement); a malformed
//! judgement finds nothing and breaks nothing; two branches that really conflict are told
//! in both threads, once; a merge tells the overlapping thread what it touched and offers
//! "rebase"; and the channel's merge order is posted once, updated when it changes and left
//! alone when it does not.

use std::time::Duration;

use codebutler_controller::coordination::semantic::REQUEST as OVERLAP_REQUEST;
use codebutler_test_support::gh::number_prs_in_order;
use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use codebutler_test_support::slack::{CHANNEL, Post};
use serde_json::{Value, json};

use crate::harness::{
    Env, WAIT, runner_env, say_and_wait_run, thread_with_plan, thread_with_plan_of, write,
};

/// The plan arguments of ProposePlan.
fn plan(summary: &str, files: &[&str]) -> Value {
    json!({"summary": summary, "steps": ["Do it"], "files": files})
}

/// `text` with each thread's link written as `<name>`, so snapshots do not depend on the
/// fake's timestamps.
fn named(text: &str, threads: &[(&str, &str)]) -> String {
    threads.iter().fold(text.to_owned(), |text, (ts, name)| {
        text.replace(
            &format!(
                "https://slack.com/archives/{CHANNEL}/p{}",
                ts.replace('.', "")
            ),
            &format!("<{name}>"),
        )
    })
}

/// The last post of the thread that carries the plan's buttons.
fn plan_post(env: &Env, thread: &str) -> Post {
    env.thread_posts(thread)
        .into_iter()
        .rev()
        .find(|p| p.blocks.is_some())
        .unwrap_or_else(|| panic!("no plan post: {:?}", env.post_texts(thread)))
}

/// Waits until the thread has a post containing `needle`; returns every such post.
async fn wait_post_with(env: &Env, thread: &str, needle: &str) -> Vec<String> {
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(thread).iter().any(|t| t.contains(needle))
        })
        .await;
    assert!(ok, "no post with {needle:?}: {:?}", env.post_texts(thread));
    with(env, thread, needle)
}

fn with(env: &Env, thread: &str, needle: &str) -> Vec<String> {
    env.post_texts(thread)
        .into_iter()
        .filter(|t| t.contains(needle))
        .collect()
}

/// The bot's posts at the channel's top level.
fn top_level(env: &Env) -> Vec<Post> {
    env.slack
        .posts()
        .into_iter()
        .filter(|p| p.channel == CHANNEL && p.thread_ts.is_none())
        .collect()
}

#[tokio::test]
async fn a_plan_shows_the_active_threads_it_overlaps_at_each_level() {
    let env = Env::new().await;
    // The PM's judgement names the one thread that shares nothing with the new plan.
    env.model.respond(OVERLAP_REQUEST, |body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.contains("Summary: Expire sessions on logout") {
            Reply::text(
                r#"{"overlaps": [{"thread": "T1", "reason": "Both change what a logged-out user sees."}]}"#,
            )
        } else {
            Reply::text(r#"{"overlaps": []}"#)
        }
    });
    let _daemon = env.start().await;
    let a = thread_with_plan_of(
        &env,
        "make sessions shorter",
        &plan("Shorten the session expiry", &["src/auth/session.rs"]),
        "Plan ready.",
    )
    .await;
    let c = thread_with_plan_of(
        &env,
        "add token refresh",
        &plan("Add token refresh", &["src/auth/token.rs"]),
        "Plan ready.",
    )
    .await;
    let d = thread_with_plan_of(
        &env,
        "document the logout page",
        &plan("Document the logout page", &["docs/logout.md"]),
        "Plan ready.",
    )
    .await;
    let b = thread_with_plan_of(
        &env,
        "expire sessions on logout",
        &plan(
            "Expire sessions on logout",
            &["src/auth/session.rs", "src/auth/logout.rs"],
        ),
        "Here is the plan.",
    )
    .await;

    let post = plan_post(&env, &b);
    let text = named(
        &post.text,
        &[(&a, "thread A"), (&c, "thread C"), (&d, "thread D")],
    );
    insta::assert_snapshot!(text);
    // Approving is still offered, as on every plan.
    let actions = post.blocks.unwrap().to_string();
    assert!(actions.contains("codebutler_approve"), "{actions}");
    // The first plan overlapped nothing; the second shares a directory with the first.
    assert!(!plan_post(&env, &a).text.contains("⚠️"));
    assert!(
        plan_post(&env, &c)
            .text
            .contains("⚠️ Also changes files in `src/auth/`"),
        "{}",
        plan_post(&env, &c).text
    );
    // One judgement per plan with other threads sharing nothing: D's (A and C shown) and
    // B's (D shown), recorded as the PM's.
    let asked = env.model.requests_for(OVERLAP_REQUEST);
    assert_eq!(asked.len(), 2, "{asked:?}");
    let shown = asked[1].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        shown.contains("T1: Document the logout page\nFiles: docs/logout.md"),
        "{shown}"
    );
    assert!(!shown.contains("T2:"), "{shown}");
    assert!(
        asked[1].body.get("tools").is_none(),
        "no tools: {}",
        asked[1].body
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_malformed_judgement_finds_nothing_and_the_plan_is_posted() {
    let env = Env::new().await;
    env.model.respond(OVERLAP_REQUEST, |_| {
        Reply::text("Both might touch sessions, so be careful.")
    });
    let daemon = env.start().await;
    let first = thread_with_plan_of(
        &env,
        "make sessions shorter",
        &plan("Shorten the session expiry", &["src/auth/session.rs"]),
        "Plan ready.",
    )
    .await;
    let second = thread_with_plan_of(
        &env,
        "fix the deploy docs",
        &plan("Fix the deploy docs", &["README.md"]),
        "Plan ready.",
    )
    .await;
    let post = plan_post(&env, &second);
    assert!(
        post.text.contains("📋 *Plan:* Fix the deploy docs"),
        "{}",
        post.text
    );
    assert!(!post.text.contains("⚠️"), "{}", post.text);
    assert_eq!(env.model.requests_for(OVERLAP_REQUEST).len(), 1);
    assert!(
        daemon
            .log()
            .contains("semantic overlap: the pm's answer is not the json asked for"),
        "{}",
        daemon.log()
    );
    // The daemon goes on: the first thread still answers.
    env.model
        .script("make sessions shorter", vec![Reply::text("Still here.")]);
    env.reply(&first, "are you there?");
    wait_post_with(&env, &first, "Still here.").await;
    env.assert_clean();
}

/// A Coder run that writes `content` into `path`, commits it and, with `pr`, opens a pull
/// request.
fn run_writing(path: &str, content: &str, pr: bool) -> Vec<Reply> {
    let mut replies = vec![
        write(path, content),
        Reply::tool_call("GitCommit", r#"{"message": "Change it"}"#),
    ];
    if pr {
        replies.push(Reply::tool_call(
            "OpenPR",
            r#"{"title": "Change it", "body": "Changes it."}"#,
        ));
    }
    replies.push(Reply::text("Done."));
    replies
}

#[tokio::test]
async fn conflicting_branches_are_told_in_both_threads_and_a_merge_offers_rebase() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    let _daemon = env.start().await;
    env.model.script(
        "CONFLICT-A",
        run_writing(
            "src/auth/session.rs",
            "pub const SESSION_EXPIRY_SECS: u64 = 60;\n",
            true,
        ),
    );
    env.model.script(
        "CONFLICT-B",
        run_writing(
            "src/auth/session.rs",
            "pub const SESSION_EXPIRY_SECS: u64 = 7200;\n",
            false,
        ),
    );
    let a = thread_with_plan(&env, "shorten the sessions", "CONFLICT-A").await;
    let b = thread_with_plan(&env, "lengthen the sessions", "CONFLICT-B").await;
    assert_eq!(say_and_wait_run(&env, &a, "yes").await, "white_check_mark");
    assert_eq!(say_and_wait_run(&env, &b, "yes").await, "white_check_mark");

    // Both threads hear of the overlap and of the real conflict, each once.
    let names = [(a.as_str(), "thread A"), (b.as_str(), "thread B")];
    for (thread, other) in [(&a, "thread B"), (&b, "thread A")] {
        let conflict = wait_post_with(&env, thread, "would conflict").await;
        assert_eq!(conflict.len(), 1, "{conflict:?}");
        let overlap = with(&env, thread, "both change");
        assert_eq!(overlap.len(), 1, "{overlap:?}");
        let said = named(&format!("{}\n{}", overlap[0], conflict[0]), &names);
        assert!(said.contains(&format!("<{other}>")), "{said}");
        assert!(said.contains("`src/auth/session.rs`"), "{said}");
    }
    let in_a = named(&with(&env, &a, "would conflict")[0], &names);
    assert_eq!(
        in_a,
        "*PM:* ⚠️ Merging this branch and <<thread B>|Work on CONFLICT-B> would conflict in `src/auth/session.rs`. Whichever merges second will need *rebase* and a look at those files."
    );
    let in_b = named(&with(&env, &b, "would conflict")[0], &names);
    assert_eq!(
        in_b,
        "*PM:* ⚠️ Merging this branch and <<thread A>|Work on CONFLICT-A>, PR #7 would conflict in `src/auth/session.rs`. Whichever merges second will need *rebase* and a look at those files."
    );
    // The conflict is real: git itself cannot merge the two branches.
    let main = git2::Repository::open(env.repo_path()).unwrap();
    let head = |slug: &str| {
        main.find_reference(&format!("refs/heads/codebutler/{slug}"))
            .unwrap()
            .peel_to_commit()
            .unwrap()
    };
    let merged = main
        .merge_commits(
            &head("work-on-conflict-a"),
            &head("work-on-conflict-b"),
            None,
        )
        .unwrap();
    assert!(merged.has_conflicts());

    // PR #7 merges: thread B is told what it touched, and offered rebase, once.
    env.reply(&a, "merge");
    let told = wait_post_with(&env, &b, "just merged").await;
    assert_eq!(
        named(&told[0], &names),
        "*PM:* ℹ️ PR #7 (<<thread A>|Work on CONFLICT-A>) just merged and changed `src/auth/session.rs`, which this thread also changes. Reply *rebase* to bring this branch up to date."
    );
    wait_post_with(&env, &a, "PR #7 merged").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(with(&env, &b, "just merged").len(), 1);
    assert!(with(&env, &a, "just merged").is_empty());
    env.assert_clean();
}

#[tokio::test]
async fn the_merge_order_is_posted_once_and_updated_only_when_it_changes() {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    number_prs_in_order(env.outside.path());
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    // A short watcher interval: the merge order is refreshed every second too.
    let mut config: Value = serde_json::from_str(
        &std::fs::read_to_string(env.repo_path().join(".codebutler/config.json")).unwrap(),
    )
    .unwrap();
    config["github"]["prWatchIntervalSecs"] = json!(1);
    env.write_repo_config(&config.to_string());
    let mut daemon = env.start().await;
    // Three pull requests in src/auth/: 1, 3 and 5 new lines.
    let lines = |n: usize| (0..n).map(|i| format!("// {i}\n")).collect::<String>();
    let mut threads = Vec::new();
    for (token, file, n) in [
        ("ORDER-SMALL", "src/auth/small.rs", 1),
        ("ORDER-LARGE", "src/auth/large.rs", 5),
        ("ORDER-MEDIUM", "src/auth/medium.rs", 3),
    ] {
        env.model.script(token, run_writing(file, &lines(n), true));
        let thread = thread_with_plan(&env, &format!("add {file}"), token).await;
        assert_eq!(
            say_and_wait_run(&env, &thread, "yes").await,
            "white_check_mark"
        );
        threads.push(thread);
    }
    let names: Vec<(&str, &str)> = threads
        .iter()
        .map(String::as_str)
        .zip(["small", "large", "medium"])
        .collect();
    let ok = env
        .slack
        .wait_until(WAIT, || !top_level(&env).is_empty())
        .await;
    assert!(ok, "no merge order posted");
    // Settled: the three PRs, once.
    let ok = env
        .slack
        .wait_until(WAIT, || {
            let top = top_level(&env);
            let latest = env
                .slack
                .updates()
                .into_iter()
                .rev()
                .find(|u| top.first().is_some_and(|p| p.ts == u.ts))
                .map(|u| u.text)
                .or_else(|| top.first().map(|p| p.text.clone()))
                .unwrap_or_default();
            latest.contains("3 open pull requests")
        })
        .await;
    assert!(ok, "{:?} {:?}", top_level(&env), env.slack.updates());
    let top = top_level(&env);
    assert_eq!(top.len(), 1, "{top:?}");
    let message = top[0].ts.clone();
    let current = || {
        env.slack
            .updates()
            .into_iter()
            .rev()
            .find(|u| u.ts == message)
            .map(|u| u.text)
            .unwrap_or_else(|| top_level(&env)[0].text.clone())
    };
    insta::assert_snapshot!("merge_order_three", named(&current(), &names));

    // Nothing changes for a few refreshes, nor across a restart: nothing is sent.
    let updates = env.slack.updates().len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    daemon.kill9().await;
    let _daemon = env.start().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(env.slack.updates().len(), updates);
    assert_eq!(top_level(&env).len(), 1);

    // The smallest grows past the others: the same message is updated, not re-posted.
    env.model.script(
        "ORDER-SMALL",
        run_writing("src/auth/small.rs", &lines(9), false),
    );
    assert_eq!(
        say_and_wait_run(&env, &threads[0], "also add the rest").await,
        "white_check_mark"
    );
    let ok = env
        .slack
        .wait_until(WAIT, || current().contains("+9/−0"))
        .await;
    assert!(ok, "{}", current());
    assert_eq!(top_level(&env).len(), 1);
    insta::assert_snapshot!("merge_order_updated", named(&current(), &names));
    env.assert_clean();
}
