//! The `runnerctl` client: talks to the controller's admin socket and renders runs and
//! events as readable lines or JSON. In the library so it is testable without a terminal.

use std::io::Write;
use std::path::{Path, PathBuf};

use codebutler_proto::runner::v1::admin_client::AdminClient;
use codebutler_proto::runner::v1::{
    CancelRunRequest, FinishReason, FollowRunRequest, GetRunRequest, ListRunsRequest, RunDetail,
    RunEventRecord, RunState, RunSummary, StartRunRequest, runner_event::Event,
};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tonic::transport::{Channel, Endpoint, Uri};

/// How output is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// A `runnerctl` failure, worded for the terminal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot reach the controller at {path}: {source}\n  is `codebutler` running in this repository?"
    )]
    Unreachable {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The controller refused or failed the call; its message says why.
    #[error("{}", .0.message())]
    Api(Box<tonic::Status>),
    #[error("read {}: {source}", path.display())]
    ReadPlan {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("write output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Self::Api(Box::new(status))
    }
}

/// A connected admin client.
#[derive(Debug)]
pub struct Client {
    admin: AdminClient<Channel>,
}

impl Client {
    /// Connects to the admin socket at `path`.
    pub async fn connect(path: &Path) -> Result<Self, Error> {
        let unreachable = |source: Box<dyn std::error::Error + Send + Sync>| Error::Unreachable {
            path: path.to_owned(),
            source,
        };
        // Fail with a clear message before tonic's generic transport error.
        tokio::net::UnixStream::connect(path)
            .await
            .map_err(|e| unreachable(Box::new(e)))?;
        let socket = path.to_owned();
        let channel = Endpoint::from_static("http://controller.invalid")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let socket = socket.clone();
                async move {
                    Ok::<_, std::io::Error>(TokioIo::new(
                        tokio::net::UnixStream::connect(socket).await?,
                    ))
                }
            }))
            .await
            .map_err(|e| unreachable(Box::new(e)))?;
        Ok(Self {
            admin: AdminClient::new(channel),
        })
    }

    /// `runnerctl ls`.
    pub async fn ls(
        &mut self,
        active: bool,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Error> {
        let runs = self
            .admin
            .list_runs(ListRunsRequest {
                active_only: active,
                limit: 50,
            })
            .await?
            .into_inner()
            .runs;
        match format {
            Format::Json => writeln!(
                out,
                "{}",
                json!(runs.iter().map(summary_json).collect::<Vec<_>>())
            )?,
            Format::Text if runs.is_empty() => writeln!(out, "no runs")?,
            Format::Text => {
                writeln!(
                    out,
                    "{:<22} {:<12} {:<18} {:>5} {:>9} {:>8}  ENDING",
                    "THREAD", "STATE", "THREAD STATE", "TURNS", "TOKENS", "COST"
                )?;
                for r in &runs {
                    writeln!(
                        out,
                        "{:<22} {:<12} {:<18} {:>5} {:>9} {:>8}  {}",
                        r.thread_ts,
                        state_name(r.state),
                        match r.thread_state.as_str() {
                            "" => "-",
                            state => state,
                        },
                        r.turns,
                        r.prompt_tokens + r.completion_tokens,
                        format!("${:.4}", r.cost_usd),
                        r.ending_reason
                    )?;
                }
            }
        }
        Ok(())
    }

    /// `runnerctl show`.
    pub async fn show(
        &mut self,
        thread: &str,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Error> {
        let detail = self.detail(thread).await?;
        let summary = detail.summary.clone().unwrap_or_default();
        match format {
            Format::Json => writeln!(
                out,
                "{}",
                json!({
                    "summary": summary_json(&summary),
                    "plan": detail.plan,
                    "model": detail.model,
                    "maxTurns": detail.max_turns,
                    "timeoutSeconds": detail.timeout_seconds,
                    "branch": detail.branch,
                    "worktree": detail.worktree_path,
                    "runnerPid": detail.runner_pid,
                    "lastEventSeq": detail.last_event_seq,
                    "pullRequest": pull_request_json(&detail),
                })
            )?,
            Format::Text => {
                match summary.thread_state.as_str() {
                    "" => writeln!(out, "thread:   {}", summary.thread_ts)?,
                    state => writeln!(out, "thread:   {} ({state})", summary.thread_ts)?,
                }
                writeln!(out, "run:      {}", summary.run_id)?;
                writeln!(out, "state:    {}", state_name(summary.state))?;
                if !detail.pr_url.is_empty() {
                    writeln!(out, "pr:       #{} {}", detail.pr_number, detail.pr_url)?;
                }
                writeln!(out, "turns:    {} of {}", summary.turns, detail.max_turns)?;
                writeln!(
                    out,
                    "tokens:   {} prompt, {} completion",
                    summary.prompt_tokens, summary.completion_tokens
                )?;
                writeln!(out, "cost:     ${:.4}", summary.cost_usd)?;
                writeln!(out, "model:    {}", detail.model)?;
                writeln!(out, "branch:   {}", detail.branch)?;
                writeln!(out, "worktree: {}", detail.worktree_path)?;
                if !summary.ending_reason.is_empty() {
                    writeln!(out, "ending:   {}", summary.ending_reason)?;
                }
                writeln!(out, "plan:\n{}", indent(&detail.plan))?;
            }
        }
        Ok(())
    }

    /// `runnerctl logs [-f]`.
    pub async fn logs(
        &mut self,
        thread: &str,
        follow: bool,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Error> {
        let mut stream = self
            .admin
            .follow_run(FollowRunRequest {
                thread_ts: thread.to_owned(),
                from_start: true,
            })
            .await?
            .into_inner();
        // Without -f, stop after the stored events: the follow stream keeps going while the
        // run is live, so read what is there without waiting for more.
        loop {
            let next = if follow {
                stream.message().await?
            } else {
                match tokio::time::timeout(std::time::Duration::from_millis(300), stream.message())
                    .await
                {
                    Ok(message) => message?,
                    Err(_) => None,
                }
            };
            let Some(record) = next else { break };
            print_event(&record, format, out)?;
        }
        if follow {
            self.show_ending(thread, format, out).await?;
        }
        Ok(())
    }

    /// `runnerctl cancel`.
    pub async fn cancel(
        &mut self,
        thread: &str,
        reason: &str,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Error> {
        let response = self
            .admin
            .cancel_run(CancelRunRequest {
                thread_ts: thread.to_owned(),
                reason: reason.to_owned(),
            })
            .await?
            .into_inner();
        match format {
            Format::Json => writeln!(
                out,
                "{}",
                json!({"cancelled": response.cancelled, "state": state_name(response.state)})
            )?,
            Format::Text if response.cancelled => {
                writeln!(out, "cancelling the run of thread {thread}")?
            }
            Format::Text => writeln!(
                out,
                "thread {thread} has no run in progress (its last run is {})",
                state_name(response.state)
            )?,
        }
        Ok(())
    }

    /// `runnerctl run --plan FILE`.
    pub async fn run(
        &mut self,
        plan: &str,
        follow: bool,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Error> {
        let started = self
            .admin
            .start_run(StartRunRequest {
                plan: plan.to_owned(),
                thread_ts: None,
            })
            .await?
            .into_inner();
        match format {
            Format::Json => writeln!(
                out,
                "{}",
                json!({"event": "started", "thread": started.thread_ts, "runId": started.run_id})
            )?,
            Format::Text => writeln!(
                out,
                "started run {} as thread {}",
                started.run_id, started.thread_ts
            )?,
        }
        if follow {
            self.logs(&started.thread_ts, true, format, out).await?;
        }
        Ok(())
    }

    async fn detail(&mut self, thread: &str) -> Result<RunDetail, Error> {
        Ok(self
            .admin
            .get_run(GetRunRequest {
                thread_ts: thread.to_owned(),
            })
            .await?
            .into_inner())
    }

    async fn show_ending(
        &mut self,
        thread: &str,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Error> {
        let detail = self.detail(thread).await?;
        let summary = detail.summary.unwrap_or_default();
        match format {
            Format::Json => writeln!(
                out,
                "{}",
                json!({"event": "ended", "run": summary_json(&summary)})
            )?,
            Format::Text => writeln!(
                out,
                "run {}: {}",
                state_name(summary.state),
                summary.ending_reason
            )?,
        }
        Ok(())
    }
}

fn state_name(state: i32) -> &'static str {
    match RunState::try_from(state).unwrap_or(RunState::Unspecified) {
        RunState::Queued => "queued",
        RunState::Running => "running",
        RunState::Finished => "finished",
        RunState::Failed => "failed",
        RunState::Cancelled => "cancelled",
        RunState::Interrupted => "interrupted",
        RunState::Paused => "paused",
        RunState::Unspecified => "unknown",
    }
}

fn summary_json(r: &RunSummary) -> serde_json::Value {
    json!({
        "thread": r.thread_ts,
        "runId": r.run_id,
        "state": state_name(r.state),
        "turns": r.turns,
        "promptTokens": r.prompt_tokens,
        "completionTokens": r.completion_tokens,
        "costUsd": r.cost_usd,
        "createdAtUnixMs": r.created_at_unix_ms,
        "startedAtUnixMs": r.started_at_unix_ms,
        "endedAtUnixMs": r.ended_at_unix_ms,
        "ending": r.ending_reason,
        "exitCode": r.exit_code,
        "threadState": (!r.thread_state.is_empty()).then_some(&r.thread_state),
    })
}

/// The thread's pull request as `{number, url}`, or `null` while it has none.
fn pull_request_json(detail: &RunDetail) -> serde_json::Value {
    if detail.pr_url.is_empty() {
        serde_json::Value::Null
    } else {
        json!({"number": detail.pr_number, "url": detail.pr_url})
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One event as a readable line (or a JSON object).
pub fn event_line(record: &RunEventRecord) -> (String, serde_json::Value) {
    let seq = record.seq;
    let Some(event) = record.event.as_ref().and_then(|e| e.event.as_ref()) else {
        return (format!("{seq:>4}  (empty event)"), json!({"seq": seq}));
    };
    let (kind, text, value) = match event {
        Event::Started(s) => (
            "started",
            format!("runner {} started", s.runner_version),
            json!({"runnerVersion": s.runner_version}),
        ),
        Event::TurnBegun(t) => (
            "turn",
            format!("turn {} of {}", t.turn, t.max_turns),
            json!({"turn": t.turn, "maxTurns": t.max_turns}),
        ),
        Event::ToolStarted(t) => (
            "tool_started",
            format!("→ {}", t.summary),
            json!({"tool": t.tool, "callId": t.call_id, "summary": t.summary}),
        ),
        Event::ToolFinished(t) => (
            "tool_finished",
            format!(
                "{} {} ({} ms): {}",
                if t.is_error { "✗" } else { "✓" },
                t.tool,
                t.duration_ms,
                t.summary
            ),
            json!({"tool": t.tool, "callId": t.call_id, "summary": t.summary, "isError": t.is_error, "durationMs": t.duration_ms}),
        ),
        Event::AssistantText(a) => (
            "text",
            format!("coder: {}", a.text.lines().next().unwrap_or_default()),
            json!({"text": a.text}),
        ),
        Event::Usage(u) => (
            "usage",
            format!(
                "usage: {} prompt ({} cached) + {} completion tokens, ${:.4}",
                u.prompt_tokens, u.cached_tokens, u.completion_tokens, u.cost_usd
            ),
            json!({"promptTokens": u.prompt_tokens, "cachedTokens": u.cached_tokens, "completionTokens": u.completion_tokens, "costUsd": u.cost_usd}),
        ),
        Event::Question(q) => (
            "question",
            format!("question: {}", q.text),
            json!({"questionId": q.question_id, "text": q.text}),
        ),
        Event::Finished(f) => {
            let reason = match FinishReason::try_from(f.reason).unwrap_or(FinishReason::Unspecified)
            {
                FinishReason::Completed => "completed",
                FinishReason::MaxTurns => "max turns",
                FinishReason::Timeout => "timeout",
                FinishReason::Cancelled => "cancelled",
                FinishReason::DiskFull => "disk full",
                FinishReason::Unspecified => "finished",
            };
            (
                "finished",
                format!(
                    "finished ({reason}): {}",
                    f.summary.lines().next().unwrap_or_default()
                ),
                json!({"reason": reason, "summary": f.summary}),
            )
        }
        Event::Notice(n) => (
            "notice",
            format!("notice: {}", n.text.lines().next().unwrap_or_default()),
            json!({"text": n.text}),
        ),
        Event::Failed(f) => (
            "failed",
            format!("failed at step {}: {}", f.step, f.message),
            json!({"step": f.step, "message": f.message}),
        ),
    };
    let mut value = value;
    value["seq"] = json!(seq);
    value["event"] = json!(kind);
    if record.at_unix_ms > 0 {
        value["atUnixMs"] = json!(record.at_unix_ms);
    }
    (format!("{seq:>4}  {text}"), value)
}

fn print_event(record: &RunEventRecord, format: Format, out: &mut impl Write) -> Result<(), Error> {
    let (line, value) = event_line(record);
    match format {
        Format::Text => writeln!(out, "{line}")?,
        Format::Json => writeln!(out, "{value}")?,
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::{RunnerEvent, ToolFinished};

    #[test]
    fn events_render_as_lines_and_json() {
        let record = RunEventRecord {
            seq: 7,
            at_unix_ms: 0,
            event: Some(RunnerEvent {
                event: Some(Event::ToolFinished(ToolFinished {
                    call_id: "c1".into(),
                    tool: "Bash".into(),
                    summary: "exit code: 0".into(),
                    is_error: false,
                    duration_ms: 12,
                })),
            }),
        };
        let (line, value) = event_line(&record);
        assert_eq!(line, "   7  ✓ Bash (12 ms): exit code: 0");
        assert_eq!(value["event"], "tool_finished");
        assert_eq!(value["durationMs"], 12);
    }

    #[tokio::test]
    async fn a_missing_controller_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Client::connect(&dir.path().join("admin.sock"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("cannot reach the controller at "), "{err}");
        assert!(err.contains("is `codebutler` running"), "{err}");
    }
}
