//! Preparing a worktree for an approved plan: the disk limit, the base, the worktree, then
//! the platforms' init in the sandbox (after `build.preBuildCommand`, in the same sandbox,
//! once one of the machine's preparation slots is free: [`BuildSlots`]), reported in the
//! thread through a [`Progress`], and a record of what the init left, which the Coder's
//! commits leave out ([`prepared`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    CreateError, DiskBudget, NoRoom, Worktree, WorktreeError, blocking, choose_base, create,
    disks_dir, remove, short,
};
use crate::config::{BuildConfig, SandboxConfig};
use crate::workspace::build_slots::{BuildSlots, Turn};
use crate::workspace::platform::{self, InitEnd, InitRequest};
use crate::workspace::toolchains::Toolchains;
use crate::workspace::{disk, prepared, project_files, stage};

/// How worktree preparation reports in the thread.
#[async_trait]
pub trait Progress: Send + Sync {
    /// Posts a line; returns a handle for [`Progress::update`] when it was posted.
    async fn post(&self, text: &str) -> Option<String>;
    /// Replaces a posted line.
    async fn update(&self, handle: &str, text: &str);
    /// Posts Markdown (a long code block may become a snippet).
    async fn markdown(&self, markdown: &str);
    /// The preparation failed and the Coder will not start.
    async fn failed(&self);
    /// The init (the step that may take minutes) begins.
    fn init_began(&self) {}
}

/// Why a worktree could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// `access.maxWorktreeDiskMB` has too little left for a new worktree's disk; nothing
    /// was left behind.
    #[error(transparent)]
    DiskLimit(#[from] NoRoom),
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    /// The init failed or timed out; the worktree was removed again.
    #[error("preparing the worktree failed: `{command}` {how}")]
    Init { command: String, how: String },
    /// What the init left could not be recorded (so it could not be kept out of commits);
    /// the worktree was removed again.
    #[error(
        "preparing the worktree failed: what `{command}` left could not be recorded ({source})"
    )]
    Record {
        command: String,
        #[source]
        source: prepared::RecordError,
    },
}

/// The init a worktree gets: the shell command, how the thread shows it, and what the
/// thread is told beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Init {
    command: String,
    shown: String,
    notes: Vec<String>,
}

/// `build.preBuildCommand` (if any) before `init`: in its own subshell, so what it is made
/// of cannot change what follows it, and the preparation goes on only if it succeeded.
fn with_pre_build(pre: Option<&str>, init: Option<Init>) -> Option<Init> {
    let Some(pre) = pre else { return init };
    let first = format!("(\n{pre}\n)");
    Some(match init {
        None => Init {
            command: first,
            shown: pre.to_owned(),
            notes: Vec::new(),
        },
        Some(init) => Init {
            command: format!("{first} && {}", init.command),
            shown: format!("{pre} && {}", init.shown),
            notes: init.notes,
        },
    })
}

impl Init {
    /// `build.initCommand`, shown as it is.
    fn given(command: &str) -> Self {
        Self {
            command: command.to_owned(),
            shown: command.to_owned(),
            notes: Vec::new(),
        }
    }
}

/// Prepares worktrees for Coder runs (see the module's documentation).
#[derive(Clone, Debug)]
pub struct Preparer {
    /// The repository's main checkout.
    pub repo: PathBuf,
    /// Where init specs and logs go (`.codebutler/run/`).
    pub run_dir: PathBuf,
    /// The `codebutler-runner` binary.
    pub runner_bin: PathBuf,
    pub sandbox: SandboxConfig,
    pub build: BuildConfig,
    /// `access.maxWorktreeDiskMB`; 0 for no limit (the configuration allows one only with
    /// `sandbox.diskMB` set: it is held by the worktrees' disks).
    pub max_disk_mb: u64,
    /// The toolchains found at start that every sandbox here shows
    /// ([`crate::workspace::toolchains`]).
    pub toolchains: Toolchains,
    /// The machine's preparation slots (`build.maxConcurrentBuilds`), shared by every
    /// repository of the service.
    pub builds: BuildSlots,
}

impl Preparer {
    /// [`Preparer::create`] then [`Preparer::init_or_remove`], as a Coder start does them
    /// (with the runner starting in between).
    #[cfg(test)]
    pub async fn prepare(
        &self,
        summary: &str,
        progress: &dyn Progress,
    ) -> Result<Worktree, PrepareError> {
        let tree = self.create(summary, progress).await?;
        self.init_or_remove(&tree, progress).await?;
        Ok(tree)
    }

    /// Fetches the base and creates the worktree for the plan titled `summary` on a disk
    /// within `access.maxWorktreeDiskMB` (not yet prepared: see
    /// [`Preparer::init_or_remove`]).
    pub async fn create(
        &self,
        summary: &str,
        progress: &dyn Progress,
    ) -> Result<Worktree, PrepareError> {
        let base = choose_base(&self.repo).await?;
        if let Some(warning) = &base.warning {
            progress.post(warning).await;
        }
        let tree = match create(&self.repo, summary, Some(&base), self.disks()).await {
            Ok(tree) => tree,
            Err(CreateError::NoRoom(refusal)) => {
                tracing::warn!("worktree refused: {refusal}");
                return Err(refusal.into());
            }
            Err(CreateError::Worktree(e)) => return Err(e.into()),
        };
        tracing::info!(
            "worktree {} on {} from {} ({})",
            tree.path.display(),
            tree.branch,
            base.name,
            short(&base.commit)
        );
        Ok(tree)
    }

    /// Creates a worktree for `plan` from the local HEAD, without fetching or preparing it
    /// (`runnerctl run`).
    pub async fn create_from_head(&self, plan: &str) -> Result<Worktree, CreateError> {
        create(&self.repo, plan, None, self.disks()).await
    }

    /// What the worktrees' disks may take: `sandbox.diskMB` each, `access.maxWorktreeDiskMB`
    /// together.
    pub fn disks(&self) -> DiskBudget {
        DiskBudget {
            disk_mb: self.sandbox.disk_mb,
            total_mb: self.max_disk_mb,
        }
    }

    /// The size in MB of the disk of `worktree`, if it has one. Blocking.
    pub fn disk_size_mb(&self, worktree: &Path) -> Option<u64> {
        disk::size_mb(&disks_dir(&self.repo), worktree)
    }

    /// Whether runs get the sandbox (`sandbox.mode` is not `none`): only then do the files
    /// people shared appear in the worktree at `.codebutler-attachments/`.
    pub fn sandboxed(&self) -> bool {
        self.sandbox.mode == codebutler_sandbox::SandboxMode::Enforce
    }

    /// The sandbox spec of a Coder run in `worktree` (see [`crate::workspace::run_spec`]).
    pub fn run_spec(&self, worktree: &Path) -> codebutler_sandbox::SandboxSpec {
        crate::workspace::run_spec(&self.sandbox, &self.build, &self.toolchains, worktree)
    }

    /// The worktree helper for `worktree`, in the sandbox its runs get (see [`stage`]).
    pub fn helper(&self, worktree: &Path) -> stage::Helper {
        stage::Helper {
            runner_bin: self.runner_bin.clone(),
            spec: self.run_spec(worktree),
        }
    }

    /// Mounts the disk of `worktree` again if a reboot unmounted it.
    pub async fn ensure_mounted(&self, worktree: &Path) -> Result<(), WorktreeError> {
        let disk = disk::ThreadDisk::of(&disks_dir(&self.repo), worktree);
        blocking(move || {
            disk.ensure_mounted().map_err(|e| WorktreeError {
                slug: String::new(),
                message: format!("mount {}: {e}", disk.mount.display()),
            })
        })
        .await
    }

    /// Runs the worktree's init. When it fails, the worktree and its branch are removed (a
    /// retry starts clean) and `progress` is told.
    pub async fn init_or_remove(
        &self,
        tree: &Worktree,
        progress: &dyn Progress,
    ) -> Result<(), PrepareError> {
        let Err(e) = self.init(tree, progress).await else {
            return Ok(());
        };
        if let Err(r) = remove(&self.repo, tree).await {
            tracing::warn!("remove the unprepared worktree: {r}");
        }
        progress.failed().await;
        Err(e)
    }

    /// Detects the platforms, makes the ignored directories, runs the init and records what
    /// it left ([`prepared`]), so the Coder's commits leave it out.
    /// It waits for one of the machine's preparation slots first, and holds it to the end.
    async fn init(&self, tree: &Worktree, progress: &dyn Progress) -> Result<(), PrepareError> {
        let init = self.init_command(tree, progress).await?;
        let Some(init) = with_pre_build(self.build.pre_build_command.as_deref(), init) else {
            return Ok(());
        };
        let _slot = match self.builds.take() {
            Turn::Now(slot) => slot,
            Turn::Queued { ahead, queued } => {
                let others = match ahead {
                    1 => "1 other preparation".to_owned(),
                    n => format!("{n} other preparations"),
                };
                progress
                    .post(&format!(
                        "waiting for {others} to finish before preparing the worktree \
                         (build.maxConcurrentBuilds: {})",
                        self.build.max_concurrent_builds
                    ))
                    .await;
                tracing::info!(
                    tag = "CLD",
                    "worktree {}: waiting for {others} (build.maxConcurrentBuilds)",
                    tree.path.display()
                );
                queued.wait().await
            }
        };
        let shown = init.shown.clone();
        self.run_init(tree, init, progress).await?;
        let (helper, path) = (self.helper(&tree.path), tree.path.clone());
        let recorded = tokio::task::spawn_blocking(move || prepared::record(&helper, &path))
            .await
            .map_err(|e| WorktreeError {
                slug: String::new(),
                message: format!("record the preparation: {e}"),
            })?;
        match recorded {
            Ok(changed) => {
                tracing::info!(
                    tag = "CLD",
                    "worktree {}: the preparation created, changed or deleted {changed} paths; \
                     commits leave them out",
                    tree.path.display()
                );
                Ok(())
            }
            Err(source) => {
                let e = PrepareError::Record {
                    command: shown,
                    source,
                };
                tracing::warn!(tag = "CLD", "{e}");
                progress.post(&e.to_string()).await;
                Err(e)
            }
        }
    }

    /// The init to run in `tree`: `build.initCommand`, else the detected platforms' steps
    /// the sandbox can run (a skipped one is said in the thread), decided from the files of
    /// the worktree's base commit ([`project_files`]); `None` when there is none. Makes the
    /// platforms' ignored directories on the way.
    async fn init_command(
        &self,
        tree: &Worktree,
        progress: &dyn Progress,
    ) -> Result<Option<Init>, PrepareError> {
        let path = tree.path.clone();
        let project_type = self.build.project_type;
        let (platforms, files) = blocking(move || {
            let platforms = platform::platforms(&path, project_type);
            platform::make_ignored_dirs(&path, &platforms).map_err(|e| WorktreeError {
                slug: String::new(),
                message: format!("create the worktree's cache directories: {e}"),
            })?;
            let files = project_files::read_base(&path).map_err(|e| WorktreeError {
                slug: String::new(),
                message: e.to_string(),
            })?;
            Ok((platforms, files))
        })
        .await?;
        if let Some(command) = &self.build.init_command {
            return Ok(Some(Init::given(command)));
        }
        let mut extra = self.build.path.clone();
        extra.extend(self.toolchains.path());
        let has_program = |program: &str| platform::in_sandbox_path(program, &extra);
        let mut init: Option<Init> = None;
        for step in platform::init_plan(&platforms, &files, &has_program) {
            if !has_program(&step.program) {
                progress
                    .post(&format!(
                        "no `{}` where the sandbox can run it, so `{}` was skipped; \
                         builds in the worktree may fail",
                        step.program, step.shown
                    ))
                    .await;
                continue;
            }
            match &mut init {
                None => {
                    init = Some(Init {
                        command: step.command,
                        shown: step.shown,
                        notes: step.notes,
                    })
                }
                Some(init) => {
                    init.command = format!("{} && {}", init.command, step.command);
                    init.shown = format!("{} && {}", init.shown, step.shown);
                    init.notes.extend(step.notes);
                }
            }
        }
        Ok(init)
    }

    /// Runs the init `command` in the sandbox with the network, reporting its progress and,
    /// when it fails, the end of its output.
    async fn run_init(
        &self,
        tree: &Worktree,
        init: Init,
        progress: &dyn Progress,
    ) -> Result<(), PrepareError> {
        let Init {
            command,
            shown,
            notes,
        } = init;
        let mut spec =
            crate::workspace::run_spec(&self.sandbox, &self.build, &self.toolchains, &tree.path);
        spec.network = true;
        spec.keep_fds = Vec::new();
        let name = tree
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let request = InitRequest {
            runner_bin: self.runner_bin.clone(),
            spec,
            command,
            spec_path: self.run_dir.join(format!("init-{name}.json")),
            log_path: self.run_dir.join(format!("init-{name}.log")),
            timeout: Duration::try_from_secs_f64(self.build.init_timeout_mins * 60.0)
                .unwrap_or(Duration::from_secs(600)),
        };
        progress.init_began();
        let handle = progress
            .post(&format!("preparing the worktree: `{shown}`…"))
            .await;
        tracing::info!(tag = "CLD", "worktree {name}: init `{}`", request.command);
        let failure = |how: String| PrepareError::Init {
            command: shown.clone(),
            how,
        };
        let outcome = match platform::run_init(&request).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let e = failure(format!("could not run: {e}"));
                if let Some(h) = &handle {
                    progress.update(h, &e.to_string()).await;
                }
                return Err(e);
            }
        };
        let took = crate::domain::duration_text(outcome.duration);
        let how = match &outcome.end {
            InitEnd::Succeeded => {
                tracing::info!(tag = "CLD", "worktree {name}: prepared in {took}");
                if let Some(h) = &handle {
                    let mut line = format!("prepared the worktree: `{shown}` ({took})");
                    for note in &notes {
                        line.push_str("; ");
                        line.push_str(note);
                    }
                    progress.update(h, &line).await;
                }
                return Ok(());
            }
            InitEnd::Failed { status } => format!("failed ({status}) after {took}"),
            InitEnd::TimedOut => format!(
                "did not finish within {} (build.initTimeout)",
                crate::domain::duration_text(request.timeout)
            ),
        };
        let e = failure(how);
        tracing::warn!(tag = "CLD", "worktree {name}: {e}");
        match &handle {
            Some(h) => progress.update(h, &e.to_string()).await,
            None => {
                progress.post(&e.to_string()).await;
            }
        }
        if !outcome.tail.is_empty() {
            progress
                .markdown(&format!(
                    "The end of its output:\n\n```\n{}\n```",
                    outcome.tail.replace("```", "ʼʼʼ")
                ))
                .await;
        }
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ProjectType, SandboxMode};
    use crate::workspace::worktree::testing::repo_with;

    /// Records what a preparation reports.
    #[derive(Default)]
    struct Recorded {
        lines: std::sync::Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Progress for Recorded {
        async fn post(&self, text: &str) -> Option<String> {
            let mut lines = self.lines.lock().unwrap();
            lines.push(format!("post {text}"));
            Some(format!("{}", lines.len()))
        }
        async fn update(&self, handle: &str, text: &str) {
            self.lines
                .lock()
                .unwrap()
                .push(format!("update {handle} {text}"));
        }
        async fn markdown(&self, markdown: &str) {
            self.lines
                .lock()
                .unwrap()
                .push(format!("markdown {markdown}"));
        }
        async fn failed(&self) {
            self.lines.lock().unwrap().push("failed".into());
        }
    }

    /// A stand-in for `codebutler-runner sandbox-exec --spec F -- CMD…` that runs CMD
    /// unsandboxed (the real sandbox is tested in the runner's and the e2e suites); the
    /// worktree helper, which records what the init left, is the real one.
    fn fake_runner(dir: &Path) -> PathBuf {
        let path = dir.join("fake-runner");
        let real = crate::workspace::stage::test_support::runner_bin();
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$1\" = worktree-io ] && exec '{}' \"$@\"\nshift 4\nexec \"$@\"\n",
                real.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    }

    fn preparer(dir: &Path, repo: &Path, init: Option<&str>, timeout_mins: f64) -> Preparer {
        Preparer {
            repo: repo.to_owned(),
            run_dir: dir.join("run"),
            runner_bin: fake_runner(dir),
            sandbox: SandboxConfig {
                mode: SandboxMode::Enforce,
                max_processes: 64,
                memory_mb: 512,
                file_size_mb: 64,
                cpu_seconds: 60,
                tmp_mb: 64,
                disk_mb: 0,
                read_only: Vec::new(),
                find_toolchains: false,
                runner_path: None,
            },
            build: BuildConfig {
                project_type: ProjectType::Auto,
                init_command: init.map(str::to_owned),
                init_timeout_mins: timeout_mins,
                prepare_ahead_idle_mins: 0.0,
                max_prepared_ahead: 0,
                test_command: None,
                env: Default::default(),
                path: Vec::new(),
                max_concurrent_builds: 0,
                pre_build_command: None,
            },
            max_disk_mb: 0,
            toolchains: Toolchains::none(),
            builds: BuildSlots::default(),
        }
    }

    #[tokio::test]
    async fn a_generic_project_is_prepared_silently() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let progress = Recorded::default();
        let tree = preparer(dir.path(), &repo, None, 1.0)
            .prepare("Edit the readme", &progress)
            .await
            .unwrap();
        assert!(tree.path.join("README.md").is_file());
        assert!(progress.lines.lock().unwrap().is_empty());
        assert!(
            tree.path
                .join(crate::workspace::platform::CACHE_DIR)
                .join(".gitignore")
                .is_file()
        );
    }

    #[tokio::test]
    async fn the_init_reports_progress_and_its_failure_removes_the_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let progress = Recorded::default();
        let ok = preparer(dir.path(), &repo, Some("echo ready > prepared.txt"), 1.0);
        let tree = ok.prepare("First", &progress).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.path.join("prepared.txt")).unwrap(),
            "ready\n"
        );
        let lines = progress.lines.lock().unwrap().clone();
        assert_eq!(
            lines[0],
            "post preparing the worktree: `echo ready > prepared.txt`…"
        );
        assert!(
            lines[1].starts_with("update 1 prepared the worktree: `echo ready > prepared.txt` ("),
            "{lines:?}"
        );

        let progress = Recorded::default();
        let failing = preparer(
            dir.path(),
            &repo,
            Some("echo compiling; echo BROKEN-DEP >&2; exit 3"),
            1.0,
        );
        let e = failing.prepare("Second", &progress).await.unwrap_err();
        assert!(matches!(e, PrepareError::Init { .. }), "{e}");
        assert!(e.to_string().contains("failed (exit status: 3)"), "{e}");
        let lines = progress.lines.lock().unwrap().clone();
        assert!(
            lines[1].starts_with("update 1 preparing the worktree failed: `echo compiling"),
            "{lines:?}"
        );
        assert!(
            lines[2].contains("```\ncompiling\nBROKEN-DEP\n```"),
            "{lines:?}"
        );
        assert_eq!(lines[3], "failed");
        let path = repo.join(".codebutler/branches/second");
        assert!(!path.exists(), "the unprepared worktree is removed");
        assert!(
            git2::Repository::open(&repo)
                .unwrap()
                .find_branch("codebutler/second", git2::BranchType::Local)
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_hung_init_is_killed_at_its_time_limit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let pid_file = dir.path().join("sleeper.pid");
        let command = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let progress = Recorded::default();
        let started = std::time::Instant::now();
        let e = preparer(dir.path(), &repo, Some(&command), 0.05)
            .prepare("Hangs", &progress)
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20));
        assert!(
            e.to_string()
                .contains("did not finish within 3s (build.initTimeout)"),
            "{e}"
        );
        // The whole process group went, the background sleeper included (a killed process
        // takes a moment to die on a busy machine, so its end is awaited, not assumed).
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let alive = || {
            Path::new(&format!("/proc/{}", pid.trim())).exists()
                && !std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                    .unwrap_or_default()
                    .contains(") Z ")
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while alive() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(), "the init's child {pid} survived");
    }

    #[tokio::test]
    async fn each_disk_gets_what_the_total_has_left_and_too_little_is_refused() {
        disk::probe().expect("these machines run the tests as root with loop devices");
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("README.md", "hi")]);
        let old = repo.join(".codebutler/branches/old");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("blob"), vec![7u8; 40 << 20]).unwrap();
        let mut limited = preparer(dir.path(), &repo, None, 1.0);
        limited.sandbox.disk_mb = 4096;
        limited.max_disk_mb = 48;
        let progress = Recorded::default();
        let e = limited.prepare("Too much", &progress).await.unwrap_err();
        assert!(matches!(e, PrepareError::DiskLimit(_)), "{e}");
        assert!(
            e.to_string().starts_with(
                "the worktrees' disks already take 41 MB of the 48 MB that access.maxWorktreeDiskMB allows"
            ),
            "{e}"
        );
        assert!(!repo.join(".codebutler/branches/too-much").exists());
        assert!(!repo.join(".codebutler/disks/too-much.img").exists());
        assert!(
            git2::Repository::open(&repo)
                .unwrap()
                .find_branch("codebutler/too-much", git2::BranchType::Local)
                .is_err()
        );
        // After clean-up the same plan goes through, on a disk of what the total has left:
        // the kernel holds the total while the run writes.
        std::fs::remove_dir_all(&old).unwrap();
        let tree = limited.prepare("Too much", &progress).await.unwrap();
        let size = limited.disk_size_mb(&tree.path).unwrap();
        assert!((40..=48).contains(&size), "{size}");
        let stat = nix::sys::statvfs::statvfs(&tree.path).unwrap();
        assert!(stat.blocks() * stat.fragment_size() <= 48 << 20);
        // A second one finds no room left.
        let e = limited.prepare("Another", &progress).await.unwrap_err();
        assert!(matches!(e, PrepareError::DiskLimit(_)), "{e}");
        remove(&repo, &tree).await.unwrap();
    }

    #[test]
    fn the_pre_build_command_runs_first_in_a_subshell_of_its_own() {
        let detected = Init {
            command: "npm ci".into(),
            shown: "npm ci".into(),
            notes: vec!["a note".into()],
        };
        assert_eq!(
            with_pre_build(None, Some(detected.clone())),
            Some(detected.clone())
        );
        assert_eq!(with_pre_build(None, None), None);
        assert_eq!(
            with_pre_build(Some("make deps # fetch"), Some(detected)),
            Some(Init {
                command: "(\nmake deps # fetch\n) && npm ci".into(),
                shown: "make deps # fetch && npm ci".into(),
                notes: vec!["a note".into()],
            })
        );
        assert_eq!(
            with_pre_build(Some("make deps"), None),
            Some(Init {
                command: "(\nmake deps\n)".into(),
                shown: "make deps".into(),
                notes: Vec::new(),
            })
        );
    }
}
