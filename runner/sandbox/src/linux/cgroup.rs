//! Per-sandbox cgroups (`pids` and `memory`), "where the host has them".
//!
//! Created by the runner before it unshares (it still has the host's view and rights),
//! joined by the sandbox's PID 1 through descriptors opened here (so the join works from
//! inside the new user namespace, before the root is replaced), and removed by the
//! supervising parent after the sandbox has ended — through a descriptor of the parent
//! directory, since the supervisor's own mount namespace loses `/sys` when the root is
//! pivoted.
//!
//! cgroup v1 (one hierarchy per controller under `/sys/fs/cgroup/<controller>`) and v2 (the
//! unified hierarchy at `/sys/fs/cgroup`) are both handled; the sandbox's cgroup is made a
//! child of the runner's current cgroup. A hierarchy that is missing or not writable is
//! skipped and the skip is reported, never silent; any other failure is an error.
//!
//! Where the runner cannot create a cgroup but already runs in one whose limit is at most
//! the spec's (a container engine's `--pids-limit` and `--memory`, on a cgroup mounted
//! read-only inside the container), that enclosing cgroup is reported as the limit
//! ([`CgroupStatus::Enclosing`]): it bounds the whole sandbox and nothing inside can raise it.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;
use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, statfs};
use nix::unistd::{UnlinkatFlags, unlinkat, write};
use serde::Serialize;

use super::error::{AtStep, SandboxError, Step};
use crate::spec::Limits;

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// What became of one controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum CgroupStatus {
    /// The sandbox runs in this cgroup, with its limit set.
    Applied {
        /// The cgroup directory on the host.
        path: PathBuf,
    },
    /// No cgroup of its own, but the runner's current cgroup (which it cannot write, so
    /// neither can anything it starts) has a limit at most the spec's: the sandbox, and
    /// everything else in that cgroup, stays under it.
    Enclosing {
        /// The enclosing cgroup directory, as the runner sees it.
        path: PathBuf,
        /// Its limit (`pids.max`, or the memory limit in bytes).
        limit: u64,
    },
    /// Not used; the rlimits still apply.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// The cgroup part of the sandbox report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupReport {
    /// The `pids` controller (`maxProcesses`).
    pub pids: CgroupStatus,
    /// The `memory` controller (`memoryBytes` for the whole sandbox).
    pub memory: CgroupStatus,
}

/// A created cgroup: what PID 1 writes to join it, and what the supervisor removes.
#[derive(Debug)]
pub(crate) struct Cgroup {
    path: PathBuf,
    procs: OwnedFd,
    parent: OwnedFd,
    name: String,
}

impl Cgroup {
    /// The descriptors held for the join and the removal.
    pub(crate) fn raw_fds(&self) -> [RawFd; 2] {
        [self.procs.as_raw_fd(), self.parent.as_raw_fd()]
    }
}

/// The created cgroups and the report.
#[derive(Debug)]
pub(crate) struct Cgroups {
    pub(crate) report: CgroupReport,
    pub(crate) created: Vec<Cgroup>,
}

enum Hierarchy {
    V1,
    V2,
}

/// Creates `codebutler-<pid>` cgroups with the limits (step "create_cgroup").
pub(crate) fn create(limits: &Limits, pid: u32) -> Result<Cgroups, SandboxError> {
    let name = format!("codebutler-{pid}");
    let hierarchy = match statfs(CGROUP_ROOT) {
        Ok(st) if st.filesystem_type() == CGROUP2_SUPER_MAGIC => Some(Hierarchy::V2),
        Ok(_) => Some(Hierarchy::V1),
        Err(_) => None,
    };
    let own = fs::read_to_string("/proc/self/cgroup")
        .at(Step::CreateCgroup, || "read /proc/self/cgroup".into())?;
    let mut created = Vec::new();
    let mut statuses = Vec::new();
    for (controller, wanted, files) in [
        (
            "pids",
            limits.max_processes,
            vec![("pids.max", limits.max_processes.to_string())],
        ),
        (
            "memory",
            limits.memory_bytes,
            vec![
                ("memory.limit_in_bytes", limits.memory_bytes.to_string()),
                ("memory.max", limits.memory_bytes.to_string()),
            ],
        ),
    ] {
        let result = match hierarchy {
            None => Ok(Made::Skipped(format!("{CGROUP_ROOT} is not mounted"))),
            Some(Hierarchy::V1) => create_v1(controller, &own, &name, &files),
            Some(Hierarchy::V2) => create_v2(controller, &own, &name, &files),
        };
        match result {
            Ok(Made::Cgroup(cg)) => {
                statuses.push(CgroupStatus::Applied {
                    path: cg.path.clone(),
                });
                created.push(cg);
            }
            Ok(Made::Skipped(reason)) => statuses.push(
                match enclosing(
                    Path::new(CGROUP_ROOT),
                    hierarchy.as_ref(),
                    controller,
                    &own,
                    &files,
                    wanted,
                ) {
                    Some((path, limit)) => CgroupStatus::Enclosing { path, limit },
                    None => CgroupStatus::Skipped { reason },
                },
            ),
            Err(e) => {
                cleanup(&created);
                return Err(e);
            }
        }
    }
    let memory = statuses.pop().unwrap_or(CgroupStatus::Skipped {
        reason: "not attempted".into(),
    });
    let pids = statuses.pop().unwrap_or(CgroupStatus::Skipped {
        reason: "not attempted".into(),
    });
    Ok(Cgroups {
        report: CgroupReport { pids, memory },
        created,
    })
}

/// What trying one controller's cgroup came to: made, or skipped (the reason goes into
/// the report); `Err` is a failure, fatal to the sandbox.
enum Made {
    Cgroup(Cgroup),
    Skipped(String),
}

type Attempt = Result<Made, SandboxError>;

/// The runner's current cgroup for `controller` under `root` and its limit, when one of the
/// limit `files` there holds a number at most `wanted` ("max" or a larger limit does not
/// count).
fn enclosing(
    root: &Path,
    hierarchy: Option<&Hierarchy>,
    controller: &str,
    own: &str,
    files: &[(&str, String)],
    wanted: u64,
) -> Option<(PathBuf, u64)> {
    let base = match hierarchy? {
        Hierarchy::V1 => root
            .join(controller)
            .join(v1_path(own, controller)?.trim_start_matches('/')),
        Hierarchy::V2 => root.join(
            own.lines()
                .find_map(|l| l.strip_prefix("0::"))?
                .trim_start_matches('/'),
        ),
    };
    files.iter().find_map(|(file, _)| {
        let limit = fs::read_to_string(base.join(file))
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()?;
        (limit <= wanted).then(|| (base.clone(), limit))
    })
}

/// The runner's cgroup path in the v1 hierarchy of `controller`, from `/proc/self/cgroup`.
fn v1_path(own: &str, controller: &str) -> Option<String> {
    own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_owned())
    })
}

fn create_v1(controller: &str, own: &str, name: &str, files: &[(&str, String)]) -> Attempt {
    let mount = Path::new(CGROUP_ROOT).join(controller);
    match statfs(&mount) {
        Ok(st) if st.filesystem_type() == CGROUP_SUPER_MAGIC => {}
        _ => {
            return Ok(Made::Skipped(format!(
                "no cgroup v1 hierarchy at {}",
                mount.display()
            )));
        }
    }
    let Some(current) = v1_path(own, controller) else {
        return Ok(Made::Skipped(format!(
            "/proc/self/cgroup has no {controller} line"
        )));
    };
    let base = mount.join(current.trim_start_matches('/'));
    make(&base, name, files)
}

fn create_v2(controller: &str, own: &str, name: &str, files: &[(&str, String)]) -> Attempt {
    let Some(current) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Ok(Made::Skipped(
            "/proc/self/cgroup has no unified (0::) line".into(),
        ));
    };
    let base = Path::new(CGROUP_ROOT).join(current.trim_start_matches('/'));
    let subtree = base.join("cgroup.subtree_control");
    // Unreadable counts as not enabled: enabling it below then fails and says why.
    let enabled = fs::read_to_string(&subtree).ok();
    let enabled = enabled.as_deref().unwrap_or("");
    if !enabled.split_whitespace().any(|c| c == controller) {
        let controllers = base.join("cgroup.controllers");
        let available = match fs::read_to_string(&controllers) {
            Ok(available) => available,
            Err(e) => {
                return Ok(Made::Skipped(format!(
                    "cannot read {}: {e}",
                    controllers.display()
                )));
            }
        };
        if !available.split_whitespace().any(|c| c == controller) {
            return Ok(Made::Skipped(format!(
                "the {controller} controller is not available in {}",
                base.display()
            )));
        }
        if let Err(e) = fs::write(&subtree, format!("+{controller}")) {
            return Ok(Made::Skipped(format!(
                "cannot enable {controller} in {}: {e}",
                subtree.display()
            )));
        }
    }
    make(&base, name, files)
}

fn make(base: &Path, name: &str, files: &[(&str, String)]) -> Attempt {
    let dir = base.join(name);
    match fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // A stale cgroup of an earlier runner with the same pid: it must be empty.
            fs::remove_dir(&dir).at(Step::CreateCgroup, || {
                format!("remove stale cgroup {}", dir.display())
            })?;
            fs::create_dir(&dir).at(Step::CreateCgroup, || format!("mkdir {}", dir.display()))?;
        }
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT)
            ) =>
        {
            return Ok(Made::Skipped(format!(
                "cannot create {}: {e} (cgroup not writable)",
                dir.display()
            )));
        }
        Err(e) => {
            return Err(SandboxError::new(
                Step::CreateCgroup,
                format!("mkdir {}: {e}", dir.display()),
            ));
        }
    }
    let result = (|| {
        let mut wrote = false;
        for (file, value) in files {
            let path = dir.join(file);
            if path.exists() {
                fs::write(&path, value).at(Step::CreateCgroup, || {
                    format!("write {value} to {}", path.display())
                })?;
                wrote = true;
            }
        }
        if !wrote {
            return Err(SandboxError::new(
                Step::CreateCgroup,
                format!("{} has none of the limit files {files:?}", dir.display()),
            ));
        }
        let procs = open(
            &dir.join("cgroup.procs"),
            OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .at(Step::CreateCgroup, || {
            format!("open {}/cgroup.procs", dir.display())
        })?;
        let parent = open(
            base,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .at(Step::CreateCgroup, || format!("open {}", base.display()))?;
        Ok(Cgroup {
            path: dir.clone(),
            procs,
            parent,
            name: name.to_owned(),
        })
    })();
    result.map(Made::Cgroup).map_err(|mut e| {
        // The step's error comes first; a cgroup left behind is said with it.
        if let Err(left) = fs::remove_dir(&dir) {
            e.detail
                .push_str(&format!("; and remove {}: {left}", dir.display()));
        }
        e
    })
}

/// Moves the calling process into every created cgroup (writing `0` means "myself").
pub(crate) fn join(created: &[Cgroup]) -> Result<(), SandboxError> {
    for cg in created {
        write(&cg.procs, b"0").at(Step::JoinCgroup, || format!("join {}", cg.path.display()))?;
    }
    Ok(())
}

/// Removes the cgroups once empty; returns what could not be removed.
pub(crate) fn cleanup(created: &[Cgroup]) -> Vec<String> {
    let mut problems = Vec::new();
    for cg in created {
        let mut attempt = 0;
        loop {
            match unlinkat(&cg.parent, cg.name.as_str(), UnlinkatFlags::RemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => break,
                Err(Errno::EBUSY) if attempt < 100 => {
                    attempt += 1;
                    thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    problems.push(format!("remove cgroup {}: {e}", cg.path.display()));
                    break;
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pids(wanted: u64) -> Vec<(&'static str, String)> {
        vec![("pids.max", wanted.to_string())]
    }

    #[test]
    fn an_enclosing_limit_counts_only_when_at_most_the_specs() {
        let root = tempfile::tempdir().unwrap();
        // cgroup v1 in a private cgroup namespace: the runner's cgroup is the mount's root.
        let v1 = root.path().join("pids");
        fs::create_dir_all(&v1).unwrap();
        let own_v1 = "8:pids:/\n4:memory:/\n";
        let found = |own: &str, h: Hierarchy, wanted: u64| {
            enclosing(root.path(), Some(&h), "pids", own, &pids(wanted), wanted)
        };
        fs::write(v1.join("pids.max"), "256\n").unwrap();
        assert_eq!(found(own_v1, Hierarchy::V1, 256), Some((v1.clone(), 256)));
        assert_eq!(found(own_v1, Hierarchy::V1, 512), Some((v1.clone(), 256)));
        assert_eq!(
            found(own_v1, Hierarchy::V1, 128),
            None,
            "looser than the spec"
        );
        fs::write(v1.join("pids.max"), "max\n").unwrap();
        assert_eq!(found(own_v1, Hierarchy::V1, 256), None, "no limit at all");
        // A cgroup path that is not under this root (another namespace's view) has no file.
        fs::write(v1.join("pids.max"), "64\n").unwrap();
        assert_eq!(found("8:pids:/libpod_parent/x\n", Hierarchy::V1, 256), None);
        assert_eq!(
            found("4:memory:/\n", Hierarchy::V1, 256),
            None,
            "no pids line"
        );
        // cgroup v2: the unified line.
        let v2 = root.path().join("box");
        fs::create_dir_all(&v2).unwrap();
        fs::write(v2.join("pids.max"), "100\n").unwrap();
        assert_eq!(found("0::/box\n", Hierarchy::V2, 256), Some((v2, 100)));
        assert_eq!(
            enclosing(root.path(), None, "pids", "0::/box\n", &pids(256), 256),
            None,
            "no cgroup filesystem"
        );
    }
}
