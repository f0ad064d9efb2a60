//! The versions a Python project's lock file pins — `uv.lock` or `poetry.lock`, both TOML
//! with a `[[package]]` table per package — as the preparation gives them to pip as
//! constraints ([`super::python_deps`]); and project names normalised as PyPI compares them.
//!
//! Only what pip can take as `name==version` is kept: packages from a package index (not
//! the project itself, a path, a repository or a URL), at a version written in PEP 440's
//! characters (so each pin is one shell-safe word), and not a package the lock holds at two
//! versions (a lock resolved for several Pythons may), which pip would find contradictory.

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::project_files::ProjectFiles;

/// A project name as PyPI compares them (`Foo_Bar` → `foo-bar`).
pub fn normalise(name: &str) -> String {
    name.to_lowercase().replace(['_', '.'], "-")
}

/// The versions a lock pins, by normalised name: only packages from an index with a
/// single version in the lock (a lock resolved for several Pythons may hold two).
fn locked_versions(lock: &str, from_index: impl Fn(&Table) -> bool) -> BTreeMap<String, String> {
    let Ok(table) = lock.parse::<Table>() else {
        return BTreeMap::new();
    };
    let mut versions: BTreeMap<String, Option<String>> = BTreeMap::new();
    for package in table
        .get("package")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table)
    {
        let (Some(name), Some(version)) = (
            package.get("name").and_then(Value::as_str),
            package.get("version").and_then(Value::as_str),
        ) else {
            continue;
        };
        if !from_index(package) || !is_plain_version(version) {
            continue;
        }
        versions
            .entry(normalise(name))
            .and_modify(|v| {
                if v.as_deref() != Some(version) {
                    *v = None;
                }
            })
            .or_insert_with(|| Some(version.to_owned()));
    }
    versions
        .into_iter()
        .filter_map(|(name, version)| Some((name, version?)))
        .collect()
}

/// A version as a lock writes it (PEP 440 characters only), so a pin is one shell-safe word.
fn is_plain_version(version: &str) -> bool {
    !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '!' | '-' | '_'))
}

/// `uv.lock`'s packages from an index (`source = { registry = … }`).
pub fn uv_locked(files: &ProjectFiles) -> BTreeMap<String, String> {
    files.text("uv.lock").map_or_else(BTreeMap::new, |lock| {
        locked_versions(lock, |package| {
            package
                .get("source")
                .and_then(Value::as_table)
                .is_some_and(|s| s.contains_key("registry"))
        })
    })
}

/// `poetry.lock`'s packages from an index (no `[package.source]`, or a `legacy` index).
pub fn poetry_locked(files: &ProjectFiles) -> BTreeMap<String, String> {
    files
        .text("poetry.lock")
        .map_or_else(BTreeMap::new, |lock| {
            locked_versions(lock, |package| {
                match package.get("source").and_then(Value::as_table) {
                    None => true,
                    Some(source) => source.get("type").and_then(Value::as_str) == Some("legacy"),
                }
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_versions_from_an_index_are_pinned() {
        let uv = "version = 1\n[[package]]\nname = \"calc\"\nversion = \"0.1.0\"\nsource = { editable = \".\" }\n[[package]]\nname = \"Typing_Extensions\"\nversion = \"4.12.2\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"numpy\"\nversion = \"1.24.4\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"numpy\"\nversion = \"2.2.0\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"odd\"\nversion = \"1; rm -rf ~\"\nsource = { registry = \"https://pypi.org/simple\" }\n";
        let files = ProjectFiles::from_files(&[("uv.lock", uv)]);
        assert_eq!(
            uv_locked(&files),
            [("typing-extensions".to_owned(), "4.12.2".to_owned())]
                .into_iter()
                .collect()
        );
        let poetry = "[[package]]\nname = \"pytest\"\nversion = \"8.4.2\"\n[[package]]\nname = \"pluggy\"\nversion = \"1.7.0\"\n[package.source]\ntype = \"legacy\"\nurl = \"https://pypi.org/simple\"\n[[package]]\nname = \"local\"\nversion = \"0.1\"\n[package.source]\ntype = \"directory\"\nurl = \"../local\"\n";
        let files = ProjectFiles::from_files(&[("poetry.lock", poetry)]);
        assert_eq!(
            poetry_locked(&files),
            [
                ("pluggy".to_owned(), "1.7.0".to_owned()),
                ("pytest".to_owned(), "8.4.2".to_owned())
            ]
            .into_iter()
            .collect()
        );
        assert!(uv_locked(&ProjectFiles::from_files(&[("uv.lock", "not toml [[")])).is_empty());
    }
}
