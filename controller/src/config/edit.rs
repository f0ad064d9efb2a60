//! A config file as `codebutler init` edits it: read as JSON (a missing file is an empty
//! object), changed field by field — every field it does not ask about stays as it was,
//! unknown ones included — and written back atomically, never through a link
//! ([`crate::layout::replace_file`]). The global file, which holds the secrets, is written
//! with mode 0600 and its directory made 0700.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::ConfigError;
use super::file::{Links, read_object};

/// Mode of the global config, which holds the secrets.
pub const SECRET_MODE: u32 = 0o600;
/// Mode of a repository's config (no secret belongs there).
pub const PLAIN_MODE: u32 = 0o644;

/// One config file's JSON, to change and write back.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub path: PathBuf,
    /// Always an object.
    pub value: Value,
    /// Whether the file existed when read.
    pub existed: bool,
}

/// Why a config file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("write {}: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl Document {
    /// Reads the file at `path`; a repository's config (`repo_file`) is never read through
    /// a link, as the loader refuses it.
    pub fn read(path: &Path, repo_file: bool) -> Result<Self, ConfigError> {
        let links = if repo_file {
            Links::Refuse
        } else {
            Links::Follow
        };
        let read = read_object(path, links)?;
        Ok(Self {
            path: path.to_owned(),
            existed: read.is_some(),
            value: read.unwrap_or_else(|| Value::Object(Map::new())),
        })
    }

    /// The value at `field` (`["slack", "botToken"]`), if the file has one there.
    pub fn get(&self, field: &[&str]) -> Option<&Value> {
        let mut at = &self.value;
        for key in field {
            at = at.get(key)?;
        }
        Some(at)
    }

    /// The string at `field` (`["slack", "botToken"]`), if it holds one that is not blank.
    pub fn string(&self, field: &[&str]) -> Option<String> {
        self.get(field)?
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    }

    /// Sets `field` to `value`, making the objects on the way (a field on the way that is not
    /// an object is replaced by one).
    pub fn set(&mut self, field: &[&str], value: Value) {
        let Some((last, path)) = field.split_last() else {
            return;
        };
        let mut at = &mut self.value;
        for key in path {
            if !at.is_object() {
                *at = Value::Object(Map::new());
            }
            let Value::Object(map) = at else {
                return;
            };
            at = map
                .entry((*key).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        if let Value::Object(map) = at {
            map.insert((*last).to_owned(), value);
        }
    }

    /// Writes the file with `mode`, pretty-printed, replacing the old one atomically. Its
    /// directory is made (with `dir_mode`) when missing.
    pub fn write(&self, mode: u32, dir_mode: u32) -> Result<(), WriteError> {
        let error = |source| WriteError {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.is_dir()
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(dir_mode)
                .create(dir)
                .map_err(error)?;
        }
        let mut text = serde_json::to_string_pretty(&self.value)
            .map_err(|e| error(std::io::Error::other(e)))?;
        text.push('\n');
        crate::layout::replace_file(&self.path, text.as_bytes(), mode).map_err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_is_set_and_every_other_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("home/config.json");
        let mut doc = Document::read(&path, false).unwrap();
        assert!(!doc.existed);
        doc.value =
            json!({"slack": {"apiUrl": "http://x/api", "extra": 1}, "coder": {"maxTurns": 9}});
        doc.set(&["slack", "botToken"], json!("xoxb-1"));
        doc.set(&["openrouter", "apiKey"], json!("sk-or-1"));
        doc.write(SECRET_MODE, 0o700).unwrap();
        let back = Document::read(&path, false).unwrap();
        assert!(back.existed);
        assert_eq!(
            back.value,
            json!({
                "slack": {"apiUrl": "http://x/api", "extra": 1, "botToken": "xoxb-1"},
                "coder": {"maxTurns": 9},
                "openrouter": {"apiKey": "sk-or-1"}
            })
        );
        assert_eq!(
            back.string(&["slack", "botToken"]).as_deref(),
            Some("xoxb-1")
        );
        assert_eq!(back.string(&["slack", "appToken"]), None);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
}
