//! The service's log file: every line printed on stderr also goes to
//! `$CODEBUTLER_HOME/logs/<service>.log`, rotated by size — past `logging.maxFileMB` the file
//! becomes `<service>.log.1` (the older ones moving up to `.2` … `.<keepFiles>`, the oldest
//! dropped) and a new one starts.
//!
//! Written here rather than with a crate: the file holds thread text, so it is opened without
//! following a link (`O_NOFOLLOW`) and kept at mode 0600, which neither `tracing-appender`
//! (it rotates by time only) nor the size-rotating crates offer. A line is never split
//! between two files: the formatter hands over one whole line per write.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The mode of the log files and of the directory holding them: the owner's only.
const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

/// Where the log file goes and how it rotates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFileSettings {
    /// The directory, `$CODEBUTLER_HOME/logs`.
    pub dir: PathBuf,
    /// The service's name: the file is `<name>.log`.
    pub name: String,
    /// The size past which the file is rotated, in bytes.
    pub max_bytes: u64,
    /// How many rotated files are kept besides the current one.
    pub keep: u32,
}

/// A log file rotated by size.
#[derive(Debug)]
struct RotatingFile {
    settings: LogFileSettings,
    file: File,
    /// Bytes in the current file.
    written: u64,
}

impl RotatingFile {
    /// Opens (appending) the current file, creating the directory if needed.
    fn open(settings: LogFileSettings) -> io::Result<Self> {
        create_dir(&settings.dir)?;
        let file = open_current(&settings.current())?;
        let written = file.metadata()?.len();
        Ok(Self {
            settings,
            file,
            written,
        })
    }

    /// Writes one line, rotating first when it would pass the size.
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let size = u64::try_from(line.len()).unwrap_or(u64::MAX);
        if self.written > 0 && self.written.saturating_add(size) > self.settings.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.written = self.written.saturating_add(size);
        Ok(())
    }

    /// `<name>.log.<keep>` dropped, each older file moved up one, the current one to `.1`,
    /// and a new current file. Renames and removals act on a link itself, never its target.
    fn rotate(&mut self) -> io::Result<()> {
        let s = &self.settings;
        if s.keep == 0 {
            remove_if_there(&s.current())?;
        } else {
            remove_if_there(&s.rotated(s.keep))?;
            for n in (1..s.keep).rev() {
                rename_if_there(&s.rotated(n), &s.rotated(n + 1))?;
            }
            rename_if_there(&s.current(), &s.rotated(1))?;
        }
        self.file = open_current(&s.current())?;
        self.written = self.file.metadata()?.len();
        Ok(())
    }
}

impl LogFileSettings {
    /// The current file, `<dir>/<name>.log`.
    pub fn current(&self) -> PathBuf {
        current_file(&self.dir, &self.name)
    }

    /// The rotated file `n`, `<dir>/<name>.log.<n>`.
    pub fn rotated(&self, n: u32) -> PathBuf {
        self.dir.join(format!("{}.log.{n}", self.name))
    }
}

/// The current log file of the service `name` in `dir`, `<dir>/<name>.log` (what
/// `codebutler --logs` follows where journald does not hold the log).
pub fn current_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.log"))
}

/// The directory, made if missing (mode 0700); a link there is refused.
fn create_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::other(format!(
            "{} is not a directory (a link there is not followed)",
            dir.display()
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
        }
        Err(e) => Err(e),
    }
}

/// The current file opened for appending, never through a link, mode 0600 (also when it
/// was there already with another mode).
fn open_current(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", path.display())))?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_there(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The log file the subscriber writes to once [`LogFile::open`] has set it; until then
/// (and after a write fails) lines go to stderr only.
#[derive(Clone, Debug, Default)]
pub struct LogFile {
    inner: Arc<Mutex<Option<RotatingFile>>>,
}

impl LogFile {
    /// Starts writing to the file `settings` names.
    pub fn open(&self, settings: LogFileSettings) -> io::Result<()> {
        let file = RotatingFile::open(settings)?;
        *self.lock() = Some(file);
        Ok(())
    }

    /// Writes `line` to the file if one is open; a failed write closes it (said once on
    /// stderr), so logging never stops the service.
    pub(super) fn write(&self, line: &[u8]) {
        let mut guard = self.lock();
        if let Some(file) = guard.as_mut()
            && let Err(e) = file.write_line(line)
        {
            let path = file.settings.current();
            *guard = None;
            let _ = writeln!(
                io::stderr(),
                "the log file {} is closed: {e}; logging to stderr only",
                path.display()
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<RotatingFile>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path, max_bytes: u64, keep: u32) -> LogFileSettings {
        LogFileSettings {
            dir: dir.join("logs"),
            name: "svc".into(),
            max_bytes,
            keep,
        }
    }

    #[test]
    fn rotates_past_the_size_keeping_the_newest_files() {
        let tmp = tempfile::tempdir().unwrap();
        let log = LogFile::default();
        let s = settings(tmp.path(), 20, 2);
        log.open(s.clone()).unwrap();
        for n in 0..5 {
            log.write(format!("line {n} 123456789\n").as_bytes());
        }
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(s.current()), "line 4 123456789\n");
        assert_eq!(read(s.rotated(1)), "line 3 123456789\n");
        assert_eq!(read(s.rotated(2)), "line 2 123456789\n");
        assert!(!s.rotated(3).exists());
        let mode = std::fs::metadata(s.current()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_link_at_the_file_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let s = settings(tmp.path(), 1000, 1);
        std::fs::create_dir_all(&s.dir).unwrap();
        let target = tmp.path().join("target.txt");
        std::fs::write(&target, "kept\n").unwrap();
        std::os::unix::fs::symlink(&target, s.current()).unwrap();
        assert!(LogFile::default().open(s).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
    }
}
