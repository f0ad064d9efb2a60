//! How Coder runs are prepared and confined: the runner's `sandbox` (its mode, limits and
//! the paths it may read), the preparation of a fresh worktree and how its tests run
//! (`build`; its `env` and `path` checked by [`build_env`]), and what runs may fetch from
//! the web (`fetch`).
//!
//! `sandbox.mode` and `build.projectType` are enums, checked when each file is parsed, so
//! a misspelt value is an error naming its file and field and the values accepted.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::origin::Origin;
use super::{ConfigError, build_env, minutes};

/// Whether the runner builds its sandbox (`sandbox.mode`: `enforce` or `none`); the
/// sandbox spec's own type, so the setting reaches the runner as it is.
pub use codebutler_sandbox::SandboxMode;

/// `sandbox.diskMB` unless configured: each worktree's filesystem.
pub const DEFAULT_DISK_MB: u64 = 4096;

/// The runner's sandbox.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxConfig {
    /// `enforce` (default) or `none` (no sandbox at all: said loudly, for platforms without one).
    pub mode: SandboxMode,
    pub max_processes: u64,
    pub memory_mb: u64,
    pub file_size_mb: u64,
    pub cpu_seconds: u64,
    pub tmp_mb: u64,
    /// The size of each worktree's own filesystem (its files, `.git` and checkpoints), in
    /// MB; what a run can write on the host's disk. 0: no per-thread disk (no cap).
    pub disk_mb: u64,
    /// Extra host paths the sandbox sees read-only (anything the found toolchains are not).
    pub read_only: Vec<String>,
    /// `sandbox.findToolchains` (default true): show the sandbox the toolchains found in the
    /// service user's home and `PATH` (`crate::workspace::toolchains`).
    pub find_toolchains: bool,
    /// The `codebutler-runner` binary (default: beside `codebutler`).
    pub runner_path: Option<String>,
}

/// What a file may say in `sandbox`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct SandboxFile {
    #[serde(default, deserialize_with = "sandbox_mode")]
    mode: Option<SandboxMode>,
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
    find_toolchains: Option<bool>,
    runner_path: Option<String>,
}

/// `sandbox.mode` by its name in the file; the spec's own serde names are not used so the
/// error can say which values exist and which is the default.
fn sandbox_mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SandboxMode>, D::Error> {
    let Some(name) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    match name.as_str() {
        "enforce" => Ok(Some(SandboxMode::Enforce)),
        "none" => Ok(Some(SandboxMode::None)),
        _ => Err(D::Error::custom(format!(
            "`{name}` is not a sandbox mode: use \"enforce\" (default) or \"none\""
        ))),
    }
}

impl SandboxFile {
    /// The section with its defaults.
    pub fn resolve(self) -> SandboxConfig {
        SandboxConfig {
            mode: self.mode.unwrap_or(SandboxMode::Enforce),
            max_processes: self.max_processes.unwrap_or(256),
            memory_mb: self.memory_mb.unwrap_or(4096),
            file_size_mb: self.file_size_mb.unwrap_or(1024),
            cpu_seconds: self.cpu_seconds.unwrap_or(3600),
            tmp_mb: self.tmp_mb.unwrap_or(1024),
            disk_mb: self.disk_mb.unwrap_or(DEFAULT_DISK_MB),
            read_only: self.read_only,
            find_toolchains: self.find_toolchains.unwrap_or(true),
            runner_path: self.runner_path,
        }
    }
}

/// What `build.projectType` says a fresh worktree holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ProjectType {
    /// Detect the platforms from the worktree's top-level files (the default).
    #[default]
    Auto,
    /// A Node project (`npm`, `yarn` or `pnpm` install).
    Node,
    /// A Python project (a venv with its requirements).
    Python,
    /// A Rust project (`cargo fetch`).
    Rust,
    /// A Go module (`go mod download`).
    Go,
    /// An Xcode project.
    Xcode,
    /// Nothing to prepare.
    Generic,
}

impl ProjectType {
    /// Every project type, in the order the README and errors list them.
    pub const ALL: [ProjectType; 7] = [
        ProjectType::Auto,
        ProjectType::Node,
        ProjectType::Python,
        ProjectType::Rust,
        ProjectType::Go,
        ProjectType::Xcode,
        ProjectType::Generic,
    ];

    /// The name in `build.projectType`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectType::Auto => "auto",
            ProjectType::Node => "node",
            ProjectType::Python => "python",
            ProjectType::Rust => "rust",
            ProjectType::Go => "go",
            ProjectType::Xcode => "xcode",
            ProjectType::Generic => "generic",
        }
    }
}

/// A `build.projectType` that names no project type.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a project type: use one of {names}", names = ProjectType::ALL.map(ProjectType::as_str).join(", "))]
pub struct UnknownProjectType(String);

impl TryFrom<String> for ProjectType {
    type Error = UnknownProjectType;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        ProjectType::ALL
            .into_iter()
            .find(|t| t.as_str() == name)
            .ok_or(UnknownProjectType(name))
    }
}

/// How a fresh worktree is prepared before the Coder starts (`build`).
#[derive(Clone, Debug, PartialEq)]
pub struct BuildConfig {
    /// Which platforms to prepare: detected (`auto`), forced, or none (`generic`).
    pub project_type: ProjectType,
    /// A shell command run instead of the detected init (in the sandbox, with network).
    pub init_command: Option<String>,
    /// Longest the init may take, in minutes (fractions allowed).
    pub init_timeout_mins: f64,
    /// How long a proposed plan's speculative preparation is kept while its thread is quiet,
    /// in minutes (fractions allowed); 0 turns preparing ahead off
    /// (`build.prepareAheadIdleMinutes`, default 30).
    pub prepare_ahead_idle_mins: f64,
    /// At most this many speculative preparations at once; beyond it the oldest is
    /// discarded (`build.maxPreparedAhead`, default 2).
    pub max_prepared_ahead: usize,
    /// The project's test command, told to the Coder instead of the detected one
    /// (`build.testCommand`).
    pub test_command: Option<String>,
    /// Variables added to the environment of the preparation and of the Coder's runs
    /// (`build.env`: a module proxy, a toolchain's home; never a secret).
    pub env: BTreeMap<String, String>,
    /// Directories put in front of the sandbox's `PATH` (`build.path`: toolchains outside
    /// the system's, which `sandbox.readOnly` must let the sandbox see).
    pub path: Vec<String>,
    /// Worktree preparations running at once on this machine, for every repository of the
    /// service (`build.maxConcurrentBuilds`); 0 for no limit.
    pub max_concurrent_builds: u32,
    /// A shell command run in the sandbox before the preparation (`build.preBuildCommand`).
    pub pre_build_command: Option<String>,
}

/// The most speculative preparations `build.maxPreparedAhead` may ask for.
const MAX_PREPARED_AHEAD: u32 = 32;
/// The most preparations `build.maxConcurrentBuilds` may let run at once.
const MAX_CONCURRENT_BUILDS: u32 = 64;

/// What a file may say in `build`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct BuildFile {
    project_type: Option<ProjectType>,
    init_command: Option<String>,
    init_timeout: Option<f64>,
    prepare_ahead_idle_minutes: Option<f64>,
    max_prepared_ahead: Option<u32>,
    test_command: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    path: Vec<String>,
    max_concurrent_builds: Option<u32>,
    pre_build_command: Option<String>,
}

impl BuildFile {
    /// The section with its defaults; a blank command is none, the time limit checked.
    pub fn resolve(self, origin: &Origin) -> Result<BuildConfig, ConfigError> {
        Ok(BuildConfig {
            project_type: self.project_type.unwrap_or(ProjectType::Auto),
            init_command: self.init_command.filter(|c| !c.trim().is_empty()),
            init_timeout_mins: minutes(origin, "build.initTimeout", self.init_timeout, 10.0)?,
            prepare_ahead_idle_mins: match self.prepare_ahead_idle_minutes {
                Some(0.0) => 0.0,
                idle => minutes(origin, "build.prepareAheadIdleMinutes", idle, 30.0)?,
            },
            max_prepared_ahead: match self.max_prepared_ahead.unwrap_or(2) {
                n if n > MAX_PREPARED_AHEAD => {
                    return Err(origin.field_error(
                        "build.maxPreparedAhead",
                        format!("{n} is more than {MAX_PREPARED_AHEAD}"),
                    ));
                }
                n => n as usize,
            },
            test_command: self.test_command.filter(|c| !c.trim().is_empty()),
            env: match build_env::check_env(&self.env) {
                Ok(()) => self.env,
                Err(e) => return Err(origin.field_error("build.env", e.to_string())),
            },
            path: match build_env::check_path(&self.path) {
                Ok(()) => self.path,
                Err(e) => return Err(origin.field_error("build.path", e.to_string())),
            },
            max_concurrent_builds: match self.max_concurrent_builds.unwrap_or(0) {
                n if n > MAX_CONCURRENT_BUILDS => {
                    return Err(origin.field_error(
                        "build.maxConcurrentBuilds",
                        format!("{n} is more than {MAX_CONCURRENT_BUILDS}"),
                    ));
                }
                n => n,
            },
            pre_build_command: self.pre_build_command.filter(|c| !c.trim().is_empty()),
        })
    }
}

/// What runners may fetch from the web (through the controller). Parsed straight from the
/// files: every field defaults to empty.
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FetchConfig {
    /// Host suffixes allowed; empty allows any public host.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Host suffixes refused.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Hosts (exact names or IP literals) that may resolve to loopback, private or other
    /// internal addresses, which are otherwise refused. Empty by default; for tests against
    /// a local server, or a docs mirror on the LAN. They must still pass `allow` and `deny`.
    #[serde(default)]
    pub allow_internal_hosts: Vec<String>,
}
