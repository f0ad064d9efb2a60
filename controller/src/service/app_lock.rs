//! One service per Slack app on a host: `$CODEBUTLER_HOME/run/slack-app-<digest>.lock`,
//! held with `flock` for as long as the service runs (like [`crate::repo_lock`], whose
//! helper it uses), keyed by a SHA-256 digest of the app token so two apps on one host each
//! get their own service and no token ends up in a file name. Slack spreads an app's events
//! over all its open Socket Mode connections, so a second process on the same app would
//! silently take about half of the first one's events; this lock refuses it at start, with
//! the holder's pid. Across hosts, [`super::connections`] does the same from Slack's own
//! connection count.

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::Flock;
use sha2::{Digest, Sha256};

use crate::repo_lock::{self, LockError};
use crate::secret::Secret;

/// The Slack app's lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum AppLockError {
    #[error(
        "another CodeButler{} is already connected to this Slack app ({}): one service per Slack app, \
         since Slack would split the app's events between the two; list every repository under \
         `repositories` in the global config and run one codebutler",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        path.display()
    )]
    Held { path: PathBuf, pid: Option<u32> },
    #[error(transparent)]
    Io(LockError),
}

/// The Slack app's lock, held until dropped.
#[derive(Debug)]
pub struct AppLock {
    _lock: Flock<File>,
}

impl AppLock {
    /// Takes the lock of the app whose app-level token is `app_token`, under the global
    /// config directory `home`, without waiting.
    pub fn take(home: &Path, app_token: &Secret) -> Result<Self, AppLockError> {
        match repo_lock::exclusive(&path(home, app_token)) {
            Ok(lock) => Ok(Self { _lock: lock }),
            Err(LockError::Held { path, pid }) => Err(AppLockError::Held { path, pid }),
            Err(e) => Err(AppLockError::Io(e)),
        }
    }
}

/// The lock file of the app with token `app_token`: `<home>/run/slack-app-<16 hex>.lock`.
pub fn path(home: &Path, app_token: &Secret) -> PathBuf {
    let digest = Sha256::digest(app_token.expose().as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    home.join("run").join(format!("slack-app-{hex}.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_per_app_token_and_none_in_the_file_name() {
        let home = tempfile::tempdir().unwrap();
        let app = Secret::new("xapp-1-A1-secret");
        let first = AppLock::take(home.path(), &app).unwrap();
        let e = AppLock::take(home.path(), &app).unwrap_err();
        let pid = std::process::id();
        assert!(
            matches!(&e, AppLockError::Held { pid: Some(p), .. } if *p == pid),
            "{e:?}"
        );
        assert!(
            e.to_string().starts_with(&format!(
                "another CodeButler (pid {pid}) is already connected to this Slack app"
            )),
            "{e}"
        );
        // Another app on the same host has its own lock.
        let other = AppLock::take(home.path(), &Secret::new("xapp-2-A2-other")).unwrap();
        let name = path(home.path(), &app);
        assert!(
            !name.to_string_lossy().contains("secret"),
            "{}",
            name.display()
        );
        drop(first);
        let again = AppLock::take(home.path(), &app).unwrap();
        drop((again, other));
    }
}
