//! Configuration: the global `~/.codebutler/config.json` (its directory movable with
//! `CODEBUTLER_HOME`) and the per-repository `<repo>/.codebutler/config.json`, merged field
//! by field with the repository winning, then secrets from the environment on top.
//!
//! Every problem becomes one [`ConfigError`] naming the file and the field and saying how to
//! fix it. Secrets are [`Secret`](crate::secret::Secret)s, so printing a `Config` never
//! shows them.
//!
//! Loading is three steps: `file` reads both files, checks each against the file shape
//! (every field optional, unknown fields refused, enums by name) and merges them; each
//! section's module then turns its part of the merged file into its typed section, with
//! the defaults and the checks that need the merged value (a PM model in the pool, a
//! token of the right kind), taking secrets from the environment first (`secrets`).
//!
//! | module | sections |
//! |---|---|
//! | `slack` | `slack` |
//! | `provider` | `openrouter`, `openai` |
//! | `roles` | `productManager`, `coder`, `artist`, `reviewer`, `researcher` |
//! | `mcp` | `coder.mcpServers` |
//! | `model_fields` | every model id the configuration names for the provider, with its field |
//! | `access` | `access`, `github` |
//! | `changes_workflow` | `changesWorkflow` |
//! | `runs` | `sandbox`, `build`, `fetch` |
//! | `repositories` | the global file's `repositories` list (one service, many repositories) |
//! | `runner` | `runner` |
//! | `store` | `store` |
//! | `logging` | `logging` |
//! | `reports` | `reports` |
//! | `attachments` | `attachments` |
//! | `triggers` | `triggers` |
//! | `voice` | `voice` |
//! | `dashboard` | `dashboard` (the global file's only) |
//!
//! `edit` is the other way round: `codebutler init` reading the two files as JSON, changing
//! the fields it asks about (keeping every other field as it was), checking the result as
//! [`load`] would and writing it back.

mod access;
mod attachments;
mod build_env;
mod changes_workflow;
mod dashboard;
pub mod edit;
mod error;
mod file;
mod logging;
mod mcp;
mod model_fields;
mod origin;
mod provider;
mod reports;
mod repositories;
mod roles;
mod runner;
mod runs;
mod secrets;
mod slack;
mod store;
#[cfg(test)]
mod tests;
mod triggers;
mod voice;

use std::path::{Path, PathBuf};

pub use access::{AccessConfig, GithubConfig, MergeChecks, MergeStrategy, ReviewFrom};
pub use attachments::AttachmentsConfig;
pub use changes_workflow::ChangesWorkflowConfig;
pub use dashboard::{
    DEFAULT_DASHBOARD_LISTEN, DashboardConfig, ENV_DASHBOARD_TOKEN, MIN_TOKEN_CHARS,
};
pub use error::ConfigError;
pub use logging::LoggingConfig;
pub use mcp::{McpServers, RemoteMcpServer, StdioMcpServer};
pub use model_fields::{ModelField, OPENROUTER_PROVIDER};
pub use provider::{OpenAiConfig, OpenRouterConfig};
pub use reports::ReportsConfig;
pub use repositories::{
    Repository, RepositoryEntry, entries, entries_of, load_repositories, sanitized_name, valid_name,
};
pub use roles::{
    ArtistConfig, CoderConfig, DEFAULT_CODER_MODEL, DEFAULT_MAX_COST_PER_THREAD, DEFAULT_PM_MODEL,
    ModelChoice, ProductManagerConfig, ResearcherConfig, ReviewerConfig,
};
pub use runner::{ContainerConfig, DEFAULT_RUNNER_IMAGE, RunnerLauncher};
pub use runs::{
    BuildConfig, DEFAULT_DISK_MB, FetchConfig, ProjectType, SandboxConfig, SandboxMode,
    UnknownProjectType,
};
pub use slack::{DEFAULT_CONNECTION_GRACE, SlackConfig};
pub use triggers::TriggersConfig;
pub use voice::{VoiceConfig, VoiceProvider};

use file::{FileConfig, Files};
use origin::Origin;
use secrets::Secrets;

/// Environment variables that may hold secrets instead of the files.
pub const ENV_SLACK_BOT_TOKEN: &str = "CODEBUTLER_SLACK_BOT_TOKEN";
pub const ENV_SLACK_APP_TOKEN: &str = "CODEBUTLER_SLACK_APP_TOKEN";
pub const ENV_OPENROUTER_API_KEY: &str = "OPENROUTER_API_KEY";
pub const ENV_OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// The store's URL (`store.url`), which may hold a database password.
pub const ENV_STORE_URL: &str = "CODEBUTLER_STORE_URL";
/// Moves the global configuration directory (default `~/.codebutler`).
pub const ENV_HOME: &str = "CODEBUTLER_HOME";

/// The merged, validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub slack: SlackConfig,
    pub openrouter: OpenRouterConfig,
    pub openai: OpenAiConfig,
    pub coder: CoderConfig,
    pub product_manager: ProductManagerConfig,
    pub artist: ArtistConfig,
    /// The reviewer model (`reviewer`); `None`: off.
    pub reviewer: Option<ReviewerConfig>,
    /// The researcher's model and fallback (`researcher`).
    pub researcher: ResearcherConfig,
    pub access: AccessConfig,
    pub github: GithubConfig,
    /// How the Coder's changes become a pull request (`changesWorkflow`).
    pub changes_workflow: ChangesWorkflowConfig,
    pub sandbox: SandboxConfig,
    pub fetch: FetchConfig,
    pub build: BuildConfig,
    /// Where Coder runners run (`runner.launcher`).
    pub runner: RunnerLauncher,
    /// Where the store lives: SQLite (the default) or a PostgreSQL server.
    pub store: crate::store::StoreUrl,
    /// How the service's log file rotates (`logging`).
    pub logging: LoggingConfig,
    /// Reports posted in the channel on a schedule (`reports`).
    pub reports: ReportsConfig,
    /// Limits on files shared in a thread (`attachments`).
    pub attachments: AttachmentsConfig,
    /// What besides a channel message starts a request (`triggers`).
    pub triggers: TriggersConfig,
    /// How voice notes Slack has no transcript of are transcribed (`voice`).
    pub voice: VoiceConfig,
    /// The dashboard and `/metrics` (`dashboard`, the global file's only); `None`: off.
    pub dashboard: Option<DashboardConfig>,
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
        Ok(Self::in_home(&global_dir()?, repo_root))
    }

    /// The locations for a repository with the global config directory `home`.
    pub fn in_home(home: &Path, repo_root: &Path) -> Self {
        Self {
            global: home.join("config.json"),
            repo: repo_root.join(".codebutler").join("config.json"),
        }
    }
}

/// The global config directory: `$CODEBUTLER_HOME`, else `~/.codebutler`.
pub fn global_dir() -> Result<PathBuf, ConfigError> {
    match std::env::var_os(ENV_HOME) {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".codebutler"))
            .ok_or(ConfigError::NoHome),
    }
}

/// Loads, merges and validates the configuration. `env` looks up environment variables
/// (pass `|k| std::env::var(k).ok()`), so tests need not touch the process environment.
pub fn load(
    sources: &ConfigSources,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    load_in_channel(sources, None, env)
}

/// Like [`load`], from the two files' JSON as `global` and `repo` hold it (`None`: absent)
/// instead of from disk; `sources` names them in errors.
pub fn load_values(
    sources: &ConfigSources,
    global: Option<serde_json::Value>,
    repo: Option<serde_json::Value>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let files = Files::from_values(sources, global, repo)?;
    let (merged, origin) = files.merged(sources, None)?;
    let secrets = Secrets { env: &env, sources };
    let config = resolve(merged, &origin, &secrets)?;
    with_dashboard(config, &files, sources, &secrets)
}

/// Like [`load`], with `channel` (a `repositories` entry's) over what the files say.
fn load_in_channel(
    sources: &ConfigSources,
    channel: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let files = Files::read(sources)?;
    let (merged, origin) = files.merged(sources, channel)?;
    let secrets = Secrets { env: &env, sources };
    let config = resolve(merged, &origin, &secrets)?;
    with_dashboard(config, &files, sources, &secrets)
}

/// `config` with the global file's `dashboard` section, typed.
fn with_dashboard(
    mut config: Config,
    files: &Files,
    sources: &ConfigSources,
    secrets: &Secrets,
) -> Result<Config, ConfigError> {
    config.dashboard = dashboard::resolve(files.dashboard.clone(), &sources.global, secrets)?;
    Ok(config)
}

/// Every section typed, in a fixed order: when several are wrong, the first here is reported.
fn resolve(file: FileConfig, origin: &Origin, secrets: &Secrets) -> Result<Config, ConfigError> {
    let slack = file.slack.resolve(origin, secrets)?;
    let openrouter = file.openrouter.resolve(secrets)?;
    let openai = file.openai.resolve(secrets);
    let product_manager = file.product_manager.resolve(origin)?;
    let researcher = file.researcher.resolve(product_manager.default_model());
    let access = file.access.resolve(origin)?;
    let coder = file.coder.resolve(origin, secrets)?;
    let github = file.github.resolve(origin)?;
    let changes_workflow = file.changes_workflow.resolve(origin)?;
    let sandbox = file.sandbox.resolve();
    if access.max_worktree_disk_mb > 0 && sandbox.disk_mb == 0 {
        // The total is held by the worktrees' own disks; without them a run could pass it.
        return Err(origin.field_error(
            "access.maxWorktreeDiskMB",
            format!(
                "{} MB cannot hold with sandbox.diskMB 0: without a disk of its own per \
                 worktree nothing caps what a run writes. Set sandbox.diskMB (per-thread \
                 disks need root and loop devices), or set access.maxWorktreeDiskMB to 0",
                access.max_worktree_disk_mb
            ),
        ));
    }
    let build = file.build.resolve(origin)?;
    if sandbox.mode == SandboxMode::Enforce
        && let Err(e) = build_env::check_path_visible(&build.path, &sandbox.read_only)
    {
        return Err(origin.field_error("build.path", e.to_string()));
    }
    Ok(Config {
        slack,
        openrouter,
        openai,
        coder,
        product_manager,
        artist: file.artist.resolve(origin)?,
        reviewer: file.reviewer.resolve(origin)?,
        researcher,
        access,
        github,
        changes_workflow,
        sandbox,
        fetch: file.fetch,
        build,
        runner: file.runner.resolve(origin)?,
        store: file.store.resolve(origin, secrets)?,
        logging: file.logging.resolve(origin)?,
        reports: file.reports,
        attachments: file.attachments,
        triggers: file.triggers.resolve(origin)?,
        voice: file.voice.resolve(origin)?,
        dashboard: None,
    })
}

/// A time limit in minutes: `default` when unset, else more than 0 and at most a day.
fn minutes(
    origin: &Origin,
    field: &str,
    value: Option<f64>,
    default: f64,
) -> Result<f64, ConfigError> {
    match value {
        None => Ok(default),
        Some(t) if t.is_finite() && t > 0.0 && t <= 1440.0 => Ok(t),
        Some(t) => Err(origin.field_error(
            field,
            format!("{t} is not a number of minutes between 0 and 1440 (a day)"),
        )),
    }
}

/// A base URL (`default` when unset) without its trailing slashes, so paths append cleanly.
fn base_url(value: Option<String>, default: &str) -> String {
    value
        .as_deref()
        .unwrap_or(default)
        .trim_end_matches('/')
        .to_owned()
}
