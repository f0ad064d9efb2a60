//! How the Coder's changes become a pull request (`changesWorkflow`): the project's own
//! instructions for its pull requests (`prInstructions`), added to the Coder's prompt so the
//! body it writes follows them. The section keeps the specification's name.

use serde::Deserialize;

use super::ConfigError;
use super::origin::Origin;

/// Longest `changesWorkflow.prInstructions` may be, in bytes: it goes into every Coder
/// prompt.
const MAX_PR_INSTRUCTIONS_BYTES: usize = 8 * 1024;

/// How the Coder's changes become a pull request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangesWorkflowConfig {
    /// The project's instructions for its pull requests, trimmed; `None` when unset or
    /// blank.
    pub pr_instructions: Option<String>,
}

/// What a file may say in `changesWorkflow`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ChangesWorkflowFile {
    pr_instructions: Option<String>,
}

impl ChangesWorkflowFile {
    /// The section: blank instructions are none; longer than 8 KiB is an error.
    pub fn resolve(self, origin: &Origin) -> Result<ChangesWorkflowConfig, ConfigError> {
        let pr_instructions = self
            .pr_instructions
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty());
        if let Some(text) = &pr_instructions
            && text.len() > MAX_PR_INSTRUCTIONS_BYTES
        {
            return Err(origin.field_error(
                "changesWorkflow.prInstructions",
                format!(
                    "{} bytes is longer than the {} KiB the Coder's prompt takes; shorten it",
                    text.len(),
                    MAX_PR_INSTRUCTIONS_BYTES / 1024
                ),
            ));
        }
        Ok(ChangesWorkflowConfig { pr_instructions })
    }
}
