//! `runnerctl`: inspects and controls the sandboxed Coder runners through the controller's
//! admin socket. The runners and the admin API do not exist yet, so this binary has no
//! commands; it says so rather than pretending.

use std::process::ExitCode;

use clap::Parser;

/// Inspect and control CodeButler's sandboxed Coder runners.
///
/// Not available yet: the sandboxed runner and the controller's admin API come in a later
/// release, so there is nothing to list, follow or cancel.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {}

fn main() -> ExitCode {
    let Args {} = Args::parse();
    eprintln!(
        "runnerctl: no runner support in this build yet (the sandboxed Coder runner is not built); nothing to inspect"
    );
    ExitCode::from(2)
}
