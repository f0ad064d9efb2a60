//! The global file's `repositories` list: the repositories one `codebutler` serves through
//! one Slack app, each in its own channel.
//!
//! ```json
//! "repositories": [{"name": "api", "path": "/srv/api", "channel": "C0123"}]
//! ```
//!
//! `name` defaults to the directory's name, `channel` to the repository's own
//! `slack.channelID`. Each repository keeps its own merged configuration (global + its
//! `.codebutler/config.json`), except the Slack app: one service is one app, so every
//! repository must end up with the same tokens and Web API base — a repository file that
//! sets them differently is an error naming both repositories. Names and channels are
//! unique (events are routed by channel; names address a repository in `runnerctl` and name
//! its PostgreSQL schema, so they are compared as [`sanitized_name`] gives them).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::file::REPOSITORIES;
use super::{Config, ConfigError, ConfigSources, load_in_channel};

/// One entry of `repositories`, its path resolved to the repository's working tree root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryEntry {
    /// The entry's name (default: the directory's name).
    pub name: String,
    /// The repository's working tree root.
    pub path: PathBuf,
    /// The channel the entry names, if it names one.
    pub channel: Option<String>,
}

/// A repository to serve: its entry and its merged configuration (whose
/// `slack.channel_id` is the channel it serves).
#[derive(Clone, Debug)]
pub struct Repository {
    pub entry: RepositoryEntry,
    pub config: Config,
}

/// What an entry may say.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    name: Option<String>,
    path: PathBuf,
    channel: Option<String>,
}

/// The `repositories` of the global file at `global`: `None` when the file does not exist
/// or has no such key (one repository per process, as with `--repo`). Each entry's path
/// must be absolute and inside a git working tree (its root is taken, as `--repo` does).
pub fn entries(global: &Path) -> Result<Option<Vec<RepositoryEntry>>, ConfigError> {
    let text = match std::fs::read_to_string(global) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: global.to_owned(),
                source,
            });
        }
    };
    // The file's syntax and shape are checked, with their own errors, when it is loaded
    // as each repository's global file; here only the list matters.
    let Ok(file) = serde_json::from_str::<Value>(&text) else {
        return Ok(None);
    };
    entries_of(global, &file)
}

/// Like [`entries`], of the global file's JSON `file` (the file at `global`, as
/// `codebutler init` is about to write it).
pub fn entries_of(
    global: &Path,
    file: &Value,
) -> Result<Option<Vec<RepositoryEntry>>, ConfigError> {
    let Some(file) = file.as_object() else {
        return Ok(None);
    };
    let list = match file.get(REPOSITORIES).cloned() {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(repositories_error(
                global,
                "`repositories` must be a list of {\"path\": …, \"channel\": …} objects".into(),
            ));
        }
    };
    if list.is_empty() {
        return Err(repositories_error(
            global,
            "`repositories` is empty: list at least one repository, or remove the key and run codebutler --repo DIR".into(),
        ));
    }
    let mut entries: Vec<RepositoryEntry> = Vec::with_capacity(list.len());
    for (index, value) in list.into_iter().enumerate() {
        let entry_error = |name: Option<String>, message: String| ConfigError::Entry {
            path: global.to_owned(),
            index,
            name,
            message,
        };
        let file: EntryFile =
            serde_json::from_value(value).map_err(|e| entry_error(None, e.to_string()))?;
        if !file.path.is_absolute() {
            return Err(entry_error(
                file.name,
                format!("path {} is not absolute", file.path.display()),
            ));
        }
        let path = working_tree_root(&file.path)
            .map_err(|e| entry_error(file.name.clone(), e.to_string()))?;
        let name = match file.name {
            Some(name) => name,
            None => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        if !valid_name(&name) {
            return Err(entry_error(
                Some(name),
                "a name is letters, digits, `.`, `_` and `-`, starting with a letter or digit (set `name`)".into(),
            ));
        }
        let channel = file.channel.filter(|c| !c.trim().is_empty());
        let entry = RepositoryEntry {
            name,
            path,
            channel,
        };
        for other in &entries {
            if sanitized_name(&other.name) == sanitized_name(&entry.name) {
                return Err(entry_error(
                    Some(entry.name.clone()),
                    format!(
                        "the name is already used by the entry for {} (`{}`); names must be unique (set `name`)",
                        other.path.display(),
                        other.name
                    ),
                ));
            }
            if other.path == entry.path {
                return Err(entry_error(
                    Some(entry.name.clone()),
                    format!(
                        "{} is already listed as `{}`",
                        entry.path.display(),
                        other.name
                    ),
                ));
            }
        }
        entries.push(entry);
    }
    Ok(Some(entries))
}

/// Each entry's merged configuration (with `home` the global config directory), checked
/// for unique channels and one Slack app. An error in one repository's file names the
/// repository.
pub fn load_repositories(
    home: &Path,
    entries: &[RepositoryEntry],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Repository>, ConfigError> {
    let mut repositories: Vec<Repository> = Vec::with_capacity(entries.len());
    for entry in entries {
        let sources = ConfigSources::in_home(home, &entry.path);
        let config = load_in_channel(&sources, entry.channel.as_deref(), &env).map_err(|e| {
            ConfigError::InRepository {
                name: entry.name.clone(),
                source: Box::new(e),
            }
        })?;
        for other in &repositories {
            check_distinct_and_one_app(&sources, other, entry, &config)?;
        }
        repositories.push(Repository {
            entry: entry.clone(),
            config,
        });
    }
    Ok(repositories)
}

/// `entry` (with `config`, loaded from `sources`) against a repository loaded before it:
/// not the same channel, and the same Slack app.
fn check_distinct_and_one_app(
    sources: &ConfigSources,
    other: &Repository,
    entry: &RepositoryEntry,
    config: &Config,
) -> Result<(), ConfigError> {
    let global = &sources.global;
    if other.config.slack.channel_id == config.slack.channel_id {
        return Err(repositories_error(
            global,
            format!(
                "repositories `{}` and `{}` both use channel {}: each repository needs its own channel",
                other.entry.name, entry.name, config.slack.channel_id
            ),
        ));
    }
    let (a, b) = (&other.config.slack, &config.slack);
    let differing = [
        (
            "slack.botToken",
            a.bot_token.expose() != b.bot_token.expose(),
        ),
        (
            "slack.appToken",
            a.app_token.expose() != b.app_token.expose(),
        ),
        ("slack.apiUrl", a.api_url != b.api_url),
    ]
    .into_iter()
    .find_map(|(field, differs)| differs.then_some(field));
    let (a, b) = (&other.config.build, &config.build);
    if a.max_concurrent_builds != b.max_concurrent_builds {
        return Err(repositories_error(
            global,
            format!(
                "repository `{}` ({}) sets build.maxConcurrentBuilds differently from repository `{}`: the limit is one for the machine's preparations, so set it in the global config only",
                entry.name,
                sources.repo.display(),
                other.entry.name
            ),
        ));
    }
    match differing {
        Some(field) => Err(repositories_error(
            global,
            format!(
                "repository `{}` ({}) sets {field} differently from repository `{}`: one service serves one Slack app, so set the Slack tokens and slack.apiUrl in the global config only",
                entry.name,
                sources.repo.display(),
                other.entry.name
            ),
        )),
        None => Ok(()),
    }
}

fn repositories_error(path: &Path, message: String) -> ConfigError {
    ConfigError::Repositories {
        path: path.to_owned(),
        message,
    }
}

pub use crate::store::sanitized_name;

/// Whether `name` may name a repository in `repositories`: letters, digits, `.`, `_` and `-`,
/// starting with a letter or a digit.
pub fn valid_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Why a repository entry's path names no git working tree.
#[derive(Debug, thiserror::Error)]
enum WorkingTreeError {
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{} is not inside a git repository: {source}", path.display())]
    NotInRepository { path: PathBuf, source: git2::Error },
    #[error("{} is a bare repository; CodeButler needs a working tree", .0.display())]
    Bare(PathBuf),
    #[error("resolve {}: {source}", path.display())]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The root of the git working tree that contains `path`, canonical.
fn working_tree_root(path: &Path) -> Result<PathBuf, WorkingTreeError> {
    if !path.is_dir() {
        return Err(WorkingTreeError::NotADirectory(path.to_owned()));
    }
    let repo =
        git2::Repository::discover(path).map_err(|source| WorkingTreeError::NotInRepository {
            path: path.to_owned(),
            source,
        })?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| WorkingTreeError::Bare(path.to_owned()))?;
    workdir
        .canonicalize()
        .map_err(|source| WorkingTreeError::Resolve {
            path: workdir.to_owned(),
            source,
        })
}
