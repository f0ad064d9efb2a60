//! Per-platform preparation of a fresh worktree (`spec/plan-v2-long.md` §31): which
//! platforms a worktree holds (from its top-level files), the init command that prepares it
//! (`npm ci`, a Python venv, `cargo fetch`, `go mod download`, or `build.initCommand`), the
//! build-isolation environment every sandboxed process in the worktree gets, and running the
//! init inside the runner's sandbox with the network allowed for that step only.
//!
//! The choices are plain data ([`detect_in`], [`init_plan`], [`isolation_env`]), tested by
//! equality; [`run_init`] is the thin effectful part.
//!
//! Why the caches live in the worktree: the sandbox can write nothing else that outlives
//! it (its `/tmp` and `HOME` are a tmpfs per process tree) and it has no network, so what
//! the init downloads must sit in the worktree for the Coder's offline builds to find it.
//! They go under [`CACHE_DIR`], and `.venv`/`.target` are created by the controller with a
//! `.gitignore` of `*` inside, so none of it is ever committed by the Coder's GitCommit.

#![allow(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use codebutler_sandbox::SandboxSpec;
use codebutler_sandbox::spec::PATH_INSIDE;

use super::project_files::{ProjectFiles, is_requirements_file};
use super::python_deps::{self, Installer, PythonInstall};
use crate::config::ProjectType;
use crate::layout::{create_own_file, write_own_file};

/// The worktree's directory of per-worktree caches (npm, pip, cargo, go), never committed.
pub const CACHE_DIR: &str = ".codebutler-cache";
/// Most bytes of the init's output quoted in the thread when it fails.
pub const TAIL_BYTES: u64 = 3000;

/// A kind of project the worktree can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Platform {
    /// `.xcodeproj` or `.xcworkspace`.
    Xcode,
    /// `package.json`.
    Node,
    /// `pyproject.toml`, `setup.py`, `setup.cfg`, `tox.ini`, a requirements file or
    /// directory, a Poetry or uv lock, pytest's configuration.
    Python,
    /// `Cargo.toml`.
    Rust,
    /// `go.mod`.
    Go,
}

/// The platforms of a worktree whose top-level entries are `names`, in a fixed order
/// (Xcode, Node, Python, Rust, Go); empty for a generic project.
pub fn detect_in(names: &BTreeSet<String>) -> Vec<Platform> {
    let has = |n: &str| names.contains(n);
    let mut found = Vec::new();
    if names
        .iter()
        .any(|n| n.ends_with(".xcodeproj") || n.ends_with(".xcworkspace"))
    {
        found.push(Platform::Xcode);
    }
    if has("package.json") {
        found.push(Platform::Node);
    }
    let python_files = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "tox.ini",
        "Pipfile",
        "poetry.lock",
        "uv.lock",
        "pytest.ini",
        "conftest.py",
        "requirements",
    ];
    if python_files.iter().any(|n| has(n)) || names.iter().any(|n| is_requirements_file(n)) {
        found.push(Platform::Python);
    }
    if has("Cargo.toml") {
        found.push(Platform::Rust);
    }
    if has("go.mod") {
        found.push(Platform::Go);
    }
    found
}

/// The names of the worktree's top-level entries (unreadable entries are skipped; a
/// worktree that cannot be listed has none, and that is logged: no platform is detected).
pub fn top_level_names(worktree: &Path) -> BTreeSet<String> {
    match std::fs::read_dir(worktree) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
        Err(e) => {
            tracing::warn!(
                "list {} to detect its platforms: {e}; none detected",
                worktree.display()
            );
            BTreeSet::new()
        }
    }
}

/// The platforms of the worktree: `project_type` (`build.projectType`) when it forces one,
/// else detected from its files.
pub fn platforms(worktree: &Path, project_type: ProjectType) -> Vec<Platform> {
    match project_type {
        ProjectType::Auto => detect_in(&top_level_names(worktree)),
        ProjectType::Generic => Vec::new(),
        ProjectType::Xcode => vec![Platform::Xcode],
        ProjectType::Node => vec![Platform::Node],
        ProjectType::Python => vec![Platform::Python],
        ProjectType::Rust => vec![Platform::Rust],
        ProjectType::Go => vec![Platform::Go],
    }
}

/// One step of a detected init: a shell command and the program it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitStep {
    pub platform: Platform,
    /// Run with `/bin/sh -c` in the worktree.
    pub command: String,
    /// The command as the thread shows it (a lock's pins summed up rather than listed).
    pub shown: String,
    /// The program the command starts, looked for where the sandbox's `PATH` looks.
    pub program: String,
    /// What the thread is told beside the command ("pytest, not declared, installed").
    pub notes: Vec<String>,
}

impl InitStep {
    fn plain(platform: Platform, command: &str, program: &str) -> Self {
        Self {
            platform,
            command: command.to_owned(),
            shown: command.to_owned(),
            program: program.to_owned(),
            notes: Vec::new(),
        }
    }
}

/// Where the Python init writes a lock's pins for pip (the sandbox's own `/tmp`, which
/// lives as long as the init's sandbox).
const PINS_FILE: &str = "/tmp/codebutler-pins.txt";
/// Most bytes of pins the init's command carries: one argument of `sh -c` may be at most
/// 128 KiB (the kernel's `MAX_ARG_STRLEN`), and the rest of the command needs room.
const MAX_PINS_BYTES: usize = 96 * 1024;

/// The init steps of `platforms` for a worktree whose committed files are `files`, on
/// this operating system (Xcode's `pod install` only on macOS); `has_program` says whether
/// a program is where the sandbox's `PATH` finds it (`uv`, used when it is).
pub fn init_plan(
    platforms: &[Platform],
    files: &ProjectFiles,
    has_program: &dyn Fn(&str) -> bool,
) -> Vec<InitStep> {
    let has = |n: &str| files.has(n);
    platforms
        .iter()
        .filter_map(|p| match p {
            Platform::Xcode => (cfg!(target_os = "macos") && has("Podfile") && !has("Pods"))
                .then(|| InitStep::plain(*p, "pod install", "pod")),
            Platform::Node => Some(if has("package-lock.json") || has("npm-shrinkwrap.json") {
                InitStep::plain(*p, "npm ci", "npm")
            } else if has("yarn.lock") {
                InitStep::plain(*p, "yarn install --frozen-lockfile", "yarn")
            } else if has("pnpm-lock.yaml") {
                InitStep::plain(*p, "pnpm install --frozen-lockfile", "pnpm")
            } else {
                InitStep::plain(*p, "npm install", "npm")
            }),
            Platform::Python => Some(python_step(&python_deps::plan(files, has_program("uv")))),
            Platform::Rust => Some(InitStep::plain(*p, "cargo fetch", "cargo")),
            Platform::Go => Some(InitStep::plain(*p, "go mod download", "go")),
        })
        .collect()
}

/// The Python init: a `.venv`, then what [`python_deps::plan`] says to install.
fn python_step(install: &PythonInstall) -> InitStep {
    let venv = "python3 -m venv .venv";
    let mut notes = install.notes.clone();
    let (command, shown) = match &install.installer {
        Installer::UvSync {
            extras,
            groups,
            extra,
        } => {
            let mut sync = String::from("uv sync --frozen");
            for e in extras {
                sync.push_str(&format!(" --extra {}", shell_word(e)));
            }
            for g in groups {
                sync.push_str(&format!(" --group {}", shell_word(g)));
            }
            if !extra.is_empty() {
                sync.push_str(" && uv pip install");
                for requirement in extra {
                    sync.push(' ');
                    sync.push_str(&shell_word(requirement));
                }
            }
            let command = format!("{venv} && {sync}");
            (command.clone(), command)
        }
        Installer::Pip { args, .. } if args.is_empty() => (venv.to_owned(), venv.to_owned()),
        Installer::Pip { args, pins } => {
            let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
            let words = words.join(" ");
            let lines: Vec<String> = pins.lines.iter().map(|l| shell_word(l)).collect();
            let lines = lines.join(" ");
            let fits = lines.len() <= MAX_PINS_BYTES;
            match (pins.from, fits) {
                (Some(from), false) => notes.push(format!(
                    "`{from}` pins more versions than a command can carry, so pip chose the versions"
                )),
                (Some("uv.lock"), true) => notes.push(
                    "no `uv` in the sandbox, so pip installed the versions `uv.lock` pins".into(),
                ),
                _ => {}
            }
            match pins.from {
                Some(from) if !pins.lines.is_empty() && fits => (
                    format!(
                        "{venv} && printf '%s\\n' {lines} > {PINS_FILE} && .venv/bin/pip install -c {PINS_FILE} {words}"
                    ),
                    format!(
                        "{venv} && .venv/bin/pip install -c ({} versions {from} pins) {words}",
                        pins.lines.len()
                    ),
                ),
                _ => {
                    let command = format!("{venv} && .venv/bin/pip install {words}");
                    (command.clone(), command)
                }
            }
        }
    };
    InitStep {
        platform: Platform::Python,
        command,
        shown,
        program: "python3".to_owned(),
        notes,
    }
}

/// `word` as one word of a POSIX shell command: as it is when it needs no quoting, else in
/// single quotes.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:@,+%-".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Whether `program` is where the sandbox's `PATH` would find it: `build.path`'s
/// directories (`extra`), then `/usr/local/bin:/usr/bin:/bin`, all bound read-only from the
/// host (`build.path`'s through `sandbox.readOnly`).
pub fn in_sandbox_path(program: &str, extra: &[String]) -> bool {
    extra
        .iter()
        .map(String::as_str)
        .chain(PATH_INSIDE.split(':'))
        .any(|dir| Path::new(dir).join(program).is_file())
}

/// The environment of every sandboxed process in a worktree seen at `root`: its
/// platforms' [`isolation_env`], then the operator's `build.env` (`env`; its `GOFLAGS`
/// after the isolation's own, which keeps the module cache removable), and a `PATH` of the
/// virtual environment, `build.path` (`path`) and the system's directories.
pub fn environment(
    platforms: &[Platform],
    root: &Path,
    env: &BTreeMap<String, String>,
    path: &[String],
) -> BTreeMap<String, String> {
    let mut out = isolation_env(platforms, root);
    for (name, value) in env {
        match out.get_mut(name) {
            Some(flags) if name == "GOFLAGS" => {
                flags.push(' ');
                flags.push_str(value);
            }
            _ => {
                out.insert(name.clone(), value.clone());
            }
        }
    }
    if !path.is_empty() {
        let mut dirs = Vec::new();
        if platforms.contains(&Platform::Python) {
            dirs.push(root.join(".venv/bin").to_string_lossy().into_owned());
        }
        dirs.extend(path.iter().cloned());
        dirs.push(PATH_INSIDE.to_owned());
        out.insert("PATH".to_owned(), dirs.join(":"));
    }
    out
}

/// The build-isolation environment of a worktree seen at `root` (the sandbox's mount
/// point): per-worktree caches, target and virtual-env directories, and tools kept off the
/// network they will not have (update checks, audits, toolchain downloads).
pub fn isolation_env(platforms: &[Platform], root: &Path) -> BTreeMap<String, String> {
    let at = |rel: &str| root.join(rel).to_string_lossy().into_owned();
    let cache = |rel: &str| at(&format!("{CACHE_DIR}/{rel}"));
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_owned(), v);
    };
    for p in platforms {
        match p {
            Platform::Xcode => set("XCODEBUILD_DERIVED_DATA", at(".derivedData")),
            Platform::Node => {
                set("npm_config_cache", cache("npm"));
                set("npm_config_update_notifier", "false".into());
                set("npm_config_fund", "false".into());
                set("npm_config_audit", "false".into());
                set("YARN_CACHE_FOLDER", cache("yarn"));
                set("npm_config_store_dir", cache("pnpm"));
            }
            Platform::Python => {
                set("PIP_CACHE_DIR", cache("pip"));
                set("PIP_DISABLE_PIP_VERSION_CHECK", "1".into());
                set("VIRTUAL_ENV", at(".venv"));
                set("PATH", format!("{}:{PATH_INSIDE}", at(".venv/bin")));
                // Bytecode caches beside the caches, not as `__pycache__` in the tree.
                set("PYTHONPYCACHEPREFIX", cache("pycache"));
                set("UV_CACHE_DIR", cache("uv"));
                set("UV_PYTHON_DOWNLOADS", "never".into());
            }
            Platform::Rust => {
                set("CARGO_TARGET_DIR", at(".target"));
                set("CARGO_HOME", cache("cargo"));
            }
            Platform::Go => {
                set("GOPATH", cache("go"));
                set("GOMODCACHE", cache("go/pkg/mod"));
                set("GOCACHE", cache("go-build"));
                // Module files are read-only by default, which would make the worktree
                // impossible to remove; and no toolchain downloads.
                set("GOFLAGS", "-modcacherw".into());
                set("GOTOOLCHAIN", "local".into());
            }
        }
    }
    env
}

/// Creates the directories the isolation environment points into, each git-ignoring itself
/// (a `.gitignore` of `*`): [`CACHE_DIR`] always, `.venv` for Python, `.target` for Rust.
/// An entry the checkout already has (a committed `.venv`, or a symlink) is left alone:
/// nothing here follows a symlink. Blocking.
pub fn make_ignored_dirs(worktree: &Path, platforms: &[Platform]) -> std::io::Result<()> {
    let mut dirs = vec![CACHE_DIR];
    if platforms.contains(&Platform::Python) {
        dirs.push(".venv");
    }
    if platforms.contains(&Platform::Rust) {
        dirs.push(".target");
    }
    for dir in dirs {
        let path = worktree.join(dir);
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path.join(".gitignore"))?;
        file.write_all(b"# Written by CodeButler: a per-worktree cache, never committed.\n*\n")?;
    }
    Ok(())
}

/// How an init ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitEnd {
    /// Exit status 0.
    Succeeded,
    /// A non-zero exit (125: the sandbox could not be set up), or killed by a signal.
    Failed { status: String },
    /// Still running at the time limit; killed.
    TimedOut,
}

/// The result of [`run_init`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitOutcome {
    pub end: InitEnd,
    pub duration: Duration,
    /// The last [`TAIL_BYTES`] of its output (stdout and stderr interleaved).
    pub tail: String,
}

/// Why an init could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("run {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("wait for the init: {0}")]
    Wait(std::io::Error),
}

/// What [`run_init`] needs.
#[derive(Clone, Debug)]
pub struct InitRequest {
    /// The `codebutler-runner` binary.
    pub runner_bin: PathBuf,
    /// The sandbox spec (the caller sets `network: true` and the isolation environment).
    pub spec: SandboxSpec,
    /// The shell command.
    pub command: String,
    /// Where the spec file and the output go (`.codebutler/run/init-<slug>.{json,log}`).
    pub spec_path: PathBuf,
    pub log_path: PathBuf,
    pub timeout: Duration,
}

/// Runs `/bin/sh -c <command>` with `codebutler-runner sandbox-exec` in the request's
/// sandbox, with an empty environment outside it (no secret can reach it), its output in the
/// log file, killed with its whole process group at the time limit.
pub async fn run_init(request: &InitRequest) -> Result<InitOutcome, InitError> {
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| InitError::Write { path, source }
    };
    for path in [&request.spec_path, &request.log_path] {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(write_error(dir))?;
        }
    }
    let json = serde_json::to_vec_pretty(&request.spec)
        .map_err(|e| write_error(&request.spec_path)(std::io::Error::other(e)))?;
    write_own_file(&request.spec_path, &json).map_err(write_error(&request.spec_path))?;
    let log = create_own_file(&request.log_path).map_err(write_error(&request.log_path))?;
    let log_err = log.try_clone().map_err(write_error(&request.log_path))?;

    let mut command = tokio::process::Command::new(&request.runner_bin);
    command
        .arg("sandbox-exec")
        .arg("--spec")
        .arg(&request.spec_path)
        .args(["--", "/bin/sh", "-c", &request.command])
        .env_clear()
        .current_dir(&request.spec.worktree)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        .kill_on_drop(true);
    if request.spec.mode == codebutler_sandbox::SandboxMode::None {
        // Without a sandbox nothing replaces the environment: give the command the same
        // allow-listed one it would get inside.
        let home = request.spec.worktree.join(CACHE_DIR).join("home");
        command.envs(codebutler_sandbox::clean_env(&home, &request.spec.env));
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| InitError::Spawn {
        program: request.runner_bin.clone(),
        source,
    })?;
    let end = match tokio::time::timeout(request.timeout, child.wait()).await {
        Ok(status) => {
            let status = status.map_err(InitError::Wait)?;
            if status.success() {
                InitEnd::Succeeded
            } else {
                InitEnd::Failed {
                    status: status.to_string(),
                }
            }
        }
        Err(_) => {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                // The runner leads its own process group; the sandbox's PID namespace dies
                // with its init when the runner does.
                // SAFETY: killpg only sends a signal to the process group our child leads
                // (it was started with process_group(0) and has not been reaped yet).
                unsafe { libc::killpg(pid, libc::SIGKILL) };
            }
            if let Err(e) = child.kill().await {
                tracing::warn!("kill the timed-out init: {e}");
            }
            InitEnd::TimedOut
        }
    };
    let duration = started.elapsed();
    if let Err(e) = std::fs::remove_file(&request.spec_path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("remove {}: {e}", request.spec_path.display());
    }
    Ok(InitOutcome {
        end,
        duration,
        tail: tail(&request.log_path, TAIL_BYTES),
    })
}

/// The last `max` bytes of a file, from a line start when one is near, lossily decoded.
pub fn tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0
        && let Some(i) = text.find('\n')
    {
        text = text.split_off(i + 1);
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn platforms_are_detected_from_top_level_files() {
        assert_eq!(detect_in(&names(&["README.md", "src"])), vec![]);
        assert_eq!(
            detect_in(&names(&["package.json", "package-lock.json"])),
            vec![Platform::Node]
        );
        assert_eq!(
            detect_in(&names(&["pyproject.toml"])),
            vec![Platform::Python]
        );
        for python in [
            "requirements.txt",
            "requirements-dev.txt",
            "dev-requirements.txt",
            "requirements",
            "setup.py",
            "setup.cfg",
            "tox.ini",
            "uv.lock",
        ] {
            assert_eq!(
                detect_in(&names(&[python])),
                vec![Platform::Python],
                "{python}"
            );
        }
        assert_eq!(detect_in(&names(&["Cargo.toml"])), vec![Platform::Rust]);
        assert_eq!(detect_in(&names(&["go.mod"])), vec![Platform::Go]);
        assert_eq!(
            detect_in(&names(&["App.xcodeproj", "Podfile"])),
            vec![Platform::Xcode]
        );
        assert_eq!(
            detect_in(&names(&["App.xcworkspace"])),
            vec![Platform::Xcode]
        );
        // A polyglot repository gets every platform, in a fixed order.
        assert_eq!(
            detect_in(&names(&["go.mod", "Cargo.toml", "package.json"])),
            vec![Platform::Node, Platform::Rust, Platform::Go]
        );
    }

    #[test]
    fn forced_project_types_override_detection() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("package.json"), "{}").unwrap();
        assert_eq!(
            platforms(dir.path(), ProjectType::Auto),
            vec![Platform::Node]
        );
        assert_eq!(platforms(dir.path(), ProjectType::Generic), vec![]);
        assert_eq!(platforms(dir.path(), ProjectType::Go), vec![Platform::Go]);
    }

    #[test]
    fn init_commands_follow_the_lockfile() {
        let no_tools = |_: &str| false;
        let plan_of = |files: &[(&str, &str)]| -> Vec<String> {
            let files = ProjectFiles::from_files(files);
            init_plan(&detect_in(files.names()), &files, &no_tools)
                .into_iter()
                .map(|s| s.command)
                .collect()
        };
        let plan = |names: &[&str]| -> Vec<String> {
            let files: Vec<(&str, &str)> = names.iter().map(|n| (*n, "")).collect();
            plan_of(&files)
        };
        assert_eq!(plan(&["package.json", "package-lock.json"]), ["npm ci"]);
        assert_eq!(
            plan(&["package.json", "yarn.lock"]),
            ["yarn install --frozen-lockfile"]
        );
        assert_eq!(
            plan(&["package.json", "pnpm-lock.yaml"]),
            ["pnpm install --frozen-lockfile"]
        );
        assert_eq!(plan(&["package.json"]), ["npm install"]);
        assert_eq!(
            plan(&["requirements.txt", "pyproject.toml"]),
            ["python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"]
        );
        assert_eq!(
            plan_of(&[("pyproject.toml", "[project]\nname = \"x\"\n")]),
            ["python3 -m venv .venv && .venv/bin/pip install -e ."]
        );
        assert_eq!(plan(&["Cargo.toml"]), ["cargo fetch"]);
        assert_eq!(plan(&["go.mod"]), ["go mod download"]);
        assert!(plan(&["README.md"]).is_empty());
        // Xcode needs macOS (and then only when Pods are not committed).
        let xcode = plan(&["App.xcodeproj", "Podfile"]);
        if cfg!(target_os = "macos") {
            assert_eq!(xcode, ["pod install"]);
        } else {
            assert!(xcode.is_empty());
        }
        assert!(plan(&["App.xcodeproj", "Podfile", "Pods"]).is_empty());
        let go = ProjectFiles::from_files(&[("go.mod", "")]);
        let steps = init_plan(&[Platform::Go], &go, &no_tools);
        assert_eq!(steps[0].program, "go");
    }

    #[test]
    fn the_python_init_installs_what_the_tests_need_and_says_what_it_added() {
        let files = ProjectFiles::from_files(&[
            (
                "pyproject.toml",
                "[project]\nname = \"calc\"\n[project.optional-dependencies]\ntest = [\"hypothesis\"]\n[dependency-groups]\ndev = [\"coverage>=7; python_version >= '3.9'\"]\n",
            ),
            (
                "tests/test_calc.py",
                "def test_add():\n    assert 1 + 1 == 2\n",
            ),
        ]);
        let steps = init_plan(&[Platform::Python], &files, &|_| false);
        assert_eq!(
            steps[0].command,
            r#"python3 -m venv .venv && .venv/bin/pip install -e '.[test]' 'coverage>=7; python_version >= '\''3.9'\''' pytest"#
        );
        assert_eq!(steps[0].shown, steps[0].command);
        assert_eq!(steps[0].notes, ["pytest, not declared, installed"]);

        // A lock's versions are pins in the sandbox's /tmp, summed up in the thread.
        let lock = "[[package]]\nname = \"pytest\"\nversion = \"8.3.4\"\nsource = { registry = \"https://pypi.org/simple\" }\n[[package]]\nname = \"pluggy\"\nversion = \"1.5.0\"\nsource = { registry = \"https://pypi.org/simple\" }\n";
        let files = ProjectFiles::from_files(&[
            (
                "pyproject.toml",
                "[project]\nname = \"calc\"\n[dependency-groups]\ndev = [\"pytest>=8\"]\n",
            ),
            ("uv.lock", lock),
        ]);
        let steps = init_plan(&[Platform::Python], &files, &|_| false);
        assert_eq!(
            steps[0].command,
            r#"python3 -m venv .venv && printf '%s\n' pluggy==1.5.0 pytest==8.3.4 > /tmp/codebutler-pins.txt && .venv/bin/pip install -c /tmp/codebutler-pins.txt -e . 'pytest>=8'"#
        );
        assert_eq!(
            steps[0].shown,
            "python3 -m venv .venv && .venv/bin/pip install -c (2 versions uv.lock pins) -e . 'pytest>=8'"
        );
        assert_eq!(
            steps[0].notes,
            ["no `uv` in the sandbox, so pip installed the versions `uv.lock` pins"]
        );
        // A lock too large for one command line: pip chooses, and the thread is told.
        let mut huge = String::new();
        for i in 0..5000 {
            huge.push_str(&format!(
                "[[package]]\nname = \"package-number-{i}\"\nversion = \"1.0.{i}\"\nsource = {{ registry = \"https://pypi.org/simple\" }}\n"
            ));
        }
        let files = ProjectFiles::from_files(&[
            (
                "pyproject.toml",
                "[project]\nname = \"calc\"\n[dependency-groups]\ndev = [\"pytest>=8\"]\n",
            ),
            ("uv.lock", &huge),
        ]);
        let steps = init_plan(&[Platform::Python], &files, &|_| false);
        assert_eq!(
            steps[0].command,
            "python3 -m venv .venv && .venv/bin/pip install -e . 'pytest>=8'"
        );
        assert_eq!(
            steps[0].notes,
            ["`uv.lock` pins more versions than a command can carry, so pip chose the versions"]
        );
        let files = ProjectFiles::from_files(&[
            (
                "pyproject.toml",
                "[project]\nname = \"calc\"\n[dependency-groups]\ndev = [\"pytest>=8\"]\n",
            ),
            ("uv.lock", lock),
        ]);
        // With uv where the sandbox can run it, uv installs from its lock.
        let steps = init_plan(&[Platform::Python], &files, &|p| p == "uv");
        assert_eq!(
            steps[0].command,
            "python3 -m venv .venv && uv sync --frozen --group dev"
        );
        assert!(steps[0].notes.is_empty());
    }

    #[test]
    fn shell_words_are_quoted_only_when_they_need_it() {
        assert_eq!(shell_word("pytest==8.3.4"), "pytest==8.3.4");
        assert_eq!(shell_word("-e"), "-e");
        assert_eq!(shell_word(".[test,dev]"), "'.[test,dev]'");
        assert_eq!(shell_word("a>=1"), "'a>=1'");
        assert_eq!(shell_word("it's"), r#"'it'\''s'"#);
        assert_eq!(shell_word("$(rm -rf ~)"), "'$(rm -rf ~)'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn the_operators_env_and_path_join_the_isolation_env() {
        let root = Path::new("/workspace");
        let env: BTreeMap<String, String> = [
            ("GOPROXY", "file:///srv/goproxy"),
            ("GOFLAGS", "-mod=mod"),
            ("CARGO_HOME", "/elsewhere"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let path = vec!["/opt/rust/bin".to_owned()];
        let all = environment(&[Platform::Go, Platform::Python], root, &env, &path);
        assert_eq!(all["GOPROXY"], "file:///srv/goproxy");
        assert_eq!(
            all["GOFLAGS"], "-modcacherw -mod=mod",
            "the cache stays removable"
        );
        assert_eq!(all["CARGO_HOME"], "/elsewhere");
        assert_eq!(
            all["PATH"],
            "/workspace/.venv/bin:/opt/rust/bin:/usr/local/bin:/usr/bin:/bin"
        );
        let rust = environment(&[Platform::Rust], root, &BTreeMap::new(), &path);
        assert_eq!(rust["PATH"], "/opt/rust/bin:/usr/local/bin:/usr/bin:/bin");
        assert_eq!(
            environment(&[Platform::Rust], root, &BTreeMap::new(), &[]),
            isolation_env(&[Platform::Rust], root)
        );
    }

    #[test]
    fn isolation_env_keeps_caches_and_builds_in_the_worktree() {
        let root = Path::new("/workspace");
        assert!(isolation_env(&[], root).is_empty());
        let env = isolation_env(&[Platform::Rust, Platform::Python], root);
        assert_eq!(env["CARGO_TARGET_DIR"], "/workspace/.target");
        assert_eq!(env["CARGO_HOME"], "/workspace/.codebutler-cache/cargo");
        assert_eq!(env["VIRTUAL_ENV"], "/workspace/.venv");
        assert_eq!(
            env["PATH"],
            "/workspace/.venv/bin:/usr/local/bin:/usr/bin:/bin"
        );
        let node = isolation_env(&[Platform::Node], root);
        assert_eq!(node["npm_config_cache"], "/workspace/.codebutler-cache/npm");
        assert_eq!(node["npm_config_audit"], "false");
        let go = isolation_env(&[Platform::Go], root);
        assert_eq!(go["GOMODCACHE"], "/workspace/.codebutler-cache/go/pkg/mod");
        assert_eq!(go["GOFLAGS"], "-modcacherw");
        assert_eq!(go["GOTOOLCHAIN"], "local");
        let xcode = isolation_env(&[Platform::Xcode], root);
        assert_eq!(xcode["XCODEBUILD_DERIVED_DATA"], "/workspace/.derivedData");
        // No secret-looking variable ever comes from here.
        for (k, _) in isolation_env(
            &[
                Platform::Xcode,
                Platform::Node,
                Platform::Python,
                Platform::Rust,
                Platform::Go,
            ],
            root,
        ) {
            assert!(!k.contains("TOKEN") && !k.contains("KEY"), "{k}");
        }
    }

    #[test]
    fn ignored_dirs_ignore_themselves_and_never_follow_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".target")).unwrap();
        make_ignored_dirs(dir.path(), &[Platform::Python, Platform::Rust]).unwrap();
        std::fs::write(dir.path().join(".venv/pyvenv.cfg"), "x").unwrap();
        std::fs::write(dir.path().join(CACHE_DIR).join("blob"), "x").unwrap();
        let ignored = |p: &str| repo.status_should_ignore(Path::new(p)).unwrap();
        assert!(ignored(".venv/pyvenv.cfg"));
        assert!(ignored(".codebutler-cache/blob"));
        assert!(ignored(".codebutler-cache/.gitignore"));
        // The planted symlink was left alone: nothing was written through it.
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // Running it again is harmless.
        make_ignored_dirs(dir.path(), &[Platform::Python]).unwrap();
    }

    #[test]
    fn tail_keeps_the_last_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let t = tail(&path, 100);
        assert!(t.ends_with("line 999"), "{t}");
        assert!(t.starts_with("line "), "{t}");
        assert!(t.len() <= 100);
        assert_eq!(tail(&dir.path().join("missing"), 100), "");
    }
}
