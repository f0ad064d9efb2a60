//! Per-thread disks: each worktree is its own size-limited filesystem, so the kernel caps
//! what a run can write while it writes.
//!
//! A worktree (its files and its `.git`: the thread's commits and checkpoints) lives on an
//! ext4 filesystem in a sparse image file, `.codebutler/disks/<slug>.img` of
//! `sandbox.diskMB` MB (or what `access.maxWorktreeDiskMB` has left, see
//! [`super::worktree::new_disk_mb`]), loop-mounted at `.codebutler/branches/<slug>`
//! (`nosuid,nodev`).
//! A run that fills it gets `ENOSPC`, and so does the controller when it copies a
//! checkpoint into the same filesystem: nothing else on the host fills. The image is sparse,
//! so it takes only what is written; before one is made, the host must have room for all of
//! it.
//!
//! Loop mounts need root (`CAP_SYS_ADMIN`); [`probe`] says whether this process can make
//! them, and the daemon refuses to start with `sandbox.diskMB` set where it cannot (set 0
//! to run without a disk cap). The images stay mounted across restarts of the daemon;
//! [`ThreadDisk::ensure_mounted`] mounts one again after a reboot.

use super::step_error::{IoStepError, io};
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Condvar, Mutex, PoisonError};

/// Megabytes.
const MB: u64 = 1 << 20;
/// Where `mkfs.ext4` and `mount` are looked for besides `PATH`.
const SBIN: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// A disk could not be made, mounted or removed.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error(transparent)]
    Io(#[from] IoStepError),
    #[error("{what} failed ({status}): {output}")]
    Command {
        what: String,
        status: String,
        output: String,
    },
    #[error("{0}")]
    Unavailable(String),
    #[error(
        "the host has {free} MB free, less than the {needed} MB a new worktree may use \
         (sandbox.diskMB); free some space or lower sandbox.diskMB"
    )]
    NoRoom { free: u64, needed: u64 },
}

/// One worktree's disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadDisk {
    /// The image file.
    pub image: PathBuf,
    /// Where it is mounted: the worktree.
    pub mount: PathBuf,
}

impl ThreadDisk {
    /// The disk of the worktree `worktree` (`.codebutler/branches/<slug>`), with its image
    /// in `images` (`.codebutler/disks`).
    pub fn of(images: &Path, worktree: &Path) -> Self {
        let name = worktree
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            image: images.join(format!("{name}.img")),
            mount: worktree.to_owned(),
        }
    }

    /// Whether this worktree has a disk (its image exists).
    pub fn exists(&self) -> bool {
        self.image.is_file()
    }

    /// Makes the image (`size_mb` MB, sparse), an ext4 filesystem in it, and mounts it at
    /// the (new, empty) worktree directory. Blocking.
    pub fn create(&self, size_mb: u64) -> Result<(), DiskError> {
        if let Some(dir) = self.image.parent() {
            fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
            let free = free_bytes(dir)?;
            if free < size_mb.saturating_mul(MB) {
                return Err(DiskError::NoRoom {
                    free: free / MB,
                    needed: size_mb,
                });
            }
        }
        fs::create_dir_all(&self.mount).map_err(io(format!("create {}", self.mount.display())))?;
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.image)
            .map_err(io(format!("create {}", self.image.display())))?;
        file.set_len(size_mb.saturating_mul(MB))
            .map_err(io(format!("size {}", self.image.display())))?;
        drop(file);
        let owner =
            fs::metadata(&self.mount).map_err(io(format!("inspect {}", self.mount.display())))?;
        let mut mkfs = Command::new(find_tool("mkfs.ext4")?);
        mkfs.args(["-q", "-F", "-m", "0", "-i", "8192", "-J", "size=4", "-E"])
            .arg(format!(
                "root_owner={}:{},lazy_itable_init=1",
                owner.uid(),
                owner.gid()
            ))
            .arg(&self.image);
        run(mkfs, "mkfs.ext4")?;
        self.mount_image()?;
        // A worktree starts empty.
        let lost = self.mount.join("lost+found");
        match fs::remove_dir(&lost) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(format!("remove {}", lost.display()))(e).into()),
        }
    }

    /// Mounts the image again if it is not mounted (after a reboot). Blocking.
    pub fn ensure_mounted(&self) -> Result<(), DiskError> {
        let _held = Changing::hold(&self.image);
        if !self.exists() || is_mount_point(&self.mount)? {
            return Ok(());
        }
        fs::create_dir_all(&self.mount).map_err(io(format!("create {}", self.mount.display())))?;
        self.mount_image()
    }

    /// Unmounts the worktree and deletes its image (and the empty mount point). Blocking.
    pub fn remove(&self) -> Result<(), DiskError> {
        let _held = Changing::hold(&self.image);
        if is_mount_point(&self.mount)? {
            let mut umount = Command::new(find_tool("umount")?);
            umount.arg(&self.mount);
            if let Err(busy) = run(umount, "umount") {
                // A process that is ending (the run's runner) may still hold a file there:
                // detach it now, and the kernel frees it when the last one is closed (the
                // loop device clears itself, so the image's space goes with it).
                let mut lazy = Command::new(find_tool("umount")?);
                lazy.arg("--lazy").arg(&self.mount);
                run(lazy, "umount --lazy").map_err(|_| busy)?;
                tracing::info!(mount = %self.mount.display(), "the disk was busy: unmounted lazily");
            }
        }
        match fs::remove_file(&self.image) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(format!("remove {}", self.image.display()))(e).into()),
        }
        match fs::remove_dir(&self.mount) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(format!("remove {}", self.mount.display()))(e).into()),
        }
    }

    /// Bytes the image takes on the host (allocated blocks).
    pub fn allocated(&self) -> u64 {
        fs::symlink_metadata(&self.image).map_or(0, |m| m.blocks() * 512)
    }

    fn mount_image(&self) -> Result<(), DiskError> {
        let mut mount = Command::new(find_tool("mount")?);
        mount
            .args(["-t", "ext4", "-o", "loop,nosuid,nodev,noatime"])
            .arg(&self.image)
            .arg(&self.mount);
        run(mount, "mount")
    }
}

/// The disks (by image) whose mount state a thread of this process is changing. A removal's
/// unmount and a mount again (a background step reading the worktree while the thread
/// closes) must never interleave: a mount between the unmount and the removal of the mount
/// point would stack the image back, leave the mount point busy (`EBUSY`) and keep the
/// loop device. Only this process mounts the disks of its repositories.
static CHANGING: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());
/// Told when a disk leaves [`CHANGING`].
static CHANGED: Condvar = Condvar::new();

/// One disk's place in [`CHANGING`], held until dropped.
struct Changing(PathBuf);

impl Changing {
    /// Waits until no other thread changes the mount state of the disk `image`, then holds it.
    fn hold(image: &Path) -> Self {
        let mut changing = CHANGING.lock().unwrap_or_else(PoisonError::into_inner);
        while changing.contains(image) {
            changing = CHANGED
                .wait(changing)
                .unwrap_or_else(PoisonError::into_inner);
        }
        changing.insert(image.to_owned());
        Self(image.to_owned())
    }
}

impl Drop for Changing {
    fn drop(&mut self) {
        CHANGING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.0);
        CHANGED.notify_all();
    }
}

/// The kernel's loop control device, and its number (the misc major, `LOOP_CTRL_MINOR`).
const LOOP_CONTROL: &str = "/dev/loop-control";
const LOOP_CONTROL_DEVICE: (u64, u64) = (10, 237);

/// An exclusive lock on the disk images in `images` (a `flock` on `.lock` there), held
/// while a new disk is sized and made, across processes too. Blocking.
pub fn lock_images(images: &Path) -> Result<nix::fcntl::Flock<fs::File>, DiskError> {
    fs::create_dir_all(images).map_err(io(format!("create {}", images.display())))?;
    let path = images.join(".lock");
    // Never through a link: the lock file is the daemon's own.
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io(format!("open {}", path.display())))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| io(format!("lock {}", path.display()))(io::Error::from(e)).into())
}

/// The size in MB of the disk of the worktree `worktree` (its image's length), if it has
/// one. Blocking.
pub fn size_mb(images: &Path, worktree: &Path) -> Option<u64> {
    let disk = ThreadDisk::of(images, worktree);
    fs::symlink_metadata(&disk.image)
        .ok()
        .filter(fs::Metadata::is_file)
        .map(|m| m.len() / MB)
}

/// Whether this process can make per-thread disks: it runs as root, the kernel has loop
/// devices (`/dev/loop-control` is the loop control device, not something else put in its
/// place, as a container's `/dev` may have), and `mkfs.ext4`, `mount` and `umount` are
/// installed. `Err` says what is missing.
pub fn probe() -> Result<(), DiskError> {
    use std::os::unix::fs::FileTypeExt;
    if !nix::unistd::geteuid().is_root() {
        return Err(DiskError::Unavailable(
            "per-thread disks are loop-mounted filesystems, which only root can mount".into(),
        ));
    }
    let control = fs::metadata(LOOP_CONTROL).ok();
    let device = control
        .as_ref()
        .filter(|m| m.file_type().is_char_device())
        .map(|m| {
            (
                nix::sys::stat::major(m.rdev()),
                nix::sys::stat::minor(m.rdev()),
            )
        });
    if device != Some(LOOP_CONTROL_DEVICE) {
        return Err(DiskError::Unavailable(format!(
            "the kernel's loop devices are not available here ({LOOP_CONTROL} is {})",
            if control.is_some() {
                "not the loop control device"
            } else {
                "missing"
            }
        )));
    }
    for tool in ["mkfs.ext4", "mount", "umount"] {
        find_tool(tool)?;
    }
    Ok(())
}

/// Bytes free for unprivileged use on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Result<u64, DiskError> {
    let stat = nix::sys::statvfs::statvfs(dir)
        .map_err(|e| io(format!("statvfs {}", dir.display()))(io::Error::from(e)))?;
    Ok(stat.blocks_available().saturating_mul(stat.fragment_size()))
}

/// Whether `path` is the root of a mount (its device differs from its parent's).
fn is_mount_point(path: &Path) -> Result<bool, DiskError> {
    let own = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(format!("inspect {}", path.display()))(e).into()),
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    let up = fs::metadata(parent).map_err(io(format!("inspect {}", parent.display())))?;
    Ok(own.is_dir() && (own.dev() != up.dev() || own.ino() == up.ino()))
}

fn find_tool(name: &str) -> Result<PathBuf, DiskError> {
    let from_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    from_path
        .into_iter()
        .chain(SBIN.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| DiskError::Unavailable(format!("`{name}` is not installed")))
}

fn run(mut command: Command, what: &str) -> Result<(), DiskError> {
    command
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null());
    let output = command.output().map_err(io(format!("run {what}")))?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if text.is_empty() {
        text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    }
    text.truncate(1000);
    Err(DiskError::Command {
        what: what.to_owned(),
        status: output.status.to_string(),
        output: text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_caps_what_is_written_and_goes_away_whole() {
        probe().expect("these machines run the tests as root with loop devices");
        let dir = tempfile::tempdir().unwrap();
        let worktree = dir.path().join("branches/t");
        let disk = ThreadDisk::of(&dir.path().join("disks"), &worktree);
        disk.create(16).unwrap();
        let cleanup = Unmount(&disk);
        assert!(is_mount_point(&worktree).unwrap());
        assert!(
            std::fs::read_dir(&worktree).unwrap().next().is_none(),
            "starts empty"
        );
        // Writing past the cap fails with ENOSPC; the host is untouched.
        let big = vec![7u8; 1 << 20];
        let mut written = 0;
        let e = loop {
            match std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(worktree.join("fill"))
                .and_then(|mut f| std::io::Write::write_all(&mut f, &big))
            {
                Ok(()) => written += 1,
                Err(e) => break e,
            }
            assert!(written < 64, "wrote {written} MB into a 16 MB disk");
        };
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        assert!(disk.allocated() <= 17 << 20, "{}", disk.allocated());
        // Mounted again after an unmount (a reboot), with its content.
        let mut umount = Command::new(find_tool("umount").unwrap());
        umount.arg(&worktree);
        run(umount, "umount").unwrap();
        assert!(!worktree.join("fill").exists());
        disk.ensure_mounted().unwrap();
        assert!(worktree.join("fill").exists());
        drop(cleanup);
        assert!(!disk.image.exists());
        assert!(!worktree.exists());
    }

    #[test]
    fn a_disk_still_in_use_is_removed_all_the_same() {
        probe().expect("these machines run the tests as root with loop devices");
        let dir = tempfile::tempdir().unwrap();
        let worktree = dir.path().join("branches/t");
        let disk = ThreadDisk::of(&dir.path().join("disks"), &worktree);
        disk.create(16).unwrap();
        // An ending runner still holding a file there keeps the mount busy.
        let held = std::fs::File::create(worktree.join("open")).unwrap();
        disk.remove().unwrap();
        assert!(!is_mount_point(&worktree).unwrap_or(false));
        assert!(!disk.image.exists());
        assert!(!worktree.exists());
        drop(held);
    }

    /// A removal waits for a mount in progress on the same disk (and the reverse), so a
    /// background step mounting the worktree again never lands between the removal's unmount
    /// and its removal of the mount point; a disk removed meanwhile is not mounted again.
    #[test]
    fn a_removal_and_a_mount_of_one_disk_never_interleave() {
        probe().expect("these machines run the tests as root with loop devices");
        let dir = tempfile::tempdir().unwrap();
        let worktree = dir.path().join("branches/t");
        let disk = ThreadDisk::of(&dir.path().join("disks"), &worktree);
        disk.create(16).unwrap();
        let held = Changing::hold(&disk.image);
        let removing = std::thread::spawn({
            let disk = disk.clone();
            move || disk.remove()
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!removing.is_finished(), "the removal waits for the mount");
        assert!(is_mount_point(&worktree).unwrap());
        drop(held);
        removing.join().unwrap().unwrap();
        disk.ensure_mounted().unwrap();
        assert!(!is_mount_point(&worktree).unwrap_or(false));
        assert!(!disk.image.exists());
        assert!(!worktree.exists());
        // Another disk is never held up by this one.
        let other = ThreadDisk::of(&dir.path().join("disks"), &dir.path().join("branches/u"));
        let _held = Changing::hold(&disk.image);
        other.create(16).unwrap();
        other.remove().unwrap();
    }

    #[test]
    fn no_disk_is_made_without_room_on_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let disk = ThreadDisk::of(&dir.path().join("disks"), &dir.path().join("branches/t"));
        let e = disk.create(u64::MAX / MB).unwrap_err();
        assert!(matches!(e, DiskError::NoRoom { .. }), "{e}");
        assert!(e.to_string().contains("sandbox.diskMB"), "{e}");
        assert!(!disk.image.exists());
    }

    /// Removes the disk even when the test fails.
    struct Unmount<'a>(&'a ThreadDisk);

    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            if let Err(e) = self.0.remove() {
                eprintln!("remove test disk: {e}");
            }
        }
    }
}
