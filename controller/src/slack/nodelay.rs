//! Nagle's algorithm off on the Socket Mode connection, which slack-morphism does not offer.
//!
//! slack-morphism opens the websocket with tokio-tungstenite's `connect_async`, which leaves
//! Nagle's algorithm on, and has no setting for it. Each acknowledgement is a small write;
//! with Nagle on, one written while the previous one is still unacknowledged waits for that
//! ACK, and a peer that delays its ACKs to send them with its next event makes every ack wait
//! for the next event. Against the fake Slack, once a burst of events had put the connection
//! in that rhythm, acks took 5–6 ms instead of 1 for seconds at a time, while the daemon had
//! stored each message in half a millisecond (tests/bench/README.md: many runs on one machine);
//! against Slack, the wait is up to a round trip.
//!
//! The daemon cannot reach slack-morphism's socket, so at every `hello` (a new connection) it
//! turns Nagle off on each TCP socket of its own process: it takes a duplicate of the
//! descriptor (`pidfd_getfd` on its own pidfd), sets `TCP_NODELAY` on it and closes the
//! duplicate; the socket itself is shared, so the setting holds. Its other TCP sockets are
//! HTTP clients (Slack's Web API, the model provider) and listeners, for which Nagle only
//! adds latency too. Linux only: elsewhere nothing is done.

/// Sets `TCP_NODELAY` on every TCP socket of this process; returns how many. Blocking (it
/// reads `/proc/self/fd`).
#[cfg(target_os = "linux")]
pub fn disable_nagle() -> std::io::Result<usize> {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};

    let own = pidfd_open(getpid(), PidfdFlags::empty())?;
    let mut set = 0;
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let entry = entry?;
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // Only sockets; the descriptor may be gone (or reused) by now, which is harmless.
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        let Ok(duplicate) = pidfd_getfd(&own, fd, PidfdGetfdFlags::empty()) else {
            continue;
        };
        // Unix and UDP sockets refuse the option: only TCP ones count.
        if rustix::net::sockopt::set_tcp_nodelay(&duplicate, true).is_ok() {
            set += 1;
        }
    }
    Ok(set)
}

/// Elsewhere: nothing (see the module documentation).
#[cfg(not(target_os = "linux"))]
pub fn disable_nagle() -> std::io::Result<usize> {
    Ok(0)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Both ends of a TCP connection of this process get `TCP_NODELAY`.
    #[test]
    fn tcp_sockets_of_this_process_get_nodelay() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let _unix = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(!client.nodelay().unwrap());
        assert!(!server.nodelay().unwrap());
        let set = disable_nagle().unwrap();
        assert!(set >= 3, "the listener and both ends: {set}");
        assert!(client.nodelay().unwrap());
        assert!(server.nodelay().unwrap());
    }
}
