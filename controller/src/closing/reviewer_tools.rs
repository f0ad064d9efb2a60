//! The reviewer's read-only tools: the repository as a pull request's head commit holds it,
//! read from git objects in the main repository (never a worktree's files, never through a
//! link: a symlink's blob is refused, as [`repo_files::committed`] refuses it). ReadFile,
//! Grep and ListFiles take the names and arguments of the PM's tools of the same names, so
//! the model meets the tools it knows, pointed at the head instead of the default branch.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{
    DEFAULT_MAX_TOOL_OUTPUT, Tool, ToolError, ToolRegistry, parse_args, run_blocking,
};
use codebutler_agent::tools::grep::GrepFiles;
use git2::{ObjectType, Oid, Repository, Tree};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::repo_files::{self, Found};

/// Largest file ReadFile returns.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most entries ListFiles returns.
const MAX_ENTRIES: usize = 500;
/// Most bytes of files one Grep reads; past it the answer says where it stopped.
const MAX_GREP_BYTES: u64 = 32 * 1024 * 1024;

/// The repository at one commit.
#[derive(Clone, Debug)]
pub struct AtCommit {
    /// The main repository.
    pub repo: PathBuf,
    pub commit: Oid,
}

/// The reviewer's tools over `at`.
pub fn tools(at: AtCommit) -> ToolRegistry {
    let at = Arc::new(at);
    let mut registry = ToolRegistry::new(DEFAULT_MAX_TOOL_OUTPUT);
    registry
        .register(Arc::new(ReadFile { at: at.clone() }))
        .register(Arc::new(Grep { at: at.clone() }))
        .register(Arc::new(ListFiles { at }));
    registry
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

/// `ReadFile{path}` at the head.
#[derive(Debug)]
struct ReadFile {
    at: Arc<AtCommit>,
}

/// ReadFile's arguments.
#[derive(Deserialize, JsonSchema)]
struct ReadFileArgs {
    /// The file's path, relative to the repository's root.
    path: String,
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ReadFile",
            description: "Read a file of the repository as the pull request's head holds it, with line numbers.",
            parameters: parameters::<ReadFileArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: ReadFileArgs = parse_args("ReadFile", args)?;
        let at = self.at.clone();
        run_blocking("ReadFile", move || {
            let repo = Repository::open(&at.repo).map_err(failed)?;
            match repo_files::committed(&repo, at.commit, &args.path, MAX_FILE_BYTES)
                .map_err(failed)?
            {
                Found::File(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    Ok(text
                        .lines()
                        .enumerate()
                        .map(|(n, l)| format!("{:>5}  {l}\n", n + 1))
                        .collect())
                }
                Found::Absent => Err(ToolError::NotFound(format!(
                    "no file {:?} at the head",
                    args.path
                ))),
                Found::Refused(why) => Err(ToolError::PathRefused {
                    path: args.path,
                    reason: why.to_string(),
                }),
            }
        })
        .await
    }
}

/// `ListFiles{path?}` at the head.
#[derive(Debug)]
struct ListFiles {
    at: Arc<AtCommit>,
}

/// ListFiles' arguments.
#[derive(Deserialize, JsonSchema)]
struct ListFilesArgs {
    /// A directory, relative to the repository's root; omit for the root.
    path: Option<String>,
}

#[async_trait]
impl Tool for ListFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ListFiles",
            description: "List the files under a directory of the repository as the pull request's head holds it.",
            parameters: parameters::<ListFilesArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: ListFilesArgs = parse_args("ListFiles", args)?;
        let at = self.at.clone();
        run_blocking("ListFiles", move || {
            let dir = args.path.unwrap_or_default();
            let dir = dir.trim_matches('/');
            let repo = Repository::open(&at.repo).map_err(failed)?;
            let tree = subtree(&repo, at.commit, dir)?;
            let mut out = Vec::new();
            let mut stopped = false;
            tree.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
                if entry.kind() == Some(ObjectType::Blob) {
                    if out.len() >= MAX_ENTRIES {
                        stopped = true;
                        return git2::TreeWalkResult::Abort;
                    }
                    let name = entry.name().unwrap_or("?");
                    let prefix = if dir.is_empty() {
                        String::new()
                    } else {
                        format!("{dir}/")
                    };
                    out.push(format!("{prefix}{parent}{name}"));
                }
                git2::TreeWalkResult::Ok
            })
            // An abort on purpose is git's "user error"; any other error is one.
            .or_else(|e| if stopped { Ok(()) } else { Err(failed(e)) })?;
            if out.is_empty() {
                return Ok("(no files)".into());
            }
            if stopped {
                out.push(format!(
                    "[stopped at {MAX_ENTRIES} files; list a directory to see more]"
                ));
            }
            Ok(out.join("\n"))
        })
        .await
    }
}

/// The directory `dir` (relative, `/`-separated; empty for the root) of `commit`.
fn subtree<'r>(repo: &'r Repository, commit: Oid, dir: &str) -> Result<Tree<'r>, ToolError> {
    if dir.split('/').any(|c| c == ".." || c == ".git") {
        return Err(ToolError::PathRefused {
            path: dir.to_owned(),
            reason: "not a directory inside the repository".into(),
        });
    }
    let root = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(failed)?;
    if dir.is_empty() {
        return Ok(root);
    }
    let entry = root
        .get_path(std::path::Path::new(dir))
        .map_err(|_| ToolError::NotFound(format!("no directory {dir:?} at the head")))?;
    if entry.kind() != Some(ObjectType::Tree) {
        return Err(ToolError::NotFound(format!("{dir:?} is not a directory")));
    }
    repo.find_tree(entry.id()).map_err(failed)
}

/// `Grep{pattern, glob?, path?}` at the head: the PM's Grep over the head's regular files
/// (never a link's blob), each at most [`MAX_FILE_BYTES`], at most [`MAX_GREP_BYTES`] in all.
#[derive(Debug)]
struct Grep {
    at: Arc<AtCommit>,
}

/// Grep's arguments.
#[derive(Deserialize, JsonSchema)]
struct GrepArgs {
    /// Regular expression (Rust regex syntax), matched line by line.
    pattern: String,
    /// Only search files whose name or repository-relative path matches this glob, e.g. "*.rs" or "src/**/*.rs".
    glob: Option<String>,
    /// A directory to search, relative to the repository root (default: the whole repository).
    path: Option<String>,
}

#[async_trait]
impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Grep",
            description: "Search the files of the repository as the pull request's head holds them for a regex pattern. Returns matching lines with file paths and line numbers. Max 100 results.",
            parameters: parameters::<GrepArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: GrepArgs = parse_args("Grep", args)?;
        let at = self.at.clone();
        run_blocking("Grep", move || {
            let dir = args.path.unwrap_or_default();
            let dir = dir.trim_matches('/');
            let start_rel = if dir.is_empty() { "." } else { dir };
            let mut search =
                GrepFiles::new("Grep", &args.pattern, args.glob.as_deref(), start_rel)?;
            let repo = Repository::open(&at.repo).map_err(failed)?;
            let tree = subtree(&repo, at.commit, dir)?;
            let odb = repo.odb().map_err(failed)?;
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let mut read: u64 = 0;
            let mut stopped = false;
            tree.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
                // Regular files only: a link's blob is its target's name, a submodule has none.
                if !matches!(entry.filemode(), 0o100_644 | 0o100_755) {
                    return git2::TreeWalkResult::Ok;
                }
                let rel = format!("{prefix}{parent}{}", entry.name().unwrap_or("?"));
                if !search.wanted(&rel) {
                    return git2::TreeWalkResult::Ok;
                }
                let size = odb.read_header(entry.id()).map_or(u64::MAX, |(size, _)| {
                    u64::try_from(size).unwrap_or(u64::MAX)
                });
                if size > MAX_FILE_BYTES {
                    return git2::TreeWalkResult::Ok;
                }
                if read + size > MAX_GREP_BYTES {
                    stopped = true;
                    return git2::TreeWalkResult::Abort;
                }
                read += size;
                if let Ok(blob) = repo.find_blob(entry.id()) {
                    search.file(&rel, blob.content());
                }
                git2::TreeWalkResult::Ok
            })
            .or_else(|e| if stopped { Ok(()) } else { Err(failed(e)) })?;
            let mut answer = search.answer();
            if stopped {
                answer.push_str(&format!(
                    "\n[stopped after reading {} MB of files; narrow the path or glob]",
                    MAX_GREP_BYTES / (1024 * 1024)
                ));
            }
            Ok(answer)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_test_support::git::git;

    #[tokio::test]
    async fn the_tools_read_the_head_and_never_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(repo.join("src/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(repo.join("src/b.txt"), "root in b\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", repo.join("link")).unwrap();
        git(repo, &["add", "."]);
        git(repo, &["commit", "-q", "-m", "start"]);
        let head = git(repo, &["rev-parse", "HEAD"]);
        // The working copy changes after the commit: the tools read the commit.
        std::fs::write(repo.join("src/a.rs"), "changed\n").unwrap();
        let tools = tools(AtCommit {
            repo: repo.to_owned(),
            commit: Oid::from_str(head.trim()).unwrap(),
        });
        let call = |name: &str, args: serde_json::Value| {
            let call: codebutler_agent::conversation::ToolCall = serde_json::from_value(
                serde_json::json!({"id": "1", "function": {"name": name, "arguments": args.to_string()}}),
            )
            .unwrap();
            let tools = &tools;
            async move { tools.execute(&call).await }
        };
        let read = |path: &str| call("ReadFile", serde_json::json!({ "path": path }));
        assert_eq!(read("src/a.rs").await, "    1  fn a() {}\n");
        for refused in ["link", "../x", "missing"] {
            assert!(read(refused).await.starts_with("error: "), "{refused}");
        }
        assert_eq!(
            call("ListFiles", serde_json::json!({})).await,
            "link\nsrc/a.rs\nsrc/b.txt"
        );
        assert_eq!(
            call("ListFiles", serde_json::json!({"path": "src"})).await,
            "src/a.rs\nsrc/b.txt"
        );
        // Grep reads the commit, never the link's target (`root` is in /etc/passwd) nor the
        // changed working copy.
        let grep = |args: serde_json::Value| call("Grep", args);
        assert_eq!(
            grep(serde_json::json!({"pattern": "root|fn a|changed"})).await,
            "src/a.rs:1:fn a() {}\nsrc/b.txt:1:root in b"
        );
        assert_eq!(
            grep(serde_json::json!({"pattern": "root|fn", "glob": "*.rs"})).await,
            "src/a.rs:1:fn a() {}"
        );
        assert_eq!(
            grep(serde_json::json!({"pattern": "root", "path": "src/"})).await,
            "src/b.txt:1:root in b"
        );
        assert_eq!(
            grep(serde_json::json!({"pattern": "nowhere"})).await,
            "no matches"
        );
        for refused in [
            serde_json::json!({"pattern": "(", "path": "src"}),
            serde_json::json!({"pattern": "x", "path": "../x"}),
            serde_json::json!({"pattern": "x", "path": "src/a.rs"}),
        ] {
            assert!(
                grep(refused.clone()).await.starts_with("error: "),
                "{refused}"
            );
        }
    }

    /// A head with more files than ListFiles returns lists the first ones and says it
    /// stopped, and Grep stops at its most matches, rather than either failing.
    #[tokio::test]
    async fn many_files_are_cut_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main"]);
        for i in 0..(MAX_ENTRIES + 5) {
            std::fs::write(repo.join(format!("f{i:04}.txt")), "hit\n").unwrap();
        }
        git(repo, &["add", "."]);
        git(repo, &["commit", "-q", "-m", "many"]);
        let head = git(repo, &["rev-parse", "HEAD"]);
        let tools = tools(AtCommit {
            repo: repo.to_owned(),
            commit: Oid::from_str(head.trim()).unwrap(),
        });
        let call = |name: &str, args: serde_json::Value| {
            let call: codebutler_agent::conversation::ToolCall = serde_json::from_value(
                serde_json::json!({"id": "1", "function": {"name": name, "arguments": args.to_string()}}),
            )
            .unwrap();
            let tools = &tools;
            async move { tools.execute(&call).await }
        };
        let listed = call("ListFiles", serde_json::json!({})).await;
        let lines: Vec<&str> = listed.lines().collect();
        assert_eq!(lines.len(), MAX_ENTRIES + 1, "{listed}");
        assert_eq!(lines[0], "f0000.txt");
        assert!(
            lines[MAX_ENTRIES].starts_with("[stopped at 500 files"),
            "{listed}"
        );
        let found = call("Grep", serde_json::json!({"pattern": "hit"})).await;
        let lines: Vec<&str> = found.lines().collect();
        assert_eq!(lines[0], "f0000.txt:1:hit");
        assert_eq!(lines.len(), 101, "{found}");
        assert!(lines[100].starts_with("[stopped at 100 matches"), "{found}");
    }
}
