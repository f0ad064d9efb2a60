//! The sandbox as plain data: the ordered mount operations that build the new root and the
//! Landlock rules that match them, computed from a [`HostLayout`] by pure functions (tested
//! by equality below; applied by [`super::mounts`] and [`super::landlock`]).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;

use super::resolve::{HostEntry, HostLayout, NodeKind};
use crate::spec::{ATTACHMENTS_DIR, HOME_INSIDE, SandboxSpec};

/// Size of the (read-only once populated) tmpfs holding `/dev`'s nodes and symlinks.
pub const DEV_TMPFS_BYTES: u64 = 64 << 10;
/// Size of `/dev/shm` (POSIX shared memory; charged to the sandbox's memory cgroup too).
pub const SHM_TMPFS_BYTES: u64 = 64 << 20;
/// Size of the empty tmpfs hiding a secret directory.
pub const HIDE_TMPFS_BYTES: u64 = 4 << 10;
/// Entries of the new `/proc` re-bound read-only over themselves (as bubblewrap does): they
/// are owned by the host's uid 0, which the sandbox's uid 0 is when the runner runs as root.
pub const PROC_READ_ONLY: &[(&str, NodeKind)] = &[
    ("/proc/sys", NodeKind::Dir),
    ("/proc/sysrq-trigger", NodeKind::File),
    ("/proc/irq", NodeKind::Dir),
    ("/proc/bus", NodeKind::Dir),
    ("/proc/fs", NodeKind::Dir),
];

/// Where a bind mount's source is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A canonical host path (reached under the old root while the new one is built).
    Host(PathBuf),
    /// A path of the new root itself (to re-bind it with other flags).
    Sandbox(PathBuf),
    /// An empty, read-only file of the staging tmpfs (hides a secret file).
    EmptyFile,
}

/// One operation of the new root's construction. Targets are paths as seen inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountOp {
    /// Bind `source` at `target` (created as `kind` if missing), then remount the bind with
    /// exactly `flags` (so `MS_RDONLY` here means read-only).
    Bind {
        /// What to bind.
        source: Source,
        /// Where, inside.
        target: PathBuf,
        /// Directory or file (decides how a missing target is created).
        kind: NodeKind,
        /// The flags of the bind remount.
        flags: MsFlags,
        /// Skip silently when the source does not exist (used only for `/proc` entries that
        /// not every kernel has).
        optional: bool,
    },
    /// Bind the host directory `source` at `name` in the directory `parent` (inside), a
    /// directory the sandboxed process can write, so never through a link: whatever is at
    /// `name` is resolved without following symlinks, a symlink or file there is replaced by
    /// an empty directory, a directory with content is refused. Then the bind is remounted
    /// with exactly `flags`.
    BindInto {
        /// The canonical host directory.
        source: PathBuf,
        /// The directory, inside, that holds the mount point.
        parent: PathBuf,
        /// The mount point's name in `parent` (one plain component).
        name: OsString,
        /// The flags of the bind remount.
        flags: MsFlags,
    },
    /// A fresh tmpfs.
    Tmpfs {
        /// Where, inside.
        target: PathBuf,
        /// `size=`.
        size_bytes: u64,
        /// `mode=` of its root.
        mode: u32,
        /// Mount flags.
        flags: MsFlags,
    },
    /// A directory (parents included) with `mode`.
    Mkdir {
        /// Where, inside.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A symlink at `path` pointing to `points_to` (kept verbatim, relative or absolute).
    Symlink {
        /// Where, inside.
        path: PathBuf,
        /// The link's content.
        points_to: PathBuf,
    },
    /// A new procfs (of the sandbox's PID namespace).
    Proc {
        /// Where, inside.
        target: PathBuf,
    },
    /// Remount an existing mount of the new root with `flags` (bind remount: per-mount flags).
    Remount {
        /// Where, inside.
        target: PathBuf,
        /// The new flags.
        flags: MsFlags,
    },
}

impl fmt::Display for MountOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ro = |flags: &MsFlags| {
            if flags.contains(MsFlags::MS_RDONLY) {
                "read-only"
            } else {
                "read-write"
            }
        };
        match self {
            MountOp::Bind {
                source,
                target,
                flags,
                ..
            } => {
                let src = match source {
                    Source::Host(p) => format!("host {}", p.display()),
                    Source::Sandbox(p) => p.display().to_string(),
                    Source::EmptyFile => "an empty file".to_owned(),
                };
                write!(f, "bind {src} at {} ({})", target.display(), ro(flags))
            }
            MountOp::BindInto {
                source,
                parent,
                name,
                flags,
            } => write!(
                f,
                "bind host {} at {} ({}, no links)",
                source.display(),
                parent.join(name).display(),
                ro(flags)
            ),
            MountOp::Tmpfs {
                target, size_bytes, ..
            } => write!(f, "tmpfs at {} (size {size_bytes})", target.display()),
            MountOp::Mkdir { path, mode } => write!(f, "mkdir {} (mode {mode:o})", path.display()),
            MountOp::Symlink { path, points_to } => {
                write!(f, "symlink {} -> {}", path.display(), points_to.display())
            }
            MountOp::Proc { target } => write!(f, "proc at {}", target.display()),
            MountOp::Remount { target, flags } => {
                write!(f, "remount {} ({})", target.display(), ro(flags))
            }
        }
    }
}

const RO: MsFlags = MsFlags::MS_RDONLY
    .union(MsFlags::MS_NOSUID)
    .union(MsFlags::MS_NODEV);
const RW: MsFlags = MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV);
const NOEXEC_RO: MsFlags = RO.union(MsFlags::MS_NOEXEC);

/// The ordered mount operations building the new root (step 4 of [`super`]).
///
/// Order matters where targets nest: the private `/tmp` comes before anything bound under
/// it (git metadata of a repository in `/tmp`), the read-only paths before the secrets
/// hidden inside them, the worktree before the read-only binds over its `.git` and its
/// attachments directory, and `/proc` before the read-only binds over its entries.
pub fn plan_mounts(spec: &SandboxSpec, layout: &HostLayout) -> Vec<MountOp> {
    let locked = |p: &Path| {
        layout
            .locked_flags
            .get(p)
            .copied()
            .unwrap_or(MsFlags::empty())
    };
    let mut ops = Vec::new();

    for (path, entry) in &layout.system {
        match entry {
            HostEntry::Dir => ops.push(MountOp::Bind {
                source: Source::Host(path.clone()),
                target: path.clone(),
                kind: NodeKind::Dir,
                flags: RO | locked(path),
                optional: false,
            }),
            HostEntry::Symlink(to) => ops.push(MountOp::Symlink {
                path: path.clone(),
                points_to: to.clone(),
            }),
        }
    }

    ops.push(MountOp::Tmpfs {
        target: PathBuf::from("/tmp"),
        size_bytes: spec.limits.tmp_bytes,
        mode: 0o1777,
        flags: RW,
    });
    ops.push(MountOp::Mkdir {
        path: PathBuf::from(HOME_INSIDE),
        mode: 0o700,
    });

    for (path, kind) in &layout.read_only {
        ops.push(MountOp::Bind {
            source: Source::Host(path.clone()),
            target: path.clone(),
            kind: *kind,
            flags: RO | locked(path),
            optional: false,
        });
    }

    for (path, kind) in &layout.secrets {
        ops.push(match kind {
            NodeKind::File => MountOp::Bind {
                source: Source::EmptyFile,
                target: path.clone(),
                kind: NodeKind::File,
                flags: NOEXEC_RO,
                optional: false,
            },
            NodeKind::Dir => MountOp::Tmpfs {
                target: path.clone(),
                size_bytes: HIDE_TMPFS_BYTES,
                mode: 0o755,
                flags: NOEXEC_RO,
            },
        });
    }

    ops.push(MountOp::Bind {
        source: Source::Host(layout.worktree.clone()),
        target: spec.mount_point.clone(),
        kind: NodeKind::Dir,
        flags: RW | locked(&layout.worktree),
        optional: false,
    });
    if let Some(kind) = layout.dot_git {
        let dot_git = layout.worktree.join(".git");
        ops.push(MountOp::Bind {
            flags: RO | locked(&dot_git),
            source: Source::Host(dot_git),
            target: spec.mount_point.join(".git"),
            kind,
            optional: false,
        });
    }
    if let Some(attachments) = &layout.attachments {
        ops.push(MountOp::BindInto {
            flags: NOEXEC_RO | locked(attachments),
            source: attachments.clone(),
            parent: spec.mount_point.clone(),
            name: OsString::from(ATTACHMENTS_DIR),
        });
    }
    for dir in &layout.git_metadata {
        ops.push(MountOp::Bind {
            source: Source::Host(dir.clone()),
            target: dir.clone(),
            kind: NodeKind::Dir,
            flags: RO | locked(dir),
            optional: false,
        });
    }

    let dev_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    ops.push(MountOp::Tmpfs {
        target: PathBuf::from("/dev"),
        size_bytes: DEV_TMPFS_BYTES,
        mode: 0o755,
        flags: dev_flags,
    });
    for dev in &layout.devices {
        ops.push(MountOp::Bind {
            source: Source::Host(dev.clone()),
            target: dev.clone(),
            kind: NodeKind::File,
            // No nodev: these are the devices. Writable: /dev/null must be.
            flags: MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | locked(dev),
            optional: false,
        });
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        ops.push(MountOp::Symlink {
            path: Path::new("/dev").join(name),
            points_to: PathBuf::from(to),
        });
    }
    ops.push(MountOp::Tmpfs {
        target: PathBuf::from("/dev/shm"),
        size_bytes: SHM_TMPFS_BYTES,
        mode: 0o1777,
        flags: dev_flags,
    });
    ops.push(MountOp::Remount {
        target: PathBuf::from("/dev"),
        flags: dev_flags | MsFlags::MS_RDONLY,
    });

    ops.push(MountOp::Proc {
        target: PathBuf::from("/proc"),
    });
    for (path, kind) in PROC_READ_ONLY {
        ops.push(MountOp::Bind {
            source: Source::Sandbox(PathBuf::from(path)),
            target: PathBuf::from(path),
            kind: *kind,
            flags: NOEXEC_RO,
            optional: true,
        });
    }
    ops
}

/// The Landlock access class of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsAccess {
    /// Read, list and execute.
    ReadOnly,
    /// Everything but creating device nodes.
    ReadWrite,
    /// Read, write, truncate and device ioctls on one device file.
    Device,
}

/// One Landlock rule: `access` to everything beneath `path` (a path inside the new root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockRule {
    /// The path the rule is anchored at.
    pub path: PathBuf,
    /// Directory or file (files cannot carry directory-only rights).
    pub kind: NodeKind,
    /// What is allowed beneath it.
    pub access: FsAccess,
}

/// The Landlock rules matching [`plan_mounts`] (step 8): the system, the read-only paths,
/// the git metadata, `/proc` and `/dev` read-only; the worktree, `/tmp` and `/dev/shm`
/// read-write; the character devices read-write. Nothing else, not even listing `/`.
///
/// Landlock cannot take rights away below a directory it grants (the git metadata of a
/// repository under `/tmp`, `.git` and `.codebutler-attachments` in the worktree): the
/// read-only mounts protect those.
pub fn landlock_rules(spec: &SandboxSpec, layout: &HostLayout) -> Vec<LandlockRule> {
    let rule = |path: &Path, kind, access| LandlockRule {
        path: path.to_path_buf(),
        kind,
        access,
    };
    let mut rules = Vec::new();
    for (path, entry) in &layout.system {
        if *entry == HostEntry::Dir {
            rules.push(rule(path, NodeKind::Dir, FsAccess::ReadOnly));
        }
    }
    for (path, kind) in &layout.read_only {
        rules.push(rule(path, *kind, FsAccess::ReadOnly));
    }
    for dir in &layout.git_metadata {
        rules.push(rule(dir, NodeKind::Dir, FsAccess::ReadOnly));
    }
    rules.push(rule(Path::new("/proc"), NodeKind::Dir, FsAccess::ReadOnly));
    rules.push(rule(Path::new("/dev"), NodeKind::Dir, FsAccess::ReadOnly));
    for dev in &layout.devices {
        rules.push(rule(dev, NodeKind::File, FsAccess::Device));
    }
    rules.push(rule(&spec.mount_point, NodeKind::Dir, FsAccess::ReadWrite));
    rules.push(rule(Path::new("/tmp"), NodeKind::Dir, FsAccess::ReadWrite));
    rules.push(rule(
        Path::new("/dev/shm"),
        NodeKind::Dir,
        FsAccess::ReadWrite,
    ));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::tests::layout;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn ro_bind(path: &str, kind: NodeKind) -> MountOp {
        MountOp::Bind {
            source: Source::Host(p(path)),
            target: p(path),
            kind,
            flags: RO,
            optional: false,
        }
    }

    #[test]
    fn mount_plan_for_a_git_worktree() {
        let mut spec = SandboxSpec::for_worktree("/srv/repo/.codebutler/branches/t");
        spec.limits.tmp_bytes = 1000;
        let dev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        let expected = vec![
            ro_bind("/usr", NodeKind::Dir),
            MountOp::Symlink {
                path: p("/bin"),
                points_to: p("usr/bin"),
            },
            ro_bind("/etc", NodeKind::Dir),
            MountOp::Tmpfs {
                target: p("/tmp"),
                size_bytes: 1000,
                mode: 0o1777,
                flags: RW,
            },
            MountOp::Mkdir {
                path: p("/tmp/home"),
                mode: 0o700,
            },
            ro_bind("/root/.cargo", NodeKind::Dir),
            MountOp::Bind {
                source: Source::EmptyFile,
                target: p("/etc/shadow"),
                kind: NodeKind::File,
                flags: NOEXEC_RO,
                optional: false,
            },
            MountOp::Tmpfs {
                target: p("/etc/ssh"),
                size_bytes: HIDE_TMPFS_BYTES,
                mode: 0o755,
                flags: NOEXEC_RO,
            },
            MountOp::Bind {
                source: Source::Host(p("/srv/repo/.codebutler/branches/t")),
                target: p("/workspace"),
                kind: NodeKind::Dir,
                flags: RW,
                optional: false,
            },
            MountOp::Bind {
                source: Source::Host(p("/srv/repo/.codebutler/branches/t/.git")),
                target: p("/workspace/.git"),
                kind: NodeKind::File,
                flags: RO,
                optional: false,
            },
            ro_bind("/srv/repo/.git", NodeKind::Dir),
            MountOp::Tmpfs {
                target: p("/dev"),
                size_bytes: DEV_TMPFS_BYTES,
                mode: 0o755,
                flags: dev,
            },
            MountOp::Bind {
                source: Source::Host(p("/dev/null")),
                target: p("/dev/null"),
                kind: NodeKind::File,
                flags: MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                optional: false,
            },
            MountOp::Bind {
                source: Source::Host(p("/dev/urandom")),
                target: p("/dev/urandom"),
                kind: NodeKind::File,
                flags: MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                optional: false,
            },
            MountOp::Symlink {
                path: p("/dev/fd"),
                points_to: p("/proc/self/fd"),
            },
            MountOp::Symlink {
                path: p("/dev/stdin"),
                points_to: p("/proc/self/fd/0"),
            },
            MountOp::Symlink {
                path: p("/dev/stdout"),
                points_to: p("/proc/self/fd/1"),
            },
            MountOp::Symlink {
                path: p("/dev/stderr"),
                points_to: p("/proc/self/fd/2"),
            },
            MountOp::Tmpfs {
                target: p("/dev/shm"),
                size_bytes: SHM_TMPFS_BYTES,
                mode: 0o1777,
                flags: dev,
            },
            MountOp::Remount {
                target: p("/dev"),
                flags: dev | MsFlags::MS_RDONLY,
            },
            MountOp::Proc { target: p("/proc") },
        ];
        let plan = plan_mounts(&spec, &layout());
        let (head, proc_binds) = plan.split_at(expected.len());
        assert_eq!(head, expected.as_slice());
        assert_eq!(proc_binds.len(), PROC_READ_ONLY.len());
        for op in proc_binds {
            let MountOp::Bind {
                source: Source::Sandbox(src),
                target,
                flags,
                optional: true,
                ..
            } = op
            else {
                panic!("unexpected {op:?}");
            };
            assert_eq!(src, target);
            assert!(flags.contains(MsFlags::MS_RDONLY));
        }
    }

    #[test]
    fn attachments_are_bound_read_only_into_the_worktree_after_it() {
        let spec = SandboxSpec::for_worktree("/w");
        let mut l = layout();
        l.attachments = Some(p("/srv/repo/.codebutler/attachments/C1-1.1"));
        l.locked_flags.insert(
            p("/srv/repo/.codebutler/attachments/C1-1.1"),
            MsFlags::MS_NOATIME,
        );
        let plan = plan_mounts(&spec, &l);
        let at = |want: &dyn Fn(&MountOp) -> bool| plan.iter().position(want).unwrap();
        let bind = at(&|op| matches!(op, MountOp::BindInto { .. }));
        assert_eq!(
            plan[bind],
            MountOp::BindInto {
                source: p("/srv/repo/.codebutler/attachments/C1-1.1"),
                parent: p("/workspace"),
                name: OsString::from(".codebutler-attachments"),
                flags: NOEXEC_RO | MsFlags::MS_NOATIME,
            }
        );
        let worktree = at(
            &|op| matches!(op, MountOp::Bind { target, .. } if target == Path::new("/workspace")),
        );
        assert!(worktree < bind);
        assert_eq!(
            plan[bind].to_string(),
            "bind host /srv/repo/.codebutler/attachments/C1-1.1 at \
             /workspace/.codebutler-attachments (read-only, no links)"
        );
        // No attachments: no such mount.
        assert!(
            !plan_mounts(&spec, &layout())
                .iter()
                .any(|op| matches!(op, MountOp::BindInto { .. }))
        );
    }

    #[test]
    fn locked_host_flags_are_repeated_on_the_remount() {
        let spec = SandboxSpec::for_worktree("/w");
        let mut l = layout();
        l.locked_flags
            .insert(p("/usr"), MsFlags::MS_NOATIME | MsFlags::MS_NOEXEC);
        let plan = plan_mounts(&spec, &l);
        assert_eq!(
            plan[0],
            MountOp::Bind {
                source: Source::Host(p("/usr")),
                target: p("/usr"),
                kind: NodeKind::Dir,
                flags: RO | MsFlags::MS_NOATIME | MsFlags::MS_NOEXEC,
                optional: false,
            }
        );
    }

    #[test]
    fn plain_directory_worktree_has_no_git_binds() {
        let spec = SandboxSpec::for_worktree("/w");
        let mut l = layout();
        l.dot_git = None;
        l.git_metadata.clear();
        let plan = plan_mounts(&spec, &l);
        assert!(!plan.iter().any(|op| matches!(op,
            MountOp::Bind { target, .. } if target.ends_with(".git"))));
    }

    #[test]
    fn landlock_rules_match_the_mounts() {
        let spec = SandboxSpec::for_worktree("/w");
        let rules = landlock_rules(&spec, &layout());
        let got: Vec<(&str, FsAccess)> = rules
            .iter()
            .map(|r| (r.path.to_str().unwrap(), r.access))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/usr", FsAccess::ReadOnly),
                ("/etc", FsAccess::ReadOnly),
                ("/root/.cargo", FsAccess::ReadOnly),
                ("/srv/repo/.git", FsAccess::ReadOnly),
                ("/proc", FsAccess::ReadOnly),
                ("/dev", FsAccess::ReadOnly),
                ("/dev/null", FsAccess::Device),
                ("/dev/urandom", FsAccess::Device),
                ("/workspace", FsAccess::ReadWrite),
                ("/tmp", FsAccess::ReadWrite),
                ("/dev/shm", FsAccess::ReadWrite),
            ]
        );
        // Symlinked system paths get no rule of their own (their target has one).
        assert!(!rules.iter().any(|r| r.path == p("/bin")));
    }

    #[test]
    fn ops_describe_themselves() {
        assert_eq!(
            ro_bind("/usr", NodeKind::Dir).to_string(),
            "bind host /usr at /usr (read-only)"
        );
    }
}
