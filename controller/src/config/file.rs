//! The two files as JSON: read (a missing file is `None`), each checked on its own against
//! the file shape so an error names the file it is in, then merged field by field with the
//! repository winning and parsed once more. [`Origin`](super::origin::Origin) remembers which file set a merged
//! field, so the checks after parsing blame the right file too.
//!
//! The file shape is [`FileConfig`]: every field optional (either file may set it, and
//! `null` means unset, so a repository can send a global setting back to its default),
//! unknown fields refused so a typo is an error rather than a silently ignored setting.

use std::path::Path;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::access::{AccessFile, GithubFile};
use super::attachments::AttachmentsConfig;
use super::changes_workflow::ChangesWorkflowFile;
use super::logging::LoggingFile;
use super::origin::Origin;
use super::provider::{OpenAiFile, OpenRouterFile};
use super::reports::ReportsConfig;
use super::roles::{ArtistFile, CoderFile, ProductManagerFile, ResearcherFile, ReviewerFile};
use super::runner::RunnerFile;
use super::runs::{BuildFile, FetchConfig, SandboxFile};
use super::slack::SlackFile;
use super::store::StoreFile;
use super::triggers::TriggersFile;
use super::voice::VoiceFile;
use super::{ConfigError, ConfigSources};

/// What one file (or the two merged) may say. The field order is the order an unknown
/// section's error lists them in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct FileConfig {
    #[serde(default, deserialize_with = "null_as_absent")]
    pub slack: SlackFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub openrouter: OpenRouterFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub openai: OpenAiFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub coder: CoderFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub product_manager: ProductManagerFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub artist: ArtistFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub reviewer: ReviewerFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub researcher: ResearcherFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub access: AccessFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub github: GithubFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub changes_workflow: ChangesWorkflowFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub sandbox: SandboxFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub fetch: FetchConfig,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub build: BuildFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub runner: RunnerFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub store: StoreFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub logging: LoggingFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub reports: ReportsConfig,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub attachments: AttachmentsConfig,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub voice: VoiceFile,
    #[serde(default, deserialize_with = "null_as_absent")]
    pub triggers: TriggersFile,
}

/// A section set to `null` is the same as a section left out: all its defaults.
fn null_as_absent<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Both files read and each checked on its own; an absent file is an empty object. The
/// global file's `repositories` list is not a setting of a repository: it is taken out here
/// and read by [`super::repositories`].
pub(super) struct Files {
    global: Value,
    repo: Value,
    /// The global file's `dashboard` section, which only that file may hold.
    pub dashboard: Option<Value>,
}

/// The global file's key that lists the repositories one service serves.
pub(super) const REPOSITORIES: &str = "repositories";
/// The global file's key for the dashboard, a setting of the service, not of a repository.
pub(super) const DASHBOARD: &str = "dashboard";

impl Files {
    /// Reads both files; an error if neither exists, or if either is not valid JSON, not an
    /// object, or not of the file shape on its own.
    pub fn read(sources: &ConfigSources) -> Result<Self, ConfigError> {
        // The global file is the operator's own (it may be a link they made); the
        // repository's lives where a repository could commit a link instead.
        let global = read_object(&sources.global, Links::Follow)?;
        let repo = read_object(&sources.repo, Links::Refuse)?;
        Self::from_values(sources, global, repo)
    }

    /// The two files as `global` and `repo` hold them (`None`: absent), checked as
    /// [`Self::read`] checks what it read — for what `codebutler init` is about to write.
    pub fn from_values(
        sources: &ConfigSources,
        global: Option<Value>,
        repo: Option<Value>,
    ) -> Result<Self, ConfigError> {
        if global.is_none() && repo.is_none() {
            return Err(ConfigError::NoFiles {
                global: sources.global.clone(),
                repo: sources.repo.clone(),
            });
        }
        let mut files = Self {
            global: global.unwrap_or_else(|| Value::Object(Default::default())),
            repo: repo.unwrap_or_else(|| Value::Object(Default::default())),
            dashboard: None,
        };
        for (key, what) in [
            (REPOSITORIES, "the list of repositories"),
            (DASHBOARD, "the dashboard"),
        ] {
            if files.repo.get(key).is_some() {
                return Err(ConfigError::Field {
                    path: sources.repo.clone(),
                    field: key.into(),
                    message: format!(
                        "{what} belongs in the global config ({})",
                        sources.global.display()
                    ),
                });
            }
        }
        if let Some(global) = files.global.as_object_mut() {
            global.remove(REPOSITORIES);
            files.dashboard = global.remove(DASHBOARD);
        }
        for (path, value) in [
            (&sources.global, &files.global),
            (&sources.repo, &files.repo),
        ] {
            parse(value).map_err(|(field, message)| ConfigError::Field {
                path: path.clone(),
                field,
                message,
            })?;
        }
        Ok(files)
    }

    /// The two files merged, the repository winning field by field, then `channel` (the
    /// channel a `repositories` entry names) over both, parsed; and where each field came
    /// from.
    pub fn merged<'a>(
        &'a self,
        sources: &'a ConfigSources,
        channel: Option<&str>,
    ) -> Result<(FileConfig, Origin<'a>), ConfigError> {
        let origin = Origin {
            sources,
            repo: &self.repo,
        };
        let mut merged = self.global.clone();
        merge(&mut merged, self.repo.clone());
        if let Some(channel) = channel {
            merge(
                &mut merged,
                serde_json::json!({"slack": {"channelID": channel}}),
            );
        }
        let config =
            parse(&merged).map_err(|(field, message)| origin.field_error(&field, message))?;
        Ok((config, origin))
    }
}

/// Whether a config file may be read through a symbolic link.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Links {
    Follow,
    /// A link as the file's last component is refused ([`ConfigError::NotRegular`]), and
    /// anything else that is not a regular file too.
    Refuse,
}

pub(super) fn read_object(path: &Path, links: Links) -> Result<Option<Value>, ConfigError> {
    let text = match read_text(path, links) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) || e.kind() == NOT_REGULAR => {
            return Err(ConfigError::NotRegular {
                path: path.to_owned(),
            });
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    if !value.is_object() {
        return Err(ConfigError::NotAnObject {
            path: path.to_owned(),
        });
    }
    Ok(Some(value))
}

/// The error kind [`read_text`] gives a file that is not a regular one.
const NOT_REGULAR: std::io::ErrorKind = std::io::ErrorKind::InvalidInput;

/// The file's text; with [`Links::Refuse`], opened without following a link (`ELOOP`) and
/// only when it is a regular file (else [`NOT_REGULAR`]), non-blocking so a FIFO put there
/// cannot hold the start.
fn read_text(path: &Path, links: Links) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if links == Links::Follow {
        return std::fs::read_to_string(path);
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(NOT_REGULAR, "not a regular file"));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// Merges `over` into `base`: objects field by field, anything else replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// The file shape of `value`, or the dotted field that is wrong and what is wrong with it.
fn parse(value: &Value) -> Result<FileConfig, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let message = e.inner().to_string();
        (field, message)
    })
}
