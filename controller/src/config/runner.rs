//! Where Coder runners run (`runner`): `launcher` is `local` (a process on this host, the
//! default) or `container` (a container per run, `runner.container`: the engine, the image
//! `deploy/build-runner-image.sh` builds, the OCI runtime, extra engine arguments).
//!
//! The engine must pass the runner its hub socket as a descriptor, which Podman does
//! (`--preserve-fds`) and Docker cannot, so a Docker engine is refused with that reason.

use serde::Deserialize;

use super::ConfigError;
use super::origin::Origin;

/// The image the container launcher runs unless `runner.container.image` says otherwise.
pub const DEFAULT_RUNNER_IMAGE: &str = "localhost/codebutler-runner:latest";

/// How runners are started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunnerLauncher {
    /// `codebutler-runner` as a local process (`sandbox.runnerPath`, default beside
    /// `codebutler`).
    Local,
    /// `codebutler-runner` in a container per run.
    Container(ContainerConfig),
}

/// The container launcher's settings (`runner.container`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerConfig {
    /// The engine's program (`podman`, or a path to it).
    pub engine: String,
    /// The runner image.
    pub image: String,
    /// The OCI runtime the engine uses (`--runtime`, e.g. `runc`); `None`: the engine's
    /// default.
    pub runtime: Option<String>,
    /// More arguments for `run`, before the image (labels, a `--cgroup-parent`); never
    /// needed for the guarantees, which the launcher sets itself.
    pub extra_args: Vec<String>,
}

/// What a file may say in `runner`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RunnerFile {
    launcher: Option<LauncherName>,
    #[serde(default)]
    container: ContainerFile,
}

/// `runner.launcher` by name.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum LauncherName {
    Local,
    Container,
}

/// What a file may say in `runner.container`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContainerFile {
    engine: Option<String>,
    image: Option<String>,
    runtime: Option<String>,
    #[serde(default)]
    extra_args: Vec<String>,
}

impl RunnerFile {
    /// The section with its defaults; an engine that cannot pass the hub's descriptor or
    /// an empty image name is an error naming its field.
    pub fn resolve(self, origin: &Origin) -> Result<RunnerLauncher, ConfigError> {
        let Some(LauncherName::Container) = self.launcher else {
            return Ok(RunnerLauncher::Local);
        };
        let engine = self.container.engine.unwrap_or_else(|| "podman".to_owned());
        let program = std::path::Path::new(&engine)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if program.is_empty() || program.starts_with("docker") {
            return Err(origin.field_error(
                "runner.container.engine",
                format!(
                    "`{engine}` cannot run runners: the runner's only connection is a socket \
                     passed as a descriptor (`--preserve-fds`), which Docker cannot pass; \
                     use \"podman\" (default)"
                ),
            ));
        }
        let image = self
            .container
            .image
            .unwrap_or_else(|| DEFAULT_RUNNER_IMAGE.to_owned());
        if image.trim().is_empty() {
            return Err(origin.field_error(
                "runner.container.image",
                "the image name is empty".to_owned(),
            ));
        }
        Ok(RunnerLauncher::Container(ContainerConfig {
            engine,
            image,
            runtime: self.container.runtime.filter(|r| !r.is_empty()),
            extra_args: self.container.extra_args,
        }))
    }
}
