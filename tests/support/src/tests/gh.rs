//! The fake `gh` against a real origin: every answer about a pull request comes from the
//! bare repository the local one names as `origin`, never from the local branches.

use crate::gh::{
    FakePr, block_edit, block_merge, edit_waiting, gh_edited_bodies, gh_edited_body, gh_merges,
    merge_on_github, merge_waiting, number_prs_in_order, release_edit, release_merge,
};
use crate::git;
use crate::{gh_log, gh_pr_body, install_fake_gh};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A local repository with a commit on its default branch, a bare `origin` holding it, and
/// the fake `gh` beside them.
struct World {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    origin: PathBuf,
    gh_dir: PathBuf,
    /// The default branch's name (origin's HEAD).
    base: String,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let (repo, origin, gh_dir) = (
            dir.path().join("repo"),
            dir.path().join("origin.git"),
            dir.path().join("bin"),
        );
        git::write_files(&repo, &[("a.txt", "one\ntwo\nthree\n")]);
        let local = git::init(&repo);
        git::commit_all(&local, "Initial commit");
        let (_, branch) = git::push_to_new_origin(&repo, &origin);
        install_fake_gh(&gh_dir);
        let base = branch.trim_start_matches("refs/heads/").to_owned();
        World {
            _dir: dir,
            repo,
            origin,
            gh_dir,
            base,
        }
    }

    /// Runs the fake `gh` in the local repository; (exit code, stdout, stderr).
    fn gh(&self, args: &[&str], stdin: &str) -> (i32, String, String) {
        gh_in(&self.gh_dir, &self.repo, args, stdin)
    }

    /// A branch `name` off the default branch with `files` committed locally.
    fn branch(&self, name: &str, files: &[(&str, &str)], message: &str) -> String {
        git::git(&self.repo, &["checkout", "-q", "-B", name, &self.base]);
        let id = git::commit_files(&self.repo, files, message);
        git::git(&self.repo, &["checkout", "-q", &self.base]);
        id.to_string()
    }

    fn push(&self, branch: &str) {
        git::git(
            &self.repo,
            &["push", "-q", "origin", &format!("{branch}:{branch}")],
        );
    }

    fn origin_tip(&self, branch: &str) -> String {
        git::git(
            &self.origin,
            &["rev-parse", &format!("refs/heads/{branch}")],
        )
    }

    fn create(&self, head: &str, title: &str) -> (i32, String, String) {
        self.gh(
            &[
                "pr",
                "create",
                "--head",
                head,
                "--title",
                title,
                "--body-file",
                "-",
            ],
            "the body\n",
        )
    }

    fn view(&self, number: &str) -> serde_json::Value {
        let (code, out, err) = self.gh(
            &[
                "pr",
                "view",
                number,
                "--json",
                "state,mergeable,mergedAt,closedAt,statusCheckRollup,url,headRefOid",
            ],
            "",
        );
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    }
}

/// Runs the fake `gh` of `gh_dir` in `cwd` with `args` and `stdin`.
fn gh_in(gh_dir: &Path, cwd: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(gh_dir.join("gh"))
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_pull_request_needs_its_branch_on_origin_with_new_commits() {
    let w = World::new();
    let base = w.base.clone();
    w.branch("codebutler/x", &[("b.txt", "b\n")], "Add b");
    // Committed locally only: GitHub has no such branch.
    let (code, _, err) = w.create("codebutler/x", "Add b");
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        format!(
            "pull request create failed: GraphQL: Head sha can't be blank, Base sha can't be blank, No commits between {base} and codebutler/x, Head ref must be a branch (createPullRequest)"
        )
    );
    // A branch with nothing the base lacks.
    git::git(
        &w.repo,
        &[
            "push",
            "-q",
            "origin",
            &format!("{base}:refs/heads/codebutler/empty"),
        ],
    );
    let (code, _, err) = w.create("codebutler/empty", "Nothing");
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        format!(
            "pull request create failed: GraphQL: No commits between {base} and codebutler/empty (createPullRequest)"
        )
    );
    assert!(
        w.gh(&["pr", "view", "7", "--json", "state"], "").0 == 1,
        "no PR was made"
    );

    w.push("codebutler/x");
    let (code, out, err) = w.create("codebutler/x", "Add b");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().last(),
        Some("https://github.com/acme/app/pull/7")
    );
    assert_eq!(gh_pr_body(&w.gh_dir).as_deref(), Some("the body\n"));
    // One open pull request per branch, named as GitHub names it.
    let (code, _, err) = w.create("codebutler/x", "Again");
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!(
            "a pull request for branch \"codebutler/x\" into branch \"{base}\" already exists:\nhttps://github.com/acme/app/pull/7\n"
        )
    );
    // A number never created is not found.
    let (code, _, err) = w.gh(&["pr", "view", "9", "--json", "state"], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("Could not resolve to a PullRequest with the number of 9."),
        "{err}"
    );
}

#[test]
fn the_head_is_what_was_pushed_and_mergeable_comes_from_origin() {
    let w = World::new();
    w.branch(
        "codebutler/x",
        &[("a.txt", "one\nTWO\nthree\n")],
        "Shout two",
    );
    w.push("codebutler/x");
    assert_eq!(w.create("codebutler/x", "Shout two").0, 0);
    let pushed = w.origin_tip("codebutler/x");
    let v = w.view("7");
    assert_eq!(v["headRefOid"], pushed.as_str());
    assert_eq!(v["mergeable"], "MERGEABLE");
    assert_eq!(v["state"], "OPEN");
    assert_eq!(v["mergedAt"], serde_json::Value::Null);

    // A commit made locally and not pushed changes nothing on GitHub.
    git::git(&w.repo, &["checkout", "-q", "codebutler/x"]);
    git::commit_files(&w.repo, &[("c.txt", "c\n")], "Add c");
    assert_eq!(w.view("7")["headRefOid"], pushed.as_str());
    w.push("codebutler/x");
    assert_eq!(
        w.view("7")["headRefOid"],
        w.origin_tip("codebutler/x").as_str()
    );

    // The base moved on origin over the same line: the pull request conflicts.
    git::git(&w.repo, &["checkout", "-q", &w.base]);
    git::commit_files(&w.repo, &[("a.txt", "one\ntwo!\nthree\n")], "Exclaim two");
    w.push(&w.base);
    assert_eq!(w.view("7")["mergeable"], "CONFLICTING");
    let (code, _, err) = w.gh(&["pr", "merge", "7", "--squash"], "");
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "X Pull request #7 is not mergeable: the merge commit cannot be cleanly created."
    );
    assert_eq!(FakePr::state(&w.gh_dir), "OPEN");
}

#[test]
fn each_strategy_lands_the_head_on_origins_base_branch() {
    let w = World::new();
    number_prs_in_order(&w.gh_dir);
    let base = w.base.clone();
    for (n, strategy) in [(7, "squash"), (8, "merge"), (9, "rebase")] {
        let branch = format!("codebutler/{strategy}");
        git::git(&w.repo, &["checkout", "-q", "-B", &branch, &base]);
        git::commit_files(&w.repo, &[(&format!("{strategy}1.txt"), "1\n")], "First");
        git::commit_files(&w.repo, &[(&format!("{strategy}2.txt"), "2\n")], "Second");
        git::git(&w.repo, &["checkout", "-q", &base]);
        w.push(&branch);
        let (code, out, err) = w.create(&branch, &format!("Land by {strategy}"));
        assert_eq!(code, 0, "{err}");
        assert!(out.ends_with(&format!("/pull/{n}\n")), "{out}");
        let before = w.origin_tip(&base);
        let head = w.origin_tip(&branch);
        let (code, _, err) = w.gh(
            &["pr", "merge", &n.to_string(), &format!("--{strategy}")],
            "",
        );
        assert_eq!(code, 0, "{err}");
        let after = w.origin_tip(&base);
        // The base's tree has the head's files, on top of what the base had.
        let files = git::git(&w.origin, &["ls-tree", "--name-only", &after]);
        assert!(files.contains(&format!("{strategy}2.txt")), "{files}");
        let parents = git::git(&w.origin, &["log", "-1", "--format=%P", &after]);
        let subjects = git::git(
            &w.origin,
            &["log", "--format=%s", &format!("{before}..{after}")],
        );
        match strategy {
            "squash" => {
                assert_eq!(parents, before);
                assert_eq!(subjects, "Land by squash (#7)");
            }
            "merge" => {
                assert_eq!(parents, format!("{before} {head}"));
                assert!(
                    subjects.starts_with("Merge pull request #8 from acme/codebutler/merge"),
                    "{subjects}"
                );
            }
            _ => assert_eq!(subjects, "Second\nFirst"),
        }
        let v = w.view(&n.to_string());
        assert_eq!(
            (&v["state"], &v["mergedAt"]),
            (&"MERGED".into(), &"2026-11-24T12:00:00Z".into())
        );
        assert_eq!(v["headRefOid"], head.as_str());
    }
    let (code, _, err) = w.gh(&["pr", "merge", "7", "--rebase"], "");
    assert_eq!(
        (code, err.trim()),
        (1, "X Pull request #7 was already merged")
    );
    assert_eq!(
        gh_merges(&w.gh_dir),
        ["squash", "merge", "rebase", "rebase"]
    );
}

#[test]
fn checks_and_closing_are_the_tests_to_set_and_refuse_a_merge() {
    let w = World::new();
    w.branch("codebutler/x", &[("b.txt", "b\n")], "Add b");
    w.push("codebutler/x");
    assert_eq!(w.create("codebutler/x", "Add b").0, 0);
    let base_before = w.origin_tip(&w.base);
    let (code, _, err) = w.gh(&["pr", "view", "7", "--json", "nope"], "");
    assert_eq!((code, err.trim()), (1, "Unknown JSON field: \"nope\""));

    // Edit keeps the body.
    let (code, _, _) = w.gh(&["pr", "edit", "7", "--body-file", "-"], "new body\n");
    assert_eq!(code, 0);
    assert_eq!(gh_edited_body(&w.gh_dir).as_deref(), Some("new body\n"));
    assert_eq!(w.gh(&["pr", "edit", "7", "--title", "x"], "").0, 1);
    // Each edit GitHub received is logged; one held and lost never reaches it.
    block_edit(&w.gh_dir);
    let held = {
        let (gh_dir, repo) = (w.gh_dir.clone(), w.repo.clone());
        std::thread::spawn(move || {
            gh_in(
                &gh_dir,
                &repo,
                &["pr", "edit", "7", "--body-file", "-"],
                "lost body\n",
            )
            .0
        })
    };
    while !edit_waiting(&w.gh_dir) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    release_edit(&w.gh_dir, true);
    assert_eq!(held.join().unwrap(), 1);
    let (code, _, _) = w.gh(&["pr", "edit", "7", "--body-file", "-"], "two\n\nlines\n");
    assert_eq!(code, 0);
    assert_eq!(
        gh_edited_bodies(&w.gh_dir),
        ["new body\n", "two\n\nlines\n"]
    );

    // Failing checks refuse a merge without --admin; no strategy or an unknown flag too.
    FakePr {
        checks: "failing",
        ..FakePr::default()
    }
    .set(&w.gh_dir);
    assert_eq!(w.view("7")["statusCheckRollup"][1]["conclusion"], "FAILURE");
    let (code, _, err) = w.gh(&["pr", "merge", "7", "--squash"], "");
    assert_eq!(code, 1);
    assert!(
        err.contains("the base branch policy prohibits the merge"),
        "{err}"
    );
    let (code, _, err) = w.gh(&["pr", "merge", "7"], "");
    assert_eq!(code, 1);
    assert!(err.contains("--squash required"), "{err}");
    let (code, _, err) = w.gh(&["pr", "merge", "7", "--squash", "--bogus"], "");
    assert_eq!(code, 1);
    assert!(err.contains("unknown flag: --bogus"), "{err}");
    // Closed by a person: no merge either.
    FakePr {
        state: "CLOSED",
        ..FakePr::default()
    }
    .set(&w.gh_dir);
    let (code, _, err) = w.gh(&["pr", "merge", "7", "--squash"], "");
    assert_eq!((code, err.trim()), (1, "X Pull request #7 is closed"));
    assert_eq!(w.origin_tip(&w.base), base_before, "nothing landed");
    assert_eq!(FakePr::state(&w.gh_dir), "CLOSED");

    // A person merges it on GitHub.
    FakePr::default().set(&w.gh_dir);
    let calls = gh_log(&w.gh_dir).len();
    merge_on_github(&w.gh_dir, &w.repo, 7, "merge");
    assert_ne!(w.origin_tip(&w.base), base_before);
    assert_eq!(FakePr::state(&w.gh_dir), "MERGED");
    assert_eq!(
        gh_log(&w.gh_dir).len(),
        calls,
        "a person's merge is not the product's"
    );
    assert_eq!(
        gh_merges(&w.gh_dir),
        ["squash", "squash"],
        "the refused ones"
    );
}

#[test]
fn a_blocked_merge_waits_until_released() {
    let w = World::new();
    w.branch("codebutler/x", &[("b.txt", "b\n")], "Add b");
    w.push("codebutler/x");
    assert_eq!(w.create("codebutler/x", "Add b").0, 0);
    block_merge(&w.gh_dir);
    let child = Command::new(w.gh_dir.join("gh"))
        .args(["pr", "merge", "7", "--merge"])
        .current_dir(&w.repo)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !merge_waiting(&w.gh_dir) {
        assert!(std::time::Instant::now() < deadline, "never waited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(FakePr::state(&w.gh_dir), "OPEN");
    release_merge(&w.gh_dir);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(FakePr::state(&w.gh_dir), "MERGED");
}

#[test]
fn fake_gh_logs_every_call_and_needs_an_origin_for_pull_requests() {
    let dir = tempfile::tempdir().unwrap();
    let gh = install_fake_gh(dir.path());
    assert_eq!(gh, dir.path().join("gh"));
    assert!(gh_log(dir.path()).is_empty());
    // Outside a repository with an origin, gh knows no repository.
    let (code, _, err) = gh_in(
        dir.path(),
        dir.path(),
        &["pr", "view", "7", "--json", "state"],
        "",
    );
    assert_eq!((code, err.trim()), (1, "no git remotes found"));
    let (code, out, _) = gh_in(
        dir.path(),
        dir.path(),
        &["issue", "view", "--repo", "acme/app", "7", "--json=title"],
        "",
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["number"], 7);
    let (code, _, err) = gh_in(
        dir.path(),
        dir.path(),
        &["pr", "merge", "--title", "x y"],
        "",
    );
    assert_eq!(code, 1);
    assert!(err.contains("unsupported"), "{err}");
    assert_eq!(
        gh_log(dir.path()),
        vec![
            "pr view 7 --json state",
            "issue view --repo acme/app 7 --json=title",
            "pr merge --title x y",
        ]
    );
}

#[test]
fn fake_gh_answers_for_the_items_a_test_added() {
    use crate::FakeItem;
    let dir = tempfile::tempdir().unwrap();
    let gh = install_fake_gh(dir.path());
    let run = |args: &[&str]| Command::new(&gh).args(args).output().unwrap();

    let out = run(&["repo", "view", "--json", "nameWithOwner"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"nameWithOwner\":\"acme/app\"}\n"
    );
    crate::gh_items::set_repository(dir.path(), "acme/other");
    let out = run(&["repo", "view", "--json", "nameWithOwner"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("acme/other"));

    FakeItem::pull_request(
        42,
        "Fix login",
        "Body",
        &[("a.rs", 3, 1)],
        "diff --git a/a.rs b/a.rs\n",
    )
    .install(dir.path());
    FakeItem::issue(7, "Crash", "It crashes", &[("carol", "me too")]).install(dir.path());
    let out = run(&["pr", "view", "42", "--json", "title,files,state"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"title": "Fix login", "files": [{"path": "a.rs", "additions": 3, "deletions": 1}], "state": "MERGED"})
    );
    let out = run(&["pr", "diff", "42"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "diff --git a/a.rs b/a.rs\n"
    );
    let out = run(&["issue", "view", "7", "--json", "comments"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["comments"][0]["body"], "me too");

    // Numbers without an item fail as GitHub answers them; so do unknown fields.
    let out = run(&["pr", "view", "7", "--json", "title"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Could not resolve to a PullRequest with the number of 7.")
    );
    let out = run(&["issue", "view", "9", "--json", "title"]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Could not resolve to an issue or pull request with the number of 9.")
    );
    let out = run(&["pr", "view", "42", "--json", "reviewz"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unknown JSON field: \"reviewz\""));
    FakeItem::failing_pull_request(5, "HTTP 502: Server Error").install(dir.path());
    let out = run(&["pr", "view", "5", "--json", "title"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "HTTP 502: Server Error\n"
    );
}

#[test]
fn fake_gh_answers_who_has_write_access_as_the_test_set_it() {
    use crate::gh::{
        add_conversation_comment, add_conversation_comment_as, add_line_comment_as, set_permission,
    };
    let world = World::new();
    let dir = world.gh_dir.as_path();
    let permission = |login: &str| {
        world.gh(
            &[
                "api",
                &format!("repos/{{owner}}/{{repo}}/collaborators/{login}/permission"),
            ],
            "",
        )
    };
    // Not a collaborator: GitHub's 404, its body on stdout.
    let (code, out, err) = permission("mallory");
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "gh: Not Found (HTTP 404)");
    assert!(out.contains(r#""message":"Not Found""#), "{out}");
    // Roles as set (logins without case); maintain and triage read as their base roles.
    set_permission(dir, "Carol", "maintain");
    set_permission(dir, "trent", "triage");
    for (login, expected, role) in [
        ("carol", "write", "maintain"),
        ("CAROL", "write", "maintain"),
        ("trent", "read", "triage"),
    ] {
        let (code, out, err) = permission(login);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["permission"], expected, "{login}");
        assert_eq!(v["role_name"], role, "{login}");
    }
    // A login that is no login is refused, never looked up as a path.
    let (code, _, _) = permission("..%2F..");
    assert_eq!(code, 1);

    // Comments carry the association the test gave; the plain helpers are a team member's.
    world.branch("codebutler/x", &[("b.txt", "b\n")], "Add b");
    world.push("codebutler/x");
    let (code, _, err) = world.create("codebutler/x", "Add b");
    assert_eq!(code, 0, "{err}");
    add_line_comment_as(dir, 1, "mallory", "NONE", "a.rs", 1, "x");
    add_conversation_comment_as(dir, "IC_1", "dave", "CONTRIBUTOR", "y");
    add_conversation_comment(dir, "IC_2", "alice", "z");
    let (_, lines, _) = world.gh(&["api", "repos/{owner}/{repo}/pulls/7/comments"], "");
    let lines: serde_json::Value = serde_json::from_str(&lines).unwrap();
    assert_eq!(lines[0]["author_association"], "NONE");
    let (code, out, err) = world.gh(&["pr", "view", "7", "--json", "comments"], "");
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["comments"][0]["authorAssociation"], "CONTRIBUTOR");
    assert_eq!(v["comments"][1]["authorAssociation"], "MEMBER");
    let (code, out, _) = permission("alice");
    assert_eq!(code, 0);
    assert!(out.contains(r#""permission":"write""#), "{out}");
}

/// Reviews add up as GitHub adds them: each reviewer's latest review is theirs in
/// `latestReviews`, an approval after a request for changes clears it from `reviewDecision`,
/// and a line comment opens a review thread GraphQL lists unresolved until a person resolves
/// it; another GraphQL query fails.
#[test]
fn reviews_and_review_threads_add_up_as_github_adds_them() {
    let w = World::new();
    w.branch("feature", &[("b.txt", "b\n")], "Add b");
    w.push("feature");
    assert_eq!(w.create("feature", "Add b").0, 0);
    let gh = &w.gh_dir;
    let reviews = |w: &World| -> serde_json::Value {
        let (code, out, err) = w.gh(
            &["pr", "view", "7", "--json", "reviewDecision,latestReviews"],
            "",
        );
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    assert_eq!(reviews(&w)["reviewDecision"], "");
    crate::gh::submit_review(gh, "carol", "CHANGES_REQUESTED", "Split it.");
    crate::gh::submit_review(gh, "dave", "APPROVED", "");
    let seen = reviews(&w);
    assert_eq!(seen["reviewDecision"], "CHANGES_REQUESTED");
    let latest = seen["latestReviews"].as_array().unwrap();
    assert_eq!(latest.len(), 2);
    assert_eq!(latest[0]["author"]["login"], "carol");
    assert_eq!(latest[0]["body"], "Split it.");
    crate::gh::submit_review(gh, "carol", "APPROVED", "Fine.");
    let seen = reviews(&w);
    assert_eq!(seen["reviewDecision"], "APPROVED");
    assert_eq!(seen["latestReviews"].as_array().unwrap().len(), 2);

    let threads = |w: &World| -> (i32, String, String) {
        w.gh(
            &[
                "api",
                "graphql",
                "-f",
                "query=query { reviewThreads { nodes { isResolved } } }",
                "-F",
                "owner={owner}",
                "-F",
                "name={repo}",
                "-F",
                "number=7",
            ],
            "",
        )
    };
    crate::gh::add_line_comment(gh, 901, "bob", "b.txt", 1, "Why b?");
    let (code, out, err) = threads(&w);
    assert_eq!(code, 0, "{err}");
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    let nodes = &answer["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"];
    assert_eq!(nodes[0]["isResolved"], false);
    assert_eq!(nodes[0]["comments"]["nodes"][0]["author"]["login"], "bob");
    assert_eq!(nodes[0]["comments"]["nodes"][0]["path"], "b.txt");
    crate::gh::resolve_review_thread(gh, 901, true);
    let (_, out, _) = threads(&w);
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        answer["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"][0]["isResolved"],
        true
    );
    let (code, _, err) = w.gh(
        &["api", "graphql", "-f", "query=query { viewer { login } }"],
        "",
    );
    assert_ne!(code, 0);
    assert!(err.contains("unsupported GraphQL query"), "{err}");
}
