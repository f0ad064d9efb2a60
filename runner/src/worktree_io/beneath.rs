//! File operations beneath one directory that never follow a symbolic link in any path
//! component, whatever the directory holds: reads open with `openat2`'s
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`; writes walk the path one component at a time
//! with `O_NOFOLLOW`, replacing a symlink or file found where a directory must be by a real
//! directory. So nothing here can read or write outside the directory, even when the
//! worktree is full of symlinks to elsewhere (and the sandbox around the helper makes
//! "elsewhere" harmless as a second layer).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use super::wire::Stat;

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A fifo, socket or device: never read or written.
    Other,
}

fn kind_of(stat: &FileStat) -> Kind {
    match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// A file's metadata in git's index form (seconds and sizes truncated to 32 bits, as git
/// does).
pub fn index_stat(stat: &FileStat) -> Stat {
    Stat {
        ctime_secs: stat.st_ctime as u32,
        ctime_nanos: stat.st_ctime_nsec as u32,
        mtime_secs: stat.st_mtime as u32,
        mtime_nanos: stat.st_mtime_nsec as u32,
        dev: stat.st_dev as u32,
        ino: stat.st_ino as u32,
        uid: stat.st_uid,
        gid: stat.st_gid,
        size: stat.st_size as u32,
    }
}

/// What [`Root::read`] found.
#[derive(Debug)]
pub enum Found {
    /// A regular file, with its content.
    File {
        content: Vec<u8>,
        executable: bool,
        stat: FileStat,
    },
    /// A regular file larger than the limit (not read).
    TooLarge { size: u64 },
    /// A symlink, with its target.
    Symlink { target: Vec<u8>, stat: FileStat },
    /// Nothing, a directory, a special file, or a path through a symlink.
    Nothing,
}

/// A directory everything happens beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
}

fn io(e: Errno) -> io::Error {
    io::Error::from(e)
}

fn beneath() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

/// Splits a relative path into its parent components and its last name.
fn split(rel: &Path) -> io::Result<(Vec<&OsStr>, &OsStr)> {
    let mut parts: Vec<&OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(name) => parts.push(name),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain relative path", rel.display()),
                ));
            }
        }
    }
    let last = parts
        .pop()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an empty path".to_owned()))?;
    Ok((parts, last))
}

impl Root {
    /// Opens `path` (which must be a directory, and not a symlink itself).
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY,
            Mode::empty(),
        )
        .map_err(|e| io::Error::new(io(e).kind(), format!("open {}: {e}", path.display())))?;
        Ok(Self { fd })
    }

    /// The entry at `rel` without following a symlink anywhere: `None` when nothing is there
    /// or a parent component is not a real directory.
    pub fn lstat(&self, rel: &Path) -> io::Result<Option<FileStat>> {
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(beneath());
        match openat2(&self.fd, rel, how) {
            Ok(fd) => fstat(&fd).map(Some).map_err(io),
            Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV) => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    /// Reads the regular file or symlink at `rel` (files up to `max_bytes`).
    pub fn read(&self, rel: &Path, max_bytes: u64) -> io::Result<Found> {
        let Some(stat) = self.lstat(rel)? else {
            return Ok(Found::Nothing);
        };
        match kind_of(&stat) {
            Kind::Symlink => {
                let (parents, name) = split(rel)?;
                let Some(dir) = self.walk(&parents)? else {
                    return Ok(Found::Nothing);
                };
                let target = readlinkat(&dir, name).map_err(io)?;
                Ok(Found::Symlink {
                    target: target.as_bytes().to_vec(),
                    stat,
                })
            }
            Kind::File => {
                let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
                if size > max_bytes {
                    return Ok(Found::TooLarge { size });
                }
                let how = OpenHow::new()
                    .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY)
                    .resolve(beneath());
                let fd = openat2(&self.fd, rel, how).map_err(io)?;
                let stat = fstat(&fd).map_err(io)?;
                if kind_of(&stat) != Kind::File {
                    return Ok(Found::Nothing);
                }
                let mut content = Vec::new();
                File::from(fd)
                    .take(max_bytes + 1)
                    .read_to_end(&mut content)?;
                if content.len() as u64 > max_bytes {
                    return Ok(Found::TooLarge {
                        size: content.len() as u64,
                    });
                }
                Ok(Found::File {
                    content,
                    executable: stat.st_mode & 0o100 != 0,
                    stat,
                })
            }
            Kind::Dir | Kind::Other => Ok(Found::Nothing),
        }
    }

    /// The entries of the directory `rel` ("" for the root) with their kinds; empty when it
    /// is not a real directory.
    pub fn list(&self, rel: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let parts: Vec<&OsStr> = rel.iter().collect();
        let Some(dir) = self.walk(&parts)? else {
            return Ok(Vec::new());
        };
        let probe = dir.try_clone()?;
        let mut listing = Dir::from_fd(dir).map_err(io)?;
        let mut out = Vec::new();
        for entry in listing.iter() {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name).to_owned();
            let kind = match entry.file_type() {
                Some(Type::File) => Kind::File,
                Some(Type::Directory) => Kind::Dir,
                Some(Type::Symlink) => Kind::Symlink,
                Some(_) => Kind::Other,
                None => match fstatat(&probe, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(stat) => kind_of(&stat),
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(io(e)),
                },
            };
            out.push((name, kind));
        }
        Ok(out)
    }

    /// Writes `content` as the regular file at `rel` (mode 0755 when `executable`, else
    /// 0644), replacing whatever is there and making the directories on the way; returns
    /// its metadata.
    pub fn write_file(&self, rel: &Path, content: &[u8], executable: bool) -> io::Result<FileStat> {
        let (parents, name) = split(rel)?;
        let dir = self.make_dirs(&parents)?;
        clear_name(&dir, name)?;
        let mode = if executable { 0o755 } else { 0o644 };
        let fd = openat(
            &dir,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .map_err(io)?;
        fchmod(&fd, Mode::from_bits_truncate(mode)).map_err(io)?;
        let mut file = File::from(fd);
        file.write_all(content)?;
        file.flush()?;
        fstat(file.as_fd()).map_err(io)
    }

    /// Makes the symlink `rel` pointing to `target` (never followed here), replacing
    /// whatever is there; returns its metadata.
    pub fn write_symlink(&self, rel: &Path, target: &[u8]) -> io::Result<FileStat> {
        let (parents, name) = split(rel)?;
        let dir = self.make_dirs(&parents)?;
        clear_name(&dir, name)?;
        symlinkat(OsStr::from_bytes(target), &dir, name).map_err(io)?;
        fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(io)
    }

    /// Removes the file or symlink at `rel`, or the directory with everything in it.
    /// Nothing there (or a parent that is not a real directory) is not an error.
    pub fn remove(&self, rel: &Path) -> io::Result<()> {
        let (parents, name) = split(rel)?;
        match self.walk(&parents)? {
            Some(dir) => clear_name(&dir, name),
            None => Ok(()),
        }
    }

    /// Removes the directory at `rel` if it is empty; `false` when it is not (or is gone).
    pub fn remove_empty_dir(&self, rel: &Path) -> io::Result<bool> {
        let (parents, name) = split(rel)?;
        let Some(dir) = self.walk(&parents)? else {
            return Ok(false);
        };
        match unlinkat(&dir, name, UnlinkatFlags::RemoveDir) {
            Ok(()) => Ok(true),
            Err(Errno::ENOTEMPTY | Errno::EEXIST | Errno::ENOENT | Errno::ENOTDIR) => Ok(false),
            Err(e) => Err(io(e)),
        }
    }

    /// Opens the directory `parts` below the root, each component with `O_NOFOLLOW`; `None`
    /// when one is missing or not a real directory.
    fn walk(&self, parts: &[&OsStr]) -> io::Result<Option<OwnedFd>> {
        let mut dir = self.fd.try_clone()?;
        for part in parts {
            match open_dir(&dir, part) {
                Ok(next) => dir = next,
                Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(None),
                Err(e) => return Err(io(e)),
            }
        }
        Ok(Some(dir))
    }

    /// Opens the directory `parts` below the root, making each missing component and
    /// replacing a file or symlink in the way by a directory.
    fn make_dirs(&self, parts: &[&OsStr]) -> io::Result<OwnedFd> {
        let mut dir = self.fd.try_clone()?;
        for part in parts {
            dir = match open_dir(&dir, part) {
                Ok(next) => next,
                Err(Errno::ENOENT) => {
                    mkdirat(&dir, *part, Mode::from_bits_truncate(0o755)).map_err(io)?;
                    open_dir(&dir, part).map_err(io)?
                }
                Err(Errno::ENOTDIR | Errno::ELOOP) => {
                    clear_name(&dir, part)?;
                    mkdirat(&dir, *part, Mode::from_bits_truncate(0o755)).map_err(io)?;
                    open_dir(&dir, part).map_err(io)?
                }
                Err(e) => return Err(io(e)),
            };
        }
        Ok(dir)
    }
}

fn open_dir(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY,
        Mode::empty(),
    )
}

/// Removes whatever is at `name` in `dir`: a file or symlink (never followed), or a
/// directory with everything in it. Nothing there is not an error.
fn clear_name(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(io(e)),
        Ok(stat) if kind_of(&stat) == Kind::Dir => {
            let inner = open_dir(dir, name).map_err(io)?;
            empty_dir(&inner)?;
            unlinkat(dir, name, UnlinkatFlags::RemoveDir).map_err(io)
        }
        Ok(_) => unlinkat(dir, name, UnlinkatFlags::NoRemoveDir).map_err(io),
    }
}

/// Removes everything inside `dir`.
fn empty_dir(dir: &OwnedFd) -> io::Result<()> {
    let mut names = Vec::new();
    let mut listing = Dir::from_fd(dir.try_clone()?).map_err(io)?;
    for entry in listing.iter() {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_owned());
        }
    }
    for name in names {
        clear_name(dir, &name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn reads_never_follow_symlinks_in_any_component() {
        let root_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "token").unwrap();
        let root = root_dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/file"), "mine").unwrap();
        symlink(outside.path(), root.join("dirlink")).unwrap();
        symlink(outside.path().join("secret"), root.join("filelink")).unwrap();
        let r = Root::open(root).unwrap();
        assert!(
            matches!(r.read(Path::new("real/file"), 100).unwrap(), Found::File { content, .. } if content == b"mine")
        );
        assert!(matches!(
            r.read(Path::new("dirlink/secret"), 100).unwrap(),
            Found::Nothing
        ));
        match r.read(Path::new("filelink"), 100).unwrap() {
            Found::Symlink { target, .. } => {
                assert_eq!(target, outside.path().join("secret").as_os_str().as_bytes())
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.read(Path::new("real/file"), 2).unwrap(),
            Found::TooLarge { size: 4 }
        ));
        assert!(r.lstat(Path::new("dirlink/secret")).unwrap().is_none());
        assert!(
            r.read(Path::new("../x"), 100).is_err()
                || matches!(r.read(Path::new("../x"), 100).unwrap(), Found::Nothing)
        );
    }

    #[test]
    fn writes_replace_symlinks_on_the_way_instead_of_following_them() {
        let root_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "host file").unwrap();
        let root = root_dir.path();
        // A directory symlink on the way and a file symlink at the end.
        symlink(outside.path(), root.join("build")).unwrap();
        symlink(outside.path().join("victim"), root.join("top")).unwrap();
        let r = Root::open(root).unwrap();
        r.write_file(Path::new("build/victim"), b"runner content", false)
            .unwrap();
        r.write_file(Path::new("top"), b"x", true).unwrap();
        r.write_symlink(Path::new("build/new"), b"/etc/passwd")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("victim")).unwrap(),
            "host file"
        );
        assert!(!outside.path().join("new").exists());
        assert!(
            std::fs::symlink_metadata(root.join("build"))
                .unwrap()
                .is_dir()
        );
        assert_eq!(
            std::fs::read_to_string(root.join("build/victim")).unwrap(),
            "runner content"
        );
        let top = std::fs::symlink_metadata(root.join("top")).unwrap();
        assert!(top.is_file());
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&top.permissions()) & 0o777,
            0o755
        );
        // Removing a directory symlink removes the link, not what it points to.
        symlink(outside.path(), root.join("gone")).unwrap();
        r.remove(Path::new("gone")).unwrap();
        assert!(outside.path().join("victim").exists());
        assert!(std::fs::symlink_metadata(root.join("gone")).is_err());
        // A directory is removed with its contents, its symlinks unfollowed.
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        symlink(outside.path(), root.join("d/e/l")).unwrap();
        r.remove(Path::new("d")).unwrap();
        assert!(!root.join("d").exists());
        assert!(outside.path().join("victim").exists());
    }

    #[test]
    fn lists_entries_with_their_kinds() {
        let root_dir = tempfile::tempdir().unwrap();
        let root = root_dir.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("f"), "").unwrap();
        symlink("/", root.join("l")).unwrap();
        let r = Root::open(root).unwrap();
        let mut listed = r.list(Path::new("")).unwrap();
        listed.sort();
        assert_eq!(
            listed,
            vec![
                ("d".into(), Kind::Dir),
                ("f".into(), Kind::File),
                ("l".into(), Kind::Symlink)
            ]
        );
        assert!(r.list(Path::new("l")).unwrap().is_empty());
        assert!(r.remove_empty_dir(Path::new("d")).unwrap());
    }
}
