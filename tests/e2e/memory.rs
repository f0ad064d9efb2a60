//! Memory approved in the thread, through the real daemon, runner and git: after the Coder's
//! pull request opens the extraction proposes lines, the thread edits them, and "yes" commits
//! them to the pull request branch and pushes it (read back from the bare origin); "no" saves
//! nothing; an unreadable extraction proposes nothing; a message that is not about the
//! proposal goes to the PM; the PM of a later thread reads memory merged on origin's default
//! branch once the daemon fetched it, without anyone pulling; a correction in a thread
//! without a pull request becomes a memory pull request of its own; and a killed daemon
//! neither repeats nor loses a proposal or an edit.

use std::path::Path;
use std::time::Duration;

use codebutler_controller::memory::seed::{
    ARTIST_DEFAULT, ARTIST_PATH, CODER_PROMPT_PATH, PM_DEFAULT, PM_PATH, default_for,
};
use codebutler_test_support::git;
use codebutler_test_support::model::Reply;
use serde_json::json;

use crate::harness::{
    Env, WAIT, runner_env, say_and_wait_post, say_and_wait_run, thread_with_plan, write,
};

/// Occurs in every memory extraction request (its prompt's first words) and is longer than
/// any other script's matcher, so it picks the extraction's script.
const EXTRACTION: &str = "You read a finished Slack thread of a small AI development team";
const PROPOSAL: &str = "*PM:* 📝";
const SAVED: &str = "*PM:* 💾";

/// An env whose Coder opens a pull request for plans with `token`; origin is a bare
/// repository; returns it with origin's path.
async fn pr_env() -> (Env, std::path::PathBuf) {
    let env = runner_env(json!({"maxTurns": 6, "timeout": 2})).await;
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    (env, origin)
}

/// Scripts a Coder run for `token` that commits a file and opens a pull request.
fn script_pr(env: &Env, token: &str) {
    env.model.script(
        token,
        vec![
            write("src/parse.rs", "pub fn parse() {}\n"),
            Reply::tool_call("GitCommit", r#"{"message": "Add parse"}"#),
            Reply::tool_call("OpenPR", r#"{"title": "Parse", "body": "Adds parse."}"#),
            Reply::text("The PR is open."),
        ],
    );
}

/// Waits for a post starting with `prefix` in the thread; returns it.
async fn wait_post(env: &Env, thread: &str, prefix: &str) -> String {
    env.wait_post(thread, |t| t.starts_with(prefix)).await
}

/// Commits `memory` as the PM's memory on origin's default branch from a clone of its own
/// (what a merge on GitHub does), never touching the daemon's checkout; returns the clone.
fn push_memory_to_origin(
    env: &Env,
    origin: &Path,
    memory: &str,
    message: &str,
) -> std::path::PathBuf {
    let other = clone_of_origin(env, origin);
    git::commit_files(&other, &[(PM_PATH, memory)], message);
    git::git(&other, &["push", "-q", "origin", "HEAD"]);
    other
}

/// A clone of `origin` of the test's own (someone else's machine, or GitHub's merge).
fn clone_of_origin(env: &Env, origin: &Path) -> std::path::PathBuf {
    let other = env.outside.path().join("other");
    git::git(
        env.outside.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    other
}

/// The `codebutler/` branch origin has (the thread's), and its memory file if it has one.
fn pushed_memory(origin: &Path) -> (String, Option<String>) {
    let refs = git::git(
        origin,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/codebutler/",
        ],
    );
    let branch = refs.lines().next().expect("a pushed branch").to_owned();
    let out = std::process::Command::new("git")
        .args(["show", &format!("{branch}:{PM_PATH}")])
        .current_dir(origin)
        .output()
        .unwrap();
    let text = out
        .status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap());
    (branch, text)
}

#[tokio::test]
async fn a_proposal_edited_in_the_thread_is_committed_to_the_pushed_pr_branch() {
    let (env, origin) = pr_env().await;
    script_pr(&env, "MEMORY-PR-TOKEN");
    env.model.script(
        EXTRACTION,
        vec![Reply::text(
            "```json\n[\n\
             {\"op\": \"append\", \"line\": \"- Parsers live in src/parse.rs\", \"category\": \"project\"},\n\
             {\"op\": \"append\", \"line\": \"- Trivia nobody needs\", \"category\": \"project\"},\n\
             {\"op\": \"append\", \"line\": \"- Ask which input formats before planning a parser\", \"category\": \"planning\"}\n\
             ]\n```",
        )],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "add a parser", "MEMORY-PR-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let proposal = wait_post(&env, &thread, PROPOSAL).await;
    insta::assert_snapshot!("memory_proposal_post", proposal);

    // The extraction was given the thread and the memory as it is on the branch.
    let asked = env.model.requests_for(EXTRACTION);
    assert_eq!(asked.len(), 1);
    let prompt = asked[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("add a parser"), "{prompt}");
    assert!(prompt.contains("## Planning Notes"), "{prompt}");

    let edited = say_and_wait_post(&env, &thread, "remove 2", PROPOSAL).await;
    assert!(!edited.contains("Trivia"), "{edited}");
    assert!(edited.contains("2. ➕ Ask which input formats"), "{edited}");
    let edited =
        say_and_wait_post(&env, &thread, "add: Deploys need a release tag", PROPOSAL).await;
    assert!(
        edited.contains("3. ➕ Deploys need a release tag"),
        "{edited}"
    );
    let saved = say_and_wait_post(&env, &thread, "yes", SAVED).await;

    // The pushed branch holds exactly the approved lines, each under its section, in the
    // seeded file.
    let (branch, memory) = pushed_memory(&origin);
    let memory = memory.expect("the memory file on the pushed branch");
    let approved = [
        "- Parsers live in src/parse.rs",
        "- Deploys need a release tag",
        "- Ask which input formats before planning a parser",
    ];
    for line in approved {
        assert_eq!(memory.matches(&format!("{line}\n")).count(), 1, "{memory}");
    }
    assert!(!memory.contains("Trivia"), "{memory}");
    let without: String = memory
        .lines()
        .filter(|l| !approved.contains(l))
        .map(|l| format!("{l}\n"))
        .collect();
    let seeded_with_blanks = PM_DEFAULT
        .replace("## Project Knowledge\n\n", "## Project Knowledge\n\n\n")
        .replace("## Planning Notes\n\n", "## Planning Notes\n\n\n");
    assert_eq!(without, seeded_with_blanks, "{memory}");
    let section = |title: &str| {
        let start = memory.find(&format!("## {title}\n")).unwrap();
        let end = memory[start + 3..]
            .find("\n## ")
            .map_or(memory.len(), |i| start + 3 + i);
        memory[start..end].to_owned()
    };
    assert!(
        section("Project Knowledge")
            .contains("- Parsers live in src/parse.rs\n- Deploys need a release tag\n")
    );
    assert!(section("Planning Notes").contains("- Ask which input formats"));

    // The thread shows the diff and the commit, which is the pushed branch's head.
    let head = git::git(&origin, &["rev-parse", &branch]);
    assert!(saved.contains(&format!("`{}`", &head[..7])), "{saved}");
    for line in approved {
        assert!(saved.contains(&format!("+ {line}")), "{saved}");
    }
    let log = git::git(&origin, &["log", "-1", "--format=%an <%ae>", &branch]);
    assert_eq!(log, "CodeButler <codebutler@localhost>");
    // The service's log file tags the proposal and the save as memory lines.
    let log_file = std::fs::read_to_string(crate::log_file::log_path(&env)).unwrap();
    for line in ["memory proposal of 3 item(s)", "memory saved in"] {
        assert!(
            log_file.contains(&format!(" MEM  thread {thread} → {line}")),
            "no MEM line `{line}` in:\n{log_file}"
        );
    }

    // The proposal is settled: "yes" again goes the usual way (the plan was carried out).
    env.reply(&thread, "yes");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        env.post_texts(&thread)
            .iter()
            .filter(|t| t.starts_with(SAVED))
            .count(),
        1
    );
    env.assert_clean();
}

#[tokio::test]
async fn no_saves_nothing_other_words_reach_the_pm_and_unreadable_suggestions_propose_nothing() {
    let (env, origin) = pr_env().await;
    script_pr(&env, "MEMORY-NO-TOKEN");
    script_pr(&env, "MEMORY-BAD-TOKEN");
    env.model.script(
        EXTRACTION,
        vec![
            Reply::text(
                r#"[{"op": "append", "line": "- Keep parsers pure", "category": "project"}]"#,
            ),
            Reply::text(
                r#"[{"op": "append", "line": "- fine", "category": "project"}, {"op": "forget"}]"#,
            ),
        ],
    );
    let _daemon = env.start().await;

    // "no": nothing saved; a question meanwhile goes to the PM and the proposal stays open.
    let thread = thread_with_plan(&env, "add a parser please", "MEMORY-NO-TOKEN").await;
    env.model.script(
        "add a parser please",
        vec![Reply::text("Deploy with make deploy.")],
    );
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    wait_post(&env, &thread, PROPOSAL).await;
    let answer = say_and_wait_post(
        &env,
        &thread,
        "@codebutler.pm how do we deploy?",
        "*PM:* Deploy",
    )
    .await;
    assert_eq!(answer, "*PM:* Deploy with make deploy.");
    let discarded = say_and_wait_post(&env, &thread, "No", "*PM:* OK").await;
    assert_eq!(discarded, "*PM:* OK, I saved nothing.");
    let (_, memory) = pushed_memory(&origin);
    assert_eq!(memory, None, "nothing was committed");

    // Unreadable suggestions (an unknown operation): nothing proposed, and the thread is told.
    let thread = thread_with_plan(&env, "add another parser", "MEMORY-BAD-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let told = wait_post(&env, &thread, "*PM:* I could not read").await;
    assert_eq!(
        told,
        "*PM:* I could not read the memory suggestions; nothing was proposed."
    );
    assert!(
        !env.post_texts(&thread)
            .iter()
            .any(|t| t.starts_with(PROPOSAL)),
        "{:?}",
        env.post_texts(&thread)
    );
    env.assert_clean();
}

#[tokio::test]
async fn the_next_threads_pm_reads_memory_merged_on_origin_without_a_pull() {
    let (env, origin) = pr_env().await;
    env.model
        .script("first question MEMQ1", vec![Reply::text("First answer.")]);
    env.model
        .script("third question MEMQ3", vec![Reply::text("Third answer.")]);
    env.model.script(
        "MEMORY-FETCH-TOKEN",
        vec![Reply::text("Nothing to change.")],
    );
    let _daemon = env.start().await;
    let first = env.say("first question MEMQ1");
    env.wait_thread_posts(&first, 1).await;

    // Memory merged on GitHub: a commit on origin's default branch, never pulled here.
    push_memory_to_origin(
        &env,
        &origin,
        "## Project Knowledge\n\n- MERGED-MEMORY-LINE\n",
        "Memory from a merged PR",
    );

    // Another thread's approval fetches origin's default branch (to branch its worktree).
    let second = thread_with_plan(&env, "second job", "MEMORY-FETCH-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &second, "yes").await,
        "white_check_mark"
    );

    let third = env.say("third question MEMQ3");
    env.wait_thread_posts(&third, 1).await;
    let system = |matcher: &str| {
        env.model.requests_for(matcher)[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let before = system("first question MEMQ1");
    assert!(!before.contains("MERGED-MEMORY-LINE"), "{before}");
    assert!(
        before.contains("## Workflows"),
        "the seeded memory: {before}"
    );
    let after = system("third question MEMQ3");
    assert!(after.contains("- MERGED-MEMORY-LINE"), "{after}");
    assert!(
        !env.repo_path().join(PM_PATH).exists(),
        "the checkout was never pulled"
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_correction_in_a_thread_without_a_pr_becomes_a_memory_pr_of_its_own() {
    let (env, origin) = pr_env().await;
    let question = "Delete or archive expired sessions (QMEM)?";
    env.model.script(
        "MEMORY-Q-TOKEN",
        vec![
            Reply::tool_call("AskUser", json!({"question": question}).to_string()),
            Reply::text("Archived them; no pull request needed."),
        ],
    );
    env.model
        .script(question, vec![Reply::text("ESCALATE: people must decide.")]);
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "tidy the sessions", "MEMORY-Q-TOKEN").await;
    let approval = env.reply(&thread, "yes");
    wait_post(&env, &thread, &format!("*Coder:* {question}")).await;
    env.reply(&thread, "archive them");
    assert!(
        env.wait_reaction_for(&approval.ts, "white_check_mark", WAIT * 2)
            .await,
        "{:?}",
        env.post_texts(&thread)
    );

    // Question 1 was answered wrongly: the correction is proposed as a planning note.
    let proposal = say_and_wait_post(
        &env,
        &thread,
        "correct 1: delete them, never archive",
        PROPOSAL,
    )
    .await;
    let note = format!("Q: {question} — A: delete them, never archive");
    assert!(
        proposal.contains(&format!("1. ➕ {note} _(Planning Notes)_")),
        "{proposal}"
    );
    let missing = say_and_wait_post(&env, &thread, "correct 4: x", "*PM:* There is no").await;
    assert_eq!(missing, "*PM:* There is no question 4: the Coder asked 1.");

    // Saved in a pull request of its own: a new codebutler/memory-… branch from origin's
    // default branch, whose tip does not move.
    let main_before = git::git(&origin, &["rev-parse", "HEAD"]);
    let saved = say_and_wait_post(&env, &thread, "yes", SAVED).await;
    assert!(
        saved.contains("in a pull request of its own, https://github.com/acme/app/pull/7"),
        "{saved}"
    );
    assert!(saved.contains(&format!("+ - {note}")), "{saved}");
    let (branch, memory) = pushed_memory(&origin);
    assert!(
        branch.starts_with("codebutler/memory-tidy-the-sessions-"),
        "{branch}"
    );
    let memory = memory.expect("the memory file on the memory branch");
    assert!(
        memory.contains(&format!("## Planning Notes\n\n- {note}\n")),
        "{memory}"
    );
    assert_eq!(git::git(&origin, &["rev-parse", "HEAD"]), main_before);
    assert_eq!(
        git::git(&origin, &["rev-parse", &format!("{branch}~1")]),
        main_before,
        "the branch starts at the default branch's tip"
    );
    let body = codebutler_test_support::gh::gh_pr_body(env.outside.path()).unwrap();
    assert!(
        body.starts_with(
            "The memory approved in the Slack thread https://fake.slack.com/archives/"
        ),
        "{body}"
    );
    assert!(
        codebutler_test_support::gh::gh_log(env.outside.path())
            .iter()
            .any(|l| l.contains(&format!("pr create --head {branch}"))),
        "{:?}",
        codebutler_test_support::gh::gh_log(env.outside.path())
    );
    env.assert_clean();
}

#[tokio::test]
async fn a_killed_daemon_neither_repeats_nor_loses_a_proposal_or_an_edit() {
    let (env, origin) = pr_env().await;
    script_pr(&env, "MEMORY-KILL-TOKEN");
    env.model.script(
        EXTRACTION,
        vec![Reply::text(
            r#"[{"op": "append", "line": "- Keep parsers pure", "category": "project"},
                {"op": "append", "line": "- Trivia nobody needs", "category": "project"}]"#,
        )],
    );
    let mut daemon = env.start().await;
    let thread = thread_with_plan(&env, "add a pure parser", "MEMORY-KILL-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    wait_post(&env, &thread, PROPOSAL).await;

    // Killed once the edit is stored (Slack has its ack), whether or not it was handled:
    // after the restart it is applied and re-posted exactly once, and the proposal made after
    // the PR is not made again.
    let edit = env.reply(&thread, "remove 2");
    assert!(env.slack.wait_acked(&edit.envelope_id, WAIT).await);
    daemon.kill9().await;
    let restarted = env.start().await;
    let ok = env
        .slack
        .wait_until(WAIT, || {
            env.post_texts(&thread)
                .iter()
                .any(|t| t.starts_with(PROPOSAL) && !t.contains("Trivia"))
        })
        .await;
    assert!(
        ok,
        "{:?}\nfirst daemon:\n{}\nrestarted:\n{}",
        env.post_texts(&thread),
        daemon.log(),
        restarted.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let proposals: Vec<String> = env
        .post_texts(&thread)
        .into_iter()
        .filter(|t| t.starts_with(PROPOSAL))
        .collect();
    assert_eq!(proposals.len(), 2, "{proposals:?}");
    assert!(
        proposals[0].contains("2. ➕ Trivia nobody needs"),
        "{proposals:?}"
    );
    assert!(!proposals[1].contains("Trivia"), "{proposals:?}");
    assert_eq!(env.model.requests_for(EXTRACTION).len(), 1);

    say_and_wait_post(&env, &thread, "yes", SAVED).await;
    let (_, memory) = pushed_memory(&origin);
    let memory = memory.unwrap();
    assert_eq!(
        memory.matches("- Keep parsers pure\n").count(),
        1,
        "{memory}"
    );
    assert!(!memory.contains("Trivia"), "{memory}");
    env.assert_clean();
}

#[tokio::test]
async fn done_in_a_thread_without_a_pr_proposes_memory_saved_in_a_memory_pr() {
    let env = Env::new().await;
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    env.model.script(
        "where do releases come from? (MEMDONE)",
        vec![Reply::text("From the `release` workflow on tags.")],
    );
    env.model.script(
        EXTRACTION,
        vec![Reply::text(
            r#"[{"op": "append", "line": "- Releases are cut by the release workflow on tags", "category": "project"}]"#,
        )],
    );
    let _daemon = env.start().await;
    let thread = env.say("where do releases come from? (MEMDONE)");
    env.wait_thread_posts(&thread, 1).await;

    // "done" closes the thread, then the PM proposes what to remember from it.
    say_and_wait_post(&env, &thread, "done", "*PM:* Thread closed").await;
    let proposal = wait_post(&env, &thread, PROPOSAL).await;
    assert!(
        proposal.contains(
            "1. ➕ Releases are cut by the release workflow on tags _(Project Knowledge)_"
        ),
        "{proposal}"
    );
    let asked = env.model.requests_for(EXTRACTION);
    assert_eq!(asked.len(), 1);
    let prompt = asked[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("where do releases come from?"), "{prompt}");

    // The thread is closed, yet its proposal still takes "yes": a memory PR of its own.
    let main_before = git::git(&origin, &["rev-parse", "HEAD"]);
    let saved = say_and_wait_post(&env, &thread, "yes", SAVED).await;
    assert!(saved.contains("in a pull request of its own"), "{saved}");
    let (branch, memory) = pushed_memory(&origin);
    assert!(branch.starts_with("codebutler/memory-"), "{branch}");
    assert!(
        memory
            .expect("the memory file on the memory branch")
            .contains(
                "## Project Knowledge\n\n- Releases are cut by the release workflow on tags\n"
            ),
    );
    assert_eq!(git::git(&origin, &["rev-parse", "HEAD"]), main_before);
    env.assert_clean();
}

#[tokio::test]
async fn a_merge_from_the_thread_brings_the_merged_memory_to_the_next_threads_pm() {
    let (env, origin) = pr_env().await;
    script_pr(&env, "MEMORY-MERGE-TOKEN");
    env.model
        .script(EXTRACTION, vec![Reply::text(r#"[{"op": "none"}]"#)]);
    env.model
        .script("next question MEMQ9", vec![Reply::text("Next answer.")]);
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "add a parser", "MEMORY-MERGE-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    // The extraction found nothing to remember: the step is done, nothing is proposed.
    let pool = crate::harness::open_store(&env).await;
    let ok = env
        .slack
        .wait_until(WAIT, || {
            let pool = pool.clone();
            let thread = thread.clone();
            std::thread::spawn(move || {
                tokio::runtime::Runtime::new().unwrap().block_on(async move {
                    sqlx::query_scalar::<_, i64>(
                        "SELECT COUNT(*) FROM thread_steps WHERE thread_ts = ? AND step = 'memory_proposal'",
                    )
                    .bind(thread)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
                })
            })
            .join()
            .unwrap()
                == 1
        })
        .await;
    assert!(ok, "the memory step never ran");
    pool.close().await;

    // What another pull request merged on origin's default branch meanwhile.
    let other = push_memory_to_origin(
        &env,
        &origin,
        "## Project Knowledge\n\n- LEARNED-IN-THE-MERGED-PR\n",
        "Merge the parser",
    );

    say_and_wait_post(&env, &thread, "merge", "*PM:* PR #7 merged").await;
    // No approval in between: the merge itself fetched the default branch, as GitHub's
    // merge of PR #7 left it on origin.
    let default = git::git(&other, &["rev-parse", "--abbrev-ref", "HEAD"]);
    let merged = git::git(&origin, &["rev-parse", "HEAD"]);
    assert_eq!(
        git::git(&origin, &["log", "-1", "--format=%s", "HEAD"]),
        "Parse (#7)"
    );
    let ok = env
        .slack
        .wait_until(WAIT, || {
            git::git(
                env.repo_path(),
                &[
                    "for-each-ref",
                    "--format=%(objectname)",
                    &format!("refs/remotes/origin/{}", default.trim()),
                ],
            ) == merged
        })
        .await;
    assert!(ok, "origin/main was not fetched after the merge");
    let next = env.say("next question MEMQ9");
    env.wait_thread_posts(&next, 1).await;
    let system = env.model.requests_for("next question MEMQ9")[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("- LEARNED-IN-THE-MERGED-PR"), "{system}");
    env.assert_clean();
}

#[tokio::test]
async fn the_coders_read_memory_reads_the_default_branch_not_the_checkout() {
    let (env, origin) = pr_env().await;
    // Memory on origin's default branch, and an uncommitted edit in the checkout.
    push_memory_to_origin(
        &env,
        &origin,
        "## Project Knowledge\n\n- COMMITTED-MEMORY\n",
        "Memory",
    );
    std::fs::create_dir_all(env.repo_path().join(".codebutler/memory")).unwrap();
    std::fs::write(env.repo_path().join(PM_PATH), "- UNCOMMITTED-EDIT\n").unwrap();
    env.model.script(
        "MEMORY-CODER-TOKEN",
        vec![
            Reply::tool_call("ReadMemory", "{}"),
            Reply::text("Read it."),
        ],
    );
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "read the memory", "MEMORY-CODER-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let coder = env.model.requests_for("MEMORY-CODER-TOKEN");
    let read = crate::harness::tool_results(&coder[1].body);
    assert!(read.contains("- COMMITTED-MEMORY"), "{read}");
    assert!(!read.contains("UNCOMMITTED-EDIT"), "{read}");
    env.assert_clean();
}

#[tokio::test]
async fn a_refined_workflow_and_a_coder_note_land_in_their_files_and_reach_the_next_coder() {
    let (env, origin) = pr_env().await;
    script_pr(&env, "MEMORY-NOTES-TOKEN");
    let bugfix = PM_DEFAULT
        .lines()
        .find(|l| l.starts_with("- **bugfix**"))
        .unwrap();
    let refined = "- **bugfix**: write the failing test first, then fix it and run `make e2e`.";
    let note = "- Run `make lint` before every commit";
    env.model.script(
        EXTRACTION,
        vec![Reply::text(
            json!([
                {"op": "replace", "old": bugfix, "new": refined},
                {"op": "append", "line": note, "category": "coder"},
            ])
            .to_string(),
        )],
    );
    env.model
        .script("NEXT-CODER-TOKEN", vec![Reply::text("Nothing to do.")]);
    let _daemon = env.start().await;
    let thread = thread_with_plan(&env, "fix the parser bug", "MEMORY-NOTES-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &thread, "yes").await,
        "white_check_mark"
    );
    let proposal = wait_post(&env, &thread, PROPOSAL).await;
    assert!(
        proposal
            .contains("2. ➕ Run `make lint` before every commit _(for the Coder, in `coder.md`)_"),
        "{proposal}"
    );
    // The extraction was shown the Coder's notes as the branch has them: none yet.
    let asked = env.model.requests_for(EXTRACTION);
    let prompt = asked[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains("# The Coder's notes (as they are on the branch)\n\n(none yet)\n"),
        "{prompt}"
    );
    let saved = say_and_wait_post(&env, &thread, "yes", SAVED).await;
    assert!(
        saved.contains(&format!(
            "@@ {CODER_PROMPT_PATH} @@\n+ ## Notes from the team\n+ {note}"
        )),
        "{saved}"
    );

    // One commit on the pushed branch: the workflow replaced in the PM's memory, the note in
    // the Coder's prompt (the shipped one, as the repository had none), nothing else.
    let (branch, memory) = pushed_memory(&origin);
    let memory = memory.expect("the memory file on the pushed branch");
    assert!(memory.contains(&format!("\n{refined}\n")), "{memory}");
    assert!(!memory.contains(bugfix), "{memory}");
    let coder = git::git(&origin, &["show", &format!("{branch}:{CODER_PROMPT_PATH}")]);
    let shipped = default_for(CODER_PROMPT_PATH).unwrap();
    assert_eq!(
        format!("{coder}\n"),
        format!(
            "{}\n\n## Notes from the team\n\n{note}\n",
            shipped.trim_end()
        )
    );
    let changed = git::git(&origin, &["show", "--name-only", "--format=", &branch]);
    assert_eq!(
        changed.lines().collect::<Vec<_>>(),
        vec![PM_PATH, CODER_PROMPT_PATH]
    );

    // The pull request merges on GitHub; the next Coder reads the note although the host's
    // checkout keeps the prompt it was seeded with.
    let other = clone_of_origin(&env, &origin);
    git::git(&other, &["merge", "-q", &format!("origin/{branch}")]);
    git::git(&other, &["push", "-q", "origin", "HEAD"]);
    let seeded = std::fs::read_to_string(env.repo_path().join(CODER_PROMPT_PATH)).unwrap();
    assert!(!seeded.contains(note), "{seeded}");
    let next = thread_with_plan(&env, "another task", "NEXT-CODER-TOKEN").await;
    assert_eq!(
        say_and_wait_run(&env, &next, "yes").await,
        "white_check_mark"
    );
    let coder = env.model.requests_for("NEXT-CODER-TOKEN");
    let system = crate::harness::system_text(&coder[0].body);
    assert_eq!(system.matches(note).count(), 1, "{system}");
    assert!(system.contains("## Notes from the team"), "{system}");
    env.assert_clean();
}

#[tokio::test]
async fn a_visual_style_learned_goes_into_the_artists_memory_alone() {
    let env = Env::new().await;
    let origin = env.outside.path().join("origin.git");
    git::push_to_new_origin(env.repo_path(), &origin);
    // The Artist's memory as the default branch holds it, with one style line already.
    let other = clone_of_origin(&env, &origin);
    let before = ARTIST_DEFAULT.replace(
        "## Visual Style\n",
        "## Visual Style\n\n- Icons are flat, two colours at most\n",
    );
    git::commit_files(&other, &[(ARTIST_PATH, before.as_str())], "Artist memory");
    git::git(&other, &["push", "-q", "origin", "HEAD"]);
    env.model.script(
        "which colours do our icons use? (MEMSTYLE)",
        vec![Reply::text("Teal and white.")],
    );
    let line = "- The brand teal is #0F8B8D; use it as the main colour";
    env.model.script(
        EXTRACTION,
        vec![Reply::text(
            json!([{"op": "append", "line": line, "category": "artist"}]).to_string(),
        )],
    );
    let _daemon = env.start().await;
    let thread = env.say("which colours do our icons use? (MEMSTYLE)");
    env.wait_thread_posts(&thread, 1).await;
    say_and_wait_post(&env, &thread, "done", "*PM:* Thread closed").await;
    let proposal = wait_post(&env, &thread, PROPOSAL).await;
    assert!(
        proposal.contains("_(for the Artist, in `artist.md`)_"),
        "{proposal}"
    );
    // The extraction was shown the Artist's style as the default branch has it.
    let asked = env.model.requests_for(EXTRACTION);
    let prompt = asked[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains(
            "# The Artist's visual style (as it is on the branch)\n\n- Icons are flat, two colours at most\n"
        ),
        "{prompt}"
    );

    let saved = say_and_wait_post(&env, &thread, "yes", SAVED).await;
    assert!(
        saved.contains(&format!("@@ {ARTIST_PATH} @@\n+ {line}")),
        "{saved}"
    );
    let (branch, pm) = pushed_memory(&origin);
    assert_eq!(pm, None, "the PM's memory is not written");
    let artist = git::git(&origin, &["show", &format!("{branch}:{ARTIST_PATH}")]);
    assert_eq!(
        format!("{artist}\n"),
        before.replace(
            "two colours at most\n",
            &format!("two colours at most\n{line}\n")
        )
    );
    env.assert_clean();
}
