//! The reviewer's read-only tools: the repository as a pull request's head commit holds it,
//! read from git objects in the main repository (never a worktree's files, never through a
//! link: a symlink's blob is refused, as [`repo_files::committed`] refuses it). ReadFile
//! and ListFiles take the names and arguments of the PM's tools of the same names, so the
//! model meets the tools it knows, pointed at the head instead of the default branch.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{
    DEFAULT_MAX_TOOL_OUTPUT, Tool, ToolError, ToolRegistry, parse_args, run_blocking,
};
use git2::{ObjectType, Oid, Repository};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::repo_files::{self, Found};

/// Largest file ReadFile returns.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most entries ListFiles returns.
const MAX_ENTRIES: usize = 500;

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
            if dir.split('/').any(|c| c == ".." || c == ".git") {
                return Err(ToolError::PathRefused {
                    path: dir.to_owned(),
                    reason: "not a directory inside the repository".into(),
                });
            }
            let repo = Repository::open(&at.repo).map_err(failed)?;
            let root = repo
                .find_commit(at.commit)
                .and_then(|c| c.tree())
                .map_err(failed)?;
            let tree = if dir.is_empty() {
                root
            } else {
                let entry = root.get_path(std::path::Path::new(dir)).map_err(|_| {
                    ToolError::NotFound(format!("no directory {dir:?} at the head"))
                })?;
                if entry.kind() != Some(ObjectType::Tree) {
                    return Err(ToolError::NotFound(format!("{dir:?} is not a directory")));
                }
                repo.find_tree(entry.id()).map_err(failed)?
            };
            let mut out = Vec::new();
            tree.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
                if out.len() >= MAX_ENTRIES {
                    return git2::TreeWalkResult::Abort;
                }
                if entry.kind() == Some(ObjectType::Blob) {
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
            .map_err(failed)?;
            if out.is_empty() {
                return Ok("(no files)".into());
            }
            Ok(out.join("\n"))
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
            "link\nsrc/a.rs"
        );
        assert_eq!(
            call("ListFiles", serde_json::json!({"path": "src"})).await,
            "src/a.rs"
        );
    }
}
