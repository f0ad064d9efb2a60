//! App Home: a person opening the app's Home tab is Slack's `app_home_opened` event (`user`,
//! `channel` — the app's conversation with them —, `tab: "home"`, `event_ts`), and
//! `views.publish` (`user_id`, a `view` of `type: "home"` with `blocks`) replaces what that
//! person's Home tab shows, answering the view with its `id`, as Slack does. A view that is
//! not a home view, or has no blocks list, is `invalid_arguments`.

use serde_json::{Value, json};

use super::error::ApiError;
use super::web::{Params, json_param, need};
use super::{FakeSlack, Inner, Sent, SlackState};

/// `views.publish`.
pub(super) fn publish(_: &Inner, st: &mut SlackState, params: &Params) -> Result<Value, ApiError> {
    let user = need(params, "user_id")?;
    let view = json_param(params, "view").ok_or(ApiError::InvalidArguments)?;
    if view["type"] != "home" || !view["blocks"].is_array() {
        return Err(ApiError::InvalidArguments);
    }
    let id = format!("V0FAKE{:06}", st.next_id());
    st.home_views.insert(user, view.clone());
    let mut shown = view;
    shown["id"] = json!(id);
    shown["team_id"] = json!(super::TEAM_ID);
    shown["app_id"] = json!(super::APP_ID);
    shown["bot_id"] = json!(super::BOT_ID);
    shown["state"] = json!({"values": {}});
    shown["hash"] = json!(format!("{}.fake", st.next_id()));
    shown["root_view_id"] = json!(id);
    Ok(json!({"ok": true, "view": shown}))
}

impl FakeSlack {
    /// `user` opens the app's Home tab: Slack's `app_home_opened` event.
    pub fn open_app_home(&self, user: &str) -> Sent {
        let mut st = self.inner.lock();
        let event_ts = st.next_ts();
        st.emit_event(json!({
            "type": "app_home_opened",
            "user": user,
            "channel": format!("D{}", user.trim_start_matches('U')),
            "tab": "home",
            "event_ts": event_ts,
        }))
    }

    /// The view `user`'s Home tab shows: the last one published for them.
    pub fn home_view(&self, user: &str) -> Option<Value> {
        self.inner.lock().home_views.get(user).cloned()
    }

    /// The text of every block of `user`'s Home tab (sections' and context elements' text),
    /// one block a line.
    pub fn home_text(&self, user: &str) -> String {
        let Some(view) = self.home_view(user) else {
            return String::new();
        };
        view["blocks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|block| {
                let mut texts: Vec<String> = Vec::new();
                if let Some(text) = block["text"]["text"].as_str() {
                    texts.push(text.to_owned());
                }
                for element in block["elements"].as_array().into_iter().flatten() {
                    if let Some(text) = element["text"].as_str() {
                        texts.push(text.to_owned());
                    }
                }
                texts.join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
