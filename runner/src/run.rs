//! The runner's life: enter the sandbox, connect to the hub on fd 3, announce itself, take
//! the task, run the Coder loop, report how it ended. The task arrives over the hub — never
//! through argv or the environment, which hold no secret.
//!
//! If a sandbox step fails the model is never called: the failure (naming the step) is
//! reported over the hub and on stderr, and the runner exits non-zero.
//!
//! The last event (the ending, or the failed step) must reach the controller before the
//! process exits. So the runner closes its event stream and waits for the controller to
//! close the command stream, which the hub does once it has taken every event the runner
//! sent ([`ACK_TIMEOUT`] bounds the wait, should the controller be wedged).

#![allow(unsafe_code)]

use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use codebutler_proto::runner::v1::runner_command::Command;
use codebutler_proto::runner::v1::runner_hub_client::RunnerHubClient;
use codebutler_proto::runner::v1::{
    Failed, McpStdioServer, Notice, RunnerEvent, Started, runner_event::Event,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::agent::{CoderTask, DiskWatch, Ending, Inbox, run_coder};
use crate::hub::{HubError, HubForge, HubMcp, HubMemory, HubModel, HubWeb, connect};
use crate::quiesce::Quiescer;
use crate::tools::mcp::{McpTool, StdioServer};
use crate::tools::{
    AskUserTool, BashConfig, NotifyTool, Questions, ReadMemoryTool, WebFetchTool, coder_tools,
    forge_tools,
};
use codebutler_agent::compaction::Compaction;
use codebutler_agent::tool::{Tool, ToolRegistry};
use codebutler_agent::tools::path::RepoRoot;
use codebutler_sandbox::{SandboxMode, SandboxSpec, enter};

/// The inherited hub socket.
pub const HUB_FD: i32 = 3;
/// Longest wait, after the last event, for the controller to acknowledge the end of the
/// event stream by closing the command stream.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Cap on one tool result entering the conversation: above Bash's own output cap, so its
/// exit code (at the end) is kept.
const MAX_TOOL_OUTPUT: usize = 32 * 1024;

/// Runs the runner. Must be called while the process has a single thread (the sandbox
/// set-up requires it), so before any async runtime exists.
pub fn main(spec: &SandboxSpec) -> ExitCode {
    // SAFETY: fd 3 is the hub socket the launcher placed there for this process; nothing
    // else in this process owns it, and it is taken exactly once, here.
    let hub = unsafe { StdUnixStream::from_raw_fd(HUB_FD) };
    let setup = enter(spec)
        .map_err(|e| SetupFailure {
            step: "sandbox",
            message: e.to_string(),
        })
        .and_then(|report| {
            for warning in &report.warnings {
                eprintln!("codebutler-runner: WARNING: {warning}");
            }
            // The hub socket must not leak into the commands the Bash tool runs.
            set_cloexec(&hub).map_err(|e| SetupFailure {
                step: "hub_cloexec",
                message: e.to_string(),
            })?;
            Ok(match report.mode {
                SandboxMode::Enforce => Quiescer::Sandboxed,
                SandboxMode::None => Quiescer::None,
            })
        });
    // One thread: a run spends its life waiting on the model or on a tool's process, and
    // its blocking work (files, git) goes to tokio's blocking pool, whose threads end when
    // idle. Worker threads would each cost a stack and a malloc arena in every run, waiting
    // or not (tests/bench/README.md, "Many runs on one machine").
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("codebutler-runner: start async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let workdir = spec.mount_point.clone();
    runtime.block_on(async move {
        match session(hub, setup, workdir).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(error) => {
                eprintln!("codebutler-runner: {error}");
                ExitCode::from(1)
            }
        }
    })
}

fn set_cloexec(stream: &StdUnixStream) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let flags = FdFlag::from_bits_truncate(fcntl(stream, FcntlArg::F_GETFD)?);
    fcntl(stream, FcntlArg::F_SETFD(flags | FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// A step before the hub session that failed: reported as the run's `Failed` event.
#[derive(Debug)]
struct SetupFailure {
    step: &'static str,
    message: String,
}

/// Why the session with the controller ended early.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The hub socket could not carry a gRPC channel.
    #[error(transparent)]
    Connect(#[from] HubError),
    /// The controller did not open the session.
    #[error("open session: {0}")]
    Open(tonic::Status),
    /// The stream broke before the task came.
    #[error("receive task: {0}")]
    ReceiveTask(tonic::Status),
    /// The command stream ended before the task came.
    #[error("the controller closed the session before sending a task")]
    NoTask,
    /// The stored conversation to resume from is not valid JSON of messages.
    #[error("resume conversation: {0}")]
    Resume(serde_json::Error),
    /// The worktree cannot be opened.
    #[error("open {}: {source}", path.display())]
    Worktree {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Talks to the hub for the whole run. Returns whether the run completed without failure.
async fn session(
    hub: StdUnixStream,
    setup: Result<Quiescer, SetupFailure>,
    workdir: PathBuf,
) -> Result<bool, SessionError> {
    let channel = connect(hub).await?;
    let (events, event_rx) = mpsc::channel::<RunnerEvent>(64);
    let mut client = RunnerHubClient::new(channel.clone());
    let mut commands = client
        .session(ReceiverStream::new(event_rx))
        .await
        .map_err(SessionError::Open)?
        .into_inner();
    let quiescer = match setup {
        Ok(quiescer) => quiescer,
        Err(SetupFailure { step, message }) => {
            eprintln!("codebutler-runner: {message}");
            let failed = Event::Failed(Failed {
                step: step.to_owned(),
                message,
            });
            send(
                &events,
                RunnerEvent {
                    event: Some(failed),
                },
            )
            .await;
            drop(events);
            acknowledged(async move { while let Ok(Some(_)) = commands.message().await {} }).await;
            return Ok(false);
        }
    };
    let started = Event::Started(Started {
        runner_version: env!("CARGO_PKG_VERSION").to_owned(),
    });
    send(
        &events,
        RunnerEvent {
            event: Some(started),
        },
    )
    .await;

    // The first command is the task.
    let task = loop {
        match commands
            .message()
            .await
            .map_err(SessionError::ReceiveTask)?
        {
            Some(cmd) => match cmd.command {
                Some(Command::Task(task)) => break task,
                Some(Command::Cancel(_)) => return Ok(false),
                _ => continue,
            },
            None => return Err(SessionError::NoTask),
        }
    };
    let context_window = task.context_window;
    let resume = if task.resume_messages_json.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&task.resume_messages_json).map_err(SessionError::Resume)?
    };
    let root = RepoRoot::new(&workdir).map_err(|source| SessionError::Worktree {
        path: workdir.clone(),
        source,
    })?;
    let mut tools = ToolRegistry::new(MAX_TOOL_OUTPUT);
    for tool in coder_tools(Arc::new(root), BashConfig::default()) {
        tools.register(tool);
    }
    for tool in forge_tools(Arc::new(HubForge::new(channel.clone(), quiescer))) {
        tools.register(tool);
    }
    tools.register(Arc::new(NotifyTool::new(events.clone())));
    tools.register(Arc::new(WebFetchTool::new(Arc::new(HubWeb::new(
        channel.clone(),
    )))));
    tools.register(Arc::new(ReadMemoryTool::new(Arc::new(HubMemory::new(
        channel.clone(),
    )))));
    let questions = Questions::new();
    tools.register(Arc::new(AskUserTool::new(
        questions.clone(),
        events.clone(),
    )));
    // The MCP servers' tools come last. A server that cannot be used is said in the thread;
    // the run goes on without its tools. The stdio servers live as long as `_servers`.
    let (mcp_tools, problems, mcp_servers) =
        mcp_tools(&task.mcp_stdio_servers, &workdir, channel.clone()).await;
    for tool in mcp_tools {
        tools.register(tool);
    }
    if !problems.is_empty() {
        let text = format!(
            "Some MCP tools are not available to this run: {}",
            problems.join("; ")
        );
        send(
            &events,
            RunnerEvent {
                event: Some(Event::Notice(Notice { text })),
            },
        )
        .await;
    }

    // Commands after the task go to the loop's inbox, except answers, which go to the
    // AskUser call waiting for them.
    let (inbox_tx, mut inbox) = mpsc::channel(16);
    let reader = tokio::spawn(async move {
        while let Ok(Some(cmd)) = commands.message().await {
            let item = match cmd.command {
                Some(Command::UserMessage(m)) => Inbox::UserMessage {
                    text: m.text,
                    author: m.author,
                },
                Some(Command::Cancel(c)) => Inbox::Cancel { reason: c.reason },
                Some(Command::Answer(a)) => {
                    if !questions.answer(&a.question_id, a.text) {
                        eprintln!(
                            "codebutler-runner: an answer to {:?} arrived, but no question waits for it",
                            a.question_id
                        );
                    }
                    continue;
                }
                _ => continue,
            };
            if inbox_tx.send(item).await.is_err() {
                // The run is over and its inbox closed: nothing acts on this command. Keep
                // reading, since the stream's end is the acknowledgement the runner awaits.
            }
        }
        // The command stream ended. After the run, that is the controller's acknowledgement
        // of the last event, and the loop's inbox is closed. During the run, the controller
        // is gone (it stopped or crashed): no call can reach the model any more, and a
        // restarted controller reports the run and resumes it from its stored conversation.
        // Stop now rather than go on changing the worktree behind its back.
        if !inbox_tx.is_closed() {
            let gone = Inbox::Cancel {
                reason: "the controller went away".into(),
            };
            if inbox_tx.send(gone).await.is_err() {
                // The run ended meanwhile: nothing is left to stop.
            }
        }
    });

    let model = HubModel::new(channel).with_usage_events(events.clone());
    let coder_task = CoderTask {
        system_prompt: task.system_prompt,
        plan: task.plan,
        max_turns: task.max_turns,
        timeout: Duration::from_secs(u64::from(task.timeout_seconds)),
        resume,
        disk: Some(DiskWatch {
            path: workdir.clone(),
            min_free_bytes: DiskWatch::MIN_FREE_BYTES,
        }),
    };
    let mut compaction = Compaction::default();
    if context_window > 0 {
        compaction.context_window = context_window;
    }
    let (ending, _conversation) =
        run_coder(&model, &tools, coder_task, compaction, &mut inbox, &events).await;
    let ok = !matches!(ending, Ending::ModelFailed { .. });
    send(&events, ending.to_event()).await;
    // Close the event stream: every sender goes (the tools and the model hold some).
    drop((tools, model, events, inbox, mcp_servers));
    acknowledged(async move {
        if let Err(e) = reader.await {
            eprintln!("codebutler-runner: the command reader failed: {e}");
        }
    })
    .await;
    Ok(ok)
}

/// The tools of the run's MCP servers: the stdio ones started here, in the sandbox, and the
/// remote ones listed by the controller. Returns the tools, a line per server or tool that
/// is not offered, and the stdio servers (which stop when dropped).
async fn mcp_tools(
    stdio: &[McpStdioServer],
    workdir: &std::path::Path,
    channel: tonic::transport::Channel,
) -> (Vec<Arc<dyn Tool>>, Vec<String>, Vec<Arc<StdioServer>>) {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut problems = Vec::new();
    let mut servers = Vec::new();
    for server in stdio {
        match StdioServer::start(&server.name, &server.command, &server.args, workdir).await {
            Ok((started, offered, left_out)) => {
                problems.extend(left_out);
                for tool in offered {
                    tools.push(Arc::new(McpTool::new(tool, started.clone())));
                }
                servers.push(started);
            }
            Err(e) => problems.push(format!("{}: {e}", server.name)),
        }
    }
    match HubMcp::remote_tools(channel).await {
        Ok((remote, left_out)) => {
            problems.extend(left_out);
            for (hub, tool) in remote {
                tools.push(Arc::new(McpTool::new(tool, Arc::new(hub))));
            }
        }
        Err(e) => problems.push(format!("remote MCP servers: {e}")),
    }
    (tools, problems, servers)
}

/// Sends one event to the controller. A closed stream means the controller is gone; the
/// event is lost with it, so say so on stderr (which the controller's log keeps).
async fn send(events: &mpsc::Sender<RunnerEvent>, event: RunnerEvent) {
    if events.send(event).await.is_err() {
        eprintln!("codebutler-runner: the controller is gone; an event was not delivered");
    }
}

/// Waits for the controller to close the command stream (`closed`), its acknowledgement
/// that it has taken every event; at most [`ACK_TIMEOUT`].
async fn acknowledged(closed: impl Future<Output = ()>) {
    if tokio::time::timeout(ACK_TIMEOUT, closed).await.is_err() {
        eprintln!(
            "codebutler-runner: the controller did not acknowledge the last event within {}s",
            ACK_TIMEOUT.as_secs()
        );
    }
}
