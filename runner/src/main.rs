//! `codebutler-runner`: the sandboxed runner binary.
//!
//! Subcommands:
//! - `run --spec-json JSON`: the Coder runner the controller starts: enter the sandbox, talk
//!   to the controller's hub on the inherited fd 3, run the task it sends.
//! - `sandbox-exec --spec FILE -- CMD [ARGS…]`: enter the sandbox described by the JSON spec
//!   and exec `CMD` inside it — an operator's tool to see what a command sees in the
//!   sandbox, what the escape tests drive, and how the controller prepares a worktree
//!   (`npm ci`, …) with the spec's `network: true`.
//!
//! - `worktree-io --spec-json JSON snapshot|restore …`: the controller's helper for a
//!   worktree's files (see [`codebutler_runner::worktree_io`]): enter the sandbox of the
//!   worktree and write its files as frames on stdout (`snapshot`), or put a tree of its object
//!   store back (`restore`), so the controller never reads or writes a worktree itself.
//!
//! `run` and `worktree-io` refuse a spec with `network: true`: only the worktree preparation
//! gets the network.
//!
//! The sandbox must be entered while the process has a single thread: nothing here starts a
//! thread before [`codebutler_sandbox::enter`].

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use codebutler_sandbox::{self as sandbox, SandboxReport, SandboxSpec};

/// Exit code when the sandbox could not be set up (a step failed) or the spec is unusable.
const EXIT_SANDBOX_FAILED: u8 = 125;
/// Exit code when the command could not be executed (as shells use it).
const EXIT_CANNOT_EXEC: u8 = 126;
/// Exit code when the command was not found.
const EXIT_NOT_FOUND: u8 = 127;

#[derive(Debug, Parser)]
#[command(
    name = "codebutler-runner",
    version,
    about = "CodeButler's sandboxed runner"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the Coder in the sandbox, talking to the controller on fd 3.
    Run {
        /// The sandbox spec (JSON; paths and limits, nothing secret).
        #[arg(long)]
        spec_json: String,
    },
    /// Enter the sandbox of a spec and exec a command inside it.
    SandboxExec {
        /// The sandbox spec (JSON).
        #[arg(long)]
        spec: PathBuf,
        /// Print the sandbox report (JSON) on stderr before the exec.
        #[arg(long)]
        print_report: bool,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// Read or write a worktree's files for the controller, inside the sandbox.
    WorktreeIo {
        /// The sandbox spec (JSON) of the worktree.
        #[arg(long)]
        spec_json: String,
        #[command(subcommand)]
        operation: WorktreeOperation,
    },
}

#[derive(Debug, Subcommand)]
enum WorktreeOperation {
    /// Write every file git would track as frames on stdout.
    Snapshot {
        /// Regular files larger than this are reported as left out, not read.
        #[arg(long)]
        max_file_bytes: u64,
        /// Also list what git ignores (for a commit's report of what it left out).
        #[arg(long)]
        list_ignored: bool,
        /// A path whose ignored files are sent too (what the Coder commits on purpose).
        #[arg(long)]
        include: Vec<OsString>,
    },
    /// Put the tree with this id (of the worktree's object store) back.
    Restore {
        /// The tree's hex id.
        #[arg(long)]
        tree: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { spec_json } => match serde_json::from_str::<SandboxSpec>(&spec_json) {
            Ok(spec) if spec.network => {
                eprintln!(
                    "codebutler-runner: refusing a Coder run with \"network\": true in its \
                     sandbox spec (only worktree preparation may have the network)"
                );
                ExitCode::from(EXIT_SANDBOX_FAILED)
            }
            Ok(spec) => codebutler_runner::run::main(&spec),
            Err(e) => {
                eprintln!("codebutler-runner: parse sandbox spec: {e}");
                ExitCode::from(EXIT_SANDBOX_FAILED)
            }
        },
        Command::SandboxExec {
            spec,
            print_report,
            command,
        } => sandbox_exec(&spec, print_report, &command),
        Command::WorktreeIo {
            spec_json,
            operation,
        } => worktree_io(&spec_json, &operation),
    }
}

/// Enters the worktree's sandbox (no network, no descriptors but stdio) and does
/// `operation`, writing frames on stdout; a failure is written as a `Failed` frame too.
fn worktree_io(spec_json: &str, operation: &WorktreeOperation) -> ExitCode {
    use codebutler_runner::worktree_io;
    use codebutler_sandbox::worktree_wire as wire;
    let mut spec = match serde_json::from_str::<SandboxSpec>(spec_json) {
        Ok(spec) if spec.network => {
            eprintln!("codebutler-runner: refusing a worktree helper with \"network\": true");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("codebutler-runner: parse sandbox spec: {e}");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
    };
    spec.keep_fds = Vec::new();
    let report = match enter_or_exit(&spec, false) {
        Ok(report) => report,
        Err(code) => return code,
    };
    let root = match report.mode {
        sandbox::SandboxMode::Enforce => spec.mount_point.clone(),
        sandbox::SandboxMode::None => spec.worktree.clone(),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = match operation {
        WorktreeOperation::Snapshot {
            max_file_bytes,
            list_ignored,
            include,
        } => {
            let options = worktree_io::Snapshot {
                max_file_bytes: *max_file_bytes,
                list_ignored: *list_ignored,
                include: include
                    .iter()
                    .map(|p| p.as_os_str().as_bytes().to_vec())
                    .collect(),
            };
            worktree_io::snapshot(&root, &options, &mut out)
        }
        WorktreeOperation::Restore { tree } => worktree_io::restore(&root, tree, &mut out),
    };
    let failed = match result {
        Ok(_) => None,
        Err(e) => {
            let message = e.to_string();
            eprintln!("codebutler-runner: {message}");
            if let Err(w) = wire::write_frame(&mut out, &wire::Frame::Failed { message }) {
                eprintln!("codebutler-runner: report the failure: {w}");
            }
            Some(ExitCode::from(1))
        }
    };
    if let Err(e) = std::io::Write::flush(&mut out) {
        eprintln!("codebutler-runner: write to the controller: {e}");
        return ExitCode::from(1);
    }
    failed.unwrap_or(ExitCode::SUCCESS)
}

/// Why a spec file could not be used.
#[derive(Debug, thiserror::Error)]
enum SpecError {
    #[error("read sandbox spec {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parse sandbox spec {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Reads a spec file (before the sandbox hides the host).
fn read_spec(path: &Path) -> Result<SandboxSpec, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| SpecError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Enters the sandbox of `spec` and prints its warnings; exits on failure.
fn enter_or_exit(spec: &SandboxSpec, print_report: bool) -> Result<SandboxReport, ExitCode> {
    match sandbox::enter(spec) {
        Ok(report) => {
            for warning in &report.warnings {
                eprintln!("codebutler-runner: WARNING: {warning}");
            }
            if print_report {
                match serde_json::to_string(&report) {
                    Ok(json) => eprintln!("{json}"),
                    Err(e) => eprintln!("codebutler-runner: report: {e}"),
                }
            }
            Ok(report)
        }
        Err(e) => {
            eprintln!("codebutler-runner: {e}");
            Err(ExitCode::from(EXIT_SANDBOX_FAILED))
        }
    }
}

fn sandbox_exec(spec_path: &Path, print_report: bool, command: &[OsString]) -> ExitCode {
    let spec = match read_spec(spec_path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("codebutler-runner: {e}");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
    };
    let args: Result<Vec<CString>, _> =
        command.iter().map(|a| CString::new(a.as_bytes())).collect();
    let args = match args {
        Ok(a) if !a.is_empty() => a,
        _ => {
            eprintln!("codebutler-runner: the command is empty or contains a NUL byte");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
    };
    if let Err(code) = enter_or_exit(&spec, print_report) {
        return code;
    }
    let e = match nix::unistd::execvp(&args[0], &args) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    eprintln!(
        "codebutler-runner: exec {}: {e}",
        command[0].to_string_lossy()
    );
    if e == nix::errno::Errno::ENOENT {
        ExitCode::from(EXIT_NOT_FOUND)
    } else {
        ExitCode::from(EXIT_CANNOT_EXEC)
    }
}
