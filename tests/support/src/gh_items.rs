//! Pull requests and issues the fake `gh` knows by number, for tests of references to them:
//! `gh pr view <n> --json …`, `gh pr diff <n>` and `gh issue view <n> --json …` answer with
//! the fields `gh` prints (`number`, `title`, `body`, `state`, `author`, `url`, `files`,
//! `mergedAt`, `baseRefName`, `headRefName` of a pull request; `comments` of an issue), and
//! a number the test did not add fails as GitHub answers it ("GraphQL: Could not resolve to
//! a PullRequest with the number of 9. (repository.pullRequest)"). `gh repo view --json
//! nameWithOwner` names the repository `acme/app` unless [`set_repository`] says otherwise.

use std::path::Path;

use serde_json::{Value, json};

/// A pull request or an issue of the fake's repository.
#[derive(Clone, Debug)]
pub struct FakeItem {
    /// `pr` or `issue`.
    kind: &'static str,
    number: u64,
    fields: Vec<(&'static str, Value)>,
    diff: Option<String>,
    fail: Option<String>,
}

impl FakeItem {
    /// Pull request `number`, merged, by `alice`, changing `files` (`path`, additions,
    /// deletions), with `diff` as `gh pr diff` prints it.
    pub fn pull_request(
        number: u64,
        title: &str,
        body: &str,
        files: &[(&str, u64, u64)],
        diff: &str,
    ) -> Self {
        let files: Vec<Value> = files
            .iter()
            .map(|(path, additions, deletions)| {
                json!({"path": path, "additions": additions, "deletions": deletions})
            })
            .collect();
        Self {
            kind: "pr",
            number,
            fields: vec![
                ("number", json!(number)),
                ("title", json!(title)),
                ("body", json!(body)),
                ("state", json!("MERGED")),
                (
                    "author",
                    json!({"id": "MDQ6VXNlcjE=", "is_bot": false, "login": "alice", "name": "Alice"}),
                ),
                (
                    "url",
                    json!(format!("https://github.com/acme/app/pull/{number}")),
                ),
                ("files", Value::Array(files)),
                ("mergedAt", json!("2026-02-10T10:00:00Z")),
                ("baseRefName", json!("main")),
                ("headRefName", json!(format!("codebutler/fix-{number}"))),
            ],
            diff: Some(diff.to_owned()),
            fail: None,
        }
    }

    /// Issue `number`, open, by `bob`, with `comments` (author login, body).
    pub fn issue(number: u64, title: &str, body: &str, comments: &[(&str, &str)]) -> Self {
        let comments: Vec<Value> = comments
            .iter()
            .map(|(login, body)| {
                json!({"author": {"login": login}, "authorAssociation": "MEMBER", "body": body,
                       "createdAt": "2026-02-01T09:00:00Z", "id": "IC_1", "includesCreatedEdit": false,
                       "isMinimized": false, "minimizedReason": "", "reactionGroups": [], "url": "", "viewerDidAuthor": false})
            })
            .collect();
        Self {
            kind: "issue",
            number,
            fields: vec![
                ("number", json!(number)),
                ("title", json!(title)),
                ("body", json!(body)),
                ("state", json!("OPEN")),
                (
                    "author",
                    json!({"id": "MDQ6VXNlcjI=", "is_bot": false, "login": "bob", "name": "Bob"}),
                ),
                (
                    "url",
                    json!(format!("https://github.com/acme/app/issues/{number}")),
                ),
                ("comments", Value::Array(comments)),
            ],
            diff: None,
            fail: None,
        }
    }

    /// Pull request `number`, whose every read fails with `stderr` (as `gh` prints an error
    /// such as "HTTP 502: Server Error").
    pub fn failing_pull_request(number: u64, stderr: &str) -> Self {
        Self {
            kind: "pr",
            number,
            fields: Vec::new(),
            diff: None,
            fail: Some(stderr.to_owned()),
        }
    }

    /// Makes the fake `gh` in `dir` know this item (and answer only from its items, from now on).
    pub fn install(&self, dir: &Path) {
        let item = dir
            .join("items")
            .join(self.kind)
            .join(self.number.to_string());
        std::fs::create_dir_all(&item).expect("fake gh: create item");
        for (field, value) in &self.fields {
            std::fs::write(item.join(field), value.to_string()).expect("fake gh: write field");
        }
        if let Some(diff) = &self.diff {
            std::fs::write(item.join("diff"), diff).expect("fake gh: write diff");
        }
        if let Some(fail) = &self.fail {
            std::fs::write(item.join("fail"), format!("{fail}\n")).expect("fake gh: write fail");
        }
    }
}

/// Makes the fake `gh` in `dir` name its repository `owner/name` (`gh repo view`).
pub fn set_repository(dir: &Path, name_with_owner: &str) {
    std::fs::write(dir.join("repo-name"), name_with_owner).expect("fake gh: write repo-name");
}
