//! Write: creates or replaces a worktree file atomically.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::{atomic_write, resolve_for_write};
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use codebutler_agent::tools::path::RepoRoot;

const NAME: &str = "Write";

/// Creates or overwrites a file of the worktree.
#[derive(Debug, Clone)]
pub struct WriteTool {
    root: Arc<RepoRoot>,
}

/// Write's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The file to write: an absolute path inside the worktree, or a path relative to the worktree root.
    file_path: String,
    /// The complete new content of the file.
    content: String,
}

impl WriteTool {
    /// A Write confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

fn write(root: &RepoRoot, args: &Args) -> Result<String, ToolError> {
    let target = resolve_for_write(root, &args.file_path, true)?;
    atomic_write(
        &target.path,
        args.content.as_bytes(),
        target.existing.as_ref(),
    )
    .map_err(|e| ToolError::Failed(format!("cannot write {}: {e}", target.rel)))?;
    Ok(format!(
        "wrote {} bytes to {}",
        args.content.len(),
        target.rel
    ))
}

#[async_trait]
impl Tool for WriteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: "Create a file or replace its whole content (missing parent directories are created; an existing file keeps its permissions). Prefer Edit for changing part of an existing file.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(NAME, args)?;
        let root = Arc::clone(&self.root);
        codebutler_agent::tool::run_blocking(NAME, move || write(&root, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{entries, worktree};
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        WriteTool::new(Arc::clone(root)).call(args).await
    }

    #[tokio::test]
    async fn creates_a_file_and_its_directories() {
        let (dir, root) = worktree(&[]);
        let out = run(
            &root,
            json!({"file_path": "a/b/c.txt", "content": "héllo\n"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "wrote 7 bytes to a/b/c.txt");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "héllo\n"
        );
        assert_eq!(entries(&dir.path().join("a/b")), ["c.txt"]);
    }

    #[tokio::test]
    async fn overwrite_is_atomic_and_keeps_permissions() {
        let (dir, root) = worktree(&[("run.sh", "#!/bin/sh\necho old\n")]);
        let path = dir.path().join("run.sh");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        let before = std::fs::metadata(&path).unwrap();
        let out = run(
            &root,
            json!({"file_path": "run.sh", "content": "#!/bin/sh\necho new\n"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "wrote 19 bytes to run.sh");
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(after.permissions().mode() & 0o7777, 0o751);
        // Replaced by a rename: a new inode, and no temporary file left behind.
        assert_ne!(
            std::os::unix::fs::MetadataExt::ino(&before),
            std::os::unix::fs::MetadataExt::ino(&after)
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\necho new\n"
        );
        assert_eq!(entries(dir.path()), [".git", "run.sh"]);
    }

    #[tokio::test]
    async fn absolute_paths_inside_are_accepted() {
        let (dir, root) = worktree(&[]);
        let abs = root.root().join("src/new.rs");
        let out = run(
            &root,
            json!({"file_path": abs.to_string_lossy(), "content": "x"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "wrote 1 bytes to src/new.rs");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/new.rs")).unwrap(),
            "x"
        );
    }

    #[tokio::test]
    async fn outside_paths_and_git_are_refused() {
        let (dir, root) = worktree(&[("a.txt", "a")]);
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("new.txt"), dir.path().join("dangling"))
            .unwrap();
        std::os::unix::fs::symlink(".git", dir.path().join("g")).unwrap();
        std::os::unix::fs::symlink(".git/config", dir.path().join("cfg")).unwrap();
        let git_config = std::fs::read(dir.path().join(".git/config")).unwrap();
        let outside_abs = outside.path().join("x.txt");
        let sneaky = format!("{}/../escape.txt", root.root().display());
        for p in [
            "../escape.txt",
            "a/../../escape.txt",
            outside_abs.to_str().unwrap(),
            sneaky.as_str(),
            ".git/config",
            ".git/hooks/pre-commit",
            ".git",
            "sub/.GIT/x",
            ".codebutler/config.json",
            "out/x.txt",
            "dangling",
            "g/config",
            "g/hooks/post-checkout",
            "cfg",
            "",
        ] {
            let err = run(&root, json!({"file_path": p, "content": "pwned"}))
                .await
                .unwrap_err();
            assert!(matches!(err, ToolError::PathRefused { .. }), "{p}: {err}");
        }
        assert!(entries(outside.path()).is_empty());
        assert!(!dir.path().join("sub").exists());
        assert!(!dir.path().join(".codebutler").exists());
        assert!(!dir.path().join(".git/hooks/pre-commit").exists());
        assert!(!dir.path().join(".git/hooks/post-checkout").exists());
        assert_eq!(
            std::fs::read(dir.path().join(".git/config")).unwrap(),
            git_config
        );
        assert!(!root.root().parent().unwrap().join("escape.txt").exists());
    }

    #[tokio::test]
    async fn a_symlink_inside_is_written_through() {
        let (dir, root) = worktree(&[("real.txt", "old")]);
        std::os::unix::fs::symlink("real.txt", dir.path().join("link.txt")).unwrap();
        let out = run(&root, json!({"file_path": "link.txt", "content": "new"}))
            .await
            .unwrap();
        assert_eq!(out, "wrote 3 bytes to real.txt");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("real.txt")).unwrap(),
            "new"
        );
        assert!(
            std::fs::symlink_metadata(dir.path().join("link.txt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[tokio::test]
    async fn a_directory_is_not_overwritten() {
        let (dir, root) = worktree(&[("d/x", "x")]);
        let err = run(&root, json!({"file_path": "d", "content": "x"}))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "d is a directory");
        assert!(dir.path().join("d/x").is_file());
    }
}
