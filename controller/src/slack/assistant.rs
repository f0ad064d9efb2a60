//! Slack's AI-app surface: a thread's status line (`assistant.threads.setStatus`, "is
//! reading src/app.py…") and streamed messages (`chat.startStream`, `chat.appendStream`,
//! `chat.stopStream`) with their plan and task chunks.
//!
//! Not every workspace, channel or app has them. An answer that means "not here"
//! ([`means_unavailable`]: the app lacks the scope, the workspace or plan lacks the feature,
//! the channel's kind does not support it, the method is unknown) turns the feature off for
//! that channel for the rest of the process's life, so a thread falls back to what works
//! everywhere (👀 reactions, posted and edited messages) after one refused call per channel,
//! not one per message. Another failure (rate limit, Slack unreachable) only fails that
//! call. The whole surface is on or off by configuration (`slack.aiSurface`).

use std::collections::HashSet;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::api::{Sender, SlackError};

/// The Slack error codes that mean a feature of the AI-app surface is not available to this
/// app in this channel (rather than a call that failed once).
pub const UNAVAILABLE: &[&str] = &[
    "missing_scope",
    "not_allowed_token_type",
    "method_not_supported_for_channel_type",
    "unknown_method",
    "feature_not_enabled",
    "not_enabled",
    "team_not_allowed",
    "access_denied",
    "no_permission",
];

/// Whether `error` says the feature is not available here (see [`UNAVAILABLE`]).
pub fn means_unavailable(error: &SlackError) -> bool {
    error.code().is_some_and(|code| UNAVAILABLE.contains(&code))
}

/// Text from outside (a model's words) as one plain line for a status or a task card, at
/// most `max_chars` characters: no line breaks or control characters, and none of the
/// characters Slack's mentions, links and entities are made of (`<`, `>`, `&`), so it can
/// neither mention anyone nor link.
pub fn plain_line(text: &str, max_chars: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .filter(|c| !matches!(c, '<' | '>' | '&'))
        .collect();
    line.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max_chars)
        .collect()
}

/// Whether `error` is one the reply that follows meets too and says, with its fix (the bot
/// is not in the channel, or the channel is gone): said once there, not here as well.
fn said_by_the_reply(error: &SlackError) -> bool {
    matches!(error.code(), Some("not_in_channel" | "channel_not_found"))
}

/// A feature of the surface, remembered per channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `assistant.threads.setStatus`.
    Status,
    /// `chat.startStream` and the calls after it.
    Streaming,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Self::Status => "thread status",
            Self::Streaming => "streamed messages",
        }
    }
}

/// Whether the surface is on, for whom a stream is, and the channels where Slack said a
/// feature is not available.
#[derive(Debug, Default)]
pub struct Surface {
    /// The workspace the bot is in (`recipient_team_id` of a stream); `None`: the surface is
    /// off.
    team_id: Option<String>,
    /// Whether messages are streamed at all (`slack.streaming`).
    streaming: bool,
    off: Mutex<HashSet<(Feature, String)>>,
}

impl Surface {
    /// The surface on, in the workspace `team_id`.
    pub fn on(team_id: &str) -> Self {
        Self {
            team_id: Some(team_id.to_owned()),
            streaming: true,
            off: Mutex::default(),
        }
    }

    /// The same, streaming messages only if `on` (the status line stays).
    pub fn streaming(self, on: bool) -> Self {
        Self {
            streaming: on,
            ..self
        }
    }

    /// The surface off: nothing is tried.
    pub fn off() -> Self {
        Self::default()
    }

    /// Whether `feature` may be tried in `channel`.
    pub fn available(&self, feature: Feature, channel: &str) -> bool {
        self.team_id.is_some()
            && (feature != Feature::Streaming || self.streaming)
            && !self
                .off
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&(feature, channel.to_owned()))
    }

    /// Remembers that `feature` is not available in `channel` (Slack said `error`).
    fn turn_off(&self, feature: Feature, channel: &str, error: &SlackError) {
        let newly = self
            .off
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((feature, channel.to_owned()));
        if newly {
            tracing::info!(
                "slack {} not available in channel {channel} ({error}); using the plain messages there",
                feature.name()
            );
        }
    }

    /// The workspace's id, when the surface is on.
    pub fn team_id(&self) -> Option<&str> {
        self.team_id.as_deref()
    }
}

/// How a streamed message shows its tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskDisplay {
    /// All tasks in one collapsible plan.
    Plan,
    /// Tasks one after another.
    Timeline,
}

/// A task's state on a task card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Complete,
    Error,
}

/// One piece of a streamed message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Chunk {
    /// Text, in Markdown.
    MarkdownText { text: String },
    /// The plan's title.
    PlanUpdate { title: String },
    /// A task: new, or its new state.
    TaskUpdate {
        id: String,
        title: String,
        status: TaskStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
}

#[derive(Serialize)]
struct SetStatus<'a> {
    channel_id: &'a str,
    thread_ts: &'a str,
    status: &'a str,
}

#[derive(Serialize)]
struct StartStream<'a> {
    channel: &'a str,
    thread_ts: &'a str,
    recipient_user_id: &'a str,
    recipient_team_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_display_mode: Option<TaskDisplay>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    chunks: &'a [Chunk],
}

#[derive(Serialize)]
struct AddToStream<'a> {
    channel: &'a str,
    ts: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    chunks: &'a [Chunk],
}

/// What Slack answers to a call that only says `ok`.
#[derive(Deserialize)]
struct Done {}

/// What `chat.startStream` answers.
#[derive(Deserialize)]
struct Started {
    ts: String,
}

/// A message being streamed into a thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRef {
    pub channel: String,
    pub ts: String,
}

impl Sender {
    /// Shows `status` under the thread ("is reading src/app.py…"; empty clears it) and
    /// says whether Slack shows it: false where the surface is off, where Slack said the
    /// status is not available in this channel (remembered), and when the call failed.
    pub async fn show_status(&self, channel: &str, thread_ts: &str, status: &str) -> bool {
        if !self.surface().available(Feature::Status, channel) {
            return false;
        }
        let request = SetStatus {
            channel_id: channel,
            thread_ts,
            status,
        };
        let result: Result<Done, SlackError> = self
            .call_post("assistant.threads.setStatus", &request)
            .await;
        match result {
            Ok(_) => true,
            Err(e) => {
                self.refused(Feature::Status, channel, &e, "set the thread's status");
                false
            }
        }
    }

    /// A refused status or stream call: where it means "not available here", `feature` is
    /// turned off for `channel` (remembered); else it is logged (`doing`, in a few words)
    /// unless the reply that follows will say it anyway.
    fn refused(&self, feature: Feature, channel: &str, e: &SlackError, doing: &str) {
        if means_unavailable(e) {
            self.surface().turn_off(feature, channel, e);
        } else if !said_by_the_reply(e) {
            tracing::debug!("{doing}: {e}");
        }
    }

    /// Starts a message streamed into the thread for `recipient` (a user id), with `chunks`
    /// first; `None` where streaming is off or not available in this channel (remembered),
    /// or when Slack refused this one: the caller posts the plain way instead.
    pub async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: &str,
        display: Option<TaskDisplay>,
        chunks: &[Chunk],
    ) -> Option<StreamRef> {
        if !self.surface().available(Feature::Streaming, channel) {
            return None;
        }
        let team = self.surface().team_id()?;
        let request = StartStream {
            channel,
            thread_ts,
            recipient_user_id: recipient,
            recipient_team_id: team,
            task_display_mode: display,
            chunks,
        };
        let result: Result<Started, SlackError> =
            self.call_post("chat.startStream", &request).await;
        match result {
            Ok(started) => Some(StreamRef {
                channel: channel.to_owned(),
                ts: started.ts,
            }),
            Err(e) => {
                self.refused(Feature::Streaming, channel, &e, "start a streamed message");
                None
            }
        }
    }

    /// Adds `chunks` to a streamed message.
    pub async fn append_stream(
        &self,
        stream: &StreamRef,
        chunks: &[Chunk],
    ) -> Result<(), SlackError> {
        self.add_to_stream("chat.appendStream", stream, chunks)
            .await
    }

    /// Adds the last `chunks` to a streamed message and ends it.
    pub async fn stop_stream(
        &self,
        stream: &StreamRef,
        chunks: &[Chunk],
    ) -> Result<(), SlackError> {
        self.add_to_stream("chat.stopStream", stream, chunks).await
    }

    /// Calls `method` (`chat.appendStream` or `chat.stopStream`) with `chunks` for `stream`.
    async fn add_to_stream(
        &self,
        method: &'static str,
        stream: &StreamRef,
        chunks: &[Chunk],
    ) -> Result<(), SlackError> {
        let request = AddToStream {
            channel: &stream.channel,
            ts: &stream.ts,
            chunks,
        };
        let _: Done = self.call_post(method, &request).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_slacks_json() {
        let chunks = vec![
            Chunk::PlanUpdate {
                title: "Fix expiry".into(),
            },
            Chunk::TaskUpdate {
                id: "c1".into(),
                title: "editing src/auth.rs".into(),
                status: TaskStatus::InProgress,
                output: None,
            },
            Chunk::TaskUpdate {
                id: "c1".into(),
                title: "editing src/auth.rs".into(),
                status: TaskStatus::Complete,
                output: Some("2 lines changed".into()),
            },
            Chunk::MarkdownText {
                text: "*hi*".into(),
            },
        ];
        assert_eq!(
            serde_json::to_value(&chunks).unwrap(),
            serde_json::json!([
                {"type": "plan_update", "title": "Fix expiry"},
                {"type": "task_update", "id": "c1", "title": "editing src/auth.rs", "status": "in_progress"},
                {"type": "task_update", "id": "c1", "title": "editing src/auth.rs", "status": "complete", "output": "2 lines changed"},
                {"type": "markdown_text", "text": "*hi*"},
            ])
        );
    }

    #[test]
    fn a_surface_turned_off_in_one_channel_stays_on_in_others() {
        let surface = Surface::on("T1");
        let error = SlackError::Setup("x".into());
        assert!(surface.available(Feature::Status, "C1"));
        surface.turn_off(Feature::Status, "C1", &error);
        assert!(!surface.available(Feature::Status, "C1"));
        assert!(surface.available(Feature::Streaming, "C1"));
        assert!(surface.available(Feature::Status, "C2"));
        assert!(!Surface::off().available(Feature::Status, "C2"));
        let plain = Surface::on("T1").streaming(false);
        assert!(plain.available(Feature::Status, "C1"));
        assert!(!plain.available(Feature::Streaming, "C1"));
    }
}
