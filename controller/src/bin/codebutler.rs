//! `codebutler`: runs the service in the foreground, logging to stderr — for one repository
//! (`--repo DIR`, or the one containing the current directory), or, when the global config
//! lists `repositories` and no `--repo` is given, for all of them through one Slack app.
//! With `--status`, prints the topology and exits; with `--cleanup-orphans`, removes what
//! closed and unknown threads left and exits. `codebutler init` is the set-up wizard
//! ([`codebutler_controller::setup`]); `--install`, `--uninstall` and `--logs` put the
//! service under the host's service manager, take it away and follow its log
//! ([`codebutler_controller::service::install`]). Under systemd (`NOTIFY_SOCKET`) the service
//! says when it is ready, what it is doing and that it is alive
//! ([`codebutler_controller::service::notify`]).
//!
//! Exit codes: 0 stopped cleanly; 1 a failure; 2 the configuration (or the repository to
//! serve) is wrong, or a service refuses what it names — a Slack token, a scope, the
//! channel, the model key, `gh`'s login; 3 `--cleanup-orphans` while a daemon holds the
//! repository; 4 another process is connected to the same Slack app; 5 this host lacks what
//! the configuration needs — the sandbox's kernel features, loop devices for
//! `sandbox.diskMB`, the runner, `gh`; 6 Slack cannot be reached. Each is said in one line
//! on stderr, with its fix.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use codebutler_controller::config::{self, Config, ConfigSources};
use codebutler_controller::layout::Layout;
use codebutler_controller::logging::{self, LogFile, LogFileSettings, LogFormat, Logs};
use codebutler_controller::repo_lock::{LockError, RepoLock};
use codebutler_controller::secret::Secret;
use codebutler_controller::service::install::{
    self, InstallError, InstallRequest, Placement, Scope, ServiceSpec, Uninstalled,
};
use codebutler_controller::service::status::{self, RepoRef};
use codebutler_controller::service::{self, NoPeers, Notifier, ServedRepo, StartError};
use codebutler_controller::setup::{self, Given, GivenSecret, InitRequest, prompt};
use codebutler_controller::store::{self, Store, StoreError};
use codebutler_controller::workspace::orphans;
use codebutler_controller::workspace::toolchains::Toolchains;

/// CodeButler: an AI development team in a Slack channel.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The repository to serve (default: every repository listed under `repositories` in
    /// the global config, else the one containing the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    repo: Option<PathBuf>,
    /// Print the repositories served, whether a service holds each, their active threads
    /// and runs, whether the service is installed, enabled and running, and exit.
    #[arg(long, conflicts_with_all = ["cleanup_orphans", "install", "uninstall", "logs"])]
    status: bool,
    /// Install the service and start it: a systemd user unit (a system unit with --system),
    /// or a launchd agent on macOS, for the repositories the global config lists (or the
    /// one --repo names).
    #[arg(long, conflicts_with_all = ["cleanup_orphans", "uninstall", "logs"])]
    install: bool,
    /// Stop the service and remove what --install wrote.
    #[arg(long, conflicts_with_all = ["cleanup_orphans", "logs"])]
    uninstall: bool,
    /// Follow the service's log: journald for an installed systemd unit, else (and on macOS)
    /// the service's log file in $CODEBUTLER_HOME/logs, across its rotation.
    #[arg(long, conflicts_with = "cleanup_orphans")]
    logs: bool,
    /// With --install, --uninstall or --logs: the system unit (in /etc/systemd/system,
    /// running as root, which the per-thread disks need) instead of the user's.
    #[arg(long)]
    system: bool,
    /// With --install, --uninstall or --logs: the directory the unit file goes in, instead
    /// of ~/.config/systemd/user (or /etc/systemd/system with --system).
    #[arg(long, value_name = "DIR")]
    unit_dir: Option<PathBuf>,
    /// Log line format.
    #[arg(long, value_enum, default_value = "plain")]
    log_format: LogFormat,
    /// Log debug lines too.
    #[arg(short, long)]
    verbose: bool,
    /// Remove the worktrees of closed and unknown threads (keeping branches with unpushed
    /// commits) and stale files under .codebutler/run/, print what was removed, and exit.
    /// Refused while a daemon runs for the repository.
    #[arg(long)]
    cleanup_orphans: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Set up: the Slack tokens, the repository's channel and the model key, each checked at
    /// once, then this host; writes the global and the repository's config. Asks in a
    /// terminal; every answer can also be given as a flag or in the environment.
    Init(InitArgs),
}

/// `codebutler init`'s answers. Secrets are better given in the environment than as flags,
/// which other users of the host can see in the process list.
#[derive(Debug, clap::Args)]
struct InitArgs {
    /// The Slack bot token (xoxb-…); or CODEBUTLER_SLACK_BOT_TOKEN.
    #[arg(long, value_name = "TOKEN")]
    bot_token: Option<String>,
    /// The Slack app-level token (xapp-…); or CODEBUTLER_SLACK_APP_TOKEN.
    #[arg(long, value_name = "TOKEN")]
    app_token: Option<String>,
    /// The OpenRouter API key; or OPENROUTER_API_KEY.
    #[arg(long, value_name = "KEY")]
    openrouter_key: Option<String>,
    /// The repository's channel: its id (C0123…) or its name; or CODEBUTLER_SLACK_CHANNEL.
    #[arg(long, value_name = "CHANNEL", conflicts_with = "create_channel")]
    channel: Option<String>,
    /// Create this public channel for the repository (the bot is in it).
    #[arg(long, value_name = "NAME")]
    create_channel: Option<String>,
    /// The repository's name in the global config's `repositories` (default: its
    /// directory's name).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Ask nothing: every answer from the flags, the environment or the files; a missing
    /// one ends the set-up with exit code 2 (also without a terminal).
    #[arg(long, short = 'y', alias = "non-interactive")]
    yes: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let logs = logging::init(args.log_format, args.verbose);
    let log_file = logs.file.clone();

    if let Some(Command::Init(init)) = &args.command {
        return run_init(args.repo.as_deref(), init);
    }
    if args.install || args.uninstall || args.logs {
        return service_manager(&args);
    }
    let notifier = notifier();
    if args.repo.is_none() && !args.cleanup_orphans {
        match listed_repositories() {
            Ok(Some((home, entries))) => {
                return serve_listed(&home, &entries, args.status, notifier, &logs);
            }
            Ok(None) => {}
            Err(e) => return refuse(&notifier, &format!("configuration: {e}"), 2),
        }
    }
    let repo = match find_repo(args.repo.as_deref()) {
        Ok(repo) => repo,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let layout = Layout::new(&repo);
    if args.cleanup_orphans {
        return cleanup_orphans(&layout);
    }
    if let Err(e) = layout.init() {
        return fail(&e.to_string(), 1);
    }
    let sources = match ConfigSources::for_repo(&repo) {
        Ok(sources) => sources,
        Err(e) => return refuse(&notifier, &format!("configuration: {e}"), 2),
    };
    let config = match config::load(&sources, |k| std::env::var(k).ok()) {
        Ok(config) => config,
        Err(e) => return refuse(&notifier, &format!("configuration: {e}"), 2),
    };
    let home = sources
        .global
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned);
    if !args.status {
        open_log_file(
            &log_file,
            &home,
            single_repo_log_name(&layout),
            &config.logging,
        );
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("start async runtime: {e}"), 1),
    };
    if args.status {
        let repo = RepoRef {
            name: None,
            path: repo,
            channel: config.slack.channel_id.clone(),
        };
        return print_status(&runtime, vec![repo], &home, &config);
    }
    let shutdown = shutdown_signal(&runtime);
    let result = runtime.block_on(service::run_one(
        layout,
        config,
        home,
        notifier.clone(),
        logs.ring,
        shutdown,
    ));
    exit(&notifier, result)
}

/// What tells systemd how the service is doing (nothing when systemd did not start it).
fn notifier() -> Arc<Notifier> {
    match Notifier::from_env(|k| std::env::var(k).ok(), std::process::id()) {
        Ok(notifier) => Arc::new(notifier),
        Err(e) => {
            tracing::warn!("not telling systemd how the service does: {e}");
            Arc::new(Notifier::none())
        }
    }
}

/// The global config directory and its `repositories`, if it lists any.
fn listed_repositories()
-> Result<Option<(PathBuf, Vec<config::RepositoryEntry>)>, config::ConfigError> {
    let home = config::global_dir()?;
    Ok(config::entries(&home.join("config.json"))?.map(|entries| (home, entries)))
}

/// Serves (or, with `status`, describes) every repository the global config lists.
fn serve_listed(
    home: &Path,
    entries: &[config::RepositoryEntry],
    status: bool,
    notifier: Arc<Notifier>,
    logs: &Logs,
) -> ExitCode {
    if !status {
        for entry in entries {
            if let Err(e) = Layout::new(&entry.path).init() {
                return refuse(&notifier, &format!("repository `{}`: {e}", entry.name), 1);
            }
        }
    }
    let repos = match config::load_repositories(home, entries, |k| std::env::var(k).ok()) {
        Ok(repos) => repos,
        Err(e) => return refuse(&notifier, &format!("configuration: {e}"), 2),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("start async runtime: {e}"), 1),
    };
    if status {
        let Some(first) = repos.first() else {
            return fail("configuration: no repository listed", 2);
        };
        let refs = repos
            .iter()
            .map(|r| RepoRef {
                name: Some(r.entry.name.clone()),
                path: r.entry.path.clone(),
                channel: r.config.slack.channel_id.clone(),
            })
            .collect();
        return print_status(&runtime, refs, home, &first.config);
    }
    if let Some(first) = repos.first() {
        open_log_file(
            &logs.file,
            home,
            LISTED_LOG_NAME.to_owned(),
            &first.config.logging,
        );
    }
    let served = repos
        .into_iter()
        .map(|r| ServedRepo {
            name: Some(r.entry.name),
            layout: Layout::new(&r.entry.path),
            config: r.config,
        })
        .collect();
    let shutdown = shutdown_signal(&runtime);
    let result = runtime.block_on(service::run(
        served,
        home.to_owned(),
        NoPeers,
        notifier.clone(),
        logs.ring.clone(),
        shutdown,
    ));
    exit(&notifier, result)
}

/// The name of the log file of a service that serves the global config's `repositories`.
const LISTED_LOG_NAME: &str = "codebutler";

/// The name of the log file of a service that serves the repository of `layout` on its own.
fn single_repo_log_name(layout: &Layout) -> String {
    format!(
        "codebutler-{}",
        config::sanitized_name(&codebutler_controller::store::repository_name(layout))
    )
}

/// The log file `--logs` follows where journald does not hold the log, as the service
/// names it: the one of the repository `--repo` names, served on its own; else, when the
/// global config lists `repositories`, theirs; else the one of the repository the current
/// directory is in. On failure, the exit code, said.
fn service_log_file(repo: Option<&Path>) -> Result<PathBuf, ExitCode> {
    let home = config::global_dir().map_err(|e| fail(&format!("configuration: {e}"), 2))?;
    let listed = match repo {
        Some(_) => false,
        None => listed_repositories()
            .map_err(|e| fail(&format!("configuration: {e}"), 2))?
            .is_some(),
    };
    let name = if listed {
        LISTED_LOG_NAME.to_owned()
    } else {
        let repo = find_repo(repo).map_err(|e| fail(&e.to_string(), 2))?;
        single_repo_log_name(&Layout::new(&repo))
    };
    Ok(logging::file::current_file(&home.join("logs"), &name))
}

/// Starts the service's log file, `<home>/logs/<name>.log`, rotated as `logging` says; when
/// it cannot be opened the service logs to stderr only, and says so.
fn open_log_file(log_file: &LogFile, home: &Path, name: String, logging: &config::LoggingConfig) {
    let settings = LogFileSettings {
        dir: home.join("logs"),
        name,
        max_bytes: logging.max_file_bytes,
        keep: logging.keep_files,
    };
    let path = settings.current();
    match log_file.open(settings) {
        Ok(()) => tracing::info!("logging to {}", path.display()),
        Err(e) => tracing::warn!("no log file, logging to stderr only: {e}"),
    }
}

/// `--status`: prints the topology of `repos` on stdout.
fn print_status(
    runtime: &tokio::runtime::Runtime,
    repos: Vec<RepoRef>,
    home: &Path,
    config: &Config,
) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let service_unit = install::unit_status(&env);
    let toolchains = config
        .sandbox
        .find_toolchains
        .then(|| Toolchains::of_this_process(true));
    let status = runtime.block_on(status::gather(
        repos,
        home,
        &config.slack.app_token,
        &config.store,
        service_unit,
        toolchains.as_ref(),
    ));
    print!("{}", status::render(&status));
    ExitCode::SUCCESS
}

/// The exit code of the service's end (said to systemd too).
fn exit(notifier: &Notifier, result: Result<(), StartError>) -> ExitCode {
    match result {
        Ok(()) => {
            notifier.status("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => refuse(notifier, &e.to_string(), e.exit_code()),
    }
}

/// `fail`, with the line said to systemd as the service's status (what
/// `systemctl status codebutler` shows).
fn refuse(notifier: &Notifier, message: &str, code: u8) -> ExitCode {
    notifier.status(&format!("failed: {message}"));
    fail(message, code)
}

/// `codebutler init`: the set-up wizard, asking in a terminal unless `--yes`.
fn run_init(repo: Option<&Path>, args: &InitArgs) -> ExitCode {
    let repo = match find_repo(repo) {
        Ok(repo) => repo,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let home = match config::global_dir().map(|home| absolute(&home)) {
        Ok(home) => home,
        Err(e) => return fail(&format!("configuration: {e}"), 2),
    };
    let secret = |flag: &Option<String>, name: &str, var: &str| {
        let from_flag = flag
            .clone()
            .filter(|v| !v.trim().is_empty())
            .map(|v| GivenSecret {
                value: Secret::new(v),
                from: format!("the one given with {name}"),
            });
        from_flag.or_else(|| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| GivenSecret {
                    value: Secret::new(v),
                    from: format!("the one in {var}"),
                })
        })
    };
    let given = Given {
        bot_token: secret(&args.bot_token, "--bot-token", config::ENV_SLACK_BOT_TOKEN),
        app_token: secret(&args.app_token, "--app-token", config::ENV_SLACK_APP_TOKEN),
        openrouter_key: secret(
            &args.openrouter_key,
            "--openrouter-key",
            config::ENV_OPENROUTER_API_KEY,
        ),
        channel: args.channel.clone().or_else(|| {
            std::env::var(setup::ENV_SLACK_CHANNEL)
                .ok()
                .filter(|c| !c.trim().is_empty())
        }),
        create_channel: args.create_channel.clone(),
        name: args.name.clone(),
    };
    let request = InitRequest { repo, home, given };
    let interactive =
        !args.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("start async runtime: {e}"), 1),
    };
    let outcome = if interactive {
        runtime.block_on(setup::run(&request, &mut prompt::Terminal::new()))
    } else {
        runtime.block_on(setup::run(&request, &mut prompt::Scripted))
    };
    match outcome {
        Ok(outcome) => ExitCode::from(outcome.exit_code),
        Err(e) => fail(&format!("init: {e}"), e.exit_code()),
    }
}

/// `path` made absolute against the current directory (the service's unit and the
/// configs name it from elsewhere).
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_owned();
    }
    std::env::current_dir().map_or_else(|_| path.to_owned(), |cwd| cwd.join(path))
}

/// `--install`, `--uninstall` and `--logs`.
fn service_manager(args: &Args) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let scope = if args.system {
        Scope::System
    } else {
        Scope::User
    };
    let unit_dir = args.unit_dir.as_deref();
    if args.logs {
        let log_file = match service_log_file(args.repo.as_deref()) {
            Ok(path) => path,
            Err(code) => return code,
        };
        let scope = args.system.then_some(Scope::System);
        let line = match install::logs(scope, unit_dir, &env, &log_file) {
            Ok(line) => line,
            Err(e) => return fail(&e.to_string(), e.exit_code()),
        };
        use std::os::unix::process::CommandExt;
        let e = std::process::Command::new(&line.program)
            .args(&line.args)
            .exec();
        return fail(&format!("run `{}`: {e}", line.shown()), 1);
    }
    let placement = match Placement::for_scope(scope, unit_dir, &env) {
        Ok(placement) => placement,
        Err(e) => return fail(&e.to_string(), e.exit_code()),
    };
    if args.uninstall {
        return match install::uninstall(&placement) {
            Ok(Uninstalled::Nothing { path }) => {
                println!(
                    "nothing to remove: no service of codebutler at {}",
                    path.display()
                );
                ExitCode::SUCCESS
            }
            Ok(Uninstalled::Removed { path, commands }) => {
                for command in commands {
                    println!("ran: {command}");
                }
                println!("removed {}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e.to_string(), e.exit_code()),
        };
    }
    let (spec, with_disks) = match service_spec(args.repo.as_deref()) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let request = InstallRequest {
        placement,
        spec,
        with_disks,
        root: nix::unistd::geteuid().is_root(),
    };
    match install::install(&request) {
        Ok(installed) => {
            for command in &installed.commands {
                println!("ran: {command}");
            }
            println!(
                "{} {} and started the service ({}).",
                if installed.replaced {
                    "updated"
                } else {
                    "installed"
                },
                installed.path.display(),
                request.spec.description
            );
            if scope == Scope::User && !cfg!(target_os = "macos") {
                let user = env("USER").unwrap_or_default();
                if !Path::new("/var/lib/systemd/linger").join(&user).exists() {
                    println!(
                        "to keep it running without a login session: loginctl enable-linger {user}"
                    );
                }
            }
            println!("follow its log: codebutler --logs; see it: codebutler --status");
            ExitCode::SUCCESS
        }
        Err(e @ InstallError::NoSystemd { .. }) => {
            println!("{}", install::foreground_command(&request.spec));
            fail(&e.to_string(), e.exit_code())
        }
        Err(e) => fail(&e.to_string(), e.exit_code()),
    }
}

/// What the service runs: every repository the global config lists, or the one `repo`
/// names (or the current directory's, without a list); with the names of the repositories
/// that use per-thread disks. A configuration the service would refuse is refused here.
fn service_spec(repo: Option<&Path>) -> Result<(ServiceSpec, Vec<String>), ExitCode> {
    let configuration = |e: config::ConfigError| fail(&format!("configuration: {e}"), 2);
    let home = config::global_dir().map_err(configuration)?;
    let home = absolute(&home);
    let binary = std::env::current_exe()
        .and_then(|b| b.canonicalize())
        .map_err(|e| fail(&format!("find the codebutler binary: {e}"), 1))?;
    let env = |k: &str| std::env::var(k).ok();
    let listed = match repo {
        Some(_) => None,
        None => config::entries(&home.join("config.json")).map_err(configuration)?,
    };
    let (args, working_directory, description, with_disks) = match listed {
        Some(entries) => {
            let repos = config::load_repositories(&home, &entries, env).map_err(configuration)?;
            let names: Vec<String> = repos.iter().map(|r| r.entry.name.clone()).collect();
            let with_disks = repos
                .iter()
                .filter(|r| r.config.sandbox.disk_mb > 0)
                .map(|r| format!("`{}`", r.entry.name))
                .collect();
            (
                Vec::new(),
                home.clone(),
                format!("{} repositories: {}", names.len(), names.join(", ")),
                with_disks,
            )
        }
        None => {
            let repo = find_repo(repo).map_err(|e| fail(&e.to_string(), 2))?;
            let sources = ConfigSources::in_home(&home, &repo);
            let config = config::load(&sources, env).map_err(configuration)?;
            let with_disks = if config.sandbox.disk_mb > 0 {
                vec![format!("{}", repo.display())]
            } else {
                Vec::new()
            };
            (
                vec!["--repo".to_owned(), repo.to_string_lossy().into_owned()],
                repo.clone(),
                format!("repository {}", repo.display()),
                with_disks,
            )
        }
    };
    let spec = ServiceSpec {
        binary,
        args,
        working_directory,
        home,
        path: env("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned()),
        description,
    };
    Ok((spec, with_disks))
}

/// `--cleanup-orphans`: under the repository's lock, removes the orphans and prints one line
/// per removal on stdout; exit 0, or 1 when something could not be removed (said on
/// stderr), 3 while a daemon holds the lock.
fn cleanup_orphans(layout: &Layout) -> ExitCode {
    if !layout.dir.is_dir() {
        // CodeButler never ran here: nothing to clean.
        return ExitCode::SUCCESS;
    }
    let _lock = match RepoLock::take(&layout.dir) {
        Ok(lock) => lock,
        Err(e @ LockError::Held { .. }) => return fail(&e.to_string(), 3),
        Err(e) => return fail(&e.to_string(), 1),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("start async runtime: {e}"), 1),
    };
    // The store the daemon uses: with `store.url` on a server, the SQLite file is not it.
    let config = match ConfigSources::for_repo(&layout.repo)
        .and_then(|sources| config::load(&sources, |k| std::env::var(k).ok()))
    {
        Ok(config) => config,
        Err(e) => return fail(&format!("configuration: {e}"), 2),
    };
    let cleanup = runtime.block_on(async {
        let name = store::repository_name(layout);
        let store = Store::connect(&config.store, &name, layout).await?;
        let cleanup = orphans::clean_up(layout, &store).await;
        store.close().await;
        Ok::<_, StoreError>(cleanup)
    });
    let cleanup = match cleanup {
        Ok(cleanup) => cleanup,
        Err(e) => return fail(&e.to_string(), 1),
    };
    for removal in &cleanup.removed {
        println!("{removal}");
    }
    for line in &cleanup.left {
        println!("{line}");
    }
    for failure in &cleanup.failures {
        eprintln!("codebutler: error: {failure}");
    }
    if cleanup.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Why the repository to serve could not be found.
#[derive(Debug, thiserror::Error)]
enum RepoError {
    #[error("read current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error(
        "{} is not inside a git repository: run codebutler in your repository or pass --repo DIR",
        start.display()
    )]
    NotARepository { start: PathBuf, source: git2::Error },
    #[error("{} is a bare repository; CodeButler needs a working tree", start.display())]
    Bare { start: PathBuf },
    #[error("resolve {}: {source}", path.display())]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The repository's working tree root: `--repo` or the current directory, resolved with git.
fn find_repo(dir: Option<&Path>) -> Result<PathBuf, RepoError> {
    let start = match dir {
        Some(dir) => dir.to_owned(),
        None => std::env::current_dir().map_err(RepoError::CurrentDir)?,
    };
    let repo = match git2::Repository::discover(&start) {
        Ok(repo) => repo,
        Err(source) => return Err(RepoError::NotARepository { start, source }),
    };
    let Some(workdir) = repo.workdir() else {
        return Err(RepoError::Bare { start });
    };
    workdir.canonicalize().map_err(|source| RepoError::Resolve {
        path: workdir.to_owned(),
        source,
    })
}

/// Installs the SIGINT and SIGTERM handlers now, in `runtime`, and returns what completes
/// when one of them arrives. Installed before the service starts, a stop asked for while it
/// starts (systemd's stop during a slow Slack) is carried out once the start is through,
/// instead of the signal's default action killing the process mid-start.
fn shutdown_signal(runtime: &tokio::runtime::Runtime) -> impl Future<Output = ()> + use<> {
    use tokio::signal::unix::{SignalKind, signal};
    let _entered = runtime.enter();
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            tracing::error!("cannot install signal handlers; stop with SIGKILL");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("codebutler: error: {message}");
    ExitCode::from(code)
}
