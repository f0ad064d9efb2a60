//! What the controller does to a thread's pull request after it is open: read its state
//! (`gh pr view --json …`), rewrite its description (`gh pr edit --body-file -`), merge it
//! (`gh pr merge --squash|--merge|--rebase`) and delete its remote branch
//! (`git push origin --delete codebutler/<slug>`).
//!
//! For the review loop it also reads what `gh` prints for the PR watcher ([`view_output`],
//! [`api_get`], [`failed_log`]) — parsed by [`crate::closing::feedback`] and
//! [`crate::closing::checks`] — answers comments ([`reply_to_review_comment`],
//! [`comment`]), and asks who has write access ([`collaborator_permission`], for
//! [`super::write_access`]).
//!
//! Like [`super::forge`], every command runs in the main repository (never in a worktree)
//! with fixed arguments: `gh` with prompts off, `git` with [`super::git_command::safe_git`]
//! (no hooks, no `ext::`), never `--force`, and only `codebutler/` branches are deleted.
//! What `gh` prints is parsed into [`PrStatus`]; output it does not understand is an error
//! naming what was wrong, never a guess. Whether a pull request may be merged is plain data
//! ([`merge_blocker`]), tested by table.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use super::forge::{ForgeError, check_branch};
use super::gh_cli::GhArgs;
use super::git_command::{CommandError, quote, run, safe_git};
use crate::config::MergeStrategy;

/// Longest one `gh` call here may take.
pub const GH_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest deleting the remote branch may take.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(120);
/// The fields `gh pr view` is asked for before a merge: its state, its checks and its
/// reviews (GitHub's decision and each reviewer's latest review, for
/// [`super::review_gate`]).
pub const VIEW_FIELDS: &str =
    "state,mergeable,mergedAt,closedAt,statusCheckRollup,url,reviewDecision,latestReviews";
/// The fields the PR watcher asks for.
pub const WATCH_FIELDS: &str = "state,mergedAt,closedAt";

/// Why an operation on a pull request failed.
#[derive(Debug, thiserror::Error)]
pub enum PullRequestError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("read `gh pr view {number}`'s answer: {source}; it printed {output:?}")]
    Unreadable {
        number: u64,
        source: serde_json::Error,
        output: String,
    },
    #[error("read the review threads of pull request #{number}: {source}; gh printed {output:?}")]
    UnreadableThreads {
        number: u64,
        source: serde_json::Error,
        output: String,
    },
    #[error(
        "read GitHub's answer to the review posted on #{number}: {source}; gh printed {output:?}"
    )]
    UnreadableReview {
        number: u64,
        source: serde_json::Error,
        output: String,
    },
    #[error(transparent)]
    Branch(#[from] ForgeError),
}

/// A pull request's state on GitHub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PrState {
    Open,
    Closed,
    Merged,
}

/// Whether GitHub can merge the pull request without conflicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mergeable {
    Mergeable,
    Conflicting,
    /// GitHub has not computed it yet.
    Unknown,
}

/// One check of the pull request's latest commit: a check run (`CheckRun`: `name`,
/// `status`, `conclusion`) or a commit status (`StatusContext`: `context`, `state`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub context: Option<String>,
    /// A check run's `QUEUED`, `IN_PROGRESS`, `COMPLETED`…
    #[serde(default)]
    pub status: Option<String>,
    /// A check run's `SUCCESS`, `FAILURE`, `CANCELLED`… (empty until it completes).
    #[serde(default)]
    pub conclusion: Option<String>,
    /// A status context's `SUCCESS`, `PENDING`, `FAILURE`, `ERROR`.
    #[serde(default)]
    pub state: Option<String>,
    /// A check run's page (`…/actions/runs/<run id>/job/<job id>` for GitHub Actions).
    #[serde(default)]
    pub details_url: Option<String>,
    /// A status context's page.
    #[serde(default)]
    pub target_url: Option<String>,
}

/// What `gh pr view --json` says of a pull request.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrStatus {
    pub state: PrState,
    /// Absent when only the watcher's fields were asked for.
    #[serde(default)]
    pub mergeable: Option<Mergeable>,
    #[serde(default)]
    pub merged_at: Option<String>,
    #[serde(default)]
    pub closed_at: Option<String>,
    #[serde(default)]
    pub status_check_rollup: Vec<Check>,
    #[serde(default)]
    pub url: Option<String>,
    /// GitHub's review decision: `APPROVED`, `CHANGES_REQUESTED`, `REVIEW_REQUIRED`, or
    /// none (absent, `null` or empty when no review is required or none was given).
    #[serde(default)]
    pub review_decision: Option<String>,
    /// Each reviewer's latest review.
    #[serde(default)]
    pub latest_reviews: Vec<Review>,
}

/// A review as `gh pr view --json latestReviews` prints it (only what the merge reads).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Review {
    /// Its author; `None` for a deleted account.
    #[serde(default)]
    pub author: Option<Login>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    #[serde(default)]
    pub body: String,
}

/// A GitHub account as `gh` prints it: `{"login": …}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Login {
    pub login: String,
}

/// A review thread (line comments answering each other) of a pull request, as GitHub's
/// GraphQL `reviewThreads` gives it: whether it is resolved, and its first comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewThread {
    pub is_resolved: bool,
    /// Who opened it; `None` for a deleted account.
    pub author: Option<String>,
    /// The file it is on.
    pub path: String,
    /// What its first comment says.
    pub body: String,
}

/// GitHub's answer to [`super::gh_cli::REVIEW_THREADS_QUERY`].
#[derive(Deserialize)]
struct ThreadsAnswer {
    data: ThreadsData,
}

#[derive(Deserialize)]
struct ThreadsData {
    repository: ThreadsRepository,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadsRepository {
    pull_request: ThreadsPullRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadsPullRequest {
    review_threads: Nodes<ThreadNode>,
}

#[derive(Deserialize)]
struct Nodes<T> {
    nodes: Vec<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadNode {
    is_resolved: bool,
    comments: Nodes<ThreadComment>,
}

#[derive(Deserialize)]
struct ThreadComment {
    #[serde(default)]
    author: Option<Login>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    body: String,
}

/// Parses GitHub's answer to [`super::gh_cli::REVIEW_THREADS_QUERY`] for pull request `number`.
pub fn parse_review_threads(
    number: u64,
    output: &str,
) -> Result<Vec<ReviewThread>, PullRequestError> {
    let answer: ThreadsAnswer =
        serde_json::from_str(output).map_err(|source| PullRequestError::UnreadableThreads {
            number,
            source,
            output: quote(output.trim()),
        })?;
    Ok(answer
        .data
        .repository
        .pull_request
        .review_threads
        .nodes
        .into_iter()
        .map(|node| {
            let first = node.comments.nodes.into_iter().next();
            ReviewThread {
                is_resolved: node.is_resolved,
                author: first
                    .as_ref()
                    .and_then(|c| c.author.as_ref())
                    .map(|a| a.login.clone()),
                path: first.as_ref().map(|c| c.path.clone()).unwrap_or_default(),
                body: first.map(|c| c.body).unwrap_or_default(),
            }
        })
        .collect())
}

/// Pull request `number`'s review threads: `gh api graphql` with
/// [`super::gh_cli::REVIEW_THREADS_QUERY`] (`gh` fills in `{owner}` and `{repo}` from the main
/// repository's remote).
pub async fn review_threads(
    cli: &Path,
    main: &Path,
    number: u64,
) -> Result<Vec<ReviewThread>, PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::ReviewThreads { number };
    command.args(args.to_args());
    let output = run(command, None, args.what(), GH_TIMEOUT).await?;
    parse_review_threads(number, &output)
}

/// Conclusions and states of a check that block a merge.
const FAILING: [&str; 6] = [
    "FAILURE",
    "CANCELLED",
    "TIMED_OUT",
    "ACTION_REQUIRED",
    "STARTUP_FAILURE",
    "ERROR",
];

impl Check {
    /// The name people know the check by.
    pub fn label(&self) -> &str {
        self.name
            .as_deref()
            .or(self.context.as_deref())
            .filter(|n| !n.is_empty())
            .unwrap_or("(unnamed check)")
    }

    /// Whether it failed (or was cancelled, timed out, or waits for someone's action).
    fn failed(&self) -> bool {
        [&self.conclusion, &self.state]
            .into_iter()
            .flatten()
            .any(|v| FAILING.contains(&v.to_ascii_uppercase().as_str()))
    }

    /// Whether it has not finished yet.
    fn pending(&self) -> bool {
        if self.failed() {
            return false;
        }
        match (&self.status, &self.state) {
            (Some(status), _) => !status.eq_ignore_ascii_case("COMPLETED"),
            (None, Some(state)) => {
                state.eq_ignore_ascii_case("PENDING") || state.eq_ignore_ascii_case("EXPECTED")
            }
            (None, None) => false,
        }
    }
}

/// What keeps a pull request from being merged now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeBlocker {
    /// It is merged already.
    AlreadyMerged,
    /// It was closed on GitHub.
    Closed,
    /// Its branch conflicts with the base.
    Conflicting,
    /// These checks failed.
    FailingChecks(Vec<String>),
    /// These checks are still running.
    PendingChecks(Vec<String>),
}

impl fmt::Display for MergeBlocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |names: &[String]| {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Self::AlreadyMerged => write!(f, "it is merged already"),
            Self::Closed => write!(f, "it was closed on GitHub without merging"),
            Self::Conflicting => write!(
                f,
                "its branch conflicts with the base branch; resolve the conflicts first"
            ),
            Self::FailingChecks(names) => write!(
                f,
                "{} failing: {}",
                if names.len() == 1 {
                    "a check is"
                } else {
                    "checks are"
                },
                list(names)
            ),
            Self::PendingChecks(names) => write!(
                f,
                "{} still running: {}; say merge again once {} finished",
                if names.len() == 1 {
                    "a check is"
                } else {
                    "checks are"
                },
                list(names),
                if names.len() == 1 {
                    "it has"
                } else {
                    "they have"
                }
            ),
        }
    }
}

/// Why `status` cannot be merged now, if anything: it must be open, not conflicting, and no
/// check failing or still running.
pub fn merge_blocker(status: &PrStatus) -> Option<MergeBlocker> {
    match status.state {
        PrState::Merged => return Some(MergeBlocker::AlreadyMerged),
        PrState::Closed => return Some(MergeBlocker::Closed),
        PrState::Open => {}
    }
    if status.mergeable == Some(Mergeable::Conflicting) {
        return Some(MergeBlocker::Conflicting);
    }
    let names = |keep: fn(&Check) -> bool| -> Vec<String> {
        status
            .status_check_rollup
            .iter()
            .filter(|c| keep(c))
            .map(|c| c.label().to_owned())
            .collect()
    };
    let failing = names(Check::failed);
    if !failing.is_empty() {
        return Some(MergeBlocker::FailingChecks(failing));
    }
    let pending = names(Check::pending);
    if !pending.is_empty() {
        return Some(MergeBlocker::PendingChecks(pending));
    }
    None
}

/// Parses `gh pr view <number> --json …`'s output.
pub fn parse_status(number: u64, output: &str) -> Result<PrStatus, PullRequestError> {
    serde_json::from_str(output).map_err(|source| PullRequestError::Unreadable {
        number,
        source,
        output: quote(output.trim()),
    })
}

/// `gh` with prompts off, run in the main repository `main`.
fn gh(cli: &Path, main: &Path) -> Command {
    let mut command = Command::new(cli);
    command
        .current_dir(main)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GH_PROMPT_DISABLED", "1");
    command
}

/// `gh pr view <number> --json <fields>`, parsed.
pub async fn view(
    cli: &Path,
    main: &Path,
    number: u64,
    fields: &str,
) -> Result<PrStatus, PullRequestError> {
    let output = view_output(cli, main, number, fields).await?;
    parse_status(number, &output)
}

/// What `gh pr view <number> --json <fields>` prints.
pub async fn view_output(
    cli: &Path,
    main: &Path,
    number: u64,
    fields: &str,
) -> Result<String, PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::PrView { number, fields };
    command.args(args.to_args());
    Ok(run(command, None, args.what(), GH_TIMEOUT).await?)
}

/// What `gh api [--paginate] <endpoint>` (a GET) prints; `gh` fills in `{owner}` and
/// `{repo}` from the main repository's remote.
pub async fn api_get(
    cli: &Path,
    main: &Path,
    endpoint: &str,
    paginate: bool,
) -> Result<String, PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::Api { endpoint, paginate };
    command.args(args.to_args());
    Ok(run(command, None, args.what(), GH_TIMEOUT).await?)
}

/// What `gh api repos/{owner}/{repo}/collaborators/<login>/permission` prints: `login`'s
/// permission on the repository. `login` must be a user login
/// ([`super::write_access::user_login`]), so it cannot change the endpoint's path; GitHub
/// answers 404 for someone who is not a collaborator.
pub async fn collaborator_permission(
    cli: &Path,
    main: &Path,
    login: &str,
) -> Result<String, PullRequestError> {
    let endpoint = format!("repos/{{owner}}/{{repo}}/collaborators/{login}/permission");
    api_get(cli, main, &endpoint, false).await
}

/// What `gh run view <run id> --log-failed` prints: the failed steps' log lines.
pub async fn failed_log(cli: &Path, main: &Path, run_id: u64) -> Result<String, PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::RunLogFailed { run: run_id };
    command.args(args.to_args());
    Ok(run(command, None, args.what(), GH_TIMEOUT).await?)
}

/// Replies to the line comment `id` of pull request `number`:
/// `gh api --method POST repos/{owner}/{repo}/pulls/<number>/comments/<id>/replies --input -`
/// with `{"body": …}` on stdin.
pub async fn reply_to_review_comment(
    cli: &Path,
    main: &Path,
    number: u64,
    id: u64,
    body: &str,
) -> Result<(), PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::ApiReply {
        number,
        comment: id,
    };
    command.args(args.to_args());
    let input = serde_json::json!({ "body": body }).to_string();
    run(command, Some(input.as_bytes()), args.what(), GH_TIMEOUT).await?;
    Ok(())
}

/// Posts a review on pull request `number`:
/// `gh api --method POST repos/{owner}/{repo}/pulls/<number>/reviews --input -` with
/// `review` (GitHub's JSON: `commit_id`, `body`, `event`, `comments`) on stdin; returns the
/// id GitHub gave the review.
pub async fn post_review(
    cli: &Path,
    main: &Path,
    number: u64,
    review: &serde_json::Value,
) -> Result<u64, PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::ApiReview { number };
    command.args(args.to_args());
    let input = review.to_string();
    let output = run(command, Some(input.as_bytes()), args.what(), GH_TIMEOUT).await?;
    #[derive(Deserialize)]
    struct Posted {
        id: u64,
    }
    let posted: Posted = serde_json::from_str(output.trim()).map_err(|source| {
        PullRequestError::UnreadableReview {
            number,
            source,
            output: quote(&output),
        }
    })?;
    Ok(posted.id)
}

/// Comments on pull request `number`'s conversation: `gh pr comment <number> --body-file -`.
pub async fn comment(
    cli: &Path,
    main: &Path,
    number: u64,
    body: &str,
) -> Result<(), PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::PrComment { number };
    command.args(args.to_args());
    run(command, Some(body.as_bytes()), args.what(), GH_TIMEOUT).await?;
    Ok(())
}

/// Rewrites the pull request's description: `gh pr edit <number> --body-file -`, the body
/// on stdin.
pub async fn edit_body(
    cli: &Path,
    main: &Path,
    number: u64,
    body: &str,
) -> Result<(), PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::PrEditBody { number };
    command.args(args.to_args());
    run(command, Some(body.as_bytes()), args.what(), GH_TIMEOUT).await?;
    Ok(())
}

/// Merges the pull request: `gh pr merge <number> --squash|--merge|--rebase`. The remote
/// branch is deleted apart ([`delete_remote_branch`]), so a failure there is its own step.
pub async fn merge(
    cli: &Path,
    main: &Path,
    number: u64,
    strategy: MergeStrategy,
) -> Result<(), PullRequestError> {
    let mut command = gh(cli, main);
    let args = GhArgs::PrMerge { number, strategy };
    command.args(args.to_args());
    run(command, None, args.what(), GH_TIMEOUT).await?;
    Ok(())
}

/// Deletes `branch` (a `codebutler/` branch) on `origin` from the main repository `main`:
/// `git -c core.hooksPath=/dev/null … push origin --delete refs/heads/<branch>`, never
/// forced. A branch already gone is not an error.
pub async fn delete_remote_branch(main: &Path, branch: &str) -> Result<(), PullRequestError> {
    check_branch(branch)?;
    let mut command = safe_git(main);
    command.args([
        "push",
        "origin",
        "--delete",
        &format!("refs/heads/{branch}"),
    ]);
    match run(command, None, "git push --delete", PUSH_TIMEOUT).await {
        Ok(_) => Ok(()),
        Err(CommandError::Failed { output, .. })
            if output.contains("remote ref does not exist") =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `origin` has `branch` (`git ls-remote --heads origin refs/heads/<branch>`, run
/// like a push, from the main repository `main`).
pub async fn remote_has_branch(main: &Path, branch: &str) -> Result<bool, PullRequestError> {
    check_branch(branch)?;
    let mut command = safe_git(main);
    command.args([
        "ls-remote",
        "--heads",
        "origin",
        &format!("refs/heads/{branch}"),
    ]);
    let output = run(command, None, "git ls-remote", PUSH_TIMEOUT).await?;
    Ok(!output.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> PrStatus {
        parse_status(7, json).unwrap()
    }

    #[test]
    fn gh_view_output_is_parsed() {
        let s = status(
            r#"{"state":"OPEN","mergeable":"MERGEABLE","mergedAt":null,"closedAt":null,
                "statusCheckRollup":[{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"SUCCESS"},
                {"__typename":"StatusContext","context":"ci/lint","state":"SUCCESS"}],
                "url":"https://github.com/acme/app/pull/7"}"#,
        );
        assert_eq!(s.state, PrState::Open);
        assert_eq!(s.mergeable, Some(Mergeable::Mergeable));
        assert_eq!(s.status_check_rollup.len(), 2);
        assert_eq!(s.status_check_rollup[1].label(), "ci/lint");
        assert_eq!(merge_blocker(&s), None);
        let watched = status(
            r#"{"state":"MERGED","mergedAt":"2026-11-24T10:00:00Z","closedAt":"2026-11-24T10:00:00Z"}"#,
        );
        assert_eq!(watched.state, PrState::Merged);
        assert_eq!(watched.merged_at.as_deref(), Some("2026-11-24T10:00:00Z"));
    }

    #[test]
    fn review_threads_are_read_from_graphqls_answer() {
        let threads = parse_review_threads(
            7,
            r#"{"data":{"repository":{"pullRequest":{"reviewThreads":{"nodes":[
                {"isResolved":false,"comments":{"nodes":[{"author":{"login":"bob"},"path":"a.rs","body":"Why?"}]}},
                {"isResolved":true,"comments":{"nodes":[{"author":null,"path":"b.rs","body":"ok"}]}},
                {"isResolved":false,"comments":{"nodes":[]}}]}}}}}"#,
        )
        .unwrap();
        assert_eq!(
            threads,
            vec![
                ReviewThread {
                    is_resolved: false,
                    author: Some("bob".into()),
                    path: "a.rs".into(),
                    body: "Why?".into()
                },
                ReviewThread {
                    is_resolved: true,
                    author: None,
                    path: "b.rs".into(),
                    body: "ok".into()
                },
                ReviewThread {
                    is_resolved: false,
                    author: None,
                    path: String::new(),
                    body: String::new()
                },
            ]
        );
        // GitHub's errors come as `{"errors": …}` without data: a clear error.
        let err = parse_review_threads(7, r#"{"errors":[{"message":"Bad credentials"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("read the review threads of pull request #7: "),
            "{err}"
        );
    }

    #[test]
    fn unreadable_output_is_a_clear_error() {
        for bad in [
            "",
            "not json",
            r#"{"state":"DRAFTED"}"#,
            r#"{"mergeable":"MERGEABLE"}"#,
            r#"{"state":"OPEN","statusCheckRollup":"green"}"#,
        ] {
            let err = parse_status(7, bad).unwrap_err().to_string();
            assert!(err.starts_with("read `gh pr view 7`'s answer: "), "{err}");
        }
    }

    #[test]
    fn what_blocks_a_merge() {
        let check = |name: &str, status: &str, conclusion: &str| {
            format!(r#"{{"name":"{name}","status":"{status}","conclusion":"{conclusion}"}}"#)
        };
        let open = |mergeable: &str, checks: &[String]| {
            status(&format!(
                r#"{{"state":"OPEN","mergeable":"{mergeable}","statusCheckRollup":[{}]}}"#,
                checks.join(",")
            ))
        };
        let done = |name: &str, conclusion: &str| check(name, "COMPLETED", conclusion);
        let cases = [
            (open("MERGEABLE", &[]), None),
            (open("UNKNOWN", &[done("test", "SUCCESS")]), None),
            (open("MERGEABLE", &[done("test", "SKIPPED")]), None),
            (open("MERGEABLE", &[done("test", "NEUTRAL")]), None),
            (
                status(r#"{"state":"MERGED"}"#),
                Some(MergeBlocker::AlreadyMerged),
            ),
            (status(r#"{"state":"CLOSED"}"#), Some(MergeBlocker::Closed)),
            (
                open("CONFLICTING", &[done("test", "FAILURE")]),
                Some(MergeBlocker::Conflicting),
            ),
            (
                open(
                    "MERGEABLE",
                    &[
                        done("build", "SUCCESS"),
                        done("test", "FAILURE"),
                        done("lint", "CANCELLED"),
                        check("e2e", "IN_PROGRESS", ""),
                    ],
                ),
                Some(MergeBlocker::FailingChecks(vec![
                    "test".into(),
                    "lint".into(),
                ])),
            ),
            (
                open("MERGEABLE", &[done("deploy", "TIMED_OUT")]),
                Some(MergeBlocker::FailingChecks(vec!["deploy".into()])),
            ),
            (
                open("MERGEABLE", &[done("review", "ACTION_REQUIRED")]),
                Some(MergeBlocker::FailingChecks(vec!["review".into()])),
            ),
            (
                open(
                    "MERGEABLE",
                    &[r#"{"context":"ci/legacy","state":"ERROR"}"#.into()],
                ),
                Some(MergeBlocker::FailingChecks(vec!["ci/legacy".into()])),
            ),
            (
                open(
                    "MERGEABLE",
                    &[
                        check("e2e", "QUEUED", ""),
                        r#"{"context":"ci/legacy","state":"PENDING"}"#.into(),
                    ],
                ),
                Some(MergeBlocker::PendingChecks(vec![
                    "e2e".into(),
                    "ci/legacy".into(),
                ])),
            ),
        ];
        for (status, expected) in cases {
            assert_eq!(merge_blocker(&status), expected, "{status:?}");
        }
    }

    #[test]
    fn blockers_say_what_to_do() {
        assert_eq!(
            MergeBlocker::FailingChecks(vec!["test".into()]).to_string(),
            "a check is failing: `test`"
        );
        assert_eq!(
            MergeBlocker::PendingChecks(vec!["a".into(), "b".into()]).to_string(),
            "checks are still running: `a`, `b`; say merge again once they have finished"
        );
    }

    #[test]
    fn strategies_round_trip() {
        for s in MergeStrategy::ALL {
            assert_eq!(MergeStrategy::parse(s.as_str()), Some(s));
        }
        assert_eq!(MergeStrategy::parse("fast-forward"), None);
        assert_eq!(MergeStrategy::default(), MergeStrategy::Squash);
    }

    /// A main repository with `main` and `codebutler/x` pushed to a bare `origin`.
    fn with_origin(dir: &Path) -> (std::path::PathBuf, git2::Repository) {
        let main = dir.join("repo");
        let repo = git2::Repository::init_opts(
            &main,
            git2::RepositoryInitOptions::new().initial_head("main"),
        )
        .unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo
            .find_tree(repo.index().unwrap().write_tree().unwrap())
            .unwrap();
        let head = repo
            .commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
            .unwrap();
        repo.branch("codebutler/x", &repo.find_commit(head).unwrap(), false)
            .unwrap();
        let origin = git2::Repository::init_bare(dir.join("origin.git")).unwrap();
        let mut remote = repo
            .remote("origin", dir.join("origin.git").to_str().unwrap())
            .unwrap();
        remote
            .push(
                &[
                    "refs/heads/main:refs/heads/main",
                    "refs/heads/codebutler/x:refs/heads/codebutler/x",
                ],
                None,
            )
            .unwrap();
        (main, origin)
    }

    #[tokio::test]
    async fn deleting_the_remote_branch_deletes_only_it_and_once_is_enough() {
        let dir = tempfile::tempdir().unwrap();
        let (main, origin) = with_origin(dir.path());
        // A hook that would run on any push the controller made with hooks on.
        let hook = main.join(".git/hooks/pre-push");
        std::fs::write(
            &hook,
            "#!/bin/sh\ntouch \"$(dirname \"$0\")/../../hook-ran\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert!(remote_has_branch(&main, "codebutler/x").await.unwrap());
        delete_remote_branch(&main, "codebutler/x").await.unwrap();
        assert!(origin.find_reference("refs/heads/codebutler/x").is_err());
        assert!(origin.find_reference("refs/heads/main").is_ok());
        assert!(!remote_has_branch(&main, "codebutler/x").await.unwrap());
        // Gone already: not an error.
        delete_remote_branch(&main, "codebutler/x").await.unwrap();
        assert!(!main.join("hook-ran").exists(), "a hook ran");
    }

    #[tokio::test]
    async fn only_our_branches_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        for branch in ["main", "feature/x", "codebutler/", "codebutler/../main"] {
            let err = delete_remote_branch(dir.path(), branch).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    PullRequestError::Branch(ForgeError::NotOurBranch { .. })
                ),
                "{branch}: {err}"
            );
        }
    }
}
