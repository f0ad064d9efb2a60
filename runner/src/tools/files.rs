//! Path handling and atomic writes shared by the Coder's file tools.
//!
//! Coding models usually send absolute paths, so [`worktree_relative`] (the agent core's
//! worktree path style) accepts an absolute path when it lies inside the worktree root and
//! turns it into a root-relative one; after that every path goes through [`RepoRoot`]
//! exactly as for the PM's tools (`..` escapes, symlinks leading out, `.git` and
//! `.codebutler` refused). [`resolve_for_write`] extends
//! that to files that do not exist yet, creating missing parent directories inside the
//! root, and [`atomic_write`] replaces a file through a temporary file and a rename.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use codebutler_agent::tool::ToolError;
use codebutler_agent::tools::path::{RepoRoot, worktree_relative};

/// A file the Coder may write: its canonical location inside the root, how to show it, and
/// the metadata of the file it replaces (`None` for a new file).
#[derive(Debug)]
pub(crate) struct WriteTarget {
    pub(crate) path: PathBuf,
    pub(crate) rel: String,
    pub(crate) existing: Option<Metadata>,
}

/// Resolves `file_path` (relative, or absolute inside the root) to a file that may be
/// written. Missing parent directories are created when `create_dirs` is set (and refused
/// otherwise); a symlink is followed only to a file inside the root.
pub(crate) fn resolve_for_write(
    root: &RepoRoot,
    file_path: &str,
    create_dirs: bool,
) -> Result<WriteTarget, ToolError> {
    let refuse = |reason: &str| ToolError::PathRefused {
        path: file_path.to_owned(),
        reason: reason.to_owned(),
    };
    let rel = root.normalize(&worktree_relative(root, file_path)?)?;
    if rel.is_empty() {
        return Err(refuse("this is the worktree root, not a file"));
    }
    let (parent_rel, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
    let parent = ensure_dir(root, parent_rel, create_dirs)?;
    let path = parent.join(name);
    let io_err = |e: std::io::Error| ToolError::Failed(format!("cannot access {rel}: {e}"));
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(WriteTarget {
                rel: root.relative(&path),
                path,
                existing: None,
            });
        }
        Err(e) => return Err(io_err(e)),
    };
    let (path, meta) = if meta.file_type().is_symlink() {
        let target = match root.resolve(&rel) {
            Ok(target) => target,
            Err(ToolError::NotFound(_)) => {
                return Err(refuse(
                    "this is a symlink to a missing file; write to a path that is not a symlink",
                ));
            }
            Err(e) => return Err(e),
        };
        let meta = std::fs::metadata(&target).map_err(io_err)?;
        (target, meta)
    } else {
        (path, meta)
    };
    let rel = root.relative(&path);
    if meta.is_dir() {
        return Err(ToolError::Failed(format!("{rel} is a directory")));
    }
    if !meta.is_file() {
        return Err(ToolError::Failed(format!("{rel} is not a regular file")));
    }
    Ok(WriteTarget {
        path,
        rel,
        existing: Some(meta),
    })
}

/// The canonical directory `parent_rel` (normalized, relative to the root), creating the
/// missing ones when `create` is set. Existing components that are symlinks must stay
/// inside the root.
fn ensure_dir(root: &RepoRoot, parent_rel: &str, create: bool) -> Result<PathBuf, ToolError> {
    let mut current = root.root().to_path_buf();
    if parent_rel.is_empty() {
        return Ok(current);
    }
    let mut so_far = String::new();
    for part in parent_rel.split('/') {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        let candidate = current.join(part);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.is_dir() => current = candidate,
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = root.resolve(&so_far)?;
                if !target.is_dir() {
                    return Err(ToolError::Failed(format!("{so_far} is not a directory")));
                }
                current = target;
            }
            Ok(_) => {
                return Err(ToolError::Failed(format!(
                    "{so_far} is a file, not a directory"
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    return Err(ToolError::NotFound(format!("no such directory: {so_far}")));
                }
                match std::fs::create_dir(&candidate) {
                    Ok(()) => current = candidate,
                    // Created meanwhile: check it like an existing component.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        current = root.resolve(&so_far)?;
                    }
                    Err(e) => {
                        return Err(ToolError::Failed(format!(
                            "cannot create directory {so_far}: {e}"
                        )));
                    }
                }
            }
            Err(e) => {
                return Err(ToolError::Failed(format!("cannot access {so_far}: {e}")));
            }
        }
    }
    Ok(current)
}

/// Distinguishes the temporary files of concurrent writes within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces (or creates) `path` with `content` atomically: the bytes go to a temporary
/// file in the same directory, which is flushed to disk, given the permissions of the file
/// it replaces (`keep`), and renamed over `path`. On failure the temporary file is removed.
pub(crate) fn atomic_write(
    path: &Path,
    content: &[u8],
    keep: Option<&Metadata>,
) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no parent")
    })?;
    let (temp_path, mut file) = create_temp(dir)?;
    let written = (|| {
        file.write_all(content)?;
        if let Some(meta) = keep {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp_path, path)
    })();
    if let Err(e) = written {
        if let Err(rm) = std::fs::remove_file(&temp_path) {
            tracing::warn!(path = %temp_path.display(), error = %rm, "cannot remove a temporary file");
        }
        return Err(e);
    }
    // Make the rename itself durable; not every file system supports this.
    if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::debug!(dir = %dir.display(), error = %e, "cannot sync a directory");
    }
    Ok(())
}

/// A new, empty temporary file in `dir` that no one else has opened.
fn create_temp(dir: &Path) -> std::io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut attempts = 0;
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let candidate = dir.join(format!(".codebutler-write.{pid}.{n}.tmp"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(file) => return Ok((candidate, file)),
            // A leftover of an earlier process with the same pid: try the next name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 100 => {
                attempts += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn root() -> (tempfile::TempDir, Arc<RepoRoot>) {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(RepoRoot::new(dir.path()).unwrap());
        (dir, root)
    }

    #[test]
    fn missing_directories_are_created_only_when_asked() {
        let (_dir, root) = root();
        let err = resolve_for_write(&root, "a/b/c.txt", false).unwrap_err();
        assert_eq!(err.to_string(), "no such directory: a");
        assert!(!root.root().join("a").exists());
        let target = resolve_for_write(&root, "a/b/c.txt", true).unwrap();
        assert_eq!(target.rel, "a/b/c.txt");
        assert!(target.existing.is_none());
        assert!(root.root().join("a/b").is_dir());
    }

    #[test]
    fn a_file_in_the_way_of_a_directory_is_an_error() {
        let (_dir, root) = root();
        std::fs::write(root.root().join("f"), "x").unwrap();
        let err = resolve_for_write(&root, "f/g.txt", true).unwrap_err();
        assert_eq!(err.to_string(), "f is a file, not a directory");
    }

    #[test]
    fn atomic_write_leaves_only_the_file() {
        let (_dir, root) = root();
        let path = root.root().join("f.txt");
        atomic_write(&path, b"one", None).unwrap();
        atomic_write(&path, b"two", None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(root.root())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f.txt"]);
    }

    #[test]
    fn a_failed_write_removes_its_temporary_file() {
        let (_dir, root) = root();
        // Renaming a file over a non-empty directory fails after the data was written.
        std::fs::create_dir_all(root.root().join("d/inner")).unwrap();
        let err = atomic_write(&root.root().join("d"), b"data", None).unwrap_err();
        assert!(err.raw_os_error().is_some(), "{err}");
        let mut names: Vec<_> = std::fs::read_dir(root.root())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["d"]);
    }
}
