//! A reader for the INI dialect of Python's `configparser`, which `setup.cfg` and `tox.ini`
//! are written in: `[section]` headers, `key = value` or `key: value` (keys compared
//! without case), values continued on indented lines (the shape of `deps =` and
//! `extras_require` lists), whole-line comments starting with `#` or `;`.
//!
//! Small and total on purpose: it reads repository text, so anything it does not
//! understand is skipped rather than an error, and nothing in it is evaluated
//! (interpolation and tox's `{…}` substitutions are left as written for the caller to
//! refuse). The INI crates on crates.io do not continue values on indented lines.

use std::collections::BTreeMap;

/// A file's sections, each its keys (lower-case) and values (continuation lines joined
/// with `\n`, each line trimmed).
pub type Sections = BTreeMap<String, BTreeMap<String, String>>;

/// Reads `text`. Keys before the first section and lines that are neither a header, a
/// key nor a continuation are skipped.
pub fn parse(text: &str) -> Sections {
    let mut sections = Sections::new();
    let mut section: Option<String> = None;
    let mut key: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        let indented = line.starts_with([' ', '\t']);
        if trimmed.is_empty() || trimmed.starts_with(['#', ';']) {
            continue;
        }
        if indented && let (Some(s), Some(k)) = (&section, &key) {
            if let Some(value) = sections.get_mut(s).and_then(|keys| keys.get_mut(k)) {
                if !value.is_empty() {
                    value.push('\n');
                }
                value.push_str(trimmed);
            }
            continue;
        }
        if let Some(name) = trimmed
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            let name = name.trim().to_owned();
            sections.entry(name.clone()).or_default();
            section = Some(name);
            key = None;
            continue;
        }
        let Some(s) = &section else { continue };
        let Some(at) = trimmed.find(['=', ':']) else {
            key = None;
            continue;
        };
        let name = trimmed[..at].trim().to_lowercase();
        if name.is_empty() {
            key = None;
            continue;
        }
        let value = trimmed[at + 1..].trim().to_owned();
        if let Some(keys) = sections.get_mut(s) {
            keys.insert(name.clone(), value);
        }
        key = Some(name);
    }
    sections
}

/// The non-empty lines of a (possibly continued) value.
pub fn lines(value: &str) -> impl Iterator<Item = &str> {
    value.lines().map(str::trim).filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_and_continued_values() {
        let text = "\
# a comment
top = ignored
[tox]
envlist = py311, lint

[testenv]
Deps =
    pytest>=7
    ; a comment inside
    -r requirements-dev.txt

commands = pytest {posargs}
[options.extras_require]
test = pytest; mock
dev:
\tblack
";
        let sections = parse(text);
        assert_eq!(sections["tox"]["envlist"], "py311, lint");
        assert_eq!(
            lines(&sections["testenv"]["deps"]).collect::<Vec<_>>(),
            ["pytest>=7", "-r requirements-dev.txt"]
        );
        assert_eq!(sections["testenv"]["commands"], "pytest {posargs}");
        assert_eq!(sections["options.extras_require"]["test"], "pytest; mock");
        assert_eq!(sections["options.extras_require"]["dev"], "black");
        assert!(!sections.contains_key("top"));
    }

    #[test]
    fn nonsense_is_skipped_not_an_error() {
        let sections = parse("[\n]]]\n= x\n  stray continuation\n[a]\nno separator\n  x\nk=v");
        assert_eq!(sections["a"]["k"], "v");
        assert_eq!(sections["a"].len(), 1);
    }
}
