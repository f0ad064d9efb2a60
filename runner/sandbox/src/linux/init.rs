//! The sandbox's PID 1 once the sandboxed process runs: an init that reaps every child,
//! forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the sandboxed process and exits with its
//! status (which ends everything left inside), and that serves the connect filter
//! ([`super::connect`]).
//!
//! One thread and one `poll` over a signalfd, the listener and the sockets of connects
//! waiting for a TCP handshake; connects waiting for a listen backlog are retried on a
//! timer. PID 1 blocks in nothing but that `poll`: each wake-up handles the signals first,
//! then at most one new call, so callers — however many, however hostile — can slow the
//! sandbox's own connects, never stop PID 1 from reaping and forwarding. Each thread has at
//! most one call pending, so pending connects are bounded by the process limit; past
//! [`MAX_PENDING`] more are answered as a timed-out connect would be.

#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::connect::{self, Pending, Policy, Served};
use super::notify::Listener;

/// Connects PID 1 finishes at once, at most.
pub const MAX_PENDING: usize = 1024;
/// How often pending connects are checked for callers that went away (killed).
const SWEEP: Duration = Duration::from_millis(500);
/// Exit code when PID 1 itself fails.
const EXIT_INIT_FAILED: i32 = 125;

/// A failed step of PID 1's loop: fatal, the sandbox ends.
#[derive(Debug, thiserror::Error)]
enum InitError {
    #[error("poll: more descriptors than poll takes ({0})")]
    TooManyFds(usize),
    #[error("poll: {0}")]
    Poll(Errno),
    #[error("read the signalfd: {0}")]
    ReadSignal(Errno),
    #[error("signal {0} is not one this system knows")]
    UnknownSignal(i64),
    #[error("waitpid: {0}")]
    Wait(Errno),
    #[error("receive a connect: {0}")]
    Receive(Errno),
    #[error("answer a connect: {0}")]
    Respond(Errno),
}

/// Runs PID 1 until `child` exits; returns the exit code to propagate (128 + signal if it
/// was killed). The signals of `signals` must be blocked.
pub(crate) fn run(
    child: Pid,
    signals: &nix::sys::signal::SigSet,
    listener: Listener,
    policy: &Policy,
) -> i32 {
    match Init::new(child, signals, listener, policy) {
        Ok(mut init) => init.run(),
        Err(e) => {
            eprintln!("codebutler-runner: sandbox init: {e}");
            EXIT_INIT_FAILED
        }
    }
}

struct Init<'a> {
    child: Pid,
    signals: SignalFd,
    /// `None` once no process is under the filter any more.
    listener: Option<Listener>,
    policy: &'a Policy,
    pending: Vec<Pending>,
}

impl<'a> Init<'a> {
    fn new(
        child: Pid,
        signals: &nix::sys::signal::SigSet,
        listener: Listener,
        policy: &'a Policy,
    ) -> Result<Self, Errno> {
        let signals =
            SignalFd::with_flags(signals, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
        Ok(Self {
            child,
            signals,
            listener: Some(listener),
            policy,
            pending: Vec::new(),
        })
    }

    fn run(&mut self) -> i32 {
        loop {
            match self.turn() {
                Ok(None) => {}
                Ok(Some(code)) => return code,
                Err(e) => {
                    eprintln!("codebutler-runner: sandbox init: {e}");
                    return EXIT_INIT_FAILED;
                }
            }
        }
    }

    /// One wake-up; `Some(code)` once the sandboxed process has exited.
    fn turn(&mut self) -> Result<Option<i32>, InitError> {
        let mut fds = vec![pollfd(self.signals.as_fd().as_raw_fd(), libc::POLLIN)];
        if let Some(l) = &self.listener {
            fds.push(pollfd(l.as_fd().as_raw_fd(), libc::POLLIN));
        }
        let listener_slot = self.listener.is_some().then_some(1);
        let first_handshake = fds.len();
        let mut handshakes = Vec::new();
        for (i, p) in self.pending.iter().enumerate() {
            if let Some(fd) = p.handshake_fd() {
                fds.push(pollfd(fd.as_raw_fd(), libc::POLLOUT));
                handshakes.push(i);
            }
        }
        let timeout = self.timeout(Instant::now());
        let nfds =
            libc::nfds_t::try_from(fds.len()).map_err(|_| InitError::TooManyFds(fds.len()))?;
        // SAFETY: `fds` holds `nfds` valid pollfd entries and outlives the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), nfds, timeout) };
        match Errno::result(rc) {
            Ok(_) => {}
            Err(Errno::EINTR) => return Ok(None),
            Err(e) => return Err(InitError::Poll(e)),
        }

        if fds[0].revents != 0 {
            if let Some(code) = self.on_signals()? {
                return Ok(Some(code));
            }
        }

        let now = Instant::now();
        let mut ready = vec![false; self.pending.len()];
        for (slot, i) in handshakes.iter().enumerate() {
            if fds[first_handshake + slot].revents != 0 {
                ready[*i] = true;
            }
        }
        self.advance_pending(now, &ready)?;

        if let Some(slot) = listener_slot {
            let revents = fds[slot].revents;
            if revents & libc::POLLIN != 0 {
                self.serve_one()?;
            } else if revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // No process is under the filter any more.
                self.listener = None;
            }
        }
        Ok(None)
    }

    /// Milliseconds to wait: until the next pending retry or deadline, at most [`SWEEP`]
    /// while connects are pending; forever otherwise.
    fn timeout(&self, now: Instant) -> libc::c_int {
        if self.pending.is_empty() {
            return -1;
        }
        let next = self
            .pending
            .iter()
            .filter_map(Pending::wake_at)
            .min()
            .map_or(SWEEP, |t| t.saturating_duration_since(now).min(SWEEP));
        // Round up, so that a retry is never early.
        let ms = next.as_micros().div_ceil(1000);
        libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
    }

    /// Drains the signalfd: SIGCHLD reaps, the others go to the sandboxed process.
    fn on_signals(&mut self) -> Result<Option<i32>, InitError> {
        loop {
            let info = match self.signals.read_signal() {
                Ok(Some(info)) => info,
                Ok(None) => return Ok(None),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(InitError::ReadSignal(e)),
            };
            let signo = i32::try_from(info.ssi_signo)
                .map_err(|_| InitError::UnknownSignal(i64::from(info.ssi_signo)))?;
            let sig =
                Signal::try_from(signo).map_err(|_| InitError::UnknownSignal(i64::from(signo)))?;
            if sig == Signal::SIGCHLD {
                if let Some(code) = self.reap()? {
                    return Ok(Some(code));
                }
            } else {
                match kill(self.child, sig) {
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(e) => eprintln!("codebutler-runner: forward {sig}: {e}"),
                }
            }
        }
    }

    /// Reaps every exited child; `Some(code)` if the sandboxed process was one of them.
    fn reap(&self) -> Result<Option<i32>, InitError> {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == self.child => return Ok(Some(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == self.child => {
                    return Ok(Some(128 + sig as i32));
                }
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return Ok(None),
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(e) => return Err(InitError::Wait(e)),
            }
        }
    }

    /// Answers the pending connects that ended; drops those whose caller went away.
    fn advance_pending(&mut self, now: Instant, ready: &[bool]) -> Result<(), InitError> {
        let Some(listener) = &self.listener else {
            self.pending.clear();
            return Ok(());
        };
        let mut kept = Vec::with_capacity(self.pending.len());
        for (mut p, ready) in self.pending.drain(..).zip(ready.iter().copied()) {
            if !listener.is_valid(p.id) {
                continue;
            }
            match p.advance(now, ready) {
                None => kept.push(p),
                Some(result) => respond(listener, p.id, result)?,
            }
        }
        self.pending = kept;
        Ok(())
    }

    /// Receives one call and serves it.
    fn serve_one(&mut self) -> Result<(), InitError> {
        let Some(listener) = &self.listener else {
            return Ok(());
        };
        let n = match listener.receive() {
            Ok(Some(n)) => n,
            Ok(None) => return Ok(()),
            Err(e) => return Err(InitError::Receive(e)),
        };
        match connect::serve(listener, &n, self.policy) {
            Served::Answer(result) => respond(listener, n.id, result),
            Served::Gone => Ok(()),
            Served::Pending(p) if self.pending.len() < MAX_PENDING => {
                self.pending.push(p);
                Ok(())
            }
            Served::Pending(p) => respond(listener, p.id, Err(p.timed_out())),
        }
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Answers a call; a caller that went away meanwhile is no error.
fn respond(listener: &Listener, id: u64, result: Result<(), Errno>) -> Result<(), InitError> {
    match listener.respond(id, result) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(InitError::Respond(e)),
    }
}
