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
//! `run` refuses a spec with `network: true`: the Coder never gets the network.
//!
//! The sandbox must be entered while the process has a single thread: nothing here starts a
//! thread before [`codebutler_runner::sandbox::enter`].

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use codebutler_runner::sandbox::{self, SandboxReport, SandboxSpec};

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
    }
}

/// Reads a spec file (before the sandbox hides the host).
fn read_spec(path: &Path) -> Result<SandboxSpec, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("read sandbox spec {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("parse sandbox spec {}: {e}", path.display()))
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
