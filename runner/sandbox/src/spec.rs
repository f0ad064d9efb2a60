//! The sandbox spec the controller hands to the runner (JSON, camelCase), its defaults, and
//! the clean environment built from it.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where the worktree appears inside the sandbox unless the spec says otherwise.
pub const DEFAULT_MOUNT_POINT: &str = "/workspace";
/// The hostname inside the sandbox unless the spec says otherwise.
pub const DEFAULT_HOSTNAME: &str = "codebutler";
/// `HOME` inside the sandbox: on the private `/tmp`, created at set-up.
pub const HOME_INSIDE: &str = "/tmp/home";
/// `PATH` inside the sandbox.
pub const PATH_INSIDE: &str = "/usr/local/bin:/usr/bin:/bin";
/// Where the spec's [`SandboxSpec::attachments`] appear: this directory at the top of the
/// worktree (git-ignored, never committed), read-only.
pub const ATTACHMENTS_DIR: &str = ".codebutler-attachments";

/// What the runner needs to build its sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxSpec {
    /// The worktree on the host; the only host directory the sandbox can write.
    pub worktree: PathBuf,
    /// Where the worktree appears inside (default `/workspace`).
    #[serde(default = "default_mount_point")]
    pub mount_point: PathBuf,
    /// Extra host paths exposed read-only at the same path (toolchains such as `/root/.cargo`).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// A host directory (the files people shared in the thread) bound read-only at
    /// [`ATTACHMENTS_DIR`] in the worktree, as a live view: files added to it later appear
    /// inside. Absent: no such directory inside. Ignored with `mode: none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<PathBuf>,
    /// The hostname inside (default `codebutler`).
    #[serde(default = "default_hostname")]
    pub hostname: String,
    /// Resource limits.
    #[serde(default)]
    pub limits: Limits,
    /// Variables added to the allow-listed environment (see [`clean_env`]); nothing else of
    /// the parent's environment reaches the sandbox.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Descriptors that stay open (default `[3]`, the controller's socket); every other
    /// descriptor above 2 is closed. Listed descriptors that are not open are ignored.
    #[serde(default = "default_keep_fds")]
    pub keep_fds: Vec<RawFd>,
    /// `enforce` (default) or `none` (no sandbox at all; an explicit, loud opt-out).
    #[serde(default)]
    pub mode: SandboxMode,
    /// Keep the host's network: no new network namespace, and seccomp and Landlock allow
    /// TCP/UDP (`AF_INET`, `AF_INET6`) sockets. Everything else is as without it. Only the
    /// controller's worktree preparation (`npm ci`, `pip install`…) asks for it; absent or
    /// `false` (the default) means no network at all.
    #[serde(default)]
    pub network: bool,
}

impl SandboxSpec {
    /// A spec with every default, for the given worktree.
    pub fn for_worktree(worktree: impl Into<PathBuf>) -> Self {
        Self {
            worktree: worktree.into(),
            mount_point: default_mount_point(),
            read_only: Vec::new(),
            attachments: None,
            hostname: default_hostname(),
            limits: Limits::default(),
            env: BTreeMap::new(),
            keep_fds: default_keep_fds(),
            mode: SandboxMode::default(),
            network: false,
        }
    }
}

/// Whether the sandbox is built at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SandboxMode {
    /// Build the whole sandbox; any failing step is fatal.
    #[default]
    Enforce,
    /// No sandbox at all (an operator's explicit opt-out; the binary warns loudly).
    None,
}

/// Kernel-enforced resource limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Limits {
    /// Processes (and threads) in the sandbox: the pids cgroup and `RLIMIT_NPROC`.
    pub max_processes: u64,
    /// Memory: the memory cgroup for the whole sandbox and `RLIMIT_AS` per process.
    pub memory_bytes: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Size of the private `/tmp` (tmpfs `size=`).
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_processes: 256,
            memory_bytes: 2 << 30,
            file_size_bytes: 1 << 30,
            cpu_seconds: 3600,
            tmp_bytes: 512 << 20,
        }
    }
}

fn default_mount_point() -> PathBuf {
    PathBuf::from(DEFAULT_MOUNT_POINT)
}

fn default_hostname() -> String {
    DEFAULT_HOSTNAME.to_owned()
}

fn default_keep_fds() -> Vec<RawFd> {
    vec![3]
}

/// The complete environment of the sandboxed process: `PATH`, `HOME` (inside), `LANG`,
/// `TERM=dumb`, `CARGO_TARGET_DIR=.target` (build output stays in the worktree's ignored
/// `.target`, never in a shared cache), then `extra` (which may override those). Nothing is
/// taken from the parent's environment.
pub fn clean_env(home_inside: &Path, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert("PATH".to_owned(), PATH_INSIDE.to_owned());
    env.insert(
        "HOME".to_owned(),
        home_inside.to_string_lossy().into_owned(),
    );
    env.insert("LANG".to_owned(), "C.UTF-8".to_owned());
    env.insert("TERM".to_owned(), "dumb".to_owned());
    env.insert("CARGO_TARGET_DIR".to_owned(), ".target".to_owned());
    for (k, v) in extra {
        env.insert(k.clone(), v.clone());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_a_minimal_spec() {
        let spec: SandboxSpec = serde_json::from_str(r#"{"worktree": "/w"}"#).unwrap();
        assert_eq!(spec, SandboxSpec::for_worktree("/w"));
        assert_eq!(spec.mount_point, PathBuf::from("/workspace"));
        assert_eq!(spec.hostname, "codebutler");
        assert_eq!(spec.keep_fds, vec![3]);
        assert_eq!(spec.mode, SandboxMode::Enforce);
        assert!(!spec.network, "no network unless the spec asks for it");
        assert_eq!(spec.attachments, None);
        assert_eq!(spec.limits.max_processes, 256);
        assert_eq!(spec.limits.memory_bytes, 2 * 1024 * 1024 * 1024);
        assert_eq!(spec.limits.file_size_bytes, 1024 * 1024 * 1024);
        assert_eq!(spec.limits.cpu_seconds, 3600);
        assert_eq!(spec.limits.tmp_bytes, 512 * 1024 * 1024);
    }

    #[test]
    fn camel_case_fields_and_partial_limits() {
        let spec: SandboxSpec = serde_json::from_str(
            r#"{"worktree": "/w", "mountPoint": "/src", "readOnly": ["/opt/tool"],
                "limits": {"maxProcesses": 64}, "keepFds": [], "mode": "none",
                "env": {"RUST_LOG": "debug"}}"#,
        )
        .unwrap();
        assert_eq!(spec.mount_point, PathBuf::from("/src"));
        assert_eq!(spec.read_only, vec![PathBuf::from("/opt/tool")]);
        assert_eq!(spec.limits.max_processes, 64);
        assert_eq!(spec.limits.tmp_bytes, Limits::default().tmp_bytes);
        assert!(spec.keep_fds.is_empty());
        assert_eq!(spec.mode, SandboxMode::None);
        assert!(!spec.network);
        let spec: SandboxSpec =
            serde_json::from_str(r#"{"worktree": "/w", "network": true}"#).unwrap();
        assert!(spec.network);
        let spec: SandboxSpec =
            serde_json::from_str(r#"{"worktree": "/w", "attachments": "/r/a/t"}"#).unwrap();
        assert_eq!(spec.attachments, Some(PathBuf::from("/r/a/t")));
        // A string is not a yes: the field is typed, so a sloppy spec fails instead.
        assert!(
            serde_json::from_str::<SandboxSpec>(r#"{"worktree": "/w", "network": "no"}"#).is_err()
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        // A typo in a security setting must not be silently ignored.
        let e = serde_json::from_str::<SandboxSpec>(r#"{"worktree": "/w", "readonly": ["/"]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }

    #[test]
    fn clean_env_is_the_allow_list_plus_extras() {
        let extra = BTreeMap::from([
            ("RUST_LOG".to_owned(), "debug".to_owned()),
            ("TERM".to_owned(), "xterm".to_owned()),
        ]);
        let env = clean_env(Path::new("/tmp/home"), &extra);
        let expected: BTreeMap<String, String> = [
            ("CARGO_TARGET_DIR", ".target"),
            ("HOME", "/tmp/home"),
            ("LANG", "C.UTF-8"),
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("RUST_LOG", "debug"),
            ("TERM", "xterm"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(env, expected);
    }
}
