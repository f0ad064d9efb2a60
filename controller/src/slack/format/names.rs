//! A snippet's file name, inferred from the prose just before its code
//! block.
//!
//! Models usually say which file a block belongs to ("Replace
//! `src/auth/session.rs` with:"), and a snippet called `session.rs` is far
//! more useful in Slack than `snippet.rs`. [`NameHints`] keeps the plain text
//! of the last few blocks as the renderer walks the answer; when a code block
//! is extracted it looks there (newest first, then the last heading) for a
//! path-like token whose type agrees with the fence, and otherwise falls back
//! to the fence language's default name.

use super::is_blank;
use super::langs::{filetype_for_name, lookup_lang};

/// Further extensions accepted for a bare file name (one without a
/// directory), besides the fence-language aliases.
const OTHER_EXTS: &str = "\
    xml ini cfg conf env lock proto graphql gql vue svelte scss sass less lua php cs fs ex \
    exs erl hrl hs ml mli scala clj pl pm mod sum gradle tf tfvars ps1 bat cmd mk cmake nix \
    dart zig vim el csv tsv sol patch diff log plist properties service rst tex jl r sbt \
    dockerignore gitignore";

/// File names without an extension that are still clearly files.
const BARE_FILE_NAMES: &[&str] = &[
    "Makefile",
    "Dockerfile",
    "Containerfile",
    "Justfile",
    "Rakefile",
    "Gemfile",
    "Procfile",
    "Vagrantfile",
    "Jenkinsfile",
    "CODEOWNERS",
    ".gitignore",
    ".dockerignore",
    ".editorconfig",
    ".env",
];

/// Tokens that look like file names but are product names.
const NOT_FILES: &str = "\
    node.js vue.js next.js nuxt.js react.js express.js d3.js three.js chart.js ember.js \
    deno.js";

/// The prose a snippet's name may be found in.
#[derive(Default)]
pub(super) struct NameHints {
    /// Plain text of the current leaf block.
    block_text: String,
    /// Plain text of the last two text blocks since the last code block.
    recent: Vec<String>,
    last_heading: Option<String>,
}

impl NameHints {
    /// Records text of the current block.
    pub(super) fn push_text(&mut self, text: &str) {
        self.block_text.push_str(text);
    }

    /// Records inline code of the current block, as a separate token.
    pub(super) fn push_code(&mut self, code: &str) {
        self.block_text.push(' ');
        self.block_text.push_str(code);
        self.block_text.push(' ');
    }

    /// Records a line break in the current block.
    pub(super) fn push_break(&mut self) {
        self.block_text.push(' ');
    }

    /// Ends the current block: its text becomes the newest of the recent ones.
    pub(super) fn end_block(&mut self) {
        let text = std::mem::take(&mut self.block_text);
        if !is_blank(&text) {
            self.recent.push(text);
            if self.recent.len() > 2 {
                self.recent.remove(0);
            }
        }
    }

    /// Ends a heading, which is remembered until the next one.
    pub(super) fn end_heading(&mut self) {
        if !is_blank(&self.block_text) {
            self.last_heading = Some(self.block_text.clone());
        }
        self.end_block();
    }

    /// Forgets the recent blocks after a code block: prose before it does
    /// not describe the next one.
    pub(super) fn end_code_block(&mut self) {
        self.recent.clear();
    }

    /// File name and Slack file type for a snippet: a file mentioned just
    /// before the block (same or previous paragraph, or the last heading)
    /// whose type agrees with the fence, else `snippet.<ext>`.
    pub(super) fn infer(&self, lang_tag: &str) -> (String, String) {
        let lang = lookup_lang(lang_tag);
        let fence_type = lang.map(|l| l.filetype).filter(|t| *t != "text");
        let sources = self.recent.iter().rev().chain(self.last_heading.iter());
        for text in sources {
            for name in mentioned_files(text).into_iter().rev() {
                let name_type = filetype_for_name(&name);
                let agrees = match (fence_type, name_type) {
                    (Some(fence), Some(named)) => fence == named,
                    _ => true,
                };
                if agrees {
                    let filetype = fence_type.or(name_type).unwrap_or("text");
                    return (name, filetype.to_string());
                }
            }
        }
        match lang {
            Some(lang) => (lang.default_name(), lang.filetype.to_string()),
            None => ("snippet.txt".to_string(), "text".to_string()),
        }
    }
}

/// File names (last path component) of path-like tokens in `text`, in order.
fn mentioned_files(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "`\"'()[]{}<>,;*|".contains(c))
        .filter_map(file_name_of)
        .collect()
}

/// The file name in a token, if the token looks like a file or a path.
fn file_name_of(token: &str) -> Option<String> {
    if token.contains("://") {
        return None;
    }
    // `src/main.rs:42:7` → `src/main.rs`; drop sentence punctuation.
    let token = token.split(':').next()?.trim_end_matches(['.', '!', '?']);
    let has_dir = token.contains('/') || token.contains('\\');
    let base = token.rsplit(['/', '\\']).next()?;
    if base.is_empty() || base.len() > 100 {
        return None;
    }
    if !base
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '@'))
    {
        return None;
    }
    if BARE_FILE_NAMES.contains(&base) {
        return Some(base.to_string());
    }
    if NOT_FILES
        .split_whitespace()
        .any(|n| n.eq_ignore_ascii_case(base))
    {
        return None;
    }
    let (stem, ext) = base.rsplit_once('.')?;
    let ext_ok = (1..=10).contains(&ext.len())
        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
        && ext.chars().all(|c| c.is_ascii_alphanumeric());
    if !ext_ok || !stem.chars().any(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let lower = ext.to_ascii_lowercase();
    let known = lookup_lang(&lower).is_some() || OTHER_EXTS.split_whitespace().any(|e| e == lower);
    (has_dir || known).then(|| base.to_string())
}

#[cfg(test)]
mod tests {
    use crate::slack::format::render_reply;
    use crate::slack::format::test_support::{code_block, snippets, texts};

    #[test]
    fn filename_from_mentioned_path() {
        let md = format!(
            "Replace `src/auth/session.rs` with:\n\n{}",
            code_block("rust", 25)
        );
        let out = render_reply(&md, "");
        assert_eq!(
            snippets(&out),
            vec![("session.rs".to_string(), "rust".to_string())]
        );
        assert!(texts(&out)[0].ends_with("_(code uploaded as session.rs)_"));
    }

    #[test]
    fn filename_from_previous_paragraph_or_heading() {
        let md = format!(
            "The handler lives in handler.go.\n\nHere is the new version:\n\n{}",
            code_block("go", 20)
        );
        assert_eq!(
            snippets(&render_reply(&md, "")),
            vec![("handler.go".to_string(), "go".to_string())]
        );
        let md = format!("## Makefile\n\nUpdated:\n\n{}", code_block("", 20));
        assert_eq!(
            snippets(&render_reply(&md, "")),
            vec![("Makefile".to_string(), "text".to_string())]
        );
    }

    #[test]
    fn filename_ignores_mentions_of_another_language() {
        let md = format!(
            "After editing `Cargo.toml`, run:\n\n{}",
            code_block("bash", 20)
        );
        assert_eq!(
            snippets(&render_reply(&md, "")),
            vec![("snippet.sh".to_string(), "shell".to_string())]
        );
    }
}
