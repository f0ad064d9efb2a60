//! The per-repository state directory `<repo>/.codebutler/`: where each file lives, and the
//! first-run set-up that creates it, seeds the role prompts and git-ignores runtime state.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::domain::ThreadKey;

/// The shipped default prompts, seeded into `.codebutler/prompts/` on first run.
pub const DEFAULT_PROMPTS: [(&str, &str); 5] = [
    ("pm.md", include_str!("../../prompts/pm.md")),
    ("coder.md", include_str!("../../prompts/coder.md")),
    ("artist.md", include_str!("../../prompts/artist.md")),
    ("shared.md", include_str!("../../prompts/shared.md")),
    (
        "memory-extraction.md",
        include_str!("../../prompts/memory-extraction.md"),
    ),
];

/// Where the role prompts live, relative to the repository's root.
pub const PROMPTS_DIR: &str = ".codebutler/prompts";

/// Keeps everything in `.codebutler/` out of git except the prompts and memory, which are
/// meant to be reviewed and committed.
pub const GITIGNORE: &str = "# Written by CodeButler: runtime state stays out of git;\n\
# prompts/ and memory/ are committed so the team can review them.\n\
*\n\
!.gitignore\n\
!prompts/\n\
!prompts/**\n\
!memory/\n\
!memory/**\n";

/// Paths of one repository's CodeButler state.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The repository's working tree root.
    pub repo: PathBuf,
    /// `<repo>/.codebutler`.
    pub dir: PathBuf,
}

/// A failure while preparing `.codebutler/`.
#[derive(Debug, thiserror::Error)]
#[error("prepare {path}: {source}")]
pub struct LayoutError {
    path: PathBuf,
    source: std::io::Error,
}

impl Layout {
    /// The layout of the repository rooted at `repo`.
    pub fn new(repo: &Path) -> Self {
        Self {
            repo: repo.to_owned(),
            dir: repo.join(".codebutler"),
        }
    }

    /// `.codebutler/prompts/`.
    pub fn prompts(&self) -> PathBuf {
        self.repo.join(PROMPTS_DIR)
    }

    /// `.codebutler/memory/`.
    pub fn memory(&self) -> PathBuf {
        self.dir.join("memory")
    }

    /// `.codebutler/store.db`.
    pub fn store(&self) -> PathBuf {
        self.dir.join("store.db")
    }

    /// `.codebutler/run/`: the admin socket, the daemon's lock, runner and preparation logs.
    pub fn run(&self) -> PathBuf {
        self.dir.join("run")
    }

    /// `.codebutler/run/admin.sock`: the admin socket `runnerctl` talks to.
    pub fn admin_socket(&self) -> PathBuf {
        self.run().join("admin.sock")
    }

    /// `.codebutler/attachments/`: the files people shared, one directory per thread.
    pub fn attachments(&self) -> PathBuf {
        self.dir.join("attachments")
    }

    /// The directory of the files shared in `thread` (`<channel>-<thread ts>`, names Slack
    /// gives in letters, digits and a dot), made a real directory if it is not one yet.
    pub fn thread_attachments(&self, thread: &ThreadKey) -> Result<PathBuf, LayoutError> {
        real_dir(&self.attachments())?;
        let dir = self.thread_attachments_path(thread);
        real_dir(&dir)?;
        Ok(dir)
    }

    /// Where [`Layout::thread_attachments`] keeps `thread`'s files, made or not.
    pub fn thread_attachments_path(&self, thread: &ThreadKey) -> PathBuf {
        let name: String = format!("{}-{}", thread.channel, thread.thread_ts)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.attachments().join(name)
    }

    /// The directories of `.codebutler/` the daemon keeps its own things in, the
    /// committed `prompts/` and `memory/` among them: each must be a real directory.
    fn own_dirs(&self) -> [PathBuf; 8] {
        [
            self.dir.clone(),
            self.prompts(),
            self.memory(),
            self.run(),
            self.dir.join("branches"),
            self.dir.join("disks"),
            self.dir.join("git"),
            self.attachments(),
        ]
    }

    /// Creates `.codebutler/` and its `prompts/`, `memory/`, `run/`, `branches/`, `disks/`
    /// and `git/`, seeds missing prompts from the shipped defaults (never overwriting an
    /// edited one) and writes the git-ignore rules if absent. Safe to run on every start.
    /// Each of them must be a real directory: a link there (which a repository could commit,
    /// and git puts in place of an ignored one on checkout) would send the daemon's state,
    /// logs, worktrees and seeds elsewhere on the host, so it is refused.
    pub fn init(&self) -> Result<(), LayoutError> {
        for dir in self.own_dirs() {
            real_dir(&dir)?;
        }
        for (name, text) in DEFAULT_PROMPTS {
            create_new(&self.prompts().join(name), text)?;
        }
        create_new(&self.dir.join(".gitignore"), GITIGNORE)
    }
}

/// Makes `dir` a directory unless it is one; a link or a file there is an error.
fn real_dir(dir: &Path) -> Result<(), LayoutError> {
    let err = |source| LayoutError {
        path: dir.to_owned(),
        source,
    };
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(meta) if meta.is_symlink() => Err(err(std::io::Error::other(
            "it is a symbolic link; CodeButler keeps its files in a real directory of the \
             repository, so replace the link with a directory",
        ))),
        Ok(_) => Err(err(std::io::Error::other(
            "it is not a directory; move it away so CodeButler can make one",
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound => match std::fs::create_dir(dir) {
            Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(err(e)),
            _ => real_dir_made(dir),
        },
        Err(e) => Err(err(e)),
    }
}

/// Checks the directory just made (or made by someone else meanwhile) is one.
fn real_dir_made(dir: &Path) -> Result<(), LayoutError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(LayoutError {
            path: dir.to_owned(),
            source: std::io::Error::other("it is not a directory"),
        }),
        Err(source) => Err(LayoutError {
            path: dir.to_owned(),
            source,
        }),
    }
}

/// Creates (or empties) the file `path` of the daemon's own directories for writing, never
/// through a link at its place: a link there (a repository could commit one under
/// `.codebutler/`, and git replaces ignored files on checkout) makes it fail instead of
/// writing the link's target.
pub fn create_own_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Writes `bytes` into the file `path` of the daemon's own directories, as
/// [`create_own_file`] opens it.
pub fn write_own_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    create_own_file(path)?.write_all(bytes)
}

/// Replaces the file `path` with `bytes`, atomically and never through a link: the bytes go
/// into a new file beside it (created with `O_EXCL | O_NOFOLLOW` and `mode`, synced), which
/// is then renamed over `path` — a reader sees the old file or the new one, a crash leaves
/// one of them, and a link at `path` is refused (rename would replace it, and the operator
/// who made it would not expect that), never followed. For the files the operator's tools
/// write: the configs `codebutler init` edits, the service's unit.
pub fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(std::io::Error::other(
            "it is a symbolic link; write the file itself there, not a link",
        ));
    }
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?
        .to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.new-{}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)?;
        // The mode asked for, whatever the umask took away.
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Writes `text` to `path` unless the file exists.
fn create_new(path: &Path, text: &str) -> Result<(), LayoutError> {
    use std::io::Write;
    let err = |source| LayoutError {
        path: path.to_owned(),
        source,
    };
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut file) => file.write_all(text.as_bytes()).map_err(err),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_seeds_prompts_without_overwriting_edits() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        layout.init().unwrap();
        for (name, text) in DEFAULT_PROMPTS {
            assert_eq!(
                std::fs::read_to_string(layout.prompts().join(name)).unwrap(),
                text
            );
        }
        std::fs::write(layout.prompts().join("pm.md"), "edited").unwrap();
        layout.init().unwrap();
        assert_eq!(
            std::fs::read_to_string(layout.prompts().join("pm.md")).unwrap(),
            "edited"
        );
        assert!(layout.memory().is_dir());
    }

    #[test]
    fn gitignore_keeps_only_prompts_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let layout = Layout::new(dir.path());
        layout.init().unwrap();
        std::fs::write(layout.dir.join("config.json"), "{}").unwrap();
        std::fs::write(layout.store(), "").unwrap();
        std::fs::write(layout.memory().join("pm.md"), "m").unwrap();
        let ignored = |p: &str| repo.status_should_ignore(Path::new(p)).unwrap();
        assert!(ignored(".codebutler/config.json"));
        assert!(ignored(".codebutler/store.db"));
        assert!(ignored(".codebutler/branches/x/file"));
        assert!(!ignored(".codebutler/prompts/pm.md"));
        assert!(!ignored(".codebutler/memory/pm.md"));
    }

    /// A repository whose `.codebutler` or `.codebutler/prompts` is a link (committed, say)
    /// is refused: nothing is seeded or kept through it, elsewhere on the host.
    #[test]
    fn init_refuses_its_directories_as_links() {
        let outside = tempfile::tempdir().unwrap();
        for linked in [
            ".codebutler",
            ".codebutler/prompts",
            ".codebutler/memory",
            ".codebutler/run",
            ".codebutler/branches",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let layout = Layout::new(dir.path());
            let link = dir.path().join(linked);
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(outside.path(), &link).unwrap();
            let err = layout.init().unwrap_err().to_string();
            assert!(err.contains("symbolic link"), "{linked}: {err}");
            assert_eq!(
                std::fs::read_dir(outside.path()).unwrap().count(),
                0,
                "{linked}: something was written through the link"
            );
        }
    }

    /// A replaced file gets its mode whatever the umask, and a link in its place is refused,
    /// leaving the link's target as it was.
    #[test]
    fn replaced_files_have_their_mode_and_never_follow_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, "old").unwrap();
        replace_file(&path, b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let target = dir.path().join("target");
        std::fs::write(&target, "host file").unwrap();
        let link = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(replace_file(&link, b"new", 0o600).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "host file");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    /// The daemon's own files are written only where no link stands: a link at a log's or
    /// a spec's place (to a host file) makes the write fail and leaves the target as it was.
    #[test]
    fn own_files_are_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "kept").unwrap();
        let link = dir.path().join("init-x.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_own_file(&link).is_err());
        assert!(write_own_file(&link, b"written").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
        let own = dir.path().join("run-1.log");
        write_own_file(&own, b"first").unwrap();
        write_own_file(&own, b"2nd").unwrap();
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "2nd");
    }
}
