//! The operations a memory proposal is made of — `append` a line under a section, `replace`
//! an exact line, `none` — as the extraction model writes them ([`parse`]) and as they change
//! the memory file ([`apply`]). They are the domain's because the store keeps a proposal's
//! operations as well as memory making and applying them.
//!
//! Parsing is all or nothing: one malformed operation (unknown op or category, an empty or
//! multi-line line, a `replace` whose `old` is not an exact line of the memory) refuses the
//! whole answer, so a half-understood answer never becomes half a proposal. Pure, so it is
//! tested by equality and by properties.

use serde::{Deserialize, Serialize};

/// Longest line accepted (characters): memory lines are one short sentence each.
pub const MAX_LINE_CHARS: usize = 400;
/// Most operations one proposal may hold.
pub const MAX_OPS: usize = 20;

/// The section an appended line goes under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// `## Project Knowledge`: decisions, conventions, gotchas.
    Project,
    /// `## Planning Notes`: what the PM should settle while planning next time.
    Planning,
    /// `## Working with Other Roles`: what the other roles need from the PM.
    Roles,
    /// `## Workflows`: how the PM goes about a kind of request (a refinement of a seeded
    /// workflow, or one the team made its own).
    Workflows,
    /// `## Notes from the team` of the Coder's prompt (`.codebutler/prompts/coder.md`,
    /// [`MemoryFile::CoderPrompt`]): a coding convention the Coder should follow.
    Coder,
    /// `## Visual Style` of the Artist's memory (`.codebutler/memory/artist.md`,
    /// [`MemoryFile::Artist`]): what people approved or corrected in the images drawn.
    Artist,
}

/// The file an operation changes: the PM's memory, or the Coder's prompt (the Coder has no
/// memory file of its own; what it should know goes into the prompt the team maintains).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryFile {
    /// `.codebutler/memory/pm.md`.
    Pm,
    /// `.codebutler/prompts/coder.md`.
    CoderPrompt,
    /// `.codebutler/memory/artist.md`.
    Artist,
}

impl MemoryFile {
    /// Every file, in the order a proposal's changes are read and shown.
    pub const ALL: [MemoryFile; 3] = [MemoryFile::Pm, MemoryFile::CoderPrompt, MemoryFile::Artist];
}

impl Category {
    /// Every category, in the order their sections appear in the file.
    pub const ALL: [Category; 6] = [
        Category::Project,
        Category::Planning,
        Category::Roles,
        Category::Workflows,
        Category::Coder,
        Category::Artist,
    ];

    /// The section heading's title.
    pub fn title(self) -> &'static str {
        match self {
            Self::Project => "Project Knowledge",
            Self::Planning => "Planning Notes",
            Self::Roles => "Working with Other Roles",
            Self::Workflows => "Workflows",
            Self::Coder => "Notes from the team",
            Self::Artist => "Visual Style",
        }
    }

    /// The file the category's section is in.
    pub fn file(self) -> MemoryFile {
        match self {
            Self::Coder => MemoryFile::CoderPrompt,
            Self::Artist => MemoryFile::Artist,
            Self::Project | Self::Planning | Self::Roles | Self::Workflows => MemoryFile::Pm,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "project" => Some(Self::Project),
            "planning" => Some(Self::Planning),
            "roles" => Some(Self::Roles),
            "workflows" => Some(Self::Workflows),
            "coder" => Some(Self::Coder),
            "artist" => Some(Self::Artist),
            _ => None,
        }
    }
}

/// One change to the memory file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    /// Add `line` at the end of `category`'s section.
    Append { line: String, category: Category },
    /// Replace the exact line `old` of the PM's memory by `new`.
    Replace { old: String, new: String },
}

impl Op {
    /// The file the operation changes (a replace changes the PM's memory: the Coder's notes
    /// are only ever added to, and edited by people in the file itself).
    pub fn file(&self) -> MemoryFile {
        match self {
            Self::Append { category, .. } => category.file(),
            Self::Replace { .. } => MemoryFile::Pm,
        }
    }
}

/// The operations of `ops` that change `file`, in order.
pub fn for_file(ops: &[Op], file: MemoryFile) -> Vec<Op> {
    ops.iter().filter(|op| op.file() == file).cloned().collect()
}

/// Why the model's answer or an operation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpsError {
    #[error("the answer is not a JSON array of operations: {0}")]
    NotJson(String),
    #[error("operation {index} is not an object with an \"op\" field")]
    NotAnOp { index: usize },
    #[error("operation {index} is {op:?}, which is not append, replace or none")]
    UnknownOp { index: usize, op: String },
    #[error(
        "operation {index} has the category {category:?}, which is not project, planning, roles, workflows, coder or artist"
    )]
    UnknownCategory { index: usize, category: String },
    #[error("operation {index} has no {field:?}")]
    Missing { index: usize, field: &'static str },
    #[error("{0}")]
    BadLine(#[from] LineError),
    #[error("the line to replace is not a line of the memory: {0:?}")]
    NoSuchLine(String),
    #[error("{count} operations are more than the {MAX_OPS} a proposal may hold")]
    TooMany { count: usize },
    #[error("the line {0:?} is replaced twice, or replaced and also written by the proposal")]
    Conflict(String),
}

/// Why a line cannot go into the memory file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("a memory line cannot be empty")]
    Empty,
    #[error("a memory line must be one line: {0:?}")]
    MultiLine(String),
    #[error("a memory line must be under {MAX_LINE_CHARS} characters")]
    TooLong,
    #[error("a memory line cannot be a heading: {0:?}")]
    Heading(String),
}

/// `text` as a line of the memory file: trimmed, one line, not a heading, not too long, and a
/// `- ` bullet (added when it has none).
pub fn check_line(text: &str) -> Result<String, LineError> {
    let line = text.trim();
    if line.is_empty() {
        return Err(LineError::Empty);
    }
    if line.contains(['\n', '\r']) {
        return Err(LineError::MultiLine(line.to_owned()));
    }
    if line.chars().count() > MAX_LINE_CHARS {
        return Err(LineError::TooLong);
    }
    if line.starts_with('#') {
        return Err(LineError::Heading(line.to_owned()));
    }
    let line = match line.strip_prefix('-') {
        Some(rest) if rest.is_empty() || rest.starts_with(char::is_whitespace) => rest.trim(),
        _ => line,
    };
    if line.is_empty() {
        return Err(LineError::Empty);
    }
    Ok(format!("- {line}"))
}

/// The model's answer as operations, checked against `memory` (the file they will apply
/// to). The answer is a JSON array, possibly inside a Markdown code fence; `none` items add
/// nothing. Any bad item refuses the whole answer.
pub fn parse(answer: &str, memory: &str) -> Result<Vec<Op>, OpsError> {
    let json = unfence(answer);
    let items: Vec<serde_json::Value> =
        serde_json::from_str(json).map_err(|e| OpsError::NotJson(e.to_string()))?;
    let mut ops = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let index = i + 1;
        let field = |name: &'static str| {
            item.get(name)
                .and_then(serde_json::Value::as_str)
                .ok_or(OpsError::Missing { index, field: name })
        };
        let op = item
            .get("op")
            .and_then(serde_json::Value::as_str)
            .ok_or(OpsError::NotAnOp { index })?;
        match op {
            "none" => {}
            "append" => {
                let name = field("category")?;
                let category = Category::parse(name).ok_or_else(|| OpsError::UnknownCategory {
                    index,
                    category: name.to_owned(),
                })?;
                let line = check_line(field("line")?)?;
                ops.push(Op::Append { line, category });
            }
            "replace" => {
                let old = field("old")?;
                if !file_lines(memory).any(|l| l == old) || old.trim().is_empty() {
                    return Err(OpsError::NoSuchLine(old.to_owned()));
                }
                let new = check_line(field("new")?)?;
                ops.push(Op::Replace {
                    old: old.to_owned(),
                    new,
                });
            }
            other => {
                return Err(OpsError::UnknownOp {
                    index,
                    op: other.to_owned(),
                });
            }
        }
    }
    if ops.len() > MAX_OPS {
        return Err(OpsError::TooMany { count: ops.len() });
    }
    check_independent(&ops)?;
    Ok(ops)
}

/// Refuses operations that depend on each other: a line replaced twice, or replaced while
/// another operation writes it. Independent operations apply in any order to the same
/// result, and applying them again changes nothing (see [`apply`]).
pub fn check_independent(ops: &[Op]) -> Result<(), OpsError> {
    let written: Vec<&str> = ops
        .iter()
        .map(|op| match op {
            Op::Append { line, .. } => line.as_str(),
            Op::Replace { new, .. } => new.as_str(),
        })
        .collect();
    let mut replaced: Vec<&str> = Vec::new();
    for op in ops {
        if let Op::Replace { old, .. } = op {
            if replaced.contains(&old.as_str()) || written.contains(&old.as_str()) {
                return Err(OpsError::Conflict(old.clone()));
            }
            replaced.push(old);
        }
    }
    Ok(())
}

/// The JSON inside a ```` ```json ```` (or bare ```` ``` ````) fence, else the whole text.
fn unfence(answer: &str) -> &str {
    let text = answer.trim();
    let Some(start) = text.find("```") else {
        return text;
    };
    let after = &text[start + 3..];
    let body = match after.find('\n') {
        Some(newline) => &after[newline + 1..],
        None => after,
    };
    match body.find("```") {
        Some(end) => body[..end].trim(),
        None => body.trim(),
    }
}

/// `memory` with `ops` applied in order: appends go at the end of their section (a missing
/// section is created where the order Project Knowledge, Planning Notes, Working with Other
/// Roles puts it), replaces swap one exact line. A line already there is not written again
/// (an append of it, or a replace by it, does nothing), so applying [`check_independent`]
/// operations again changes nothing and a save retried after a crash never doubles a line.
/// Fails, changing nothing, when a line to replace is not there and neither is its
/// replacement (the memory changed since the proposal).
pub fn apply(memory: &str, ops: &[Op]) -> Result<String, OpsError> {
    let mut lines: Vec<String> = if memory.is_empty() {
        Vec::new()
    } else {
        file_lines(memory).map(str::to_owned).collect()
    };
    for op in ops {
        match op {
            Op::Append { line, .. } if lines.contains(line) => {}
            Op::Append { line, category } => append(&mut lines, *category, line),
            Op::Replace { new, .. } if lines.contains(new) => {}
            Op::Replace { old, new } => match lines.iter().position(|l| l == old) {
                Some(at) => lines[at] = new.clone(),
                None => return Err(OpsError::NoSuchLine(old.clone())),
            },
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    Ok(text)
}

/// The lines of a file as [`apply`] rewrites it: split at `\n` only (a `\r` stays part of
/// its line, so applying twice never eats one), the final newline optional.
fn file_lines(text: &str) -> impl Iterator<Item = &str> {
    text.strip_suffix('\n').unwrap_or(text).split('\n')
}

/// The non-blank lines of `category`'s section in `text`, one per line; empty when the
/// section is missing or empty.
pub fn section_text(text: &str, category: Category) -> String {
    let lines: Vec<String> = file_lines(text).map(str::to_owned).collect();
    let Some((start, end)) = section(&lines, category) else {
        return String::new();
    };
    lines[start + 1..end]
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The heading level and title of `line`, if it is a Markdown heading.
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|c| *c == '#').count();
    (level > 0 && line[level..].starts_with(' ')).then(|| (level, line[level..].trim()))
}

/// Where `category`'s section is: its heading's line and the line after its last line.
fn section(lines: &[String], category: Category) -> Option<(usize, usize)> {
    let (start, level) = lines.iter().enumerate().find_map(|(i, l)| {
        heading(l)
            .filter(|(_, title)| title.eq_ignore_ascii_case(category.title()))
            .map(|(level, _)| (i, level))
    })?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| heading(l).is_some_and(|(other, _)| other <= level))
        .map_or(lines.len(), |i| start + 1 + i);
    Some((start, end))
}

fn append(lines: &mut Vec<String>, category: Category, line: &str) {
    if let Some((start, end)) = section(lines, category) {
        match (start + 1..end)
            .rev()
            .find(|i| !lines[*i].trim().is_empty())
        {
            // After the section's last non-blank line.
            Some(last) => lines.insert(last + 1, line.to_owned()),
            // An empty section: the line between blank lines.
            None => {
                let mut block = vec![String::new(), line.to_owned()];
                if end < lines.len() {
                    block.push(String::new());
                }
                lines.splice(start + 1..end, block);
            }
        }
        return;
    }
    // A new section: before the first later category's section, else after the last earlier
    // one's, else at the end.
    let order = Category::ALL
        .iter()
        .position(|c| *c == category)
        .unwrap_or(0);
    let before = Category::ALL[order + 1..]
        .iter()
        .find_map(|c| section(lines, *c).map(|(start, _)| start));
    let after = Category::ALL[..order]
        .iter()
        .rev()
        .find_map(|c| section(lines, *c).map(|(_, end)| end));
    let at = before.or(after).unwrap_or(lines.len());
    let mut block = Vec::new();
    if at > 0 && !lines[at - 1].trim().is_empty() {
        block.push(String::new());
    }
    block.push(format!("## {}", category.title()));
    block.push(String::new());
    block.push(line.to_owned());
    if at < lines.len() && !lines[at].trim().is_empty() {
        block.push(String::new());
    }
    lines.splice(at..at, block);
}

#[cfg(test)]
mod tests {
    use super::*;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const MEMORY: &str = "# Memory\n\n## Project Knowledge\n\n- Tests use nextest\n\n## Planning Notes\n\n- Check the config first\n\n## Workflows\n\nBugfix: reproduce, fix, test.\n";

    fn append(line: &str, category: Category) -> Op {
        Op::Append {
            line: line.into(),
            category,
        }
    }

    #[test]
    fn parses_every_operation_and_fenced_answers() {
        let answer = r#"Here you go:
```json
[
  {"op": "append", "line": "- Deploys run make ship", "category": "project"},
  {"op": "append", "line": "Read src/auth.rs before auth plans", "category": "planning"},
  {"op": "append", "line": "- Name the test framework in plans", "category": "roles"},
  {"op": "replace", "old": "- Tests use nextest", "new": "- Tests use nextest, never cargo test"},
  {"op": "none"}
]
```"#;
        assert_eq!(
            parse(answer, MEMORY).unwrap(),
            vec![
                append("- Deploys run make ship", Category::Project),
                append("- Read src/auth.rs before auth plans", Category::Planning),
                append("- Name the test framework in plans", Category::Roles),
                Op::Replace {
                    old: "- Tests use nextest".into(),
                    new: "- Tests use nextest, never cargo test".into()
                },
            ]
        );
        assert_eq!(parse(r#"[{"op":"none"}]"#, MEMORY).unwrap(), vec![]);
        assert_eq!(parse("[]", MEMORY).unwrap(), vec![]);
    }

    #[test]
    fn workflows_and_coder_notes_are_categories_each_in_its_file() {
        let answer = r#"[
  {"op": "append", "line": "- **hotfix**: branch from the release tag", "category": "workflows"},
  {"op": "append", "line": "- Run make lint before committing", "category": "coder"},
  {"op": "replace", "old": "Bugfix: reproduce, fix, test.", "new": "Bugfix: reproduce, fix, test, then run make e2e."}
]"#;
        let ops = parse(answer, MEMORY).unwrap();
        assert_eq!(
            ops.iter().map(Op::file).collect::<Vec<_>>(),
            vec![MemoryFile::Pm, MemoryFile::CoderPrompt, MemoryFile::Pm]
        );
        assert_eq!(
            for_file(&ops, MemoryFile::CoderPrompt),
            vec![ops[1].clone()]
        );
        let pm = apply(MEMORY, &for_file(&ops, MemoryFile::Pm)).unwrap();
        assert!(
            pm.ends_with(
                "## Workflows\n\n- Bugfix: reproduce, fix, test, then run make e2e.\n\
                 - **hotfix**: branch from the release tag\n"
            ),
            "{pm}"
        );
        // The Coder's prompt gets a section of its own at its end.
        let prompt = "You are the Coder.\n\n## Restrictions\n\n- No network.\n";
        let coder = apply(prompt, &for_file(&ops, MemoryFile::CoderPrompt)).unwrap();
        assert_eq!(
            coder,
            "You are the Coder.\n\n## Restrictions\n\n- No network.\n\n\
             ## Notes from the team\n\n- Run make lint before committing\n"
        );
        assert_eq!(
            section_text(&coder, Category::Coder),
            "- Run make lint before committing\n"
        );
        assert_eq!(section_text(prompt, Category::Coder), "");
    }

    #[test]
    fn refuses_the_whole_answer_for_one_bad_operation() {
        let good = r#"{"op": "append", "line": "- ok", "category": "project"}"#;
        let cases: Vec<(String, OpsError)> = vec![
            (
                "not json".into(),
                OpsError::NotJson("expected ident at line 1 column 2".into()),
            ),
            (
                format!(r#"[{good}, {{"op": "delete", "line": "- x"}}]"#),
                OpsError::UnknownOp {
                    index: 2,
                    op: "delete".into(),
                },
            ),
            (
                format!(r#"[{good}, {{"op": "append", "line": "- x", "category": "gossip"}}]"#),
                OpsError::UnknownCategory {
                    index: 2,
                    category: "gossip".into(),
                },
            ),
            (
                r#"[{"op": "append", "line": "   ", "category": "project"}]"#.into(),
                OpsError::BadLine(LineError::Empty),
            ),
            (
                r#"[{"op": "append", "line": "- a\n- b", "category": "project"}]"#.into(),
                OpsError::BadLine(LineError::MultiLine("- a\n- b".into())),
            ),
            (
                r###"[{"op": "append", "line": "## New", "category": "project"}]"###.into(),
                OpsError::BadLine(LineError::Heading("## New".into())),
            ),
            (
                r#"[{"op": "replace", "old": "- Tests use", "new": "- x"}]"#.into(),
                OpsError::NoSuchLine("- Tests use".into()),
            ),
            (
                r#"[{"op": "append", "category": "project"}]"#.into(),
                OpsError::Missing {
                    index: 1,
                    field: "line",
                },
            ),
            (r#"[42]"#.into(), OpsError::NotAnOp { index: 1 }),
            (
                r#"{"op": "none"}"#.into(),
                OpsError::NotJson(
                    "invalid type: map, expected a sequence at line 1 column 0".into(),
                ),
            ),
        ];
        for (answer, expected) in cases {
            assert_eq!(parse(&answer, MEMORY), Err(expected), "{answer}");
        }
        for dependent in [
            r#"[{"op": "replace", "old": "- Tests use nextest", "new": "- a"}, {"op": "replace", "old": "- Tests use nextest", "new": "- b"}]"#,
            r#"[{"op": "replace", "old": "- Tests use nextest", "new": "- Check the config first"}, {"op": "replace", "old": "- Check the config first", "new": "- c"}]"#,
            r#"[{"op": "append", "line": "- Tests use nextest", "category": "planning"}, {"op": "replace", "old": "- Tests use nextest", "new": "- c"}]"#,
        ] {
            assert!(
                matches!(parse(dependent, MEMORY), Err(OpsError::Conflict(_))),
                "{dependent}"
            );
        }
        let many = format!("[{}]", vec![good; MAX_OPS + 1].join(","));
        assert_eq!(
            parse(&many, MEMORY),
            Err(OpsError::TooMany { count: MAX_OPS + 1 })
        );
    }

    #[test]
    fn appends_go_under_their_section_and_replaces_swap_exact_lines() {
        let ops = vec![
            append("- Deploys run make ship", Category::Project),
            append("- Read the config first", Category::Planning),
            Op::Replace {
                old: "- Tests use nextest".into(),
                new: "- Tests use nextest only".into(),
            },
        ];
        assert_eq!(
            apply(MEMORY, &ops).unwrap(),
            "# Memory\n\n## Project Knowledge\n\n- Tests use nextest only\n- Deploys run make ship\n\n## Planning Notes\n\n- Check the config first\n- Read the config first\n\n## Workflows\n\nBugfix: reproduce, fix, test.\n"
        );
    }

    #[test]
    fn missing_sections_are_created_in_order() {
        let roles = apply(MEMORY, &[append("- Say which tests", Category::Roles)]).unwrap();
        assert_eq!(
            roles,
            "# Memory\n\n## Project Knowledge\n\n- Tests use nextest\n\n## Planning Notes\n\n- Check the config first\n\n## Working with Other Roles\n\n- Say which tests\n\n## Workflows\n\nBugfix: reproduce, fix, test.\n"
        );
        let only_roles = "## Working with Other Roles\n\n- a\n";
        assert_eq!(
            apply(only_roles, &[append("- p", Category::Project)]).unwrap(),
            "## Project Knowledge\n\n- p\n\n## Working with Other Roles\n\n- a\n"
        );
        assert_eq!(
            apply("", &[append("- p", Category::Planning)]).unwrap(),
            "## Planning Notes\n\n- p\n"
        );
    }

    #[test]
    fn a_replace_of_a_line_gone_since_changes_nothing() {
        let ops = vec![
            append("- x", Category::Project),
            Op::Replace {
                old: "- gone".into(),
                new: "- y".into(),
            },
        ];
        assert_eq!(
            apply(MEMORY, &ops),
            Err(OpsError::NoSuchLine("- gone".into()))
        );
    }

    #[test]
    fn applying_twice_is_applying_once() {
        let ops = vec![
            append("- Deploys run make ship", Category::Project),
            append("- Tests use nextest", Category::Planning),
            Op::Replace {
                old: "- Check the config first".into(),
                new: "- Check the config and the env first".into(),
            },
        ];
        let once = apply(MEMORY, &ops).unwrap();
        assert_eq!(apply(&once, &ops).unwrap(), once);
        assert_eq!(once.matches("- Tests use nextest\n").count(), 1, "{once}");
    }

    #[test]
    fn carriage_returns_stay_as_they_are() {
        // Found by the `phrases` fuzz target: `str::lines` dropped a `\r` on each apply.
        let memory = "[]\r\r\r";
        let once = apply(memory, &[]).unwrap();
        assert_eq!(once, "[]\r\r\r\n");
        assert_eq!(apply(&once, &[]).unwrap(), once);
        let crlf = "## Project Knowledge\r\n- a\r\n";
        let ops = parse(
            r#"[{"op": "append", "line": "- b", "category": "planning"}]"#,
            crlf,
        )
        .unwrap();
        let once = apply(crlf, &ops).unwrap();
        assert_eq!(apply(&once, &ops).unwrap(), once);
    }

    #[test]
    fn lines_are_checked_and_bulleted() {
        assert_eq!(check_line("  use JWT "), Ok("- use JWT".into()));
        assert_eq!(check_line("- use JWT"), Ok("- use JWT".into()));
        assert_eq!(check_line("-  "), Err(LineError::Empty));
        assert_eq!(
            check_line(&"x".repeat(MAX_LINE_CHARS + 1)),
            Err(LineError::TooLong)
        );
    }

    /// Properties over random memories and operations: every appended line is in the result
    /// exactly once more than before, under its own section; nothing else is lost; applying
    /// is deterministic.
    #[test]
    fn property_appends_land_in_their_section_and_lose_nothing() {
        let mut rng = StdRng::seed_from_u64(10);
        let words = ["deploy", "auth", "tests", "JWT", "config", "ship", "ci"];
        for round in 0..300 {
            let mut memory = String::new();
            for category in Category::ALL {
                if rng.random_bool(0.6) {
                    memory.push_str(&format!("## {}\n\n", category.title()));
                    for _ in 0..rng.random_range(0..3) {
                        memory.push_str(&format!(
                            "- {} {}\n",
                            words[rng.random_range(0..words.len())],
                            rng.random_range(0..5)
                        ));
                    }
                    memory.push('\n');
                }
            }
            let ops: Vec<Op> = (0..rng.random_range(1..5))
                .map(|i| {
                    append(
                        &format!("- new {round} {i}"),
                        Category::ALL[rng.random_range(0..Category::ALL.len())],
                    )
                })
                .collect();
            let out = apply(&memory, &ops).unwrap();
            assert_eq!(apply(&memory, &ops).unwrap(), out);
            let lines: Vec<&str> = out.lines().collect();
            for op in &ops {
                let Op::Append { line, category } = op else {
                    unreachable!()
                };
                let at = lines.iter().position(|l| l == line).unwrap();
                let owner = lines[..at]
                    .iter()
                    .rev()
                    .find_map(|l| heading(l))
                    .map(|(_, title)| title);
                assert_eq!(
                    owner,
                    Some(category.title()),
                    "{memory:?} + {ops:?}:\n{out}"
                );
            }
            for old in memory.lines().filter(|l| !l.trim().is_empty()) {
                let before = memory.lines().filter(|l| *l == old).count();
                let after = lines.iter().filter(|l| **l == old).count();
                assert_eq!(before, after, "{old:?} in {memory:?} → {out:?}");
            }
            for category in Category::ALL {
                let heading = format!("## {}", category.title());
                assert!(lines.iter().filter(|l| **l == heading).count() <= 1);
            }
        }
    }
}
