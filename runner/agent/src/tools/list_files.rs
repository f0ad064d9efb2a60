//! ListFiles: lists repository files matching a glob, relative to the repository root.
//! One implementation, two path styles: the PM's ListFiles (repository-relative paths,
//! sorted by path) and the Coder's Glob (absolute worktree paths too, most recently
//! modified first, as coding models expect of a tool by that name).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use globset::{Glob, GlobMatcher};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::Deserialize;

use super::path::{PathStyle, RepoRoot};
use super::walk::{FileVisitor, FirstInPathOrder, Threads, dir_wanted, lock, walk, walk_files};
use crate::conversation::ToolSpec;
use crate::schema::parameters;
use crate::tool::{Tool, ToolError, parse_args};

const NAME: &str = "ListFiles";
const WORKTREE_NAME: &str = "Glob";

/// Most files listed in one call.
pub const MAX_FILES: usize = 200;

/// Lists files matching a glob pattern (gitignore-aware).
#[derive(Debug, Clone)]
pub struct ListFiles {
    root: Arc<RepoRoot>,
    style: PathStyle,
}

/// The PM's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Glob matched against file names and paths relative to the repository root, e.g. "*.rs", "docs/*.md", "**/Cargo.toml".
    pattern: String,
    /// Directory to list, relative to the repository root (default: the whole repository).
    path: Option<String>,
}

/// The Coder's arguments.
#[derive(Deserialize, JsonSchema)]
struct WorktreeArgs {
    /// Glob matched against file names and paths, e.g. "*.rs", "src/**/*.ts", "**/Cargo.toml".
    pattern: String,
    /// Directory to list (absolute inside the worktree, or relative to its root); default the whole worktree.
    path: Option<String>,
}

impl From<WorktreeArgs> for Args {
    fn from(args: WorktreeArgs) -> Self {
        let WorktreeArgs { pattern, path } = args;
        Args { pattern, path }
    }
}

impl ListFiles {
    /// The PM's ListFiles, confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self {
            root,
            style: PathStyle::Repository,
        }
    }

    /// The Coder's Glob, confined to the worktree `root`.
    pub fn worktree(root: Arc<RepoRoot>) -> Self {
        Self {
            root,
            style: PathStyle::Worktree,
        }
    }

    fn name(&self) -> &'static str {
        match self.style {
            PathStyle::Repository => NAME,
            PathStyle::Worktree => WORKTREE_NAME,
        }
    }
}

/// Compiles a glob the way the file tools use it: `*` does not cross `/`, `**` does.
pub(crate) fn compile_glob(tool: &str, pattern: &str) -> Result<GlobMatcher, ToolError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g: Glob| g.compile_matcher())
        .map_err(|e| ToolError::InvalidArguments {
            tool: tool.to_owned(),
            reason: format!("invalid glob {pattern:?}: {e}"),
        })
}

/// Whether `glob` matches the file's name, its path relative to the repository root, or
/// its path relative to `start_rel` (the searched directory, `"."` for the root).
pub(crate) fn glob_matches(glob: &GlobMatcher, rel: &str, start_rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if glob.is_match(name) || glob.is_match(rel) {
        return true;
    }
    if start_rel != "." {
        if let Some(below) = rel
            .strip_prefix(start_rel)
            .and_then(|r| r.strip_prefix('/'))
        {
            return glob.is_match(below);
        }
    }
    false
}

/// The files under `path` (relative to `root`; default the whole repository) whose name or
/// path matches the glob `pattern`, as (path relative to the root, absolute path), sorted
/// by path. `tool` names the calling tool in argument errors.
fn matching_files(
    tool: &str,
    root: &RepoRoot,
    pattern: &str,
    path: Option<&str>,
) -> Result<Vec<(String, PathBuf)>, ToolError> {
    let glob = compile_glob(tool, pattern)?;
    let start = root.resolve(path.unwrap_or(""))?;
    let start_rel = root.relative(&start);
    Ok(walk_files(root, &start, Threads::One)
        .into_iter()
        .filter(|(rel, _)| glob_matches(&glob, rel, &start_rel))
        .collect())
}

/// The PM's ListFiles: the first [`MAX_FILES`] matching paths in path order, the walk
/// skipping what sorts after them.
fn list(root: &RepoRoot, pattern: &str, path: Option<&str>) -> Result<String, ToolError> {
    let glob = compile_glob(NAME, pattern)?;
    let start = root.resolve(path.unwrap_or(""))?;
    let start_rel = root.relative(&start);
    let found = Mutex::new(FirstInPathOrder::new(MAX_FILES));
    walk(root, &start, Threads::Several, || Listing {
        glob: &glob,
        start_rel: &start_rel,
        found: &found,
    });
    let matched = found
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_lines();
    Ok(render_file_list(matched))
}

/// One walking thread's listing.
struct Listing<'a> {
    glob: &'a GlobMatcher,
    start_rel: &'a str,
    found: &'a Mutex<FirstInPathOrder>,
}

impl FileVisitor for Listing<'_> {
    fn file(&mut self, rel: String, _path: PathBuf) -> WalkState {
        if glob_matches(self.glob, &rel, self.start_rel) {
            let mut found = lock(self.found);
            if found.wanted(&rel) {
                found.add(rel.clone(), vec![rel]);
            }
        }
        WalkState::Continue
    }

    fn dir(&mut self, rel: &str) -> WalkState {
        dir_wanted(self.found, rel)
    }
}

/// The Coder's Glob: worktree paths, newest first.
fn list_worktree(root: &RepoRoot, args: &Args) -> Result<String, ToolError> {
    let path = args
        .path
        .as_deref()
        .map(|p| PathStyle::Worktree.relative(root, p))
        .transpose()?;
    // A pattern written as an absolute path inside the worktree means the same relative one.
    let prefix = format!("{}/", root.root().display());
    let pattern = args
        .pattern
        .strip_prefix(prefix.as_str())
        .unwrap_or(&args.pattern);
    let mut files: Vec<(SystemTime, String)> =
        matching_files(WORKTREE_NAME, root, pattern, path.as_deref())?
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

/// One path per line, at most [`MAX_FILES`] with a marker when there were more, or
/// `no files match`.
fn render_file_list(paths: impl IntoIterator<Item = String>) -> String {
    let mut matched: Vec<String> = paths.into_iter().take(MAX_FILES + 1).collect();
    if matched.is_empty() {
        return "no files match".to_owned();
    }
    let more = matched.len() > MAX_FILES;
    matched.truncate(MAX_FILES);
    let mut out = matched.join("\n");
    if more {
        out.push_str(&format!(
            "\n[stopped at {MAX_FILES} files; narrow the pattern]"
        ));
    }
    out
}

#[async_trait]
impl Tool for ListFiles {
    fn spec(&self) -> ToolSpec {
        match self.style {
            PathStyle::Repository => ToolSpec {
                name: NAME,
                description: "List files matching a glob pattern. Returns paths relative to repo root. Max 200 results.",
                parameters: parameters::<Args>(),
            },
            PathStyle::Worktree => ToolSpec {
                name: WORKTREE_NAME,
                description: "List files whose name or path matches a glob (`*` stays within a directory, `**` crosses directories), skipping .gitignore'd and hidden files. Returns paths relative to the worktree root, most recently modified first, at most 200.",
                parameters: parameters::<WorktreeArgs>(),
            },
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let name = self.name();
        let root = Arc::clone(&self.root);
        match self.style {
            PathStyle::Repository => {
                let args: Args = parse_args(name, args)?;
                crate::tool::run_blocking(name, move || {
                    list(&root, &args.pattern, args.path.as_deref())
                })
                .await
            }
            PathStyle::Worktree => {
                let args: Args = parse_args::<WorktreeArgs>(name, args)?.into();
                crate::tool::run_blocking(name, move || list_worktree(&root, &args)).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::test_support::{repo_with, write_files};
    use super::*;
    use serde_json::json;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        ListFiles::new(Arc::clone(root)).call(args).await
    }

    fn sample() -> (tempfile::TempDir, Arc<RepoRoot>) {
        repo_with(&[
            (".gitignore", "*.log\n"),
            ("Cargo.toml", "[workspace]"),
            ("README.md", "r"),
            ("docs/guide.md", "g"),
            ("docs/deep/more.md", "m"),
            ("runner/Cargo.toml", "[package]"),
            ("runner/src/lib.rs", ""),
        ])
    }

    #[tokio::test]
    async fn patterns_match_names_and_paths() {
        let (dir, root) = sample();
        write_files(dir.path(), &[("debug.log", "x"), ("notes.log.md", "n")]);
        assert_eq!(
            run(&root, json!({"pattern": "*.md"})).await.unwrap(),
            "README.md\ndocs/deep/more.md\ndocs/guide.md\nnotes.log.md"
        );
        assert_eq!(
            run(&root, json!({"pattern": "docs/*.md"})).await.unwrap(),
            "docs/guide.md"
        );
        assert_eq!(
            run(&root, json!({"pattern": "**/*.toml"})).await.unwrap(),
            "Cargo.toml\nrunner/Cargo.toml"
        );
        assert_eq!(
            run(&root, json!({"pattern": "*.log"})).await.unwrap(),
            "no files match"
        );
    }

    #[tokio::test]
    async fn path_limits_the_listing() {
        let (_dir, root) = sample();
        assert_eq!(
            run(&root, json!({"pattern": "*", "path": "runner"}))
                .await
                .unwrap(),
            "runner/Cargo.toml\nrunner/src/lib.rs"
        );
        assert_eq!(
            run(&root, json!({"pattern": "src/*.rs", "path": "runner"}))
                .await
                .unwrap(),
            "runner/src/lib.rs"
        );
        let err = run(&root, json!({"pattern": "*", "path": "../"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
        let err = run(&root, json!({"pattern": "*", "path": ".git"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
    }

    #[tokio::test]
    async fn results_are_capped() {
        let files: Vec<(String, String)> = (0..250)
            .map(|i| (format!("many/f{i:03}.txt"), String::new()))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        let (_dir, root) = repo_with(&refs);
        let out = run(&root, json!({"pattern": "*.txt"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_FILES + 1);
        assert_eq!(lines[0], "many/f000.txt");
        assert_eq!(lines[199], "many/f199.txt");
        assert_eq!(lines[200], "[stopped at 200 files; narrow the pattern]");
    }

    #[tokio::test]
    async fn bad_arguments_are_errors() {
        let (_dir, root) = sample();
        let err = run(&root, json!({"pattern": "a[b"})).await.unwrap_err();
        assert!(err.to_string().contains("invalid glob"), "{err}");
        let err = run(&root, json!({})).await.unwrap_err();
        assert!(err.to_string().contains("missing field `pattern`"), "{err}");
    }

    /// The Coder's Glob: the same listing with worktree paths, newest first.
    mod worktree {
        use super::super::super::path::test_support::{repo_with as worktree, write_files};
        use super::super::*;
        use serde_json::json;
        use std::time::Duration;

        async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
            ListFiles::worktree(Arc::clone(root)).call(args).await
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
}
