//! Direct messages when one service serves several repositories: which repository a
//! person's conversation with the bot is about. The first direct message of a conversation
//! gets one question listing the repositories the person may use (by name and channel); the
//! answer — a repository's name or its channel's mention — is remembered for that
//! conversation (in the first repository's store, so it survives a restart), and from then on
//! the conversation's messages go to that repository, which answers them read-only
//! ([`crate::thread::conversation`]). `switch to <repository>` changes it. A person allowed
//! in one repository only is not asked: the conversation is that repository's.
//!
//! The question and the confirmation are recorded with the choice they go with and posted
//! through the first repository's outbox, so a redelivered event asks nothing twice.

use std::sync::Arc;

use slack_morphism::prelude::SlackPushEventCallback;

use crate::domain::IncomingMessage;
use crate::slack::effects::Effects;
use crate::slack::intake::{Intake, IntakeFilter, classify};
use crate::slack::outbox::Outbox;
use crate::slack::socket::{EventSink, NotStored};
use crate::store::{Change, ConversationChoice, Store};

/// A repository a conversation can be about.
pub struct ConversationRepo {
    /// Its name, as the configuration names it.
    pub name: String,
    pub channel: String,
    /// `access.allowedUsers` (empty: everyone).
    pub allowed_users: Vec<String>,
    /// Where its conversations' messages are stored and answered.
    pub sink: Arc<dyn EventSink>,
}

impl std::fmt::Debug for ConversationRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationRepo")
            .field("name", &self.name)
            .field("channel", &self.channel)
            .finish()
    }
}

impl ConversationRepo {
    fn allows(&self, user: &str) -> bool {
        self.allowed_users.is_empty() || self.allowed_users.iter().any(|u| u == user)
    }
}

/// The direct messages of a service with several repositories.
#[derive(Debug)]
pub struct Conversations {
    pub repos: Vec<ConversationRepo>,
    /// The first repository's store and outbox: the choices, the question, the confirmation.
    pub store: Store,
    pub outbox: Outbox,
    /// The bot's own user id.
    pub bot_user_id: String,
}

/// Why a direct message could not be taken (it is left unacknowledged, for Slack to
/// deliver again).
#[derive(Debug, thiserror::Error)]
enum ChoiceError {
    #[error("read the conversation's repository: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("record the conversation's repository: {0}")]
    Outbox(#[from] crate::slack::outbox::OutboxError),
}

/// What a message says of the repository its conversation is about (a message that is a
/// repository's name and nothing more chooses it; `switch to <name>` reads the same).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Named<'a> {
    /// It names this repository (whole, or after `switch to`).
    Repository(&'a str),
    /// It names none.
    Nothing,
}

/// The repository among `names` (with their `channels`) that `text` names: the whole
/// message (its name, any case, or its channel's mention `<#C…>`/`<#C…|name>`), or
/// `switch to` followed by one of those.
pub fn named<'a>(text: &str, repos: &'a [(String, String)]) -> Named<'a> {
    let text = text.trim();
    let lower = text.to_lowercase();
    let asked = lower
        .strip_prefix("switch to")
        .map_or(text, |_| text.get(9..).unwrap_or_default().trim());
    let asked = asked.trim_matches(|c: char| c == '*' || c == '`' || c == '.' || c == '!');
    for (name, channel) in repos {
        let mention = asked
            .strip_prefix("<#")
            .and_then(|m| m.strip_suffix('>'))
            .map(|m| m.split('|').next().unwrap_or_default());
        if asked.eq_ignore_ascii_case(name) || mention == Some(channel.as_str()) {
            return Named::Repository(name);
        }
    }
    Named::Nothing
}

/// The question asked once (markdown): the repositories by name and channel.
pub fn question(repos: &[(String, String)]) -> String {
    let listed: Vec<String> = repos
        .iter()
        .map(|(name, channel)| format!("**{name}** (<#{channel}>)"))
        .collect();
    format!(
        "I work on several repositories: which one is this conversation about? Answer with its \
         name: {}.",
        listed.join(", ")
    )
}

/// The confirmation of a choice (markdown).
pub fn confirmation(name: &str, channel: &str) -> String {
    format!(
        "This conversation is about **{name}** (<#{channel}>) now: ask me anything about it. \
         Work on it starts in <#{channel}>; `switch to <repository>` changes the repository."
    )
}

impl Conversations {
    /// Takes a direct message: to its repository when settled, else the question or the
    /// choice.
    pub async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        let filter = IntakeFilter {
            // No repository's channel: only a direct message is accepted here.
            channel: String::new(),
            bot_user_id: self.bot_user_id.clone(),
        };
        let msg = match classify(&event, &filter) {
            Intake::Accept(msg) => msg,
            Intake::Ignore(reason) => {
                tracing::debug!(event = %event.event_id.0, "ignored event: {reason}");
                return Ok(());
            }
        };
        let open: Vec<&ConversationRepo> =
            self.repos.iter().filter(|r| r.allows(&msg.user)).collect();
        // Allowed in one repository (or none, which refuses): no question.
        if let [only] = open.as_slice() {
            return only.sink.accept(event).await;
        }
        let Some(first) = self.repos.first() else {
            return Ok(());
        };
        if open.is_empty() {
            return first.sink.accept(event).await;
        }
        let choices: Vec<(String, String)> = open
            .iter()
            .map(|r| (r.name.clone(), r.channel.clone()))
            .collect();
        match self.settle(&msg, &choices).await {
            Ok(Some(name)) => match open.iter().find(|r| r.name == name) {
                Some(repo) => repo.sink.accept(event).await,
                None => Ok(()),
            },
            Ok(None) => Ok(()),
            Err(e) => Err(NotStored::new("direct message", &msg.ts, e)),
        }
    }

    /// The repository `msg`'s conversation is about, if settled and `msg` is for it; `None`
    /// when `msg` was the question's occasion or the answer (said in the conversation).
    async fn settle(
        &self,
        msg: &IncomingMessage,
        choices: &[(String, String)],
    ) -> Result<Option<String>, ChoiceError> {
        let thread = msg.thread();
        let choice = self.store.conversation_choice(&msg.channel).await?;
        match (&choice, named(&msg.text, choices)) {
            (ConversationChoice::Chosen(name), Named::Nothing)
                if choices.iter().any(|(n, _)| n == name) =>
            {
                Ok(Some(name.clone()))
            }
            // The repository chosen already, named again (or the answer delivered again).
            (ConversationChoice::Chosen(chosen), Named::Repository(name)) if chosen == name => {
                Ok(None)
            }
            (_, Named::Repository(name)) => {
                let channel = choices
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, c)| c.as_str())
                    .unwrap_or_default();
                let effects = Effects::new(&thread).reply(&confirmation(name, channel), "");
                let change = Change::ConversationChosen {
                    channel: &msg.channel,
                    repository: name,
                    user: &msg.user,
                };
                self.outbox.commit(&[change], &effects).await?;
                tracing::info!(
                    "conversation {} is about {name}, as {} said",
                    msg.channel,
                    msg.user
                );
                Ok(None)
            }
            (ConversationChoice::NotAsked, Named::Nothing) => {
                let effects = Effects::named(format!("conversation:{}", msg.ts), &thread)
                    .reply(&question(choices), "");
                let change = Change::ConversationAsked {
                    channel: &msg.channel,
                };
                self.outbox.commit(&[change], &effects).await?;
                Ok(None)
            }
            // Asked already (or a repository no longer offered): the question stands.
            (_, Named::Nothing) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repos() -> Vec<(String, String)> {
        vec![
            ("api".to_owned(), "C0API".to_owned()),
            ("web".to_owned(), "C0WEB".to_owned()),
        ]
    }

    #[test]
    fn a_repository_is_named_by_its_name_or_its_channel() {
        let repos = repos();
        for text in [
            "web",
            " WEB. ",
            "<#C0WEB>",
            "<#C0WEB|web-team>",
            "switch to web",
            "*web*",
        ] {
            assert_eq!(named(text, &repos), Named::Repository("web"), "{text:?}");
        }
        for text in ["how do we deploy web?", "webs", "<#C0OTHER>", ""] {
            assert_eq!(named(text, &repos), Named::Nothing, "{text:?}");
        }
    }

    #[test]
    fn the_question_lists_each_repository_with_its_channel() {
        assert_eq!(
            question(&repos()),
            "I work on several repositories: which one is this conversation about? Answer \
             with its name: **api** (<#C0API>), **web** (<#C0WEB>)."
        );
    }
}
