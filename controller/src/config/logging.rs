//! The service's log file (`logging`): the size past which it is rotated (`maxFileMB`) and
//! how many rotated files are kept (`keepFiles`). A service-wide setting: when one service
//! serves several repositories, the first listed repository's merged config (the global
//! file's setting, unless that repository's file overrides it) is the one that counts.

use serde::Deserialize;

use super::ConfigError;
use super::origin::Origin;

/// Most `logging.maxFileMB` may be.
const MAX_FILE_MB: u64 = 1024;
/// Most `logging.keepFiles` may be.
const MAX_KEEP_FILES: u32 = 100;

/// How the service's log file rotates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggingConfig {
    /// The size past which the file is rotated, in bytes.
    pub max_file_bytes: u64,
    /// Rotated files kept besides the current one.
    pub keep_files: u32,
}

/// What a file may say in `logging`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct LoggingFile {
    #[serde(rename = "maxFileMB")]
    max_file_mb: Option<f64>,
    keep_files: Option<u32>,
}

impl LoggingFile {
    /// The section with its defaults, 10 MB and 5 files; the size more than 0 and at most
    /// 1024 MB (fractions allowed), the files at most 100.
    pub fn resolve(self, origin: &Origin) -> Result<LoggingConfig, ConfigError> {
        let mb = self.max_file_mb.unwrap_or(10.0);
        if !(mb.is_finite() && mb > 0.0 && mb <= MAX_FILE_MB as f64) {
            return Err(origin.field_error(
                "logging.maxFileMB",
                format!("{mb} is not a size in MB between 0 and {MAX_FILE_MB}"),
            ));
        }
        let keep_files = self.keep_files.unwrap_or(5);
        if keep_files > MAX_KEEP_FILES {
            return Err(origin.field_error(
                "logging.keepFiles",
                format!("{keep_files} is more than the {MAX_KEEP_FILES} files kept at most"),
            ));
        }
        // At least one byte, so a line always fits in a new file.
        let max_file_bytes = ((mb * 1024.0 * 1024.0) as u64).max(1);
        Ok(LoggingConfig {
            max_file_bytes,
            keep_files,
        })
    }
}
