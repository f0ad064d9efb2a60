//! The repository added to the global config's `repositories` list by `codebutler init`,
//! so the one service of the Slack app serves it: an entry found by its path is kept (its
//! own `channel`, which would win over the repository's file, follows the new channel); a
//! new one gets a name the list does not have yet.

use std::path::Path;

use serde_json::{Value, json};

use super::InitError;
use super::prompt::Asker;
use crate::config::{self, edit::Document};

/// Adds the repository at `repo` to the global config's `repositories` (kept as it is when
/// listed; an entry's own `channel` is set to `channel`, since it would win over the
/// repository's file).
pub(super) fn register(
    asker: &mut dyn Asker,
    global: &mut Document,
    repo: &Path,
    name: Option<&str>,
    channel: &str,
) -> Result<(), InitError> {
    let dir_name = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut list = match global.value.get("repositories") {
        Some(Value::Array(list)) => list.clone(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => {
            return Err(InitError::Problem(format!(
                "{}: `repositories` is not a list; fix it, then run codebutler init again",
                global.path.display()
            )));
        }
    };
    let same = |entry: &Value| {
        entry
            .get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| same_dir(Path::new(p), repo))
    };
    if let Some(entry) = list.iter_mut().find(|e| same(e)) {
        if entry.get("channel").is_some() {
            entry["channel"] = json!(channel);
        }
        if let Some(name) = name {
            entry["name"] = json!(name);
        }
    } else {
        let names: Vec<String> = list.iter().map(entry_name).collect();
        let mut name = name.map_or_else(|| name_for(&dir_name), str::to_owned);
        loop {
            let problem = if !config::valid_name(&name) {
                format!(
                    "`{name}` cannot name a repository: letters, digits, `.`, `_` and `-`, \
                     starting with a letter or a digit"
                )
            } else if names
                .iter()
                .any(|n| config::sanitized_name(n) == config::sanitized_name(&name))
            {
                format!(
                    "another repository of {} is named `{name}`",
                    global.path.display()
                )
            } else {
                break;
            };
            if !asker.interactive() {
                return Err(InitError::Problem(format!("{problem}: pass --name")));
            }
            asker.say(&format!("  [!!] {problem}"));
            name = asker.text("Name for this repository", &format!("{name}-2"))?;
        }
        let mut entry = json!({"path": repo.to_string_lossy()});
        if name != dir_name {
            entry["name"] = json!(name);
        }
        list.push(entry);
        asker.say(&format!(
            "  [ok] listed under `repositories` in {} as `{name}`",
            global.path.display()
        ));
    }
    global.set(&["repositories"], Value::Array(list));
    // The list as the service will read it.
    config::entries_of(&global.path, &global.value).map_err(InitError::Invalid)?;
    Ok(())
}

/// A repository name made from its directory's name `dir`, as `repositories` takes one.
fn name_for(dir: &str) -> String {
    let name: String = dir
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    if name.is_empty() {
        "repository".to_owned()
    } else {
        name.to_owned()
    }
}

/// An entry's name: its `name`, else its directory's.
fn entry_name(entry: &Value) -> String {
    entry
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            entry
                .get("path")
                .and_then(Value::as_str)
                .and_then(|p| Path::new(p).file_name())
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}
