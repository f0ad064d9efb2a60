//! Conversations with the bot outside a repository's channel, as Slack delivers them:
//! - a person's direct message ([`FakeSlack::direct_message`]): a `message` event in the
//!   person's DM with the app (a channel id starting with `D`, `channel_type: "im"`), sent to
//!   an app whose bot token has `im:history` (the `message.im` subscription);
//! - a mention of the bot ([`FakeSlack::mention`]): an `app_mention` event (`user`,
//!   `channel`, `text`, `ts`, `thread_ts` in a thread; to an app with `app_mentions:read`)
//!   AND, in a channel the bot is a member of, the same message as a plain `message` event
//!   (the `message.channels` subscription) — one message, two events, one `ts`.

use serde_json::json;

use super::{BOT_USER_ID, FakeSlack, Sent, TEAM_ID};

/// The id of `user`'s direct-message conversation with the app: `D` and the rest of the
/// user's id (`U0ALICE` → `D0ALICE`).
pub fn dm_channel(user: &str) -> String {
    format!("D{}", user.strip_prefix('U').unwrap_or(user))
}

impl FakeSlack {
    /// `user` writes `text` to the app in their direct messages with it (`thread_ts`: as a
    /// reply in that thread). `None` when Slack sends no event: the bot token lacks
    /// `im:history`. The message is remembered like any other.
    pub fn direct_message(&self, user: &str, text: &str, thread_ts: Option<&str>) -> Option<Sent> {
        if !self.inner.lock().access.bot_scopes().contains("im:history") {
            return None;
        }
        Some(self.user_message(&dm_channel(user), user, text, thread_ts))
    }

    /// `user` writes `text`, mentioning the bot, in `channel` (`thread_ts`: as a reply in
    /// that thread): the plain `message` event first, then the `app_mention` event when the
    /// bot token has `app_mentions:read`. Returns the events sent, in order (their `ts` is the
    /// message's); none when the bot is not in the channel (Slack offers to invite it).
    pub fn mention(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Vec<Sent> {
        let text = format!("<@{BOT_USER_ID}> {text}");
        let (in_channel, mentions) = {
            let st = self.inner.lock();
            (
                st.access.channel(channel).bot_member,
                st.access.bot_scopes().contains("app_mentions:read"),
            )
        };
        if !in_channel {
            return Vec::new();
        }
        let message = self.user_message(channel, user, &text, thread_ts);
        let ts = message.ts.clone();
        let mut sent = vec![message];
        if mentions {
            let mut event = json!({
                "type": "app_mention",
                "user": user,
                "text": text,
                "ts": ts,
                "channel": channel,
                "event_ts": ts,
                "team": TEAM_ID,
            });
            if let Some(thread_ts) = thread_ts {
                event["thread_ts"] = json!(thread_ts);
            }
            sent.push(self.send_event(event));
        }
        sent
    }
}
