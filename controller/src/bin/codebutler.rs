//! `codebutler`: runs the service in the foreground, logging to stderr — for one repository
//! (`--repo DIR`, or the one containing the current directory), or, when the global config
//! lists `repositories` and no `--repo` is given, for all of them through one Slack app.
//! With `--status`, prints the topology and exits; with `--cleanup-orphans`, removes what
//! closed and unknown threads left and exits.
//!
//! Exit codes: 0 stopped cleanly; 1 a failure; 2 the configuration (or the repository to
//! serve) is wrong, or a service refuses what it names — a Slack token, a scope, the
//! channel, the model key, `gh`'s login; 3 `--cleanup-orphans` while a daemon holds the
//! repository; 4 another process is connected to the same Slack app; 5 this host lacks what
//! the configuration needs — the sandbox's kernel features, loop devices for
//! `sandbox.diskMB`, the runner, `gh`; 6 Slack cannot be reached. Each is said in one line
//! on stderr, with its fix.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use codebutler_controller::config::{self, Config, ConfigSources};
use codebutler_controller::layout::Layout;
use codebutler_controller::logging::{self, LogFormat};
use codebutler_controller::repo_lock::{LockError, RepoLock};
use codebutler_controller::service::status::{self, RepoRef};
use codebutler_controller::service::{self, NoPeers, ServedRepo, StartError};
use codebutler_controller::store::{self, Store, StoreError};
use codebutler_controller::workspace::orphans;

/// CodeButler: an AI development team in a Slack channel.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The repository to serve (default: every repository listed under `repositories` in
    /// the global config, else the one containing the current directory).
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// Print the repositories served, whether a service holds each, their active threads
    /// and runs, and exit.
    #[arg(long, conflicts_with = "cleanup_orphans")]
    status: bool,
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

fn main() -> ExitCode {
    let args = Args::parse();
    logging::init(args.log_format, args.verbose);

    if args.repo.is_none() && !args.cleanup_orphans {
        match listed_repositories() {
            Ok(Some((home, entries))) => return serve_listed(&home, &entries, args.status),
            Ok(None) => {}
            Err(e) => return fail(&format!("configuration: {e}"), 2),
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
        Err(e) => return fail(&format!("configuration: {e}"), 2),
    };
    let config = match config::load(&sources, |k| std::env::var(k).ok()) {
        Ok(config) => config,
        Err(e) => return fail(&format!("configuration: {e}"), 2),
    };
    let home = sources
        .global
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned);
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
    exit(runtime.block_on(service::run_one(
        layout,
        config,
        home,
        shutdown_signal(&runtime),
    )))
}

/// The global config directory and its `repositories`, if it lists any.
fn listed_repositories()
-> Result<Option<(PathBuf, Vec<config::RepositoryEntry>)>, config::ConfigError> {
    let home = config::global_dir()?;
    Ok(config::entries(&home.join("config.json"))?.map(|entries| (home, entries)))
}

/// Serves (or, with `status`, describes) every repository the global config lists.
fn serve_listed(home: &Path, entries: &[config::RepositoryEntry], status: bool) -> ExitCode {
    if !status {
        for entry in entries {
            if let Err(e) = Layout::new(&entry.path).init() {
                return fail(&format!("repository `{}`: {e}", entry.name), 1);
            }
        }
    }
    let repos = match config::load_repositories(home, entries, |k| std::env::var(k).ok()) {
        Ok(repos) => repos,
        Err(e) => return fail(&format!("configuration: {e}"), 2),
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
    let served = repos
        .into_iter()
        .map(|r| ServedRepo {
            name: Some(r.entry.name),
            layout: Layout::new(&r.entry.path),
            config: r.config,
        })
        .collect();
    exit(runtime.block_on(service::run(
        served,
        home.to_owned(),
        NoPeers,
        shutdown_signal(&runtime),
    )))
}

/// `--status`: prints the topology of `repos` on stdout.
fn print_status(
    runtime: &tokio::runtime::Runtime,
    repos: Vec<RepoRef>,
    home: &Path,
    config: &Config,
) -> ExitCode {
    let status = runtime.block_on(status::gather(
        repos,
        home,
        &config.slack.app_token,
        &config.store,
    ));
    print!("{}", status::render(&status));
    ExitCode::SUCCESS
}

/// The exit code of the service's end.
fn exit(result: Result<(), StartError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e.to_string(), e.exit_code()),
    }
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

/// Completes on SIGINT or SIGTERM. The handlers are installed now, as the daemon starts,
/// not when the future is first polled (only once the start-up is done and the service waits
/// for its end): a signal during the start-up would otherwise end the process at once,
/// without the orderly stop.
fn shutdown_signal(runtime: &tokio::runtime::Runtime) -> impl Future<Output = ()> + use<> {
    use tokio::signal::unix::{SignalKind, signal};
    let _context = runtime.enter();
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = signals else {
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
