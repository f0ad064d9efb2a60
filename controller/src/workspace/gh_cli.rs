//! Every command line the controller runs the GitHub CLI with, built here and nowhere else:
//! each kind of call is a [`GhArgs`] variant, and its arguments come from
//! [`GhArgs::to_args`]. One place, so the test that runs the real `gh` offline on each of
//! them (`tests/e2e/gh_cli.rs`: no unknown flag, no unknown JSON field, no wrong argument
//! count) checks exactly what the product runs — a shape the fake `gh` accepts but GitHub's
//! does not cannot hide.
//!
//! The callers run `gh` with fixed arguments (never a shell), prompts off, in the main
//! repository ([`super::pull_request`], [`super::forge`], the PM's references and its
//! GHStatus tool, the start-up check of `gh auth status`).

use crate::config::MergeStrategy;

/// The GraphQL query for a pull request's review threads: each thread's resolution and its
/// first comment. The first hundred threads; a pull request with more is rare, and the
/// hundred are enough to refuse a merge.
pub const REVIEW_THREADS_QUERY: &str = "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { reviewThreads(first: 100) { nodes { isResolved comments(first: 1) { nodes { author { login } path body } } } } } } }";

/// `gh pr merge`'s flag for `strategy`.
fn merge_flag(strategy: MergeStrategy) -> &'static str {
    match strategy {
        MergeStrategy::Squash => "--squash",
        MergeStrategy::Merge => "--merge",
        MergeStrategy::Rebase => "--rebase",
    }
}

/// One kind of `gh` call, with what varies in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GhArgs<'a> {
    /// `gh auth status`: whether `gh` is logged in (checked at start).
    AuthStatus,
    /// `gh repo view --json nameWithOwner`: this repository's `owner/name`.
    RepoView,
    /// `gh pr create --head <branch> --title <title> --body-file -` (the body on stdin).
    PrCreate { branch: &'a str, title: &'a str },
    /// `gh pr view <number> --json <fields>`.
    PrView { number: u64, fields: &'a str },
    /// `gh pr diff <number>`.
    PrDiff { number: u64 },
    /// `gh issue view <number> --json <fields>`.
    IssueView { number: u64, fields: &'a str },
    /// `gh pr edit <number> --body-file -` (the description on stdin).
    PrEditBody { number: u64 },
    /// `gh pr comment <number> --body-file -` (the comment on stdin).
    PrComment { number: u64 },
    /// `gh pr merge <number> --squash|--merge|--rebase`.
    PrMerge {
        number: u64,
        strategy: MergeStrategy,
    },
    /// `gh api [--paginate] <endpoint>`: a GET (`gh` fills in `{owner}` and `{repo}`).
    Api { endpoint: &'a str, paginate: bool },
    /// `gh api --method POST repos/{owner}/{repo}/pulls/<number>/comments/<comment>/replies
    /// --input -` (the reply's JSON on stdin).
    ApiReply { number: u64, comment: u64 },
    /// `gh api --method POST repos/{owner}/{repo}/pulls/<number>/reviews --input -` (the
    /// review's JSON on stdin): the reviewer's review.
    ApiReview { number: u64 },
    /// `gh run view <run> --log-failed`: the failed steps' log.
    RunLogFailed { run: u64 },
    /// `gh api graphql -f query=<REVIEW_THREADS_QUERY> -F owner={owner} -F name={repo} -F
    /// number=<number>`: the pull request's review threads and whether each is resolved.
    ReviewThreads { number: u64 },
}

impl GhArgs<'_> {
    /// The command line's arguments after `gh`.
    pub fn to_args(&self) -> Vec<String> {
        let owned = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect();
        match *self {
            Self::AuthStatus => owned(&["auth", "status"]),
            Self::RepoView => owned(&["repo", "view", "--json", "nameWithOwner"]),
            Self::PrCreate { branch, title } => owned(&[
                "pr",
                "create",
                "--head",
                branch,
                "--title",
                title,
                "--body-file",
                "-",
            ]),
            Self::PrView { number, fields } => {
                owned(&["pr", "view", &number.to_string(), "--json", fields])
            }
            Self::PrDiff { number } => owned(&["pr", "diff", &number.to_string()]),
            Self::IssueView { number, fields } => {
                owned(&["issue", "view", &number.to_string(), "--json", fields])
            }
            Self::PrEditBody { number } => {
                owned(&["pr", "edit", &number.to_string(), "--body-file", "-"])
            }
            Self::PrComment { number } => {
                owned(&["pr", "comment", &number.to_string(), "--body-file", "-"])
            }
            Self::PrMerge { number, strategy } => {
                owned(&["pr", "merge", &number.to_string(), merge_flag(strategy)])
            }
            Self::Api { endpoint, paginate } => {
                if paginate {
                    owned(&["api", "--paginate", endpoint])
                } else {
                    owned(&["api", endpoint])
                }
            }
            Self::ApiReply { number, comment } => owned(&[
                "api",
                "--method",
                "POST",
                &format!("repos/{{owner}}/{{repo}}/pulls/{number}/comments/{comment}/replies"),
                "--input",
                "-",
            ]),
            Self::ApiReview { number } => owned(&[
                "api",
                "--method",
                "POST",
                &format!("repos/{{owner}}/{{repo}}/pulls/{number}/reviews"),
                "--input",
                "-",
            ]),
            Self::RunLogFailed { run } => owned(&["run", "view", &run.to_string(), "--log-failed"]),
            Self::ReviewThreads { number } => owned(&[
                "api",
                "graphql",
                "-f",
                &format!("query={REVIEW_THREADS_QUERY}"),
                "-F",
                "owner={owner}",
                "-F",
                "name={repo}",
                "-F",
                &format!("number={number}"),
            ]),
        }
    }

    /// What the call is, for errors: `gh pr view`, `gh api`, ….
    pub fn what(&self) -> &'static str {
        match self {
            Self::AuthStatus => "gh auth status",
            Self::RepoView => "gh repo view",
            Self::PrCreate { .. } => "gh pr create",
            Self::PrView { .. } => "gh pr view",
            Self::PrDiff { .. } => "gh pr diff",
            Self::IssueView { .. } => "gh issue view",
            Self::PrEditBody { .. } => "gh pr edit",
            Self::PrComment { .. } => "gh pr comment",
            Self::PrMerge { .. } => "gh pr merge",
            Self::Api { .. }
            | Self::ApiReply { .. }
            | Self::ApiReview { .. }
            | Self::ReviewThreads { .. } => "gh api",
            Self::RunLogFailed { .. } => "gh run view",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_lines_are_as_gh_takes_them() {
        let line = |args: GhArgs| args.to_args().join(" ");
        assert_eq!(
            line(GhArgs::PrCreate {
                branch: "codebutler/notes",
                title: "Add the notes"
            }),
            "pr create --head codebutler/notes --title Add the notes --body-file -"
        );
        assert_eq!(
            line(GhArgs::PrMerge {
                number: 7,
                strategy: MergeStrategy::Rebase
            }),
            "pr merge 7 --rebase"
        );
        assert_eq!(
            line(GhArgs::Api {
                endpoint: "user",
                paginate: false
            }),
            "api user"
        );
        assert_eq!(
            line(GhArgs::ApiReply {
                number: 7,
                comment: 500
            }),
            "api --method POST repos/{owner}/{repo}/pulls/7/comments/500/replies --input -"
        );
        assert_eq!(
            line(GhArgs::ApiReview { number: 7 }),
            "api --method POST repos/{owner}/{repo}/pulls/7/reviews --input -"
        );
        // A title is one argument, whatever it holds.
        let args = GhArgs::PrCreate {
            branch: "codebutler/x",
            title: "--web; rm -rf /",
        }
        .to_args();
        assert_eq!(args[5], "--web; rm -rf /");
    }
}
