//! Slash commands over Socket Mode, as Slack delivers them: a person types `/codebutler …`,
//! Slack sends a `slash_commands` envelope (`accepts_response_payload: true`, a payload of
//! `team_id`, `channel_id`, `user_id`, `command`, `text`, `response_url`, `trigger_id` …)
//! and shows the person what the acknowledgement's `payload` says — to them alone unless its
//! `response_type` is `in_channel` — provided the acknowledgement came within 3 seconds
//! (later, Slack shows the person a time-out instead). A command exists only in an app
//! installed with the `commands` scope. The `response_url` names this fake but it does not
//! serve it (the daemon answers in the acknowledgement).

use std::time::Duration;

use serde_json::{Value, json};

use super::{APP_ID, FakeSlack, Sent, TEAM_ID};

/// How long Slack waits for a slash command's acknowledgement.
pub const COMMAND_ACK_WINDOW: Duration = Duration::from_secs(3);

/// What a person was shown in answer to a slash command they typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandAnswer {
    /// The person who typed it.
    pub user: String,
    /// Where they typed it.
    pub channel: String,
    /// What they typed after the command.
    pub typed: String,
    /// The answer's `text`.
    pub text: String,
    /// Whether only the person saw it (`response_type` absent or `ephemeral`).
    pub ephemeral: bool,
}

impl FakeSlack {
    /// `user` types `/codebutler <text>` in `channel`: Slack's `slash_commands` envelope.
    /// `None` when the app has no such command (its bot token lacks `commands`).
    pub fn slash_command(&self, channel: &str, user: &str, text: &str) -> Option<Sent> {
        let mut st = self.inner.lock();
        if !st.access.bot_scopes().contains("commands") {
            return None;
        }
        let envelope_id = st.uuid_like();
        let id = st.next_id();
        let channel_name = st.access.channel(channel).name;
        let envelope = json!({
            "envelope_id": envelope_id,
            "type": "slash_commands",
            "accepts_response_payload": true,
            "payload": {
                "token": "fake-verification-token",
                "team_id": TEAM_ID,
                "team_domain": "fake-workspace",
                "channel_id": channel,
                "channel_name": channel_name,
                "user_id": user,
                "user_name": user.to_ascii_lowercase(),
                "command": "/codebutler",
                "text": text,
                "api_app_id": APP_ID,
                "is_enterprise_install": "false",
                "response_url": format!("http://{}/commands/{TEAM_ID}/{id}", self.inner.addr),
                "trigger_id": format!("{id}.{id}.fake"),
            },
        });
        st.envelopes.insert(
            envelope_id.clone(),
            super::EnvelopeRecord {
                envelope: envelope.clone(),
                created: std::time::Instant::now(),
                first_sent: None,
                last_sent: None,
            },
        );
        st.deliver(envelope_id.clone(), envelope.to_string());
        Some(Sent {
            ts: String::new(),
            envelope_id,
            event_id: format!("cmd{id}"),
        })
    }

    /// What people were shown in answer to their slash commands, in the order answered:
    /// each acknowledgement with a payload that came within [`COMMAND_ACK_WINDOW`] of the
    /// command's delivery.
    pub fn command_answers(&self) -> Vec<CommandAnswer> {
        let st = self.inner.lock();
        st.acks
            .iter()
            .filter_map(|ack| {
                let record = st.envelopes.get(&ack.envelope_id)?;
                if record.envelope["type"] != "slash_commands" {
                    return None;
                }
                let sent = record.last_sent?;
                if ack.at.duration_since(sent) > COMMAND_ACK_WINDOW {
                    return None;
                }
                let payload = ack.payload.as_ref()?;
                let command = &record.envelope["payload"];
                Some(CommandAnswer {
                    user: str_of(&command["user_id"]),
                    channel: str_of(&command["channel_id"]),
                    typed: str_of(&command["text"]),
                    text: str_of(&payload["text"]),
                    ephemeral: payload["response_type"].as_str().unwrap_or("ephemeral")
                        == "ephemeral",
                })
            })
            .collect()
    }

    /// What `user` alone was shown in answer to their slash commands, in order.
    pub fn ephemeral_answers(&self, user: &str) -> Vec<String> {
        self.command_answers()
            .into_iter()
            .filter(|a| a.ephemeral && a.user == user)
            .map(|a| a.text)
            .collect()
    }

    /// Waits until `user` has been shown `n` answers; returns them.
    pub async fn wait_ephemeral_answers(
        &self,
        user: &str,
        n: usize,
        timeout: Duration,
    ) -> Vec<String> {
        self.wait_until(timeout, || self.ephemeral_answers(user).len() >= n)
            .await;
        self.ephemeral_answers(user)
    }
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}
