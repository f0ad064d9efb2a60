//! Interactivity in the fake: Block Kit checks, what a bot message shows after posts and
//! updates, and button clicks delivered as Socket Mode `interactive` envelopes.
//!
//! Shapes follow Slack's documentation of `block_actions` payloads and what slack-morphism
//! 2.31 parses (`SlackInteractionBlockActionsEvent`): `type`, `user{id, username, name,
//! team_id}`, `api_app_id`, `token`, `container{type: message, message_ts, channel_id,
//! is_ephemeral}`, `trigger_id`, `team{id, domain}`, `channel{id, name}`, `message` (the
//! message as Slack shows it, blocks included), `state`, `response_url` and
//! `actions[{type, action_id, block_id, text, value, style, action_ts}]`. The envelope is
//! `{"type": "interactive", "envelope_id", "accepts_response_payload": false, "payload"}`.
//!
//! Like Slack, `chat.update` without `blocks` keeps the message's blocks, and `blocks: []`
//! removes them; blocks Slack would refuse (a section over 3,000 characters, more than 50
//! blocks, a button without text…) fail the call with `invalid_blocks`.

use std::time::Instant;

use serde_json::{Value, json};

use super::error::ApiError;
use super::{APP_ID, BOT_USER_ID, EnvelopeRecord, FakeSlack, Sent, SlackState, TEAM_ID, unix_secs};

/// What a bot message shows now.
#[derive(Clone, Debug)]
pub(super) struct Shown {
    pub text: String,
    pub blocks: Option<Value>,
    pub thread_ts: Option<String>,
}

const MAX_BLOCKS: usize = 50;
const MAX_SECTION_CHARS: usize = 3000;
const MAX_BUTTON_TEXT: usize = 75;

fn chars(v: &Value) -> usize {
    v.as_str().map_or(0, |s| s.chars().count())
}

/// Checks `blocks` as Slack does and returns them as Slack keeps them: every block gets a
/// `block_id`, plain texts get `emoji: true`.
pub(super) fn as_slack_stores(st: &mut SlackState, blocks: Value) -> Result<Value, ApiError> {
    let invalid = |why: &str| {
        tracing::debug!("FakeSlack: invalid_blocks: {why}");
        ApiError::InvalidBlocks
    };
    let Value::Array(mut list) = blocks else {
        return Err(invalid("blocks is not an array"));
    };
    if list.len() > MAX_BLOCKS {
        return Err(invalid("more than 50 blocks"));
    }
    for block in &mut list {
        let Some(obj) = block.as_object_mut() else {
            return Err(invalid("a block is not an object"));
        };
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "section" => {
                let text = obj.get("text").map(|t| chars(&t["text"]));
                match text {
                    Some(n) if (1..=MAX_SECTION_CHARS).contains(&n) => {}
                    None if obj.contains_key("fields") => {}
                    _ => return Err(invalid("section text missing, empty or too long")),
                }
            }
            "actions" => {
                let elements = obj
                    .get_mut("elements")
                    .and_then(Value::as_array_mut)
                    .filter(|e| !e.is_empty() && e.len() <= 25)
                    .ok_or_else(|| invalid("actions needs 1 to 25 elements"))?;
                let mut ids = Vec::new();
                for element in elements {
                    if element["type"] == "button" {
                        let text = chars(&element["text"]["text"]);
                        if element["text"]["type"] != "plain_text"
                            || text == 0
                            || text > MAX_BUTTON_TEXT
                        {
                            return Err(invalid("button text"));
                        }
                        element["text"]["emoji"] = json!(true);
                        if element.get("action_id").is_none() {
                            element["action_id"] = json!(format!("A{}", st.next_id()));
                        }
                    }
                    let id = element["action_id"].as_str().unwrap_or_default().to_owned();
                    if ids.contains(&id) {
                        return Err(invalid("duplicate action_id"));
                    }
                    ids.push(id);
                }
            }
            "context" => {
                let ok = obj
                    .get("elements")
                    .and_then(Value::as_array)
                    .is_some_and(|e| !e.is_empty() && e.len() <= 10);
                if !ok {
                    return Err(invalid("context needs 1 to 10 elements"));
                }
            }
            "divider" | "header" | "rich_text" | "image" => {}
            _ => return Err(invalid("unknown block type")),
        }
        if !obj.contains_key("block_id") {
            obj.insert("block_id".into(), json!(format!("fk{}", st.next_id())));
        }
    }
    Ok(Value::Array(list))
}

/// Records an update of what a message shows: no `blocks` keeps them, `[]` drops them.
pub(super) fn apply_update(
    st: &mut SlackState,
    channel: &str,
    ts: &str,
    text: &str,
    blocks: Option<&Value>,
) {
    let key = (channel.to_owned(), ts.to_owned());
    let Some(shown) = st.shown.get_mut(&key) else {
        return;
    };
    shown.text = text.to_owned();
    match blocks {
        None => {}
        Some(Value::Array(b)) if b.is_empty() => shown.blocks = None,
        Some(b) => shown.blocks = Some(b.clone()),
    }
}

fn channel_name(channel: &str) -> String {
    format!("chan-{}", channel.to_lowercase())
}

impl SlackState {
    /// Wraps `payload` in an `interactive` envelope, records it and delivers it.
    fn emit_interactive(&mut self, payload: Value, ts: String) -> Sent {
        let envelope_id = self.uuid_like();
        let trigger_id = payload["trigger_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let envelope = json!({
            "envelope_id": envelope_id,
            "payload": payload,
            "type": "interactive",
            "accepts_response_payload": false,
        });
        self.envelopes.insert(
            envelope_id.clone(),
            EnvelopeRecord {
                envelope: envelope.clone(),
                created: Instant::now(),
                first_sent: None,
                last_sent: None,
            },
        );
        self.deliver(envelope_id.clone(), envelope.to_string());
        Sent {
            ts,
            envelope_id,
            event_id: trigger_id,
        }
    }
}

impl FakeSlack {
    /// What a message the bot posted shows now: its text and blocks (after updates).
    pub fn shown(&self, channel: &str, ts: &str) -> Option<(String, Option<Value>)> {
        self.inner
            .lock()
            .shown
            .get(&(channel.to_owned(), ts.to_owned()))
            .map(|s| (s.text.clone(), s.blocks.clone()))
    }

    /// The `action_id`s of the buttons a bot message shows now.
    pub fn buttons(&self, channel: &str, ts: &str) -> Vec<String> {
        let Some((_, Some(blocks))) = self.shown(channel, ts) else {
            return Vec::new();
        };
        blocks
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "actions")
            .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["type"] == "button")
            .filter_map(|e| e["action_id"].as_str().map(str::to_owned))
            .collect()
    }

    /// `user` clicks the button `action_id` of the bot message `message_ts`, as it shows now:
    /// the fake sends the `block_actions` interaction Slack would. `None` if the message
    /// shows no such button (it cannot be clicked). `Sent.ts` is the action's `action_ts`,
    /// `Sent.event_id` its `trigger_id`.
    pub fn click(
        &self,
        channel: &str,
        user: &str,
        message_ts: &str,
        action_id: &str,
    ) -> Option<Sent> {
        let mut st = self.inner.lock();
        let shown = st
            .shown
            .get(&(channel.to_owned(), message_ts.to_owned()))?
            .clone();
        let blocks = shown.blocks.clone()?;
        let (block_id, button) = blocks.as_array()?.iter().find_map(|b| {
            b["elements"]
                .as_array()?
                .iter()
                .find(|e| e["type"] == "button" && e["action_id"] == action_id)
                .map(|e| (b["block_id"].clone(), e.clone()))
        })?;
        let action_ts = st.next_ts();
        let n = st.next_id();
        let trigger_id = format!("{n}.{}.fa4e{n:08x}", unix_secs());
        let mut message = json!({
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": super::BOT_ID,
            "app_id": APP_ID,
            "team": TEAM_ID,
            "text": shown.text,
            "ts": message_ts,
            "blocks": blocks,
        });
        if let Some(thread_ts) = &shown.thread_ts {
            message["thread_ts"] = json!(thread_ts);
            message["parent_user_id"] = json!(user);
        }
        let mut action = json!({
            "type": "button",
            "action_id": action_id,
            "block_id": block_id,
            "text": button["text"],
            "action_ts": action_ts,
        });
        for key in ["value", "style"] {
            if let Some(v) = button.get(key) {
                action[key] = v.clone();
            }
        }
        let payload = json!({
            "type": "block_actions",
            "user": {"id": user, "username": user.to_lowercase(), "name": user.to_lowercase(), "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "fake-verification-token",
            "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false},
            "trigger_id": trigger_id,
            "team": {"id": TEAM_ID, "domain": "fake"},
            "enterprise": null,
            "is_enterprise_install": false,
            "channel": {"id": channel, "name": channel_name(channel)},
            "message": message,
            "state": {"values": {}},
            "response_url": format!("https://hooks.slack.com/actions/{TEAM_ID}/{n}/fake"),
            "actions": [action],
        });
        Some(st.emit_interactive(payload, action_ts))
    }

    /// Sends any `payload` in an `interactive` envelope, malformed ones included.
    pub fn send_interactive(&self, payload: Value) -> Sent {
        let mut st = self.inner.lock();
        let ts = st.next_ts();
        st.emit_interactive(payload, ts)
    }
}

#[cfg(test)]
mod tests {
    use slack_morphism::prelude::*;

    use super::*;
    use crate::slack::{BOT_TOKEN, CHANNEL};

    async fn call(fake: &FakeSlack, method: &str, body: Value) -> Value {
        crate::tests::http()
            .post(format!("{}{method}", fake.api_url()))
            .bearer_auth(BOT_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    fn approve_button() -> Value {
        json!([
            {"type": "section", "text": {"type": "mrkdwn", "text": "*Plan:* fix it"}},
            {"type": "actions", "block_id": "acts", "elements": [
                {"type": "button", "action_id": "approve", "value": "v1", "style": "primary",
                 "text": {"type": "plain_text", "text": "Approve"}}
            ]}
        ])
    }

    #[tokio::test]
    async fn a_click_is_a_block_actions_interaction_slack_morphism_parses() {
        let fake = FakeSlack::start().await;
        let posted = call(
            &fake,
            "chat.postMessage",
            json!({"channel": CHANNEL, "text": "plan", "thread_ts": "1.000001", "blocks": approve_button()}),
        )
        .await;
        let ts = posted["ts"].as_str().unwrap().to_owned();
        assert_eq!(fake.buttons(CHANNEL, &ts), ["approve"]);
        assert!(fake.click(CHANNEL, "U1", &ts, "nope").is_none());
        let sent = fake.click(CHANNEL, "U1", &ts, "approve").unwrap();

        let envelope = fake.inner.lock().envelopes[&sent.envelope_id]
            .envelope
            .clone();
        assert_eq!(envelope["type"], "interactive");
        assert_eq!(envelope["accepts_response_payload"], false);
        // The envelope's socket-mode model is not exported by slack-morphism; its payload is.
        let event: SlackInteractionEvent =
            serde_json::from_value(envelope["payload"].clone()).unwrap();
        let SlackInteractionEvent::BlockActions(actions) = event else {
            panic!("not block_actions");
        };
        assert_eq!(actions.user.unwrap().id.0, "U1");
        let message = actions.message.unwrap();
        assert_eq!(message.origin.ts.0, ts);
        assert_eq!(message.origin.thread_ts.unwrap().0, "1.000001");
        assert_eq!(message.content.blocks.unwrap().len(), 2);
        let action = &actions.actions.unwrap()[0];
        assert_eq!(action.action_id.0, "approve");
        assert_eq!(action.value.as_deref(), Some("v1"));
        assert_eq!(action.block_id.as_ref().unwrap().0, "acts");
        assert_eq!(action.action_ts.as_ref().unwrap().0, sent.ts);
    }

    #[tokio::test]
    async fn updates_keep_blocks_unless_they_replace_or_drop_them() {
        let fake = FakeSlack::start().await;
        let posted = call(
            &fake,
            "chat.postMessage",
            json!({"channel": CHANNEL, "text": "plan", "blocks": approve_button()}),
        )
        .await;
        let ts = posted["ts"].as_str().unwrap().to_owned();
        let r = call(
            &fake,
            "chat.update",
            json!({"channel": CHANNEL, "ts": ts, "text": "new text"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(fake.buttons(CHANNEL, &ts), ["approve"], "kept");
        let context =
            json!([{"type": "context", "elements": [{"type": "mrkdwn", "text": "Approved"}]}]);
        call(
            &fake,
            "chat.update",
            json!({"channel": CHANNEL, "ts": ts, "text": "t", "blocks": context}),
        )
        .await;
        assert!(fake.buttons(CHANNEL, &ts).is_empty(), "replaced");
        assert!(fake.click(CHANNEL, "U1", &ts, "approve").is_none());
        call(
            &fake,
            "chat.update",
            json!({"channel": CHANNEL, "ts": ts, "text": "t", "blocks": []}),
        )
        .await;
        assert_eq!(fake.shown(CHANNEL, &ts).unwrap(), ("t".to_owned(), None));
    }

    #[tokio::test]
    async fn blocks_slack_would_refuse_fail_the_call() {
        let fake = FakeSlack::start().await;
        let long = "x".repeat(3001);
        for blocks in [
            json!([{"type": "section", "text": {"type": "mrkdwn", "text": long}}]),
            json!([{"type": "actions", "elements": []}]),
            json!([{"type": "carousel"}]),
        ] {
            let r = call(
                &fake,
                "chat.postMessage",
                json!({"channel": CHANNEL, "text": "t", "blocks": blocks}),
            )
            .await;
            assert_eq!(r["error"], "invalid_blocks", "{blocks}");
        }
        assert!(fake.posts().is_empty());
    }
}
