//! systemd's notify protocol, for a unit of `Type=notify`: the service says when it is
//! ready (`READY=1`), what it is doing while it starts and stops (`STATUS=…`), that it is
//! stopping (`STOPPING=1`), and that it is alive (`WATCHDOG=1`, every half of the unit's
//! `WatchdogSec=`, which systemd passes as `WATCHDOG_USEC`). Each message is one datagram
//! to the Unix socket systemd names in `NOTIFY_SOCKET`: a path, or an abstract address
//! written `@name`.
//!
//! Written by hand rather than with a crate: the protocol is one `sendto` per message, and
//! the small crates for it do not reach abstract addresses. Without `NOTIFY_SOCKET` (not
//! started by systemd) every call does nothing. A message that cannot be sent is logged and
//! never stops the service: systemd, not the service, judges a missing `READY=1`.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Where systemd listens.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// The watchdog's period in microseconds (`WatchdogSec=`).
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// The process the watchdog is for, when systemd says.
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// Why the environment systemd gave cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("{NOTIFY_SOCKET}={0:?} is neither an absolute path nor an abstract address (@name)")]
    BadAddress(String),
    #[error("{NOTIFY_SOCKET}={0:?}: abstract socket addresses exist only on Linux")]
    AbstractUnsupported(String),
    #[error("{NOTIFY_SOCKET}={address:?}: {source}")]
    Socket {
        address: String,
        source: std::io::Error,
    },
    #[error("{WATCHDOG_USEC}={0:?} is not a number of microseconds above 0")]
    BadWatchdog(String),
}

/// Tells systemd how the service is doing; does nothing when systemd did not start it.
#[derive(Debug, Default)]
pub struct Notifier {
    target: Option<Target>,
    /// How often to say `WATCHDOG=1` (half the watchdog's period), if systemd watches.
    watchdog: Option<Duration>,
}

#[derive(Debug)]
struct Target {
    socket: UnixDatagram,
    address: SocketAddr,
}

impl Notifier {
    /// A notifier that says nothing (no service manager).
    pub fn none() -> Self {
        Self::default()
    }

    /// The notifier systemd's variables describe (`env` looks them up; `pid` is this
    /// process's): none without `NOTIFY_SOCKET`, pinging the watchdog when `WATCHDOG_USEC`
    /// is set for this process.
    pub fn from_env(env: impl Fn(&str) -> Option<String>, pid: u32) -> Result<Self, NotifyError> {
        let Some(raw) = env(NOTIFY_SOCKET).filter(|v| !v.is_empty()) else {
            return Ok(Self::none());
        };
        let address = address(&raw)?;
        let socket = UnixDatagram::unbound().map_err(|source| NotifyError::Socket {
            address: raw.clone(),
            source,
        })?;
        let for_us = env(WATCHDOG_PID)
            .and_then(|p| p.trim().parse::<u32>().ok())
            .is_none_or(|p| p == pid);
        let watchdog = match env(WATCHDOG_USEC).filter(|_| for_us) {
            None => None,
            Some(usec) => match usec.trim().parse::<u64>() {
                Ok(usec) if usec > 0 => Some(Duration::from_micros(usec) / 2),
                _ => return Err(NotifyError::BadWatchdog(usec)),
            },
        };
        Ok(Self {
            target: Some(Target { socket, address }),
            watchdog,
        })
    }

    /// Whether systemd listens.
    pub fn is_active(&self) -> bool {
        self.target.is_some()
    }

    /// How often the watchdog is pinged, if systemd watches the service.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// `STATUS=`: what the service is doing, one line.
    pub fn status(&self, text: &str) {
        self.send(&format!("STATUS={}", one_line(text)));
    }

    /// `READY=1`, with the status it is ready in.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// `STOPPING=1`, with what stopping does.
    pub fn stopping(&self, status: &str) {
        self.send(&format!("STOPPING=1\nSTATUS={}", one_line(status)));
    }

    /// Says `WATCHDOG=1` every [`Self::watchdog_interval`] until `stop` (at once, then on).
    /// Returns at once when systemd does not watch the service. It runs on the runtime that
    /// serves everything else, so a runtime that stops making progress stops the pings and
    /// systemd restarts the service.
    pub async fn keep_alive(self: Arc<Self>, stop: CancellationToken) {
        let Some(every) = self.watchdog else {
            return;
        };
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => self.send("WATCHDOG=1"),
            }
        }
    }

    fn send(&self, message: &str) {
        let Some(target) = &self.target else {
            return;
        };
        if let Err(e) = target
            .socket
            .send_to_addr(message.as_bytes(), &target.address)
        {
            tracing::warn!("tell systemd {:?}: {e}", first_word(message));
        }
    }
}

/// The socket address `raw` names: an absolute path, or `@name` for an abstract address.
fn address(raw: &str) -> Result<SocketAddr, NotifyError> {
    let socket_error = |source| NotifyError::Socket {
        address: raw.to_owned(),
        source,
    };
    if let Some(name) = raw.strip_prefix('@') {
        return abstract_address(raw, name.as_bytes());
    }
    if !raw.starts_with('/') {
        return Err(NotifyError::BadAddress(raw.to_owned()));
    }
    SocketAddr::from_pathname(raw).map_err(socket_error)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn abstract_address(raw: &str, name: &[u8]) -> Result<SocketAddr, NotifyError> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name).map_err(|source| NotifyError::Socket {
        address: raw.to_owned(),
        source,
    })
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn abstract_address(raw: &str, _name: &[u8]) -> Result<SocketAddr, NotifyError> {
    Err(NotifyError::AbstractUnsupported(raw.to_owned()))
}

/// `text` on one line: systemd reads each line of a message as an assignment.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn first_word(message: &str) -> &str {
    message.split(['=', '\n']).next().unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn systemd_variables_are_read_as_sd_notify_reads_them() {
        let none = Notifier::from_env(env(&[]), 7).unwrap();
        assert!(!none.is_active());
        assert_eq!(none.watchdog_interval(), None);

        let path = Notifier::from_env(
            env(&[
                (NOTIFY_SOCKET, "/run/systemd/notify"),
                (WATCHDOG_USEC, "60000000"),
            ]),
            7,
        )
        .unwrap();
        assert!(path.is_active());
        assert_eq!(path.watchdog_interval(), Some(Duration::from_secs(30)));

        // The watchdog is another process's.
        let other = Notifier::from_env(
            env(&[
                (NOTIFY_SOCKET, "@codebutler-test"),
                (WATCHDOG_USEC, "1000000"),
                (WATCHDOG_PID, "8"),
            ]),
            7,
        )
        .unwrap();
        assert_eq!(other.watchdog_interval(), None);

        assert!(matches!(
            Notifier::from_env(env(&[(NOTIFY_SOCKET, "relative/notify")]), 7),
            Err(NotifyError::BadAddress(_))
        ));
        assert!(matches!(
            Notifier::from_env(
                env(&[(NOTIFY_SOCKET, "/run/notify"), (WATCHDOG_USEC, "soon")]),
                7
            ),
            Err(NotifyError::BadWatchdog(_))
        ));
    }

    #[test]
    fn a_status_is_one_line() {
        assert_eq!(
            one_line("configuration:\n  missing `slack.botToken`\r\n"),
            "configuration: missing `slack.botToken`"
        );
    }
}
