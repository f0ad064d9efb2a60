//! Step 4: build the new root from the [`MountOp`] plan, then `pivot_root` into it.
//!
//! Done as bubblewrap does it, so that no directory is created on the host: a staging
//! tmpfs is mounted over `/tmp` *in the new mount namespace only*, the process pivots into
//! it with the host's root moved to `/oldroot`, the new root is assembled in `/newroot`
//! from sources under `/oldroot` (`/oldroot/tmp` is the host's real `/tmp`: the staging
//! mount left it when it became the root), the old root is detached, and
//! `pivot_root(".", ".")` in `/newroot` switches to it for good.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat2};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::sys::statvfs::statvfs;
use nix::unistd::{UnlinkatFlags, chdir, pivot_root, unlinkat};

use super::error::{AtStep, SandboxError, Step};
use super::plan::{MountOp, Source};
use super::resolve::{NodeKind, locked_flags_from};

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

/// Binds `src` at `dst` with every mount beneath it, each made read-only with `flags`.
///
/// For a read-only bind the kernel refuses (`EINVAL`) because mounts beneath `src` came
/// locked with this user namespace: it may not separate them from `src`. A container
/// engine's `/etc/hostname` and `/etc/hosts` are such mounts. They come along read-only:
/// every mount of the new tree is remounted with `flags` and the atime mode and
/// restrictions it had (a remount in a user namespace must keep them), so nothing of it is
/// writable inside. A read-write bind never gets here: it fails as before.
fn bind_tree_read_only(src: &Path, dst: &Path, flags: MsFlags) -> Result<(), SandboxError> {
    let step = Step::Mount;
    mount(
        Some(src),
        dst,
        NONE,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        NONE,
    )
    .at(step, || {
        format!("mount --rbind {} {}", src.display(), dst.display())
    })?;
    let atime = MsFlags::MS_NOATIME
        | MsFlags::MS_NODIRATIME
        | MsFlags::MS_RELATIME
        | MsFlags::MS_STRICTATIME;
    for point in mounts_under(dst)? {
        let own = statvfs(&point).at(step, || format!("statvfs {}", point.display()))?;
        let remount = locked_flags_from(own.flags()) | (flags - atime);
        mount(
            NONE,
            &point,
            NONE,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | remount,
            NONE,
        )
        .at(step, || {
            format!("remount {} with {remount:?}", point.display())
        })?;
    }
    Ok(())
}

/// The mount points at or beneath `dir` in this mount namespace, outermost first (from
/// `/proc/self/mountinfo` of the old root, whose paths are this process's view).
fn mounts_under(dir: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    let info = under(OLD_ROOT, Path::new("/proc/self/mountinfo"));
    let text = fs::read_to_string(&info).at(Step::Mount, || format!("read {}", info.display()))?;
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mountinfo(field)))
        .filter(|point| point.starts_with(dir))
        .collect();
    points.sort_by_key(|p| p.components().count());
    points.dedup();
    if points.first().map(PathBuf::as_path) != Some(dir) {
        return Err(SandboxError::new(
            Step::Mount,
            format!("{} is missing from {}", dir.display(), info.display()),
        ));
    }
    Ok(points)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0')));
        match octal.and_then(|n| u8::try_from(n).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
            match mount(Some(&src), &dst, NONE, MsFlags::MS_BIND, NONE) {
                Ok(()) => {}
                Err(Errno::EINVAL) if flags.contains(MsFlags::MS_RDONLY) => {
                    return bind_tree_read_only(&src, &dst, *flags);
                }
                Err(e) => {
                    return Err(e).at(step, || {
                        format!("mount --bind {} {}", src.display(), dst.display())
                    });
                }
            }
            mount(
                NONE,
                &dst,
                NONE,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | *flags,
                NONE,
            )
            .at(step, || format!("remount {} with {flags:?}", dst.display()))
        }
        MountOp::BindInto {
            source,
            parent,
            name,
            flags,
        } => bind_into(&under(OLD_ROOT, source), parent, name, *flags),
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

/// Resolution that never leaves the directory it starts from and never follows a link.
const NO_LINKS: ResolveFlag = ResolveFlag::RESOLVE_BENEATH
    .union(ResolveFlag::RESOLVE_NO_SYMLINKS)
    .union(ResolveFlag::RESOLVE_NO_MAGICLINKS);

/// Binds the directory `src` at `name` in `parent` (inside: a directory the sandbox
/// writes, so holding whatever an earlier run left), then remounts it with `flags`.
///
/// Every step goes through descriptors, never through a path the directory's content could
/// redirect: `name` is made an empty real directory ([`prepare_mount_point`]), opened with
/// `openat2` resolving no links, and the bind targets that descriptor (`/proc/self/fd/N`
/// of the old root, which names exactly the opened directory); the remount targets the
/// bind's own root, opened the same way.
fn bind_into(src: &Path, parent: &Path, name: &OsStr, flags: MsFlags) -> Result<(), SandboxError> {
    let step = Step::Mount;
    let shown = parent.join(name);
    let dir = nix::fcntl::open(
        &under(NEW_ROOT, parent),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .at(step, || format!("open {}", parent.display()))?;
    prepare_mount_point(&dir, name, &shown)?;
    let open_point = |resolve: ResolveFlag| -> Result<OwnedFd, SandboxError> {
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(resolve);
        openat2(&dir, name, how).at(step, || {
            format!("open {} without following links", shown.display())
        })
    };
    let point = open_point(NO_LINKS | ResolveFlag::RESOLVE_NO_XDEV)?;
    let by_fd = |fd: &OwnedFd| {
        under(
            OLD_ROOT,
            &Path::new("/proc/self/fd").join(fd.as_raw_fd().to_string()),
        )
    };
    mount(Some(src), &by_fd(&point), NONE, MsFlags::MS_BIND, NONE).at(step, || {
        format!("mount --bind {} {}", src.display(), shown.display())
    })?;
    let root = open_point(NO_LINKS)?;
    mount(
        NONE,
        &by_fd(&root),
        NONE,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags,
        NONE,
    )
    .at(step, || {
        format!("remount {} with {flags:?}", shown.display())
    })
}

/// Makes `name` in `dir` an empty real directory without following any link: a missing
/// one is created; a symlink, file or other non-directory is removed first (it names
/// nothing the sandbox needs: the mount point is the sandbox's own); a directory with
/// content is refused, since mounting over it would hide what someone put there.
fn prepare_mount_point(dir: &OwnedFd, name: &OsStr, shown: &Path) -> Result<(), SandboxError> {
    let step = Step::Mount;
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => {}
        Err(e) => return Err(e).at(step, || format!("stat {}", shown.display())),
        Ok(stat) => {
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            if kind == SFlag::S_IFDIR {
                let how = OpenHow::new()
                    .flags(
                        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    )
                    .resolve(NO_LINKS | ResolveFlag::RESOLVE_NO_XDEV);
                let listed = openat2(dir, name, how)
                    .and_then(Dir::from_fd)
                    .at(step, || format!("open {}", shown.display()))?;
                let mut entries = listed.into_iter();
                let first = entries.find(|e| {
                    !matches!(
                        e.as_ref().map(|e| e.file_name().to_bytes()),
                        Ok(b".") | Ok(b"..")
                    )
                });
                return match first {
                    None => Ok(()),
                    Some(Err(e)) => Err(e).at(step, || format!("list {}", shown.display())),
                    Some(Ok(_)) => Err(SandboxError::new(
                        step,
                        format!(
                            "{} is not empty: it is where the shared files are mounted, and \
                             something else was put there (remove it from the worktree)",
                            shown.display()
                        ),
                    )),
                };
            }
            unlinkat(dir, name, UnlinkatFlags::NoRemoveDir).at(step, || {
                format!("remove {} (not a directory)", shown.display())
            })?;
        }
    }
    mkdirat(dir, name, Mode::from_bits_truncate(0o755))
        .at(step, || format!("mkdir {}", shown.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo("/a\\040b\\011c"), "/a b\tc");
        assert_eq!(unescape_mountinfo("/back\\134slash"), "/back\\slash");
        assert_eq!(unescape_mountinfo("/plain\\9x\\"), "/plain\\9x\\");
    }
}
