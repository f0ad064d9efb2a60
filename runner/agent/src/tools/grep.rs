//! Grep: a regex search across the repository's files with the ripgrep crates, following
//! ripgrep's file rules (see [`super::walk`]) and skipping binary files. One
//! implementation, two path styles: the PM's Grep (repository-relative paths) and the
//! Coder's Grep (absolute worktree paths too).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use globset::GlobMatcher;
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, sinks};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::Deserialize;

use super::list_files::{compile_glob, glob_matches};
use super::path::{PathStyle, RepoRoot};
use super::walk::{FileVisitor, FirstInPathOrder, Threads, dir_wanted, lock, walk};
use crate::conversation::ToolSpec;
use crate::schema::parameters;
use crate::tool::{Tool, ToolError, parse_args};

const NAME: &str = "Grep";

/// Most matching lines returned by one call.
pub const MAX_MATCHES: usize = 100;

/// Longest matching line shown, in characters; longer lines are cut with `…`.
const MAX_LINE_CHARS: usize = 300;

/// Searches files for a regex (gitignore-aware).
#[derive(Debug, Clone)]
pub struct Grep {
    root: Arc<RepoRoot>,
    style: PathStyle,
}

/// The PM's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Regular expression (Rust regex syntax), matched line by line.
    pattern: String,
    /// Only search files whose name or repository-relative path matches this glob, e.g. "*.rs" or "src/**/*.rs".
    glob: Option<String>,
    /// File or directory to search, relative to the repository root (default: the whole repository).
    path: Option<String>,
}

/// The Coder's arguments.
#[derive(Deserialize, JsonSchema)]
struct WorktreeArgs {
    /// Regular expression, e.g. "fn \\w+_test" or "TODO|FIXME".
    pattern: String,
    /// File or directory to search (absolute inside the worktree, or relative to its root); default the whole worktree.
    path: Option<String>,
    /// Only search files whose name or path matches this glob, e.g. "*.rs" or "src/**/*.ts".
    glob: Option<String>,
}

impl From<WorktreeArgs> for Args {
    fn from(args: WorktreeArgs) -> Self {
        let WorktreeArgs {
            pattern,
            path,
            glob,
        } = args;
        Args {
            pattern,
            glob,
            path,
        }
    }
}

impl Grep {
    /// The PM's Grep, confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self {
            root,
            style: PathStyle::Repository,
        }
    }

    /// The Coder's Grep, confined to the worktree `root`.
    pub fn worktree(root: Arc<RepoRoot>) -> Self {
        Self {
            root,
            style: PathStyle::Worktree,
        }
    }
}

/// `line` without its line terminator, cut to [`MAX_LINE_CHARS`] characters.
fn display_line(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\r']);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

fn search(root: &RepoRoot, style: PathStyle, args: &Args) -> Result<String, ToolError> {
    let path = args
        .path
        .as_deref()
        .map(|p| style.relative(root, p))
        .transpose()?;
    let threads = match style {
        PathStyle::Repository => Threads::Several,
        PathStyle::Worktree => Threads::One,
    };
    search_files(
        NAME,
        root,
        threads,
        &args.pattern,
        args.glob.as_deref(),
        path.as_deref(),
    )
}

/// Searches the files under `path` (relative to `root`; default the whole repository),
/// optionally only those matching `glob`, for lines matching the regex `pattern`. Returns
/// `path:line:text` lines sorted by path and line, at most [`MAX_MATCHES`], or
/// `no matches`. `tool` names the calling tool in argument errors.
fn search_files(
    tool: &str,
    root: &RepoRoot,
    threads: Threads,
    pattern: &str,
    glob: Option<&str>,
    path: Option<&str>,
) -> Result<String, ToolError> {
    let matcher = line_matcher(tool, pattern)?;
    let glob = glob.map(|g| compile_glob(tool, g)).transpose()?;
    let start = root.resolve(path.unwrap_or(""))?;
    let start_rel = root.relative(&start);
    let found = Mutex::new(FirstInPathOrder::new(MAX_MATCHES));
    walk(root, &start, threads, || Searching {
        matcher: matcher.clone(),
        searcher: line_searcher(),
        glob: glob.as_ref(),
        start_rel: &start_rel,
        found: &found,
    });
    Ok(matches_text(
        found.into_inner().unwrap_or_else(|p| p.into_inner()),
    ))
}

/// The regex `pattern`, matched line by line; `tool` names the calling tool in the error.
fn line_matcher(tool: &str, pattern: &str) -> Result<RegexMatcher, ToolError> {
    RegexMatcher::new_line_matcher(pattern).map_err(|e| ToolError::InvalidArguments {
        tool: tool.to_owned(),
        reason: format!("invalid regex {pattern:?}: {e}"),
    })
}

/// A searcher that numbers lines and gives up on a file at its first NUL byte (binary).
fn line_searcher() -> Searcher {
    SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(true)
        .build()
}

/// Where a file's content is.
enum Source<'a> {
    Path(&'a std::path::Path),
    Bytes(&'a [u8]),
}

/// The matching lines of the file `rel` as `rel:line:text`, at most one more than
/// [`MAX_MATCHES`]; a file that cannot be read has none.
fn matching_lines(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    rel: &str,
    source: Source<'_>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let sink = sinks::Lossy(|line_number, line: &str| {
        lines.push(format!("{rel}:{line_number}:{}", display_line(line)));
        Ok(lines.len() <= MAX_MATCHES)
    });
    let searched = match source {
        Source::Path(path) => searcher.search_path(matcher, path, sink),
        Source::Bytes(bytes) => searcher.search_slice(matcher, bytes, sink),
    };
    if let Err(e) = searched {
        tracing::debug!(file = %rel, error = %e, "skipping a file Grep could not read");
    }
    lines
}

/// The answer for what `found` gathered: `path:line:text` lines in path order, at most
/// [`MAX_MATCHES`] with a note when there were more, or `no matches`.
fn matches_text(found: FirstInPathOrder) -> String {
    let mut results = found.into_lines();
    if results.is_empty() {
        return "no matches".to_owned();
    }
    let more = results.len() > MAX_MATCHES;
    results.truncate(MAX_MATCHES);
    let mut out = results.join("\n");
    if more {
        out.push_str(&format!(
            "\n[stopped at {MAX_MATCHES} matches; narrow the pattern or path]"
        ));
    }
    out
}

/// Grep over files the caller reads itself (the blobs of a commit, say), with the same
/// regex, glob, line format and limits as the Grep over a directory. Offer it files in
/// any order; ask [`Self::wanted`] first to skip reading those that cannot change the
/// answer.
#[derive(Debug)]
pub struct GrepFiles {
    matcher: RegexMatcher,
    searcher: Searcher,
    glob: Option<GlobMatcher>,
    start_rel: String,
    found: FirstInPathOrder,
}

impl GrepFiles {
    /// A search for `pattern` in the files under `start_rel` (a path relative to the
    /// repository's root, `"."` for the root), only those matching `glob` if given; `tool`
    /// names the calling tool in argument errors.
    pub fn new(
        tool: &str,
        pattern: &str,
        glob: Option<&str>,
        start_rel: &str,
    ) -> Result<Self, ToolError> {
        Ok(Self {
            matcher: line_matcher(tool, pattern)?,
            searcher: line_searcher(),
            glob: glob.map(|g| compile_glob(tool, g)).transpose()?,
            start_rel: start_rel.to_owned(),
            found: FirstInPathOrder::new(MAX_MATCHES),
        })
    }

    /// Whether the file `rel` passes the glob and could still change the answer.
    pub fn wanted(&self, rel: &str) -> bool {
        self.glob
            .as_ref()
            .is_none_or(|glob| glob_matches(glob, rel, &self.start_rel))
            && self.found.wanted(rel)
    }

    /// Searches the file `rel` whose content is `bytes` (a binary file matches nothing).
    pub fn file(&mut self, rel: &str, bytes: &[u8]) {
        if !self.wanted(rel) {
            return;
        }
        let lines = matching_lines(&mut self.searcher, &self.matcher, rel, Source::Bytes(bytes));
        self.found.add(rel.to_owned(), lines);
    }

    /// The answer, as the Grep over a directory gives it.
    pub fn answer(self) -> String {
        matches_text(self.found)
    }
}

/// One walking thread's search: its own searcher and matcher.
struct Searching<'a> {
    matcher: RegexMatcher,
    searcher: Searcher,
    glob: Option<&'a GlobMatcher>,
    start_rel: &'a str,
    found: &'a Mutex<FirstInPathOrder>,
}

impl FileVisitor for Searching<'_> {
    fn file(&mut self, rel: String, path: PathBuf) -> WalkState {
        if let Some(glob) = self.glob {
            if !glob_matches(glob, &rel, self.start_rel) {
                return WalkState::Continue;
            }
        }
        if !lock(self.found).wanted(&rel) {
            return WalkState::Continue;
        }
        let lines = matching_lines(&mut self.searcher, &self.matcher, &rel, Source::Path(&path));
        lock(self.found).add(rel, lines);
        WalkState::Continue
    }

    fn dir(&mut self, rel: &str) -> WalkState {
        dir_wanted(self.found, rel)
    }
}

#[async_trait]
impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        match self.style {
            PathStyle::Repository => ToolSpec {
                name: NAME,
                description: "Search for a regex pattern across files. Returns matching lines with file paths and line numbers. Max 100 results.",
                parameters: parameters::<Args>(),
            },
            PathStyle::Worktree => ToolSpec {
                name: NAME,
                description: "Search file contents for a regex (Rust regex syntax, matched line by line), skipping .gitignore'd, hidden and binary files. Returns `path:line:text` lines with paths relative to the worktree root, at most 100 matches; narrow with path or glob.",
                parameters: parameters::<WorktreeArgs>(),
            },
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = match self.style {
            PathStyle::Repository => parse_args(NAME, args)?,
            PathStyle::Worktree => parse_args::<WorktreeArgs>(NAME, args)?.into(),
        };
        let root = Arc::clone(&self.root);
        let style = self.style;
        crate::tool::run_blocking(NAME, move || search(&root, style, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::test_support::{repo_with, write_files};
    use super::*;
    use serde_json::json;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        Grep::new(Arc::clone(root)).call(args).await
    }

    fn sample() -> (tempfile::TempDir, Arc<RepoRoot>) {
        repo_with(&[
            (".gitignore", "ignored.txt\n"),
            ("src/lib.rs", "pub fn alpha() {}\n// needle in lib\n"),
            ("src/deep/mod.rs", "fn beta() {}\nlet needle = 1;\n"),
            ("docs/notes.md", "a needle in the docs\n"),
            ("b.txt", "no match here\nneedle\n"),
        ])
    }

    #[tokio::test]
    async fn finds_matches_sorted_by_path_and_line() {
        let (dir, root) = sample();
        write_files(dir.path(), &[("ignored.txt", "needle\n")]);
        std::fs::write(dir.path().join("bin.dat"), b"needle\0\x01\x02").unwrap();
        let out = run(&root, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(
            out,
            "b.txt:2:needle\n\
             docs/notes.md:1:a needle in the docs\n\
             src/deep/mod.rs:2:let needle = 1;\n\
             src/lib.rs:2:// needle in lib"
        );
    }

    #[tokio::test]
    async fn glob_and_path_narrow_the_search() {
        let (_dir, root) = sample();
        assert_eq!(
            run(&root, json!({"pattern": "needle", "glob": "*.rs"}))
                .await
                .unwrap(),
            "src/deep/mod.rs:2:let needle = 1;\nsrc/lib.rs:2:// needle in lib"
        );
        assert_eq!(
            run(
                &root,
                json!({"pattern": "needle", "glob": "src/**/*.rs", "path": "src/deep"})
            )
            .await
            .unwrap(),
            "src/deep/mod.rs:2:let needle = 1;"
        );
        assert_eq!(
            run(&root, json!({"pattern": "fn \\w+", "path": "src/lib.rs"}))
                .await
                .unwrap(),
            "src/lib.rs:1:pub fn alpha() {}"
        );
        assert_eq!(
            run(&root, json!({"pattern": "zzz"})).await.unwrap(),
            "no matches"
        );
        let err = run(&root, json!({"pattern": "x", "path": "/etc"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
    }

    #[tokio::test]
    async fn private_directories_are_not_searched() {
        let (dir, root) = sample();
        write_files(
            dir.path(),
            &[
                (".codebutler/config.json", "needle secret"),
                ("x/.git", "needle"),
            ],
        );
        let out = run(&root, json!({"pattern": "secret|needle"}))
            .await
            .unwrap();
        assert!(!out.contains("secret"), "{out}");
        assert!(!out.contains(".git"), "{out}");
        assert!(out.contains("b.txt:2:needle"), "{out}");
    }

    #[tokio::test]
    async fn results_are_capped_at_100() {
        let body: String = (0..150).map(|i| format!("hit {i}\n")).collect();
        let long = format!("hit {}\n", "x".repeat(1000));
        let (_dir, root) = repo_with(&[("a.txt", &long), ("b.txt", &body)]);
        let out = run(&root, json!({"pattern": "^hit"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_MATCHES + 1);
        assert!(lines[0].starts_with("a.txt:1:hit xxx"), "{}", lines[0]);
        assert!(lines[0].ends_with('…') && lines[0].chars().count() < 320);
        assert_eq!(lines[1], "b.txt:1:hit 0");
        assert_eq!(lines[99], "b.txt:99:hit 98");
        assert_eq!(
            lines[100],
            "[stopped at 100 matches; narrow the pattern or path]"
        );
    }

    /// Searched on several threads, the answer is still the first 100 matches in path
    /// order, whichever files the threads happened to search first.
    #[tokio::test]
    async fn the_cap_keeps_the_first_matches_in_path_order_across_many_files() {
        let files: Vec<(String, String)> = (0..400)
            .map(|i| {
                let body = if i % 3 == 0 {
                    format!("hit {i} a\nmiss\nhit {i} b\nhit {i} c\n")
                } else {
                    "miss\n".to_owned()
                };
                (format!("d{}/e{}/f{i}.txt", i % 11, i % 4), body)
            })
            .collect();
        let listed: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let (_dir, root) = repo_with(&listed);
        let mut sorted = files.clone();
        sorted.sort();
        let expected: Vec<String> = sorted
            .iter()
            .flat_map(|(path, body)| {
                body.lines()
                    .enumerate()
                    .filter(|(_, l)| l.starts_with("hit"))
                    .map(move |(n, l)| format!("{path}:{}:{l}", n + 1))
            })
            .take(MAX_MATCHES)
            .collect();
        for _ in 0..5 {
            let out = run(&root, json!({"pattern": "^hit"})).await.unwrap();
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines[..MAX_MATCHES], expected[..]);
            assert_eq!(
                lines[MAX_MATCHES],
                "[stopped at 100 matches; narrow the pattern or path]"
            );
        }
        // Fewer matches than the cap: all of them, in order.
        let out = run(&root, json!({"pattern": "^hit 3 "})).await.unwrap();
        assert_eq!(
            out,
            "d3/e3/f3.txt:1:hit 3 a\nd3/e3/f3.txt:3:hit 3 b\nd3/e3/f3.txt:4:hit 3 c"
        );
    }

    #[tokio::test]
    async fn invalid_regex_is_an_argument_error() {
        let (_dir, root) = sample();
        let err = run(&root, json!({"pattern": "foo(("})).await.unwrap_err();
        match err {
            ToolError::InvalidArguments { tool, reason } => {
                assert_eq!(tool, "Grep");
                assert!(reason.starts_with("invalid regex \"foo((\""), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// The Coder's Grep: the same search with worktree paths.
    mod worktree {
        use super::super::super::path::test_support::{repo_with as worktree, write_files};
        use super::super::*;
        use serde_json::json;

        async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
            Grep::worktree(Arc::clone(root)).call(args).await
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
}
