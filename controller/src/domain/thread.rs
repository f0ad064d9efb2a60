//! A Slack thread and the messages people write in it.

use super::click::Click;

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

/// A conversation with the bot outside every repository's channel, whose repository is
/// chosen once when the service serves several: a person's whole direct-message
/// conversation, or the one thread a mention started in a channel no repository is served in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Conversation {
    /// Every message of this direct-message channel (`D…`), whatever its thread.
    Direct(String),
    /// One thread of a channel no repository is served in.
    Thread(ThreadKey),
}

impl Conversation {
    /// The channel it is in.
    pub fn channel(&self) -> &str {
        match self {
            Conversation::Direct(channel) => channel,
            Conversation::Thread(thread) => &thread.channel,
        }
    }

    /// Its thread's ts; empty for a whole direct-message conversation (as the store keys it).
    pub fn thread_ts(&self) -> &str {
        match self {
            Conversation::Direct(_) => "",
            Conversation::Thread(thread) => &thread.thread_ts,
        }
    }
}

impl std::fmt::Display for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conversation::Direct(channel) => f.write_str(channel),
            Conversation::Thread(thread) => write!(f, "{}/{}", thread.channel, thread.thread_ts),
        }
    }
}

/// Who put a message into its thread's queue, as the store keeps it beside the message.
///
/// What a message *is* — a button click, what the PR watcher saw on GitHub, a coordination
/// notice — is read from its origin, never from its text: a person can type anything (Slack
/// escapes `<` in the client, but not in text posted through the API), markers included, and
/// such text stays what it is, something a person said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A message a person posted in Slack (a message event).
    #[default]
    Person,
    /// A button click (Slack's interactivity payload), stored as its marker text.
    Click,
    /// The PR watcher: what it saw on GitHub (a merge, a close, a review round).
    Watcher,
    /// A coordination notice for the thread (an overlap, a conflict, a merge elsewhere).
    Notice,
}

impl Origin {
    /// The value of the `messages.origin` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Person => "person",
            Self::Click => "click",
            Self::Watcher => "watcher",
            Self::Notice => "notice",
        }
    }

    /// The origin a `messages.origin` value names.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::Person, Self::Click, Self::Watcher, Self::Notice]
            .into_iter()
            .find(|o| o.as_str() == value)
    }
}

/// A message of a thread: what a person wrote or clicked in Slack, or what the controller's
/// own watchers stored for the thread ([`Origin`] says which).
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingMessage {
    pub channel: String,
    pub ts: String,
    /// The thread it belongs to (its own ts for a top-level message).
    pub thread_ts: String,
    pub user: String,
    pub text: String,
    pub event_id: Option<String>,
    /// Who stored it: the only thing that makes it more than text.
    pub origin: Origin,
}

impl IncomingMessage {
    /// The button click this message is: only a message stored from a click is one.
    pub fn click(&self) -> Option<Click> {
        (self.origin == Origin::Click)
            .then(|| Click::parse(&self.text))
            .flatten()
    }

    /// The thread this message belongs to.
    pub fn thread(&self) -> ThreadKey {
        ThreadKey {
            channel: self.channel.clone(),
            thread_ts: self.thread_ts.clone(),
        }
    }
}
