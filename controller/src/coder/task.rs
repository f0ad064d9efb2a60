//! The task an approved plan's run starts from: the plan, one line telling the Coder how
//! this project's tests run ("This project's tests: `python -m pytest -q`", from
//! `build.testCommand` or [`test_command::detect`] on the worktree's base commit), and the
//! background the PM planned with.
//!
//! The test command is read from committed blobs while the worktree is prepared ahead (so
//! an approval only hands the task over), or, on the cold path, as the runner starts.

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
    /// The project's test command for the worktree at `worktree` (see
    /// [`project_test_command`]).
    pub(super) async fn test_command(&self, worktree: &Path) -> Option<String> {
        project_test_command(self.prepare.build.test_command.as_deref(), worktree).await
    }
}

/// The project's test command for the worktree at `worktree`: `configured`
/// (`build.testCommand`), else detected from its base commit's files; `None` when nothing
/// says, or the files cannot be read (logged).
pub async fn project_test_command(configured: Option<&str>, worktree: &Path) -> Option<String> {
    if let Some(command) = configured {
        return Some(command.to_owned());
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
