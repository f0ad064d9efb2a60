//! Configuration: the global `~/.codebutler/config.json` (its directory movable with
//! `CODEBUTLER_HOME`) and the per-repository `<repo>/.codebutler/config.json`, merged field
//! by field with the repository winning, then secrets from the environment on top.
//!
//! Every problem becomes one [`ConfigError`] naming the file and the field and saying how to
//! fix it. Secrets are [`Secret`]s, so printing a `Config` never shows them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::secret::Secret;

/// Environment variables that may hold secrets instead of the files.
pub const ENV_SLACK_BOT_TOKEN: &str = "CODEBUTLER_SLACK_BOT_TOKEN";
pub const ENV_SLACK_APP_TOKEN: &str = "CODEBUTLER_SLACK_APP_TOKEN";
pub const ENV_OPENROUTER_API_KEY: &str = "OPENROUTER_API_KEY";
pub const ENV_OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// Moves the global configuration directory (default `~/.codebutler`).
pub const ENV_HOME: &str = "CODEBUTLER_HOME";

/// The roles CodeButler knows; a config section or mention naming another is an error.
pub const ROLES: [&str; 3] = ["pm", "coder", "artist"];

/// The merged, validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub slack: SlackConfig,
    pub openrouter: OpenRouterConfig,
    pub openai: OpenAiConfig,
    pub coder: CoderConfig,
    pub product_manager: ProductManagerConfig,
    pub artist: ArtistConfig,
    pub access: AccessConfig,
    pub github: GithubConfig,
    pub sandbox: SandboxConfig,
    pub fetch: FetchConfig,
    pub build: BuildConfig,
}

/// `sandbox.diskMB` unless configured: each worktree's filesystem.
pub const DEFAULT_DISK_MB: u64 = 4096;

/// The platforms `build.projectType` may force (`auto`, the default, detects them).
pub const PROJECT_TYPES: [&str; 7] = ["auto", "node", "python", "rust", "go", "xcode", "generic"];

/// How a fresh worktree is prepared before the Coder starts (`build`).
#[derive(Clone, Debug, PartialEq)]
pub struct BuildConfig {
    /// `auto` (detect the platforms from the worktree's files) or one of [`PROJECT_TYPES`].
    pub project_type: String,
    /// A shell command run instead of the detected init (in the sandbox, with network).
    pub init_command: Option<String>,
    /// Longest the init may take, in minutes (fractions allowed).
    pub init_timeout_mins: f64,
}

/// The runner's sandbox.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxConfig {
    /// `enforce` (default) or `none` (no sandbox at all: said loudly, for platforms without one).
    pub mode: String,
    pub max_processes: u64,
    pub memory_mb: u64,
    pub file_size_mb: u64,
    pub cpu_seconds: u64,
    pub tmp_mb: u64,
    /// The size of each worktree's own filesystem (its files, `.git` and checkpoints), in
    /// MB; what a run can write on the host's disk. 0: no per-thread disk (no cap).
    pub disk_mb: u64,
    /// Extra host paths the sandbox sees read-only (toolchains such as `~/.cargo`).
    pub read_only: Vec<String>,
    /// The `codebutler-runner` binary (default: beside `codebutler`).
    pub runner_path: Option<String>,
}

/// What runners may fetch from the web (through the controller).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FetchConfig {
    /// Host suffixes allowed; empty allows any public host.
    pub allow: Vec<String>,
    /// Host suffixes refused.
    pub deny: Vec<String>,
    /// Hosts (exact names or IP literals) that may resolve to loopback, private or other
    /// internal addresses, which are otherwise refused. Empty by default; for tests against
    /// a local server, or a docs mirror on the LAN. They must still pass `allow` and `deny`.
    pub allow_internal_hosts: Vec<String>,
}

/// Slack connection and channel.
#[derive(Clone, Debug)]
pub struct SlackConfig {
    pub bot_token: Secret,
    pub app_token: Secret,
    pub channel_id: String,
    pub channel_name: Option<String>,
    /// Web API base, without a trailing slash.
    pub api_url: String,
    /// Pace of `chat.postMessage` per channel (Slack allows about one per second).
    pub messages_per_second: f64,
}

/// The model provider every chat completion goes through.
#[derive(Clone, Debug)]
pub struct OpenRouterConfig {
    pub api_key: Secret,
    /// Base URL without a trailing slash (`…/chat/completions` is appended).
    pub base_url: String,
    /// Timeout of one model call, in seconds.
    pub timeout_secs: u64,
    /// Retries after the first attempt on 429, 5xx and timeouts.
    pub max_retries: u32,
}

/// OpenAI, used directly only for images.
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    pub api_key: Option<Secret>,
    pub base_url: String,
}

/// `coder.maxCostPerThread` when the config does not say (USD).
pub const DEFAULT_MAX_COST_PER_THREAD: f64 = 10.0;

/// The Coder role.
#[derive(Clone, Debug, PartialEq)]
pub struct CoderConfig {
    pub model: String,
    pub max_turns: u32,
    /// Minutes (fractions allowed).
    pub timeout_mins: f64,
    /// The model's context window in tokens (compaction starts at 80 % of it).
    pub context_window: u64,
    /// What a thread's Coder may spend, in USD, unless the thread sets its own budget
    /// ("budget $N"); 0 means no cap.
    pub max_cost_per_thread: f64,
}

/// The PM role's model pool.
#[derive(Clone, Debug, PartialEq)]
pub struct ProductManagerConfig {
    /// Key into `models` of the model used by default.
    pub default: String,
    /// Key into `models` of the model used for memory extraction.
    pub memory_extraction: String,
    pub models: BTreeMap<String, ModelChoice>,
}

impl ProductManagerConfig {
    /// The OpenRouter model id of the default PM model.
    pub fn default_model(&self) -> &str {
        self.models
            .get(&self.default)
            .map(|m| m.model.as_str())
            .unwrap_or_default()
    }
}

/// One entry of a model pool.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelChoice {
    pub model: String,
    #[serde(default)]
    pub label: Option<String>,
}

/// The Artist role.
#[derive(Clone, Debug, PartialEq)]
pub struct ArtistConfig {
    pub provider: String,
    pub model: String,
}

/// Who may use the bot and how much.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessConfig {
    pub max_concurrent_threads: u32,
    pub max_claude_calls_per_hour: u32,
    /// Slack user ids allowed to talk to the bot; empty means everyone in the channel.
    pub allowed_users: Vec<String>,
    /// Disk the worktrees under `.codebutler/branches/` may use together, in MB; 0 means
    /// no limit.
    pub max_worktree_disk_mb: u64,
}

/// GitHub CLI.
#[derive(Clone, Debug, PartialEq)]
pub struct GithubConfig {
    /// The `gh` executable (a name looked up on PATH, or a path).
    pub cli: String,
}

/// Where the configuration comes from.
#[derive(Clone, Debug)]
pub struct ConfigSources {
    /// `~/.codebutler/config.json` or `$CODEBUTLER_HOME/config.json`.
    pub global: PathBuf,
    /// `<repo>/.codebutler/config.json`.
    pub repo: PathBuf,
}

impl ConfigSources {
    /// The standard locations for a repository, honouring `CODEBUTLER_HOME`.
    pub fn for_repo(repo_root: &Path) -> Result<Self, ConfigError> {
        let home = match std::env::var_os(ENV_HOME) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".codebutler"))
                .ok_or(ConfigError::NoHome)?,
        };
        Ok(Self {
            global: home.join("config.json"),
            repo: repo_root.join(".codebutler").join("config.json"),
        })
    }
}

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
    #[error("{path}: field `{field}`: {message}")]
    Field {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("missing `{field}`: {hint}")]
    Missing { field: String, hint: String },
    #[error(
        "neither {global} nor {repo} exists: create one (see the README's configuration section)"
    )]
    NoFiles { global: PathBuf, repo: PathBuf },
}

/// Loads, merges and validates the configuration. `env` looks up environment variables
/// (pass `|k| std::env::var(k).ok()`), so tests need not touch the process environment.
pub fn load(
    sources: &ConfigSources,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let global = read_object(&sources.global)?;
    let repo = read_object(&sources.repo)?;
    if global.is_none() && repo.is_none() {
        return Err(ConfigError::NoFiles {
            global: sources.global.clone(),
            repo: sources.repo.clone(),
        });
    }
    let global = global.unwrap_or_else(|| Value::Object(Default::default()));
    let repo = repo.unwrap_or_else(|| Value::Object(Default::default()));
    // Typed check of each file on its own first, so an error names the file it is in.
    for (path, value) in [(&sources.global, &global), (&sources.repo, &repo)] {
        parse_raw(value).map_err(|(field, message)| ConfigError::Field {
            path: path.clone(),
            field,
            message,
        })?;
    }
    let mut merged = global.clone();
    merge(&mut merged, repo.clone());
    let raw = parse_raw(&merged).map_err(|(field, message)| ConfigError::Field {
        path: blame(&field, sources, &repo),
        field,
        message,
    })?;
    finish(raw, sources, &repo, &env)
}

fn read_object(path: &Path) -> Result<Option<Value>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
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

/// The file a merged field came from: the repository file if it sets it, else the global.
fn blame(field: &str, sources: &ConfigSources, repo: &Value) -> PathBuf {
    let pointer = format!("/{}", field.replace('.', "/"));
    if repo.pointer(&pointer).is_some() {
        sources.repo.clone()
    } else {
        sources.global.clone()
    }
}

fn parse_raw(value: &Value) -> Result<RawConfig, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let message = e.inner().to_string();
        (field, message)
    })
}

fn finish(
    raw: RawConfig,
    sources: &ConfigSources,
    repo: &Value,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let files = format!("{} or {}", sources.global.display(), sources.repo.display());
    let secret = |value: Option<Secret>, var: &str, field: &str, example: &str| {
        env(var)
            .filter(|v| !v.trim().is_empty())
            .map(Secret::new)
            .or(value)
            .ok_or_else(|| ConfigError::Missing {
                field: field.to_owned(),
                hint: format!("set it in {files} ({example}) or in the {var} environment variable"),
            })
    };
    let field_error = |field: &str, message: String| ConfigError::Field {
        path: blame(field, sources, repo),
        field: field.to_owned(),
        message,
    };

    let slack = raw.slack.unwrap_or_default();
    let bot_token = secret(
        slack.bot_token,
        ENV_SLACK_BOT_TOKEN,
        "slack.botToken",
        r#""slack": {"botToken": "xoxb-…"}"#,
    )?;
    if !bot_token.expose().starts_with("xoxb-") {
        return Err(field_error(
            "slack.botToken",
            "a bot token starts with `xoxb-` (Slack app → OAuth & Permissions → Bot User OAuth Token)".into(),
        ));
    }
    let app_token = secret(
        slack.app_token,
        ENV_SLACK_APP_TOKEN,
        "slack.appToken",
        r#""slack": {"appToken": "xapp-…"}"#,
    )?;
    if !app_token.expose().starts_with("xapp-") {
        return Err(field_error(
            "slack.appToken",
            "an app-level token starts with `xapp-` (Slack app → Basic Information → App-Level Tokens, scope connections:write)".into(),
        ));
    }
    let channel_id = slack.channel_id.filter(|c| !c.trim().is_empty()).ok_or_else(|| {
        ConfigError::Missing {
            field: "slack.channelID".into(),
            hint: format!(
                "set it in {} (\"slack\": {{\"channelID\": \"C0123ABCDEF\"}}); the id is at the bottom of the channel's details in Slack",
                sources.repo.display()
            ),
        }
    })?;
    let api_url = slack
        .api_url
        .unwrap_or_else(|| "https://slack.com/api/".into())
        .trim_end_matches('/')
        .to_owned();

    let openrouter = raw.openrouter.unwrap_or_default();
    let api_key = secret(
        openrouter.api_key,
        ENV_OPENROUTER_API_KEY,
        "openrouter.apiKey",
        r#""openrouter": {"apiKey": "sk-or-…"}"#,
    )?;
    let openai = raw.openai.unwrap_or_default();
    let openai_key = env(ENV_OPENAI_API_KEY)
        .filter(|v| !v.trim().is_empty())
        .map(Secret::new)
        .or(openai.api_key);

    let pm = raw.product_manager.unwrap_or_default();
    let models = if pm.models.is_empty() {
        BTreeMap::from([(
            "kimi".to_owned(),
            ModelChoice {
                model: "moonshotai/kimi-k2".into(),
                label: Some("Kimi".into()),
            },
        )])
    } else {
        pm.models
    };
    let first = models.keys().next().cloned().unwrap_or_default();
    let default = pm.default.unwrap_or_else(|| first.clone());
    let memory_extraction = pm.memory_extraction.unwrap_or_else(|| default.clone());
    for (field, key) in [
        ("productManager.default", &default),
        ("productManager.memoryExtraction", &memory_extraction),
    ] {
        if !models.contains_key(key) {
            return Err(field_error(
                field,
                format!(
                    "names model `{key}`, which is not in productManager.models (known: {})",
                    models.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }

    let coder = raw.coder.unwrap_or_default();
    let artist = raw.artist.unwrap_or_default();
    let access = raw.access.unwrap_or_default();
    for user in &access.allowed_users {
        if !user.starts_with('U') && !user.starts_with('W') {
            return Err(field_error(
                "access.allowedUsers",
                format!("`{user}` is not a Slack user id (they look like U0123ABCD)"),
            ));
        }
    }

    if let Some(t) = coder.timeout
        && !(t.is_finite() && t > 0.0 && t <= 1440.0)
    {
        return Err(field_error(
            "coder.timeout",
            format!("{t} is not a number of minutes between 0 and 1440 (a day)"),
        ));
    }
    if let Some(c) = coder.max_cost_per_thread
        && !(c.is_finite() && c >= 0.0)
    {
        return Err(field_error(
            "coder.maxCostPerThread",
            format!("{c} is not an amount of US dollars (0 or more; 0 means no cap)"),
        ));
    }
    let sandbox = raw.sandbox.unwrap_or_default();
    let mode = sandbox.mode.unwrap_or_else(|| "enforce".into());
    if mode != "enforce" && mode != "none" {
        return Err(field_error(
            "sandbox.mode",
            format!("`{mode}` is not a sandbox mode: use \"enforce\" (default) or \"none\""),
        ));
    }
    let fetch = raw.fetch.unwrap_or_default();
    let build = raw.build.unwrap_or_default();
    let project_type = build.project_type.unwrap_or_else(|| "auto".into());
    if !PROJECT_TYPES.contains(&project_type.as_str()) {
        return Err(field_error(
            "build.projectType",
            format!(
                "`{project_type}` is not a project type: use one of {}",
                PROJECT_TYPES.join(", ")
            ),
        ));
    }
    if let Some(t) = build.init_timeout
        && !(t.is_finite() && t > 0.0 && t <= 1440.0)
    {
        return Err(field_error(
            "build.initTimeout",
            format!("{t} is not a number of minutes between 0 and 1440 (a day)"),
        ));
    }

    Ok(Config {
        build: BuildConfig {
            project_type,
            init_command: build.init_command.filter(|c| !c.trim().is_empty()),
            init_timeout_mins: build.init_timeout.unwrap_or(10.0),
        },
        sandbox: SandboxConfig {
            mode,
            max_processes: sandbox.max_processes.unwrap_or(256),
            memory_mb: sandbox.memory_mb.unwrap_or(4096),
            file_size_mb: sandbox.file_size_mb.unwrap_or(1024),
            cpu_seconds: sandbox.cpu_seconds.unwrap_or(3600),
            tmp_mb: sandbox.tmp_mb.unwrap_or(1024),
            disk_mb: sandbox.disk_mb.unwrap_or(DEFAULT_DISK_MB),
            read_only: sandbox.read_only,
            runner_path: sandbox.runner_path,
        },
        fetch: FetchConfig {
            allow: fetch.allow,
            deny: fetch.deny,
            allow_internal_hosts: fetch.allow_internal_hosts,
        },
        slack: SlackConfig {
            bot_token,
            app_token,
            channel_id,
            channel_name: slack.channel_name,
            api_url,
            messages_per_second: slack.messages_per_second.unwrap_or(1.0),
        },
        openrouter: OpenRouterConfig {
            api_key,
            base_url: openrouter
                .base_url
                .unwrap_or_else(|| "https://openrouter.ai/api/v1".into())
                .trim_end_matches('/')
                .to_owned(),
            timeout_secs: openrouter.timeout_seconds.unwrap_or(120),
            max_retries: openrouter.max_retries.unwrap_or(5),
        },
        openai: OpenAiConfig {
            api_key: openai_key,
            base_url: openai
                .base_url
                .unwrap_or_else(|| "https://api.openai.com/v1".into())
                .trim_end_matches('/')
                .to_owned(),
        },
        coder: CoderConfig {
            model: coder
                .model
                .unwrap_or_else(|| "anthropic/claude-opus-4-6".into()),
            max_turns: coder.max_turns.unwrap_or(25),
            timeout_mins: coder.timeout.unwrap_or(30.0),
            context_window: coder.context_window.unwrap_or(200_000).max(1_000),
            max_cost_per_thread: coder
                .max_cost_per_thread
                .unwrap_or(DEFAULT_MAX_COST_PER_THREAD),
        },
        product_manager: ProductManagerConfig {
            default,
            memory_extraction,
            models,
        },
        artist: ArtistConfig {
            provider: artist.provider.unwrap_or_else(|| "openai".into()),
            model: artist.model.unwrap_or_else(|| "gpt-image-1".into()),
        },
        access: AccessConfig {
            max_concurrent_threads: access.max_concurrent_threads.unwrap_or(5),
            max_claude_calls_per_hour: access.max_claude_calls_per_hour.unwrap_or(20),
            allowed_users: access.allowed_users,
            max_worktree_disk_mb: access.max_worktree_disk_mb.unwrap_or(0),
        },
        github: GithubConfig {
            cli: raw
                .github
                .unwrap_or_default()
                .cli
                .unwrap_or_else(|| "gh".into()),
        },
    })
}

// The file shapes: every field optional (either file may set it), unknown fields refused so
// a typo is an error rather than a silently ignored setting.

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    slack: Option<RawSlack>,
    openrouter: Option<RawOpenRouter>,
    openai: Option<RawOpenAi>,
    coder: Option<RawCoder>,
    product_manager: Option<RawProductManager>,
    artist: Option<RawArtist>,
    access: Option<RawAccess>,
    github: Option<RawGithub>,
    sandbox: Option<RawSandbox>,
    fetch: Option<RawFetch>,
    build: Option<RawBuild>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawBuild {
    project_type: Option<String>,
    init_command: Option<String>,
    init_timeout: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSandbox {
    mode: Option<String>,
    max_processes: Option<u64>,
    #[serde(rename = "memoryMB")]
    memory_mb: Option<u64>,
    #[serde(rename = "fileSizeMB")]
    file_size_mb: Option<u64>,
    cpu_seconds: Option<u64>,
    #[serde(rename = "tmpMB")]
    tmp_mb: Option<u64>,
    #[serde(rename = "diskMB")]
    disk_mb: Option<u64>,
    #[serde(default)]
    read_only: Vec<String>,
    runner_path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawFetch {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    allow_internal_hosts: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSlack {
    bot_token: Option<Secret>,
    app_token: Option<Secret>,
    #[serde(rename = "channelID")]
    channel_id: Option<String>,
    channel_name: Option<String>,
    api_url: Option<String>,
    messages_per_second: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawOpenRouter {
    api_key: Option<Secret>,
    base_url: Option<String>,
    timeout_seconds: Option<u64>,
    max_retries: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawOpenAi {
    api_key: Option<Secret>,
    base_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCoder {
    model: Option<String>,
    max_turns: Option<u32>,
    timeout: Option<f64>,
    context_window: Option<u64>,
    max_cost_per_thread: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawProductManager {
    default: Option<String>,
    memory_extraction: Option<String>,
    #[serde(default)]
    models: BTreeMap<String, ModelChoice>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArtist {
    provider: Option<String>,
    model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAccess {
    max_concurrent_threads: Option<u32>,
    max_claude_calls_per_hour: Option<u32>,
    #[serde(default)]
    allowed_users: Vec<String>,
    #[serde(rename = "maxWorktreeDiskMB")]
    max_worktree_disk_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawGithub {
    cli: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Files {
        _dir: tempfile::TempDir,
        sources: ConfigSources,
    }

    fn files(global: Option<&str>, repo: Option<&str>) -> Files {
        let dir = tempfile::tempdir().unwrap();
        let sources = ConfigSources {
            global: dir.path().join("home/config.json"),
            repo: dir.path().join("repo/.codebutler/config.json"),
        };
        for (path, text) in [(&sources.global, global), (&sources.repo, repo)] {
            if let Some(text) = text {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
        }
        Files { _dir: dir, sources }
    }

    const GLOBAL: &str =
        r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"sk-or-1"}}"#;
    const REPO: &str = r#"{"slack":{"channelID":"C1"},"coder":{"maxTurns":7}}"#;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn merges_field_by_field_with_repo_winning() {
        let f = files(
            Some(GLOBAL),
            Some(
                r#"{"slack":{"channelID":"C1","apiUrl":"http://127.0.0.1:9/api/"},"openrouter":{"baseUrl":"http://x/v1/"},"coder":{"maxTurns":7}}"#,
            ),
        );
        let c = load(&f.sources, no_env).unwrap();
        assert_eq!(c.slack.bot_token.expose(), "xoxb-1");
        assert_eq!(c.slack.channel_id, "C1");
        assert_eq!(c.slack.api_url, "http://127.0.0.1:9/api");
        assert_eq!(c.openrouter.base_url, "http://x/v1");
        assert_eq!(c.coder.max_turns, 7);
        assert_eq!(c.coder.timeout_mins, 30.0);
        assert_eq!(c.product_manager.default_model(), "moonshotai/kimi-k2");

        let f = files(
            Some(GLOBAL),
            Some(r#"{"slack":{"channelID":"C1","botToken":"xoxb-repo"}}"#),
        );
        let c = load(&f.sources, no_env).unwrap();
        assert_eq!(c.slack.bot_token.expose(), "xoxb-repo");
        assert_eq!(c.slack.app_token.expose(), "xapp-1");
    }

    #[test]
    fn environment_supplies_secrets() {
        let f = files(None, Some(REPO));
        let env = |k: &str| match k {
            ENV_SLACK_BOT_TOKEN => Some("xoxb-env".to_owned()),
            ENV_SLACK_APP_TOKEN => Some("xapp-env".to_owned()),
            ENV_OPENROUTER_API_KEY => Some("sk-or-env".to_owned()),
            _ => None,
        };
        let c = load(&f.sources, env).unwrap();
        assert_eq!(c.slack.bot_token.expose(), "xoxb-env");
        assert_eq!(c.openrouter.api_key.expose(), "sk-or-env");
    }

    #[test]
    fn debug_output_holds_no_secret() {
        let f = files(Some(GLOBAL), Some(REPO));
        let c = load(&f.sources, no_env).unwrap();
        let debug = format!("{c:?}");
        for secret in ["xoxb-1", "xapp-1", "sk-or-1"] {
            assert!(!debug.contains(secret), "{secret} leaked: {debug}");
        }
    }

    #[test]
    fn syntax_error_names_file_and_position() {
        let f = files(Some(GLOBAL), Some("{\"slack\": {\"channelID\": \"C1\",}}"));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(
            e.contains(".codebutler/config.json: not valid JSON at line 1"),
            "{e}"
        );
    }

    #[test]
    fn wrong_type_names_file_and_field() {
        let f = files(
            Some(GLOBAL),
            Some(r#"{"slack":{"channelID":"C1"},"coder":{"maxTurns":"many"}}"#),
        );
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(
            e.contains("repo/.codebutler/config.json: field `coder.maxTurns`"),
            "{e}"
        );
    }

    #[test]
    fn the_example_configs_load() {
        let f = files(
            Some(include_str!("../../deploy/global-config.example.json")),
            Some(include_str!("../../deploy/repo-config.example.json")),
        );
        let c = load(&f.sources, no_env).unwrap();
        assert_eq!(c.access.max_worktree_disk_mb, 2000);
        assert_eq!(c.build.project_type, "auto");
    }

    #[test]
    fn build_section_and_worktree_disk_limit() {
        let f = files(Some(GLOBAL), Some(REPO));
        let c = load(&f.sources, no_env).unwrap();
        assert_eq!(
            c.build,
            BuildConfig {
                project_type: "auto".into(),
                init_command: None,
                init_timeout_mins: 10.0
            }
        );
        assert_eq!(c.access.max_worktree_disk_mb, 0, "absent means no limit");
        // Global and repository merge field by field; a blank command means none.
        let f = files(
            Some(
                r#"{"slack":{"botToken":"xoxb-1","appToken":"xapp-1"},"openrouter":{"apiKey":"k"},
                    "build":{"initCommand":"make setup","initTimeout":2.5},"access":{"maxWorktreeDiskMB":2000}}"#,
            ),
            Some(r#"{"slack":{"channelID":"C1"},"build":{"projectType":"node"}}"#),
        );
        let c = load(&f.sources, no_env).unwrap();
        assert_eq!(c.build.project_type, "node");
        assert_eq!(c.build.init_command.as_deref(), Some("make setup"));
        assert_eq!(c.build.init_timeout_mins, 2.5);
        assert_eq!(c.access.max_worktree_disk_mb, 2000);
        let f = files(
            Some(GLOBAL),
            Some(r#"{"slack":{"channelID":"C1"},"build":{"initCommand":"  "}}"#),
        );
        assert_eq!(load(&f.sources, no_env).unwrap().build.init_command, None);

        for (repo, expected) in [
            (
                r#"{"slack":{"channelID":"C1"},"build":{"projectType":"cobol"}}"#,
                "repo/.codebutler/config.json: field `build.projectType`: `cobol` is not a project type",
            ),
            (
                r#"{"slack":{"channelID":"C1"},"build":{"initTimeout":0}}"#,
                "field `build.initTimeout`: 0 is not a number of minutes",
            ),
            (
                r#"{"slack":{"channelID":"C1"},"build":{"initCmd":"x"}}"#,
                "field `build.initCmd`: unknown field `initCmd`",
            ),
            (
                r#"{"slack":{"channelID":"C1"},"access":{"maxWorktreeDiskMB":-5}}"#,
                "field `access.maxWorktreeDiskMB`",
            ),
        ] {
            let f = files(Some(GLOBAL), Some(repo));
            let e = load(&f.sources, no_env).unwrap_err().to_string();
            assert!(e.contains(expected), "{e}");
        }
    }

    #[test]
    fn max_cost_per_thread_defaults_to_ten_dollars_and_refuses_negatives() {
        let f = files(Some(GLOBAL), Some(REPO));
        let c = load(&f.sources, no_env).unwrap();
        assert_eq!(c.coder.max_cost_per_thread, 10.0);
        let f = files(
            Some(GLOBAL),
            Some(r#"{"slack":{"channelID":"C1"},"coder":{"maxCostPerThread":0}}"#),
        );
        assert_eq!(
            load(&f.sources, no_env).unwrap().coder.max_cost_per_thread,
            0.0
        );
        let f = files(
            Some(GLOBAL),
            Some(r#"{"slack":{"channelID":"C1"},"coder":{"maxCostPerThread":-1}}"#),
        );
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(
            e.contains("field `coder.maxCostPerThread`: -1 is not"),
            "{e}"
        );
    }

    #[test]
    fn unknown_section_is_refused() {
        let f = files(
            Some(GLOBAL),
            Some(r#"{"slack":{"channelID":"C1"},"reviewer":{"model":"x"}}"#),
        );
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.contains("unknown field `reviewer`"), "{e}");
        assert!(e.contains("expected one of"), "{e}");
    }

    #[test]
    fn unknown_pm_model_is_refused() {
        let f = files(
            Some(GLOBAL),
            Some(
                r#"{"slack":{"channelID":"C1"},"productManager":{"default":"gpt5","models":{"kimi":{"model":"m"}}}}"#,
            ),
        );
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(
            e.contains("field `productManager.default`: names model `gpt5`"),
            "{e}"
        );
    }

    #[test]
    fn missing_token_says_how_to_fix() {
        let f = files(None, Some(REPO));
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.starts_with("missing `slack.botToken`"), "{e}");
        assert!(e.contains(ENV_SLACK_BOT_TOKEN), "{e}");
    }

    #[test]
    fn token_of_the_wrong_kind_is_refused() {
        let f = files(
            Some(
                r#"{"slack":{"botToken":"xapp-oops","appToken":"xapp-1"},"openrouter":{"apiKey":"k"}}"#,
            ),
            Some(REPO),
        );
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(
            e.contains("home/config.json: field `slack.botToken`: a bot token starts with `xoxb-`"),
            "{e}"
        );
        assert!(!e.contains("xapp-oops"));
    }

    #[test]
    fn no_files_at_all_is_an_error() {
        let f = files(None, None);
        let e = load(&f.sources, no_env).unwrap_err().to_string();
        assert!(e.starts_with("neither "), "{e}");
    }
}
