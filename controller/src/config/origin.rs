//! Which file a field of the merged configuration came from, so an error names the file
//! to fix.

use std::path::PathBuf;

use serde_json::Value;

use super::ConfigError;
use super::ConfigSources;

/// Which file a field of the merged configuration came from.
pub(super) struct Origin<'a> {
    pub sources: &'a ConfigSources,
    pub repo: &'a Value,
}

impl Origin<'_> {
    /// The file a merged field came from: the repository file if it sets it, else the global.
    fn blame(&self, field: &str) -> PathBuf {
        let pointer = format!("/{}", field.replace('.', "/"));
        if self.repo.pointer(&pointer).is_some() {
            self.sources.repo.clone()
        } else {
            self.sources.global.clone()
        }
    }

    /// A problem with the merged `field` (dotted, as in `coder.timeout`), blaming its file.
    pub fn field_error(&self, field: &str, message: String) -> ConfigError {
        ConfigError::Field {
            path: self.blame(field),
            field: field.to_owned(),
            message,
        }
    }
}
