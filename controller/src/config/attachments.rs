//! Files people share in a thread (`attachments`): how large one may be and how many one
//! message may carry. Past either limit a file is refused with a line in the thread; a file
//! is never fetched past the size limit.

use serde::Deserialize;

/// The default `attachments.maxMB`.
pub const DEFAULT_MAX_MB: u64 = 20;
/// The default `attachments.maxFiles`.
pub const DEFAULT_MAX_FILES: usize = 10;

/// The limits on shared files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AttachmentsConfig {
    /// The largest file fetched, in MB (2^20 bytes); a larger one is refused.
    #[serde(default = "default_max_mb", rename = "maxMB")]
    pub max_mb: u64,
    /// The most files taken from one message; those past it are refused.
    #[serde(default = "default_max_files")]
    pub max_files: usize,
}

impl Default for AttachmentsConfig {
    fn default() -> Self {
        Self {
            max_mb: DEFAULT_MAX_MB,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

impl AttachmentsConfig {
    /// The largest file fetched, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_mb.saturating_mul(1 << 20)
    }
}

fn default_max_mb() -> u64 {
    DEFAULT_MAX_MB
}

fn default_max_files() -> usize {
    DEFAULT_MAX_FILES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_default_and_read_by_name() {
        let read: AttachmentsConfig = serde_json::from_str(r#"{"maxMB": 2}"#).unwrap();
        assert_eq!(
            (read.max_bytes(), read.max_files),
            (2 << 20, DEFAULT_MAX_FILES)
        );
        assert!(serde_json::from_str::<AttachmentsConfig>(r#"{"maxMb": 2}"#).is_err());
    }
}
