//! A memory proposal as people see it in the thread ([`message`]) and the replies that edit
//! or settle it ([`parse_reply`], [`edit`]): `yes`, `no`, `remove 2`, `remove 1, 3`,
//! `add: <line>`, `add workflow: <line>`, `add coder: <line>`, `add artist: <line>`,
//! `change 2 to: <line>`,
//! case-insensitive. Anything else is not about the
//! proposal (it goes to the PM and the proposal stays open). A correction of an answer the
//! Coder got, `correct 2: <answer>` ([`parse_correction`]), becomes a planning note
//! ([`correction_note`]). Pure: the message is snapshot-tested and the grammar is a table.

use crate::domain::memory_ops::{
    Category, LineError, MemoryFile, Op, OpsError, check_independent, check_line,
};

/// A reply to an open proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Save every item.
    Yes,
    /// Save nothing.
    No,
    /// Drop these items (1-based, as listed).
    Remove(Vec<usize>),
    /// Add this line (as typed) under this category: project knowledge after `add:`, a
    /// workflow after `add workflow:`, a note for the Coder after `add coder:`, the
    /// Artist's visual style after `add artist:`.
    Add(String, Category),
    /// Replace item `n`'s line by this one (as typed).
    Change(usize, String),
}

/// Why an edit changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("there is no item {number}: the list has {count}")]
    OutOfRange { number: usize, count: usize },
    #[error("{0}")]
    Line(#[from] LineError),
    #[error("{0}")]
    Ops(#[from] OpsError),
}

/// The reply `text` makes to an open proposal, if it is one.
pub fn parse_reply(text: &str) -> Option<Reply> {
    let text = strip_mentions(text);
    let lower = text.to_lowercase();
    let bare = lower.trim_end_matches(['.', '!']).trim();
    match bare {
        "yes" => return Some(Reply::Yes),
        "no" => return Some(Reply::No),
        _ => {}
    }
    if let Some(rest) = lower.strip_prefix("remove ") {
        return parse_numbers(rest).map(Reply::Remove);
    }
    for (prefix, category) in [
        ("add:", Category::Project),
        ("add workflow:", Category::Workflows),
        ("add coder:", Category::Coder),
        ("add artist:", Category::Artist),
    ] {
        if lower.starts_with(prefix) {
            // The line as typed: its case is the person's.
            return Some(Reply::Add(text[prefix.len()..].trim().to_owned(), category));
        }
    }
    if let Some(rest) = lower.strip_prefix("change ") {
        let (number, _) = rest.split_once(" to:")?;
        let number = number.trim().parse().ok()?;
        let at = text.to_lowercase().find(" to:")? + " to:".len();
        return Some(Reply::Change(number, text[at..].trim().to_owned()));
    }
    None
}

/// "correct 2: <the right answer>" (case-insensitive): the number of the Coder's question
/// the usage report lists and the answer as typed.
pub fn parse_correction(text: &str) -> Option<(usize, String)> {
    let text = strip_mentions(text);
    let rest = text.get(.."correct ".len())?;
    if !rest.eq_ignore_ascii_case("correct ") {
        return None;
    }
    let (number, answer) = text["correct ".len()..].split_once(':')?;
    let number = number.trim().parse().ok().filter(|n| *n > 0)?;
    let answer = answer.trim();
    (!answer.is_empty()).then(|| (number, answer.to_owned()))
}

/// The planning note a correction makes: "Q: <question> — A: <answer>" on one line, each
/// part shortened so the line stays within [`crate::domain::memory_ops::MAX_LINE_CHARS`].
pub fn correction_note(question: &str, answer: &str) -> String {
    format!(
        "Q: {} — A: {}",
        one_line(question, 160),
        one_line(answer, 160)
    )
}

/// `text` on one line (whitespace collapsed), cut to `max` characters with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// `text` without leading `<@U…>` mentions and `@codebutler…` addresses, trimmed.
fn strip_mentions(text: &str) -> &str {
    let mut rest = text.trim();
    loop {
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..word_end];
        let mention = word.starts_with("<@") && word.ends_with('>');
        if !(mention || word.to_lowercase().starts_with("@codebutler")) || word.is_empty() {
            return rest;
        }
        rest = rest[word_end..].trim_start();
    }
}

/// "2", "1, 3", "1 and 3", "1 3": the numbers, each at least 1.
fn parse_numbers(text: &str) -> Option<Vec<usize>> {
    let numbers: Option<Vec<usize>> = text
        .split([',', ' '])
        .map(str::trim)
        .filter(|w| !w.is_empty() && *w != "and")
        .map(|w| w.parse::<usize>().ok().filter(|n| *n > 0))
        .collect();
    numbers.filter(|n| !n.is_empty())
}

/// `items` after the edit `reply` (not `Yes` or `No`, which settle the proposal and leave
/// the items as they are). A number out of range, a bad line, or a line that makes two items
/// depend on each other ([`check_independent`]) changes nothing.
pub fn edit(items: &[Op], reply: &Reply) -> Result<Vec<Op>, EditError> {
    let check = |number: usize| {
        if number == 0 || number > items.len() {
            Err(EditError::OutOfRange {
                number,
                count: items.len(),
            })
        } else {
            Ok(number - 1)
        }
    };
    let mut items = items.to_vec();
    match reply {
        Reply::Yes | Reply::No => {}
        Reply::Remove(numbers) => {
            let mut at = numbers
                .iter()
                .map(|n| check(*n))
                .collect::<Result<Vec<_>, _>>()?;
            at.sort_unstable();
            at.dedup();
            for i in at.into_iter().rev() {
                items.remove(i);
            }
        }
        Reply::Add(line, category) => items.push(Op::Append {
            line: check_line(line)?,
            category: *category,
        }),
        Reply::Change(number, line) => {
            let i = check(*number)?;
            let line = check_line(line)?;
            match &mut items[i] {
                Op::Append { line: old, .. } => *old = line,
                Op::Replace { new, .. } => *new = line,
            }
        }
    }
    check_independent(&items)?;
    Ok(items)
}

/// The proposal as posted in the thread (Markdown): the numbered items, then how to answer.
pub fn message(items: &[Op]) -> String {
    let mut text = String::from("📝 **Here's what I'd like to remember:**\n\n");
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        match item {
            Op::Append { line, category } => text.push_str(&format!(
                "{n}. ➕ {} _({})_\n",
                shown(line),
                match category.file() {
                    MemoryFile::Pm => category.title(),
                    MemoryFile::CoderPrompt => "for the Coder, in `coder.md`",
                    MemoryFile::Artist => "for the Artist, in `artist.md`",
                }
            )),
            Op::Replace { old, new } => {
                text.push_str(&format!("{n}. ✏️ {} → {}\n", shown(old), shown(new)));
            }
        }
    }
    text.push_str(
        "\nReply **yes** to save all, or tell me what to change (`remove 2`, `add: …`, \
         `add workflow: …`, `add coder: …`, `add artist: …`, `change 1 to: …`, `no`).",
    );
    text
}

/// A memory line without its bullet.
fn shown(line: &str) -> &str {
    line.trim().trim_start_matches("- ").trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items() -> Vec<Op> {
        vec![
            Op::Append {
                line: "- Deploys run make ship".into(),
                category: Category::Project,
            },
            Op::Append {
                line: "- Read src/auth.rs before planning auth work".into(),
                category: Category::Planning,
            },
            Op::Replace {
                old: "- Tests use nextest".into(),
                new: "- Tests use nextest, never cargo test".into(),
            },
        ]
    }

    #[test]
    fn the_grammar() {
        use Reply::*;
        let cases: Vec<(&str, Option<Reply>)> = vec![
            ("yes", Some(Yes)),
            ("YES", Some(Yes)),
            ("Yes!", Some(Yes)),
            ("<@U0BOT> yes", Some(Yes)),
            ("@codebutler.pm yes", Some(Yes)),
            ("no", Some(No)),
            ("No.", Some(No)),
            ("remove 2", Some(Remove(vec![2]))),
            ("Remove 1, 3", Some(Remove(vec![1, 3]))),
            ("remove 1 and 3", Some(Remove(vec![1, 3]))),
            ("remove 9", Some(Remove(vec![9]))),
            ("remove 0", None),
            ("remove two", None),
            ("remove", None),
            (
                "add: We use bcrypt, never MD5",
                Some(Add("We use bcrypt, never MD5".into(), Category::Project)),
            ),
            (
                "ADD:   Keep it",
                Some(Add("Keep it".into(), Category::Project)),
            ),
            (
                "add workflow: - **hotfix**: branch from the release tag",
                Some(Add(
                    "- **hotfix**: branch from the release tag".into(),
                    Category::Workflows,
                )),
            ),
            (
                "Add Coder: Run make lint before committing",
                Some(Add(
                    "Run make lint before committing".into(),
                    Category::Coder,
                )),
            ),
            (
                "change 2 to: Auth uses JWT except WebSockets",
                Some(Change(2, "Auth uses JWT except WebSockets".into())),
            ),
            ("Change 1 To: X", Some(Change(1, "X".into()))),
            ("change it to: x", None),
            ("yes but drop the second", None),
            ("no thanks, what about the tests?", None),
            ("how do we deploy?", None),
            ("yeah", None),
            ("add the docs too", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_reply(text), expected, "{text:?}");
        }
    }

    #[test]
    fn corrections() {
        assert_eq!(
            parse_correction("correct 2: JWT, always JWT"),
            Some((2, "JWT, always JWT".into()))
        );
        assert_eq!(
            parse_correction("<@U0BOT> Correct 10 : use tabs"),
            Some((10, "use tabs".into()))
        );
        for not in [
            "correct 0: x",
            "correct two: x",
            "correct 2:",
            "correct 2 x",
            "correctly",
        ] {
            assert_eq!(parse_correction(not), None, "{not}");
        }
        assert_eq!(
            correction_note("Which\n  auth pattern?", "JWT"),
            "Q: Which auth pattern? — A: JWT"
        );
        let long = correction_note(&"q".repeat(500), &"a".repeat(500));
        assert!(
            crate::domain::memory_ops::check_line(&long).is_ok(),
            "{long}"
        );
    }

    #[test]
    fn edits() {
        let all = items();
        assert_eq!(
            edit(&all, &Reply::Remove(vec![1, 3])).unwrap(),
            vec![all[1].clone()]
        );
        assert_eq!(
            edit(&all, &Reply::Remove(vec![2, 2])).unwrap(),
            vec![all[0].clone(), all[2].clone()]
        );
        let added = edit(&all, &Reply::Add("we use bcrypt".into(), Category::Project)).unwrap();
        assert_eq!(
            added.last(),
            Some(&Op::Append {
                line: "- we use bcrypt".into(),
                category: Category::Project
            })
        );
        let changed = edit(&all, &Reply::Change(3, "- nextest only".into())).unwrap();
        assert_eq!(
            changed[2],
            Op::Replace {
                old: "- Tests use nextest".into(),
                new: "- nextest only".into()
            }
        );
        let changed = edit(&all, &Reply::Change(1, "make deploy".into())).unwrap();
        assert_eq!(
            changed[0],
            Op::Append {
                line: "- make deploy".into(),
                category: Category::Project
            }
        );
        assert_eq!(
            edit(&all, &Reply::Remove(vec![1, 4])),
            Err(EditError::OutOfRange {
                number: 4,
                count: 3
            })
        );
        assert_eq!(
            edit(&all, &Reply::Change(7, "x".into())),
            Err(EditError::OutOfRange {
                number: 7,
                count: 3
            })
        );
        assert_eq!(
            edit(&all, &Reply::Add("  ".into(), Category::Project)),
            Err(EditError::Line(LineError::Empty))
        );
    }

    #[test]
    fn the_message() {
        insta::assert_snapshot!(message(&items()));
    }

    #[test]
    fn a_note_for_the_coder_says_where_it_goes() {
        let items = [
            Op::Append {
                line: "- Run make lint before committing".into(),
                category: Category::Coder,
            },
            Op::Append {
                line: "- **hotfix**: branch from the release tag".into(),
                category: Category::Workflows,
            },
        ];
        let text = message(&items);
        assert!(
            text.contains("1. ➕ Run make lint before committing _(for the Coder, in `coder.md`)_"),
            "{text}"
        );
        assert!(
            text.contains("2. ➕ **hotfix**: branch from the release tag _(Workflows)_"),
            "{text}"
        );
    }
}
