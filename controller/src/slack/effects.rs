//! What the daemon does in Slack, as plain data: posts, snippets, images, reactions and updates,
//! grouped as they are recorded together in the outbox ([`crate::slack::outbox`]). Pure:
//! a reply becomes its effects here, and tests check them by equality.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use slack_morphism::prelude::SlackBlock;

use crate::domain::ThreadKey;
use crate::slack::format::{Outgoing, render_reply};
use crate::store::NewIntent;

/// One effect in a thread, as stored in the outbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Effect {
    /// A message in mrkdwn; `blocks` (Block Kit JSON) make `text` its fallback.
    Post {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blocks: Option<Value>,
    },
    /// A snippet file shared into the thread.
    Snippet {
        filename: String,
        filetype: String,
        content: String,
    },
    /// A PNG image shared into the thread (`png_base64`: its bytes, base64), titled `title`.
    Image {
        filename: String,
        title: String,
        png_base64: String,
    },
    /// A reaction on the message `ts` (adding one that is there is fine).
    React { ts: String, name: String },
    /// New text for one of the bot's messages; `blocks` replace its blocks (`[]` removes
    /// them), `None` keeps them.
    Update {
        message: MessageRef,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blocks: Option<Value>,
    },
}

/// Which message an update is for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRef {
    /// The message with this ts.
    Ts(String),
    /// The message the outbox effect with this id posted, looked up when the update is
    /// delivered (it comes after that post in the outbox, so the post is known by then).
    Post(String),
}

/// Effects recorded together, in order, under one group name: effect `n` is `<group>/<n>`
/// in the outbox and in the metadata of its post.
#[derive(Clone, Debug, PartialEq)]
pub struct Effects {
    group: String,
    thread: ThreadKey,
    effects: Vec<Effect>,
}

impl Effects {
    /// No effects yet, in `thread`, under a fresh random group name.
    pub fn new(thread: &ThreadKey) -> Self {
        Self::named(format!("{:032x}", rand::random::<u128>()), thread)
    }

    /// No effects yet, under the group name `group` (for effects found again by name, such as
    /// a run's status message).
    pub fn named(group: impl Into<String>, thread: &ThreadKey) -> Self {
        Self {
            group: group.into(),
            thread: thread.clone(),
            effects: Vec::new(),
        }
    }

    /// Adds an effect.
    pub fn push(mut self, effect: Effect) -> Self {
        self.effects.push(effect);
        self
    }

    /// Adds a Markdown reply: its messages (split under Slack's limits, the first one
    /// starting with `prefix`) and its long code blocks as snippets, in order.
    pub fn reply(mut self, markdown: &str, prefix: &str) -> Self {
        self.effects
            .extend(render_reply(markdown, prefix).into_iter().map(effect_of));
        self
    }

    /// Like [`Effects::reply`], with the blocks `blocks_for` makes of the last message's text
    /// on that message (a plan's buttons, a status message's Cancel); without any text, a
    /// short message carries them after the snippets.
    pub fn reply_with_blocks(
        mut self,
        markdown: &str,
        prefix: &str,
        blocks_for: impl Fn(&str) -> Vec<SlackBlock>,
    ) -> Self {
        let mut effects: Vec<Effect> = render_reply(markdown, prefix)
            .into_iter()
            .map(effect_of)
            .collect();
        let last_text = effects.iter_mut().rev().find_map(|e| match e {
            Effect::Post { text, blocks } => Some((text.clone(), blocks)),
            _ => None,
        });
        match last_text {
            Some((text, blocks)) => *blocks = Some(blocks_json(blocks_for(&text))),
            None => {
                let text = "(see above)";
                effects.push(Effect::Post {
                    text: text.into(),
                    blocks: Some(blocks_json(blocks_for(text))),
                });
            }
        }
        self.effects.extend(effects);
        self
    }

    /// Adds a message with Block Kit `blocks` (`text` their fallback).
    pub fn post_with_blocks(self, text: &str, blocks: Vec<SlackBlock>) -> Self {
        self.push(Effect::Post {
            text: text.into(),
            blocks: Some(blocks_json(blocks)),
        })
    }

    /// Adds a reaction on the message `ts`.
    pub fn react(self, ts: &str, name: &str) -> Self {
        self.push(Effect::React {
            ts: ts.into(),
            name: name.into(),
        })
    }

    /// Adds an update of `message` to `text` and `blocks`.
    pub fn update(self, message: MessageRef, text: &str, blocks: Vec<SlackBlock>) -> Self {
        self.push(Effect::Update {
            message,
            text: text.into(),
            blocks: Some(blocks_json(blocks)),
        })
    }

    /// The same effects with the first message's post made an update of `message` (to the
    /// same text and blocks): a reply that lands in a message Slack already shows, such as
    /// the one its answer was streamed into.
    pub fn first_post_onto(mut self, message: MessageRef) -> Self {
        let first = self
            .effects
            .iter()
            .position(|e| matches!(e, Effect::Post { .. }));
        if let Some(i) = first
            && let Effect::Post { text, blocks } = self.effects[i].clone()
        {
            self.effects[i] = Effect::Update {
                message,
                text,
                blocks,
            };
        }
        self
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The thread the effects are in.
    pub fn thread(&self) -> &ThreadKey {
        &self.thread
    }

    /// The effects, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// The outbox id of effect `n`.
    pub fn id(&self, n: usize) -> String {
        intent_id(&self.group, n)
    }

    /// The outbox rows to record.
    pub fn intents(&self) -> Vec<NewIntent> {
        self.effects
            .iter()
            .enumerate()
            .map(|(n, effect)| NewIntent {
                id: self.id(n),
                thread: self.thread.clone(),
                body: body(effect),
            })
            .collect()
    }
}

/// The outbox id of effect `n` of `group`.
pub fn intent_id(group: &str, n: usize) -> String {
    format!("{group}/{n}")
}

fn effect_of(part: Outgoing) -> Effect {
    match part {
        Outgoing::Text(text) => Effect::Post { text, blocks: None },
        Outgoing::Snippet {
            filename,
            filetype,
            content,
        } => Effect::Snippet {
            filename,
            filetype,
            content,
        },
    }
}

fn blocks_json(blocks: Vec<SlackBlock>) -> Value {
    // Block Kit types are plain data; serializing them does not fail in practice, and if it
    // did the message would go without blocks rather than not at all.
    serde_json::to_value(blocks).unwrap_or_else(|e| {
        tracing::error!("serialize blocks: {e}");
        Value::Array(Vec::new())
    })
}

fn body(effect: &Effect) -> String {
    // Strings and JSON values only. Should it ever fail, the empty body is refused at
    // delivery, loudly.
    serde_json::to_string(effect).unwrap_or_else(|e| {
        tracing::error!("serialize an outbox effect: {e}");
        String::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slack::interactive::{plan_blocks, sections};

    fn thread() -> ThreadKey {
        ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        }
    }

    #[test]
    fn a_reply_becomes_its_posts_and_snippets_in_order() {
        let code: String = (0..25).map(|i| format!("let x{i} = {i};\n")).collect();
        let markdown = format!("Here:\n\n```rust\n{code}```\n\nThat is all.");
        let effects = Effects::named("g", &thread())
            .reply(&markdown, "*PM:* ")
            .react("1.2", "white_check_mark");
        let kinds: Vec<&str> = effects
            .effects()
            .iter()
            .map(|e| match e {
                Effect::Post { .. } => "post",
                Effect::Snippet { .. } => "snippet",
                Effect::Image { .. } => "image",
                Effect::React { .. } => "react",
                Effect::Update { .. } => "update",
            })
            .collect();
        assert_eq!(kinds, ["post", "snippet", "post", "react"]);
        let ids: Vec<String> = effects.intents().into_iter().map(|i| i.id).collect();
        assert_eq!(ids, ["g/0", "g/1", "g/2", "g/3"]);
        assert_eq!(
            effects.effects()[3],
            Effect::React {
                ts: "1.2".into(),
                name: "white_check_mark".into()
            }
        );
    }

    #[test]
    fn blocks_go_on_the_last_message() {
        let long = format!("{}\n\n{}", "a".repeat(3500), "b".repeat(3500));
        let effects = Effects::named("p", &thread())
            .reply_with_blocks(&long, "*PM:* ", |t| plan_blocks(t, "d1"));
        let [
            Effect::Post { blocks: None, .. },
            Effect::Post {
                text,
                blocks: Some(blocks),
            },
        ] = effects.effects()
        else {
            panic!("{effects:?}");
        };
        assert!(text.starts_with('b'));
        assert_eq!(*blocks, blocks_json(plan_blocks(text, "d1")));
        let none = Effects::named("p", &thread()).reply_with_blocks("", "", sections);
        assert!(matches!(
            &none.effects()[0],
            Effect::Post {
                blocks: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn a_reply_onto_a_shown_message_updates_it_and_posts_the_rest() {
        let long = format!("{}\n\n{}", "a".repeat(3500), "b".repeat(3500));
        let plain = Effects::named("g", &thread()).reply(&long, "*PM:* ");
        let onto = plain
            .clone()
            .first_post_onto(MessageRef::Post("s/0".into()));
        let [
            Effect::Post { text: first, .. },
            second @ Effect::Post { .. },
        ] = plain.effects()
        else {
            panic!("{plain:?}");
        };
        assert_eq!(
            onto.effects(),
            [
                Effect::Update {
                    message: MessageRef::Post("s/0".into()),
                    text: first.clone(),
                    blocks: None,
                },
                second.clone(),
            ]
        );
    }

    #[test]
    fn bodies_round_trip() {
        let effects = Effects::new(&thread())
            .reply("hi", "")
            .update(MessageRef::Ts("1.3".into()), "done", sections("done"))
            .update(MessageRef::Post("g/0".into()), "also", sections("also"))
            .push(Effect::Snippet {
                filename: "a.rs".into(),
                filetype: "rust".into(),
                content: "fn a() {}".into(),
            });
        assert_eq!(effects.group().len(), 32);
        for (intent, effect) in effects.intents().iter().zip(effects.effects()) {
            assert_eq!(
                serde_json::from_str::<Effect>(&intent.body).unwrap(),
                *effect
            );
        }
        assert_eq!(
            serde_json::from_str::<Vec<SlackBlock>>(&match &effects.effects()[1] {
                Effect::Update {
                    blocks: Some(b), ..
                } => b.to_string(),
                other => panic!("{other:?}"),
            })
            .unwrap(),
            sections("done"),
            "stored blocks are Slack blocks again"
        );
    }
}
