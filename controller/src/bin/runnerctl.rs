//! `runnerctl`: inspects and controls the sandboxed Coder runners of a running controller
//! through a repository's admin socket (`<repo>/.codebutler/run/admin.sock`); `--repo` names
//! the repository by directory or by its name in the global config's `repositories`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use codebutler_controller::admin::address::admin_socket;
use codebutler_controller::admin::client::{self, Client, Format};

/// Inspect and control CodeButler's sandboxed Coder runners.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The admin socket (default: `.codebutler/run/admin.sock` of the repository).
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The repository: a directory inside it, or its name under `repositories` in the
    /// global config (default: the one containing the current directory).
    #[arg(long, global = true, value_name = "DIR|NAME")]
    repo: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// List runs, newest first.
    Ls {
        /// Only queued and running runs.
        #[arg(long)]
        active: bool,
    },
    /// Show a thread's latest run.
    Show { thread: String },
    /// Print a run's events; with -f, keep following until it ends.
    Logs {
        thread: String,
        #[arg(short, long)]
        follow: bool,
    },
    /// Cancel a thread's run.
    Cancel {
        thread: String,
        #[arg(long, default_value = "cancelled with runnerctl")]
        reason: String,
    },
    /// Start a run from a plan file in a fresh worktree and follow it.
    Run {
        #[arg(long, value_name = "FILE")]
        plan: PathBuf,
        /// Start it and return without following.
        #[arg(long)]
        detach: bool,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    let socket = match args
        .socket
        .clone()
        .map_or_else(|| admin_socket(args.repo.as_deref()), Ok)
    {
        Ok(socket) => socket,
        Err(e) => return fail(&e.to_string()),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("start async runtime: {e}")),
    };
    runtime.block_on(async move {
        let mut client = match Client::connect(&socket).await {
            Ok(client) => client,
            Err(e) => return fail(&e.to_string()),
        };
        let mut out = std::io::stdout();
        let result = match args.command {
            Cmd::Ls { active } => client.ls(active, format, &mut out).await,
            Cmd::Show { thread } => client.show(&thread, format, &mut out).await,
            Cmd::Logs { thread, follow } => client.logs(&thread, follow, format, &mut out).await,
            Cmd::Cancel { thread, reason } => {
                client.cancel(&thread, &reason, format, &mut out).await
            }
            Cmd::Run { plan, detach } => match std::fs::read_to_string(&plan) {
                Ok(text) => client.run(&text, !detach, format, &mut out).await,
                Err(source) => Err(client::Error::ReadPlan { path: plan, source }),
            },
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e.to_string()),
        }
    })
}

fn fail(message: &str) -> ExitCode {
    eprintln!("runnerctl: error: {message}");
    ExitCode::from(2)
}
