//! Glob: the PM's file listing (same walk and glob rules), newest files first.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::worktree_relative;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use codebutler_agent::tools::list_files::{matching_files, render_file_list};
use codebutler_agent::tools::path::RepoRoot;

const NAME: &str = "Glob";

/// Lists the worktree's files matching a glob (gitignore-aware), most recently modified
/// first.
#[derive(Debug, Clone)]
pub struct GlobTool {
    root: Arc<RepoRoot>,
}

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Glob matched against file names and paths, e.g. "*.rs", "src/**/*.ts", "**/Cargo.toml".
    pattern: String,
    /// Directory to list (absolute inside the worktree, or relative to its root); default the whole worktree.
    path: Option<String>,
}

impl GlobTool {
    /// A Glob confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

fn list(root: &RepoRoot, args: &Args) -> Result<String, ToolError> {
    let path = args
        .path
        .as_deref()
        .map(|p| worktree_relative(root, p))
        .transpose()?;
    // A pattern written as an absolute path inside the worktree means the same relative one.
    let prefix = format!("{}/", root.root().display());
    let pattern = args
        .pattern
        .strip_prefix(prefix.as_str())
        .unwrap_or(&args.pattern);
    let mut files: Vec<(SystemTime, String)> =
        matching_files(NAME, root, pattern, path.as_deref())?
            .into_iter()
            .map(|(rel, abs)| {
                let modified = std::fs::metadata(&abs)
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                (modified, rel)
            })
            .collect();
    // Newest first; files modified at the same time by path.
    files.sort_by(|(ta, a), (tb, b)| tb.cmp(ta).then_with(|| a.cmp(b)));
    Ok(render_file_list(files.into_iter().map(|(_, rel)| rel)))
}

#[async_trait]
impl Tool for GlobTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: "List files whose name or path matches a glob (`*` stays within a directory, `**` crosses directories), skipping .gitignore'd and hidden files. Returns paths relative to the worktree root, most recently modified first, at most 200.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(NAME, args)?;
        let root = Arc::clone(&self.root);
        codebutler_agent::tool::run_blocking(NAME, move || list(&root, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::worktree;
    use super::*;
    use codebutler_agent::tools::path::test_support::write_files;
    use serde_json::json;
    use std::time::Duration;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        GlobTool::new(Arc::clone(root)).call(args).await
    }

    fn set_mtime(path: &std::path::Path, secs: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    #[tokio::test]
    async fn lists_newest_first_and_respects_gitignore() {
        let (dir, root) = worktree(&[
            (".gitignore", "*.log\n"),
            ("a.rs", ""),
            ("src/b.rs", ""),
            ("src/c.rs", ""),
            ("README.md", ""),
        ]);
        write_files(dir.path(), &[("debug.log", "x"), ("src/x.log", "x")]);
        set_mtime(&dir.path().join("a.rs"), 1_000);
        set_mtime(&dir.path().join("src/b.rs"), 3_000);
        set_mtime(&dir.path().join("src/c.rs"), 3_000);
        set_mtime(&dir.path().join("README.md"), 2_000);
        assert_eq!(
            run(&root, json!({"pattern": "*.rs"})).await.unwrap(),
            "src/b.rs\nsrc/c.rs\na.rs"
        );
        assert_eq!(
            run(&root, json!({"pattern": "**/*"})).await.unwrap(),
            "src/b.rs\nsrc/c.rs\nREADME.md\na.rs"
        );
        assert_eq!(
            run(&root, json!({"pattern": "*.log"})).await.unwrap(),
            "no files match"
        );
    }

    #[tokio::test]
    async fn path_and_absolute_forms_narrow_the_listing() {
        let (_dir, root) = worktree(&[("a.rs", ""), ("src/b.rs", "")]);
        let abs_src = root.root().join("src");
        assert_eq!(
            run(
                &root,
                json!({"pattern": "*.rs", "path": abs_src.to_string_lossy()})
            )
            .await
            .unwrap(),
            "src/b.rs"
        );
        let abs_pattern = format!("{}/src/*.rs", root.root().display());
        assert_eq!(
            run(&root, json!({"pattern": abs_pattern})).await.unwrap(),
            "src/b.rs"
        );
        for path in ["/etc", "..", ".git"] {
            let err = run(&root, json!({"pattern": "*", "path": path}))
                .await
                .unwrap_err();
            assert!(
                matches!(err, ToolError::PathRefused { .. }),
                "{path}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn results_are_capped_at_200() {
        let files: Vec<(String, String)> = (0..230)
            .map(|i| (format!("many/f{i:03}.txt"), String::new()))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        let (_dir, root) = worktree(&refs);
        let out = run(&root, json!({"pattern": "*.txt"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 201);
        assert_eq!(lines[200], "[stopped at 200 files; narrow the pattern]");
    }
}
