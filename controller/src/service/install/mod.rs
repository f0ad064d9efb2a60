//! `codebutler --install`, `--uninstall`, `--logs` (journald for an installed systemd unit,
//! else the service's own log file) and the service's lines of `--status`:
//! the one service of a Slack app run by the host's service manager — a systemd unit (a user
//! unit by default, a system unit with `--system`, which the per-thread disks need since
//! they are loop mounts only root can make) or, on macOS, a launchd agent.
//!
//! `--install` writes the unit rendered from `deploy/` ([`unit`]), reloads systemd and
//! enables and starts it; `--uninstall` stops and disables it, removes that file and reloads:
//! nothing else is touched, and a file there that `--install` did not write is neither
//! overwritten nor removed. Where systemd does not run (a container), `--install` writes
//! nothing and says so, with the command line to run under whatever supervises the
//! container. Each step's command line is built in [`manager`].

pub mod manager;
pub mod unit;

use std::path::{Path, PathBuf};

use manager::{CommandLine, Manager, ManagerError, shell_path, shell_word};
pub use unit::{Scope, ServiceSpec, UNIT_NAME};

/// Why installing, removing or following the service failed. [`InstallError::exit_code`]
/// sorts them like the daemon's: 2 a setting to change, 5 this host lacks something, 1
/// anything else.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "systemd is not running on this host ({why}) — a container, say — so nothing was \
         installed: run the service under whatever supervises this host, with the command \
         line printed on standard output"
    )]
    NoSystemd { why: String },
    #[error(
        "no systemd user manager runs for this user ({why}): log in to a session (or keep one \
         with `loginctl enable-linger`), or install the system unit as root with --system"
    )]
    NoUserManager { why: String },
    #[error(
        "{} exists and was not written by `codebutler --install`: move it away (or remove it) \
         and install again; it is left as it is", path.display()
    )]
    NotOurs { path: PathBuf },
    #[error(
        "{repos} use per-thread disks (sandbox.diskMB), which are loop mounts only root can \
         make, and a user service does not run as root: install the system unit as root \
         (sudo codebutler --install --system), or set sandbox.diskMB to 0 (and \
         access.maxWorktreeDiskMB with it) to run without the disk cap"
    )]
    DisksNeedRoot { repos: String },
    #[error(
        "a system unit goes in {}, which only root may write: run it as root \
         (sudo codebutler --install --system)", dir.display()
    )]
    NeedsRoot { dir: PathBuf },
    #[error("cannot find the user's config directory: set HOME or XDG_CONFIG_HOME")]
    NoHome,
    #[error("write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("remove {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Manager(#[from] ManagerError),
    #[error(transparent)]
    Unwritable(#[from] unit::UnwritableValue),
}

impl InstallError {
    /// The exit code for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::NoSystemd { .. } => 5,
            Self::NoUserManager { .. }
            | Self::NotOurs { .. }
            | Self::DisksNeedRoot { .. }
            | Self::NoHome
            | Self::Unwritable(_) => 2,
            Self::NeedsRoot { .. }
            | Self::Write { .. }
            | Self::Remove { .. }
            | Self::Manager(_) => 1,
        }
    }
}

/// Where the service's definition goes and who runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub manager: Manager,
    /// The unit file or the plist.
    pub path: PathBuf,
    /// The launchd agent's log file (unused by systemd, which keeps the journal).
    pub log: PathBuf,
}

impl Placement {
    /// Where the definition goes for `scope` on this platform: a user unit in
    /// `$XDG_CONFIG_HOME/systemd/user` (`~/.config`), a system unit in
    /// `/etc/systemd/system`, a launchd agent in `~/Library/LaunchAgents`; `unit_dir`
    /// (`--unit-dir`) puts the file elsewhere. `env` looks up the environment.
    pub fn for_scope(
        scope: Scope,
        unit_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, InstallError> {
        let home = env("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or(InstallError::NoHome);
        if cfg!(target_os = "macos") && scope == Scope::User {
            let home = home?;
            let dir = unit_dir.map_or_else(|| home.join("Library/LaunchAgents"), Path::to_owned);
            return Ok(Self {
                manager: Manager::Launchd,
                path: dir.join(format!("{}.plist", unit::AGENT_LABEL)),
                log: home.join("Library/Logs/codebutler.log"),
            });
        }
        let dir = match (unit_dir, scope) {
            (Some(dir), _) => dir.to_owned(),
            (None, Scope::System) => PathBuf::from("/etc/systemd/system"),
            (None, Scope::User) => {
                let config = env("XDG_CONFIG_HOME")
                    .filter(|d| d.starts_with('/'))
                    .map(PathBuf::from);
                match config {
                    Some(config) => config.join("systemd/user"),
                    None => home?.join(".config/systemd/user"),
                }
            }
        };
        Ok(Self {
            manager: Manager::Systemd(scope),
            path: dir.join(UNIT_NAME),
            log: PathBuf::new(),
        })
    }
}

/// What to install: the service and the repositories' disk settings.
#[derive(Clone, Debug)]
pub struct InstallRequest {
    pub placement: Placement,
    pub spec: ServiceSpec,
    /// The repositories (by name) that use per-thread disks (`sandbox.diskMB` above 0).
    pub with_disks: Vec<String>,
    /// Whether this process runs as root.
    pub root: bool,
}

/// What `--install` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub path: PathBuf,
    /// Whether a unit of ours was there already (and was replaced).
    pub replaced: bool,
    /// The service manager commands run, in order.
    pub commands: Vec<String>,
}

/// The command line that runs the service without a service manager.
pub fn foreground_command(spec: &ServiceSpec) -> String {
    let mut words = vec![
        format!("CODEBUTLER_HOME={}", shell_path(&spec.home)),
        shell_path(&spec.binary),
    ];
    words.extend(spec.args.iter().map(|a| shell_word(a)));
    words.join(" ")
}

/// Installs the service: checks what the service needs of the host, writes its definition
/// and has the service manager enable and start it.
pub fn install(request: &InstallRequest) -> Result<Installed, InstallError> {
    let placement = &request.placement;
    let text = match placement.manager {
        Manager::Systemd(scope) => {
            if scope == Scope::User && !request.root && !request.with_disks.is_empty() {
                return Err(InstallError::DisksNeedRoot {
                    repos: request.with_disks.join(", "),
                });
            }
            if scope == Scope::System && !request.root {
                return Err(InstallError::NeedsRoot {
                    dir: manager::dir_of(&placement.path),
                });
            }
            systemd_available(scope)?;
            unit::systemd_unit(&request.spec, scope)?
        }
        Manager::Launchd => unit::launchd_plist(&request.spec, &placement.log)?,
    };
    let replaced = match std::fs::read_to_string(&placement.path) {
        Ok(existing) if unit::is_ours(&existing) => true,
        Ok(_) => {
            return Err(InstallError::NotOurs {
                path: placement.path.clone(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(source) => {
            return Err(InstallError::Write {
                path: placement.path.clone(),
                source,
            });
        }
    };
    let write_error = |source| InstallError::Write {
        path: placement.path.clone(),
        source,
    };
    std::fs::create_dir_all(manager::dir_of(&placement.path)).map_err(write_error)?;
    crate::layout::replace_file(&placement.path, text.as_bytes(), 0o644).map_err(write_error)?;
    let steps = match placement.manager {
        Manager::Systemd(scope) => vec![
            CommandLine::systemctl(scope, &["daemon-reload"]),
            // A replaced unit restarts with what was written; a new one starts.
            if replaced {
                CommandLine::systemctl(scope, &["enable", UNIT_NAME])
            } else {
                CommandLine::systemctl(scope, &["enable", "--now", UNIT_NAME])
            },
        ]
        .into_iter()
        .chain(replaced.then(|| CommandLine::systemctl(scope, &["restart", UNIT_NAME])))
        .collect::<Vec<_>>(),
        Manager::Launchd => {
            let mut steps = Vec::new();
            if replaced {
                steps.push(manager::launchctl(false, &placement.path));
            }
            steps.push(manager::launchctl(true, &placement.path));
            steps
        }
    };
    let mut commands = Vec::new();
    for step in steps {
        commands.push(step.shown());
        step.run()?;
    }
    Ok(Installed {
        path: placement.path.clone(),
        replaced,
        commands,
    })
}

/// What `--uninstall` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uninstalled {
    /// Nothing of ours was installed there.
    Nothing { path: PathBuf },
    /// The service was stopped and disabled (where the manager runs) and its file removed.
    Removed {
        path: PathBuf,
        commands: Vec<String>,
    },
}

/// Stops, disables and removes what `--install` put at `placement`; a file there that
/// `--install` did not write is left alone.
pub fn uninstall(placement: &Placement) -> Result<Uninstalled, InstallError> {
    match std::fs::read_to_string(&placement.path) {
        Ok(existing) if unit::is_ours(&existing) => {}
        Ok(_) => {
            return Err(InstallError::NotOurs {
                path: placement.path.clone(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Uninstalled::Nothing {
                path: placement.path.clone(),
            });
        }
        Err(source) => {
            return Err(InstallError::Remove {
                path: placement.path.clone(),
                source,
            });
        }
    }
    let mut commands = Vec::new();
    let mut run = |step: CommandLine| -> Result<(), InstallError> {
        commands.push(step.shown());
        step.run()?;
        Ok(())
    };
    let running = match placement.manager {
        Manager::Systemd(scope) => systemd_available(scope).is_ok(),
        Manager::Launchd => true,
    };
    if running {
        match placement.manager {
            Manager::Systemd(scope) => {
                run(CommandLine::systemctl(
                    scope,
                    &["disable", "--now", UNIT_NAME],
                ))?;
            }
            Manager::Launchd => run(manager::launchctl(false, &placement.path))?,
        }
    }
    std::fs::remove_file(&placement.path).map_err(|source| InstallError::Remove {
        path: placement.path.clone(),
        source,
    })?;
    if running && let Manager::Systemd(scope) = placement.manager {
        run(CommandLine::systemctl(scope, &["daemon-reload"]))?;
    }
    Ok(Uninstalled::Removed {
        path: placement.path.clone(),
        commands,
    })
}

/// systemd runs in `scope`, or the error saying it does not.
fn systemd_available(scope: Scope) -> Result<(), InstallError> {
    manager::systemd_running(scope).map_err(|not_running| {
        let why = not_running.to_string();
        // Without a system manager, the user's cannot run either.
        if scope == Scope::User && manager::systemd_running(Scope::System).is_ok() {
            InstallError::NoUserManager { why }
        } else {
            InstallError::NoSystemd { why }
        }
    })
}

/// The command that follows the service's log: journald for the systemd unit of `scope`
/// when given, else the user's unit if installed, else the system's; where none of those
/// is installed (the service run some other way) or on macOS, the service's own log file
/// `log_file`, followed by name across its rotation.
pub fn logs(
    scope: Option<Scope>,
    unit_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    log_file: &Path,
) -> Result<CommandLine, InstallError> {
    let placement = match scope {
        Some(scope) => Placement::for_scope(scope, unit_dir, env)?,
        None => {
            let user = Placement::for_scope(Scope::User, unit_dir, env)?;
            if user.path.exists() || user.manager == Manager::Launchd {
                user
            } else {
                Placement::for_scope(Scope::System, unit_dir, env)?
            }
        }
    };
    Ok(match placement.manager {
        Manager::Systemd(scope) if placement.path.exists() => manager::journal_command(scope),
        _ => manager::follow_file(log_file),
    })
}

/// The service as `--status` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitStatus {
    /// No definition of ours in either scope.
    NotInstalled,
    /// Installed at `path`: whether the manager says it is enabled and running (its own
    /// words), or why it could not say.
    Installed {
        path: PathBuf,
        scope: Scope,
        enabled: String,
        running: String,
    },
}

/// Looks for the service in the user's scope, then the system's, and asks the manager
/// about it.
pub fn unit_status(env: &dyn Fn(&str) -> Option<String>) -> UnitStatus {
    for scope in [Scope::User, Scope::System] {
        let Ok(placement) = Placement::for_scope(scope, None, env) else {
            continue;
        };
        if !placement.path.exists() {
            continue;
        }
        let ask = |words: &[&str]| -> String {
            match placement.manager {
                Manager::Launchd => {
                    if manager::launchd_loaded() {
                        "yes (loaded)".to_owned()
                    } else {
                        "no (not loaded)".to_owned()
                    }
                }
                Manager::Systemd(scope) => {
                    if let Err(why) = manager::systemd_running(scope) {
                        return format!("unknown: systemd is not running here ({why})");
                    }
                    let line = CommandLine::systemctl(scope, words);
                    match line.run() {
                        Ok(out) => out,
                        // `is-enabled` and `is-active` fail while printing the answer.
                        Err(e) if !e.stdout().is_empty() => e.stdout().to_owned(),
                        Err(e) => format!("unknown: {e}"),
                    }
                }
            }
        };
        return UnitStatus::Installed {
            enabled: ask(&["is-enabled", UNIT_NAME]),
            running: ask(&["is-active", UNIT_NAME]),
            path: placement.path,
            scope,
        };
    }
    UnitStatus::NotInstalled
}
