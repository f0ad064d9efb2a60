//! Role system prompts, assembled from the repository's files on every use so edits take
//! effect at once: the PM's is `.codebutler/prompts/pm.md` + `shared.md` + the PM's memory (as
//! the default branch's latest commit holds it, read by [`crate::memory::source`] and passed
//! in); the Coder's is `coder.md` + `shared.md` (its plan comes as the first user message); the
//! memory extraction's is `memory-extraction.md`. A missing prompt file falls back to the
//! shipped default.

use std::path::Path;

use crate::layout::{DEFAULT_PROMPTS, Layout};

/// Assembles the PM's system prompt for the repository, with its `memory`.
pub fn pm_system_prompt(layout: &Layout, memory: &str) -> String {
    let mut prompt = read_prompt(&layout.prompts(), "pm.md");
    prompt.push_str("\n\n");
    prompt.push_str(&read_prompt(&layout.prompts(), "shared.md"));
    if !memory.trim().is_empty() {
        prompt.push_str("\n\n# Memory (learned in earlier threads)\n\n");
        prompt.push_str(memory.trim());
    }
    // Deliberate: a repository at the file system's root has no name to give.
    let name = layout
        .repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    prompt.push_str(&format!(
        "\n\nRepository: {name}. Paths you pass to tools are relative to its root."
    ));
    prompt
}

/// The memory extraction's prompt template (`memory-extraction.md`, with `{memory}` and
/// `{history}` to fill in).
pub fn memory_extraction_template(layout: &Layout) -> String {
    read_prompt(&layout.prompts(), "memory-extraction.md")
}

/// Assembles the Coder's system prompt for the repository.
pub fn coder_system_prompt(layout: &Layout) -> String {
    format!(
        "{}\n\n{}\n\nYou work in a git worktree of the repository, which is your current directory. \
         Paths you pass to tools are relative to it. Your tools run inside a sandbox without network access.",
        read_prompt(&layout.prompts(), "coder.md"),
        read_prompt(&layout.prompts(), "shared.md")
    )
}

/// The prompt file `name` of `dir`, else the shipped default of that name.
fn read_prompt(dir: &Path, name: &str) -> String {
    match read_optional(&dir.join(name)) {
        Some(text) => text.trim_end().to_owned(),
        None => default_prompt(name).trim_end().to_owned(),
    }
}

/// The shipped default prompt `name` (every name this module reads has one; the test
/// `every_prompt_read_has_a_default` holds it to that).
fn default_prompt(name: &str) -> &'static str {
    DEFAULT_PROMPTS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, text)| text)
}

/// A file's text, or `None` when it is absent. A file that is there but cannot be read
/// (permissions, not UTF-8) is treated as absent too, but logged: the prompt then differs
/// from what its owner wrote.
fn read_optional(path: &Path) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!("read {}: {e}; using the default", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_joins_role_shared_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        layout.init().unwrap();
        std::fs::write(layout.prompts().join("pm.md"), "ROLE PROMPT").unwrap();
        std::fs::write(layout.prompts().join("shared.md"), "SHARED").unwrap();
        let without = pm_system_prompt(&layout, "  \n");
        assert!(without.starts_with("ROLE PROMPT\n\nSHARED"), "{without}");
        assert!(!without.contains("# Memory"));
        let with = pm_system_prompt(&layout, "deploys go through make ship\n");
        assert!(
            with.contains("# Memory (learned in earlier threads)\n\ndeploys go through make ship")
        );
    }

    #[test]
    fn every_prompt_read_has_a_default() {
        for name in ["pm.md", "shared.md", "coder.md", "memory-extraction.md"] {
            assert!(!default_prompt(name).trim().is_empty(), "{name}");
        }
    }

    #[test]
    fn an_unreadable_prompt_falls_back_to_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        layout.init().unwrap();
        std::fs::write(layout.prompts().join("pm.md"), [0xff, 0xfe, b'x']).unwrap();
        let prompt = pm_system_prompt(&layout, "");
        assert!(prompt.starts_with("You are the PM"), "{prompt}");
    }

    #[test]
    fn missing_prompt_falls_back_to_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let prompt = pm_system_prompt(&layout, "");
        assert!(prompt.starts_with("You are the PM"), "{prompt}");
        let coder = coder_system_prompt(&layout);
        assert!(coder.starts_with("You are the Coder"), "{coder}");
        assert!(coder.contains("## The team"), "{coder}");
    }
}
