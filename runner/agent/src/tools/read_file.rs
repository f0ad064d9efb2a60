//! ReadFile: shows a file's text with line numbers, a window at a time. One
//! implementation, two path styles: the PM's ReadFile (repository-relative paths, 500
//! lines a call) and the Coder's Read (absolute worktree paths too, 2000 lines a call).

use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::path::{PathStyle, RepoRoot};
use crate::conversation::ToolSpec;
use crate::schema::parameters;
use crate::tool::{Tool, ToolError, parse_args};

const NAME: &str = "ReadFile";
const WORKTREE_NAME: &str = "Read";

/// Most lines shown by one call of the PM's ReadFile.
pub const MAX_LINES: usize = 500;
/// Most lines shown by one call of the Coder's Read (also the default).
pub const WORKTREE_MAX_LINES: usize = 2000;

/// Bytes examined for a NUL byte to decide that a file is binary.
const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// Longest line shown, in characters; longer lines are cut with a marker.
const MAX_LINE_CHARS: usize = 2000;

/// Reads a text file of the repository (or worktree) with line numbers.
#[derive(Debug, Clone)]
pub struct ReadFile {
    root: Arc<RepoRoot>,
    style: PathStyle,
}

/// The PM's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// File path relative to the repository root.
    path: String,
    /// 1-based line to start at (default 1).
    #[schemars(range(min = 1))]
    offset: Option<i64>,
    /// Most lines to return (default and maximum 500).
    #[schemars(range(min = 1, max = MAX_LINES))]
    limit: Option<i64>,
}

/// The Coder's arguments.
#[derive(Deserialize, JsonSchema)]
struct WorktreeArgs {
    /// The file to read: an absolute path inside the worktree, or a path relative to the worktree root.
    file_path: String,
    /// 1-based line number to start at (default 1).
    #[schemars(range(min = 1))]
    offset: Option<i64>,
    /// Most lines to return (default and maximum 2000).
    #[schemars(range(min = 1, max = WORKTREE_MAX_LINES))]
    limit: Option<i64>,
}

impl ReadFile {
    /// The PM's ReadFile, confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self {
            root,
            style: PathStyle::Repository,
        }
    }

    /// The Coder's Read, confined to the worktree `root`.
    pub fn worktree(root: Arc<RepoRoot>) -> Self {
        Self {
            root,
            style: PathStyle::Worktree,
        }
    }

    fn read_style(&self) -> ReadStyle {
        match self.style {
            PathStyle::Repository => STYLE,
            PathStyle::Worktree => WORKTREE_STYLE,
        }
    }
}

fn invalid(tool: &str, reason: String) -> ToolError {
    ToolError::InvalidArguments {
        tool: tool.to_owned(),
        reason,
    }
}

/// A positive count from the model's optional argument.
fn positive(
    tool: &str,
    name: &str,
    value: Option<i64>,
    default: usize,
) -> Result<usize, ToolError> {
    match value {
        None => Ok(default),
        Some(v) if v >= 1 => {
            Ok(usize::try_from(v).map_err(|_| invalid(tool, format!("{name} is too large")))?)
        }
        Some(v) => Err(invalid(tool, format!("{name} must be at least 1, got {v}"))),
    }
}

fn display_line(bytes: &[u8]) -> String {
    let mut end = bytes.len();
    while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let text = String::from_utf8_lossy(&bytes[..end]);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!(
            "{}… [line cut at {MAX_LINE_CHARS} characters]",
            &text[..cut]
        ),
        None => text.into_owned(),
    }
}

/// How a file-reading tool presents a file: its name (for argument errors), its line cap,
/// and the tool it points to when asked to read a directory.
#[derive(Debug, Clone, Copy)]
struct ReadStyle {
    tool: &'static str,
    max_lines: usize,
    list_tool: &'static str,
}

const STYLE: ReadStyle = ReadStyle {
    tool: NAME,
    max_lines: MAX_LINES,
    list_tool: "ListFiles",
};

const WORKTREE_STYLE: ReadStyle = ReadStyle {
    tool: WORKTREE_NAME,
    max_lines: WORKTREE_MAX_LINES,
    list_tool: "Glob",
};

/// Reads the text file at `rel` (resolved through `root`) as numbered lines
/// (`{:>5}│ {line}`), from line `offset` (1-based, default 1) for at most `limit` lines
/// (default and cap `style.max_lines`). Binary files and directories are refused.
fn read_numbered(
    root: &RepoRoot,
    rel: &str,
    offset: Option<i64>,
    limit: Option<i64>,
    style: ReadStyle,
) -> Result<String, ToolError> {
    let tool = style.tool;
    let offset = positive(tool, "offset", offset, 1)?;
    let limit = positive(tool, "limit", limit, style.max_lines)?.min(style.max_lines);
    let path = root.resolve(rel)?;
    let rel = root.relative(&path);
    let io_err = |e: std::io::Error| ToolError::Failed(format!("cannot read {rel}: {e}"));
    let meta = std::fs::metadata(&path).map_err(io_err)?;
    if meta.is_dir() {
        return Err(invalid(
            tool,
            format!("{rel} is a directory; use {}", style.list_tool),
        ));
    }
    if !meta.is_file() {
        return Err(ToolError::Failed(format!("{rel} is not a regular file")));
    }
    let mut reader = BufReader::new(std::fs::File::open(&path).map_err(io_err)?);

    let mut probe = Vec::with_capacity(BINARY_PROBE_BYTES);
    (&mut reader)
        .take(BINARY_PROBE_BYTES as u64)
        .read_to_end(&mut probe)
        .map_err(io_err)?;
    if probe.contains(&0) {
        return Err(ToolError::Failed(format!("{rel}: binary file, not shown")));
    }
    let mut reader = std::io::Cursor::new(probe).chain(reader);

    let last_wanted = offset.saturating_add(limit - 1);
    let mut shown: Vec<String> = Vec::new();
    let mut total = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io_err)? == 0 {
            break;
        }
        total += 1;
        if (offset..=last_wanted).contains(&total) {
            shown.push(format!("{total:>5}│ {}", display_line(&buf)));
        }
    }
    if total == 0 {
        return Ok(format!("[{rel} is empty]"));
    }
    if shown.is_empty() {
        return Err(invalid(
            tool,
            format!("offset {offset} is past the end of {rel}, which has {total} lines"),
        ));
    }
    let end = offset + shown.len() - 1;
    let mut out = shown.join("\n");
    if end < total {
        out.push_str(&format!(
            "\n[showing lines {offset}-{end} of {total}; use offset to read more]"
        ));
    }
    Ok(out)
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        match self.style {
            PathStyle::Repository => ToolSpec {
                name: NAME,
                description: "Read the contents of a file in the repository. Returns file text with line numbers. Use offset/limit for large files.",
                parameters: parameters::<Args>(),
            },
            PathStyle::Worktree => ToolSpec {
                name: WORKTREE_NAME,
                description: "Read a text file, shown with line numbers as `    N│ text` (the prefix is not part of the file). At most 2000 lines per call (use offset and limit for more); lines longer than 2000 characters are cut; binary files and directories are refused.",
                parameters: parameters::<WorktreeArgs>(),
            },
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let read_style = self.read_style();
        let name = read_style.tool;
        let (path, offset, limit) = match self.style {
            PathStyle::Repository => {
                let args: Args = parse_args(name, args)?;
                (args.path, args.offset, args.limit)
            }
            PathStyle::Worktree => {
                let args: WorktreeArgs = parse_args(name, args)?;
                (args.file_path, args.offset, args.limit)
            }
        };
        let root = Arc::clone(&self.root);
        let style = self.style;
        crate::tool::run_blocking(name, move || {
            let rel = style.relative(&root, &path)?;
            read_numbered(&root, &rel, offset, limit, read_style)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::test_support::repo_with;
    use super::*;
    use serde_json::json;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        ReadFile::new(Arc::clone(root)).call(args).await
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn shows_numbered_lines() {
        let (_dir, root) = repo_with(&[("src/a.rs", "fn a() {}\r\n\n  x\n"), ("e", "")]);
        let out = run(&root, json!({"path": "src/a.rs"})).await.unwrap();
        assert_eq!(out, "    1│ fn a() {}\n    2│ \n    3│   x");
        assert_eq!(
            run(&root, json!({"path": "e"})).await.unwrap(),
            "[e is empty]"
        );
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window() {
        let body = numbered(20);
        let (_dir, root) = repo_with(&[("f.txt", &body)]);
        let out = run(&root, json!({"path": "f.txt", "offset": 5, "limit": 3}))
            .await
            .unwrap();
        assert_eq!(
            out,
            "    5│ line 5\n    6│ line 6\n    7│ line 7\n\
             [showing lines 5-7 of 20; use offset to read more]"
        );
        let tail = run(&root, json!({"path": "f.txt", "offset": 19}))
            .await
            .unwrap();
        assert_eq!(tail, "   19│ line 19\n   20│ line 20");
        let past = run(&root, json!({"path": "f.txt", "offset": 21}))
            .await
            .unwrap_err();
        assert!(past.to_string().contains("past the end"), "{past}");
    }

    #[tokio::test]
    async fn whole_file_is_capped_at_500_lines() {
        let body = numbered(1234);
        let (_dir, root) = repo_with(&[("big.txt", &body)]);
        let out = run(&root, json!({"path": "big.txt"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 501);
        assert_eq!(lines[499], "  500│ line 500");
        assert_eq!(
            lines[500],
            "[showing lines 1-500 of 1234; use offset to read more]"
        );
        let capped = run(
            &root,
            json!({"path": "big.txt", "offset": 1000, "limit": 900}),
        )
        .await
        .unwrap();
        assert!(
            capped.ends_with("\n 1234│ line 1234"),
            "{}",
            &capped[capped.len() - 40..]
        );
        assert_eq!(capped.lines().count(), 235);
    }

    #[tokio::test]
    async fn bad_offsets_and_limits_are_argument_errors() {
        let (_dir, root) = repo_with(&[("f", "x\n")]);
        for args in [
            json!({"path": "f", "offset": 0}),
            json!({"path": "f", "offset": -3}),
            json!({"path": "f", "limit": 0}),
        ] {
            let err = run(&root, args.clone()).await.unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidArguments { .. }),
                "{args}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn directories_binaries_and_private_files_are_refused() {
        let (dir, root) = repo_with(&[("src/a.rs", "a")]);
        std::fs::write(dir.path().join("img.png"), b"\x89PNG\r\n\x1a\n\0\0\0").unwrap();
        std::fs::write(dir.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
        let err = run(&root, json!({"path": "src"})).await.unwrap_err();
        assert!(
            err.to_string().contains("is a directory; use ListFiles"),
            "{err}"
        );
        let err = run(&root, json!({"path": "img.png"})).await.unwrap_err();
        assert_eq!(err.to_string(), "img.png: binary file, not shown");
        assert_eq!(
            run(&root, json!({"path": "latin1.txt"})).await.unwrap(),
            "    1│ caf\u{FFFD}"
        );
        let err = run(&root, json!({"path": ".git/config"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::PathRefused { .. }), "{err}");
        let err = run(&root, json!({"path": "missing.rs"})).await.unwrap_err();
        assert_eq!(err.to_string(), "no such file or directory: missing.rs");
    }

    /// The Coder's Read: the same reading with worktree paths.
    mod worktree {
        use super::super::super::path::test_support::repo_with as worktree;
        use super::super::WORKTREE_MAX_LINES as MAX_LINES;
        use super::super::*;
        use serde_json::json;

        async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
            ReadFile::worktree(Arc::clone(root)).call(args).await
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
}
