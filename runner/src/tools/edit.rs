//! Edit: replaces an exact string in a worktree file, atomically.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::{atomic_write, resolve_for_write};
use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::schema::parameters;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use codebutler_agent::tools::path::RepoRoot;

const NAME: &str = "Edit";

/// Replaces text in an existing file of the worktree.
#[derive(Debug, Clone)]
pub struct EditTool {
    root: Arc<RepoRoot>,
}

/// Edit's arguments.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The file to change: an absolute path inside the worktree, or a path relative to the worktree root.
    file_path: String,
    /// The exact text to replace.
    old_string: String,
    /// The text to put in its place (must differ from old_string).
    new_string: String,
    /// Replace every occurrence instead of exactly one (default false).
    #[serde(default)]
    replace_all: bool,
}

impl EditTool {
    /// An Edit confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

fn invalid(reason: String) -> ToolError {
    ToolError::InvalidArguments {
        tool: NAME.to_owned(),
        reason,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "occurrence" } else { "occurrences" }
}

/// One replacement: MultiEdit's entries, and Edit's arguments without the file.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
struct Replacement {
    /// The exact text to replace.
    old_string: String,
    /// The text to put in its place.
    new_string: String,
    /// Replace every occurrence (default false).
    #[serde(default)]
    replace_all: bool,
}

/// Applies one replacement to `text` (in memory); returns the new text and the count.
fn replace(text: &str, rel: &str, r: &Replacement) -> Result<(String, usize), ToolError> {
    if r.old_string.is_empty() {
        return Err(invalid(
            "old_string is empty; to create a file use Write".to_owned(),
        ));
    }
    if r.old_string == r.new_string {
        return Err(invalid(
            "old_string and new_string are identical; there is nothing to change".to_owned(),
        ));
    }
    let (mut old, mut new) = (r.old_string.clone(), r.new_string.clone());
    let mut count = text.matches(old.as_str()).count();
    // Models write `\n`; a file with Windows line endings still matches, and keeps them.
    if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
        old = old.replace('\n', "\r\n");
        new = new.replace('\n', "\r\n");
        count = text.matches(old.as_str()).count();
    }
    if count == 0 {
        return Err(invalid(format!(
            "old_string was not found in {rel}; it must match the file exactly, including whitespace and indentation (without Read's line-number prefix)"
        )));
    }
    if count > 1 && !r.replace_all {
        return Err(invalid(format!(
            "old_string occurs {count} times in {rel}; include more surrounding lines to make it unique, or set replace_all to true to replace every occurrence"
        )));
    }
    Ok(if r.replace_all {
        (text.replace(old.as_str(), &new), count)
    } else {
        (text.replacen(old.as_str(), &new, 1), 1)
    })
}

/// Reads a file, applies every replacement in order in memory, and writes the result once:
/// all of them or none.
fn apply(
    root: &RepoRoot,
    file_path: &str,
    edits: &[Replacement],
) -> Result<(String, usize), ToolError> {
    let target = resolve_for_write(root, file_path, false)?;
    let rel = target.rel.clone();
    if target.existing.is_none() {
        return Err(ToolError::NotFound(format!(
            "no such file: {rel}; use Write to create it"
        )));
    }
    let bytes = std::fs::read(&target.path)
        .map_err(|e| ToolError::Failed(format!("cannot read {rel}: {e}")))?;
    let mut text = String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "{rel} is not valid UTF-8 text; Edit only changes text files"
        ))
    })?;
    let mut replaced = 0;
    for (i, r) in edits.iter().enumerate() {
        let (updated, n) = replace(&text, &rel, r).map_err(|e| match (edits.len(), e) {
            (1, e) => e,
            (_, ToolError::InvalidArguments { reason, .. }) => invalid(format!(
                "edit {} of {}: {reason}; no edit was applied",
                i + 1,
                edits.len()
            )),
            (_, e) => e,
        })?;
        text = updated;
        replaced += n;
    }
    atomic_write(&target.path, text.as_bytes(), target.existing.as_ref())
        .map_err(|e| ToolError::Failed(format!("cannot write {rel}: {e}")))?;
    Ok((rel, replaced))
}

fn edit(root: &RepoRoot, args: &Args) -> Result<String, ToolError> {
    let r = Replacement {
        old_string: args.old_string.clone(),
        new_string: args.new_string.clone(),
        replace_all: args.replace_all,
    };
    let (rel, replaced) = apply(root, &args.file_path, std::slice::from_ref(&r))?;
    Ok(format!("replaced {replaced} {} in {rel}", plural(replaced)))
}

/// Several replacements in one file, all or nothing.
#[derive(Debug, Clone)]
pub struct MultiEditTool {
    root: Arc<RepoRoot>,
}

impl MultiEditTool {
    /// A MultiEdit confined to `root`.
    pub fn new(root: Arc<RepoRoot>) -> Self {
        Self { root }
    }
}

/// MultiEdit's arguments.
#[derive(Deserialize, JsonSchema)]
struct MultiArgs {
    /// The file to change: an absolute path inside the worktree, or a path relative to the worktree root.
    file_path: String,
    /// The replacements, in order.
    edits: Vec<Replacement>,
}

#[async_trait]
impl Tool for MultiEditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "MultiEdit",
            description: "Make several exact-string replacements in one file, in order, each applied to the result of the previous one. All or nothing: if any edit does not match (or is ambiguous without replace_all), the file is left unchanged.",
            parameters: parameters::<MultiArgs>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: MultiArgs = parse_args("MultiEdit", args)?;
        if args.edits.is_empty() {
            return Err(ToolError::InvalidArguments {
                tool: "MultiEdit".to_owned(),
                reason: "edits is empty".to_owned(),
            });
        }
        let root = Arc::clone(&self.root);
        let n = args.edits.len();
        let (rel, replaced) = codebutler_agent::tool::run_blocking("MultiEdit", move || {
            apply(&root, &args.file_path, &args.edits)
        })
        .await?;
        Ok(format!(
            "applied {n} edits ({replaced} {}) to {rel}",
            plural(replaced)
        ))
    }
}

#[async_trait]
impl Tool for EditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: "Replace an exact string in an existing file. old_string must match the file exactly (whitespace included, without Read's line-number prefix) and be unique unless replace_all is true; include enough surrounding lines to make it unique.",
            parameters: parameters::<Args>(),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(NAME, args)?;
        let root = Arc::clone(&self.root);
        codebutler_agent::tool::run_blocking(NAME, move || edit(&root, &args)).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{entries, worktree};
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    async fn run(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        EditTool::new(Arc::clone(root)).call(args).await
    }

    fn read(dir: &tempfile::TempDir, rel: &str) -> String {
        std::fs::read_to_string(dir.path().join(rel)).unwrap()
    }

    #[tokio::test]
    async fn multi_edit_applies_all_edits_in_order_or_none() {
        let (dir, root) = worktree(&[("f.txt", "alpha\nbeta\ngamma\n")]);
        let multi = MultiEditTool::new(Arc::clone(&root));
        let out = multi
            .call(json!({"file_path": "f.txt", "edits": [
                {"old_string": "alpha", "new_string": "ALPHA"},
                {"old_string": "ALPHA\nbeta", "new_string": "ALPHA\nBETA"}
            ]}))
            .await
            .unwrap();
        assert_eq!(out, "applied 2 edits (2 occurrences) to f.txt");
        assert_eq!(read(&dir, "f.txt"), "ALPHA\nBETA\ngamma\n");

        let err = multi
            .call(json!({"file_path": "f.txt", "edits": [
                {"old_string": "gamma", "new_string": "GAMMA"},
                {"old_string": "missing", "new_string": "x"}
            ]}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("edit 2 of 2: old_string was not found in f.txt"),
            "{err}"
        );
        assert!(err.contains("no edit was applied"), "{err}");
        assert_eq!(
            read(&dir, "f.txt"),
            "ALPHA\nBETA\ngamma\n",
            "nothing was written"
        );
        let err = multi
            .call(json!({"file_path": "f.txt", "edits": []}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("edits is empty"));
    }

    #[tokio::test]
    async fn replaces_a_unique_string_and_keeps_permissions() {
        let (dir, root) = worktree(&[("src/a.rs", "fn a() {\n    1\n}\nfn b() {}\n")]);
        let path = dir.path().join("src/a.rs");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let out = run(
            &root,
            json!({"file_path": "src/a.rs", "old_string": "    1\n", "new_string": "    2\n"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "replaced 1 occurrence in src/a.rs");
        assert_eq!(read(&dir, "src/a.rs"), "fn a() {\n    2\n}\nfn b() {}\n");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        assert_eq!(entries(&dir.path().join("src")), ["a.rs"]);
    }

    #[tokio::test]
    async fn an_ambiguous_string_is_refused_unless_replace_all() {
        let (dir, root) = worktree(&[("f.txt", "x = 1\ny = 1\nz = 1\n")]);
        let err = run(
            &root,
            json!({"file_path": "f.txt", "old_string": "= 1", "new_string": "= 2"}),
        )
        .await
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("occurs 3 times in f.txt"), "{msg}");
        assert!(msg.contains("replace_all"), "{msg}");
        assert_eq!(read(&dir, "f.txt"), "x = 1\ny = 1\nz = 1\n");

        let abs = root.root().join("f.txt");
        let out = run(
            &root,
            json!({"file_path": abs.to_string_lossy(), "old_string": "= 1",
                   "new_string": "= 2", "replace_all": true}),
        )
        .await
        .unwrap();
        assert_eq!(out, "replaced 3 occurrences in f.txt");
        assert_eq!(read(&dir, "f.txt"), "x = 2\ny = 2\nz = 2\n");
    }

    #[tokio::test]
    async fn missing_strings_files_and_noops_are_errors() {
        let (dir, root) = worktree(&[("f.txt", "hello\n")]);
        let cases = [
            (
                json!({"file_path": "f.txt", "old_string": "bye", "new_string": "x"}),
                "old_string was not found in f.txt",
            ),
            (
                json!({"file_path": "f.txt", "old_string": "hello", "new_string": "hello"}),
                "identical",
            ),
            (
                json!({"file_path": "f.txt", "old_string": "", "new_string": "x"}),
                "old_string is empty",
            ),
            (
                json!({"file_path": "nope.txt", "old_string": "a", "new_string": "b"}),
                "no such file: nope.txt; use Write",
            ),
            (
                json!({"file_path": "dir/nope.txt", "old_string": "a", "new_string": "b"}),
                "no such directory: dir",
            ),
        ];
        for (args, expected) in cases {
            let err = run(&root, args.clone()).await.unwrap_err();
            assert!(err.to_string().contains(expected), "{args}: {err}");
        }
        assert_eq!(read(&dir, "f.txt"), "hello\n");
        assert!(!dir.path().join("dir").exists());
    }

    #[tokio::test]
    async fn crlf_files_match_lf_strings() {
        let (dir, root) = worktree(&[("w.txt", "a\r\nb\r\nc\r\n")]);
        let out = run(
            &root,
            json!({"file_path": "w.txt", "old_string": "a\nb\n", "new_string": "a\nB\n"}),
        )
        .await
        .unwrap();
        assert_eq!(out, "replaced 1 occurrence in w.txt");
        assert_eq!(read(&dir, "w.txt"), "a\r\nB\r\nc\r\n");
    }

    #[tokio::test]
    async fn private_and_outside_files_are_refused() {
        let (_dir, root) = worktree(&[("a", "a")]);
        for p in [".git/config", "../a", "/etc/hostname"] {
            let err = run(
                &root,
                json!({"file_path": p, "old_string": "a", "new_string": "b"}),
            )
            .await
            .unwrap_err();
            assert!(matches!(err, ToolError::PathRefused { .. }), "{p}: {err}");
        }
    }
}
