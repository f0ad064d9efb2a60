//! What a pull request says, end to end through the real daemon, git, the sandboxed Coder,
//! the fake model and the fake `gh`: the project's `changesWorkflow.prInstructions` in the
//! prompt of the Coder that opened it; without a PR template, the built-in default's
//! sections (Summary, Changes, How it was tested) in the description `gh` received; with
//! one, the template as the default branch holds it — never the run's own edit of it, never
//! a file a committed link points at.

use codebutler_controller::journal::notes::SUMMARY_REQUEST;
use codebutler_test_support::gh::gh_edited_body;
use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::{Value, json};

use crate::harness::{Env, OUTSIDE_SECRET, WAIT, thread_with_pr, thread_with_pr_of, write};

/// The Coder's limits in these tests.
fn coder() -> Value {
    json!({"maxTurns": 6, "timeout": 2})
}

/// Waits for the description `gh pr edit` received; returns it.
async fn edited_body(env: &Env) -> String {
    let ok = env
        .slack
        .wait_until(WAIT, || gh_edited_body(env.outside.path()).is_some())
        .await;
    assert!(ok, "gh pr edit never ran");
    gh_edited_body(env.outside.path()).unwrap()
}

#[tokio::test]
async fn the_coder_that_opens_the_pull_request_is_given_the_projects_pr_instructions() {
    let env = Env::with_runner(json!({
        "coder": coder(),
        "changesWorkflow": {"prInstructions": "Reference the JIRA ticket PRI-4242 in the title."}
    }))
    .await;
    let _daemon = env.start().await;
    thread_with_pr(&env, "PR-INSTRUCTIONS", vec![]).await;
    // The request the model answered with OpenPR (the third of the run) held them.
    let requests = env.model.requests_for("PR-INSTRUCTIONS");
    assert!(requests.len() >= 3, "{} requests", requests.len());
    let prompt = crate::harness::system_text(&requests[2].body);
    assert!(
        prompt.contains("Reference the JIRA ticket PRI-4242 in the title."),
        "{prompt}"
    );
    env.assert_clean();
}

#[tokio::test]
async fn without_a_template_the_description_has_the_default_sections() {
    let env = Env::with_runner(json!({"coder": coder()})).await;
    env.model.respond(SUMMARY_REQUEST, |_| {
        Reply::text(
            r#"{"summary": "Adds the notes.", "decisions": [], "tested": "TESTED-MARK: the notes were read back."}"#,
        )
    });
    let _daemon = env.start().await;
    thread_with_pr(&env, "DEFAULT-TEMPLATE", vec![]).await;
    let body = edited_body(&env).await;
    let summary = body.find("## Summary\n\nAdds the notes.").expect(&body);
    let changes = body
        .find("## Changes\n\n- `notes.txt` (+2 −0)")
        .expect(&body);
    let tested = body
        .find("## How it was tested\n\nTESTED-MARK: the notes were read back.\n")
        .expect(&body);
    assert!(summary < changes && changes < tested, "{body}");
    env.assert_clean();
}

#[tokio::test]
async fn the_default_branchs_template_is_used_never_the_runs_edit_or_a_link() {
    let env = Env::with_runner(json!({"coder": coder()})).await;
    git::commit_files(
        env.repo_path(),
        &[(
            ".github/pull_request_template.md",
            "## Checklist TEMPLATE-MARK\n- [ ] tests pass\n",
        )],
        "PR template",
    );
    // A committed link in the first place looked at, pointing outside the repository.
    std::fs::create_dir_all(env.repo_path().join(".github")).unwrap();
    std::os::unix::fs::symlink(
        env.outside.path().join("secret.txt"),
        env.repo_path().join(".github/PULL_REQUEST_TEMPLATE.md"),
    )
    .unwrap();
    git::git(env.repo_path(), &["add", "-A"]);
    git::git(env.repo_path(), &["commit", "-qm", "Link a template"]);
    let _daemon = env.start().await;
    // The run rewrites the template on its branch and commits it.
    let first_run = vec![
        write("notes.txt", "one\ntwo\n"),
        write(
            ".github/pull_request_template.md",
            "RUN-EDIT: no checklist\n",
        ),
        Reply::tool_call("GitCommit", r#"{"message": "Add the notes"}"#),
        Reply::tool_call("OpenPR", r#"{"title": "Add notes", "body": "Adds notes."}"#),
        Reply::text("The PR is open."),
    ];
    thread_with_pr_of(&env, "start the notes", "REPO-TEMPLATE", first_run, vec![]).await;
    let created = codebutler_test_support::gh::gh_pr_body(env.outside.path()).unwrap();
    let edited = edited_body(&env).await;
    for body in [&created, &edited] {
        assert!(body.contains("## Checklist TEMPLATE-MARK"), "{body}");
        assert!(!body.contains("RUN-EDIT"), "{body}");
        assert!(!body.contains(OUTSIDE_SECRET), "{body}");
    }
    assert!(!edited.contains("## How it was tested"), "{edited}");
    env.assert_clean();
}
