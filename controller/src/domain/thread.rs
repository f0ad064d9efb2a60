//! A Slack thread and the messages people write in it.

/// A Slack thread, by channel and the ts of its first message.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadKey {
    pub channel: String,
    pub thread_ts: String,
}

impl std::fmt::Display for ThreadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.thread_ts)
    }
}

/// A user message as received from Slack.
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingMessage {
    pub channel: String,
    pub ts: String,
    /// The thread it belongs to (its own ts for a top-level message).
    pub thread_ts: String,
    pub user: String,
    pub text: String,
    pub event_id: Option<String>,
}

impl IncomingMessage {
    /// The thread this message belongs to.
    pub fn thread(&self) -> ThreadKey {
        ThreadKey {
            channel: self.channel.clone(),
            thread_ts: self.thread_ts.clone(),
        }
    }
}
