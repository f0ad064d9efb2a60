//! Running `git` and `gh` from the controller: every git process with settings that
//! override any config file ([`SAFE_GIT_CONFIG`]: no hooks, no `ext::` transport, no
//! repository programs), no terminal prompt, bounded in time, and a failure's output
//! quoted within bounds.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Most bytes of a failed command's output quoted in an error.
const MAX_QUOTED_OUTPUT: usize = 2000;

/// Why a command the controller ran failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} did not finish within {} s", timeout.as_secs())]
    Timeout { what: String, timeout: Duration },
    #[error("{what} failed ({status}): {output}")]
    Failed {
        what: String,
        status: String,
        output: String,
    },
}

/// Settings every `git` process of the controller runs with, overriding any config file:
/// no hooks, no `ext::` transport (it runs arbitrary commands), no fsmonitor program, no
/// submodule recursion, no automatic gc or maintenance.
pub const SAFE_GIT_CONFIG: [&str; 6] = [
    "core.hooksPath=/dev/null",
    "protocol.ext.allow=never",
    "core.fsmonitor=false",
    "submodule.recurse=false",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// `git` run in `dir` with [`SAFE_GIT_CONFIG`] and no terminal prompt; add the subcommand
/// and its arguments.
pub(crate) fn safe_git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    for setting in SAFE_GIT_CONFIG {
        command.args(["-c", setting]);
    }
    command.current_dir(dir).env("GIT_TERMINAL_PROMPT", "0");
    command
}

/// Runs a fixed command with `stdin` (or none), returns its stdout; fails on a non-zero exit
/// or after `timeout` (the process is killed).
pub(crate) async fn run(
    mut command: Command,
    stdin: Option<&[u8]>,
    what: &str,
    timeout: Duration,
) -> Result<String, CommandError> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let spawn_error = |source| CommandError::Spawn {
        program: program.clone(),
        source,
    };
    let mut child = command.spawn().map_err(spawn_error)?;
    let work = async move {
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input).await?;
            pipe.shutdown().await?;
            drop(pipe);
        }
        child.wait_with_output().await
    };
    let output = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| CommandError::Timeout {
            what: what.to_owned(),
            timeout,
        })?
        .map_err(spawn_error)?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let text = if stderr.trim().is_empty() {
            stdout
        } else {
            stderr.into_owned()
        };
        return Err(CommandError::Failed {
            what: what.to_owned(),
            status: output.status.to_string(),
            output: quote(&without_credentials(text.trim())),
        });
    }
    Ok(stdout)
}

/// `text` with the credentials of any address in it (`https://user:token@host/…`) replaced
/// by `***`: a remote's address in git's output must not carry a token into a thread or a
/// log.
pub(crate) fn without_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(user_end) => {
                out.push_str("***");
                rest = &tail[user_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// `text` cut to [`MAX_QUOTED_OUTPUT`] bytes (on a character boundary).
pub(crate) fn quote(text: &str) -> String {
    if text.len() <= MAX_QUOTED_OUTPUT {
        return text.to_owned();
    }
    let mut end = MAX_QUOTED_OUTPUT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_addresses_are_hidden() {
        assert_eq!(
            without_credentials(
                "fatal: unable to access 'https://x-access-token:ghs_SECRET@github.com/acme/app.git/': 403\n\
                 To https://bot@example.com/r.git and ssh://git@host:22/r, file:///srv/o.git"
            ),
            "fatal: unable to access 'https://***@github.com/acme/app.git/': 403\n\
             To https://***@example.com/r.git and ssh://***@host:22/r, file:///srv/o.git"
        );
        assert_eq!(without_credentials("no address"), "no address");
        assert_eq!(without_credentials("ends with ://"), "ends with ://");
    }
}
