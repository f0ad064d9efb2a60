//! The PM's repository tool set, in the order it is offered to the model.

use std::sync::Arc;

use super::git::{GitDiff, GitLog};
use super::grep::Grep;
use super::list_files::ListFiles;
use super::path::RepoRoot;
use super::read_file::ReadFile;
use crate::tool::Tool;

/// The read-only repository tools confined to `root`: ReadFile, Grep, ListFiles, GitLog,
/// GitDiff, in that order.
pub fn repository_tools(root: Arc<RepoRoot>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile::new(Arc::clone(&root))),
        Arc::new(Grep::new(Arc::clone(&root))),
        Arc::new(ListFiles::new(Arc::clone(&root))),
        Arc::new(GitLog::new(Arc::clone(&root))),
        Arc::new(GitDiff::new(root)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_come_in_order_and_are_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(RepoRoot::new(dir.path()).unwrap());
        let tools = repository_tools(root);
        let names: Vec<&str> = tools.iter().map(|t| t.spec().name).collect();
        assert_eq!(
            names,
            ["ReadFile", "Grep", "ListFiles", "GitLog", "GitDiff"]
        );
        for tool in &tools {
            assert!(tool.read_only(), "{}", tool.spec().name);
            let spec = tool.spec();
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(spec.parameters["properties"].is_object(), "{}", spec.name);
        }
    }
}
