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
