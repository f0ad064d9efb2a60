//! The PM's tools that need the controller's state: ReadMemory (the PM's memory file),
//! ListThreads (the store), GHStatus (the `gh` CLI, fixed arguments, no shell) and
//! ProposePlan (records the thread's structured plan).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use serde::Deserialize;
use serde_json::json;

use crate::domain::{Plan, ThreadKey};
use crate::store::Store;

/// How long a `gh` call may take.
const GH_TIMEOUT: Duration = Duration::from_secs(30);

/// `ReadMemory{section?}`: the PM's memory file, whole or one section.
#[derive(Debug)]
pub struct ReadMemory {
    path: PathBuf,
}

impl ReadMemory {
    /// Reads the memory file at `path` (`.codebutler/memory/pm.md`).
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

#[derive(Deserialize)]
struct ReadMemoryArgs {
    section: Option<String>,
}

#[async_trait]
impl Tool for ReadMemory {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ReadMemory",
            description: "Read the project's memory: conventions, decisions and context learned in earlier threads.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "section": {"type": "string", "description": "Only return this section (e.g. 'deployment'). Omit for the full file."}
                }
            }),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: ReadMemoryArgs = parse_args("ReadMemory", args)?;
        let text = match tokio::fs::read_to_string(&self.path).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok("no memory yet".to_owned());
            }
            Err(e) => return Err(ToolError::Failed(format!("read memory: {e}"))),
        };
        match args.section {
            None => Ok(if text.trim().is_empty() {
                "no memory yet".to_owned()
            } else {
                text
            }),
            Some(section) => find_section(&text, &section).ok_or_else(|| {
                ToolError::NotFound(format!(
                    "no section matching {section:?}; sections: {}",
                    headings(&text).join(", ")
                ))
            }),
        }
    }
}

fn heading_level(line: &str) -> Option<usize> {
    let level = line.chars().take_while(|c| *c == '#').count();
    (level > 0 && line[level..].starts_with(' ')).then_some(level)
}

fn headings(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| heading_level(l).map(|n| l[n..].trim().to_owned()))
        .collect()
}

/// The first section whose heading contains `name` (case-insensitive), up to the next
/// heading of the same or a higher level.
fn find_section(text: &str, name: &str) -> Option<String> {
    let name = name.to_lowercase();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| {
        heading_level(l).is_some() && l.trim_start_matches('#').to_lowercase().contains(&name)
    })?;
    let level = heading_level(lines[start]).unwrap_or(1);
    let end = lines[start + 1..]
        .iter()
        .position(|l| heading_level(l).is_some_and(|n| n <= level))
        .map_or(lines.len(), |i| start + 1 + i);
    Some(lines[start..end].join("\n"))
}

/// `ListThreads{status?}`: the threads CodeButler knows, with phase and plan.
#[derive(Debug)]
pub struct ListThreads {
    store: Store,
}

impl ListThreads {
    /// Lists threads from `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

#[derive(Deserialize)]
struct ListThreadsArgs {
    status: Option<String>,
}

#[async_trait]
impl Tool for ListThreads {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ListThreads",
            description: "List threads with their current phase and plan (which files they touch). Useful for conflict detection.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["active", "pending_review", "all"], "description": "Filter. Default: 'active'."}
                }
            }),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: ListThreadsArgs = parse_args("ListThreads", args)?;
        let status = args.status.unwrap_or_else(|| "active".into());
        if !["active", "pending_review", "all"].contains(&status.as_str()) {
            return Err(ToolError::InvalidArguments {
                tool: "ListThreads".into(),
                reason: format!("status {status:?} is not one of active, pending_review, all"),
            });
        }
        let threads = self
            .store
            .list_threads(50)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        // Every thread is in the PM phase until approvals and the Coder exist, so nothing is
        // pending review yet.
        if threads.is_empty() || status == "pending_review" {
            return Ok("no threads".to_owned());
        }
        let mut out = String::new();
        for t in threads {
            out.push_str(&format!("Thread {} [phase: {}]", t.key.thread_ts, t.phase));
            let plan = t.plan.as_deref().and_then(|p| match serde_json::from_str::<Plan>(p) {
                Ok(plan) => Some(plan),
                Err(e) => {
                    tracing::warn!(thread = %t.key, "stored plan unreadable, listed as none: {e}");
                    None
                }
            });
            match plan {
                Some(plan) => out.push_str(&format!(
                    "\n  Plan: {}\n  Files: {}\n",
                    plan.summary,
                    plan.files.join(", ")
                )),
                None => out.push_str("\n  No plan yet\n"),
            }
        }
        Ok(out)
    }
}

/// `GHStatus{type, number}`: a pull request or issue through `gh`.
#[derive(Debug)]
pub struct GhStatus {
    gh: PathBuf,
    repo: PathBuf,
}

impl GhStatus {
    /// Runs the `gh` executable `gh` in the repository `repo`.
    pub fn new(gh: PathBuf, repo: PathBuf) -> Self {
        Self { gh, repo }
    }
}

#[derive(Deserialize)]
struct GhStatusArgs {
    #[serde(rename = "type")]
    kind: String,
    number: u64,
}

#[async_trait]
impl Tool for GhStatus {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "GHStatus",
            description: "Check a GitHub pull request or issue with the gh CLI. Returns title, state, checks and recent comments.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["pr", "issue"], "description": "'pr' or 'issue'"},
                    "number": {"type": "integer", "description": "PR or issue number"}
                },
                "required": ["type", "number"]
            }),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: GhStatusArgs = parse_args("GHStatus", args)?;
        let (noun, fields) = match args.kind.as_str() {
            "pr" => (
                "pr",
                "number,title,state,url,author,statusCheckRollup,comments",
            ),
            "issue" => ("issue", "number,title,state,url,author,comments"),
            other => {
                return Err(ToolError::InvalidArguments {
                    tool: "GHStatus".into(),
                    reason: format!("type {other:?} must be 'pr' or 'issue'"),
                });
            }
        };
        let output = tokio::process::Command::new(&self.gh)
            .args([noun, "view", &args.number.to_string(), "--json", fields])
            .current_dir(&self.repo)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(GH_TIMEOUT, output)
            .await
            .map_err(|_| ToolError::Failed(format!("gh did not answer within {GH_TIMEOUT:?}")))?
            .map_err(|e| ToolError::Failed(format!("run {}: {e}", self.gh.display())))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(ToolError::Failed(format!(
                "gh {noun} view {} failed: {}",
                args.number,
                stderr.trim()
            )));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// `ProposePlan{summary, steps[], files[]}`: records the thread's plan.
#[derive(Debug)]
pub struct ProposePlan {
    store: Store,
    thread: ThreadKey,
    proposed: Arc<Mutex<Option<Plan>>>,
}

impl ProposePlan {
    /// Records plans for `thread`, also leaving the latest in `proposed` for the caller.
    pub fn new(store: Store, thread: ThreadKey, proposed: Arc<Mutex<Option<Plan>>>) -> Self {
        Self {
            store,
            thread,
            proposed,
        }
    }
}

#[async_trait]
impl Tool for ProposePlan {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ProposePlan",
            description: "Record the structured plan for this thread's code task, once you have explored enough to be specific. It is shown to the people in the thread for approval.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "One line: what will be done."},
                    "steps": {"type": "array", "items": {"type": "string"}, "description": "What the Coder will do, in order, citing files and lines."},
                    "files": {"type": "array", "items": {"type": "string"}, "description": "Files that will be created or changed."}
                },
                "required": ["summary", "steps", "files"]
            }),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let plan: Plan = parse_args("ProposePlan", args)?;
        if plan.summary.trim().is_empty() || plan.steps.iter().all(|s| s.trim().is_empty()) {
            return Err(ToolError::InvalidArguments {
                tool: "ProposePlan".into(),
                reason: "a plan needs a summary and at least one step".into(),
            });
        }
        let json = plan
            .to_json()
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        self.store
            .set_plan(&self.thread, &json)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        if let Ok(mut slot) = self.proposed.lock() {
            *slot = Some(plan);
        }
        Ok("Plan recorded and will be shown in the thread. In your answer, explain it briefly and ask the person to approve it or say what to change.".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMORY: &str = "# Project Knowledge\n- uses make\n## Deployment\nmake ship\n### Details\nvia ssh\n## Testing\ncargo test\n";

    #[test]
    fn sections_are_found_by_heading() {
        assert_eq!(
            find_section(MEMORY, "deploy").unwrap(),
            "## Deployment\nmake ship\n### Details\nvia ssh"
        );
        assert_eq!(
            find_section(MEMORY, "TESTING").unwrap(),
            "## Testing\ncargo test"
        );
        assert!(find_section(MEMORY, "nothing").is_none());
    }

    #[tokio::test]
    async fn read_memory_without_a_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let tool = ReadMemory::new(dir.path().join("pm.md"));
        assert_eq!(tool.call(json!({})).await.unwrap(), "no memory yet");
        std::fs::write(dir.path().join("pm.md"), MEMORY).unwrap();
        let err = tool
            .call(json!({"section": "x"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sections: Project Knowledge, Deployment, Details, Testing"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn gh_status_refuses_bad_type_and_reports_gh_failure() {
        let dir = tempfile::tempdir().unwrap();
        let tool = GhStatus::new(PathBuf::from("/nonexistent/gh"), dir.path().to_owned());
        let err = tool
            .call(json!({"type": "commit", "number": 1}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("must be 'pr' or 'issue'"));
        let err = tool
            .call(json!({"type": "pr", "number": -1}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { .. }));
        let err = tool
            .call(json!({"type": "pr", "number": 1}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("run /nonexistent/gh"), "{err}");
    }

    #[test]
    fn plan_renders_as_markdown() {
        let plan = Plan {
            summary: "Fix expiry".into(),
            steps: vec![
                "Read config in `auth/session.rs:42`".into(),
                "Add a test".into(),
            ],
            files: vec!["auth/session.rs".into()],
        };
        assert_eq!(
            plan.to_markdown(),
            "📋 **Plan:** Fix expiry\n\n1. Read config in `auth/session.rs:42`\n2. Add a test\n\n**Files:** `auth/session.rs`\n"
        );
        let proposal = plan.proposal_markdown("💰 cost line");
        assert!(proposal.starts_with(&plan.to_markdown()), "{proposal}");
        assert!(
            proposal.ends_with("\n💰 cost line\n\nApprove with the button below, or type *yes* (or *ship it*, *lgtm*…) to start the Coder."),
            "{proposal}"
        );
    }
}
