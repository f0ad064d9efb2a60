//! What the review loop says, as plain data: the thread's messages (a round's proposal, a
//! batch that needs nothing or could not be sorted, comments left out or cut, comments of
//! people who may not steer the Coder, failing checks with their log, the cap), the Coder's
//! task when a round is approved, and the replies posted on GitHub. Tested by equality and
//! snapshots, since people and models read them. What GitHub wrote reaches them bounded: a
//! round's comments as [`review_input`] gives them, at most [`MAX_NAMED`] logins named, and
//! failing checks' logs at most [`MAX_CHECK_LOGS_CHARS`] together.

use crate::closing::feedback::OWN_MARKER;
use crate::closing::review_input::{
    self, Batch, MAX_COMMENT_CHARS, MAX_ROUND_CHARS, MAX_ROUND_COMMENTS,
};
use crate::closing::sorting::{Kind, Sorted};
use crate::domain::PullRequestRef;
use crate::store::reviews::{CheckFailure, StoredComment};

/// Most logins a message names (the others are counted).
pub const MAX_NAMED: usize = 5;
/// Most characters of failing checks' logs a message or a task gives together.
pub const MAX_CHECK_LOGS_CHARS: usize = 16_000;
/// Most failing checks a message or a task names (the others are counted).
const MAX_CHECKS_NAMED: usize = 20;
/// Most characters of a check's name given.
const MAX_CHECK_NAME_CHARS: usize = 100;

/// How a proposal asks for **yes** or **no**.
const REPLY_ASK: &str = "Reply **yes** to let the Coder address them, or **no** to leave them.";

/// `[PR #7](https://…/pull/7)`.
fn pr_link(pr: &PullRequestRef) -> String {
    format!("[PR #{}]({})", pr.number, pr.url)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// ` (changes requested)` and the like, from GitHub's review decision.
fn decision_note(decision: &str) -> &'static str {
    match decision {
        "CHANGES_REQUESTED" => " (a reviewer requested changes)",
        "APPROVED" => " (approved)",
        _ => "",
    }
}

/// The first seven characters of a commit id.
pub fn short(oid: &str) -> &str {
    oid.get(..7).unwrap_or(oid)
}

/// The thread's message about a sorted batch, and whether it proposes a Coder run (it does
/// when a change was asked or a question needs an answer).
pub fn batch_message(pr: &PullRequestRef, decision: &str, sorted: &[Sorted]) -> (String, bool) {
    let of = |kind: Kind| -> Vec<&str> {
        sorted
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.summary.as_str())
            .collect()
    };
    let (changes, questions, discussion) =
        (of(Kind::Change), of(Kind::Question), of(Kind::Discussion));
    let mut parts = Vec::new();
    if !changes.is_empty() {
        parts.push(format!(
            "{} ({})",
            plural(changes.len(), "change asked", "changes asked"),
            changes.join("; ")
        ));
    }
    if !questions.is_empty() {
        parts.push(format!(
            "{} ({})",
            plural(questions.len(), "question", "questions"),
            questions.join("; ")
        ));
    }
    if !discussion.is_empty() {
        parts.push(format!(
            "{} left alone",
            plural(discussion.len(), "discussion", "discussions")
        ));
    }
    let propose = !changes.is_empty() || !questions.is_empty();
    let ask = if propose {
        REPLY_ASK
    } else {
        "Nothing for the Coder to do."
    };
    let text = format!(
        "{} got {}{}: {}. {ask}",
        pr_link(pr),
        plural(sorted.len(), "review comment", "review comments"),
        decision_note(decision),
        parts.join(", "),
    );
    (text, propose)
}

/// The thread's message about a batch the PM's answer could not sort: no proposal.
pub fn unsorted_message(pr: &PullRequestRef, batch: &Batch<'_>) -> String {
    let authors: Vec<&str> = batch
        .shown
        .iter()
        .map(|s| s.comment.author.as_str())
        .collect();
    format!(
        "{} got {} (from {}). I couldn't sort them, so I'm not proposing anything: read them on GitHub and tell me here what to change.",
        pr_link(pr),
        plural(
            batch.shown.len() + batch.not_shown,
            "review comment",
            "review comments"
        ),
        named(&authors, "")
    )
}

/// Distinct `logins` as given (`alice, bob`), each with `prefix`, at most [`MAX_NAMED`] and
/// how many others.
fn named(logins: &[&str], prefix: &str) -> String {
    let mut distinct: Vec<String> = Vec::new();
    for login in logins {
        let login = review_input::login(login);
        if !distinct.contains(&login) {
            distinct.push(login);
        }
    }
    let others = distinct.len().saturating_sub(MAX_NAMED);
    let mut shown: Vec<String> = distinct
        .into_iter()
        .take(MAX_NAMED)
        .map(|l| format!("{prefix}{l}"))
        .collect();
    if others > 0 {
        shown.push(plural(others, "other", "others"));
    }
    shown.join(", ")
}

/// What the thread is told about the comments a round left out or cut, if any.
pub fn left_out_note(batch: &Batch<'_>) -> Option<String> {
    let (left_out, cut) = (batch.not_shown, batch.cut());
    let what = match (left_out, cut) {
        (0, 0) => return None,
        (n, 0) => format!(
            "{} left out",
            plural(n, "more comment was", "more comments were")
        ),
        (0, c) => format!("{} shortened", plural(c, "comment was", "comments were")),
        (n, c) => format!(
            "{} left out and {c} shortened",
            plural(n, "more comment was", "more comments were")
        ),
    };
    Some(format!(
        "{what}: a round reads at most {MAX_ROUND_COMMENTS} comments, {MAX_ROUND_CHARS} characters of them together and {MAX_COMMENT_CHARS} of each, so neither I nor the Coder saw the rest. Read them on GitHub and tell me here if they ask for more."
    ))
}

/// The sentence naming comments by people who may not steer the Coder (`authors`: one
/// login per comment), if any.
pub fn unheeded_note(authors: &[String]) -> Option<String> {
    if authors.is_empty() {
        return None;
    }
    let logins: Vec<&str> = authors.iter().map(String::as_str).collect();
    Some(format!(
        "{} from people without write access ({}) {} not acted on.",
        plural(authors.len(), "comment", "comments"),
        named(&logins, "@"),
        if authors.len() == 1 { "was" } else { "were" }
    ))
}

/// The thread's message about a batch of comments only by people who may not steer the
/// Coder: they are named, nothing is sorted or proposed.
pub fn unheeded_message(pr: &PullRequestRef, authors: &[String]) -> String {
    format!(
        "{}: {} Only people with write access to the repository steer the Coder (`github.reviewFrom`).",
        pr_link(pr),
        unheeded_note(authors).unwrap_or_default()
    )
}

/// `text` with the notes that apply, each a sentence of its own.
pub fn with_notes(text: String, notes: &[Option<String>]) -> String {
    notes
        .iter()
        .flatten()
        .fold(text, |text, note| format!("{text} {note}"))
}

/// A check's name as given: one line, without backticks, cut.
fn check_name(name: &str) -> String {
    let line: String = name
        .chars()
        .filter(|c| !c.is_control() && *c != '`')
        .collect();
    let (cut, _) = review_input::cut(&line, MAX_CHECK_NAME_CHARS);
    cut.replace('\n', " ")
}

/// The checks' logs as given: each check's log while they fit in
/// [`MAX_CHECK_LOGS_CHARS`] together, `None` for the logs left out.
fn check_logs(checks: &[CheckFailure]) -> Vec<(String, Option<&str>)> {
    let mut room = MAX_CHECK_LOGS_CHARS;
    checks
        .iter()
        .take(MAX_CHECKS_NAMED)
        .map(|c| {
            let n = c.log_tail.chars().count();
            let log = (n <= room).then(|| {
                room -= n;
                c.log_tail.as_str()
            });
            (check_name(&c.name), log)
        })
        .collect()
}

/// What is said after the logs given when some were left out, if any.
fn logs_left_out(checks: &[CheckFailure], given: &[(String, Option<&str>)]) -> Option<String> {
    let without = given.iter().filter(|(_, log)| log.is_none()).count();
    let unnamed = checks.len().saturating_sub(given.len());
    (without + unnamed > 0).then(|| {
        format!(
            "{} not shown: at most {MAX_CHECKS_NAMED} failing checks and {MAX_CHECK_LOGS_CHARS} characters of their logs are given together.",
            plural(
                without + unnamed,
                "check's log is",
                "checks' logs are"
            )
        )
    })
}

/// The thread's message about failing checks: each with the end of its log.
pub fn checks_message(pr: &PullRequestRef, checks: &[CheckFailure]) -> String {
    let head = checks
        .first()
        .map(|c| short(&c.head_oid))
        .unwrap_or_default();
    let given = check_logs(checks);
    let mut names: Vec<String> = given.iter().map(|(name, _)| format!("`{name}`")).collect();
    let unnamed = checks.len().saturating_sub(given.len());
    if unnamed > 0 {
        names.push(plural(unnamed, "other", "others"));
    }
    let mut text = format!(
        "{}: {} failed on `{head}`.",
        pr_link(pr),
        if checks.len() == 1 {
            format!("the check {}", names.join(""))
        } else {
            format!("the checks {}", names.join(", "))
        }
    );
    for (name, log) in &given {
        if let Some(log) = log {
            text.push_str(&format!("\n\nThe end of `{name}`'s log:\n```\n{log}\n```"));
        }
    }
    if let Some(note) = logs_left_out(checks, &given) {
        text.push_str(&format!("\n\n{note}"));
    }
    text.push_str(&format!(
        "\n\nReply **yes** to let the Coder fix {}, or **no** to leave {}.",
        if checks.len() == 1 { "it" } else { "them" },
        if checks.len() == 1 { "it" } else { "them" }
    ));
    text
}

/// The thread's message once the pull request reached `github.maxReviewRounds`.
pub fn capped_message(pr: &PullRequestRef) -> String {
    format!(
        "{} had as many automatic review rounds as `github.maxReviewRounds` allows, so I won't propose more for its comments or checks. Tell me here what to change and the Coder will do it.",
        pr_link(pr)
    )
}

/// The reply to *no* on a proposal.
pub const DECLINED: &str = "OK, I'll leave them. Tell me here if you want something changed.";

/// Where a comment is: `` `src/a.rs:3` ``, `` `src/a.rs` `` or `the conversation`.
fn place(c: &StoredComment) -> String {
    match (c.path.as_deref().map(review_input::path), c.line) {
        (Some(path), Some(line)) => format!("`{path}:{line}`"),
        (Some(path), None) => format!("`{path}`"),
        (None, _) => "the conversation".into(),
    }
}

/// A comment's text on the Coder's list: its lines indented under the item.
fn quoted(body: &str) -> String {
    body.trim().lines().collect::<Vec<_>>().join("\n   ")
}

/// The Coder's task for an approved review round: the changes asked and the questions, each
/// with its place and text as the round gave them to the PM (discussion is not given).
pub fn coder_review_task(
    pr: &PullRequestRef,
    round: i64,
    approver: &str,
    batch: &Batch<'_>,
) -> String {
    let of = |kind: Kind| -> Vec<(&StoredComment, &str)> {
        batch
            .shown
            .iter()
            .filter(|s| s.comment.sorted.as_deref().and_then(Kind::parse) == Some(kind))
            .map(|s| (s.comment, s.text.as_str()))
            .collect()
    };
    let mut text = format!(
        "Review comments on PR #{} (review round {round}), approved by <@{approver}>.",
        pr.number
    );
    let mut n = 0;
    for (kind, heading) in [
        (Kind::Change, "Change the code as these comments ask:"),
        (
            Kind::Question,
            "Answer these questions in your final summary (change nothing for them unless the answer needs it):",
        ),
    ] {
        let items = of(kind);
        if items.is_empty() {
            continue;
        }
        text.push_str(&format!("\n\n{heading}"));
        for (c, body) in items {
            n += 1;
            text.push_str(&format!(
                "\n{n}. {} — {}: {}",
                place(c),
                review_input::login(&c.author),
                quoted(body)
            ));
        }
    }
    text.push_str("\n\nThen commit; your commits go to the pull request.");
    text
}

/// The Coder's task for approved failing checks.
pub fn coder_checks_task(pr: &PullRequestRef, approver: &str, checks: &[CheckFailure]) -> String {
    let mut text = format!(
        "Checks failed on PR #{}, approved for a fix by <@{approver}>.",
        pr.number
    );
    let given = check_logs(checks);
    for (c, (name, log)) in checks.iter().zip(&given) {
        match log {
            Some(log) => text.push_str(&format!(
                "\n\nThe check `{name}` failed on commit {}. The end of its log:\n```\n{log}\n```",
                short(&c.head_oid),
            )),
            None => text.push_str(&format!(
                "\n\nThe check `{name}` failed on commit {}.",
                short(&c.head_oid),
            )),
        }
    }
    if let Some(note) = logs_left_out(checks, &given) {
        text.push_str(&format!("\n\n{note}"));
    }
    text.push_str("\n\nFind the cause, fix it and commit; your commits go to the pull request.");
    text
}

/// The marker of the reply to comment `key` (so a reply is found again after a crash).
pub fn reply_marker(key: &str) -> String {
    format!("{OWN_MARKER} reply:{key} -->")
}

/// The reply on GitHub to an addressed comment: what changed and the commit; a question gets
/// the first line of the Coder's summary.
pub fn reply_body(
    key: &str,
    kind: Kind,
    head: &str,
    files: &[String],
    answer: Option<&str>,
) -> String {
    let changed = if files.is_empty() {
        String::new()
    } else {
        let shown: Vec<String> = files.iter().take(10).map(|f| format!("`{f}`")).collect();
        let more = files.len().saturating_sub(10);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(" (changed {}{more})", shown.join(", "))
    };
    let text = match (kind, answer) {
        (Kind::Question, Some(answer)) => format!(
            "The Coder's answer: {answer}\n\nThe branch is now at {}{changed}.",
            short(head)
        ),
        (Kind::Question, None) => format!(
            "The Coder answered this in its Slack thread; the branch is now at {}{changed}.",
            short(head)
        ),
        _ => format!("Addressed in {}{changed}.", short(head)),
    };
    format!("{text}\n\n{}", reply_marker(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pr() -> PullRequestRef {
        PullRequestRef {
            number: 7,
            url: "https://github.com/acme/app/pull/7".into(),
        }
    }

    fn comment(
        key: &str,
        author: &str,
        path: Option<&str>,
        line: Option<i64>,
        body: &str,
        kind: &str,
    ) -> StoredComment {
        StoredComment {
            key: key.into(),
            author: author.into(),
            path: path.map(str::to_owned),
            line,
            body: body.into(),
            url: "u".into(),
            reply_to: None,
            sorted: Some(kind.into()),
            reply: None,
        }
    }

    fn sorted(kind: Kind, summary: &str) -> Sorted {
        Sorted {
            kind,
            summary: summary.into(),
        }
    }

    #[test]
    fn a_batch_is_one_message() {
        let batch = [
            (
                comment(
                    "line:1",
                    "alice",
                    Some("src/a.rs"),
                    Some(3),
                    "Rename",
                    "change",
                ),
                sorted(Kind::Change, "rename parse to parse_all"),
            ),
            (
                comment("conversation:2", "bob", None, None, "Why?", "question"),
                sorted(Kind::Question, "why a loop"),
            ),
            (
                comment(
                    "review:3",
                    "carol",
                    None,
                    None,
                    "Maybe later?",
                    "discussion",
                ),
                sorted(Kind::Discussion, "maybe later"),
            ),
        ];
        let kinds: Vec<Sorted> = batch.iter().map(|(_, s)| s.clone()).collect();
        let (text, propose) = batch_message(&pr(), "CHANGES_REQUESTED", &kinds);
        assert!(propose);
        assert_eq!(
            text,
            "[PR #7](https://github.com/acme/app/pull/7) got 3 review comments (a reviewer requested changes): 1 change asked (rename parse to parse_all), 1 question (why a loop), 1 discussion left alone. Reply **yes** to let the Coder address them, or **no** to leave them."
        );
        let (text, propose) = batch_message(&pr(), "", &kinds[2..]);
        assert!(!propose);
        assert_eq!(
            text,
            "[PR #7](https://github.com/acme/app/pull/7) got 1 review comment: 1 discussion left alone. Nothing for the Coder to do."
        );
        let two = [batch[0].0.clone(), batch[1].0.clone()];
        assert_eq!(
            unsorted_message(&pr(), &review_input::batch(&two)),
            "[PR #7](https://github.com/acme/app/pull/7) got 2 review comments (from alice, bob). I couldn't sort them, so I'm not proposing anything: read them on GitHub and tell me here what to change."
        );
    }

    #[test]
    fn what_was_left_out_cut_or_not_acted_on_is_said() {
        let flood: Vec<StoredComment> = (0..300)
            .map(|i| {
                comment(
                    &format!("line:{i}"),
                    "alice",
                    Some("src/a.rs"),
                    Some(i),
                    &"x".repeat(6_000),
                    "change",
                )
            })
            .collect();
        let flooded = review_input::batch(&flood);
        let few: Vec<StoredComment> = flood[..2]
            .iter()
            .map(|c| StoredComment {
                body: "Rename it.".into(),
                ..c.clone()
            })
            .collect();
        let long_one = [flood[0].clone()];
        let passers_by: Vec<String> = ["mallory", "eve", "mallory", "a1", "a2", "a3", "a4"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let texts = [
            left_out_note(&flooded).unwrap(),
            left_out_note(&review_input::batch(&long_one)).unwrap(),
            unheeded_note(&passers_by).unwrap(),
            unheeded_note(&["mallory\n<!channel>".to_owned()]).unwrap(),
            unheeded_message(&pr(), &["mallory".to_owned(), "eve".to_owned()]),
            with_notes(
                "[PR #7](u) got 2 review comments: 2 changes asked. Reply.".into(),
                &[
                    left_out_note(&review_input::batch(&few)),
                    unheeded_note(&["mallory".to_owned()]),
                ],
            ),
        ];
        assert_eq!(left_out_note(&review_input::batch(&few)), None);
        assert_eq!(unheeded_note(&[]), None);
        insta::assert_snapshot!("review_notes", texts.join("\n\n"));
    }

    #[test]
    fn failing_checks_logs_are_bounded_together() {
        let checks: Vec<CheckFailure> = (0..25)
            .map(|i| CheckFailure {
                name: format!("test-{i}\n`x`"),
                head_oid: "0123456789abcdef".into(),
                log_tail: "y".repeat(7_000),
            })
            .collect();
        for text in [
            checks_message(&pr(), &checks),
            coder_checks_task(&pr(), "U1", &checks),
        ] {
            assert!(
                text.chars().count() < MAX_CHECK_LOGS_CHARS + 4_000,
                "{}",
                text.chars().count()
            );
            assert_eq!(text.matches(&"y".repeat(7_000)).count(), 2, "two logs fit");
            assert!(
                text.contains("23 checks' logs are not shown: at most 20 failing checks and 16000 characters of their logs are given together."),
                "{text}"
            );
            assert!(text.contains("`test-0x`"), "{text}");
            assert!(!text.contains("test-20"), "{text}");
        }
        assert!(checks_message(&pr(), &checks).contains("`test-19x`, 5 others failed on"));
    }

    #[test]
    fn the_coder_gets_place_author_and_text() {
        let comments = [
            comment(
                "line:1",
                "alice",
                Some("src/a.rs"),
                Some(3),
                "Rename this\nto `parse_all`.",
                "change",
            ),
            comment(
                "line:4",
                "dave",
                Some("src/b.rs"),
                None,
                "Drop the clone.",
                "change",
            ),
            comment(
                "conversation:2",
                "bob",
                None,
                None,
                "Why a loop here?",
                "question",
            ),
            comment(
                "review:3",
                "carol",
                None,
                None,
                "Maybe later?",
                "discussion",
            ),
        ];
        insta::assert_snapshot!(
            "review_coder_task",
            coder_review_task(&pr(), 2, "U1", &review_input::batch(&comments))
        );
        let checks = [CheckFailure {
            name: "test".into(),
            head_oid: "0123456789abcdef".into(),
            log_tail: "test\tRun\tassertion failed".into(),
        }];
        insta::assert_snapshot!("checks_coder_task", coder_checks_task(&pr(), "U1", &checks));
        insta::assert_snapshot!("checks_message", checks_message(&pr(), &checks));
    }

    #[test]
    fn replies_carry_the_commit_and_the_marker() {
        let files = vec!["src/a.rs".to_owned()];
        assert_eq!(
            reply_body("line:1", Kind::Change, "0123456789", &files, None),
            "Addressed in 0123456 (changed `src/a.rs`).\n\n<!-- codebutler reply:line:1 -->"
        );
        assert_eq!(
            reply_body(
                "conversation:2",
                Kind::Question,
                "0123456789",
                &[],
                Some("A loop keeps order.")
            ),
            "The Coder's answer: A loop keeps order.\n\nThe branch is now at 0123456.\n\n<!-- codebutler reply:conversation:2 -->"
        );
        let many: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        assert!(reply_body("k", Kind::Change, "abc", &many, None).contains("`f9` and 2 more)"));
        assert_eq!(short("abc"), "abc");
    }
}
