//! Read: a worktree file with line numbers, the same rendering as the PM's ReadFile with a
//! larger window.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::worktree_relative;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use codebutler_agent::tools::path::RepoRoot;
use codebutler_agent::tools::read_file::{ReadStyle, read_numbered};

const NAME: &str = "Read";

/// Most lines shown by one call (also the default).
pub const MAX_LINES: usize = 2000;

const STYLE: ReadStyle = ReadStyle {
    tool: NAME,
    max_lines: MAX_LINES,
    list_tool: "Glob",
};

/// Reads a text file of the worktree with line numbers.
#[derive(Debug, Clone)]
pub struct ReadTool {
    root: Arc<RepoRoot>,
}

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The file to read: an absolute path inside the worktree, or a path relative to the worktree root.
    file_path: String,
    /// 1-based line number to start at (default 1).
    #[schemars(range(min = 1))]
    offset: Option<i64>,
    /// Most lines to return (default and maximum 2000).
    #[schemars(range(min = 1, max = MAX_LINES))]
    limit: Option<i64>,
}

impl ReadTool {
    /// A Read confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

fn read(root: &RepoRoot, args: &Args) -> Result<String, ToolError> {
    let rel = worktree_relative(root, &args.file_path)?;
    read_numbered(root, &rel, args.offset, args.limit, STYLE)
}

#[async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: "Read a text file, shown with line numbers as `    N│ text` (the prefix is not part of the file). At most 2000 lines per call (use offset and limit for more); lines longer than 2000 characters are cut; binary files and directories are refused.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(NAME, args)?;
        let root = Arc::clone(&self.root);
        codebutler_agent::tool::run_blocking(NAME, move || read(&root, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::worktree;
    use super::*;
    use serde_json::json;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        ReadTool::new(Arc::clone(root)).call(args).await
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn shows_numbered_lines_by_relative_or_absolute_path() {
        let (_dir, root) = worktree(&[("src/a.rs", "fn a() {}\r\n\n  x\n")]);
        let expected = "    1│ fn a() {}\n    2│ \n    3│   x";
        assert_eq!(
            run(&root, json!({"file_path": "src/a.rs"})).await.unwrap(),
            expected
        );
        let abs = root.root().join("src/a.rs");
        assert_eq!(
            run(&root, json!({"file_path": abs.to_string_lossy()}))
                .await
                .unwrap(),
            expected
        );
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window() {
        let (_dir, root) = worktree(&[("f.txt", &numbered(20))]);
        let out = run(
            &root,
            json!({"file_path": "f.txt", "offset": 5, "limit": 2}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            "    5│ line 5\n    6│ line 6\n\
             [showing lines 5-6 of 20; use offset to read more]"
        );
        let err = run(&root, json!({"file_path": "f.txt", "offset": 0}))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid arguments for Read: offset must be at least 1, got 0"
        );
    }

    #[tokio::test]
    async fn the_default_window_is_2000_lines_and_long_lines_are_cut() {
        let long = format!("{}\n", "é".repeat(2500));
        let body = format!("{long}{}", numbered(2499));
        let (_dir, root) = worktree(&[("big.txt", &body)]);
        let out = run(&root, json!({"file_path": "big.txt"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_LINES + 1);
        assert!(lines[0].ends_with("é… [line cut at 2000 characters]"));
        assert_eq!(lines[0].chars().filter(|c| *c == 'é').count(), 2000);
        assert_eq!(lines[1999], " 2000│ line 1999");
        assert_eq!(
            lines[2000],
            "[showing lines 1-2000 of 2500; use offset to read more]"
        );
        let capped = run(&root, json!({"file_path": "big.txt", "limit": 5000}))
            .await
            .unwrap();
        assert_eq!(capped.lines().count(), MAX_LINES + 1);
    }

    #[tokio::test]
    async fn binaries_directories_and_outside_paths_are_refused() {
        let (dir, root) = worktree(&[("src/a.rs", "a")]);
        std::fs::write(dir.path().join("img.png"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
        let err = run(&root, json!({"file_path": "img.png"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("binary file"), "{err}");
        let err = run(&root, json!({"file_path": "src"})).await.unwrap_err();
        assert!(
            err.to_string().contains("is a directory; use Glob"),
            "{err}"
        );
        for p in ["/etc/passwd", "../x", ".git/config"] {
            let err = run(&root, json!({"file_path": p})).await.unwrap_err();
            assert!(matches!(err, ToolError::PathRefused { .. }), "{p}: {err}");
        }
    }
}
