//! Whether this host can run the Coder's sandbox, found at start: the runner enters the
//! sandbox of the repository's `sandbox` settings around an empty directory and runs
//! `/bin/true` (`codebutler-runner sandbox-exec`), the same set-up every run, worktree helper
//! and preparation goes through. A host that lacks a kernel feature the sandbox needs fails
//! at one named step; that step says which feature ([`Feature`]) and the daemon stops saying
//! so, instead of failing the first approved plan. The runner's warnings (what it skipped)
//! are handed back to be logged. Without a sandbox (`sandbox.mode` `none`) nothing is probed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::config::{BuildConfig, SandboxConfig};
use crate::layout::write_own_file;
use crate::workspace::toolchains::Toolchains;

/// How long the probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// A kernel feature the sandbox needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Landlock,
    UserNamespaces,
    Seccomp,
    Cgroups,
    /// A step about the `sandbox` settings themselves (a read-only path that is not there):
    /// a setting to fix, not something the host lacks.
    Settings,
    /// A step that names no one feature (mounts, `pivot_root`, …).
    Other,
}

impl Feature {
    /// The feature a failed sandbox step (its name, as the runner prints it) points at.
    pub fn of_step(step: &str) -> Self {
        match step {
            "probe_landlock" | "landlock" => Self::Landlock,
            "unshare"
            | "write_setgroups"
            | "write_uid_map"
            | "write_gid_map"
            | "unshare_cgroup_namespace" => Self::UserNamespaces,
            "seccomp" | "connect_filter" => Self::Seccomp,
            "create_cgroup" | "join_cgroup" => Self::Cgroups,
            "validate_spec" | "resolve_read_only" => Self::Settings,
            _ => Self::Other,
        }
    }

    /// The missing feature, in the words of the start's line.
    fn what(self) -> &'static str {
        match self {
            Self::Landlock => "Landlock",
            Self::UserNamespaces => "user namespaces",
            Self::Seccomp => "seccomp filters",
            Self::Cgroups => "cgroups (the pids and memory controllers)",
            Self::Settings | Self::Other => "",
        }
    }

    fn fix(self) -> &'static str {
        match self {
            Self::Landlock => {
                "the sandbox needs Landlock ABI 3 or later: Linux 6.2 or newer with landlock in \
                 the kernel's lsm= boot parameter"
            }
            Self::UserNamespaces => {
                "the sandbox needs user namespaces: a kernel with CONFIG_USER_NS, and where \
                 they are restricted, run codebutler as root or allow them \
                 (kernel.unprivileged_userns_clone=1, \
                 kernel.apparmor_restrict_unprivileged_userns=0; in a container, allow unshare)"
            }
            Self::Seccomp => {
                "the sandbox needs seccomp filters (CONFIG_SECCOMP_FILTER; in a container, \
                 allow the seccomp system call)"
            }
            Self::Cgroups => {
                "the sandbox caps each run's processes and memory with the pids and memory \
                 cgroups: mount them under /sys/fs/cgroup, writable by codebutler"
            }
            Self::Settings => {
                "check the `sandbox` settings (`sandbox.readOnly` names host paths that must exist)"
            }
            Self::Other => "the step's detail says what the host refused",
        }
    }
}

/// The line of a failed probe: what the host lacks (or the settings that do not work), the
/// step and its detail, and the fix.
fn unavailable(feature: Feature, step: &str, detail: &str) -> String {
    match feature {
        Feature::Settings => format!(
            "the sandbox cannot be set up with these settings (sandbox step `{step}` failed: \
             {detail}); {}",
            feature.fix()
        ),
        Feature::Other => format!(
            "this host cannot run the Coder's sandbox (sandbox step `{step}` failed: {detail}); {}",
            feature.fix()
        ),
        _ => format!(
            "this host cannot run the Coder's sandbox for lack of {} (sandbox step `{step}` \
             failed: {detail}); {}",
            feature.what(),
            feature.fix()
        ),
    }
}

/// Why the probe says the sandbox cannot run here.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{}", unavailable(*feature, step, detail))]
    Unavailable {
        feature: Feature,
        step: String,
        detail: String,
    },
    #[error(
        "the runner {} is missing: build it beside codebutler (cargo build --release --locked \
         --workspace --bins) or set sandbox.runnerPath",
        path.display()
    )]
    NoRunner { path: PathBuf },
    #[error("probe the sandbox with {}: {detail}", path.display())]
    Failed { path: PathBuf, detail: String },
}

impl ProbeError {
    /// Whether a setting is to blame (exit code 2), rather than the host (5).
    pub fn is_settings(&self) -> bool {
        matches!(
            self,
            Self::Unavailable {
                feature: Feature::Settings,
                ..
            }
        )
    }
}

/// Enters the sandbox `sandbox`, `build` and the `toolchains` found describe, with the runner `runner_bin`, around
/// an empty directory under `run_dir` (`.codebutler/run`); returns the runner's warnings.
pub async fn probe(
    runner_bin: &Path,
    sandbox: &SandboxConfig,
    build: &BuildConfig,
    toolchains: &Toolchains,
    run_dir: &Path,
) -> Result<Vec<String>, ProbeError> {
    let failed = |detail: String| ProbeError::Failed {
        path: runner_bin.to_owned(),
        detail,
    };
    let name = format!("sandbox-probe-{}", std::process::id());
    let dir = run_dir.join(&name);
    let spec_path = run_dir.join(format!("{name}.json"));
    std::fs::create_dir_all(&dir).map_err(|e| failed(format!("create {}: {e}", dir.display())))?;
    let mut spec = crate::workspace::run_spec(sandbox, build, toolchains, &dir);
    // No hub socket to keep: the probe runs `/bin/true`.
    spec.keep_fds = Vec::new();
    let outcome = async {
        let json = serde_json::to_vec(&spec).map_err(|e| failed(e.to_string()))?;
        write_own_file(&spec_path, &json)
            .map_err(|e| failed(format!("write {}: {e}", spec_path.display())))?;
        let child = tokio::process::Command::new(runner_bin)
            .arg("sandbox-exec")
            .arg("--spec")
            .arg(&spec_path)
            .args(["--", "/bin/true"])
            .env_clear()
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let output = match tokio::time::timeout(PROBE_TIMEOUT, child).await {
            Err(_) => {
                return Err(failed(format!(
                    "no answer within {} s",
                    PROBE_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ProbeError::NoRunner {
                    path: runner_bin.to_owned(),
                });
            }
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Ok(Ok(output)) => output,
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            return Ok(warnings(&stderr));
        }
        Err(match failed_step(&stderr) {
            Some((step, detail)) => ProbeError::Unavailable {
                feature: Feature::of_step(&step),
                step,
                detail,
            },
            None => failed(format!(
                "{}: {}",
                output.status,
                stderr.lines().last().unwrap_or_default()
            )),
        })
    }
    .await;
    for removed in [std::fs::remove_file(&spec_path), std::fs::remove_dir(&dir)] {
        if let Err(e) = removed
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("remove the sandbox probe's files: {e}");
        }
    }
    outcome
}

/// The step and detail of the runner's "sandbox step `<step>` failed: <detail>" line.
fn failed_step(stderr: &str) -> Option<(String, String)> {
    stderr.lines().find_map(|line| {
        let rest = line.split_once("sandbox step `")?.1;
        let (step, rest) = rest.split_once('`')?;
        let detail = rest.strip_prefix(" failed: ").unwrap_or(rest).trim();
        Some((step.to_owned(), detail.to_owned()))
    })
}

/// The runner's warnings ("codebutler-runner: WARNING: …" lines).
fn warnings(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| {
            line.split_once("WARNING: ")
                .map(|(_, w)| w.trim().to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_names_its_feature() {
        let stderr = "codebutler-runner: sandbox step `probe_landlock` failed: \
                      landlock_create_ruleset(VERSION): ENOSYS: the kernel is built without Landlock\n";
        let (step, detail) = failed_step(stderr).unwrap();
        assert_eq!(step, "probe_landlock");
        assert!(detail.starts_with("landlock_create_ruleset"), "{detail}");
        assert_eq!(Feature::of_step(&step), Feature::Landlock);
        for (step, feature) in [
            ("unshare", Feature::UserNamespaces),
            ("write_uid_map", Feature::UserNamespaces),
            ("seccomp", Feature::Seccomp),
            ("create_cgroup", Feature::Cgroups),
            ("resolve_read_only", Feature::Settings),
            ("pivot_root", Feature::Other),
        ] {
            assert_eq!(Feature::of_step(step), feature, "{step}");
        }
        assert_eq!(failed_step("exec /bin/true: ENOENT"), None);
        assert_eq!(
            warnings("codebutler-runner: WARNING: no memory cgroup\nother\n"),
            ["no memory cgroup"]
        );
    }
}
