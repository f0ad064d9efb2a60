use crate::{gh_log, gh_pr_body, install_fake_gh};
use std::io::Write;
use std::process::Command;

#[test]
fn fake_gh_logs_and_answers_pr_view() {
    let dir = tempfile::tempdir().unwrap();
    let gh = install_fake_gh(dir.path());
    assert_eq!(gh, dir.path().join("gh"));

    let out = Command::new(&gh)
        .args([
            "pr",
            "view",
            "42",
            "--json",
            "title,state,statusCheckRollup",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["number"], 42);
    assert_eq!(v["title"], "Fake PR 42");
    assert_eq!(v["state"], "OPEN");
    assert_eq!(v["url"], "https://github.com/acme/app/pull/42");

    let out = Command::new(&gh)
        .args(["issue", "view", "--repo", "acme/app", "7", "--json=title"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["number"], 7);

    let out = Command::new(&gh)
        .args(["pr", "merge", "--title", "x y"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported"));

    // `pr create` keeps the body it reads on stdin and prints the PR's address last.
    assert_eq!(gh_pr_body(dir.path()), None);
    let mut child = Command::new(&gh)
        .args(["pr", "create", "--title", "T", "--body-file", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the body\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().last(),
        Some("https://github.com/acme/app/pull/7")
    );
    assert_eq!(gh_pr_body(dir.path()).as_deref(), Some("the body\n"));

    // Without --json, `pr view` is unsupported too.
    let out = Command::new(&gh)
        .args(["pr", "view", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));

    assert_eq!(
        gh_log(dir.path()),
        vec![
            "pr view 42 --json title,state,statusCheckRollup",
            "issue view --repo acme/app 7 --json=title",
            "pr merge --title x y",
            "pr create --title T --body-file -",
            "pr view 3",
        ]
    );
}

#[test]
fn gh_log_is_empty_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    install_fake_gh(dir.path());
    assert!(gh_log(dir.path()).is_empty());
}

/// Runs the fake `gh` with `args` and `stdin`; (exit code, stdout, stderr).
fn gh(dir: &std::path::Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(dir.join("gh"))
        .args(args)
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

fn view(dir: &std::path::Path) -> serde_json::Value {
    let (code, out, err) = gh(
        dir,
        &[
            "pr",
            "view",
            "7",
            "--json",
            "state,mergeable,mergedAt,closedAt,statusCheckRollup,url",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn fake_gh_views_edits_and_merges_like_gh() {
    use crate::gh::{FakePr, gh_edited_body, gh_merges};
    let dir = tempfile::tempdir().unwrap();
    install_fake_gh(dir.path());
    let v = view(dir.path());
    assert_eq!(
        (
            &v["state"],
            &v["mergeable"],
            &v["mergedAt"],
            &v["statusCheckRollup"]
        ),
        (
            &"OPEN".into(),
            &"MERGEABLE".into(),
            &serde_json::Value::Null,
            &serde_json::json!([])
        )
    );
    let (code, _, err) = gh(dir.path(), &["pr", "view", "7", "--json", "nope"], "");
    assert_eq!((code, err.trim()), (1, "Unknown JSON field: \"nope\""));

    // Edit keeps the body.
    let (code, _, _) = gh(
        dir.path(),
        &["pr", "edit", "7", "--body-file", "-"],
        "new body\n",
    );
    assert_eq!(code, 0);
    assert_eq!(gh_edited_body(dir.path()).as_deref(), Some("new body\n"));
    let (code, _, _) = gh(dir.path(), &["pr", "edit", "7", "--title", "x"], "");
    assert_eq!(code, 1);

    // Failing checks refuse a merge without --admin; no strategy or an unknown flag too.
    FakePr {
        checks: "failing",
        ..FakePr::default()
    }
    .set(dir.path());
    let v = view(dir.path());
    assert_eq!(v["statusCheckRollup"][1]["conclusion"], "FAILURE");
    let (code, _, err) = gh(dir.path(), &["pr", "merge", "7", "--squash"], "");
    assert_eq!(code, 1);
    assert!(err.contains("is not mergeable"), "{err}");
    let (code, _, err) = gh(dir.path(), &["pr", "merge", "7"], "");
    assert_eq!(code, 1);
    assert!(err.contains("--squash required"), "{err}");
    let (code, _, err) = gh(dir.path(), &["pr", "merge", "7", "--squash", "--bogus"], "");
    assert_eq!(code, 1);
    assert!(err.contains("unknown flag: --bogus"), "{err}");
    assert_eq!(FakePr::state(dir.path()), "OPEN");

    // Passing checks merge once; a second merge fails like gh.
    FakePr {
        checks: "passing",
        ..FakePr::default()
    }
    .set(dir.path());
    let (code, out, _) = gh(dir.path(), &["pr", "merge", "7", "--squash"], "");
    assert_eq!(
        (code, out.trim()),
        (0, "✓ Squashed and merged pull request #7")
    );
    let v = view(dir.path());
    assert_eq!(
        (&v["state"], &v["mergedAt"]),
        (&"MERGED".into(), &"2026-11-24T12:00:00Z".into())
    );
    let (code, _, err) = gh(dir.path(), &["pr", "merge", "7", "--rebase"], "");
    assert_eq!(
        (code, err.trim()),
        (1, "X Pull request #7 was already merged")
    );
    // Every call that named a strategy is logged: refused, merged, refused again.
    assert_eq!(gh_merges(dir.path()), ["squash", "squash", "rebase"]);
}

#[test]
fn a_blocked_merge_waits_until_released() {
    use crate::gh::{FakePr, block_merge, merge_waiting, release_merge};
    let dir = tempfile::tempdir().unwrap();
    install_fake_gh(dir.path());
    block_merge(dir.path());
    let child = Command::new(dir.path().join("gh"))
        .args(["pr", "merge", "7", "--merge"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !merge_waiting(dir.path()) {
        assert!(std::time::Instant::now() < deadline, "never waited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(FakePr::state(dir.path()), "OPEN");
    release_merge(dir.path());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(FakePr::state(dir.path()), "MERGED");
}

#[test]
fn a_second_pull_request_for_a_branch_is_refused_like_github() {
    let dir = tempfile::tempdir().unwrap();
    let gh = install_fake_gh(dir.path());
    let create = || {
        let mut child = Command::new(&gh)
            .args([
                "pr",
                "create",
                "--head",
                "codebutler/x",
                "--title",
                "T",
                "--body-file",
                "-",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"body").unwrap();
        child.wait_with_output().unwrap()
    };
    assert!(create().status.success());
    let again = create();
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(again.stderr).unwrap(),
        "a pull request for branch \"codebutler/x\" into branch \"main\" already exists:\nhttps://github.com/acme/app/pull/7\n"
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
    let dir = tempfile::tempdir().unwrap();
    install_fake_gh(dir.path());
    let permission = |login: &str| {
        gh(
            dir.path(),
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
    set_permission(dir.path(), "Carol", "maintain");
    set_permission(dir.path(), "trent", "triage");
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
    add_line_comment_as(dir.path(), 1, "mallory", "NONE", "a.rs", 1, "x");
    add_conversation_comment_as(dir.path(), "IC_1", "dave", "CONTRIBUTOR", "y");
    add_conversation_comment(dir.path(), "IC_2", "alice", "z");
    let (_, lines, _) = gh(
        dir.path(),
        &["api", "repos/{owner}/{repo}/pulls/7/comments"],
        "",
    );
    let lines: serde_json::Value = serde_json::from_str(&lines).unwrap();
    assert_eq!(lines[0]["author_association"], "NONE");
    let v = view_comments(dir.path());
    assert_eq!(v["comments"][0]["authorAssociation"], "CONTRIBUTOR");
    assert_eq!(v["comments"][1]["authorAssociation"], "MEMBER");
    let (code, out, _) = permission("alice");
    assert_eq!(code, 0);
    assert!(out.contains(r#""permission":"write""#), "{out}");
}

fn view_comments(dir: &std::path::Path) -> serde_json::Value {
    let (code, out, err) = gh(dir, &["pr", "view", "7", "--json", "comments"], "");
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}
