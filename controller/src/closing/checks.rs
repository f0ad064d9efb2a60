//! Failing checks of a pull request's head commit, as the PR watcher reports them: which
//! checks failed (a check run that concluded `FAILURE`, `TIMED_OUT` or `STARTUP_FAILURE`, a
//! status `FAILURE` or `ERROR` — a cancelled run or one waiting for someone is not a failure
//! to fix), the GitHub Actions run each belongs to (read from its `detailsUrl`), and the
//! end of the run's failed log (`gh run view <id> --log-failed`) as the thread shows it.

use crate::workspace::pull_request::Check;

/// Lines of a failed log the thread is shown.
pub const LOG_LINES: usize = 40;
/// Longest line of a failed log shown (longer ones are cut with `…`).
const LINE_CHARS: usize = 300;

/// Conclusions (check runs) and states (statuses) of a failure worth a fix.
const FAILED: [&str; 4] = ["FAILURE", "TIMED_OUT", "STARTUP_FAILURE", "ERROR"];

/// A check that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedCheck {
    pub name: String,
    /// Its GitHub Actions run, when it is one.
    pub run_id: Option<u64>,
}

/// The checks of `rollup` that failed, each name once.
pub fn failed_checks(rollup: &[Check]) -> Vec<FailedCheck> {
    let mut failed: Vec<FailedCheck> = Vec::new();
    for check in rollup {
        let outcome = check.conclusion.as_deref().or(check.state.as_deref());
        let Some(outcome) = outcome else { continue };
        if !FAILED.contains(&outcome.to_ascii_uppercase().as_str()) {
            continue;
        }
        let name = check.label().to_owned();
        if failed.iter().any(|f| f.name == name) {
            continue;
        }
        let url = check.details_url.as_deref().or(check.target_url.as_deref());
        failed.push(FailedCheck {
            name,
            run_id: url.and_then(run_id),
        });
    }
    failed
}

/// The run id in a GitHub Actions address: `…/actions/runs/<id>[/job/<job>]`.
pub fn run_id(url: &str) -> Option<u64> {
    let (_, rest) = url.split_once("/actions/runs/")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The last [`LOG_LINES`] lines of a failed log, each cut at [`LINE_CHARS`], with no code
/// fence of its own (so it stays inside the one it is shown in).
pub fn log_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(LOG_LINES);
    lines[start..]
        .iter()
        .map(|line| {
            let line = line.replace("```", "'''");
            if line.chars().count() > LINE_CHARS {
                let cut: String = line.chars().take(LINE_CHARS).collect();
                format!("{cut}…")
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str) -> Check {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn failed_checks_are_named_once_with_their_run() {
        let rollup = [
            check(
                r#"{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"SUCCESS","detailsUrl":"https://github.com/acme/app/actions/runs/41/job/1"}"#,
            ),
            check(
                r#"{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"FAILURE","detailsUrl":"https://github.com/acme/app/actions/runs/42/job/9"}"#,
            ),
            check(
                r#"{"__typename":"CheckRun","name":"test","status":"COMPLETED","conclusion":"FAILURE","detailsUrl":"https://github.com/acme/app/actions/runs/42/job/10"}"#,
            ),
            check(
                r#"{"__typename":"CheckRun","name":"lint","status":"COMPLETED","conclusion":"CANCELLED"}"#,
            ),
            check(
                r#"{"__typename":"CheckRun","name":"e2e","status":"IN_PROGRESS","conclusion":""}"#,
            ),
            check(
                r#"{"__typename":"CheckRun","name":"slow","status":"COMPLETED","conclusion":"TIMED_OUT","detailsUrl":"https://ci.example.com/build/7"}"#,
            ),
            check(
                r#"{"__typename":"StatusContext","context":"ci/legacy","state":"ERROR","targetUrl":"https://ci.example.com/x"}"#,
            ),
            check(r#"{"__typename":"StatusContext","context":"ci/ok","state":"SUCCESS"}"#),
        ];
        assert_eq!(
            failed_checks(&rollup),
            [
                FailedCheck {
                    name: "test".into(),
                    run_id: Some(42)
                },
                FailedCheck {
                    name: "slow".into(),
                    run_id: None
                },
                FailedCheck {
                    name: "ci/legacy".into(),
                    run_id: None
                },
            ]
        );
    }

    #[test]
    fn run_ids_come_from_actions_addresses_only() {
        assert_eq!(
            run_id("https://github.com/a/b/actions/runs/123/job/4"),
            Some(123)
        );
        assert_eq!(run_id("https://github.com/a/b/actions/runs/123"), Some(123));
        for url in [
            "",
            "https://ci.example.com/runs/5",
            "https://github.com/a/b/actions/runs/x",
            "https://github.com/a/b/actions/runs/99999999999999999999999",
        ] {
            assert_eq!(run_id(url), None, "{url}");
        }
    }

    #[test]
    fn the_tail_is_the_last_lines_cut_and_fence_free() {
        let log: String = (1..=50)
            .map(|i| format!("test\tRun tests\tline {i}\n\n"))
            .collect();
        let tail = log_tail(&log);
        assert_eq!(tail.lines().count(), LOG_LINES);
        assert!(tail.starts_with("test\tRun tests\tline 11\n"), "{tail}");
        assert!(tail.ends_with("line 50"));
        let fenced = log_tail(&format!("```\n{}\n", "x".repeat(400)));
        assert_eq!(fenced.lines().next(), Some("'''"));
        assert_eq!(
            fenced.lines().nth(1).unwrap().chars().count(),
            LINE_CHARS + 1
        );
        assert_eq!(log_tail(""), "");
    }
}
