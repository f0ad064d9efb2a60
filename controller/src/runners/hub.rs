//! The controller's side of one runner's hub: `RunnerHub` served on the one socket that
//! runner holds, so the controller knows which thread a call is for by the connection it
//! came in on — a runner can act only on its own thread.
//!
//! `Session` carries the runner's events to the supervisor and the supervisor's commands to
//! the runner. `Complete` sends the runner's model requests through the gateway (which adds
//! the key and records usage) and streams the reply back. `Fetch` fetches a web page for the
//! runner under the fetch policy; `McpTools` and `McpCall` reach the remote MCP servers of
//! the config under the same rules ([`super::mcp`]). `Commit` and `OpenPullRequest` commit, push and open a
//! pull request for the run's own worktree and branch (see [`crate::workspace::forge`]): the runner
//! names neither, so it cannot reach another thread's branch.

use crate::memory::seed;
use crate::memory::source::DefaultBranchMemory;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use codebutler_agent::conversation::ChatMessage;
use codebutler_proto::runner::v1::runner_hub_server::{RunnerHub, RunnerHubServer};
use codebutler_proto::runner::v1::{
    CommitRequest, CommitResponse, CompleteChunk, CompleteRequest, FetchRequest, FetchResponse,
    LeftOut, LeftOutReason, McpCallRequest, McpCallResponse, McpToolsRequest, McpToolsResponse,
    OpenPullRequestRequest, OpenPullRequestResponse, ReadMemoryRequest, ReadMemoryResponse,
    Refusal, RunnerCommand, RunnerEvent, ToolCallDelta, Usage, complete_chunk::Chunk,
};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::domain::PullRequestRef;
use crate::gateway::{CallContext, Completion, Gateway, GatewayError};
use crate::store::Store;

use super::fetch::FetchPolicy;
use super::mcp::RemoteMcp;
use super::resume::StoredConversation;
use super::thread_images::ThreadImages;
use crate::workspace::forge::{self, ForgeError};
use crate::workspace::prepared::Why;

/// The hub of one run.
#[derive(Debug)]
pub struct RunHub {
    pub run_id: String,
    pub ctx: CallContext,
    pub gateway: Arc<Gateway>,
    pub store: Store,
    pub fetch: Arc<FetchPolicy>,
    /// The run's remote MCP servers, called under the fetch policy's host rules.
    pub mcp: Arc<RemoteMcp>,
    /// Runner events go here (to the supervisor).
    pub events: mpsc::Sender<RunnerEvent>,
    /// Commands for the runner; taken by the one `Session` call.
    pub commands: Mutex<Option<mpsc::Receiver<RunnerCommand>>>,
    /// Cancels model calls in flight when the run ends.
    pub cancel: CancellationToken,
    /// Whether the runner has its task. A runner launched ahead of its plan's approval
    /// ([`super::standby`]) has not: until the task is sent, the hub answers nothing but the
    /// session, so nothing speculative calls a model, fetches, commits or reads memory,
    /// whatever the process in the sandbox tries.
    pub tasked: Arc<AtomicBool>,
    /// Coder model calls allowed per hour across all runs (`access.maxClaudeCallsPerHour`);
    /// beyond it the hub refuses and the runner stops, saying why. 0: no limit.
    pub calls_per_hour: u32,
    /// The run's worktree, where commits are made.
    pub worktree: PathBuf,
    /// The main repository, where the branch is copied and pushed from.
    pub repo: PathBuf,
    /// The worktree helper that reads the worktree's files for a commit.
    pub helper: crate::workspace::stage::Helper,
    /// The run's own branch (`codebutler/<slug>`), the only one it may push.
    pub branch: String,
    /// The `gh` executable (`github.cli`).
    pub gh: PathBuf,
    /// The Slack thread's web link for PR bodies; `None` for runs started by `runnerctl`.
    pub thread_link: Option<String>,
    /// The project's memory, as the default branch holds it (never the checkout's files).
    pub memory: DefaultBranchMemory,
    /// What of the run's conversation is stored; held across a call's store write, so the
    /// writes of concurrent calls do not interleave.
    pub stored: tokio::sync::Mutex<StoredConversation>,
    /// Why the run's last model call got no answer from any Coder model, if it did not: a
    /// run that ends on it is paused, not failed.
    pub outage: ModelOutage,
    /// The images shared in the thread, added to every call's task; read at the run's
    /// first model call and again when the thread's images changed
    /// ([`super::thread_images`]).
    pub images: std::sync::Mutex<Arc<ThreadImages>>,
}

/// Whether the provider failed a run's last model call (server errors, timeouts, no model
/// answering), and how: shared by the run's hub, which sees the calls, and its supervisor,
/// which decides how the run ended. Only the controller's own view of its calls sets it,
/// never what the runner says.
#[derive(Clone, Debug, Default)]
pub struct ModelOutage(Arc<std::sync::Mutex<Option<String>>>);

impl ModelOutage {
    fn set(&self, why: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }

    /// Why the last model call got no answer, if it did not.
    pub fn current(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl RunHub {
    /// Stores the opened pull request with the run's thread, which becomes `pr_opened`. The
    /// pull request exists whatever happens here, so a failure to store it is logged and the
    /// Coder still hears of its pull request (failing the call would have it open another).
    async fn record_pull_request(&self, pr: &forge::PullRequest) {
        let stored = PullRequestRef {
            number: pr.number,
            url: pr.url.clone(),
        };
        match self
            .store
            .record_pull_request(&self.ctx.thread, &stored)
            .await
        {
            Ok(true) => {
                tracing::info!(run = %self.run_id, thread = %self.ctx.thread, "thread is pr_opened")
            }
            Ok(false) => {
                tracing::info!(run = %self.run_id, "no stored thread to record the pull request with")
            }
            Err(e) => tracing::error!(
                run = %self.run_id,
                thread = %self.ctx.thread,
                "store pull request {} with the thread: {e}",
                pr.url
            ),
        }
    }

    /// Refuses a call from a runner that has no task yet (see [`RunHub::tasked`]).
    fn require_task(&self) -> Result<(), Status> {
        if self.tasked.load(Ordering::Acquire) {
            Ok(())
        } else {
            tracing::warn!(run = %self.run_id, "a call from a runner without a task refused");
            Err(Status::failed_precondition(
                "this runner has no task yet: nothing is answered before its plan is approved",
            ))
        }
    }

    /// Serves this hub on the runner's socket until `shutdown` fires.
    pub async fn serve(self, socket: tokio::net::UnixStream, shutdown: CancellationToken) {
        let incoming = futures::stream::iter([Ok::<_, std::io::Error>(socket)])
            .chain(futures::stream::pending());
        let result = tonic::transport::Server::builder()
            .add_service(RunnerHubServer::new(self))
            .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
            .await;
        if let Err(e) = result {
            tracing::warn!("runner hub stopped: {e}");
        }
    }
}

impl RunHub {
    /// Records a model call of the run: its usage and, for a turn of the Coder's (a call
    /// with tools that is not a compaction's summary turn), the conversation so far, so a
    /// crashed or interrupted run can continue.
    async fn record_call(
        &self,
        messages: &[ChatMessage],
        completion: &Completion,
        has_tools: bool,
    ) {
        let usage = &completion.usage;
        if let Err(e) = self
            .store
            .add_run_usage(
                &self.run_id,
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cost.unwrap_or(0.0),
            )
            .await
        {
            tracing::warn!(run = %self.run_id, "record run usage: {e}");
        }
        if !has_tools || codebutler_agent::compaction::is_summary_turn(messages) {
            return;
        }
        let conversation = match super::resume::after_call(messages, &completion.reply) {
            Ok(conversation) => conversation,
            // The one stored at the previous turn stays what "continue" resumes.
            Err(e) => {
                tracing::error!(run = %self.run_id, "write the run's conversation: {e}");
                return;
            }
        };
        let mut stored = self.stored.lock().await;
        if let Err(e) = stored.save(&self.store, &self.run_id, &conversation).await {
            tracing::warn!(run = %self.run_id, "store the run's conversation: {e}");
        }
    }
    /// Why the next model call must not be made, if it must not: the thread's budget is
    /// spent (see [`crate::gateway::budget`]), or the hourly call limit is reached.
    async fn refusal(&self) -> Option<String> {
        if let Some(reason) = crate::gateway::budget::refusal(&self.store, &self.ctx.thread).await {
            return Some(reason);
        }
        if self.calls_per_hour == 0 {
            return None;
        }
        let since = chrono::Utc::now() - chrono::Duration::hours(1);
        // Per person: the calls of the runs whoever started this one started. A run nobody
        // in Slack started (runnerctl) counts every Coder call.
        let counted = match self.store.run_starter(&self.run_id).await {
            Ok(Some(person)) => self
                .store
                .person_coder_calls_since(
                    &person,
                    &since.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                )
                .await
                .map(|(n, _)| (n, format!(" for the runs <@{person}> started"))),
            Ok(None) => self
                .store
                .calls_since(self.ctx.role, since)
                .await
                .map(|n| (n, String::new())),
            Err(e) => Err(e),
        };
        match counted {
            Ok((n, whose)) if n >= i64::from(self.calls_per_hour) => Some(format!(
                "the limit of {} Coder model calls per hour (access.maxClaudeCallsPerHour){whose} is reached",
                self.calls_per_hour
            )),
            Ok(_) => None,
            // Fail closed: without the count the limit cannot be checked.
            Err(e) => Some(format!("cannot check the hourly call limit: {e}")),
        }
    }
}

/// A forge failure as a status: the request's fault or the forge's.
fn forge_status(error: &ForgeError) -> Status {
    if error.is_precondition() {
        Status::failed_precondition(error.to_string())
    } else {
        Status::unavailable(error.to_string())
    }
}

fn joined(error: tokio::task::JoinError) -> Status {
    Status::internal(format!("git work did not finish: {error}"))
}

type ChunkStream = ReceiverStream<Result<CompleteChunk, Status>>;
type CommandStream = ReceiverStream<Result<RunnerCommand, Status>>;

#[tonic::async_trait]
impl RunnerHub for RunHub {
    type SessionStream = CommandStream;
    type CompleteStream = ChunkStream;

    async fn session(
        &self,
        request: Request<Streaming<RunnerEvent>>,
    ) -> Result<Response<CommandStream>, Status> {
        let mut commands = self
            .commands
            .lock()
            .ok()
            .and_then(|mut c| c.take())
            .ok_or_else(|| Status::failed_precondition("this run's session is already open"))?;
        let mut inbound = request.into_inner();
        let events = self.events.clone();
        // Once the runner has closed its events and every one is taken, the command stream
        // ends too: that is the runner's acknowledgement that its last event arrived.
        let (taken, mut all_taken) = oneshot::channel::<()>();
        tokio::spawn(async move {
            while let Ok(Some(event)) = inbound.message().await {
                if events.send(event).await.is_err() {
                    break;
                }
            }
            drop(taken);
        });
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let command = tokio::select! {
                    command = commands.recv() => command,
                    _ = &mut all_taken => None,
                };
                let Some(command) = command else { break };
                if tx.send(Ok(command)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn complete(
        &self,
        request: Request<CompleteRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        self.require_task()?;
        let request = request.into_inner();
        if let Some(reason) = self.refusal().await {
            tracing::warn!(tag = "CLD", run = %self.run_id, "model call refused: {reason}");
            let (tx, rx) = mpsc::channel(1);
            // A fresh channel with room for the one chunk: the send cannot wait or fail.
            if tx
                .try_send(Ok(CompleteChunk {
                    chunk: Some(Chunk::Refusal(Refusal { reason })),
                }))
                .is_err()
            {
                tracing::error!(run = %self.run_id, "send the refusal to the runner");
            }
            return Ok(Response::new(ReceiverStream::new(rx)));
        }
        let messages: Vec<ChatMessage> = serde_json::from_str(&request.messages_json)
            .map_err(|e| Status::invalid_argument(format!("messages_json: {e}")))?;
        let tools: Vec<serde_json::Value> = if request.tools_json.trim().is_empty() {
            Vec::new()
        } else {
            serde_json::from_str(&request.tools_json)
                .map_err(|e| Status::invalid_argument(format!("tools_json: {e}")))?
        };
        let has_tools = !tools.is_empty();
        let current = self
            .images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let images = ThreadImages::refreshed(
            current,
            &self.gateway,
            &self.ctx.model,
            &self.store,
            &self.repo,
            &self.ctx.thread,
        )
        .await;
        *self.images.lock().unwrap_or_else(|e| e.into_inner()) = images.clone();
        let completion = self
            .gateway
            .complete_with_tool_json(&self.ctx, &images.attach(&messages), tools, &self.cancel)
            .await
            .map_err(|e| {
                if e.is_model_failure() {
                    self.outage.set(Some(e.to_string()));
                }
                match e {
                    GatewayError::Cancelled => Status::cancelled("the run ended"),
                    other => Status::unavailable(other.to_string()),
                }
            })?;
        self.outage.set(None);
        self.record_call(&messages, &completion, has_tools).await;
        let (tx, rx) = mpsc::channel(16);
        let chunks = reply_chunks(completion);
        tokio::spawn(async move {
            for chunk in chunks {
                if tx
                    .send(Ok(CompleteChunk { chunk: Some(chunk) }))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn fetch(
        &self,
        request: Request<FetchRequest>,
    ) -> Result<Response<FetchResponse>, Status> {
        self.require_task()?;
        let request = request.into_inner();
        self.fetch
            .fetch(&request.url, request.max_bytes)
            .await
            .map(Response::new)
    }

    async fn commit(
        &self,
        request: Request<CommitRequest>,
    ) -> Result<Response<CommitResponse>, Status> {
        self.require_task()?;
        let CommitRequest { message, include } = request.into_inner();
        let (helper, repo, worktree) = (
            self.helper.clone(),
            self.repo.clone(),
            self.worktree.clone(),
        );
        let commit = tokio::task::spawn_blocking(move || {
            forge::commit_all(&helper, &repo, &worktree, &message, &include)
        })
        .await
        .map_err(joined)?
        .map_err(|e| forge_status(&e))?;
        if commit.nothing_to_commit {
            tracing::info!(tag = "CLD", run = %self.run_id, "commit: nothing to commit");
        } else {
            tracing::info!(
                tag = "CLD",
                run = %self.run_id,
                "committed {} on {} ({} files)",
                commit.sha,
                self.branch,
                commit.files_changed.len()
            );
        }
        Ok(Response::new(CommitResponse {
            sha: commit.sha,
            files_changed: commit.files_changed,
            nothing_to_commit: commit.nothing_to_commit,
            left_out: commit
                .left_out
                .into_iter()
                .map(|left| LeftOut {
                    path: left.path,
                    reason: match left.why {
                        Why::Prepared => LeftOutReason::Prepared,
                        Why::Byproduct => LeftOutReason::Byproduct,
                    } as i32,
                })
                .collect(),
        }))
    }

    async fn open_pull_request(
        &self,
        request: Request<OpenPullRequestRequest>,
    ) -> Result<Response<OpenPullRequestResponse>, Status> {
        self.require_task()?;
        let request = request.into_inner();
        if request.title.trim().is_empty() {
            return Err(forge_status(&ForgeError::EmptyTitle));
        }
        forge::push_branch(&self.repo, &self.worktree, &self.branch)
            .await
            .map_err(|e| forge_status(&e))?;
        let worktree = self.worktree.clone();
        let context = tokio::task::spawn_blocking(move || forge::pr_context(&worktree))
            .await
            .map_err(joined)?
            .map_err(|e| forge_status(&e))?;
        let body = forge::pr_body(&context, &request.body, self.thread_link.as_deref());
        let pr = forge::open_pr(&self.gh, &self.repo, &self.branch, &request.title, &body)
            .await
            .map_err(|e| forge_status(&e))?;
        tracing::info!(tag = "CLD", run = %self.run_id, "opened pull request {}", pr.url);
        self.record_pull_request(&pr).await;
        Ok(Response::new(OpenPullRequestResponse {
            url: pr.url,
            number: pr.number,
        }))
    }

    async fn read_memory(
        &self,
        request: Request<ReadMemoryRequest>,
    ) -> Result<Response<ReadMemoryResponse>, Status> {
        self.require_task()?;
        let role = match request.into_inner().role.trim() {
            "" => "pm".to_owned(),
            role => role.to_ascii_lowercase(),
        };
        if !MEMORY_ROLES.contains(&role.as_str()) {
            return Err(Status::invalid_argument(format!(
                "no memory for role {role:?}: roles with memory are {}",
                MEMORY_ROLES.join(", ")
            )));
        }
        let path = if role == "artist" {
            seed::ARTIST_PATH
        } else {
            seed::PM_PATH
        };
        // As last fetched: a tool call never waits on the network.
        let text = self.memory.file(path, false).await;
        Ok(Response::new(ReadMemoryResponse { role, text }))
    }

    async fn mcp_tools(
        &self,
        _request: Request<McpToolsRequest>,
    ) -> Result<Response<McpToolsResponse>, Status> {
        self.require_task()?;
        Ok(Response::new(self.mcp.tools().await))
    }

    async fn mcp_call(
        &self,
        request: Request<McpCallRequest>,
    ) -> Result<Response<McpCallResponse>, Status> {
        self.require_task()?;
        let request = request.into_inner();
        self.mcp
            .call(&request.server, &request.tool, &request.arguments_json)
            .await
            .map(Response::new)
    }
}

/// The roles that keep a memory file (`spec-v2.md` §13).
const MEMORY_ROLES: [&str; 2] = ["pm", "artist"];

/// A completion as the runner receives it: the text, the tool calls, then the usage.
fn reply_chunks(completion: Completion) -> Vec<Chunk> {
    let (reply, usage) = (completion.reply, completion.usage);
    let mut chunks = Vec::new();
    if let Some(text) = reply.content {
        chunks.push(Chunk::TextDelta(text));
    }
    for (index, call) in reply.tool_calls.into_iter().enumerate() {
        chunks.push(Chunk::ToolCallDelta(ToolCallDelta {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            id: call.id,
            name: call.function.name,
            arguments: call.function.arguments,
        }));
    }
    chunks.push(Chunk::Usage(Usage {
        prompt_tokens: u64::try_from(usage.prompt_tokens).unwrap_or(0),
        completion_tokens: u64::try_from(usage.completion_tokens).unwrap_or(0),
        cached_tokens: u64::try_from(usage.cached_tokens).unwrap_or(0),
        cost_usd: usage.cost.unwrap_or(0.0),
    }));
    chunks
}
