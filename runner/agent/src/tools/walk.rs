//! The file walk shared by Grep and ListFiles: ripgrep's rules (`.gitignore`, `.ignore`,
//! hidden files skipped), never entering `.git` or `.codebutler`, regular files only (a
//! symlink is not followed, so nothing outside the repository is reached).

use std::path::{Path, PathBuf};

use super::path::{RepoRoot, private_dir_reason};

/// The regular files under `start` (a directory or a single file inside `root`), sorted
/// by their path relative to the root. Unreadable entries are skipped.
pub(crate) fn walk_files(root: &RepoRoot, start: &Path) -> Vec<(String, PathBuf)> {
    let walker = ignore::WalkBuilder::new(start)
        .follow_links(false)
        .filter_entry(|entry| {
            entry
                .file_name()
                .to_str()
                .is_none_or(|name| private_dir_reason(name).is_none())
        })
        .build();
    let mut files: Vec<(String, PathBuf)> = walker
        .filter_map(|entry| match entry {
            Ok(entry) => Some(entry),
            Err(e) => {
                tracing::debug!(error = %e, "skipping an unreadable entry");
                None
            }
        })
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .filter(|entry| entry.path().starts_with(root.root()))
        .map(|entry| {
            let path = entry.into_path();
            (root.relative(&path), path)
        })
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::super::path::test_support::repo_with;
    use super::*;

    #[test]
    fn walk_respects_gitignore_hidden_and_private_dirs() {
        let (dir, root) = repo_with(&[
            (".gitignore", "target/\n*.log\n"),
            ("src/main.rs", "fn main() {}"),
            ("README.md", "hi"),
            ("b/z.txt", "z"),
        ]);
        super::super::path::test_support::write_files(
            dir.path(),
            &[
                ("target/debug/out", "x"),
                ("run.log", "x"),
                (".codebutler/config.json", "{}"),
                (".hidden/x", "x"),
            ],
        );
        let rels: Vec<String> = walk_files(&root, root.root())
            .into_iter()
            .map(|(rel, _)| rel)
            .collect();
        assert_eq!(rels, vec!["README.md", "b/z.txt", "src/main.rs"]);
        let sub: Vec<String> = walk_files(&root, &root.root().join("src"))
            .into_iter()
            .map(|(rel, _)| rel)
            .collect();
        assert_eq!(sub, vec!["src/main.rs"]);
    }
}
