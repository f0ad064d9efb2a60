//! Step 4: build the new root from the [`MountOp`] plan, then `pivot_root` into it.
//!
//! Done as bubblewrap does it, so that no directory is created on the host: a staging
//! tmpfs is mounted over `/tmp` *in the new mount namespace only*, the process pivots into
//! it with the host's root moved to `/oldroot`, the new root is assembled in `/newroot`
//! from sources under `/oldroot` (`/oldroot/tmp` is the host's real `/tmp`: the staging
//! mount left it when it became the root), the old root is detached, and
//! `pivot_root(".", ".")` in `/newroot` switches to it for good.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::unistd::{chdir, pivot_root};

use super::error::{AtStep, SandboxError, Step};
use super::plan::{MountOp, Source};
use super::resolve::NodeKind;

const STAGING: &str = "/tmp";
const STAGING_OPTIONS: &str = "mode=0755,size=4m";
const OLD_ROOT: &str = "/oldroot";
const NEW_ROOT: &str = "/newroot";
const EMPTY_FILE: &str = "/empty";

const NONE: Option<&str> = None;

fn under(prefix: &str, p: &Path) -> PathBuf {
    Path::new(prefix).join(p.strip_prefix("/").unwrap_or(p))
}

/// Builds the root of `plan`, pivots into it, makes it read-only and enters `mount_point`.
pub(crate) fn build_root(plan: &[MountOp], mount_point: &Path) -> Result<(), SandboxError> {
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE)
        .at(Step::MakeMountsPrivate, || "mount --make-rprivate /".into())?;

    prepare_staging()?;
    for op in plan {
        apply(op).map_err(|e| SandboxError::new(Step::Mount, format!("{op}: {}", e.detail)))?;
    }

    umount2(OLD_ROOT, MntFlags::MNT_DETACH)
        .at(Step::UnmountOldRoot, || format!("umount2 {OLD_ROOT}"))?;
    chdir(NEW_ROOT).at(Step::PivotRoot, || format!("chdir {NEW_ROOT}"))?;
    pivot_root(".", ".").at(Step::PivotRoot, || format!("pivot_root {NEW_ROOT}"))?;
    // The staging root now sits on top of the new root: detach it.
    umount2(".", MntFlags::MNT_DETACH).at(Step::PivotRoot, || "umount2 the staging root".into())?;
    chdir("/").at(Step::PivotRoot, || "chdir /".into())?;

    mount(
        NONE,
        "/",
        NONE,
        MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        NONE,
    )
    .at(Step::RemountRootReadOnly, || "remount / read-only".into())?;

    chdir(mount_point).at(Step::ChdirMountPoint, || {
        format!("chdir {}", mount_point.display())
    })
}

fn prepare_staging() -> Result<(), SandboxError> {
    let step = Step::PrepareStaging;
    mount(
        Some("tmpfs"),
        STAGING,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(STAGING_OPTIONS),
    )
    .at(step, || format!("mount staging tmpfs on {STAGING}"))?;
    chdir(STAGING).at(step, || format!("chdir {STAGING}"))?;
    for dir in ["newroot", "oldroot"] {
        fs::create_dir(dir).at(step, || format!("mkdir {STAGING}/{dir}"))?;
    }
    let empty = Path::new(STAGING).join(EMPTY_FILE.trim_start_matches('/'));
    fs::write(&empty, b"").at(step, || format!("create {}", empty.display()))?;
    fs::set_permissions(&empty, fs::Permissions::from_mode(0o444))
        .at(step, || format!("chmod {}", empty.display()))?;
    pivot_root(".", "oldroot").at(step, || {
        format!("pivot_root {STAGING} (old root to {OLD_ROOT})")
    })?;
    chdir("/").at(step, || "chdir /".into())?;
    mount(
        Some(NEW_ROOT),
        NEW_ROOT,
        NONE,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        NONE,
    )
    .at(step, || format!("bind {NEW_ROOT} on itself"))?;
    Ok(())
}

fn create_target(target: &Path, kind: NodeKind) -> Result<(), SandboxError> {
    let step = Step::Mount;
    match kind {
        NodeKind::Dir => {
            fs::create_dir_all(target).at(step, || format!("mkdir -p {}", target.display()))
        }
        NodeKind::File => {
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent).at(step, || format!("mkdir -p {}", parent.display()))?;
            }
            if fs::symlink_metadata(target).is_err() {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(target)
                    .at(step, || format!("create {}", target.display()))?;
            }
            Ok(())
        }
    }
}

fn apply(op: &MountOp) -> Result<(), SandboxError> {
    let step = Step::Mount;
    match op {
        MountOp::Bind {
            source,
            target,
            kind,
            flags,
            optional,
        } => {
            let src = match source {
                Source::Host(p) => under(OLD_ROOT, p),
                Source::Sandbox(p) => under(NEW_ROOT, p),
                Source::EmptyFile => PathBuf::from(EMPTY_FILE),
            };
            if *optional && fs::symlink_metadata(&src).is_err() {
                return Ok(());
            }
            let dst = under(NEW_ROOT, target);
            create_target(&dst, *kind)?;
            mount(Some(&src), &dst, NONE, MsFlags::MS_BIND, NONE).at(step, || {
                format!("mount --bind {} {}", src.display(), dst.display())
            })?;
            mount(
                NONE,
                &dst,
                NONE,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | *flags,
                NONE,
            )
            .at(step, || format!("remount {} with {flags:?}", dst.display()))
        }
        MountOp::Tmpfs {
            target,
            size_bytes,
            mode,
            flags,
        } => {
            let dst = under(NEW_ROOT, target);
            create_target(&dst, NodeKind::Dir)?;
            let options = format!("size={size_bytes},mode={mode:o}");
            mount(
                Some("tmpfs"),
                &dst,
                Some("tmpfs"),
                *flags,
                Some(options.as_str()),
            )
            .at(step, || {
                format!("mount tmpfs {options} on {}", dst.display())
            })
        }
        MountOp::Mkdir { path, mode } => {
            let dst = under(NEW_ROOT, path);
            fs::create_dir_all(&dst).at(step, || format!("mkdir -p {}", dst.display()))?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(*mode))
                .at(step, || format!("chmod {mode:o} {}", dst.display()))
        }
        MountOp::Symlink { path, points_to } => {
            let dst = under(NEW_ROOT, path);
            if let Some(parent) = dst.parent() {
                fs::create_dir_all(parent).at(step, || format!("mkdir -p {}", parent.display()))?;
            }
            symlink(points_to, &dst).at(step, || {
                format!("ln -s {} {}", points_to.display(), dst.display())
            })
        }
        MountOp::Proc { target } => {
            let dst = under(NEW_ROOT, target);
            create_target(&dst, NodeKind::Dir)?;
            mount(
                Some("proc"),
                &dst,
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                NONE,
            )
            .at(step, || format!("mount proc on {}", dst.display()))
        }
        MountOp::Remount { target, flags } => {
            let dst = under(NEW_ROOT, target);
            mount(
                NONE,
                &dst,
                NONE,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | *flags,
                NONE,
            )
            .at(step, || format!("remount {} with {flags:?}", dst.display()))
        }
    }
}
