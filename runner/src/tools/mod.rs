//! The Coder's core tools: Read, Write, Edit, MultiEdit, Bash, Grep and Glob, confined to
//! the worktree root. They run inside the runner's kernel sandbox, which is the security boundary; the
//! path checks of [`RepoRoot`] still apply (absolute paths are accepted when they lie
//! inside the root, since coding models use them), and `.git` is never written.
//!
//! GitCommit and OpenPR ([`forge_tools`]) do no git work in the sandbox: they ask the
//! controller through a [`Forge`], since the runner's git metadata is read-only.
//!
//! WebFetch, ReadMemory and AskUser reach what the sandbox cannot (the web, the project's
//! memory, the people in the thread) through the controller: each talks to a small trait
//! ([`WebSource`], [`MemorySource`]) or the run's event stream ([`AskUserTool`]), so it is
//! tested here without gRPC.
//!
//! The MCP tools ([`mcp`]) are the configured MCP servers' own, offered as
//! `mcp__<server>__<tool>` after the built-in ones: stdio servers run as children of the
//! runner in its sandbox, remote ones are called through the controller.
//!
//! Read, Grep and Glob are the agent core's ReadFile, Grep and ListFiles in their worktree
//! path style (`codebutler_agent::tools::path::PathStyle`): one implementation each.
//!
//! Every tool's parameters schema is derived from the type its arguments are parsed into
//! (`codebutler_agent::schema::parameters`), so what the model is offered cannot drift from
//! what a call accepts; `coder_tools.json` holds what the model reads of all of them.

mod ask_user;
mod bash;
mod edit;
mod files;
mod git;
pub mod mcp;
mod notify;
mod read_memory;
mod web_fetch;
mod write;

use std::sync::Arc;

pub use ask_user::{AskUserTool, Questions};
pub use bash::{BashConfig, BashTool};
pub use edit::{EditTool, MultiEditTool};
pub use git::{
    CommitResult, Forge, ForgeFailure, GitCommitTool, LeftOut, LeftOutReason, OpenPrTool,
};
pub use notify::NotifyTool;
pub use read_memory::{MemoryFailure, MemorySource, ReadMemoryTool};
#[doc(hidden)]
pub use web_fetch::html;
pub use web_fetch::{FetchFailure, FetchedPage, WebFetchTool, WebSource};
pub use write::WriteTool;

use codebutler_agent::tool::Tool;
use codebutler_agent::tools::grep::Grep;
use codebutler_agent::tools::list_files::ListFiles;
use codebutler_agent::tools::path::RepoRoot;
use codebutler_agent::tools::read_file::ReadFile;

/// The Coder's core tools confined to `root`, in the order they are offered: Read, Write,
/// Edit, Bash, Grep, Glob.
pub fn coder_tools(root: Arc<RepoRoot>, bash: BashConfig) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile::worktree(Arc::clone(&root))),
        Arc::new(WriteTool::new(Arc::clone(&root))),
        Arc::new(EditTool::new(Arc::clone(&root))),
        Arc::new(MultiEditTool::new(Arc::clone(&root))),
        Arc::new(BashTool::new(Arc::clone(&root), bash)),
        Arc::new(Grep::worktree(Arc::clone(&root))),
        Arc::new(ListFiles::worktree(root)),
    ]
}

/// The tools that go through the controller's forge, in order: GitCommit, OpenPR. Offered
/// after [`coder_tools`].
pub fn forge_tools(forge: Arc<dyn Forge>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(GitCommitTool::new(Arc::clone(&forge))),
        Arc::new(OpenPrTool::new(forge)),
    ]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use codebutler_agent::tools::path::test_support::repo_with;

    /// A git worktree holding `files` in one commit.
    pub(crate) fn worktree(files: &[(&str, &str)]) -> (tempfile::TempDir, Arc<RepoRoot>) {
        repo_with(files)
    }

    /// The sorted names in `dir`.
    pub(crate) fn entries(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn tools_come_in_order_with_their_parameters() {
        let (_dir, root) = worktree(&[]);
        let tools = coder_tools(root, BashConfig::default());
        let names: Vec<&str> = tools.iter().map(|t| t.spec().name).collect();
        assert_eq!(
            names,
            ["Read", "Write", "Edit", "MultiEdit", "Bash", "Grep", "Glob"]
        );
        let read_only: Vec<bool> = tools.iter().map(|t| t.read_only()).collect();
        assert_eq!(read_only, [true, false, false, false, false, true, true]);
        let required: Vec<serde_json::Value> = tools
            .iter()
            .map(|t| t.spec().parameters["required"].clone())
            .collect();
        assert_eq!(
            required,
            [
                serde_json::json!(["file_path"]),
                serde_json::json!(["file_path", "content"]),
                serde_json::json!(["file_path", "old_string", "new_string"]),
                serde_json::json!(["file_path", "edits"]),
                serde_json::json!(["command"]),
                serde_json::json!(["pattern"]),
                serde_json::json!(["pattern"]),
            ]
        );
        for tool in &tools {
            let spec = tool.spec();
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(spec.description.len() < 600, "{}", spec.name);
        }
    }

    /// Stands in for the controller behind GitCommit, OpenPR, WebFetch and ReadMemory:
    /// the snapshot below reads only their specs, so every call is refused.
    struct Unreachable;

    #[async_trait::async_trait]
    impl Forge for Unreachable {
        async fn commit(
            &self,
            _message: &str,
            _include: &[String],
        ) -> Result<CommitResult, ForgeFailure> {
            Err(ForgeFailure::Refused(
                "no controller in this test".to_owned(),
            ))
        }
        async fn open_pr(&self, _title: &str, _body: &str) -> Result<String, ForgeFailure> {
            Err(ForgeFailure::Refused(
                "no controller in this test".to_owned(),
            ))
        }
    }

    #[async_trait::async_trait]
    impl WebSource for Unreachable {
        async fn fetch(&self, _url: &str, _max_bytes: u64) -> Result<FetchedPage, FetchFailure> {
            Err(FetchFailure::Unavailable(
                "no controller in this test".to_owned(),
            ))
        }
    }

    #[async_trait::async_trait]
    impl MemorySource for Unreachable {
        async fn read_memory(&self, _role: &str) -> Result<(String, String), MemoryFailure> {
            Err(MemoryFailure::Unavailable(
                "no controller in this test".to_owned(),
            ))
        }
    }

    /// What the Coder's model reads of all its tools (names, descriptions, parameter
    /// schemas), in the order the runner offers them, byte for byte as the chat protocol
    /// sends it: a change here is a reviewed change of `coder_tools.json`
    /// (`CODEBUTLER_WRITE_TOOL_SPECS=1` rewrites it).
    #[test]
    fn tool_specs_are_what_the_model_reads() {
        let (_dir, root) = worktree(&[]);
        let controller = Arc::new(Unreachable);
        let (events, _) = tokio::sync::mpsc::channel(1);
        let mut tools = coder_tools(root, BashConfig::default());
        tools.extend(forge_tools(controller.clone()));
        tools.push(Arc::new(NotifyTool::new(events.clone())));
        tools.push(Arc::new(WebFetchTool::new(controller.clone())));
        tools.push(Arc::new(ReadMemoryTool::new(controller)));
        tools.push(Arc::new(AskUserTool::new(Questions::new(), events)));
        let specs: Vec<serde_json::Value> = tools.iter().map(|t| t.spec().to_openai()).collect();
        let got = serde_json::to_string_pretty(&specs).unwrap();
        if std::env::var_os("CODEBUTLER_WRITE_TOOL_SPECS").is_some() {
            std::fs::write(
                concat!(env!("CARGO_MANIFEST_DIR"), "/src/tools/coder_tools.json"),
                format!("{got}\n"),
            )
            .unwrap();
        }
        assert_eq!(got, include_str!("coder_tools.json").trim_end());
    }
}
