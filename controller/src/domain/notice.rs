//! A coordination notice as a stored message: the codec every floor reads (the thread's
//! handler posts it, the history shows it) and coordination writes, like the PR watcher's
//! [`super::PrEvent`].
//!
//! The marker starts with `<codebutler:coordination`: Slack escapes `<` in what people type
//! (as `&lt;`), so no typed message can pass for a notice; and only a message the controller
//! stored with [`Origin::Notice`] is read as one.

use super::{IncomingMessage, Origin, ThreadKey};

const MARKER: &str = "<codebutler:coordination>\n";

/// The Slack user id notices are stored under (no real user has it: Slack ids are
/// upper-case).
pub const NOTICE_USER: &str = "codebutler:coordination";

/// The stored message carrying `markdown` into `thread`, at `ts`.
pub fn notice_message(thread: &ThreadKey, ts: &str, markdown: &str) -> IncomingMessage {
    IncomingMessage {
        channel: thread.channel.clone(),
        ts: ts.to_owned(),
        thread_ts: thread.thread_ts.clone(),
        user: NOTICE_USER.to_owned(),
        text: format!("{MARKER}{markdown}"),
        event_id: None,
        origin: Origin::Notice,
    }
}

/// The notice a stored message carries, if it is one: only a message the controller stored
/// as a notice is one, whatever another's text says.
pub fn parse_notice(msg: &IncomingMessage) -> Option<&str> {
    if msg.origin != Origin::Notice {
        return None;
    }
    msg.text.strip_prefix(MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_read_back_and_typed_text_never_passes_for_one() {
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1700000000.000100".into(),
        };
        let msg = notice_message(&thread, "1.2", "⚠️ hi");
        assert_eq!(parse_notice(&msg), Some("⚠️ hi"));
        // The same text typed by a person, even under the notices' user id, is text.
        let typed = IncomingMessage {
            origin: Origin::Person,
            ..msg.clone()
        };
        assert_eq!(parse_notice(&typed), None);
        let escaped = IncomingMessage {
            text: "&lt;codebutler:coordination&gt;\nhi".into(),
            ..msg
        };
        assert_eq!(parse_notice(&escaped), None);
    }
}
