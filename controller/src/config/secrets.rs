//! Where a secret comes from: its environment variable when set (and not blank), else the
//! files. A required secret that is in neither is a [`ConfigError::Missing`] that says both
//! ways to provide it, and never shows a value.

use super::{ConfigError, ConfigSources};
use crate::secret::Secret;

/// The environment, looked up through the function [`super::load`] was given.
pub(super) struct Secrets<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub sources: &'a ConfigSources,
}

impl Secrets<'_> {
    /// `var` from the environment if set, else `value` from the files.
    pub fn optional(&self, value: Option<Secret>, var: &str) -> Option<Secret> {
        (self.env)(var)
            .filter(|v| !v.trim().is_empty())
            .map(Secret::new)
            .or(value)
    }

    /// Like [`Self::optional`], but missing is an error naming `field`, with an `example`
    /// of how the file would set it.
    pub fn required(
        &self,
        value: Option<Secret>,
        var: &str,
        field: &str,
        example: &str,
    ) -> Result<Secret, ConfigError> {
        self.optional(value, var)
            .ok_or_else(|| ConfigError::Missing {
                field: field.to_owned(),
                hint: format!(
                    "set it in {} or {} ({example}) or in the {var} environment variable",
                    self.sources.global.display(),
                    self.sources.repo.display()
                ),
            })
    }
}
