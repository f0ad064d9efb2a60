//! ReadMemory: the project's approved memory of a role (`pm`: project knowledge, workflows,
//! decisions; `artist`: visual style). The runner cannot see `.codebutler/`, so the text
//! comes from the controller (its hub's `ReadMemory`) through a [`MemorySource`].

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};

/// Why a memory could not be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MemoryFailure {
    /// No such role has memory.
    #[error("{0}")]
    UnknownRole(String),
    /// The controller could not read it.
    #[error("{0}")]
    Unavailable(String),
}

/// Where memories come from: the controller's hub in the runner, a fake in tests.
#[async_trait]
pub trait MemorySource: Send + Sync {
    /// The memory of `role` (empty for `pm`): the role read and its Markdown (empty when
    /// the role has no memory yet).
    async fn read_memory(&self, role: &str) -> Result<(String, String), MemoryFailure>;
}

/// Reads role memories through a [`MemorySource`].
#[derive(Clone)]
pub struct ReadMemoryTool {
    source: Arc<dyn MemorySource>,
}

impl std::fmt::Debug for ReadMemoryTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadMemoryTool").finish_non_exhaustive()
    }
}

impl ReadMemoryTool {
    /// A ReadMemory whose text comes from `source`.
    pub fn new(source: Arc<dyn MemorySource>) -> Self {
        Self { source }
    }
}

/// ReadMemory's arguments. The model is offered the roles that have memory; the role is
/// parsed as any short name (trimmed, any case) because the controller is the one that
/// knows which roles have memory, and its refusal names them.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Whose memory; omit for pm.
    #[schemars(extend("enum" = ["pm", "artist"]))]
    role: Option<String>,
}

const TOOL: &str = "ReadMemory";

#[async_trait]
impl Tool for ReadMemoryTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TOOL,
            description: "Read the project's approved memory: role \"pm\" (default) holds conventions, decisions and workflows learned in earlier threads; \"artist\" holds the visual style.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(TOOL, args)?;
        let role = args.role.unwrap_or_default().trim().to_ascii_lowercase();
        if role.len() > 32 || !role.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(ToolError::InvalidArguments {
                tool: TOOL.into(),
                reason: "role must be \"pm\" or \"artist\"".into(),
            });
        }
        let (role, text) =
            self.source
                .read_memory(&role)
                .await
                .map_err(|failure| match failure {
                    MemoryFailure::UnknownRole(why) => ToolError::InvalidArguments {
                        tool: TOOL.into(),
                        reason: why,
                    },
                    MemoryFailure::Unavailable(why) => {
                        ToolError::Failed(format!("could not read the memory: {why}"))
                    }
                })?;
        if text.trim().is_empty() {
            return Ok(format!("the {role} memory is empty: nothing learned yet"));
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    /// Serves `pm` and `artist` from fixed texts, like the controller, and records roles.
    struct Fake {
        pm: String,
        asked: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl MemorySource for Fake {
        async fn read_memory(&self, role: &str) -> Result<(String, String), MemoryFailure> {
            self.asked.lock().unwrap().push(role.to_owned());
            match role {
                "" | "pm" => Ok(("pm".into(), self.pm.clone())),
                "artist" => Ok(("artist".into(), String::new())),
                "broken" => Err(MemoryFailure::Unavailable("permission denied".into())),
                other => Err(MemoryFailure::UnknownRole(format!(
                    "no memory for role {other:?}: roles with memory are pm, artist"
                ))),
            }
        }
    }

    fn tool() -> (ReadMemoryTool, Arc<Fake>) {
        let fake = Arc::new(Fake {
            pm: "# Decisions\n- Always JWT.\n".into(),
            asked: Mutex::new(vec![]),
        });
        (ReadMemoryTool::new(fake.clone()), fake)
    }

    #[tokio::test]
    async fn reads_the_pm_memory_by_default_and_says_when_one_is_empty() {
        let (t, fake) = tool();
        assert_eq!(
            t.call(json!({})).await.unwrap(),
            "# Decisions\n- Always JWT.\n"
        );
        assert_eq!(
            t.call(json!({"role": " PM "})).await.unwrap(),
            "# Decisions\n- Always JWT.\n"
        );
        assert_eq!(
            t.call(json!({"role": "artist"})).await.unwrap(),
            "the artist memory is empty: nothing learned yet"
        );
        assert_eq!(*fake.asked.lock().unwrap(), ["", "pm", "artist"]);
    }

    #[tokio::test]
    async fn bad_roles_and_failures_are_errors() {
        let (t, fake) = tool();
        let err = t
            .call(json!({"role": "coder"}))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid arguments for ReadMemory: no memory for role \"coder\": roles with memory are pm, artist"
        );
        let err = t
            .call(json!({"role": "../secrets"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("role must be"), "{err}");
        let err = t.call(json!({"role": 3})).await.unwrap_err().to_string();
        assert!(err.contains("invalid type"), "{err}");
        let err = t
            .call(json!({"role": "broken"}))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(err, "could not read the memory: permission denied");
        assert!(
            !fake
                .asked
                .lock()
                .unwrap()
                .contains(&"../secrets".to_owned())
        );
    }
}
