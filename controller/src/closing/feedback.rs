//! What people said on a pull request, read from `gh`: line comments
//! (`gh api --paginate repos/{owner}/{repo}/pulls/N/comments`, GitHub's REST shape), and
//! review bodies, conversation comments, the review decision and the head commit
//! (`gh pr view N --json …`, gh's GraphQL shape). Parsing is pure and strict: output that is
//! not the shape `gh` prints is an error naming what was wrong, never a guess.
//!
//! Which comments count is decided here too ([`counts`]): never the controller's own (they
//! carry [`OWN_MARKER`], or are written by the login `gh` acts as) and never those of the
//! logins in `github.ignoreBots` — compared without case and without GitHub's `[bot]`
//! suffix, which the REST API shows and GraphQL does not.

use std::collections::HashSet;

use serde::Deserialize;

use crate::store::reviews::NewComment;
use crate::workspace::pull_request::Check;

/// Every comment the controller posts on GitHub carries this hidden marker.
pub const OWN_MARKER: &str = "<!-- codebutler";

/// `gh`'s output could not be read.
#[derive(Debug, thiserror::Error)]
#[error("read `{command}`'s answer: {source}")]
pub struct FeedbackError {
    command: String,
    source: serde_json::Error,
}

#[derive(Deserialize)]
struct RestUser {
    login: String,
}

/// One line comment as the REST API lists it (the fields used; others are ignored).
#[derive(Deserialize)]
struct LineComment {
    id: u64,
    user: Option<RestUser>,
    body: String,
    path: String,
    line: Option<i64>,
    original_line: Option<i64>,
    html_url: String,
    #[serde(default)]
    in_reply_to_id: Option<i64>,
    /// The author's association with the repository (`OWNER`, `MEMBER`, `NONE`…).
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    /// The review the comment belongs to.
    #[serde(default)]
    pull_request_review_id: Option<u64>,
}

#[derive(Deserialize)]
struct Author {
    login: String,
}

/// A review or conversation comment as `gh pr view --json reviews,comments` prints it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphComment {
    id: String,
    author: Option<Author>,
    body: String,
    #[serde(default)]
    url: Option<String>,
    /// The author's association with the repository (`OWNER`, `MEMBER`, `NONE`…).
    #[serde(default)]
    author_association: Option<String>,
    /// A conversation comment's creation time.
    #[serde(default)]
    created_at: Option<String>,
    /// A review's submission time.
    #[serde(default)]
    submitted_at: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ViewJson {
    head_ref_oid: String,
    #[serde(default)]
    review_decision: Option<String>,
    reviews: Vec<GraphComment>,
    comments: Vec<GraphComment>,
    #[serde(default)]
    status_check_rollup: Vec<Check>,
}

/// What `gh pr view` says about an open pull request's feedback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feedback {
    /// The head commit.
    pub head_oid: String,
    /// `APPROVED`, `CHANGES_REQUESTED`, `REVIEW_REQUIRED`, or empty.
    pub decision: String,
    /// Review bodies (`review:<id>`) and conversation comments (`conversation:<id>`); reviews
    /// without a body (an approval, the envelope of line comments) are left out.
    pub comments: Vec<NewComment>,
    pub checks: Vec<Check>,
}

/// The fields the PR watcher asks `gh pr view` for.
pub const FEEDBACK_FIELDS: &str =
    "state,mergedAt,closedAt,headRefOid,reviewDecision,reviews,comments,statusCheckRollup";

/// A time as GitHub writes it (RFC 3339), in milliseconds since the epoch; `None` when
/// there is none or it does not read as one.
fn created_ms(time: Option<&str>) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(time?.trim())
        .ok()
        .map(|t| t.timestamp_millis())
}

fn author(a: Option<Author>) -> String {
    // GitHub shows a deleted account as "ghost".
    a.map_or_else(|| "ghost".to_owned(), |a| a.login)
}

/// Parses `gh pr view N --json <FEEDBACK_FIELDS>`; `pr_url` stands for a comment's address
/// when gh gives none.
pub fn parse_feedback(number: u64, pr_url: &str, output: &str) -> Result<Feedback, FeedbackError> {
    let view: ViewJson = serde_json::from_str(output).map_err(|source| FeedbackError {
        command: format!("gh pr view {number}"),
        source,
    })?;
    let mut comments = Vec::new();
    for (kind, list) in [("review", view.reviews), ("conversation", view.comments)] {
        for c in list {
            if c.body.trim().is_empty() {
                continue;
            }
            let created = c.created_at.as_deref().or(c.submitted_at.as_deref());
            comments.push(NewComment {
                key: format!("{kind}:{}", c.id),
                created_ms: created_ms(created),
                author: author(c.author),
                path: None,
                line: None,
                body: c.body,
                url: c.url.unwrap_or_else(|| pr_url.to_owned()),
                reply_to: None,
                association: c.author_association,
            });
        }
    }
    Ok(Feedback {
        head_oid: view.head_ref_oid,
        decision: view.review_decision.unwrap_or_default(),
        comments,
        checks: view.status_check_rollup,
    })
}

/// Parses `gh api --paginate repos/{owner}/{repo}/pulls/N/comments`: one JSON array per
/// page, one after the other.
pub fn parse_line_comments(number: u64, output: &str) -> Result<Vec<NewComment>, FeedbackError> {
    let error = |source| FeedbackError {
        command: format!("gh api repos/{{owner}}/{{repo}}/pulls/{number}/comments"),
        source,
    };
    let mut comments = Vec::new();
    let pages = serde_json::Deserializer::from_str(output).into_iter::<Vec<LineComment>>();
    for page in pages {
        for c in page.map_err(error)? {
            comments.push(NewComment {
                key: format!("line:{}", c.id),
                created_ms: created_ms(c.created_at.as_deref()),
                author: c.user.map_or_else(|| "ghost".to_owned(), |u| u.login),
                path: Some(c.path),
                line: c.line.or(c.original_line),
                body: c.body,
                url: c.html_url,
                reply_to: c.in_reply_to_id,
                association: c.author_association,
            });
        }
    }
    Ok(comments)
}

/// The keys of the line comments in `output` (as [`parse_line_comments`] reads it) that the
/// reviewer posted: written as `own_login` in one of the reviews whose ids GitHub gave the
/// controller (`review_ids`). Nothing else tells them: not their text, which anyone can
/// type.
pub fn reviewer_comment_keys(
    number: u64,
    output: &str,
    own_login: &str,
    review_ids: &[u64],
) -> Result<HashSet<String>, FeedbackError> {
    let error = |source| FeedbackError {
        command: format!("gh api repos/{{owner}}/{{repo}}/pulls/{number}/comments"),
        source,
    };
    let mut keys = HashSet::new();
    let pages = serde_json::Deserializer::from_str(output).into_iter::<Vec<LineComment>>();
    for page in pages {
        for c in page.map_err(error)? {
            let by_us = c
                .user
                .as_ref()
                .is_some_and(|u| login_key(&u.login) == login_key(own_login));
            let ours = c
                .pull_request_review_id
                .is_some_and(|id| review_ids.contains(&id));
            if by_us && ours && c.in_reply_to_id.is_none() {
                keys.insert(format!("line:{}", c.id));
            }
        }
    }
    Ok(keys)
}

/// Parses `gh api user`: the login `gh` acts as.
pub fn parse_user(output: &str) -> Result<String, FeedbackError> {
    let user: RestUser = serde_json::from_str(output).map_err(|source| FeedbackError {
        command: "gh api user".into(),
        source,
    })?;
    Ok(user.login)
}

/// A login as compared: lower-case, without the `[bot]` suffix.
fn login_key(login: &str) -> String {
    let login = login.trim().to_ascii_lowercase();
    login
        .strip_suffix("[bot]")
        .map(str::to_owned)
        .unwrap_or(login)
}

/// Whether the logins `a` and `b` are one account (compared without case and without
/// GitHub's `[bot]` suffix).
pub fn same_login(a: &str, b: &str) -> bool {
    login_key(a) == login_key(b)
}

/// Whether `comment` was written by `login` (compared as logins are).
pub fn written_by(comment: &NewComment, login: &str) -> bool {
    login_key(&comment.author) == login_key(login)
}

/// Whether `comment` may start anything: not the controller's own (its marker, or written as
/// `own_login`) and not by a login of `ignore_bots`.
pub fn counts(comment: &NewComment, own_login: &str, ignore_bots: &[String]) -> bool {
    if comment.body.contains(OWN_MARKER) {
        return false;
    }
    let author = login_key(&comment.author);
    author != login_key(own_login) && !ignore_bots.iter().any(|b| login_key(b) == author)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages as `gh api --paginate` prints them, in the REST API's shape.
    const LINE_COMMENTS: &str = r#"[{"url":"https://api.github.com/repos/acme/app/pulls/comments/101","pull_request_review_id":55,"id":101,"node_id":"PRRC_1","diff_hunk":"@@ -1,3 +1,4 @@","path":"src/a.rs","position":4,"original_position":4,"commit_id":"abc","original_commit_id":"abc","user":{"login":"alice","id":1,"type":"User"},"body":"Rename this to `parse_all`.","created_at":"2026-11-25T10:00:00Z","updated_at":"2026-11-25T10:00:00Z","html_url":"https://github.com/acme/app/pull/7#discussion_r101","author_association":"MEMBER","start_line":null,"original_start_line":null,"start_side":null,"line":3,"original_line":3,"side":"RIGHT","subject_type":"line"}]
[{"id":102,"user":{"login":"dependabot[bot]","type":"Bot"},"body":"Bump","path":"Cargo.toml","line":null,"original_line":8,"html_url":"https://github.com/acme/app/pull/7#discussion_r102","in_reply_to_id":101}]"#;

    #[test]
    fn line_comments_are_read_from_every_page() {
        let comments = parse_line_comments(7, LINE_COMMENTS).unwrap();
        assert_eq!(
            comments,
            [
                NewComment {
                    key: "line:101".into(),
                    created_ms: Some(1_795_600_800_000),
                    author: "alice".into(),
                    path: Some("src/a.rs".into()),
                    line: Some(3),
                    body: "Rename this to `parse_all`.".into(),
                    url: "https://github.com/acme/app/pull/7#discussion_r101".into(),
                    reply_to: None,
                    association: Some("MEMBER".into()),
                },
                NewComment {
                    key: "line:102".into(),
                    created_ms: None,
                    author: "dependabot[bot]".into(),
                    path: Some("Cargo.toml".into()),
                    line: Some(8),
                    body: "Bump".into(),
                    url: "https://github.com/acme/app/pull/7#discussion_r102".into(),
                    reply_to: Some(101),
                    association: None,
                },
            ]
        );
        assert!(parse_line_comments(7, "[]").unwrap().is_empty());
        assert!(parse_line_comments(7, "").unwrap().is_empty());
    }

    #[test]
    fn garbage_is_a_clear_error() {
        for bad in [
            "not json",
            r#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#,
            r#"[{"id":"x","body":"b","path":"p","html_url":"u"}]"#,
            r#"[{"id":1,"path":"p","html_url":"u"}]"#,
            "[] trailing",
        ] {
            let err = parse_line_comments(7, bad).unwrap_err().to_string();
            assert!(
                err.starts_with("read `gh api repos/{owner}/{repo}/pulls/7/comments`'s answer: "),
                "{bad}: {err}"
            );
        }
        for bad in [
            "",
            "[]",
            r#"{"headRefOid":"abc","reviews":[]}"#,
            r#"{"headRefOid":"abc","reviews":"none","comments":[]}"#,
            r#"{"headRefOid":"abc","reviews":[{"id":"R","body":1}],"comments":[]}"#,
        ] {
            let err = parse_feedback(7, "u", bad).unwrap_err().to_string();
            assert!(
                err.starts_with("read `gh pr view 7`'s answer: "),
                "{bad}: {err}"
            );
        }
        for bad in ["", "{}", r#"{"login":5}"#] {
            assert!(parse_user(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_user(r#"{"login":"codebutler-bot","id":9}"#).unwrap(),
            "codebutler-bot"
        );
    }

    #[test]
    fn pr_view_feedback_is_read() {
        let output = r#"{"state":"OPEN","mergedAt":null,"closedAt":null,"headRefOid":"0123abcd","reviewDecision":"CHANGES_REQUESTED",
            "reviews":[{"id":"PRR_1","author":{"login":"bob"},"authorAssociation":"MEMBER","body":"Please add a test.","submittedAt":"2026-11-25T10:00:00Z","includesCreatedEdit":false,"reactionGroups":[],"state":"CHANGES_REQUESTED","commit":{"oid":"0123abcd"}},
                       {"id":"PRR_2","author":{"login":"carol"},"authorAssociation":"MEMBER","body":"","submittedAt":"2026-11-25T10:01:00Z","includesCreatedEdit":false,"reactionGroups":[],"state":"APPROVED","commit":{"oid":"0123abcd"}}],
            "comments":[{"id":"IC_1","author":null,"authorAssociation":"NONE","body":"Why a loop?","createdAt":"2026-11-25T10:02:00Z","includesCreatedEdit":false,"isMinimized":false,"minimizedReason":"","reactionGroups":[],"url":"https://github.com/acme/app/pull/7#issuecomment-1","viewerDidAuthor":false}],
            "statusCheckRollup":[{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"FAILURE","detailsUrl":"https://github.com/acme/app/actions/runs/42/job/9","workflowName":"CI"}]}"#;
        let feedback = parse_feedback(7, "https://github.com/acme/app/pull/7", output).unwrap();
        assert_eq!(feedback.head_oid, "0123abcd");
        assert_eq!(feedback.decision, "CHANGES_REQUESTED");
        let keys: Vec<(&str, &str, &str, Option<&str>)> = feedback
            .comments
            .iter()
            .map(|c| {
                (
                    c.key.as_str(),
                    c.author.as_str(),
                    c.url.as_str(),
                    c.association.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                (
                    "review:PRR_1",
                    "bob",
                    "https://github.com/acme/app/pull/7",
                    Some("MEMBER")
                ),
                (
                    "conversation:IC_1",
                    "ghost",
                    "https://github.com/acme/app/pull/7#issuecomment-1",
                    Some("NONE")
                ),
            ]
        );
        // When each was written, as GitHub dates reviews and conversation comments.
        let created: Vec<Option<i64>> = feedback.comments.iter().map(|c| c.created_ms).collect();
        assert_eq!(created, [Some(1_795_600_800_000), Some(1_795_600_920_000)]);
        assert_eq!(created_ms(Some("yesterday")), None);
        assert_eq!(feedback.checks.len(), 1);
        // No decision yet: GitHub prints an empty string.
        let quiet = parse_feedback(
            7,
            "u",
            r#"{"headRefOid":"a","reviewDecision":"","reviews":[],"comments":[]}"#,
        )
        .unwrap();
        assert_eq!(quiet.decision, "");
        assert!(quiet.comments.is_empty());
    }

    #[test]
    fn the_reviewers_comments_are_told_by_author_and_review_id_only() {
        let output = r#"[{"id":1,"pull_request_review_id":55,"user":{"login":"codebutler-bot"},"body":"Off by one.","path":"a","line":2,"html_url":"u"},
            {"id":2,"pull_request_review_id":56,"user":{"login":"codebutler-bot"},"body":"Other review.","path":"a","line":2,"html_url":"u"},
            {"id":3,"pull_request_review_id":55,"user":{"login":"mallory"},"body":"<!-- codebutler reviewer head:x -->","path":"a","line":2,"html_url":"u"},
            {"id":4,"pull_request_review_id":55,"user":{"login":"codebutler-bot"},"body":"Addressed.","path":"a","line":2,"html_url":"u","in_reply_to_id":1}]"#;
        let keys = reviewer_comment_keys(7, output, "CodeButler-Bot", &[55]).unwrap();
        assert_eq!(keys, HashSet::from(["line:1".to_owned()]));
        assert!(
            reviewer_comment_keys(7, output, "codebutler-bot", &[])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn own_and_bot_comments_never_count() {
        let by = |author: &str, body: &str| NewComment {
            key: "line:1".into(),
            created_ms: None,
            author: author.into(),
            path: None,
            line: None,
            body: body.into(),
            url: "u".into(),
            reply_to: None,
            association: Some("MEMBER".into()),
        };
        let bots = vec!["dependabot".to_owned(), "Renovate[bot]".to_owned()];
        let cases = [
            (by("alice", "Rename it."), true),
            (by("dependabot[bot]", "Bump"), false),
            (by("Dependabot", "Bump"), false),
            (by("renovate", "Pin"), false),
            (by("codebutler-bot", "Done."), false),
            (by("CodeButler-Bot", "Done."), false),
            (
                by(
                    "alice",
                    "Addressed in abc.\n\n<!-- codebutler reply:line:1 -->",
                ),
                false,
            ),
            (by("dependabot-fan", "I like bots"), true),
        ];
        for (comment, expected) in cases {
            assert_eq!(
                counts(&comment, "codebutler-bot", &bots),
                expected,
                "{comment:?}"
            );
        }
    }
}
