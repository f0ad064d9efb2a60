//! The reads of a referenced pull request or issue through `gh`, in the main repository as
//! every `gh` call of the controller (prompts off, fixed arguments, bounded in time): which
//! repository this is (`gh repo view`), a pull request (`gh pr view --json …` and its diff,
//! `gh pr diff`) and an issue (`gh issue view --json …`). Nothing is changed on GitHub.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use crate::workspace::gh_cli::GhArgs;
use crate::workspace::git_command::{CommandError, quote, run};

/// Longest one of these `gh` calls may take (a reference that takes longer is reported as
/// failed; the PM answers without it).
pub const GH_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The fields asked of a pull request.
pub const PR_FIELDS: &str =
    "number,title,body,state,author,url,files,mergedAt,baseRefName,headRefName";
/// The fields asked of an issue.
pub const ISSUE_FIELDS: &str = "number,title,body,state,author,url,comments";

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum GhReadError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("read `{what}`'s answer: {source}; it printed {output:?}")]
    Unreadable {
        what: String,
        source: serde_json::Error,
        output: String,
    },
}

impl GhReadError {
    /// Whether GitHub said there is no such pull request or issue.
    pub fn not_found(&self) -> bool {
        matches!(self, Self::Command(CommandError::Failed { output, .. })
            if output.contains("Could not resolve to"))
    }
}

/// Who wrote something on GitHub.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Author {
    #[serde(default)]
    pub login: String,
}

/// A changed file of a pull request.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ChangedFile {
    pub path: String,
    #[serde(default)]
    pub additions: u64,
    #[serde(default)]
    pub deletions: u64,
}

/// A comment on an issue.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Comment {
    #[serde(default)]
    pub author: Option<Author>,
    #[serde(default)]
    pub body: String,
}

/// What `gh pr view --json` [`PR_FIELDS`] or `gh issue view --json` [`ISSUE_FIELDS`] says.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub number: u64,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: String,
    /// `OPEN`, `CLOSED`, `MERGED`.
    pub state: String,
    #[serde(default)]
    pub author: Option<Author>,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub files: Vec<ChangedFile>,
    #[serde(default)]
    pub merged_at: Option<String>,
    #[serde(default)]
    pub base_ref_name: Option<String>,
    #[serde(default)]
    pub head_ref_name: Option<String>,
    #[serde(default)]
    pub comments: Vec<Comment>,
}

/// `gh`, with prompts off, in the main repository `main`.
fn gh(cli: &Path, main: &Path) -> Command {
    let mut command = Command::new(cli);
    command
        .current_dir(main)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GH_PROMPT_DISABLED", "1")
        .env("NO_COLOR", "1");
    command
}

fn parse<T: for<'de> Deserialize<'de>>(what: &str, output: &str) -> Result<T, GhReadError> {
    serde_json::from_str(output).map_err(|source| GhReadError::Unreadable {
        what: what.to_owned(),
        source,
        output: quote(output.trim()),
    })
}

/// This repository's `owner/name` on GitHub: `gh repo view --json nameWithOwner`.
pub async fn repository(cli: &Path, main: &Path) -> Result<String, GhReadError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Repo {
        name_with_owner: String,
    }
    let mut command = gh(cli, main);
    command.args(GhArgs::RepoView.to_args());
    let output = run(command, None, "gh repo view", GH_READ_TIMEOUT).await?;
    Ok(parse::<Repo>("gh repo view", &output)?.name_with_owner)
}

/// Pull request `number`: `gh pr view <number> --json` [`PR_FIELDS`].
pub async fn pull_request(cli: &Path, main: &Path, number: u64) -> Result<Item, GhReadError> {
    let mut command = gh(cli, main);
    command.args(
        GhArgs::PrView {
            number,
            fields: PR_FIELDS,
        }
        .to_args(),
    );
    let output = run(command, None, "gh pr view", GH_READ_TIMEOUT).await?;
    parse("gh pr view", &output)
}

/// Pull request `number`'s diff (`gh pr diff <number>`), as text.
pub async fn pull_request_diff(
    cli: &Path,
    main: &Path,
    number: u64,
) -> Result<String, GhReadError> {
    let mut command = gh(cli, main);
    command.args(GhArgs::PrDiff { number }.to_args());
    Ok(run(command, None, "gh pr diff", GH_READ_TIMEOUT).await?)
}

/// Issue `number`: `gh issue view <number> --json` [`ISSUE_FIELDS`].
pub async fn issue(cli: &Path, main: &Path, number: u64) -> Result<Item, GhReadError> {
    let mut command = gh(cli, main);
    command.args(
        GhArgs::IssueView {
            number,
            fields: ISSUE_FIELDS,
        }
        .to_args(),
    );
    let output = run(command, None, "gh issue view", GH_READ_TIMEOUT).await?;
    parse("gh issue view", &output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gh_answers_are_read() {
        let pr: Item = parse(
            "gh pr view",
            r#"{"number":42,"title":"Fix login","body":"Cookies.","state":"MERGED",
                "author":{"login":"alice","name":"Alice","is_bot":false},
                "url":"https://github.com/acme/app/pull/42",
                "files":[{"path":"auth/session.go","additions":3,"deletions":1}],
                "mergedAt":"2026-02-10T10:00:00Z","baseRefName":"main","headRefName":"fix-login"}"#,
        )
        .unwrap();
        assert_eq!(pr.files[0].path, "auth/session.go");
        assert_eq!(pr.author.unwrap().login, "alice");
        let issue: Item = parse(
            "gh issue view",
            r#"{"number":7,"title":"Crash","body":"","state":"OPEN","author":{"login":"bob"},
                "url":"https://github.com/acme/app/issues/7",
                "comments":[{"author":{"login":"carol"},"body":"me too","createdAt":"2026-01-01T00:00:00Z"}]}"#,
        )
        .unwrap();
        assert_eq!(issue.comments[0].body, "me too");
        let err = parse::<Item>("gh pr view", "{}").unwrap_err().to_string();
        assert!(err.starts_with("read `gh pr view`'s answer: "), "{err}");
    }

    #[test]
    fn not_found_is_told_apart() {
        let failed = |output: &str| {
            GhReadError::Command(CommandError::Failed {
                what: "gh pr view".into(),
                status: "exit status: 1".into(),
                output: output.into(),
            })
        };
        assert!(failed("GraphQL: Could not resolve to a PullRequest with the number of 9. (repository.pullRequest)").not_found());
        assert!(!failed("HTTP 401: Bad credentials").not_found());
    }
}
