//! What `codebutler init` checks on this host once the answers are written, each the way
//! the service's start checks it ([`crate::service::preflight`]): `gh auth status`, the
//! repository's `origin`, the sandbox entered once, the toolchains found for it, and loop
//! devices for the per-thread disks. Each finding says what is wrong, what it costs and how to fix it.

use std::path::Path;

use crate::config::Config;
use crate::layout::Layout;
use crate::service::preflight;
use crate::workspace::toolchains::Toolchains;

/// One check's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What was found, in one line (with the fix when something is wrong).
    pub text: String,
    /// `None` when all is well; else the exit code the service's start would end with.
    pub blocks: Option<u8>,
    /// Something the service runs without, at a cost the text names.
    pub warning: bool,
}

impl Finding {
    fn ok(text: String) -> Self {
        Self {
            text,
            blocks: None,
            warning: false,
        }
    }

    fn warning(text: String) -> Self {
        Self {
            text,
            blocks: None,
            warning: true,
        }
    }

    fn blocking(text: String, code: u8) -> Self {
        Self {
            text,
            blocks: Some(code),
            warning: false,
        }
    }
}

/// Every host check for the repository of `layout` with its merged `config`.
pub async fn host(layout: &Layout, config: &Config) -> Vec<Finding> {
    let mut findings = vec![
        gh(&config.github.cli, &layout.repo).await,
        origin(&layout.repo),
    ];
    findings.extend(sandbox(layout, config).await);
    findings.push(toolchains(&Toolchains::of_this_process(
        config.sandbox.find_toolchains,
    )));
    findings.push(disks(config.sandbox.disk_mb));
    findings
}

async fn gh(cli: &str, repo: &Path) -> Finding {
    match preflight::gh_logged_in(cli, repo).await {
        Ok(()) => Finding::ok(format!(
            "GitHub CLI: `{cli} auth status` says it is logged in"
        )),
        Err(mistake) => {
            let code = mistake.exit_code();
            Finding::blocking(mistake.to_string(), code)
        }
    }
}

/// The repository's `origin`, shown without the credentials its address may hold.
fn origin(repo: &Path) -> Finding {
    let url = git2::Repository::open(repo)
        .ok()
        .and_then(|r| r.find_remote("origin").ok()?.url().ok().map(shown_address));
    match url {
        Some(url) => Finding::ok(format!("origin: {url}")),
        None => Finding::warning(
            "the repository has no `origin` remote: the Coder's branches start from the local \
             HEAD and its pull requests cannot be opened; add it (git remote add origin …)"
                .to_owned(),
        ),
    }
}

/// A remote's address without a user name or password in it.
fn shown_address(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        _ => url
            .rsplit_once('@')
            .filter(|(user, _)| !user.contains('/'))
            .map_or_else(|| url.to_owned(), |(_, rest)| rest.to_owned()),
    }
}

async fn sandbox(layout: &Layout, config: &Config) -> Vec<Finding> {
    if config.sandbox.mode != crate::config::SandboxMode::Enforce {
        return vec![Finding::warning(
            "the sandbox is off (sandbox.mode none): the Coder's commands run with this host's \
             files and network; set sandbox.mode to enforce on a host that has it"
                .to_owned(),
        )];
    }
    match preflight::sandbox(layout, config).await {
        Ok(warnings) => {
            let mut findings = vec![Finding::ok(
                "the sandbox: user namespaces, Landlock and seccomp work on this host (the runner \
                 entered it once)"
                    .to_owned(),
            )];
            findings.extend(warnings.into_iter().map(|w| {
                Finding::warning(format!(
                    "the sandbox runs without something: {w} (a run is then held only by \
                     rlimits there)"
                ))
            }));
            findings
        }
        Err(mistake) => {
            let code = mistake.exit_code();
            vec![Finding::blocking(mistake.to_string(), code)]
        }
    }
}

/// The toolchains the sandbox will show without `sandbox.readOnly`.
fn toolchains(found: &Toolchains) -> Finding {
    let lines = found.lines();
    if lines.is_empty() {
        return Finding::ok(
            "toolchains for the sandbox: none found in the home or on the PATH (rustup, pyenv, \
             nvm, fnm, volta, uv, pipx, Go in /usr/local/go); add the ones the repositories \
             need to sandbox.readOnly and build.path"
                .to_owned(),
        );
    }
    Finding::ok(format!("toolchains for the sandbox: {}", lines.join("; ")))
}

fn disks(disk_mb: u64) -> Finding {
    if disk_mb == 0 {
        return Finding::warning(
            "per-thread disks are off (sandbox.diskMB 0): nothing caps what a run writes on \
             this host"
                .to_owned(),
        );
    }
    match crate::workspace::disk::probe() {
        Ok(()) => Finding::ok(format!(
            "per-thread disks: loop devices work here ({disk_mb} MB each)"
        )),
        Err(e) => Finding::blocking(
            format!(
                "per-thread disks (sandbox.diskMB {disk_mb}) cannot be made here: {e}; they are \
                 what caps the disk a run writes: run the service as root on a host with loop \
                 devices (codebutler --install --system), or set sandbox.diskMB to 0 to go \
                 without the cap"
            ),
            5,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toolchains_found_are_one_finding() {
        let none = toolchains(&Toolchains::none());
        assert!(
            none.text.starts_with(
                "toolchains for the sandbox: none found in the home or on the PATH (rustup, pyenv, nvm,"
            ),
            "{}",
            none.text
        );
        let found = Toolchains {
            found: vec![crate::workspace::toolchains::Toolchain {
                name: "rustup".into(),
                read_only: vec!["/root/.rustup".into(), "/root/.cargo/bin".into()],
                path: vec!["/root/.cargo/bin".into()],
                env: Default::default(),
            }],
        };
        assert_eq!(
            toolchains(&found),
            Finding::ok(
                "toolchains for the sandbox: rustup (/root/.rustup, /root/.cargo/bin)".into()
            )
        );
    }

    #[test]
    fn remote_addresses_are_shown_without_credentials() {
        assert_eq!(
            shown_address("https://bot:ghp_secret@github.com/acme/api.git"),
            "https://github.com/acme/api.git"
        );
        assert_eq!(
            shown_address("git@github.com:acme/api.git"),
            "github.com:acme/api.git"
        );
        assert_eq!(shown_address("/srv/git/api.git"), "/srv/git/api.git");
    }
}
