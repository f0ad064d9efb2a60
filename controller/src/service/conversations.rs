//! Conversations outside every repository's channel when one service serves several
//! repositories: which repository a person's conversation with the bot is about. A
//! conversation is a person's direct messages with the bot, or the thread of a mention of the
//! bot in a channel no repository is served in. Its first message gets one question listing
//! the repositories the person may use (by name and channel); the answer — a repository's
//! name or its channel's mention — is remembered for that conversation (in the first
//! repository's store, so it survives a restart), and from then on the conversation's
//! messages go to that repository, which answers them read-only
//! ([`crate::thread::conversation`]). `switch to <repository>` changes it. A person allowed
//! in one repository only is not asked: the conversation is that repository's. A reply in a
//! thread of another channel starts no conversation: only a mention does.
//!
//! The question and the confirmation are recorded with the choice they go with and posted
//! through the first repository's outbox, so a redelivered event asks nothing twice. With
//! several instances on one store, that outbox records nothing for a thread whose lease this
//! instance does not hold: the conversation's thread is claimed for the moment of the
//! question (and given back after), and the store records a question or a choice once, so
//! two instances given the same event ask and confirm once between them.
//!
//! `/codebutler` typed in a direct message applies to the repository its conversation is
//! about ([`Conversations::command`]).

use std::sync::Arc;

use slack_morphism::prelude::{SlackEventCallbackBody, SlackPushEventCallback};

use crate::dispatch::{HoldError, Ownership, commit_holding};
use crate::domain::{Conversation, IncomingMessage, ThreadKey};
use crate::slack::effects::Effects;
use crate::slack::intake::{Intake, IntakeFilter, classify, classify_elsewhere};
use crate::slack::outbox::Outbox;
use crate::slack::socket::{EventSink, NotStored, SlashCommand};
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

/// The conversations outside every repository's channel of a service with several
/// repositories.
pub struct Conversations {
    pub repos: Vec<ConversationRepo>,
    /// The first repository's store and outbox: the choices, the question, the confirmation.
    pub store: Store,
    pub outbox: Outbox,
    /// Which instance may speak in a thread of the first repository's store (its outbox is
    /// fenced by the thread's lease when instances share the store).
    pub ownership: Arc<dyn Ownership>,
    /// The bot's own user id.
    pub bot_user_id: String,
}

impl std::fmt::Debug for Conversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversations")
            .field("repos", &self.repos)
            .finish_non_exhaustive()
    }
}

/// Why a conversation's message could not be taken (it is left unacknowledged, for Slack to
/// deliver again).
#[derive(Debug, thiserror::Error)]
enum ChoiceError {
    #[error("read the conversation's repository: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("record the conversation's repository: {0}")]
    Record(#[from] HoldError),
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

/// `text` without the mention of the bot it starts with (a mention's text carries it).
fn without_mention<'a>(text: &'a str, bot_user_id: &str) -> &'a str {
    let text = text.trim_start();
    text.strip_prefix(&format!("<@{bot_user_id}>"))
        .unwrap_or(text)
        .trim_start()
}

/// The answer to a slash command typed in a direct message whose conversation's repository
/// is not chosen yet (mrkdwn): the repositories to name first.
pub fn name_it_first(command: &str, repos: &[(String, String)]) -> String {
    let listed: Vec<String> = repos
        .iter()
        .map(|(name, channel)| format!("*{name}* (<#{channel}>)"))
        .collect();
    format!(
        "In a direct message {command} answers about the repository this conversation is \
         about, and none is chosen yet: name it here first ({}), then try again.",
        listed.join(", ")
    )
}

impl Conversations {
    /// Takes a conversation's message: to its repository when settled, else the question or
    /// the choice. A direct message, a mention of the bot in a channel no repository is
    /// served in, or a reply in such a mention's thread; any other event is acknowledged and
    /// ignored.
    pub async fn accept(&self, event: SlackPushEventCallback) -> Result<(), NotStored> {
        let filter = IntakeFilter {
            // No repository's channel: only conversations are accepted here.
            channel: String::new(),
            bot_user_id: self.bot_user_id.clone(),
        };
        let (conversation, msg) = match classify(&event, &filter) {
            Intake::Accept(msg) => (Conversation::Direct(msg.channel.clone()), msg),
            Intake::Ignore(_) => match classify_elsewhere(&event, &filter) {
                Intake::Accept(msg) => (Conversation::Thread(msg.thread()), msg),
                Intake::Ignore(reason) => {
                    tracing::debug!(event = %event.event_id.0, "ignored event: {reason}");
                    return Ok(());
                }
            },
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
        // A direct message or a mention starts a conversation; a reply in another channel's
        // thread belongs to one only if a mention started it there.
        let starts = match &conversation {
            Conversation::Direct(_) => true,
            Conversation::Thread(_) => {
                matches!(&event.event, SlackEventCallbackBody::AppMention(_))
            }
        };
        match self.settle(&msg, &conversation, starts, &choices).await {
            Ok(Some(name)) => match open.iter().find(|r| r.name == name) {
                Some(repo) => repo.sink.accept_conversation(event).await,
                None => Ok(()),
            },
            Ok(None) => Ok(()),
            Err(e) => Err(NotStored::new("conversation's message", &msg.ts, e)),
        }
    }

    /// `/codebutler` typed in a direct message: answered by the repository its conversation
    /// is about (the only one the person may use, or the one chosen), else a line naming the
    /// repositories to choose from first.
    pub async fn command(&self, command: SlashCommand) -> String {
        let open: Vec<&ConversationRepo> = self
            .repos
            .iter()
            .filter(|r| r.allows(&command.user))
            .collect();
        if let [only] = open.as_slice() {
            return only.sink.command(command).await;
        }
        let Some(first) = self.repos.first() else {
            return format!("{} is not answered here.", command.command);
        };
        if open.is_empty() {
            return first.sink.command(command).await;
        }
        let conversation = Conversation::Direct(command.channel.clone());
        match self.store.conversation_choice(&conversation).await {
            Ok(ConversationChoice::Chosen(name)) => {
                if let Some(repo) = open.iter().find(|r| r.name == name) {
                    return repo.sink.command(command).await;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(
                    "read the conversation's repository for {}: {e}",
                    command.command
                );
                return "CodeButler could not read its records just now: try again in a moment."
                    .to_owned();
            }
        }
        let choices: Vec<(String, String)> = open
            .iter()
            .map(|r| (r.name.clone(), r.channel.clone()))
            .collect();
        name_it_first(&command.command, &choices)
    }

    /// The repository `msg`'s conversation is about, if settled and `msg` is for it; `None`
    /// when `msg` was the question's occasion or the answer (said in the conversation), or
    /// belongs to no conversation (`starts` false and nothing asked).
    async fn settle(
        &self,
        msg: &IncomingMessage,
        conversation: &Conversation,
        starts: bool,
        choices: &[(String, String)],
    ) -> Result<Option<String>, ChoiceError> {
        let thread = msg.thread();
        let choice = self.store.conversation_choice(conversation).await?;
        if choice == ConversationChoice::NotAsked && !starts {
            return Ok(None);
        }
        let text = without_mention(&msg.text, &self.bot_user_id);
        match (&choice, named(text, choices)) {
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
                    conversation,
                    repository: name,
                    user: &msg.user,
                };
                if self.commit_in(&thread, change, &effects).await? {
                    tracing::info!(
                        "conversation {conversation} is about {name}, as {} said",
                        msg.user
                    );
                }
                Ok(None)
            }
            (ConversationChoice::NotAsked, Named::Nothing) => {
                let effects = Effects::named(format!("conversation:{}", msg.ts), &thread)
                    .reply(&question(choices), "");
                self.commit_in(&thread, Change::ConversationAsked(conversation), &effects)
                    .await?;
                Ok(None)
            }
            // Asked already (or a repository no longer offered): the question stands.
            (_, Named::Nothing) => Ok(None),
        }
    }

    /// Records `change` with `effects` in `thread` and delivers them, holding the thread for
    /// the moment (given back after, if this took it). Returns whether it was recorded (a
    /// question asked already, or a choice made already, records nothing).
    async fn commit_in(
        &self,
        thread: &ThreadKey,
        change: Change<'_>,
        effects: &Effects,
    ) -> Result<bool, ChoiceError> {
        Ok(commit_holding(
            self.ownership.as_ref(),
            &self.outbox,
            thread,
            &[change],
            effects,
        )
        .await?)
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
    fn a_mention_of_the_bot_before_the_answer_is_not_part_of_it() {
        let repos = repos();
        for text in ["<@UBOT> web", "  <@UBOT>   switch to web", "web"] {
            assert_eq!(
                named(without_mention(text, "UBOT"), &repos),
                Named::Repository("web"),
                "{text:?}"
            );
        }
        assert_eq!(
            named(without_mention("<@UOTHER> web", "UBOT"), &repos),
            Named::Nothing
        );
    }

    #[test]
    fn a_command_in_a_direct_message_without_a_choice_lists_the_repositories() {
        assert_eq!(
            name_it_first("/codebutler", &repos()),
            "In a direct message /codebutler answers about the repository this conversation \
             is about, and none is chosen yet: name it here first (*api* (<#C0API>), *web* \
             (<#C0WEB>)), then try again."
        );
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
