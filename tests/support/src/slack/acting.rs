//! What a test makes the fake Slack do, as a user or as Slack itself: messages and events
//! sent, envelopes resent or retried, sockets disconnected, rate limits and stalled answers.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Sent;
use super::{Conn, ConnCmd, FakeSlack, MAX_EVENT_RETRIES, TEAM_ID, channel_type};

impl FakeSlack {
    /// Sends a plain user message event (as Slack does for `message.channels` subscriptions)
    /// with a fresh `ts`. `thread_ts` makes it a thread reply.
    pub fn user_message(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Sent {
        let mut st = self.inner.lock();
        let ts = st.next_ts();
        let client_msg_id = st.uuid_like();
        let mut event = json!({
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "client_msg_id": client_msg_id,
            "team": TEAM_ID,
            "channel_type": channel_type(channel),
            "blocks": [{
                "type": "rich_text",
                "block_id": format!("b{}", st.next_id()),
                "elements": [{
                    "type": "rich_text_section",
                    "elements": [{"type": "text", "text": text}],
                }],
            }],
        });
        if let Some(thread_ts) = thread_ts {
            event["thread_ts"] = json!(thread_ts);
            if let Some(parent) = st
                .messages
                .get(&(channel.to_owned(), thread_ts.to_owned()))
                .and_then(|m| m.user.clone())
            {
                event["parent_user_id"] = json!(parent);
            }
        }
        st.emit_event(event)
    }

    /// Sends an arbitrary event (edits, deletes, joins, bot messages, other channels…) in an
    /// `events_api` envelope. `event_ts` is added if missing.
    pub fn send_event(&self, event: Value) -> Sent {
        self.inner.lock().emit_event(event)
    }

    /// A fresh message timestamp, unique among all the fake hands out (for hand-built events).
    pub fn next_ts(&self) -> String {
        self.inner.lock().next_ts()
    }

    /// Re-sends an envelope as Slack does when the ack is late: same envelope and event ids,
    /// `retry_attempt` incremented, `retry_reason: "timeout"`.
    pub fn resend(&self, envelope_id: &str) {
        let mut st = self.inner.lock();
        if !st.envelopes.contains_key(envelope_id) {
            panic!("FakeSlack::resend: unknown envelope {envelope_id}");
        }
        st.resend(envelope_id);
    }

    /// From now on, re-sends every envelope not acknowledged `after` its last sending, up to
    /// [`MAX_EVENT_RETRIES`] times, as Slack does for a connection that died with events in
    /// flight (Slack retries after about 3 s). Off by default, so tests that hold an ack on
    /// purpose see exactly what they sent.
    pub fn retry_unacked(&self, after: Duration) {
        let inner = Arc::downgrade(&self.inner);
        let mut shutdown = self.inner.shutdown.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(after / 4) => {}
                    _ = shutdown.changed() => return,
                }
                let Some(inner) = inner.upgrade() else { return };
                let mut st = inner.lock();
                let acked: HashSet<&str> = st.acks.iter().map(|a| a.envelope_id.as_str()).collect();
                let late: Vec<String> = st
                    .envelopes
                    .iter()
                    .filter(|(id, rec)| {
                        !acked.contains(id.as_str())
                            && rec.last_sent.is_some_and(|t| t.elapsed() >= after)
                            && rec.envelope["retry_attempt"].as_u64().unwrap_or(0)
                                < MAX_EVENT_RETRIES
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in late {
                    st.resend(&id);
                }
            }
        });
    }

    /// Sends `disconnect` (reason `refresh_requested`) on every open socket and closes them.
    pub fn disconnect_all(&self) {
        self.disconnect_all_with_reason("refresh_requested");
    }

    /// Like [`FakeSlack::disconnect_all`] with another reason (`warning`, `link_disabled`, …).
    pub fn disconnect_all_with_reason(&self, reason: &str) {
        let mut st = self.inner.lock();
        let conns: Vec<Conn> = st.conns.drain(..).collect();
        for conn in conns {
            if conn.tx.send(ConnCmd::Disconnect(reason.to_owned())).is_ok() {
                st.disconnects_sent += 1;
            }
        }
    }

    /// Makes the next `times` calls of `method` answer `429` with `Retry-After: retry_after_secs`.
    pub fn rate_limit(&self, method: &str, times: u32, retry_after_secs: u64) {
        self.inner
            .lock()
            .rate_limits
            .insert(method.to_owned(), (times, retry_after_secs));
    }
}
