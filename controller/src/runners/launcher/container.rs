//! The container launcher (`runner.launcher: "container"`): each run's runner in a
//! container of its own, started with Podman from the image `deploy/` builds.
//!
//! The container adds a boundary around the runner and changes nothing the runner
//! guarantees; it only has to let the runner build its own sandbox inside:
//!
//! - **Hub**: the controller's socket pair, the runner's end passed as fd 3 with
//!   `--preserve-fds 1`, exactly as the local launcher passes it. No socket is listening
//!   anywhere, so nothing else can reach the hub; that is why the engine must be able to
//!   pass a descriptor (Podman can; Docker cannot, hence Podman only).
//! - **Mounts**: the worktree read-write at its own path, the object stores its
//!   `objects/info/alternates` names (the thread's base history), the spec's `readOnly`
//!   paths and its `attachments` (the files people shared in the thread) read-only at
//!   theirs; nothing else of the host. The runner's sandbox inside binds the attachments
//!   read-only into the worktree at `.codebutler-attachments`, as it does locally: a volume
//!   of the engine's there would stay outside the sandbox's non-recursive bind of the
//!   worktree, and would have the engine make its mount point through a directory the
//!   runner writes. The image's root is read-only
//!   (`--read-only`), `/etc/hosts` is the image's (`--no-hosts`).
//! - **No network** (`--network=none`), **no environment** (none is passed; the engine's
//!   proxy variables are not forwarded), **one capability** (`--cap-drop=all` but
//!   `SETFCAP`, which the kernel asks of whoever maps uid 0 into a new user namespace, as
//!   the sandbox does; it drops every capability itself before anything else runs) and
//!   `no-new-privileges`.
//! - **Limits**: the container's cgroup gets the spec's process and memory limits
//!   (`--pids-limit`, `--memory`, no swap), which the runner's sandbox takes as its own
//!   when it cannot make a cgroup of its own in there (`CgroupStatus::Enclosing`; the
//!   runner's supervising process counts there too, where locally it stays outside the
//!   sandbox's cgroup). The time limit is the supervisor's, as locally, its kill reaching
//!   the container ([`Running::start_kill`]); a runner whose controller is gone stops
//!   itself. There is no engine timeout: a runner may wait for its worktree's preparation
//!   before its time starts. The disk is the worktree's own filesystem, as locally. The
//!   `--ulimit`s are the sandbox's own `nofile` and `nproc`: an engine's defaults may
//!   exceed the host's hard limits, and then no container starts.
//! - **The sandbox inside**: the runner's namespaces, Landlock and seccomp need three
//!   things a default container refuses: its own `cgroupns` (so the enclosing limits are
//!   visible), `/proc` unmasked (a fresh `/proc` cannot be mounted over a masked one) and
//!   `sethostname`, which Podman's default seccomp profile allows only with
//!   `CAP_SYS_ADMIN`. The profile used is `deploy/runner-seccomp.json`: Podman's default
//!   with that one call allowed; it is built into the controller and written beside the
//!   run logs, and the runner's sandbox still fails closed on any step it cannot take.
//!
//! Stopping: killing the engine's client does not stop a container, so
//! [`Running::start_kill`] asks the engine to kill it too, and [`Running::remove`] (after
//! the client has exited) makes sure it is gone.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use codebutler_sandbox::SandboxSpec;

use super::{LaunchError, LaunchRequest, Launched, Launcher, RunnerProcess, spawn_with_hub};
use crate::config::ContainerConfig;

/// The seccomp profile the runner's containers run under (see the module's docs).
const SECCOMP_PROFILE: &str = include_str!("../../../../deploy/runner-seccomp.json");

/// The runner's own `RLIMIT_NOFILE` in its sandbox (the sandbox's `MAX_OPEN_FILES`): the
/// container's, too. It is set explicitly because an engine's default (1048576 for
/// Podman) may exceed the host's hard limit, and then no container starts.
const MAX_OPEN_FILES: u64 = 4096;

/// The runtime tried when the engine's default cannot start a container.
const FALLBACK_RUNTIME: &str = "runc";

/// The controller's variables the engine's client gets (where it finds its own state);
/// none of them is a secret.
const ENGINE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_REGISTRIES_CONF",
];

/// Why the runner image does not start in the engine (said at start, before any run).
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("run the container engine {engine}: {source}")]
    Engine {
        engine: String,
        source: std::io::Error,
    },
    /// The engine ran, and the image did not start; `runtime` is " with the runtime <name>"
    /// when one was set.
    #[error("{engine} cannot start the runner image {image}{runtime}: {stderr}")]
    Refused {
        engine: String,
        image: String,
        runtime: String,
        stderr: String,
    },
}

/// Starts each runner in a container of the configured image.
#[derive(Clone, Debug)]
pub struct ContainerLauncher {
    config: ContainerConfig,
    /// The seccomp profile written out, passed to the engine.
    seccomp_profile: PathBuf,
    /// The engine's working directory (the run directory): its monitor writes files
    /// there (`oom` after a container's out-of-memory kill), never in the controller's.
    dir: PathBuf,
}

impl ContainerLauncher {
    /// A launcher for `config`, its seccomp profile written into `dir`. Checks that the
    /// engine runs, has the image and can start it, so a problem is said at start, not at
    /// the first run. Without a configured `runtime`, when the engine's default runtime
    /// cannot start a container here but `runc` can (`crun` on a host whose cgroups are in
    /// "hybrid" mode), `runc` is used, and said.
    pub async fn new(config: ContainerConfig, dir: &Path) -> Result<Self, LaunchError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| LaunchError(format!("create {}: {e}", dir.display())))?;
        let seccomp_profile = dir.join("runner-seccomp.json");
        crate::layout::write_own_file(&seccomp_profile, SECCOMP_PROFILE.as_bytes())
            .map_err(|e| LaunchError(format!("write {}: {e}", seccomp_profile.display())))?;
        let mut launcher = Self {
            config,
            seccomp_profile,
            dir: dir.to_owned(),
        };
        launcher.check_image().await?;
        let Err(failed) = launcher.probe().await else {
            return Ok(launcher);
        };
        if launcher.config.runtime.is_some() {
            return Err(LaunchError(failed.to_string()));
        }
        launcher.config.runtime = Some(FALLBACK_RUNTIME.to_owned());
        match launcher.probe().await {
            Ok(()) => {
                tracing::warn!(
                    "{failed}; runc can, so runners run with it (set \
                     runner.container.runtime to \"{FALLBACK_RUNTIME}\" to say so)"
                );
                Ok(launcher)
            }
            Err(also) => Err(LaunchError(format!("{failed}; with runc: {also}"))),
        }
    }

    /// Starts the image once (`codebutler-runner --version`) with the limits' flags every
    /// run gets, and says why when it does not start.
    async fn probe(&self) -> Result<(), ProbeError> {
        let out = self
            .engine()
            .arg("run")
            .args([
                "--rm",
                "--network=none",
                "--read-only",
                "--cap-drop=all",
                "--http-proxy=false",
                "--log-driver=none",
            ])
            .arg(format!("--ulimit=nofile={MAX_OPEN_FILES}:{MAX_OPEN_FILES}"))
            .arg("--ulimit=nproc=64:64")
            .arg(&self.config.image)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| ProbeError::Engine {
                engine: self.config.engine.clone(),
                source,
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(ProbeError::Refused {
            engine: self.config.engine.clone(),
            image: self.config.image.clone(),
            runtime: match &self.config.runtime {
                Some(runtime) => format!(" with the runtime {runtime}"),
                None => String::new(),
            },
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }

    /// The engine's command with its global options (`--runtime`).
    fn engine(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.config.engine);
        if let Some(runtime) = &self.config.runtime {
            cmd.arg("--runtime").arg(runtime);
        }
        cmd.current_dir(&self.dir).env_clear();
        for name in ENGINE_ENV {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd
    }

    async fn check_image(&self) -> Result<(), LaunchError> {
        let out = self
            .engine()
            .args(["image", "exists", &self.config.image])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|e| {
                LaunchError(format!(
                    "run the container engine {}: {e} (runner.container.engine)",
                    self.config.engine
                ))
            })?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(LaunchError(format!(
            "the runner image {} is not in {}'s storage{}: build it with \
             deploy/build-runner-image.sh (deploy/README.md: Runners in containers)",
            self.config.image,
            self.config.engine,
            if stderr.trim().is_empty() {
                String::new()
            } else {
                format!(" ({})", stderr.trim())
            }
        )))
    }

    /// The engine's arguments after `run`, up to and including the image, for `request`.
    fn run_args(&self, request: &LaunchRequest) -> Result<Vec<OsString>, LaunchError> {
        let spec = &request.spec;
        let limits = &spec.limits;
        let mut args: Vec<OsString> = [
            "--rm".to_owned(),
            format!("--name={}", container_name(&request.run_id)),
            format!("--label=codebutler.worktree={}", spec.worktree.display()),
            "--network=none".to_owned(),
            "--read-only".to_owned(),
            "--no-hosts".to_owned(),
            "--http-proxy=false".to_owned(),
            "--cgroupns=private".to_owned(),
            "--cap-drop=all".to_owned(),
            "--cap-add=SETFCAP".to_owned(),
            "--security-opt=no-new-privileges".to_owned(),
            format!("--security-opt=seccomp={}", self.seccomp_profile.display()),
            "--security-opt=unmask=/proc/*".to_owned(),
            format!("--pids-limit={}", limits.max_processes),
            format!("--memory={}", limits.memory_bytes),
            format!("--memory-swap={}", limits.memory_bytes),
            format!("--ulimit=nofile={MAX_OPEN_FILES}:{MAX_OPEN_FILES}"),
            format!("--ulimit=nproc={0}:{0}", limits.max_processes),
            "--preserve-fds=1".to_owned(),
            "--log-driver=none".to_owned(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        for (path, writable) in mounts(spec)? {
            args.push(bind_mount(&path, writable)?);
        }
        args.extend(self.config.extra_args.iter().map(OsString::from));
        args.push(OsString::from(&self.config.image));
        Ok(args)
    }
}

#[async_trait]
impl Launcher for ContainerLauncher {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        let spec_json = serde_json::to_string(&request.spec)
            .map_err(|e| LaunchError(format!("write the sandbox spec: {e}")))?;
        let mut cmd = self.engine();
        cmd.arg("run")
            .args(self.run_args(request)?)
            .arg("run")
            .arg("--spec-json")
            .arg(spec_json);
        let (child, hub) = spawn_with_hub(cmd, request, ENGINE_ENV)?;
        let running = Running {
            launcher: self.clone(),
            name: container_name(&request.run_id),
            kill: None,
        };
        Ok(Launched {
            process: RunnerProcess {
                child,
                container: Some(running),
            },
            hub,
        })
    }
}

/// A running runner container: what it takes to stop and remove it.
#[derive(Debug)]
pub(super) struct Running {
    /// Its launcher: the engine, its runtime and working directory.
    launcher: ContainerLauncher,
    name: String,
    /// The `kill` asked for, while it runs.
    kill: Option<tokio::process::Child>,
}

impl Running {
    /// The engine's command `args` for this container, its output kept for the log.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = self.launcher.engine();
        cmd.args(args)
            .arg(&self.name)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        cmd
    }

    /// Asks the engine to kill the container (its client's death alone would leave it).
    pub(super) fn start_kill(&mut self) {
        if self.kill.is_some() {
            return;
        }
        match self.command(&["kill", "--signal", "KILL"]).spawn() {
            Ok(child) => self.kill = Some(child),
            Err(e) => tracing::warn!(container = self.name, "kill the container: {e}"),
        }
    }

    /// Waits for a kill asked for, then removes the container if it is still there
    /// (`--rm` removes it when the client saw it end; a killed client did not). A kill
    /// that finds the container gone already is no failure: the removal says what is left.
    pub(super) async fn remove(&mut self) {
        if let Some(kill) = self.kill.take()
            && let Err(e) = kill.wait_with_output().await
        {
            tracing::warn!(container = self.name, "kill the container: {e}");
        }
        let removal = self
            .command(&["rm", "--force", "--ignore", "--time", "0"])
            .output()
            .await;
        match removal {
            Ok(out) if out.status.success() => {}
            Ok(out) => tracing::warn!(
                container = self.name,
                "remove the container: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => tracing::warn!(container = self.name, "remove the container: {e}"),
        }
    }
}

/// The container's name: `codebutler-run-` and the run id, in the characters names allow.
fn container_name(run_id: &str) -> String {
    let id: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("codebutler-run-{id}")
}

/// The host paths the container gets, each at its own path, and whether it is writable:
/// the worktree (read-write), the object stores its repository's alternates name, the
/// spec's read-only paths and its attachments (read-only; the sandbox inside binds them
/// into the worktree).
fn mounts(spec: &SandboxSpec) -> Result<Vec<(PathBuf, bool)>, LaunchError> {
    let mut mounts = vec![(spec.worktree.clone(), true)];
    for store in alternates(&spec.worktree)? {
        mounts.push((store, false));
    }
    for path in &spec.read_only {
        mounts.push((path.clone(), false));
    }
    if let Some(attachments) = &spec.attachments {
        mounts.push((attachments.clone(), false));
    }
    Ok(mounts)
}

/// The object stores `<worktree>/.git/objects/info/alternates` names (written by the
/// controller; the runner sees `.git` read-only). None when the file is absent.
fn alternates(worktree: &Path) -> Result<Vec<PathBuf>, LaunchError> {
    let file = worktree.join(".git/objects/info/alternates");
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LaunchError(format!("read {}: {e}", file.display()))),
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let path = PathBuf::from(line);
            if path.is_absolute() {
                Ok(path)
            } else {
                Err(LaunchError(format!(
                    "{} names {line:?}, not an absolute path",
                    file.display()
                )))
            }
        })
        .collect()
}

/// `--mount` for `path` at its own path, read-only unless `writable`. A path the engine's
/// option syntax cannot carry (a comma, `=`, a newline) is refused rather than mangled.
fn bind_mount(path: &Path, writable: bool) -> Result<OsString, LaunchError> {
    let Some(text) = path.to_str() else {
        return Err(LaunchError(format!(
            "{} is not valid UTF-8: a container cannot mount it",
            path.display()
        )));
    };
    if text.contains([',', '=', '\n']) || !path.is_absolute() {
        return Err(LaunchError(format!(
            "{text:?} cannot be mounted into a container (an absolute path without ',' or '=')"
        )));
    }
    let mut mount = format!("--mount=type=bind,source={text},destination={text}");
    if !writable {
        mount.push_str(",readonly=true");
    }
    Ok(OsString::from(mount))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher() -> ContainerLauncher {
        ContainerLauncher {
            config: ContainerConfig {
                engine: "podman".into(),
                image: "localhost/codebutler-runner:latest".into(),
                runtime: Some("runc".into()),
                extra_args: vec!["--label=team=api".into()],
            },
            seccomp_profile: PathBuf::from("/srv/repo/.codebutler/run/runner-seccomp.json"),
            dir: PathBuf::from("/srv/repo/.codebutler/run"),
        }
    }

    #[test]
    fn the_container_gets_the_worktree_its_history_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let worktree = dir.path().join("branches/fix-login");
        std::fs::create_dir_all(worktree.join(".git/objects/info")).unwrap();
        std::fs::write(
            worktree.join(".git/objects/info/alternates"),
            "/srv/repo/.codebutler/git/bases/abc/objects\n",
        )
        .unwrap();
        let mut spec = SandboxSpec::for_worktree(&worktree);
        spec.read_only = vec![PathBuf::from("/opt/toolchain")];
        spec.attachments = Some(PathBuf::from("/srv/repo/.codebutler/attachments/C1-1.1"));
        spec.limits.max_processes = 128;
        spec.limits.memory_bytes = 768 << 20;
        let request = LaunchRequest {
            run_id: "42".into(),
            spec,
            log: dir.path().join("run-42.log"),
        };
        let w = worktree.display();
        let args: Vec<String> = launcher()
            .run_args(&request)
            .unwrap()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let expected = [
            "--rm",
            "--name=codebutler-run-42",
            &format!("--label=codebutler.worktree={w}"),
            "--network=none",
            "--read-only",
            "--no-hosts",
            "--http-proxy=false",
            "--cgroupns=private",
            "--cap-drop=all",
            "--cap-add=SETFCAP",
            "--security-opt=no-new-privileges",
            "--security-opt=seccomp=/srv/repo/.codebutler/run/runner-seccomp.json",
            "--security-opt=unmask=/proc/*",
            "--pids-limit=128",
            "--memory=805306368",
            "--memory-swap=805306368",
            "--ulimit=nofile=4096:4096",
            "--ulimit=nproc=128:128",
            "--preserve-fds=1",
            "--log-driver=none",
            &format!("--mount=type=bind,source={w},destination={w}"),
            "--mount=type=bind,source=/srv/repo/.codebutler/git/bases/abc/objects,destination=/srv/repo/.codebutler/git/bases/abc/objects,readonly=true",
            "--mount=type=bind,source=/opt/toolchain,destination=/opt/toolchain,readonly=true",
            "--mount=type=bind,source=/srv/repo/.codebutler/attachments/C1-1.1,destination=/srv/repo/.codebutler/attachments/C1-1.1,readonly=true",
            "--label=team=api",
            "localhost/codebutler-runner:latest",
        ];
        assert_eq!(args, expected);
    }

    #[test]
    fn paths_the_mount_option_cannot_carry_are_refused() {
        for bad in ["/srv/a,b", "/srv/a=b", "relative/path", "/srv/a\nb"] {
            let e = bind_mount(Path::new(bad), false).unwrap_err();
            assert!(e.to_string().contains("cannot be mounted"), "{e}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/objects/info")).unwrap();
        std::fs::write(
            dir.path().join(".git/objects/info/alternates"),
            "../objects\n",
        )
        .unwrap();
        let e = alternates(dir.path()).unwrap_err();
        assert!(e.to_string().contains("not an absolute path"), "{e}");
    }

    #[test]
    fn container_names_keep_to_the_characters_engines_allow() {
        assert_eq!(container_name("1234"), "codebutler-run-1234");
        assert_eq!(container_name("a/b c"), "codebutler-run-a_b_c");
    }

    #[test]
    fn the_profile_is_podmans_default_with_sethostname_allowed() {
        let profile: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE).unwrap();
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        let rules = profile["syscalls"].as_array().unwrap();
        let sethostname: Vec<&serde_json::Value> = rules
            .iter()
            .filter(|r| {
                r["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == "sethostname")
            })
            .collect();
        assert_eq!(sethostname.len(), 1, "{sethostname:?}");
        assert_eq!(sethostname[0]["action"], "SCMP_ACT_ALLOW");
        // What a container may never do stays refused, or needs a capability it has not.
        let allowed_without_caps = |name: &str| {
            rules.iter().any(|r| {
                r["action"] == "SCMP_ACT_ALLOW"
                    && r["includes"].as_object().is_none_or(|i| i.is_empty())
                    && r["names"].as_array().unwrap().iter().any(|n| n == name)
            })
        };
        for name in [
            "bpf",
            "kexec_load",
            "init_module",
            "open_by_handle_at",
            "perf_event_open",
        ] {
            assert!(!allowed_without_caps(name), "{name}");
        }
        assert!(allowed_without_caps("unshare") && allowed_without_caps("mount"));
    }
}
