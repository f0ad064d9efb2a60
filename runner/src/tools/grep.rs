//! Grep: the PM's regex search (same engine, rules and output), with worktree paths.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::worktree_relative;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use codebutler_agent::tools::grep::search_files;
use codebutler_agent::tools::path::RepoRoot;

const NAME: &str = "Grep";

/// Searches the worktree's files for a regex (gitignore-aware).
#[derive(Debug, Clone)]
pub struct GrepTool {
    root: Arc<RepoRoot>,
}

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Regular expression, e.g. "fn \\w+_test" or "TODO|FIXME".
    pattern: String,
    /// File or directory to search (absolute inside the worktree, or relative to its root); default the whole worktree.
    path: Option<String>,
    /// Only search files whose name or path matches this glob, e.g. "*.rs" or "src/**/*.ts".
    glob: Option<String>,
}

impl GrepTool {
    /// A Grep confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

fn search(root: &RepoRoot, args: &Args) -> Result<String, ToolError> {
    let path = args
        .path
        .as_deref()
        .map(|p| worktree_relative(root, p))
        .transpose()?;
    search_files(
        NAME,
        root,
        &args.pattern,
        args.glob.as_deref(),
        path.as_deref(),
    )
}

#[async_trait]
impl Tool for GrepTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: "Search file contents for a regex (Rust regex syntax, matched line by line), skipping .gitignore'd, hidden and binary files. Returns `path:line:text` lines with paths relative to the worktree root, at most 100 matches; narrow with path or glob.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(NAME, args)?;
        let root = Arc::clone(&self.root);
        codebutler_agent::tool::run_blocking(NAME, move || search(&root, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::worktree;
    use super::*;
    use codebutler_agent::tools::path::test_support::write_files;
    use serde_json::json;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        GrepTool::new(Arc::clone(root)).call(args).await
    }

    #[tokio::test]
    async fn finds_matches_and_respects_gitignore() {
        let (dir, root) = worktree(&[
            (".gitignore", "target/\n"),
            ("src/lib.rs", "pub fn alpha() {}\n// needle\n"),
            ("b.txt", "needle\n"),
        ]);
        write_files(dir.path(), &[("target/out.txt", "needle\n")]);
        assert_eq!(
            run(&root, json!({"pattern": "needle"})).await.unwrap(),
            "b.txt:1:needle\nsrc/lib.rs:2:// needle"
        );
        assert_eq!(
            run(&root, json!({"pattern": "needle", "glob": "*.rs"}))
                .await
                .unwrap(),
            "src/lib.rs:2:// needle"
        );
        let abs = root.root().join("src");
        assert_eq!(
            run(
                &root,
                json!({"pattern": "fn", "path": abs.to_string_lossy()})
            )
            .await
            .unwrap(),
            "src/lib.rs:1:pub fn alpha() {}"
        );
        let err = run(&root, json!({"pattern": "x", "path": "/etc"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
        let err = run(&root, json!({"pattern": "("})).await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid arguments for Grep: invalid regex"),
            "{err}"
        );
    }
}
