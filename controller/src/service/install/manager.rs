//! The service manager's command lines — `systemctl`, `journalctl`, `launchctl`, `tail` —
//! built as data (tested by equality) and run in one place. `systemctl` and `journalctl`
//! are found on `PATH`, as an operator's shell finds them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::unit::{AGENT_LABEL, Scope, UNIT_NAME};

/// One command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    pub program: String,
    pub args: Vec<String>,
}

impl CommandLine {
    fn new(program: &str, args: &[&str]) -> Self {
        Self {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    /// `systemctl` in `scope` (`--user` for a user unit) with `args`.
    pub fn systemctl(scope: Scope, args: &[&str]) -> Self {
        let mut line = Self::new("systemctl", &[]);
        if scope == Scope::User {
            line.args.push("--user".to_owned());
        }
        line.args.extend(args.iter().map(|a| (*a).to_owned()));
        line
    }

    /// As a shell would show it (each word quoted where it needs it).
    pub fn shown(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .map(shell_word)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs it to its end; its standard output, or why it failed (its own first line of
    /// error output).
    pub fn run(&self) -> Result<String, ManagerError> {
        let output = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .env("SYSTEMD_PAGER", "")
            .env("SYSTEMD_COLORS", "0")
            .output()
            .map_err(|source| ManagerError::Spawn {
                command: self.shown(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output")
            .to_owned();
        Err(ManagerError::Failed {
            command: self.shown(),
            status: output.status.to_string(),
            said,
            stdout,
        })
    }
}

/// A service manager command that failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {said}")]
    Failed {
        command: String,
        status: String,
        said: String,
        /// What it printed on its standard output (`is-enabled` says `disabled` and fails).
        stdout: String,
    },
}

impl ManagerError {
    /// What the command printed on its standard output before failing.
    pub fn stdout(&self) -> &str {
        match self {
            Self::Failed { stdout, .. } => stdout,
            Self::Spawn { .. } => "",
        }
    }
}

/// Why systemd does not run in a scope, in a few words (`offline` where PID 1 is not
/// systemd, as in most containers; no user manager without a login).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotRunning(String);

/// Whether systemd runs in `scope`, asked as `systemctl is-system-running` asks it: `Ok`
/// when it answers a state of a running manager, else why not.
pub fn systemd_running(scope: Scope) -> Result<(), NotRunning> {
    let line = CommandLine::systemctl(scope, &["is-system-running"]);
    let state = match line.run() {
        Ok(state) => state,
        Err(e @ ManagerError::Spawn { .. }) => return Err(NotRunning(e.to_string())),
        // A degraded or starting system fails the command but runs.
        Err(e) => {
            let state = e.stdout().to_owned();
            if state.is_empty() {
                return Err(NotRunning(match e {
                    ManagerError::Failed { said, .. } => said,
                    other => other.to_string(),
                }));
            }
            state
        }
    };
    match state.lines().next().unwrap_or_default().trim() {
        "running" | "degraded" | "starting" | "initializing" | "maintenance" => Ok(()),
        other => Err(NotRunning(format!("`{}` says {other:?}", line.shown()))),
    }
}

/// The command that follows the systemd unit of `scope`'s log in journald.
pub fn journal_command(scope: Scope) -> CommandLine {
    match scope {
        Scope::User => CommandLine::new("journalctl", &["--user", "-u", UNIT_NAME, "-f"]),
        Scope::System => CommandLine::new("journalctl", &["-u", UNIT_NAME, "-f"]),
    }
}

/// The command that follows the log file `log` by its name, as it rotates (`tail -F`: a
/// file renamed away is left for the new one, which it waits for if it is not there yet).
pub fn follow_file(log: &Path) -> CommandLine {
    let log = log.to_string_lossy();
    CommandLine::new("tail", &["-n", "200", "-F", &log])
}

/// The commands that load and unload the launchd agent at `plist`.
pub fn launchctl(load: bool, plist: &Path) -> CommandLine {
    let plist = plist.to_string_lossy();
    CommandLine::new(
        "launchctl",
        &[if load { "load" } else { "unload" }, "-w", &plist],
    )
}

/// Whether the launchd agent is loaded (`launchctl list <label>` succeeds).
pub fn launchd_loaded() -> bool {
    CommandLine::new("launchctl", &["list", AGENT_LABEL])
        .run()
        .is_ok()
}

/// Which service manager runs the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Manager {
    Systemd(Scope),
    Launchd,
}

/// `word` as a shell reads it back: bare when it is made of safe characters, else in
/// single quotes.
pub fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `path` as a shell word.
pub fn shell_path(path: &Path) -> String {
    shell_word(&path.to_string_lossy())
}

/// The directory of `path`'s file, for messages.
pub fn dir_of(path: &Path) -> PathBuf {
    path.parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_follow_journald_or_the_services_file() {
        assert_eq!(
            journal_command(Scope::User).shown(),
            "journalctl --user -u codebutler.service -f"
        );
        assert_eq!(
            journal_command(Scope::System).shown(),
            "journalctl -u codebutler.service -f"
        );
        assert_eq!(
            follow_file(Path::new("/home/ops/.codebutler/logs/codebutler.log")).shown(),
            "tail -n 200 -F /home/ops/.codebutler/logs/codebutler.log"
        );
    }

    #[test]
    fn command_lines_are_shown_as_a_shell_reads_them() {
        assert_eq!(
            CommandLine::systemctl(Scope::User, &["enable", "--now", UNIT_NAME]).shown(),
            "systemctl --user enable --now codebutler.service"
        );
        assert_eq!(
            CommandLine::systemctl(Scope::System, &["daemon-reload"]).shown(),
            "systemctl daemon-reload"
        );
        assert_eq!(shell_word("/srv/my repo"), "'/srv/my repo'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
