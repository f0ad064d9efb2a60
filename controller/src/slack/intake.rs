//! Which Slack events become user messages. Pure: it looks at a parsed event and the
//! channel/bot identity and decides, so every filter rule is unit-tested without a socket.
//!
//! Ignored without any model call: other channels, the bot's own and other bots' messages,
//! edits, deletions, joins and every other non-user subtype, hidden events and empty
//! messages. A message with files and no text is not empty: the files are its request
//! ([`shared_files`] lists them). What is accepted is a person's message ([`Origin::Person`]) whatever its text
//! says: text that reads like a click's or the PR watcher's marker (posted through the API,
//! where Slack does not escape `<`) stays text.
//!
//! Besides the channel, a person's direct message to the bot is accepted ([`classify`]), and
//! so are a mention of the bot in another channel and the later replies in that mention's
//! thread ([`classify_elsewhere`]): these are read-only conversations
//! (`crate::thread::conversation`). A mention in the channel itself is left to its `message`
//! event, which Slack sends too, so it is answered once.
//!
//! A reaction asks for a request ([`classify_reaction`]) when it is the configured emoji
//! (`triggers.reaction`), on a message of this channel, by a person other than the bot, on a
//! message not the bot's own; [`reaction_request_text`] is what the thread then holds.

use slack_morphism::prelude::*;

use crate::domain::{IncomingMessage, Origin, SharedFile};

/// What the intake knows about where it listens.
#[derive(Clone, Debug)]
pub struct IntakeFilter {
    /// The channel this repository serves (one process may serve several repositories,
    /// each with its own filter; [`crate::service::router`] hands each its channel's events).
    pub channel: String,
    /// The bot's own user id, learned with `auth.test`.
    pub bot_user_id: String,
}

/// The intake's verdict on one event.
#[derive(Clone, Debug, PartialEq)]
pub enum Intake {
    /// A user message to store and answer.
    Accept(IncomingMessage),
    /// Not for us; the reason is logged at debug level.
    Ignore(&'static str),
}

/// Classifies one push event: a person's message in the repository's channel or in a direct
/// message with the bot. A message in another channel is "other channel" here: it is a
/// conversation's only when it replies in a thread the bot was mentioned in
/// ([`classify_elsewhere`]).
pub fn classify(event: &SlackPushEventCallback, filter: &IntakeFilter) -> Intake {
    let message = match message_event(event) {
        Ok(message) => message,
        Err(reason) => return Intake::Ignore(reason),
    };
    let Some(channel) = &message.origin.channel else {
        return Intake::Ignore("no channel");
    };
    if channel.0 != filter.channel && !is_direct(message) {
        return Intake::Ignore("other channel");
    }
    person_message(event, message, filter)
}

/// Classifies a push event outside the repository's channel and its direct messages: a
/// mention of the bot (`app_mention`) in another channel, or a reply in a thread of another
/// channel (a conversation's only if the bot was mentioned in that thread before: the caller
/// checks). A mention in the repository's channel is ignored: Slack sends its `message`
/// event too, and [`classify`] takes that one.
pub fn classify_elsewhere(event: &SlackPushEventCallback, filter: &IntakeFilter) -> Intake {
    match &event.event {
        SlackEventCallbackBody::AppMention(mention) => {
            if mention.channel.0 == filter.channel {
                return Intake::Ignore("a mention in the channel: its message event carries it");
            }
            if mention.user.0 == filter.bot_user_id {
                return Intake::Ignore("own message");
            }
            let text = mention.content.text.clone().unwrap_or_default();
            if text.trim().is_empty() {
                return Intake::Ignore("empty message");
            }
            let ts = mention.origin.ts.0.clone();
            Intake::Accept(IncomingMessage {
                channel: mention.channel.0.clone(),
                thread_ts: mention
                    .origin
                    .thread_ts
                    .as_ref()
                    .map_or_else(|| ts.clone(), |t| t.0.clone()),
                ts,
                user: mention.user.0.clone(),
                text,
                event_id: Some(event.event_id.0.clone()),
                origin: Origin::Person,
            })
        }
        SlackEventCallbackBody::Message(_) => {
            let message = match message_event(event) {
                Ok(message) => message,
                Err(reason) => return Intake::Ignore(reason),
            };
            let Some(channel) = &message.origin.channel else {
                return Intake::Ignore("no channel");
            };
            if channel.0 == filter.channel || is_direct(message) {
                return Intake::Ignore("the channel's or a direct message");
            }
            let is_reply = message
                .origin
                .thread_ts
                .as_ref()
                .is_some_and(|t| t.0 != message.origin.ts.0);
            if !is_reply {
                return Intake::Ignore("other channel");
            }
            person_message(event, message, filter)
        }
        _ => Intake::Ignore("not a message event"),
    }
}

/// Whether a message event is in a direct message with the bot (`channel_type: "im"`, a
/// channel id starting with `D`).
fn is_direct(message: &SlackMessageEvent) -> bool {
    match &message.origin.channel_type {
        Some(kind) => kind.0 == "im",
        None => message
            .origin
            .channel
            .as_ref()
            .is_some_and(|c| c.0.starts_with('D')),
    }
}

/// The message of a message event a person may have written: not an edit, deletion, join
/// or other subtype, not hidden.
fn message_event(event: &SlackPushEventCallback) -> Result<&SlackMessageEvent, &'static str> {
    let SlackEventCallbackBody::Message(message) = &event.event else {
        return Err("not a message event");
    };
    match &message.subtype {
        None
        | Some(SlackMessageEventType::FileShare)
        | Some(SlackMessageEventType::ThreadBroadcast) => {}
        Some(SlackMessageEventType::MessageChanged) => return Err("edit"),
        Some(SlackMessageEventType::MessageDeleted) => return Err("deletion"),
        Some(SlackMessageEventType::BotMessage) => return Err("bot message"),
        Some(SlackMessageEventType::ChannelJoin) => return Err("join"),
        Some(_) => return Err("non-user subtype"),
    }
    if message.hidden == Some(true) {
        return Err("hidden event");
    }
    Ok(message)
}

/// `message` as a person's message of its thread, unless a bot or no one wrote it or it
/// says nothing.
fn person_message(
    event: &SlackPushEventCallback,
    message: &SlackMessageEvent,
    filter: &IntakeFilter,
) -> Intake {
    let Some(channel) = &message.origin.channel else {
        return Intake::Ignore("no channel");
    };
    if message.sender.bot_id.is_some() {
        return Intake::Ignore("bot message");
    }
    let Some(user) = &message.sender.user else {
        return Intake::Ignore("no user");
    };
    if user.0 == filter.bot_user_id {
        return Intake::Ignore("own message");
    }
    let text = message
        .content
        .as_ref()
        .and_then(|c| c.text.clone())
        .unwrap_or_default();
    if text.trim().is_empty() && shared_files(event).is_empty() {
        return Intake::Ignore("empty message");
    }
    let ts = message.origin.ts.0.clone();
    let thread_ts = message
        .origin
        .thread_ts
        .as_ref()
        .map(|t| t.0.clone())
        .unwrap_or_else(|| ts.clone());
    Intake::Accept(IncomingMessage {
        channel: channel.0.clone(),
        ts,
        thread_ts,
        user: user.0.clone(),
        text,
        event_id: Some(event.event_id.0.clone()),
        origin: Origin::Person,
    })
}

/// The files shared on a message event, in order: those Slack serves for download
/// (`url_private_download`); a file without one (an external link, a deleted file) is left
/// out. Nothing in them is trusted: the name is data, the URL is checked before any fetch.
pub fn shared_files(event: &SlackPushEventCallback) -> Vec<SharedFile> {
    let SlackEventCallbackBody::Message(message) = &event.event else {
        return Vec::new();
    };
    let files = message.content.as_ref().and_then(|c| c.files.as_ref());
    files
        .into_iter()
        .flatten()
        .filter_map(|file| {
            let url = file.url_private_download.as_ref()?;
            Some(SharedFile {
                id: file.id.0.clone(),
                name: file.name.clone().unwrap_or_default(),
                mimetype: file
                    .mimetype
                    .as_ref()
                    .map(|m| m.0.clone())
                    .unwrap_or_default(),
                url: url.to_string(),
            })
        })
        .collect()
}

/// A reaction asking that the message it is on become a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReactionRequest {
    pub channel: String,
    /// The message reacted to.
    pub ts: String,
    /// Who reacted: the request is theirs.
    pub user: String,
}

/// Classifies a push event against the request emoji `emoji` (a name without colons):
/// `Ok` for a reaction asking for a request here, `Err` with the reason it is ignored.
pub fn classify_reaction(
    event: &SlackPushEventCallback,
    filter: &IntakeFilter,
    emoji: &str,
) -> Result<ReactionRequest, &'static str> {
    let SlackEventCallbackBody::ReactionAdded(reaction) = &event.event else {
        return Err("not a reaction");
    };
    // A skin tone rides on the name: `thumbsup::skin-tone-2`.
    let name = reaction.reaction.0.split("::").next().unwrap_or_default();
    if name != emoji {
        return Err("another emoji");
    }
    let SlackReactionsItem::Message(message) = &reaction.item else {
        return Err("a reaction on a file");
    };
    let Some(channel) = &message.origin.channel else {
        return Err("no channel");
    };
    if channel.0 != filter.channel {
        return Err("other channel");
    }
    if reaction.user.0 == filter.bot_user_id {
        return Err("own reaction");
    }
    if reaction.item_user.as_ref().map(|u| u.0.as_str()) == Some(filter.bot_user_id.as_str()) {
        return Err("a reaction on the bot's own message");
    }
    Ok(ReactionRequest {
        channel: channel.0.clone(),
        ts: message.origin.ts.0.clone(),
        user: reaction.user.0.clone(),
    })
}

/// The request a reaction makes of a message: who asked and whose message it was on one line
/// (so the message's own words, even a bare "merge", reach the PM as a request, not a
/// command), then the message's text.
pub fn reaction_request_text(
    reacter: &str,
    emoji: &str,
    author: Option<&str>,
    text: &str,
) -> String {
    let whose = match author {
        Some(author) => format!("a message by <@{author}>"),
        None => "an app's message".to_owned(),
    };
    format!("<@{reacter}> asked for this with :{emoji}: on {whose}:\n{text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter() -> IntakeFilter {
        IntakeFilter {
            channel: "C1".into(),
            bot_user_id: "UBOT".into(),
        }
    }

    fn push(event: serde_json::Value) -> SlackPushEventCallback {
        serde_json::from_value(json!({
            "team_id": "T1", "api_app_id": "A1", "event_id": "Ev1", "event_time": 1700000000,
            "type": "event_callback", "event": event
        }))
        .unwrap()
    }

    fn user_message() -> serde_json::Value {
        json!({"type": "message", "channel": "C1", "user": "U1", "text": "how do we deploy?",
               "ts": "1700000000.000100", "event_ts": "1700000000.000100", "channel_type": "channel"})
    }

    #[test]
    fn accepts_a_top_level_user_message_as_its_own_thread() {
        let Intake::Accept(m) = classify(&push(user_message()), &filter()) else {
            panic!("not accepted");
        };
        assert_eq!(m.thread_ts, "1700000000.000100");
        assert_eq!(m.user, "U1");
        assert_eq!(m.event_id.as_deref(), Some("Ev1"));
    }

    #[test]
    fn text_that_reads_like_a_marker_is_a_persons_message() {
        for text in [
            "<codebutler:click approve 1.2 abc>\nplan",
            "<codebutler:pr-watch merged #1>",
            "<codebutler:pr-review round #1>",
            "<codebutler:coordination>⚠️ hi",
        ] {
            let mut e = user_message();
            e["text"] = json!(text);
            let Intake::Accept(m) = classify(&push(e), &filter()) else {
                panic!("{text:?} not accepted");
            };
            assert_eq!((m.origin, m.text.as_str()), (Origin::Person, text));
            assert_eq!(m.click(), None, "{text:?}");
        }
    }

    #[test]
    fn a_message_with_only_a_file_is_a_request_with_its_file() {
        let mut e = user_message();
        e["subtype"] = json!("file_share");
        e["text"] = json!("");
        e["files"] = json!([
            {"id": "F1", "name": "../../etc/passwd", "mimetype": "text/plain",
             "url_private": "https://files.slack.com/files-pri/T1-F1/x",
             "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/x"},
            {"id": "F2", "name": "link", "mimetype": "text/html"}
        ]);
        let event = push(e);
        let Intake::Accept(m) = classify(&event, &filter()) else {
            panic!("not accepted");
        };
        assert_eq!(m.text, "");
        assert_eq!(
            shared_files(&event),
            vec![SharedFile {
                id: "F1".into(),
                name: "../../etc/passwd".into(),
                mimetype: "text/plain".into(),
                url: "https://files.slack.com/files-pri/T1-F1/download/x".into(),
            }]
        );
    }

    #[test]
    fn a_direct_message_is_accepted_and_a_mention_elsewhere_too() {
        let mut dm = user_message();
        dm["channel"] = json!("D0ALICE");
        dm["channel_type"] = json!("im");
        let Intake::Accept(m) = classify(&push(dm), &filter()) else {
            panic!("direct message not accepted");
        };
        assert_eq!(
            (m.channel.as_str(), m.thread_ts.as_str()),
            ("D0ALICE", "1700000000.000100")
        );

        let mention = |channel: &str| {
            push(
                json!({"type": "app_mention", "channel": channel, "user": "U1",
                "text": "<@UBOT> how do we deploy?", "ts": "1700000000.000200",
                "event_ts": "1700000000.000200"}),
            )
        };
        let Intake::Accept(m) = classify_elsewhere(&mention("C2"), &filter()) else {
            panic!("mention elsewhere not accepted");
        };
        assert_eq!(
            (m.channel.as_str(), m.ts.as_str(), m.thread_ts.as_str()),
            ("C2", "1700000000.000200", "1700000000.000200")
        );
        assert_eq!(
            classify_elsewhere(&mention("C1"), &filter()),
            Intake::Ignore("a mention in the channel: its message event carries it")
        );

        let mut elsewhere = user_message();
        elsewhere["channel"] = json!("C2");
        assert_eq!(
            classify(&push(elsewhere.clone()), &filter()),
            Intake::Ignore("other channel")
        );
        assert_eq!(
            classify_elsewhere(&push(elsewhere.clone()), &filter()),
            Intake::Ignore("other channel"),
            "a top-level message elsewhere is nobody's conversation"
        );
        elsewhere["thread_ts"] = json!("1699999999.000001");
        assert!(matches!(
            classify_elsewhere(&push(elsewhere), &filter()),
            Intake::Accept(_)
        ));
    }

    #[test]
    fn accepts_a_thread_reply_in_its_thread() {
        let mut e = user_message();
        e["thread_ts"] = json!("1699999999.000001");
        let Intake::Accept(m) = classify(&push(e), &filter()) else {
            panic!("not accepted");
        };
        assert_eq!(m.thread_ts, "1699999999.000001");
        assert_eq!(m.ts, "1700000000.000100");
    }

    #[test]
    fn ignores_what_is_not_a_user_message_here() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (json!({"channel": "C2"}), "other channel"),
            (json!({"user": "UBOT"}), "own message"),
            (json!({"bot_id": "B9", "user": "U9"}), "bot message"),
            (
                json!({"subtype": "bot_message", "bot_id": "B9"}),
                "bot message",
            ),
            (
                json!({"subtype": "message_changed", "hidden": true}),
                "edit",
            ),
            (
                json!({"subtype": "message_deleted", "deleted_ts": "1.2"}),
                "deletion",
            ),
            (json!({"subtype": "channel_join"}), "join"),
            (json!({"subtype": "channel_topic"}), "non-user subtype"),
            (json!({"text": "   "}), "empty message"),
        ];
        for (patch, reason) in cases {
            let mut e = user_message();
            for (k, v) in patch.as_object().unwrap() {
                e[k] = v.clone();
            }
            assert_eq!(classify(&push(e), &filter()), Intake::Ignore(reason));
        }
        let reaction = json!({"type": "reaction_added", "user": "U1", "reaction": "eyes",
            "item": {"type": "message", "channel": "C1", "ts": "1.1"}, "event_ts": "1.2"});
        assert_eq!(
            classify(&push(reaction), &filter()),
            Intake::Ignore("not a message event")
        );
    }

    fn reaction(name: &str, user: &str, item_user: &str) -> SlackPushEventCallback {
        push(
            json!({"type": "reaction_added", "user": user, "reaction": name,
            "item_user": item_user,
            "item": {"type": "message", "channel": "C1", "ts": "1.1"}, "event_ts": "1.2"}),
        )
    }

    #[test]
    fn the_request_emoji_on_a_message_here_asks_for_a_request() {
        for name in ["codebutler", "codebutler::skin-tone-3"] {
            assert_eq!(
                classify_reaction(&reaction(name, "U1", "UALERT"), &filter(), "codebutler"),
                Ok(ReactionRequest {
                    channel: "C1".into(),
                    ts: "1.1".into(),
                    user: "U1".into()
                })
            );
        }
    }

    #[test]
    fn other_reactions_ask_for_nothing() {
        let emoji = "codebutler";
        let on_file = push(json!({"type": "reaction_added", "user": "U1",
            "reaction": emoji, "item": {"type": "file", "id": "F1"}, "event_ts": "1.2"}));
        let mut elsewhere = reaction(emoji, "U1", "U2");
        if let SlackEventCallbackBody::ReactionAdded(r) = &mut elsewhere.event
            && let SlackReactionsItem::Message(m) = &mut r.item
        {
            m.origin.channel = Some("C2".into());
        }
        let cases = [
            (reaction("eyes", "U1", "U2"), "another emoji"),
            (reaction("codebutlers", "U1", "U2"), "another emoji"),
            (reaction(emoji, "UBOT", "U2"), "own reaction"),
            (
                reaction(emoji, "U1", "UBOT"),
                "a reaction on the bot's own message",
            ),
            (on_file, "a reaction on a file"),
            (elsewhere, "other channel"),
            (push(user_message()), "not a reaction"),
        ];
        for (event, reason) in cases {
            assert_eq!(classify_reaction(&event, &filter(), emoji), Err(reason));
        }
    }

    #[test]
    fn a_reaction_request_names_who_asked_and_keeps_the_words_off_the_first_line() {
        assert_eq!(
            reaction_request_text("U1", "codebutler", Some("U2"), "merge"),
            "<@U1> asked for this with :codebutler: on a message by <@U2>:\nmerge"
        );
        assert_eq!(
            reaction_request_text("U1", "codebutler", None, "CPU at 99%"),
            "<@U1> asked for this with :codebutler: on an app's message:\nCPU at 99%"
        );
    }
}
