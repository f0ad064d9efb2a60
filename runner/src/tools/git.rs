//! GitCommit and OpenPR: the Coder's commits and pull request, made by the controller.
//!
//! The runner's git metadata is read-only inside its sandbox, so these tools do no git work
//! themselves: they ask the controller through a [`Forge`] (the hub's `Commit` and
//! `OpenPullRequest` in a real run). The controller commits on the thread's own branch with
//! git2, pushes that branch only, never with force and without the repository's hooks, and
//! opens the pull request with `gh`.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};

/// A commit the controller made (or did not make) for the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitResult {
    /// The new commit's hex id; empty when nothing was committed.
    pub sha: String,
    /// Paths the commit added, changed or deleted.
    pub files_changed: Vec<String>,
    /// There was nothing to commit.
    pub nothing_to_commit: bool,
    /// What the commit left out, and why.
    pub left_out: Vec<LeftOut>,
}

/// Why a commit left a path out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeftOutReason {
    /// The worktree's preparation made or changed it, and it is still as it left it.
    Prepared,
    /// A build by-product git ignores (a directory stands for what it holds).
    Byproduct,
}

/// A path a commit left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub path: String,
    pub reason: LeftOutReason,
}

/// Most paths of one kind named in the line about what a commit left out.
const MAX_LEFT_OUT_LISTED: usize = 10;

/// Why a commit or a pull request did not happen; the model reads the message.
#[derive(Debug, thiserror::Error)]
pub enum ForgeFailure {
    /// The run's other processes could not be stopped, so the worktree could change while
    /// it is staged.
    #[error("stop the run's other processes before committing: {0}")]
    Quiesce(#[from] crate::quiesce::QuiesceError),
    /// The controller refused or failed the request; its message says why.
    #[error("{0}")]
    Refused(String),
}

/// Who commits and opens pull requests for the run: the controller, over the hub.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Commits every change of the worktree on the run's branch, the paths of `include`
    /// whatever leaves them out.
    async fn commit(&self, message: &str, include: &[String])
    -> Result<CommitResult, ForgeFailure>;
    /// Pushes the run's branch and opens a pull request; returns its address.
    async fn open_pr(&self, title: &str, body: &str) -> Result<String, ForgeFailure>;
}

/// The text the model reads for a commit: what it committed, then on one line what it
/// left out, why, and how to commit such a path on purpose.
fn describe_commit(commit: &CommitResult) -> String {
    let done = if commit.nothing_to_commit {
        "nothing to commit".to_owned()
    } else {
        let short: String = commit.sha.chars().take(7).collect();
        let n = commit.files_changed.len();
        let noun = if n == 1 { "file" } else { "files" };
        format!(
            "committed {short}: {n} {noun} ({})",
            listing(&commit.files_changed, 20)
        )
    };
    match describe_left_out(&commit.left_out) {
        Some(line) => format!("{done}\n{line}"),
        None => done,
    }
}

/// Up to `max` of `items`, comma-separated, "…" for the rest.
fn listing(items: &[String], max: usize) -> String {
    let mut listed: Vec<&str> = items.iter().take(max).map(String::as_str).collect();
    if items.len() > listed.len() {
        listed.push("…");
    }
    listed.join(", ")
}

/// The one line saying what a commit left out, if anything.
fn describe_left_out(left_out: &[LeftOut]) -> Option<String> {
    let of = |reason| -> Vec<String> {
        left_out
            .iter()
            .filter(|l| l.reason == reason)
            .map(|l| l.path.clone())
            .collect()
    };
    let mut parts = Vec::new();
    let prepared = of(LeftOutReason::Prepared);
    if !prepared.is_empty() {
        parts.push(format!(
            "{} (as the worktree's preparation left them)",
            listing(&prepared, MAX_LEFT_OUT_LISTED)
        ));
    }
    let byproducts = of(LeftOutReason::Byproduct);
    if !byproducts.is_empty() {
        parts.push(format!(
            "{} (build by-products)",
            listing(&byproducts, MAX_LEFT_OUT_LISTED)
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "left out: {}; to commit one on purpose, name it in GitCommit's include",
            parts.join("; ")
        )
    })
}

/// The last number in a pull request's address, if any.
fn pr_number(url: &str) -> Option<u64> {
    url.trim_end_matches('/').rsplit('/').next()?.parse().ok()
}

const COMMIT: &str = "GitCommit";
const OPEN_PR: &str = "OpenPR";

/// Commits the worktree's changes on the thread's branch.
#[derive(Clone)]
pub struct GitCommitTool {
    forge: Arc<dyn Forge>,
}

impl std::fmt::Debug for GitCommitTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitCommitTool").finish_non_exhaustive()
    }
}

impl GitCommitTool {
    /// A GitCommit through `forge`.
    pub fn new(forge: Arc<dyn Forge>) -> Self {
        Self { forge }
    }
}

/// GitCommit's arguments.
#[derive(Deserialize, JsonSchema)]
struct CommitArgs {
    /// The commit message: a short imperative subject line, optionally a blank line and details.
    message: String,
    /// Paths (files or directories) to commit as they are although they would be left out: what the worktree's preparation left, build by-products, ignored files. Usually omitted.
    #[serde(default)]
    include: Vec<String>,
}

#[async_trait]
impl Tool for GitCommitTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: COMMIT,
            description: "Commit all current changes of the worktree (new, changed and deleted files) on this task's branch. Ignored files stay out, and so do build by-products (__pycache__, *.egg-info, coverage data, node_modules…) and what the worktree's preparation left that you did not change since (a lock file `npm install` rewrote); the result names what was left out. Commit when a coherent piece of work is done and checked.",
            parameters: parameters::<CommitArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: CommitArgs = parse_args(COMMIT, args)?;
        if args.message.trim().is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: COMMIT.to_owned(),
                reason: "the message is empty".to_owned(),
            });
        }
        let commit = self
            .forge
            .commit(&args.message, &args.include)
            .await
            .map_err(|e| ToolError::Failed(format!("commit failed: {e}")))?;
        Ok(describe_commit(&commit))
    }
}

/// Pushes the thread's branch and opens a pull request for it.
#[derive(Clone)]
pub struct OpenPrTool {
    forge: Arc<dyn Forge>,
}

impl std::fmt::Debug for OpenPrTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPrTool").finish_non_exhaustive()
    }
}

impl OpenPrTool {
    /// An OpenPR through `forge`.
    pub fn new(forge: Arc<dyn Forge>) -> Self {
        Self { forge }
    }
}

/// OpenPR's arguments.
#[derive(Deserialize, JsonSchema)]
struct OpenPrArgs {
    /// The pull request's title: short, imperative.
    title: String,
    /// What changed and why, and how it was tested (Markdown).
    body: String,
}

#[async_trait]
impl Tool for OpenPrTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: OPEN_PR,
            description: "Push this task's branch and open a pull request for it. Commit your changes with GitCommit first; uncommitted changes are not included. The repository's PR template and a link to the Slack thread are added to the body. Returns the pull request's address.",
            parameters: parameters::<OpenPrArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: OpenPrArgs = parse_args(OPEN_PR, args)?;
        if args.title.trim().is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: OPEN_PR.to_owned(),
                reason: "the title is empty".to_owned(),
            });
        }
        let url = self
            .forge
            .open_pr(&args.title, &args.body)
            .await
            .map_err(|e| ToolError::Failed(format!("opening the pull request failed: {e}")))?;
        Ok(match pr_number(&url) {
            Some(n) => format!("opened pull request #{n}: {url}"),
            None => format!("opened pull request: {url}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct FakeForge {
        calls: Mutex<Vec<String>>,
        commit: Option<CommitResult>,
    }

    #[async_trait]
    impl Forge for FakeForge {
        async fn commit(
            &self,
            message: &str,
            include: &[String],
        ) -> Result<CommitResult, ForgeFailure> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("commit {message} {include:?}"));
            self.commit
                .clone()
                .ok_or_else(|| ForgeFailure::Refused("refusing to commit \"main\"".to_owned()))
        }
        async fn open_pr(&self, title: &str, body: &str) -> Result<String, ForgeFailure> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("pr {title} / {body}"));
            Ok("https://github.com/acme/app/pull/5".to_owned())
        }
    }

    #[tokio::test]
    async fn commit_results_read_well() {
        let forge = Arc::new(FakeForge {
            commit: Some(CommitResult {
                sha: "abc1234def".into(),
                files_changed: vec!["src/a.rs".into(), "README.md".into()],
                nothing_to_commit: false,
                left_out: Vec::new(),
            }),
            ..FakeForge::default()
        });
        let tool = GitCommitTool::new(forge.clone());
        let out = tool
            .call(serde_json::json!({"message": "Add a"}))
            .await
            .unwrap();
        assert_eq!(out, "committed abc1234: 2 files (src/a.rs, README.md)");
        assert_eq!(*forge.calls.lock().unwrap(), ["commit Add a []"]);
        assert!(
            tool.call(serde_json::json!({"message": " "}))
                .await
                .is_err()
        );
        assert_eq!(
            describe_commit(&CommitResult {
                sha: String::new(),
                files_changed: vec![],
                nothing_to_commit: true,
                left_out: Vec::new(),
            }),
            "nothing to commit"
        );
        let refused = GitCommitTool::new(Arc::new(FakeForge::default()))
            .call(serde_json::json!({"message": "x"}))
            .await
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "commit failed: refusing to commit \"main\""
        );
    }

    #[tokio::test]
    async fn what_a_commit_left_out_is_one_line_saying_how_to_commit_it() {
        let left = |path: &str, reason| LeftOut {
            path: path.into(),
            reason,
        };
        let mut left_out = vec![
            left("package-lock.json", LeftOutReason::Prepared),
            left("node_modules", LeftOutReason::Byproduct),
            left("widgets.egg-info", LeftOutReason::Byproduct),
        ];
        let forge = Arc::new(FakeForge {
            commit: Some(CommitResult {
                sha: "abc1234def".into(),
                files_changed: vec!["src/a.js".into()],
                nothing_to_commit: false,
                left_out: left_out.clone(),
            }),
            ..FakeForge::default()
        });
        let tool = GitCommitTool::new(forge.clone());
        let out = tool
            .call(serde_json::json!({"message": "Add a", "include": ["coverage/"]}))
            .await
            .unwrap();
        assert_eq!(
            out,
            "committed abc1234: 1 file (src/a.js)\n\
             left out: package-lock.json (as the worktree's preparation left them); \
             node_modules, widgets.egg-info (build by-products); \
             to commit one on purpose, name it in GitCommit's include"
        );
        assert_eq!(
            *forge.calls.lock().unwrap(),
            [r#"commit Add a ["coverage/"]"#]
        );
        // A long list is cut.
        left_out.extend((0..12).map(|i| left(&format!("gen/{i}.js"), LeftOutReason::Prepared)));
        let line = describe_left_out(&left_out).unwrap();
        assert!(
            line.starts_with("left out: package-lock.json, gen/0.js"),
            "{line}"
        );
        assert!(line.contains("gen/8.js, … (as the worktree's"), "{line}");
        assert_eq!(describe_left_out(&[]), None);
        // Nothing committed still says what was left out.
        let nothing = describe_commit(&CommitResult {
            sha: String::new(),
            files_changed: vec![],
            nothing_to_commit: true,
            left_out: vec![left("package-lock.json", LeftOutReason::Prepared)],
        });
        assert!(
            nothing.starts_with("nothing to commit\nleft out: package-lock.json"),
            "{nothing}"
        );
    }

    #[tokio::test]
    async fn open_pr_returns_the_address() {
        let forge = Arc::new(FakeForge::default());
        let tool = OpenPrTool::new(forge.clone());
        let out = tool
            .call(serde_json::json!({"title": "Add a", "body": "Adds a."}))
            .await
            .unwrap();
        assert_eq!(
            out,
            "opened pull request #5: https://github.com/acme/app/pull/5"
        );
        assert_eq!(*forge.calls.lock().unwrap(), ["pr Add a / Adds a."]);
        assert!(
            tool.call(serde_json::json!({"title": "", "body": "x"}))
                .await
                .is_err()
        );
        assert!(!tool.read_only());
    }
}
