//! What coordination says, as plain Markdown (tested by equality and snapshots), and how a
//! notice reaches a thread: as a message stored in that thread
//! ([`crate::domain::notice_message`]), which
//! its own handler posts in order with everything else said there — like the PR watcher's
//! [`crate::domain::PrEvent`]. A notice for another thread is therefore posted by
//! whichever instance owns that thread (on a shared store the instance noticing may not),
//! and the message is stored in the same transaction as the notice's exactly-once record.

use crate::domain::ThreadKey;
use crate::workspace::forge::thread_link;

use super::overlap::Overlap;

/// Another thread as a notice names it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadRef {
    pub thread: ThreadKey,
    /// Its plan's summary, if it has a plan.
    pub summary: Option<String>,
    pub pr: Option<u64>,
}

impl ThreadRef {
    /// `[summary](link)`, then `, PR #42` when it has one.
    pub fn markdown(&self) -> String {
        let link = format!(
            "[{}]({})",
            label(self.summary.as_deref()),
            thread_link(&self.thread.channel, &self.thread.thread_ts)
        );
        match self.pr {
            Some(n) => format!("{link}, PR #{n}"),
            None => link,
        }
    }
}

/// A thread's summary as a link label: plain words only (no link or emphasis syntax), at
/// most 60 characters.
fn label(summary: Option<&str>) -> String {
    let clean: String = summary
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if "[]()<>*_`~|\\".contains(c) || c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.is_empty() {
        return "another thread".to_owned();
    }
    if words.chars().count() > 60 {
        let cut: String = words.chars().take(59).collect();
        return format!("{}…", cut.trim_end());
    }
    words
}

fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line of the plan message about an overlap with `other`.
pub fn plan_line(other: &ThreadRef, overlap: &Overlap) -> String {
    match overlap {
        Overlap::SameFile(files) => {
            format!("⚠️ Also changes {}: {}", code_list(files), other.markdown())
        }
        Overlap::SameDirectory(dirs) => format!(
            "⚠️ Also changes files in {}: {}",
            code_list(dirs),
            other.markdown()
        ),
    }
}

/// One line of the plan message about a thread the PM judged may interact with the plan.
pub fn semantic_line(other: &ThreadRef, reason: &str) -> String {
    format!("⚠️ May interact with {}: {reason}", other.markdown())
}

/// The plan message's overlap block: its lines, then a reminder that approving is still
/// possible; empty without lines.
pub fn plan_block(lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "{}\n\nYou can still approve; whichever pull request merges second may need a rebase.",
        lines.join("\n")
    )
}

/// After a run: this thread now overlaps `other` in a way it was never told.
pub fn overlap_notice(other: &ThreadRef, overlap: &Overlap) -> String {
    match overlap {
        Overlap::SameFile(files) => format!(
            "⚠️ This thread and {} both change {} now.",
            other.markdown(),
            code_list(files)
        ),
        Overlap::SameDirectory(dirs) => format!(
            "⚠️ This thread and {} both change files in {} now.",
            other.markdown(),
            code_list(dirs)
        ),
    }
}

/// After a run: merging this branch with `other`'s (or, with `None`, the default branch,
/// named `default_branch` when known) would conflict in `files`.
pub fn conflict_notice(
    other: Option<&ThreadRef>,
    default_branch: Option<&str>,
    files: &[String],
) -> String {
    match other {
        Some(other) => format!(
            "⚠️ Merging this branch and {} would conflict in {}. Whichever merges second will need **rebase** and a look at those files.",
            other.markdown(),
            code_list(files)
        ),
        None => format!(
            "⚠️ This branch no longer merges cleanly into {}: {} would conflict. Reply **rebase** to bring it up to date.",
            default_branch.map_or_else(|| "the default branch".to_owned(), |b| format!("`{b}`")),
            code_list(files)
        ),
    }
}

/// After a merge: `merged` (whose PR is `pr`) changed what this thread also changes.
pub fn merged_notice(merged: &ThreadRef, pr: u64, overlap: &Overlap) -> String {
    let what = match overlap {
        Overlap::SameFile(files) => format!(
            "changed {}, which this thread also changes",
            code_list(files)
        ),
        Overlap::SameDirectory(dirs) => format!(
            "changed files in {}, where this thread also changes files",
            code_list(dirs)
        ),
    };
    let link = format!(
        "[{}]({})",
        label(merged.summary.as_deref()),
        thread_link(&merged.thread.channel, &merged.thread.thread_ts)
    );
    format!(
        "ℹ️ PR #{pr} ({link}) just merged and {what}. Reply **rebase** to bring this branch up to date."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn other(pr: Option<u64>) -> ThreadRef {
        ThreadRef {
            thread: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1700000000.000100".into(),
            },
            summary: Some("Fix the [login] timeout".into()),
            pr,
        }
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|i| (*i).to_owned()).collect()
    }

    #[test]
    fn the_texts_people_read() {
        let file = Overlap::SameFile(v(&["auth/login.go"]));
        let dir = Overlap::SameDirectory(v(&["auth/"]));
        let texts = [
            plan_block(&[
                plan_line(&other(Some(42)), &file),
                plan_line(&other(None), &dir),
                semantic_line(&other(Some(7)), "Both change how passwords are checked."),
            ]),
            overlap_notice(&other(Some(42)), &file),
            overlap_notice(&other(None), &dir),
            conflict_notice(Some(&other(Some(42))), None, &v(&["auth/login.go"])),
            conflict_notice(None, Some("origin/main"), &v(&["a.go", "b.go"])),
            conflict_notice(None, None, &v(&["a.go"])),
            merged_notice(&other(Some(42)), 42, &file),
            merged_notice(&other(Some(42)), 42, &dir),
        ];
        insta::assert_snapshot!(texts.join("\n\n---\n\n"));
    }

    #[test]
    fn labels_are_plain_and_short() {
        assert_eq!(label(None), "another thread");
        assert_eq!(label(Some("  ")), "another thread");
        assert_eq!(label(Some("a](http://x) <!here>")), "a http://x !here");
        let long = "word ".repeat(30);
        let cut = label(Some(&long));
        assert!(cut.ends_with('…') && cut.chars().count() <= 60, "{cut}");
        assert!(plan_block(&[]).is_empty());
    }
}
