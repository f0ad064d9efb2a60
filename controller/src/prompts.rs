//! Role system prompts, assembled from the repository's files on every use so edits take
//! effect at once: the PM's is `.codebutler/prompts/pm.md` + `shared.md` + the PM's memory (as
//! the default branch's latest commit holds it, read by [`crate::memory::source`] and passed
//! in); the Coder's is `coder.md` (with the notes approved in threads that the default
//! branch's `coder.md` holds and it lacks) + `shared.md` (its plan comes as the first user
//! message); the memory extraction's is `memory-extraction.md`; the Artist's is `artist.md` +
//! `shared.md` + its memory (`artist.md` of the memory).
//!
//! A prompt goes into every model request, and the Coder's into the untrusted runner, so a
//! prompt file is never read through a link (a merged pull request could make `shared.md` a
//! link to the daemon's config, or `coder.md` one to `/proc/self/environ`). Each file is read
//! with [`crate::repo_files`]: the working copy's, when it is a regular file reached without
//! a link (an edit there takes effect at once); else the default branch's committed
//! version, when it is a regular blob; else the shipped default. A file refused on the way
//! is logged, and so is one over [`MAX_PROMPT_BYTES`] or not UTF-8.

use std::path::Path;

use crate::domain::memory_ops::{self, Category, Op};
use crate::layout::{DEFAULT_PROMPTS, Layout, PROMPTS_DIR};
use crate::repo_files::{self, Found};

/// The longest prompt file read; a longer one is passed over for the next source.
pub const MAX_PROMPT_BYTES: u64 = 256 * 1024;

/// Assembles the PM's system prompt for the repository, with its `memory`.
pub async fn pm_system_prompt(layout: &Layout, memory: &str) -> String {
    let [role, shared] = read_prompts(layout, ["pm.md", "shared.md"]).await;
    let mut prompt = role;
    prompt.push_str("\n\n");
    prompt.push_str(&shared);
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

/// Assembles the Artist's system prompt for the repository: `artist.md` + `shared.md` + its
/// `memory` (the visual style learned in earlier threads).
pub async fn artist_system_prompt(layout: &Layout, memory: &str) -> String {
    let [role, shared] = read_prompts(layout, ["artist.md", "shared.md"]).await;
    let mut prompt = format!("{role}\n\n{shared}");
    if !memory.trim().is_empty() {
        prompt.push_str("\n\n# Visual style (learned in earlier threads)\n\n");
        prompt.push_str(memory.trim());
    }
    prompt
}

/// The memory extraction's prompt template (`memory-extraction.md`, with `{memory}` and
/// `{history}` to fill in).
pub async fn memory_extraction_template(layout: &Layout) -> String {
    let [template] = read_prompts(layout, ["memory-extraction.md"]).await;
    template
}

/// Assembles the Coder's system prompt for the repository, with the project's
/// `pr_instructions` (`changesWorkflow.prInstructions`) for the pull request it opens.
pub async fn coder_system_prompt(layout: &Layout, pr_instructions: Option<&str>) -> String {
    let [role, shared] = read_prompts(layout, ["coder.md", "shared.md"]).await;
    let role = with_approved_notes(role, &committed_notes(layout).await);
    let prompt = format!(
        "{role}\n\n{shared}\n\nYou work in a git worktree of the repository, which is your current directory. \
         Paths you pass to tools are relative to it. Your tools run inside a sandbox without network access."
    );
    with_pr_instructions(prompt, pr_instructions)
}

/// `prompt` with the project's instructions for its pull requests at the end, when it has
/// some (the operator's text, set apart under its own heading).
pub fn with_pr_instructions(mut prompt: String, pr_instructions: Option<&str>) -> String {
    if let Some(text) = pr_instructions.map(str::trim).filter(|t| !t.is_empty()) {
        prompt.push_str(
            "\n\n## This project's instructions for pull requests\n\
             When you open a pull request with OpenPR, its title and body follow these \
             instructions from the project's configuration:\n\n",
        );
        prompt.push_str(text);
    }
    prompt
}

/// The Coder's notes approved in threads: the "Notes from the team" section of `coder.md`
/// as the default branch holds it (memory lands there through a merge, while the working
/// copy keeps the file as seeded or edited on the host).
async fn committed_notes(layout: &Layout) -> String {
    let repo = layout.repo.clone();
    let read = tokio::task::spawn_blocking(move || {
        let tip = repo_files::default_branch_tip(&repo)?;
        committed_prompt(&repo, &tip, "coder.md")
    })
    .await;
    match read {
        Ok(text) => text.map_or_else(String::new, |t| {
            memory_ops::section_text(&t, Category::Coder)
        }),
        Err(e) => {
            tracing::warn!("read the Coder's approved notes: {e}");
            String::new()
        }
    }
}

/// `role` with each line of `notes` it lacks added to its "Notes from the team" section
/// (made at its end when it has none), so an approved note reaches the Coder even where
/// the working copy's `coder.md` predates it, and is never there twice.
fn with_approved_notes(role: String, notes: &str) -> String {
    let ops: Vec<Op> = notes
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| Op::Append {
            line: line.to_owned(),
            category: Category::Coder,
        })
        .collect();
    if ops.is_empty() {
        return role;
    }
    match memory_ops::apply(&role, &ops) {
        Ok(text) => text.trim_end().to_owned(),
        Err(e) => {
            tracing::warn!("add the approved notes to the Coder's prompt: {e}");
            role
        }
    }
}

/// The prompt file `name` as committed at `tip`, when it is a usable regular blob there.
/// Blocking.
fn committed_prompt(repo: &Path, tip: &str, name: &str) -> Option<String> {
    let path = format!("{PROMPTS_DIR}/{name}");
    usable(&path, "on the default branch", || {
        let repository =
            git2::Repository::open(repo).map_err(|source| repo_files::RepoFileError::Git {
                path: path.clone(),
                commit: tip.to_owned(),
                source,
            })?;
        let commit = git2::Oid::from_str(tip).map_err(|source| repo_files::RepoFileError::Git {
            path: path.clone(),
            commit: tip.to_owned(),
            source,
        })?;
        repo_files::committed(&repository, commit, &path, MAX_PROMPT_BYTES)
    })
}

/// The prompt files `names`, each from the first source that has it (see the module doc),
/// trimmed at the end. The reads are blocking (git, files), so they run off the runtime.
async fn read_prompts<const N: usize>(layout: &Layout, names: [&'static str; N]) -> [String; N] {
    let repo = layout.repo.clone();
    let read = tokio::task::spawn_blocking(move || {
        let tip = repo_files::default_branch_tip(&repo);
        names.map(|name| read_prompt(&repo, tip.as_deref(), name))
    })
    .await;
    match read {
        Ok(texts) => texts,
        Err(e) => {
            tracing::warn!("read the prompts: {e}; using the defaults");
            names.map(|name| default_prompt(name).trim_end().to_owned())
        }
    }
}

/// The prompt file `name`: the working copy's, else the one committed at `tip` (the default
/// branch), else the shipped default. Blocking.
fn read_prompt(repo: &Path, tip: Option<&str>, name: &str) -> String {
    let path = format!("{PROMPTS_DIR}/{name}");
    if let Some(text) = usable(&path, "in the working copy", || {
        repo_files::working(repo, &path, MAX_PROMPT_BYTES)
    }) {
        return text;
    }
    if let Some(text) = tip.and_then(|tip| committed_prompt(repo, tip, name)) {
        return text;
    }
    default_prompt(name).trim_end().to_owned()
}

/// The text `read` found at `path` (`place` says where, for the log): `None` when there is
/// none, or when what is there is refused, unreadable or not UTF-8 (each logged).
fn usable(
    path: &str,
    place: &str,
    read: impl FnOnce() -> Result<Found, repo_files::RepoFileError>,
) -> Option<String> {
    match read() {
        Ok(Found::File(bytes)) => match String::from_utf8(bytes) {
            Ok(text) => Some(text.trim_end().to_owned()),
            Err(_) => {
                tracing::warn!("{path} {place} is not UTF-8 text; not used");
                None
            }
        },
        Ok(Found::Absent) => None,
        Ok(Found::Refused(why)) => {
            tracing::warn!("{path} {place} is {why}; not read");
            None
        }
        Err(e) => {
            tracing::warn!("{e}; {path} {place} not used");
            None
        }
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use codebutler_test_support::git;

    use super::*;

    #[test]
    fn the_projects_pr_instructions_end_the_coders_prompt() {
        assert_eq!(
            with_pr_instructions("Role.".into(), Some("  Name the ticket.\n")),
            "Role.\n\n## This project's instructions for pull requests\nWhen you open a pull \
             request with OpenPR, its title and body follow these instructions from the \
             project's configuration:\n\nName the ticket."
        );
        assert_eq!(with_pr_instructions("Role.".into(), Some("  ")), "Role.");
        assert_eq!(with_pr_instructions("Role.".into(), None), "Role.");
    }

    #[tokio::test]
    async fn prompt_joins_role_shared_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        layout.init().unwrap();
        std::fs::write(layout.prompts().join("pm.md"), "ROLE PROMPT").unwrap();
        std::fs::write(layout.prompts().join("shared.md"), "SHARED").unwrap();
        let without = pm_system_prompt(&layout, "  \n").await;
        assert!(without.starts_with("ROLE PROMPT\n\nSHARED"), "{without}");
        assert!(!without.contains("# Memory"));
        let with = pm_system_prompt(&layout, "deploys go through make ship\n").await;
        assert!(
            with.contains("# Memory (learned in earlier threads)\n\ndeploys go through make ship")
        );
    }

    #[test]
    fn approved_notes_are_added_once_to_the_coders_prompt() {
        let notes = "- Run make lint before committing\n";
        assert_eq!(
            with_approved_notes("You are the Coder.".into(), notes),
            "You are the Coder.\n\n## Notes from the team\n\n- Run make lint before committing"
        );
        let has =
            "You are the Coder.\n\n## Notes from the team\n\n- Run make lint before committing";
        assert_eq!(with_approved_notes(has.into(), notes), has);
        assert_eq!(with_approved_notes("Role.".into(), ""), "Role.");
    }

    #[tokio::test]
    async fn the_coders_prompt_gets_the_notes_merged_on_the_default_branch() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git::init(&repo);
        let layout = Layout::new(&repo);
        layout.init().unwrap();
        // The working copy keeps its seeded prompt; the default branch holds the approved note.
        git::commit_files(
            &repo,
            &[(
                ".codebutler/prompts/coder.md",
                "Committed role.\n\n## Notes from the team\n\n- Run make lint before committing\n",
            )],
            "memory",
        );
        std::fs::write(layout.prompts().join("coder.md"), "Working copy role.\n").unwrap();
        let prompt = coder_system_prompt(&layout, None).await;
        assert!(
            prompt.starts_with(
                "Working copy role.\n\n## Notes from the team\n\n- Run make lint before committing\n\n"
            ),
            "{prompt}"
        );
        assert_eq!(prompt.matches("Run make lint").count(), 1, "{prompt}");
    }

    #[test]
    fn every_prompt_read_has_a_default() {
        for name in ["pm.md", "shared.md", "coder.md", "memory-extraction.md"] {
            assert!(!default_prompt(name).trim().is_empty(), "{name}");
        }
    }

    #[tokio::test]
    async fn an_unreadable_prompt_falls_back_to_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        layout.init().unwrap();
        std::fs::write(layout.prompts().join("pm.md"), [0xff, 0xfe, b'x']).unwrap();
        let prompt = pm_system_prompt(&layout, "").await;
        assert!(prompt.starts_with("You are the PM"), "{prompt}");
    }

    #[tokio::test]
    async fn missing_prompt_falls_back_to_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let prompt = pm_system_prompt(&layout, "").await;
        assert!(prompt.starts_with("You are the PM"), "{prompt}");
        let coder = coder_system_prompt(&layout, None).await;
        assert!(coder.starts_with("You are the Coder"), "{coder}");
        assert!(coder.contains("## The team"), "{coder}");
    }

    /// A prompt made a link — to a secret outside, to `/proc/self/environ` — is never read
    /// through: the default branch's committed regular file stands in for the working copy's
    /// link, and the shipped default for a link committed on the default branch too. An
    /// edit of the working copy that is a regular file wins over the committed one.
    #[tokio::test]
    async fn prompts_are_never_read_through_links() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("config.json");
        std::fs::write(&secret, "xoxb-outside-secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        let repo = git::init(&root);
        let layout = Layout::new(&root);
        let prompts = layout.prompts();
        std::fs::create_dir_all(&prompts).unwrap();
        std::fs::write(prompts.join("pm.md"), "COMMITTED PM").unwrap();
        std::fs::write(prompts.join("shared.md"), "COMMITTED SHARED").unwrap();
        symlink("/proc/self/environ", prompts.join("coder.md")).unwrap();
        git::commit_all(&repo, "prompts");
        // The working copy: pm.md edited, shared.md swapped for a link out (uncommitted).
        std::fs::write(prompts.join("pm.md"), "EDITED PM").unwrap();
        std::fs::remove_file(prompts.join("shared.md")).unwrap();
        symlink(&secret, prompts.join("shared.md")).unwrap();
        let pm = pm_system_prompt(&layout, "").await;
        assert!(pm.starts_with("EDITED PM\n\nCOMMITTED SHARED"), "{pm}");
        assert!(!pm.contains("outside-secret"), "{pm}");

        let coder = coder_system_prompt(&layout, None).await;
        assert!(coder.starts_with("You are the Coder"), "{coder}");
        assert!(coder.contains("COMMITTED SHARED"), "{coder}");
        assert!(!coder.contains("PATH="), "{coder}");

        // Committed as a link too: the shipped default.
        git::commit_all(&repo, "shared is a link now");
        let pm = pm_system_prompt(&layout, "").await;
        assert!(pm.starts_with("EDITED PM\n\n"), "{pm}");
        assert!(pm.contains(default_prompt("shared.md").trim_end()), "{pm}");
        assert!(!pm.contains("outside-secret"), "{pm}");
    }
}
