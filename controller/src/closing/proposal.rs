//! What the review loop says, as plain data: the thread's messages (a round's proposal, a
//! batch that needs nothing or could not be sorted, failing checks with their log, the cap),
//! the Coder's task when a round is approved, and the replies posted on GitHub. Tested by
//! equality and snapshots, since people and models read them.

use crate::closing::feedback::OWN_MARKER;
use crate::closing::sorting::{Kind, Sorted};
use crate::domain::PullRequestRef;
use crate::store::reviews::{CheckFailure, StoredComment};

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
pub fn batch_message(
    pr: &PullRequestRef,
    decision: &str,
    sorted: &[(StoredComment, Sorted)],
) -> (String, bool) {
    let of = |kind: Kind| -> Vec<&str> {
        sorted
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(_, s)| s.summary.as_str())
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
pub fn unsorted_message(pr: &PullRequestRef, comments: &[StoredComment]) -> String {
    let mut authors: Vec<&str> = comments.iter().map(|c| c.author.as_str()).collect();
    authors.dedup();
    format!(
        "{} got {} (from {}). I couldn't sort them, so I'm not proposing anything: read them on GitHub and tell me here what to change.",
        pr_link(pr),
        plural(comments.len(), "review comment", "review comments"),
        authors.join(", ")
    )
}

/// The thread's message about failing checks: each with the end of its log.
pub fn checks_message(pr: &PullRequestRef, checks: &[CheckFailure]) -> String {
    let head = checks
        .first()
        .map(|c| short(&c.head_oid))
        .unwrap_or_default();
    let names: Vec<String> = checks.iter().map(|c| format!("`{}`", c.name)).collect();
    let mut text = format!(
        "{}: {} failed on `{head}`.",
        pr_link(pr),
        if checks.len() == 1 {
            format!("the check {}", names.join(""))
        } else {
            format!("the checks {}", names.join(", "))
        }
    );
    for check in checks {
        text.push_str(&format!(
            "\n\nThe end of `{}`'s log:\n```\n{}\n```",
            check.name, check.log_tail
        ));
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
    match (&c.path, c.line) {
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
/// with its place and text (discussion is not given).
pub fn coder_review_task(
    pr: &PullRequestRef,
    round: i64,
    approver: &str,
    comments: &[StoredComment],
) -> String {
    let of = |kind: Kind| -> Vec<&StoredComment> {
        comments
            .iter()
            .filter(|c| c.sorted.as_deref().and_then(Kind::parse) == Some(kind))
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
        for c in items {
            n += 1;
            text.push_str(&format!(
                "\n{n}. {} — {}: {}",
                place(c),
                c.author,
                quoted(&c.body)
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
    for c in checks {
        text.push_str(&format!(
            "\n\nThe check `{}` failed on commit {}. The end of its log:\n```\n{}\n```",
            c.name,
            short(&c.head_oid),
            c.log_tail
        ));
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
        let (text, propose) = batch_message(&pr(), "CHANGES_REQUESTED", &batch);
        assert!(propose);
        assert_eq!(
            text,
            "[PR #7](https://github.com/acme/app/pull/7) got 3 review comments (a reviewer requested changes): 1 change asked (rename parse to parse_all), 1 question (why a loop), 1 discussion left alone. Reply **yes** to let the Coder address them, or **no** to leave them."
        );
        let (text, propose) = batch_message(&pr(), "", &batch[2..]);
        assert!(!propose);
        assert_eq!(
            text,
            "[PR #7](https://github.com/acme/app/pull/7) got 1 review comment: 1 discussion left alone. Nothing for the Coder to do."
        );
        assert_eq!(
            unsorted_message(&pr(), &[batch[0].0.clone(), batch[1].0.clone()]),
            "[PR #7](https://github.com/acme/app/pull/7) got 2 review comments (from alice, bob). I couldn't sort them, so I'm not proposing anything: read them on GitHub and tell me here what to change."
        );
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
            coder_review_task(&pr(), 2, "U1", &comments)
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
