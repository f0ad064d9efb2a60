//! Whether a pull request's reviewers let "merge" in a thread go on
//! (`change-request-workflow.md` §8): a reviewer whose latest review requests changes, or a
//! review thread nobody resolved, makes "merge" refuse and name who asked for what, until
//! a person says "merge anyway" (`github.mergeChecks` turns each check off). A repository
//! without branch protection lets GitHub merge over a reviewer, so the controller checks
//! it itself.
//!
//! Plain data from what `gh` printed ([`super::pull_request`]): the objections
//! ([`objections`]) and the words people read ([`refusal`], [`overridden`]), tested by
//! equality. What a reviewer wrote is data: one line, at most [`MAX_WORDS_CHARS`]
//! characters, its Markdown escaped so it reads as written, at most [`MAX_LISTED`]
//! objections named (the others counted).

use crate::config::MergeChecks;

use super::pull_request::{PrStatus, ReviewThread};

/// Most characters of a reviewer's words quoted.
pub const MAX_WORDS_CHARS: usize = 200;
/// Most objections named in a message (the others are counted).
pub const MAX_LISTED: usize = 5;
/// Most characters of a login or a path named.
const MAX_NAME_CHARS: usize = 100;

/// What a reviewer said that keeps the pull request from merging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Objection {
    /// `reviewer`'s latest review requests changes, with these words.
    ChangesRequested { reviewer: String, words: String },
    /// GitHub's review decision is `CHANGES_REQUESTED`, though no reviewer's latest review
    /// says so (a later comment-only review from them).
    DecisionChangesRequested,
    /// A review thread on `path`, opened by `author` with these words, is not resolved.
    UnresolvedThread {
        author: String,
        path: String,
        words: String,
    },
}

/// The objections `checks` heeds in the pull request's `status` and its review `threads`, in
/// GitHub's order: the reviews first, then the threads.
pub fn objections(
    status: &PrStatus,
    threads: &[ReviewThread],
    checks: MergeChecks,
) -> Vec<Objection> {
    let mut found = Vec::new();
    if checks.changes_requested {
        found.extend(
            status
                .latest_reviews
                .iter()
                .filter(|r| r.state.eq_ignore_ascii_case("CHANGES_REQUESTED"))
                .map(|r| Objection::ChangesRequested {
                    reviewer: name(r.author.as_ref().map(|a| a.login.as_str())),
                    words: one_line(&r.body),
                }),
        );
        let decided = status
            .review_decision
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("CHANGES_REQUESTED"));
        if decided && found.is_empty() {
            found.push(Objection::DecisionChangesRequested);
        }
    }
    if checks.unresolved_threads {
        found.extend(threads.iter().filter(|t| !t.is_resolved).map(|t| {
            Objection::UnresolvedThread {
                author: name(t.author.as_deref()),
                path: clip(&t.path, MAX_NAME_CHARS),
                words: one_line(&t.body),
            }
        }));
    }
    found
}

/// A login as named: a deleted account is `ghost`, as GitHub shows it.
fn name(login: Option<&str>) -> String {
    clip(login.unwrap_or("ghost"), MAX_NAME_CHARS)
}

/// `text` on one line, whitespace collapsed, at most [`MAX_WORDS_CHARS`] characters.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    clip(&joined, MAX_WORDS_CHARS)
}

/// At most `max` characters of `text`, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Outside text as Markdown that reads as written: every ASCII punctuation character
/// escaped with a backslash (CommonMark's escapes), so a reviewer's `*`, `[…](…)` or
/// backquotes are shown, not rendered. The Slack formatter escapes `&`, `<` and `>` after.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One objection, as a list item's text.
fn line(objection: &Objection) -> String {
    let quoted = |words: &str| {
        if words.is_empty() {
            String::new()
        } else {
            format!(": “{}”", literal(words))
        }
    };
    match objection {
        Objection::ChangesRequested { reviewer, words } => {
            format!(
                "**{}** requested changes{}",
                literal(reviewer),
                quoted(words)
            )
        }
        Objection::DecisionChangesRequested => {
            "GitHub's review decision is *changes requested*".to_owned()
        }
        Objection::UnresolvedThread {
            author,
            path,
            words,
        } => format!(
            "an unresolved review thread by **{}** on {}{}",
            literal(author),
            if path.is_empty() {
                "the pull request".to_owned()
            } else {
                format!("`{}`", path.replace('`', "'"))
            },
            quoted(words)
        ),
    }
}

/// The objections as a Markdown list, at most [`MAX_LISTED`] named.
fn list(objections: &[Objection]) -> String {
    let mut text: Vec<String> = objections
        .iter()
        .take(MAX_LISTED)
        .map(|o| format!("- {}", line(o)))
        .collect();
    let more = objections.len().saturating_sub(MAX_LISTED);
    if more > 0 {
        text.push(format!(
            "- and {more} more {}",
            if more == 1 { "objection" } else { "objections" }
        ));
    }
    text.join("\n")
}

/// The thread's answer when "merge" meets `objections` (not empty) on pull request `number`.
pub fn refusal(number: u64, objections: &[Objection]) -> String {
    format!(
        "I can't merge PR #{number} yet: its reviewers asked for more.\n\n{}\n\nAddress them (the Coder can: tell me what to change), or resolve the threads on GitHub, then say **merge** again; or say **merge anyway** to merge over them. The thread stays open.",
        list(objections)
    )
}

/// What a merge over `objections` (not empty) went past, said with the close's last word and
/// written in the thread's journal: `user` said "merge anyway" over them.
pub fn overridden(user: &str, objections: &[Objection]) -> String {
    format!(
        "<@{user}> said **merge anyway** over:\n\n{}",
        list(objections)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::pull_request::parse_status;

    fn status(json: &str) -> PrStatus {
        parse_status(7, json).unwrap()
    }

    fn thread(resolved: bool, author: &str, path: &str, body: &str) -> ReviewThread {
        ReviewThread {
            is_resolved: resolved,
            author: Some(author.into()),
            path: path.into(),
            body: body.into(),
        }
    }

    const ON: MergeChecks = MergeChecks {
        changes_requested: true,
        unresolved_threads: true,
    };

    #[test]
    fn each_reviewer_asking_for_changes_and_each_open_thread_objects() {
        let s = status(
            r#"{"state":"OPEN","reviewDecision":"CHANGES_REQUESTED","latestReviews":[
                {"author":{"login":"alice"},"state":"CHANGES_REQUESTED","body":"Rename\n  `one`   first."},
                {"author":{"login":"bob"},"state":"APPROVED","body":"LGTM"},
                {"author":null,"state":"CHANGES_REQUESTED","body":""}]}"#,
        );
        let threads = [
            thread(true, "carol", "a.rs", "fixed"),
            thread(false, "dave", "notes.txt", "Why two?"),
        ];
        assert_eq!(
            objections(&s, &threads, ON),
            vec![
                Objection::ChangesRequested {
                    reviewer: "alice".into(),
                    words: "Rename `one` first.".into()
                },
                Objection::ChangesRequested {
                    reviewer: "ghost".into(),
                    words: String::new()
                },
                Objection::UnresolvedThread {
                    author: "dave".into(),
                    path: "notes.txt".into(),
                    words: "Why two?".into()
                },
            ]
        );
        let reviews_only = MergeChecks {
            unresolved_threads: false,
            ..ON
        };
        assert_eq!(objections(&s, &threads, reviews_only).len(), 2);
        let threads_only = MergeChecks {
            changes_requested: false,
            ..ON
        };
        assert_eq!(objections(&s, &threads, threads_only).len(), 1);
        let off = MergeChecks {
            changes_requested: false,
            unresolved_threads: false,
        };
        assert!(objections(&s, &threads, off).is_empty());
    }

    #[test]
    fn an_approval_after_changes_requested_clears_it_and_the_decision_alone_still_objects() {
        let approved = status(
            r#"{"state":"OPEN","reviewDecision":"APPROVED","latestReviews":[
                {"author":{"login":"alice"},"state":"APPROVED","body":""}]}"#,
        );
        assert!(objections(&approved, &[], ON).is_empty());
        let decided = status(
            r#"{"state":"OPEN","reviewDecision":"CHANGES_REQUESTED","latestReviews":[
                {"author":{"login":"alice"},"state":"COMMENTED","body":"hm"}]}"#,
        );
        assert_eq!(
            objections(&decided, &[], ON),
            vec![Objection::DecisionChangesRequested]
        );
        let nothing = status(r#"{"state":"OPEN","reviewDecision":"","latestReviews":[]}"#);
        assert!(objections(&nothing, &[], ON).is_empty());
    }

    #[test]
    fn the_refusal_names_each_reviewer_and_their_words_bounded_and_inert() {
        let long = "x".repeat(MAX_WORDS_CHARS + 50);
        let mut found = vec![
            Objection::ChangesRequested {
                reviewer: "alice".into(),
                words: "Use *bold* <!channel> [a](http://evil)".into(),
            },
            Objection::UnresolvedThread {
                author: "bob".into(),
                path: "src/a`b.rs".into(),
                words: one_line(&long),
            },
        ];
        let text = refusal(7, &found);
        assert!(
            text.starts_with("I can't merge PR #7 yet: its reviewers asked for more.\n\n- **alice** requested changes: “Use \\*bold\\* \\<\\!channel\\> \\[a\\]\\(http\\:\\/\\/evil\\)”\n- an unresolved review thread by **bob** on `src/a'b.rs`: “xxx"),
            "{text}"
        );
        assert!(text.contains(&format!("{}…”", "x".repeat(MAX_WORDS_CHARS - 3))));
        assert!(!text.contains(&"x".repeat(MAX_WORDS_CHARS + 1)));
        assert!(text.ends_with("say **merge anyway** to merge over them. The thread stays open."));
        // Through Slack's formatter, the reviewer's words read as written: no mention, no
        // link, no bold of theirs.
        let slack = crate::slack::format::markdown_to_mrkdwn(&text);
        assert!(
            slack.contains("requested changes: “Use *bold* &lt;!channel&gt; [a](http://evil)”"),
            "{slack}"
        );
        for n in 0..6 {
            found.push(Objection::UnresolvedThread {
                author: format!("r{n}"),
                path: String::new(),
                words: String::new(),
            });
        }
        let text = refusal(7, &found);
        assert!(text.contains("- an unresolved review thread by **r2** on the pull request\n- and 3 more objections\n"), "{text}");
        assert!(!text.contains("r3"), "{text}");
    }

    #[test]
    fn the_override_names_who_said_it_and_what_it_went_past() {
        let found = [Objection::DecisionChangesRequested];
        assert_eq!(
            overridden("U0ALICE", &found),
            "<@U0ALICE> said **merge anyway** over:\n\n- GitHub's review decision is *changes requested*"
        );
    }
}
