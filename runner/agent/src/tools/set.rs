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

    /// What the PM's model reads of its repository tools (names, descriptions, parameter
    /// schemas), byte for byte as the chat protocol sends it: a change here is a reviewed
    /// change of `repository_tools.json` (`CODEBUTLER_WRITE_TOOL_SPECS=1` rewrites it).
    #[test]
    fn tool_specs_are_what_the_model_reads() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(RepoRoot::new(dir.path()).unwrap());
        let specs: Vec<serde_json::Value> = repository_tools(root)
            .iter()
            .map(|t| t.spec().to_openai())
            .collect();
        let got = serde_json::to_string_pretty(&specs).unwrap();
        if std::env::var_os("CODEBUTLER_WRITE_TOOL_SPECS").is_some() {
            std::fs::write(
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/src/tools/repository_tools.json"
                ),
                format!("{got}\n"),
            )
            .unwrap();
        }
        assert_eq!(got, include_str!("repository_tools.json").trim_end());
    }
}
