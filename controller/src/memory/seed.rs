//! The memory files a repository starts with, before any thread taught it anything.
//!
//! Nothing is written to the repository on first run: the controller never pushes to the
//! default branch, and a file in the checkout would be invisible to the PM (which reads the
//! default branch's latest commit, [`super::source`]). Instead these texts are what the PM
//! reads while the default branch has no `.codebutler/memory/pm.md`, and the first approved
//! memory is applied to them, so the first memory commit (reviewed in its pull request)
//! writes the seeded file together with the approved lines.

use crate::domain::memory_ops::MemoryFile;
use crate::layout::DEFAULT_PROMPTS;

/// Where the PM's memory lives in the repository.
pub const PM_PATH: &str = ".codebutler/memory/pm.md";
/// Where the Artist's memory lives in the repository.
pub const ARTIST_PATH: &str = ".codebutler/memory/artist.md";
/// The Coder's prompt, whose "Notes from the team" approved memory adds to (the Coder has no
/// memory file of its own).
pub const CODER_PROMPT_PATH: &str = ".codebutler/prompts/coder.md";

/// `pm.md` before anything was learned: the three sections memory lines go into, and the
/// default workflows as living text the team edits like any other line (one line each, so
/// memory can refine one by replacing its line).
pub const PM_DEFAULT: &str = "\
# PM memory

What the team taught the PM, approved in Slack threads. Edit it like any file: changes reach
the PM once they are on the default branch.

## Project Knowledge

## Planning Notes

## Working with Other Roles

## Workflows

- **bugfix**: reproduce it first (find the failing path, read the code and its tests), name the cause with `path:line`, plan the smallest fix plus a test that fails without it.
- **feature**: settle what it does and where it lives before planning; read the nearest existing feature and follow its patterns; the plan lists files, steps and tests.
- **question**: answer from the code you read, citing `path:line`; no plan, no Coder.
- **refactor**: state what must not change (behaviour, public API), plan small steps that each keep the tests green, and say how the result is checked.
";

/// `artist.md` before anything was learned.
pub const ARTIST_DEFAULT: &str = "\
# Artist memory

## Visual Style

## Formats and Sizes

## Working with Other Roles
";

/// The seeded text of the memory file at `path`, if it is one this module seeds (the
/// Coder's prompt starts as the shipped one).
pub fn default_for(path: &str) -> Option<&'static str> {
    match path {
        PM_PATH => Some(PM_DEFAULT),
        ARTIST_PATH => Some(ARTIST_DEFAULT),
        CODER_PROMPT_PATH => DEFAULT_PROMPTS
            .iter()
            .find(|(name, _)| *name == "coder.md")
            .map(|(_, text)| *text),
        _ => None,
    }
}

/// Where the memory file `file` lives in the repository.
pub fn path_of(file: MemoryFile) -> &'static str {
    match file {
        MemoryFile::Pm => PM_PATH,
        MemoryFile::CoderPrompt => CODER_PROMPT_PATH,
        MemoryFile::Artist => ARTIST_PATH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::memory_ops::{Category, Op, apply};

    #[test]
    fn the_pm_seed_has_every_section_and_the_default_workflows() {
        for category in Category::ALL
            .into_iter()
            .filter(|c| c.file() == MemoryFile::Pm)
        {
            assert!(
                PM_DEFAULT.contains(&format!("\n## {}\n", category.title())),
                "{category:?}"
            );
        }
        for workflow in ["bugfix", "feature", "question", "refactor"] {
            assert!(
                PM_DEFAULT.contains(&format!("- **{workflow}**:")),
                "{workflow}"
            );
        }
        assert_eq!(default_for(PM_PATH), Some(PM_DEFAULT));
        assert_eq!(default_for(ARTIST_PATH), Some(ARTIST_DEFAULT));
        assert_eq!(default_for("README.md"), None);
        // A workflow is one line, so a memory operation can replace it whole.
        assert_eq!(
            PM_DEFAULT.lines().filter(|l| l.starts_with("- **")).count(),
            4
        );
        assert!(
            PM_DEFAULT.lines().all(|l| !l.starts_with("  ")),
            "{PM_DEFAULT}"
        );
        assert!(
            default_for(CODER_PROMPT_PATH).is_some_and(|t| t.contains("Coder")),
            "the shipped Coder prompt"
        );
    }

    #[test]
    fn approved_lines_go_into_the_seeded_sections() {
        let out = apply(
            PM_DEFAULT,
            &[Op::Append {
                line: "- Read src/auth.rs first".into(),
                category: Category::Planning,
            }],
        )
        .unwrap();
        assert!(
            out.contains(
                "## Planning Notes\n\n- Read src/auth.rs first\n\n## Working with Other Roles"
            ),
            "{out}"
        );
    }
}
