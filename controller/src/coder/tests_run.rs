//! Whether a run ran the project's tests, and how they ended — the line its summary in the
//! thread ends with ("Tests: `python -m pytest -q` passed (exit 0).").
//!
//! Read from the run's stored conversation (what the hub kept after each model call), from
//! the Coder's Bash calls and the results the Bash tool gave — never from what the model
//! says about them: the last Bash call that ran the project's test command or an obvious
//! test command ([`test_command::is_test_command`]), whether a Write, Edit or MultiEdit
//! came after it, and the exit status the Bash tool put on its result's last line. A pipe
//! or `; …` after the tests makes that status another command's, so it is not taken for
//! theirs. Pure and snapshot-tested.

use codebutler_agent::conversation::ChatMessage;

use crate::workspace::test_command;

/// The tools whose successful call changes the worktree's files.
const EDITING_TOOLS: [&str; 3] = ["Write", "Edit", "MultiEdit"];
/// How the Bash tool begins a result it reports as an error.
const TOOL_ERROR: &str = "error: ";

/// What the run did about the tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TestsRun {
    /// No Bash call ran tests.
    NotRun,
    /// The tests ran, and this is the last time.
    Ran {
        /// The Bash command, as typed.
        command: String,
        ended: Ended,
        /// A file was written or edited after it.
        changed_after: bool,
    },
}

/// How the last test run ended, as the Bash tool reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Exit status 0.
    Passed,
    /// A non-zero exit status.
    Failed(i32),
    /// Killed by a signal or at the time limit (the Bash tool's words).
    Stopped(String),
    /// The status on the result is another command's (a pipe, `;`), or there is none.
    Unknown(Option<i32>),
}

/// What the run's `conversation` shows of the tests; `project` is the project's test
/// command, if known.
pub fn read(conversation: &[ChatMessage], project: Option<&str>) -> TestsRun {
    let mut last: Option<TestsRun> = None;
    for (index, message) in conversation.iter().enumerate() {
        let ChatMessage::Assistant { tool_calls, .. } = message else {
            continue;
        };
        for call in tool_calls {
            let Some(result) = result_of(&conversation[index + 1..], &call.id) else {
                continue;
            };
            let name = call.function.name.as_str();
            if EDITING_TOOLS.contains(&name) && !result.starts_with(TOOL_ERROR) {
                if let Some(TestsRun::Ran { changed_after, .. }) = &mut last {
                    *changed_after = true;
                }
                continue;
            }
            if name != "Bash" {
                continue;
            }
            let Some(command) = bash_command(&call.function.arguments) else {
                continue;
            };
            if !test_command::is_test_command(&command, project) {
                continue;
            }
            let ended = ended(result, test_command::status_is_the_tests(&command, project));
            last = Some(TestsRun::Ran {
                command,
                ended,
                changed_after: false,
            });
        }
    }
    last.unwrap_or(TestsRun::NotRun)
}

/// The result of the call `id` among the messages after it.
fn result_of<'a>(after: &'a [ChatMessage], id: &str) -> Option<&'a str> {
    after.iter().find_map(|m| match m {
        ChatMessage::Tool {
            tool_call_id,
            content,
        } if tool_call_id == id => Some(content.as_str()),
        _ => None,
    })
}

/// A Bash call's `command` argument.
fn bash_command(arguments: &str) -> Option<String> {
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    Some(args.get("command")?.as_str()?.to_owned())
}

/// How a Bash result ended, from its last line (the Bash tool's own: `exit code: N`,
/// `killed by signal …`); `theirs` says whether that status is the tests'.
fn ended(result: &str, theirs: bool) -> Ended {
    if result.starts_with(TOOL_ERROR) {
        return Ended::Unknown(None);
    }
    let last = result.trim_end().lines().last().unwrap_or_default();
    let code = last
        .strip_prefix("exit code: ")
        .and_then(|c| c.trim().parse::<i32>().ok());
    match code {
        Some(code) if !theirs => Ended::Unknown(Some(code)),
        Some(0) => Ended::Passed,
        Some(code) => Ended::Failed(code),
        None if last.starts_with("killed by signal") => {
            let timed_out = result.contains("command timed out after");
            Ended::Stopped(if timed_out {
                "at the Bash time limit".to_owned()
            } else {
                last.to_owned()
            })
        }
        None => Ended::Unknown(None),
    }
}

/// The summary's line: `None` when there is nothing to say (no test command known and
/// none run).
pub fn line(run: &TestsRun, project: Option<&str>) -> Option<String> {
    let shown = |command: &str| format!("`{}`", one_line(command));
    match run {
        TestsRun::NotRun => project.map(|p| format!("Tests: {} not run.", shown(p))),
        TestsRun::Ran {
            command,
            ended,
            changed_after,
        } => {
            let how = match ended {
                Ended::Passed => "passed (exit 0)".to_owned(),
                Ended::Failed(code) => format!("failed (exit {code})"),
                Ended::Stopped(how) => format!("did not finish ({how})"),
                Ended::Unknown(Some(code)) => format!(
                    "ran, but its exit status ({code}) is that of a command after the tests, so how they ended is not known"
                ),
                Ended::Unknown(None) => "ran, but how they ended is not known".to_owned(),
            };
            Some(if *changed_after {
                format!(
                    "Tests: not run after the last change; the last run, {}, {how}.",
                    shown(command)
                )
            } else {
                format!("Tests: {} {how}.", shown(command))
            })
        }
    }
}

/// A command on one line, at most 120 characters, with no backtick to end its code span.
fn one_line(command: &str) -> String {
    let flat: String = command
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('`', "'");
    if flat.chars().count() > 120 {
        let cut: String = flat.chars().take(119).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_agent::conversation::ToolCall;

    fn call(id: &str, tool: &str, args: serde_json::Value) -> ChatMessage {
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(id, tool, args.to_string())],
        }
    }

    fn result(id: &str, content: &str) -> ChatMessage {
        ChatMessage::Tool {
            tool_call_id: id.into(),
            content: content.into(),
        }
    }

    fn bash(id: &str, command: &str, output: &str) -> [ChatMessage; 2] {
        [
            call(id, "Bash", serde_json::json!({ "command": command })),
            result(id, output),
        ]
    }

    fn edit(id: &str) -> [ChatMessage; 2] {
        [
            call(
                id,
                "Edit",
                serde_json::json!({"file_path": "a.py", "old_string": "1", "new_string": "2"}),
            ),
            result(id, "edited a.py"),
        ]
    }

    fn summary(conversation: &[ChatMessage], project: Option<&str>) -> Option<String> {
        line(&read(conversation, project), project)
    }

    #[test]
    fn the_summary_lines() {
        let pytest = Some("python -m pytest -q");
        let plan = ChatMessage::user("Implement this approved plan: …");
        let passed = [
            vec![plan.clone()],
            edit("e1").to_vec(),
            bash(
                "b1",
                "python -m pytest -q",
                "1 passed in 0.01s\nexit code: 0",
            )
            .to_vec(),
            vec![ChatMessage::assistant_text("All tests fail, sorry.")],
        ]
        .concat();
        let failed = [
            bash("b1", "python -m pytest -q", "1 passed\nexit code: 0").to_vec(),
            edit("e1").to_vec(),
            bash(
                "b2",
                "cd /workspace && pytest -x tests/",
                "1 failed\nexit code: 1",
            )
            .to_vec(),
            vec![ChatMessage::assistant_text("All tests pass!")],
        ]
        .concat();
        let stale = [
            bash("b1", "python -m pytest -q", "3 passed\nexit code: 0").to_vec(),
            edit("e1").to_vec(),
        ]
        .concat();
        let piped = bash(
            "b1",
            "python -m pytest -q 2>&1 | tail -5",
            "2 failed\nexit code: 0",
        )
        .to_vec();
        let timed_out = bash(
            "b1",
            "cargo test --offline",
            "Compiling…\ncommand timed out after 120s; it and every process it started were killed\nkilled by signal 9 (SIGKILL)",
        )
        .to_vec();
        let refused_edit = [
            bash("b1", "npm test", "ok\nexit code: 0").to_vec(),
            vec![
                call("e1", "Edit", serde_json::json!({})),
                result("e1", "error: invalid arguments for Edit"),
            ],
        ]
        .concat();
        let other = bash("b1", "ls; cat README.md", "README.md\nexit code: 0").to_vec();
        // A call whose result never came (the run stopped first) is not counted.
        let unanswered = vec![call("b1", "Bash", serde_json::json!({"command": "pytest"}))];
        let lines: Vec<(&str, Option<String>)> = vec![
            ("passed, whatever the model says", summary(&passed, pytest)),
            ("failed, whatever the model says", summary(&failed, pytest)),
            ("an edit after the last run", summary(&stale, pytest)),
            ("piped into tail", summary(&piped, pytest)),
            ("killed at the time limit", summary(&timed_out, None)),
            ("a refused edit is no change", summary(&refused_edit, None)),
            ("not run, the project's known", summary(&other, pytest)),
            ("not run, nothing known", summary(&other, None)),
            ("unanswered", summary(&unanswered, pytest)),
        ];
        insta::assert_debug_snapshot!(lines);
    }

    #[test]
    fn long_commands_stay_on_one_short_line() {
        let long = format!("pytest {}", "tests/test_a.py ".repeat(20));
        let run = read(&bash("b", &long, "exit code: 0"), None);
        let text = line(&run, None).unwrap();
        assert!(text.chars().count() < 170, "{text}");
        assert!(text.contains('…'), "{text}");
        let run = read(&bash("b", "pytest -k `echo x`\t -q", "exit code: 2"), None);
        assert_eq!(
            line(&run, None).unwrap(),
            "Tests: `pytest -k 'echo x' -q` failed (exit 2)."
        );
    }
}
