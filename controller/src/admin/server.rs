//! The admin API `runnerctl` talks to, on `<repo>/.codebutler/run/admin.sock` (mode 0600:
//! only the controller's user). List runs, show one, follow a run's events live, cancel,
//! and start a run from a plan in a fresh worktree.

use std::path::Path;

use codebutler_proto::runner::v1::admin_server::{Admin, AdminServer};
use codebutler_proto::runner::v1::{
    CancelRunRequest, CancelRunResponse, FollowRunRequest, GetRunRequest, ListRunsRequest,
    ListRunsResponse, RunDetail, RunEventRecord, RunSummary, RunnerEvent, StartRunRequest,
    StartRunResponse,
};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::domain::{RunRecord, RunState, ThreadKey};
use crate::layout::Layout;
use crate::runners::supervisor::{Reporting, RunRequest, Supervisor, Workspace};
use crate::store::ThreadRecord;

/// The channel id recorded for runs started from `runnerctl` rather than Slack.
pub const CLI_CHANNEL: &str = "runnerctl";

/// The admin service.
#[derive(Clone, Debug)]
pub struct AdminService {
    pub supervisor: Supervisor,
    pub layout: Layout,
    /// The project's instructions for its pull requests, for the Coder's prompt.
    pub pr_instructions: Option<String>,
}

/// Serves the admin API on its socket until `shutdown`; the socket file is removed after.
pub async fn serve(service: AdminService, shutdown: CancellationToken) -> std::io::Result<()> {
    let path = service.layout.admin_socket();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    remove_stale(&path)?;
    let listener = tokio::net::UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    let result = tonic::transport::Server::builder()
        .add_service(AdminServer::new(service))
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            shutdown.cancelled_owned(),
        )
        .await;
    if let Err(e) = remove_stale(&path) {
        tracing::warn!("remove admin socket {}: {e}", path.display());
    }
    result.map_err(std::io::Error::other)
}

fn remove_stale(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn unix_ms(rfc3339: Option<&str>) -> i64 {
    rfc3339
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(0, |t| t.timestamp_millis())
}

fn proto_state(state: RunState) -> i32 {
    use codebutler_proto::runner::v1::RunState as P;
    (match state {
        RunState::Queued => P::Queued,
        RunState::Running => P::Running,
        RunState::Finished => P::Finished,
        RunState::Failed => P::Failed,
        RunState::Cancelled => P::Cancelled,
        RunState::Interrupted => P::Interrupted,
        RunState::Paused => P::Paused,
    }) as i32
}

/// The run id as the protocol's number (the supervisor makes them numeric); an id that is
/// not is shown as 0, and logged.
fn proto_run_id(id: &str) -> u64 {
    id.parse().unwrap_or_else(|e| {
        tracing::warn!("run id {id:?} is not a number ({e}): shown as 0");
        0
    })
}

/// The run's figures, with its thread's lifecycle state from `thread`.
fn summary(run: &RunRecord, thread: Option<&ThreadRecord>) -> RunSummary {
    RunSummary {
        thread_state: thread.map_or("", |t| t.stage.lifecycle()).to_owned(),
        thread_ts: run.thread.thread_ts.clone(),
        run_id: proto_run_id(&run.id),
        state: proto_state(run.state),
        turns: u32::try_from(run.turns).unwrap_or(0),
        prompt_tokens: u64::try_from(run.prompt_tokens).unwrap_or(0),
        completion_tokens: u64::try_from(run.completion_tokens).unwrap_or(0),
        cost_usd: run.cost,
        created_at_unix_ms: unix_ms(Some(&run.created_at)),
        started_at_unix_ms: unix_ms(run.started_at.as_deref()),
        ended_at_unix_ms: unix_ms(run.ended_at.as_deref()),
        ending_reason: run.ending.clone().unwrap_or_default(),
        exit_code: run.exit_code.and_then(|c| i32::try_from(c).ok()),
    }
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

impl AdminService {
    /// The stored record of `run`'s thread, if it has one.
    async fn thread_of(&self, run: &RunRecord) -> Result<Option<ThreadRecord>, Status> {
        self.supervisor
            .store()
            .thread_record(&run.thread)
            .await
            .map_err(internal)
    }

    async fn latest(&self, thread_ts: &str) -> Result<RunRecord, Status> {
        self.supervisor
            .store()
            .latest_run(thread_ts)
            .await
            .map_err(internal)?
            .ok_or_else(|| Status::not_found(format!("no run for thread {thread_ts}")))
    }
}

type FollowStream = ReceiverStream<Result<RunEventRecord, Status>>;

#[tonic::async_trait]
impl Admin for AdminService {
    type FollowRunStream = FollowStream;

    async fn list_runs(
        &self,
        request: Request<ListRunsRequest>,
    ) -> Result<Response<ListRunsResponse>, Status> {
        let request = request.into_inner();
        let limit = if request.limit == 0 {
            50
        } else {
            i64::from(request.limit)
        };
        let runs = self
            .supervisor
            .store()
            .list_runs(request.active_only, limit)
            .await
            .map_err(internal)?;
        let mut summaries = Vec::with_capacity(runs.len());
        for run in &runs {
            summaries.push(summary(run, self.thread_of(run).await?.as_ref()));
        }
        Ok(Response::new(ListRunsResponse { runs: summaries }))
    }

    async fn get_run(
        &self,
        request: Request<GetRunRequest>,
    ) -> Result<Response<RunDetail>, Status> {
        let run = self.latest(&request.into_inner().thread_ts).await?;
        let events = self
            .supervisor
            .store()
            .run_events(&run.id, 0)
            .await
            .map_err(internal)?;
        let limits = self.supervisor.limits();
        let branch = Path::new(&run.worktree)
            .file_name()
            .map(|n| format!("codebutler/{}", n.to_string_lossy()))
            .unwrap_or_default();
        let thread = self.thread_of(&run).await?;
        let pr = thread.as_ref().and_then(|t| t.pull_request.clone());
        Ok(Response::new(RunDetail {
            summary: Some(summary(&run, thread.as_ref())),
            pr_number: pr.as_ref().map_or(0, |pr| pr.number),
            pr_url: pr.map(|pr| pr.url).unwrap_or_default(),
            plan: run.plan.clone(),
            model: run.model.clone(),
            max_turns: u32::try_from(run.max_turns).unwrap_or(0),
            timeout_seconds: u32::try_from(limits.timeout.as_secs()).unwrap_or(u32::MAX),
            branch,
            worktree_path: run.worktree.clone(),
            runner_pid: run
                .runner_pid
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(0),
            last_event_seq: events
                .last()
                .map_or(0, |(seq, _)| u64::try_from(*seq).unwrap_or(0)),
        }))
    }

    async fn follow_run(
        &self,
        request: Request<FollowRunRequest>,
    ) -> Result<Response<FollowStream>, Status> {
        let request = request.into_inner();
        let run = self.latest(&request.thread_ts).await?;
        // Subscribe before reading the stored events, so nothing falls in between.
        let mut live = self.supervisor.subscribe();
        let stored = self
            .supervisor
            .store()
            .run_events(&run.id, 0)
            .await
            .map_err(internal)?;
        let now = self
            .supervisor
            .store()
            .run(&run.id)
            .await
            .map_err(internal)?;
        let finished = now.is_some_and(|r| r.state.is_final());
        let (tx, rx) = mpsc::channel(64);
        let run_id = run.id.clone();
        tokio::spawn(async move {
            let mut last = -1;
            for (seq, bytes) in stored {
                last = seq;
                if !request.from_start {
                    continue;
                }
                let Ok(event) = RunnerEvent::decode(bytes.as_slice()) else {
                    continue;
                };
                let record = RunEventRecord {
                    seq: u64::try_from(seq).unwrap_or(0),
                    at_unix_ms: 0,
                    event: Some(event),
                };
                if tx.send(Ok(record)).await.is_err() {
                    return;
                }
            }
            if finished {
                return;
            }
            loop {
                match live.recv().await {
                    Ok(e) if e.run_id != run_id => {}
                    Ok(e) if e.ended.is_some() => return,
                    Ok(e) if e.seq > last => {
                        last = e.seq;
                        let record = RunEventRecord {
                            seq: u64::try_from(e.seq).unwrap_or(0),
                            at_unix_ms: e.at_unix_ms,
                            event: Some(e.event),
                        };
                        if tx.send(Ok(record)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        let lost =
                            Status::data_loss(format!("{n} events were missed; follow again"));
                        if tx.send(Err(lost)).await.is_err() {
                            tracing::debug!("run follower left before hearing it lagged");
                        }
                        return;
                    }
                    Err(_) => return,
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel_run(
        &self,
        request: Request<CancelRunRequest>,
    ) -> Result<Response<CancelRunResponse>, Status> {
        let request = request.into_inner();
        let reason = if request.reason.is_empty() {
            "cancelled with runnerctl".to_owned()
        } else {
            request.reason
        };
        let cancelled = self.supervisor.cancel(&request.thread_ts, &reason).await;
        let run = self.latest(&request.thread_ts).await?;
        Ok(Response::new(CancelRunResponse {
            cancelled,
            state: proto_state(run.state),
        }))
    }

    async fn start_run(
        &self,
        request: Request<StartRunRequest>,
    ) -> Result<Response<StartRunResponse>, Status> {
        let request = request.into_inner();
        if request.plan.trim().is_empty() {
            return Err(Status::invalid_argument("the plan is empty"));
        }
        let tree = self
            .supervisor
            .worktrees()
            .create_from_head(&request.plan)
            .await
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        let thread_ts = request
            .thread_ts
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| format!("cli-{}", chrono::Utc::now().timestamp_millis()));
        let run = self
            .supervisor
            .start(RunRequest {
                thread: ThreadKey {
                    channel: CLI_CHANNEL.to_owned(),
                    thread_ts: thread_ts.clone(),
                },
                plan: request.plan,
                worktree: tree.path,
                branch: tree.branch,
                reporting: Reporting::Unattended,
                system_prompt: crate::prompts::coder_system_prompt(
                    &self.layout,
                    self.pr_instructions.as_deref(),
                )
                .await,
                resume: None,
                workspace: Workspace::Ready,
            })
            .await
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        Ok(Response::new(StartRunResponse {
            thread_ts,
            run_id: proto_run_id(&run.id),
            state: proto_state(run.state),
        }))
    }
}
