//! The real GitHub CLI accepts every command line the controller runs. The e2e suite talks to
//! a fake `gh`, which takes what it is written to take; Debian's `gh` checks its flags, its
//! argument counts and its `--json` fields before any request. So each shape the controller
//! builds ([`GhArgs`], the one place they are built) is run through the real `gh` in a
//! network namespace of its own: with a token and a GitHub remote it gets as far as the
//! network and fails there, and never with a usage error.
//!
//! A new kind of call is a new `GhArgs` variant: `kind` below stops compiling until it has a
//! number (and `KINDS` grows by one), and `every_kind_has_a_sample` until `shapes` holds one.
//! A new shape of a kind (other `--json` fields, another endpoint) is one line in `shapes`.

use std::path::Path;
use std::process::{Command, Stdio};

use codebutler_controller::closing::feedback::FEEDBACK_FIELDS;
use codebutler_controller::config::MergeStrategy;
use codebutler_controller::pm::references::github::{ISSUE_FIELDS, PR_FIELDS};
use codebutler_controller::pm::tools::{GH_STATUS_ISSUE_FIELDS, GH_STATUS_PR_FIELDS};
use codebutler_controller::workspace::gh_cli::GhArgs;
use codebutler_controller::workspace::pull_request::{VIEW_FIELDS, WATCH_FIELDS};

/// One sample of every command line the controller runs `gh` with.
fn shapes() -> Vec<GhArgs<'static>> {
    let mut shapes = vec![
        GhArgs::AuthStatus,
        GhArgs::RepoView,
        GhArgs::PrCreate {
            branch: "codebutler/add-the-notes",
            title: "Add the notes",
        },
        GhArgs::PrView {
            number: 7,
            fields: VIEW_FIELDS,
        },
        GhArgs::PrView {
            number: 7,
            fields: WATCH_FIELDS,
        },
        GhArgs::PrView {
            number: 7,
            fields: FEEDBACK_FIELDS,
        },
        GhArgs::PrView {
            number: 7,
            fields: PR_FIELDS,
        },
        GhArgs::PrView {
            number: 7,
            fields: GH_STATUS_PR_FIELDS,
        },
        GhArgs::IssueView {
            number: 7,
            fields: ISSUE_FIELDS,
        },
        GhArgs::IssueView {
            number: 7,
            fields: GH_STATUS_ISSUE_FIELDS,
        },
        GhArgs::PrDiff { number: 7 },
        GhArgs::PrEditBody { number: 7 },
        GhArgs::PrComment { number: 7 },
        GhArgs::Api {
            endpoint: "user",
            paginate: false,
        },
        GhArgs::Api {
            endpoint: "repos/{owner}/{repo}/pulls/7/comments",
            paginate: true,
        },
        GhArgs::Api {
            endpoint: "repos/{owner}/{repo}/collaborators/alice/permission",
            paginate: false,
        },
        GhArgs::ApiReply {
            number: 7,
            comment: 500,
        },
        GhArgs::ApiReview { number: 7 },
        GhArgs::RunLogFailed { run: 4242 },
        GhArgs::ReviewThreads { number: 7 },
    ];
    shapes.extend(MergeStrategy::ALL.map(|strategy| GhArgs::PrMerge {
        number: 7,
        strategy,
    }));
    shapes
}

/// How many kinds of call `GhArgs` has: the arms of `kind`.
const KINDS: usize = 14;

/// A number for each kind of call; a kind added to `GhArgs` makes this stop compiling.
fn kind(args: &GhArgs) -> usize {
    match args {
        GhArgs::AuthStatus => 0,
        GhArgs::RepoView => 1,
        GhArgs::PrCreate { .. } => 2,
        GhArgs::PrView { .. } => 3,
        GhArgs::PrDiff { .. } => 4,
        GhArgs::IssueView { .. } => 5,
        GhArgs::PrEditBody { .. } => 6,
        GhArgs::PrComment { .. } => 7,
        GhArgs::PrMerge { .. } => 8,
        GhArgs::Api { .. } => 9,
        GhArgs::ApiReply { .. } => 10,
        GhArgs::RunLogFailed { .. } => 11,
        GhArgs::ReviewThreads { .. } => 12,
        GhArgs::ApiReview { .. } => 13,
    }
}

#[test]
fn every_kind_has_a_sample() {
    let mut sampled: Vec<usize> = shapes().iter().map(kind).collect();
    sampled.sort_unstable();
    sampled.dedup();
    assert_eq!(sampled, (0..KINDS).collect::<Vec<_>>());
}

/// What `gh` says when it refuses a command line before doing anything.
const USAGE_ERRORS: [&str; 9] = [
    "unknown flag",
    "unknown shorthand flag",
    "Unknown JSON field",
    "arg(s)",
    "required flag",
    "unknown command",
    "flag needs an argument",
    "invalid argument",
    "Usage:",
];

/// The real `gh` (Debian's `gh` package), or a failure saying how to get it.
fn real_gh() -> &'static str {
    let found = Command::new("gh")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "the GitHub CLI `gh` is not installed: install Debian's `gh` (apt-get install gh), or run \
         the suite with tests/run, which installs what the suite needs"
    );
    "gh"
}

/// Runs `gh args` offline in `repo` (a repository whose origin is on GitHub), as someone
/// logged in through `GH_TOKEN`, with nothing of the user's own `gh` configuration; returns
/// its exit code and what it printed.
fn run_offline(repo: &Path, home: &Path, args: &[String]) -> (Option<i32>, String) {
    // A network namespace of its own: nothing reaches GitHub, whatever the host allows.
    let mut command = Command::new("unshare");
    if !nix::unistd::geteuid().is_root() {
        command.args(["--user", "--map-root-user"]);
    }
    command
        .arg("--net")
        .arg("--")
        .arg(real_gh())
        .args(args)
        .current_dir(repo)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GH_CONFIG_DIR", home.join("gh"))
        .env("GH_TOKEN", "ghp_offlinecheck0000000000000000000000")
        .env("GH_PROMPT_DISABLED", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("run unshare (util-linux): {e}"));
    // What the controller writes on stdin for `--body-file -` and `--input -`.
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(br#"{"body": "text"}"#);
    }
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

/// Every command line the controller builds gets past `gh`'s own checks: `gh` fails at the
/// network (or, for `auth status`, at checking the token), never with a usage error.
#[test]
fn the_real_gh_accepts_every_command_line_the_controller_runs() {
    real_gh();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("app");
    std::fs::create_dir(&repo).unwrap();
    codebutler_test_support::git::init(&repo);
    codebutler_test_support::git::git(
        &repo,
        &["remote", "add", "origin", "https://github.com/acme/app.git"],
    );
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();

    let mut refused = Vec::new();
    for shape in shapes() {
        let args = shape.to_args();
        let (code, text) = run_offline(&repo, &home, &args);
        let usage = USAGE_ERRORS.iter().find(|e| text.contains(*e));
        // Offline, `gh` can only have stopped at GitHub's door.
        let at_github = text.contains("github.com");
        if code == Some(0) || usage.is_some() || !at_github {
            refused.push(format!("gh {} ({code:?}): {}", args.join(" "), text.trim()));
        }
    }
    assert!(
        refused.is_empty(),
        "command lines the real gh does not take as they are:\n{}",
        refused.join("\n")
    );
}

/// The check itself catches what it is for: a flag, a JSON field and an argument count gh
/// does not take.
#[test]
fn the_check_catches_a_command_line_gh_refuses() {
    real_gh();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("app");
    std::fs::create_dir(&repo).unwrap();
    codebutler_test_support::git::init(&repo);
    codebutler_test_support::git::git(
        &repo,
        &["remote", "add", "origin", "https://github.com/acme/app.git"],
    );
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    for bad in [
        "pr view 7 --json state,notAField",
        "pr merge 7 --squash --delete-everything",
        "pr view 7 8",
    ] {
        let args: Vec<String> = bad.split(' ').map(str::to_owned).collect();
        let (code, text) = run_offline(&repo, &home, &args);
        assert_ne!(code, Some(0), "{bad}: {text}");
        assert!(
            USAGE_ERRORS.iter().any(|e| text.contains(e)),
            "{bad}: {text}"
        );
    }
}
