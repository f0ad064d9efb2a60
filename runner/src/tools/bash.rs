//! Bash: runs a shell command in the worktree.
//!
//! The kernel sandbox around the runner is the security boundary; this tool only makes sure
//! a command cannot outlive its call unnoticed or flood the runner. The command runs as
//! `bash -c` in its own process group, in the worktree root, with stdin at `/dev/null` and
//! the runner's own (already cleaned) environment. Stdout and stderr share one pipe, so the
//! output keeps the order in which it was written. On timeout, or when the call's future
//! is dropped, the whole process group is killed with SIGKILL. Only the head of the output
//! and a ring buffer of its tail are kept, so endless output costs bounded memory.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use codebutler_agent::conversation::ToolSpec;
use codebutler_agent::tool::{Tool, ToolError, parse_args};
use codebutler_agent::tools::path::RepoRoot;

const NAME: &str = "Bash";

/// How long processes left in the background may keep the output pipe open after the
/// shell itself has exited; their later output is not shown.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Bytes read from the output pipe at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Limits of the Bash tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashConfig {
    /// Timeout of a command that does not ask for one.
    pub default_timeout: Duration,
    /// Longest timeout a command may ask for.
    pub max_timeout: Duration,
    /// Most bytes of output returned (head and tail, with a marker in between).
    pub max_output_bytes: usize,
}

impl Default for BashConfig {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            max_output_bytes: 30_000,
        }
    }
}

/// The description offered with [`BashConfig::default`]; [`describe`] renders the same text
/// for any configuration.
const DEFAULT_DESCRIPTION: &str = "Run a shell command with `bash -c` in the worktree root (the working directory is the root again on every call) and return its combined stdout and stderr followed by the exit code. timeout is in seconds (default 120, max 600); on timeout the command and everything it started are killed. Output over 30000 bytes keeps only its beginning and end. Prefer Read, Edit, Grep and Glob over cat, sed, grep and find.";

fn describe(config: &BashConfig) -> String {
    format!(
        "Run a shell command with `bash -c` in the worktree root (the working directory is the root again on every call) and return its combined stdout and stderr followed by the exit code. timeout is in seconds (default {}, max {}); on timeout the command and everything it started are killed. Output over {} bytes keeps only its beginning and end. Prefer Read, Edit, Grep and Glob over cat, sed, grep and find.",
        seconds(config.default_timeout),
        seconds(config.max_timeout),
        config.max_output_bytes
    )
}

/// `d` in seconds as the model wrote it: `120`, `1.5`.
fn seconds(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// Runs shell commands in the worktree.
#[derive(Debug, Clone)]
pub struct BashTool {
    root: Arc<RepoRoot>,
    config: BashConfig,
    description: &'static str,
}

/// Bash's arguments.
#[doc(hidden)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Args {
    /// The shell command (bash syntax; pipes, && and redirections work).
    pub command: String,
    /// Timeout in seconds. The model reads the configured default and maximum instead of
    /// this text (see `parameters`).
    #[schemars(range(min = 1))]
    timeout: Option<f64>,
}

/// Bash's parameters: those of [`Args`], with the timeout's maximum and description taken
/// from `config`, since the limits are the runner's configuration rather than the type's.
/// [`BashTool::check_args`] enforces the same bounds.
fn parameters(config: &BashConfig) -> serde_json::Value {
    let mut schema = codebutler_agent::schema::parameters::<Args>();
    if let Some(serde_json::Value::Object(timeout)) = schema.pointer_mut("/properties/timeout") {
        timeout.insert(
            "maximum".to_owned(),
            serde_json::json!(config.max_timeout.as_secs_f64()),
        );
        timeout.insert(
            "description".to_owned(),
            serde_json::json!(format!(
                "Timeout in seconds (default {}, max {}).",
                seconds(config.default_timeout),
                seconds(config.max_timeout)
            )),
        );
    }
    schema
}

impl BashTool {
    /// A Bash running in `root` with the limits of `config`.
    pub fn new(root: Arc<RepoRoot>, config: BashConfig) -> Self {
        let description = if config == BashConfig::default() {
            DEFAULT_DESCRIPTION
        } else {
            // Tool specs hold static text; a runner builds its tools once.
            Box::leak(describe(&config).into_boxed_str())
        };
        Self {
            root,
            config,
            description,
        }
    }

    /// The model's arguments checked as a call checks them, without running anything: the
    /// command and its timeout. Public for the fuzz targets, which must never run a command.
    #[doc(hidden)]
    pub fn check_args(&self, args: serde_json::Value) -> Result<(Args, Duration), ToolError> {
        let args: Args = parse_args(NAME, args)?;
        if args.command.trim().is_empty() {
            return Err(invalid("command is empty".to_owned()));
        }
        let timeout = self.timeout(args.timeout)?;
        Ok((args, timeout))
    }

    fn timeout(&self, requested: Option<f64>) -> Result<Duration, ToolError> {
        let max = self.config.max_timeout;
        let Some(secs) = requested else {
            return Ok(self.config.default_timeout.min(max));
        };
        if !secs.is_finite() || secs < 1.0 {
            return Err(invalid(format!(
                "timeout is in seconds and must be at least 1, got {secs}"
            )));
        }
        if secs > max.as_secs_f64() {
            return Err(invalid(format!(
                "timeout is in seconds and may be at most {}, got {secs}; split long work into shorter commands",
                seconds(max)
            )));
        }
        Ok(Duration::from_secs_f64(secs))
    }
}

fn invalid(reason: String) -> ToolError {
    ToolError::InvalidArguments {
        tool: NAME.to_owned(),
        reason,
    }
}

fn failed(context: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(format!("{context}: {e}"))
}

/// A started command's process group, killed when dropped unless the command ended.
struct ProcessGroup {
    child: Child,
    pgid: Pid,
    armed: bool,
}

impl ProcessGroup {
    fn kill(&self) {
        match killpg(self.pgid, Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = %self.pgid, error = %e, "cannot kill a Bash process group")
            }
        }
    }
}

impl Drop for ProcessGroup {
    /// Cancellation: kills the group while its leader is still unreaped (so the group id
    /// cannot have been reused). Tokio reaps the dropped child in the background.
    fn drop(&mut self) {
        if self.armed {
            self.kill();
        }
    }
}

/// Reads from `pipe`, or never completes when it is closed.
async fn read_some(
    pipe: Option<&mut tokio::net::unix::pipe::Receiver>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buf).await,
        None => std::future::pending().await,
    }
}

/// How a command ended.
struct Outcome {
    output: OutputBuffer,
    status: ExitStatus,
    timed_out: bool,
    /// Background processes still held the output open when reading stopped.
    left_open: bool,
}

async fn run(
    root: &RepoRoot,
    command: &str,
    timeout: Duration,
    max_output: usize,
) -> Result<Outcome, ToolError> {
    let (reader, writer): (OwnedFd, OwnedFd) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| failed("cannot create a pipe", e))?;
    let writer_err = writer
        .try_clone()
        .map_err(|e| failed("cannot create a pipe", e))?;
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(root.root())
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_err))
        .process_group(0);
    let spawned = cmd.spawn();
    // The command holds the pipe's write ends; drop them so the pipe closes when the
    // command's processes are gone.
    drop(cmd);
    let child = spawned.map_err(|e| failed("cannot start bash", e))?;
    let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) else {
        return Err(ToolError::Failed(
            "bash exited before it could be watched".to_owned(),
        ));
    };
    let mut group = ProcessGroup {
        child,
        pgid: Pid::from_raw(pid),
        armed: true,
    };
    let mut pipe = Some(
        tokio::net::unix::pipe::Receiver::from_owned_fd(reader)
            .map_err(|e| failed("cannot read the command's output", e))?,
    );

    let mut output = OutputBuffer::new(max_output);
    let mut buf = vec![0u8; READ_CHUNK];
    let deadline = Instant::now() + timeout;
    let mut drain_until: Option<Instant> = None;
    let mut status: Option<ExitStatus> = None;
    let mut timed_out = false;
    let mut left_open = false;
    while pipe.is_some() || status.is_none() {
        tokio::select! {
            read = read_some(pipe.as_mut(), &mut buf), if pipe.is_some() => match read {
                Ok(0) => pipe = None,
                Ok(n) => output.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(error = %e, "cannot read a Bash command's output");
                    pipe = None;
                }
            },
            waited = group.child.wait(), if status.is_none() => {
                let waited = waited.map_err(|e| failed("cannot wait for bash", e))?;
                // Reaped: from here on the group id may be reused, so never signal it again.
                group.armed = false;
                status = Some(waited);
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            },
            () = tokio::time::sleep_until(deadline), if status.is_none() && !timed_out => {
                timed_out = true;
                group.kill();
            },
            () = tokio::time::sleep_until(drain_until.unwrap_or(deadline)), if drain_until.is_some() && pipe.is_some() => {
                left_open = true;
                pipe = None;
            },
        }
    }
    let Some(status) = status else {
        return Err(ToolError::Failed(
            "bash did not report an exit status".to_owned(),
        ));
    };
    Ok(Outcome {
        output,
        status,
        timed_out,
        left_open,
    })
}

fn status_line(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code: {code}");
    }
    if let Some(signal) = status.signal() {
        return match Signal::try_from(signal) {
            Ok(name) => format!("killed by signal {signal} ({name})"),
            Err(_) => format!("killed by signal {signal}"),
        };
    }
    format!("exit status: {status}")
}

fn render(outcome: &Outcome, timeout: Duration) -> String {
    let mut text = outcome.output.render();
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    if outcome.left_open {
        text.push_str(
            "[background processes still hold the output open; their later output is not shown]\n",
        );
    }
    if outcome.timed_out {
        text.push_str(&format!(
            "command timed out after {}s; it and every process it started were killed\n",
            seconds(timeout)
        ));
    }
    text.push_str(&status_line(outcome.status));
    text
}

#[async_trait]
impl Tool for BashTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME,
            description: self.description,
            parameters: parameters(&self.config),
        }
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn call(&self, args: serde_json::Value) -> Result<String, ToolError> {
        let (args, timeout) = self.check_args(args)?;
        let outcome = run(
            &self.root,
            &args.command,
            timeout,
            self.config.max_output_bytes,
        )
        .await?;
        Ok(render(&outcome, timeout))
    }
}

/// The first and last bytes of a stream: a head filled once, then a ring buffer holding the
/// most recent bytes. Memory stays at `max` bytes however much is pushed.
#[derive(Debug)]
pub(crate) struct OutputBuffer {
    head: Vec<u8>,
    head_cap: usize,
    tail: Vec<u8>,
    tail_cap: usize,
    /// Where the oldest tail byte is once the tail is full (and where the next one goes).
    tail_pos: usize,
    total: u64,
}

impl OutputBuffer {
    pub(crate) fn new(max: usize) -> Self {
        let head_cap = max / 2;
        let tail_cap = max - head_cap;
        Self {
            head: Vec::with_capacity(head_cap),
            head_cap,
            tail: Vec::with_capacity(tail_cap),
            tail_cap,
            tail_pos: 0,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let to_head = (self.head_cap - self.head.len()).min(data.len());
        self.head.extend_from_slice(&data[..to_head]);
        let mut data = &data[to_head..];
        if data.is_empty() || self.tail_cap == 0 {
            return;
        }
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend_from_slice(&data[data.len() - self.tail_cap..]);
            self.tail_pos = 0;
            return;
        }
        let to_fill = (self.tail_cap - self.tail.len()).min(data.len());
        self.tail.extend_from_slice(&data[..to_fill]);
        data = &data[to_fill..];
        while !data.is_empty() {
            let n = (self.tail_cap - self.tail_pos).min(data.len());
            self.tail[self.tail_pos..self.tail_pos + n].copy_from_slice(&data[..n]);
            self.tail_pos = (self.tail_pos + n) % self.tail_cap;
            data = &data[n..];
        }
    }

    /// Bytes held (at most the `max` given to [`OutputBuffer::new`]).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.head.capacity().max(self.head.len()) + self.tail.capacity().max(self.tail.len())
    }

    fn tail_bytes(&self) -> Vec<u8> {
        let mut out = self.tail[self.tail_pos..].to_vec();
        out.extend_from_slice(&self.tail[..self.tail_pos]);
        out
    }

    /// The output as text: everything if it fit, otherwise head, a marker saying how many
    /// bytes were left out, and tail.
    pub(crate) fn render(&self) -> String {
        let tail = self.tail_bytes();
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        // Cut at character boundaries rather than showing half a character.
        let head = match std::str::from_utf8(&self.head) {
            Err(e) if e.error_len().is_none() => &self.head[..e.valid_up_to()],
            _ => &self.head[..],
        };
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        let tail = &tail[skip..];
        let omitted = self.total - (head.len() + tail.len()) as u64;
        let head = String::from_utf8_lossy(head);
        let newline = if head.ends_with('\n') { "" } else { "\n" };
        format!(
            "{head}{newline}[… {omitted} bytes omitted …]\n{}",
            String::from_utf8_lossy(tail)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::worktree;
    use super::*;
    use serde_json::json;

    fn tool(root: &Arc<RepoRoot>) -> BashTool {
        BashTool::new(Arc::clone(root), BashConfig::default())
    }

    async fn run_cmd(root: &Arc<RepoRoot>, args: serde_json::Value) -> Result<String, ToolError> {
        tokio::time::timeout(Duration::from_secs(60), tool(root).call(args))
            .await
            .expect("Bash call hung")
    }

    /// Whether process `pid` still runs (a zombie waiting to be reaped counts as gone).
    fn running(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next());
                state != Some("Z") && state != Some("X")
            }
            Err(_) => false,
        }
    }

    /// Waits up to 10 s for `pid` to be gone.
    async fn gone(pid: i32) -> bool {
        for _ in 0..200 {
            if !running(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// The pid a command wrote to `file`, waiting up to 10 s for it to appear.
    async fn pid_from(dir: &std::path::Path, file: &str) -> i32 {
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
                if let Ok(pid) = text.trim().parse() {
                    return pid;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{file} was never written");
    }

    const BACKGROUND_SLEEPER: &str = "sleep 100 & echo $! > bg.pid; sleep 100";

    #[tokio::test]
    async fn output_and_exit_code() {
        let (_dir, root) = worktree(&[]);
        assert_eq!(
            run_cmd(&root, json!({"command": "echo hello; echo world"}))
                .await
                .unwrap(),
            "hello\nworld\nexit code: 0"
        );
        assert_eq!(
            run_cmd(&root, json!({"command": "printf partial; exit 7"}))
                .await
                .unwrap(),
            "partial\nexit code: 7"
        );
        assert_eq!(
            run_cmd(&root, json!({"command": "true"})).await.unwrap(),
            "(no output)\nexit code: 0"
        );
        assert_eq!(
            run_cmd(&root, json!({"command": "kill -TERM $$"}))
                .await
                .unwrap(),
            "(no output)\nkilled by signal 15 (SIGTERM)"
        );
    }

    #[tokio::test]
    async fn stderr_is_interleaved_with_stdout() {
        let (_dir, root) = worktree(&[]);
        assert_eq!(
            run_cmd(
                &root,
                json!({"command": "echo out1; echo err1 >&2; echo out2; echo err2 >&2; exit 3"})
            )
            .await
            .unwrap(),
            "out1\nerr1\nout2\nerr2\nexit code: 3"
        );
    }

    #[tokio::test]
    async fn runs_in_the_root_with_empty_stdin() {
        let (dir, root) = worktree(&[("marker.txt", "here\n")]);
        let out = run_cmd(&root, json!({"command": "pwd -P; cat; cat marker.txt"}))
            .await
            .unwrap();
        assert_eq!(
            out,
            format!("{}\nhere\nexit code: 0", root.root().display())
        );
        run_cmd(&root, json!({"command": "echo made > made.txt"}))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.txt")).unwrap(),
            "made\n"
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let (dir, root) = worktree(&[]);
        let started = std::time::Instant::now();
        let out = run_cmd(
            &root,
            json!({"command": format!("echo started; {BACKGROUND_SLEEPER}"), "timeout": 1}),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(30), "{out}");
        assert!(out.starts_with("started\n"), "{out}");
        assert!(out.contains("command timed out after 1s;"), "{out}");
        assert!(out.ends_with("killed by signal 9 (SIGKILL)"), "{out}");
        let pid = pid_from(dir.path(), "bg.pid").await;
        assert!(
            gone(pid).await,
            "background process {pid} survived the timeout"
        );
    }

    #[tokio::test]
    async fn cancellation_kills_the_whole_process_group() {
        let (dir, root) = worktree(&[]);
        let bash = tool(&root);
        let call = bash.call(json!({"command": BACKGROUND_SLEEPER}));
        let result = tokio::time::timeout(Duration::from_secs(2), call).await;
        assert!(
            result.is_err(),
            "the command should still have been running"
        );
        let pid = pid_from(dir.path(), "bg.pid").await;
        assert!(
            gone(pid).await,
            "background process {pid} survived cancellation"
        );
    }

    #[tokio::test]
    async fn background_processes_holding_the_output_do_not_block() {
        let (dir, root) = worktree(&[]);
        let started = std::time::Instant::now();
        let out = run_cmd(
            &root,
            json!({"command": "sleep 30 & echo $! > bg.pid; echo done"}),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(25), "{out}");
        assert_eq!(
            out,
            "done\n[background processes still hold the output open; their later output is not shown]\nexit code: 0"
        );
        let pid = pid_from(dir.path(), "bg.pid").await;
        if running(pid) {
            // Clean up after the test: the command ended normally, so nothing was killed.
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    #[tokio::test]
    async fn huge_output_keeps_head_and_tail() {
        let (_dir, root) = worktree(&[]);
        let out = run_cmd(
            &root,
            json!({"command": "echo first; yes | head -c 10000000; echo last"}),
        )
        .await
        .unwrap();
        assert!(out.len() < 30_000 + 200, "{}", out.len());
        assert!(out.starts_with("first\ny\ny\n"), "{}", &out[..20]);
        assert!(out.contains("\n[… 9970011 bytes omitted …]\n"), "{out}");
        assert!(
            out.ends_with("y\ny\nlast\nexit code: 0"),
            "{}",
            &out[out.len() - 40..]
        );
    }

    #[tokio::test]
    async fn endless_output_is_bounded_and_stopped_by_the_timeout() {
        let (_dir, root) = worktree(&[]);
        let out = run_cmd(&root, json!({"command": "yes", "timeout": 1}))
            .await
            .unwrap();
        assert!(out.len() < 30_000 + 300, "{}", out.len());
        assert!(out.contains(" bytes omitted …]"), "{out}");
        assert!(out.contains("command timed out after 1s;"), "{out}");
    }

    #[test]
    fn output_buffer_memory_is_bounded() {
        let mut buf = OutputBuffer::new(1000);
        let chunk: Vec<u8> = (0..=255u8).cycle().take(7777).collect();
        for _ in 0..2000 {
            buf.push(&chunk);
            buf.push(b"x");
        }
        assert!(buf.held() <= 1000 * 2, "{}", buf.held());
        assert_eq!(buf.head.len(), 500);
        assert_eq!(buf.tail.len(), 500);
        let tail = buf.tail_bytes();
        let mut expected: Vec<u8> = chunk[chunk.len() - 499..].to_vec();
        expected.push(b'x');
        assert_eq!(tail, expected);
        assert_eq!(&buf.head[..], &chunk[..500]);
    }

    #[test]
    fn output_buffer_keeps_short_output_whole_and_marks_the_gap() {
        let mut buf = OutputBuffer::new(10);
        buf.push(b"0123");
        buf.push(b"4567");
        assert_eq!(buf.render(), "01234567");
        buf.push(b"89");
        assert_eq!(buf.render(), "0123456789");
        buf.push(b"abc");
        assert_eq!(buf.render(), "01234\n[… 3 bytes omitted …]\n89abc");
        // Small pushes wrap around the ring.
        for c in b"defghij" {
            buf.push(&[*c]);
        }
        assert_eq!(buf.render(), "01234\n[… 10 bytes omitted …]\nfghij");
    }

    #[test]
    fn output_buffer_cuts_at_character_boundaries() {
        let mut buf = OutputBuffer::new(8);
        buf.push("aaaé".as_bytes()); // 5 bytes: head holds "aaa" and half of é
        buf.push(&[b'-'; 20]);
        buf.push("éz".as_bytes());
        assert_eq!(buf.render(), "aaa\n[… 21 bytes omitted …]\n-éz");
    }

    #[tokio::test]
    async fn invalid_timeouts_and_commands_are_refused() {
        let (_dir, root) = worktree(&[]);
        for (args, expected) in [
            (json!({"command": "true", "timeout": 601}), "at most 600"),
            (json!({"command": "true", "timeout": 120000}), "in seconds"),
            (json!({"command": "true", "timeout": 0}), "at least 1"),
            (json!({"command": "true", "timeout": -5}), "at least 1"),
            (json!({"command": "  "}), "command is empty"),
        ] {
            let err = run_cmd(&root, args.clone()).await.unwrap_err();
            assert!(
                matches!(&err, ToolError::InvalidArguments { tool, .. } if tool == "Bash"),
                "{args}: {err}"
            );
            assert!(err.to_string().contains(expected), "{args}: {err}");
        }
        assert_eq!(
            run_cmd(&root, json!({"command": "echo ok", "timeout": 600}))
                .await
                .unwrap(),
            "ok\nexit code: 0"
        );
    }

    /// The timeout the model is offered is the one a call accepts, for any configuration.
    #[test]
    fn the_timeout_schema_follows_the_config_that_checks_it() {
        let custom = BashConfig {
            default_timeout: Duration::from_secs(10),
            max_timeout: Duration::from_millis(30_500),
            ..BashConfig::default()
        };
        let (_dir, root) = worktree(&[]);
        let bash = BashTool::new(root, custom);
        assert_eq!(
            bash.spec().parameters["properties"]["timeout"],
            json!({
                "type": "number",
                "minimum": 1,
                "maximum": 30.5,
                "description": "Timeout in seconds (default 10, max 30.5)."
            })
        );
        assert!(
            bash.check_args(json!({"command": "true", "timeout": 30.5}))
                .is_ok()
        );
        assert!(
            bash.check_args(json!({"command": "true", "timeout": 1}))
                .is_ok()
        );
        for refused in [30.6, 0.9] {
            let err = bash
                .check_args(json!({"command": "true", "timeout": refused}))
                .unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidArguments { .. }),
                "{refused}: {err}"
            );
        }
    }

    #[test]
    fn the_default_description_matches_the_default_config() {
        assert_eq!(describe(&BashConfig::default()), DEFAULT_DESCRIPTION);
        let custom = BashConfig {
            max_output_bytes: 500,
            ..BashConfig::default()
        };
        let (_dir, root) = worktree(&[]);
        let spec = BashTool::new(root, custom).spec();
        assert!(spec.description.contains("Output over 500 bytes"));
    }
}
