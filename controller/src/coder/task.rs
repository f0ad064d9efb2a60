//! The task an approved plan's run starts from: the plan, one line telling the Coder how
//! this project's tests run ("This project's tests: `python -m pytest -q`", from
//! `build.testCommand` or [`test_command::detect`] on the worktree's base commit), and the
//! background the PM planned with.
//!
//! The test command is read when the task is handed over, from files already checked out:
//! a few committed blobs, so an approval prepared ahead still reaches the Coder's first step
//! at once.

use std::path::Path;

use codebutler_agent::conversation::ChatMessage;

use super::SlackCoder;
use crate::domain::Plan;
use crate::pm::references::render::with_background;
use crate::workspace::{project_files, test_command};

/// The task's text: `plan`, the test command's line when there is one, then the
/// background from the PM's `conversation`.
pub fn task_text(plan: &Plan, test_command: Option<&str>, conversation: &[ChatMessage]) -> String {
    let mut text = plan.to_markdown();
    if let Some(command) = test_command {
        text.push('\n');
        text.push_str(&test_command::task_line(command));
        text.push('\n');
    }
    with_background(text, conversation)
}

impl SlackCoder {
    /// The project's test command for the worktree at `worktree`: `build.testCommand`, else
    /// detected from its base commit's files; `None` when nothing says, or the files
    /// cannot be read (logged).
    pub(super) async fn test_command(&self, worktree: &Path) -> Option<String> {
        let configured = self.prepare.build.test_command.clone();
        if configured.is_some() {
            return configured;
        }
        let path = worktree.to_owned();
        let read = tokio::task::spawn_blocking(move || project_files::read_base(&path)).await;
        match read {
            Ok(Ok(files)) => test_command::detect(&files, None),
            Ok(Err(e)) => {
                tracing::warn!("the project's test command: {e}");
                None
            }
            Err(e) => {
                tracing::warn!("the project's test command: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_tells_the_coder_how_the_tests_run() {
        let plan = Plan {
            summary: "Fix the rounding in add".into(),
            steps: vec![
                "Round half to even in `calc/add.py`".into(),
                "Add a test".into(),
            ],
            files: vec!["calc/add.py".into(), "tests/test_add.py".into()],
        };
        insta::assert_snapshot!(task_text(&plan, Some("python -m pytest -q"), &[]));
        assert_eq!(task_text(&plan, None, &[]), plan.to_markdown());
    }
}
