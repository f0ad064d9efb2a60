//! `/codebutler pm [<model> [<thread>]]`: a person chooses the model the PM answers one
//! thread with. A message starting with `/` never reaches the bot as a message, so the
//! choice comes through the slash command, which names no thread: the thread is the one a
//! link or ts after the model names, else the latest open thread the person started in the
//! channel where they typed the command.
//!
//! The model is a key of the PM's pool (`productManager.models`) or the OpenRouter id of one
//! of its entries; anything else is refused with the pool's keys, and a pool model the
//! provider no longer lists is refused by [`check_pm_model`]. The choice is stored with
//! the thread ([`Change::PmModel`]) together with one line in the thread saying who chose
//! what, so the thread's readers know; every later PM turn of the thread reads it
//! ([`crate::thread::pm_turn`]). Without a model the answer shows the thread's current model
//! and the pool. Every answer goes to the person alone (the command's acknowledgement).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::dispatch::{HoldError, Ownership, commit_holding};
use crate::domain::{ThreadKey, ThreadOverview, thread_title};
use crate::gateway::Gateway;
use crate::pm::references::{Reference, detect};
use crate::slack::effects::Effects;
use crate::slack::format::escape_text;
use crate::slack::outbox::Outbox;
use crate::store::{Change, Store, StoreError};
use crate::thread::model_switch::{PmModelSwitch, check_pm_model};

/// Threads read back to find the one the command is about.
const READ_THREADS: i64 = 200;

/// What choosing a thread's PM model needs: the repository's store and outbox, and its pool.
#[derive(Clone)]
pub struct PmChoice {
    pub store: Store,
    /// Posts the line that tells the thread.
    pub outbox: Outbox,
    /// Holds the thread while the choice is recorded (instances sharing a store).
    pub ownership: Arc<dyn Ownership>,
    /// The PM's pool: key → OpenRouter id (`productManager.models`).
    pub pool: BTreeMap<String, String>,
    /// The OpenRouter id the PM uses when a thread chose none (`productManager.default`).
    pub default_model: String,
    /// Asked whether the provider still lists the chosen model.
    pub gateway: Arc<Gateway>,
}

/// Why the command could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum PmChoiceError {
    #[error("read the threads for /codebutler pm: {0}")]
    Store(#[from] StoreError),
    #[error("record the thread's pm model: {0}")]
    Record(HoldError),
}

impl std::fmt::Debug for PmChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmChoice")
            .field("pool", &self.pool)
            .field("default_model", &self.default_model)
            .finish_non_exhaustive()
    }
}

/// The words after `pm`: the model asked for (if any) and what names the thread (if any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmArgs {
    pub model: Option<String>,
    pub thread: Option<String>,
}

/// Splits the words after `pm`.
pub fn parse_args(text: &str) -> PmArgs {
    let mut words = text.split_whitespace();
    let model = words.next().map(str::to_owned);
    let rest: Vec<&str> = words.collect();
    PmArgs {
        model,
        thread: (!rest.is_empty()).then(|| rest.join(" ")),
    }
}

/// The thread `named` names: a Slack link to a thread (or a message in one) of `channel`'s
/// conversation or any other, or a bare ts, taken as a thread of `channel`.
pub fn named_thread(named: &str, channel: &str) -> Option<ThreadKey> {
    let linked = detect(named).references.into_iter().find_map(|r| match r {
        Reference::SlackThread {
            channel, thread_ts, ..
        } => Some(ThreadKey { channel, thread_ts }),
        _ => None,
    });
    linked.or_else(|| {
        let ts = named.trim();
        let (secs, micros) = ts.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        (digits(secs) && digits(micros)).then(|| ThreadKey {
            channel: channel.to_owned(),
            thread_ts: ts.to_owned(),
        })
    })
}

impl PmChoice {
    /// The answer to `user` typing `/codebutler pm <text>` in `channel`.
    pub async fn answer(
        &self,
        channel: &str,
        user: &str,
        text: &str,
    ) -> Result<String, PmChoiceError> {
        let args = parse_args(text);
        let threads = self.store.thread_overviews(READ_THREADS).await?;
        let thread = match &args.thread {
            Some(named) => {
                let Some(key) = named_thread(named, channel) else {
                    return Ok(format!(
                        "I can't read a thread in `{}`: give the thread's link (its message \
                         menu → Copy link).",
                        inline(named)
                    ));
                };
                match threads.iter().find(|t| t.key == key) {
                    Some(thread) => thread,
                    None => {
                        return Ok("That thread is not one of this repository's threads \
                                   (or is older than I keep track of)."
                            .to_owned());
                    }
                }
            }
            None => match latest_open_thread(&threads, channel, user) {
                Some(thread) => thread,
                None => {
                    return Ok(
                        "You have no open thread in this channel. Name one with its link: \
                         `/codebutler pm <model> <thread link>`."
                            .to_owned(),
                    );
                }
            },
        };
        let title = escape_text(&thread_title(thread.first_message.as_deref()));
        let Some(asked) = args.model else {
            return self.current(thread, &title).await;
        };
        let Some(model) = self.pool_model(&asked) else {
            return Ok(format!(
                "`{}` is not in the PM's pool (`productManager.models`): choose one of {}. \
                 The PM of “{title}” keeps its model.",
                inline(&asked),
                self.keys()
            ));
        };
        // The pool was checked against the provider's list at start; a model it has dropped
        // since is refused as the thread's switch refuses one.
        if let PmModelSwitch::Refused(refusal) = check_pm_model(&self.gateway, &model).await {
            return Ok(refusal);
        }
        let line = format!("PM model is now `{model}`, set by <@{user}>.");
        let effects = Effects::new(&thread.key).reply(&line, "");
        let change = Change::PmModel {
            thread: &thread.key,
            model: &model,
            user,
        };
        let busy = "Another instance holds that thread just now: try again in a moment.";
        match commit_holding(
            self.ownership.as_ref(),
            &self.outbox,
            &thread.key,
            &[change],
            &effects,
        )
        .await
        {
            Ok(true) => {}
            Ok(false) | Err(HoldError::Elsewhere(_)) => return Ok(busy.to_owned()),
            Err(e) => return Err(PmChoiceError::Record(e)),
        }
        tracing::info!(
            tag = "CMD",
            "thread {} → pm model {model}, set by {user}",
            thread.key
        );
        Ok(format!(
            "The PM of “{title}” answers with `{model}` from its next turn."
        ))
    }

    /// The thread's current model and the pool.
    async fn current(&self, thread: &ThreadOverview, title: &str) -> Result<String, PmChoiceError> {
        let chosen = self.store.thread_pm_model(&thread.key).await?;
        let now = match chosen {
            Some(chosen) => match chosen.set_by {
                Some(who) => format!("`{}` (chosen by <@{who}>)", chosen.model),
                None => format!("`{}`", chosen.model),
            },
            None => format!("`{}` (the default)", self.default_model),
        };
        Ok(format!(
            "The PM of “{title}” answers with {now}. The pool: {}. Switch with \
             `/codebutler pm <model>`.",
            self.pool
                .iter()
                .map(|(key, id)| format!("`{key}` ({id})"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// The OpenRouter id `asked` names in the pool: a key (any case) or an entry's id.
    fn pool_model(&self, asked: &str) -> Option<String> {
        self.pool
            .iter()
            .find(|(key, id)| key.eq_ignore_ascii_case(asked) || *id == asked)
            .map(|(_, id)| id.clone())
    }

    fn keys(&self) -> String {
        self.pool
            .keys()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The open thread `user` started last in `channel`.
fn latest_open_thread<'a>(
    threads: &'a [ThreadOverview],
    channel: &str,
    user: &str,
) -> Option<&'a ThreadOverview> {
    threads
        .iter()
        .filter(|t| {
            t.key.channel == channel
                && !t.stage.is_closed()
                && t.started_by.as_deref() == Some(user)
        })
        .max_by(|a, b| a.created_at.cmp(&b.created_at))
}

/// `text` as inline code can hold it: one line, without backticks.
fn inline(text: &str) -> String {
    escape_text(
        &text
            .chars()
            .map(|c| if c == '`' || c.is_control() { ' ' } else { c })
            .take(80)
            .collect::<String>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_after_pm_are_a_model_then_a_thread() {
        assert_eq!(
            parse_args(""),
            PmArgs {
                model: None,
                thread: None
            }
        );
        assert_eq!(
            parse_args(" lean  <https://acme.slack.com/archives/C1/p1700000000000100>"),
            PmArgs {
                model: Some("lean".into()),
                thread: Some("<https://acme.slack.com/archives/C1/p1700000000000100>".into())
            }
        );
    }

    #[test]
    fn a_thread_is_named_by_its_link_or_its_ts() {
        let key = |c: &str, ts: &str| ThreadKey {
            channel: c.into(),
            thread_ts: ts.into(),
        };
        assert_eq!(
            named_thread(
                "<https://acme.slack.com/archives/C9/p1700000000000100>",
                "C1"
            ),
            Some(key("C9", "1700000000.000100"))
        );
        assert_eq!(
            named_thread("1700000000.000100", "C1"),
            Some(key("C1", "1700000000.000100"))
        );
        assert_eq!(named_thread("yesterday's", "C1"), None);
        assert_eq!(named_thread("1.x", "C1"), None);
    }
}
