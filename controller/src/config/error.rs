//! The one error type of configuration loading, worded for the person who has to fix the
//! file: every variant names the file or the field, and most say how to fix it.

use std::path::PathBuf;

use super::ENV_HOME;

/// A configuration problem, worded for the person who has to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find the global config directory: set HOME or {ENV_HOME}")]
    NoHome,
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path}: not valid JSON at line {line}, column {column}: {message}\n  fix the file's syntax (it must be one JSON object)"
    )]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: the file must hold one JSON object")]
    NotAnObject { path: PathBuf },
    /// The repository's config is a link (or not a file): a repository can commit one, so
    /// it is never followed.
    #[error(
        "{path}: not a regular file (a symbolic link, say); the repository's config is read only \
         from a regular file in the repository: replace it with the file itself"
    )]
    NotRegular { path: PathBuf },
    #[error("{path}: field `{field}`: {message}")]
    Field {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// An environment variable holding a setting that is not valid (its value never shown).
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
    #[error("missing `{field}`: {hint}")]
    Missing { field: String, hint: String },
    #[error("neither {global} nor {repo} exists: create one (see deploy/configuration.md)")]
    NoFiles { global: PathBuf, repo: PathBuf },
    #[error("{path}: repositories[{index}]{}: {message}", name.as_ref().map(|n| format!(" (`{n}`)")).unwrap_or_default())]
    Entry {
        path: PathBuf,
        index: usize,
        name: Option<String>,
        message: String,
    },
    #[error("{path}: {message}")]
    Repositories { path: PathBuf, message: String },
    #[error("repository `{name}`: {source}")]
    InRepository {
        name: String,
        #[source]
        source: Box<ConfigError>,
    },
}
