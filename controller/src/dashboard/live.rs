//! What the dashboard streams as it happens, over server-sent events: the Coder runs'
//! events, from each repository's supervisor broadcast (the same one the thread's status
//! message follows, so nothing polls the store), and the log's lines, from the log ring
//! (its kept lines first, then each new one). A run's event is shown as its kind and the
//! one-line summary the runner wrote for people (`Bash: cargo test`) — never the model's
//! text, a question or an answer, which belong to the thread.

use std::convert::Infallible;

use axum::response::sse::Event as SseEvent;
use codebutler_proto::runner::v1::runner_event::Event;
use futures::stream::{self, Stream, StreamExt};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use crate::runners::supervisor::RunEvent;

/// A run's event as the runs page shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunLine {
    pub repository: String,
    pub run: String,
    /// The event's number in the run; -1 for the run's end.
    pub seq: i64,
    /// `started`, `turn`, `tool`, `tool-done`, `text`, `usage`, `question`, `notice`,
    /// `finished`, `failed`, `ended`.
    pub kind: &'static str,
    /// One line for people; empty where the event's text is the thread's.
    pub detail: String,
}

/// `event` of a run in `repository`, as a line.
pub fn run_line(repository: &str, event: &RunEvent) -> RunLine {
    let (kind, detail) = match (&event.ended, &event.event.event) {
        (Some(state), _) => ("ended", state.as_str().to_owned()),
        (None, None) => ("unknown", String::new()),
        (None, Some(e)) => match e {
            Event::Started(s) => ("started", format!("runner {}", s.runner_version)),
            Event::TurnBegun(t) => ("turn", format!("turn {} of {}", t.turn, t.max_turns)),
            Event::ToolStarted(t) => ("tool", one_line(&t.summary, &t.tool)),
            Event::ToolFinished(t) => (
                "tool-done",
                format!(
                    "{}{} ({} ms)",
                    if t.is_error { "error: " } else { "" },
                    one_line(&t.summary, &t.tool),
                    t.duration_ms
                ),
            ),
            Event::AssistantText(_) => ("text", String::new()),
            Event::Usage(u) => (
                "usage",
                format!(
                    "{} prompt + {} completion tokens, ${:.4}",
                    u.prompt_tokens, u.completion_tokens, u.cost_usd
                ),
            ),
            Event::Question(_) => ("question", String::new()),
            Event::Notice(_) => ("notice", String::new()),
            Event::Finished(f) => (
                "finished",
                f.reason()
                    .as_str_name()
                    .trim_start_matches("FINISH_REASON_")
                    .to_lowercase(),
            ),
            Event::Failed(f) => ("failed", one_line(&f.step, "")),
        },
    };
    RunLine {
        repository: repository.to_owned(),
        run: event.run_id.clone(),
        seq: event.seq,
        kind,
        detail,
    }
}

/// The first line of `text` (or `fallback` when it has none), at most 200 characters.
fn one_line(text: &str, fallback: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let line = if line.is_empty() { fallback } else { line };
    line.chars().take(200).collect()
}

/// The runs' events of every repository (`(name, receiver)`), merged, as SSE events named
/// `run`; a reader too slow to keep up gets a `lagged` event saying how many it missed.
pub fn run_events(
    receivers: Vec<(String, broadcast::Receiver<RunEvent>)>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> + Send {
    let streams = receivers.into_iter().map(|(name, rx)| {
        BroadcastStream::new(rx).map(move |item| {
            Ok(match item {
                Ok(event) => SseEvent::default()
                    .event("run")
                    .json_data(run_line(&name, &event))
                    .unwrap_or_else(|_| SseEvent::default().event("run")),
                Err(BroadcastStreamRecvError::Lagged(n)) => {
                    SseEvent::default().event("lagged").data(n.to_string())
                }
            })
        })
    });
    stream::select_all(streams)
}

/// The log's `kept` lines, then each `live` one, as SSE events named `log`.
pub fn log_lines(
    kept: Vec<String>,
    live: broadcast::Receiver<String>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> + Send {
    let kept = stream::iter(kept).map(|line| Ok(SseEvent::default().event("log").data(line)));
    let live = BroadcastStream::new(live).map(|item| {
        Ok(match item {
            Ok(line) => SseEvent::default().event("log").data(line),
            Err(BroadcastStreamRecvError::Lagged(n)) => {
                SseEvent::default().event("lagged").data(n.to_string())
            }
        })
    });
    kept.chain(live)
}

/// The runs page's script: each `run` event a line of the list, newest last, and the
/// state of the stream on the page (`data-stream`: `connecting`, `open`, `closed`).
pub const RUNS_SCRIPT: &str = r#"
const list = document.getElementById('events');
const status = document.getElementById('stream');
const source = new EventSource('/api/runs/events');
source.onopen = () => { status.dataset.stream = 'open'; status.textContent = 'live'; };
source.onerror = () => { status.dataset.stream = 'closed'; status.textContent = 'reconnecting'; };
source.addEventListener('run', (e) => {
  const ev = JSON.parse(e.data);
  const li = document.createElement('li');
  li.className = 'run-event';
  li.dataset.run = ev.run;
  li.dataset.kind = ev.kind;
  li.textContent = `${ev.repository} ${ev.run} #${ev.seq} ${ev.kind} ${ev.detail}`;
  list.appendChild(li);
});
source.addEventListener('lagged', (e) => {
  const li = document.createElement('li');
  li.textContent = `(${e.data} events missed)`;
  list.appendChild(li);
});
"#;

/// The log page's script: each `log` event a line of the log.
pub const LOG_SCRIPT: &str = r#"
const log = document.getElementById('log');
const status = document.getElementById('stream');
const source = new EventSource('/api/logs');
source.onopen = () => { status.dataset.stream = 'open'; status.textContent = 'live'; };
source.onerror = () => { status.dataset.stream = 'closed'; status.textContent = 'reconnecting'; };
source.addEventListener('log', (e) => {
  log.appendChild(document.createTextNode(e.data + '\n'));
  if (log.childNodes.length > 5000) log.removeChild(log.firstChild);
});
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use codebutler_proto::runner::v1::{RunnerEvent, ToolStarted};

    #[test]
    fn a_tool_event_shows_its_summary_and_an_end_its_state() {
        let event = RunEvent {
            run_id: "r1".into(),
            seq: 3,
            at_unix_ms: 0,
            event: RunnerEvent {
                event: Some(Event::ToolStarted(ToolStarted {
                    call_id: "c".into(),
                    tool: "Bash".into(),
                    summary: "Bash: cargo test\nsecond line".into(),
                })),
            },
            ended: None,
        };
        let line = run_line("api", &event);
        assert_eq!(
            (line.kind, line.detail.as_str()),
            ("tool", "Bash: cargo test")
        );
        let end = RunEvent {
            seq: -1,
            event: RunnerEvent { event: None },
            ended: Some(crate::domain::RunState::Finished),
            ..event
        };
        assert_eq!(run_line("api", &end).detail, "finished");
    }
}
