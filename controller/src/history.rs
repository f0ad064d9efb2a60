//! A thread's history, in time order, from what the store keeps of it: the people's
//! messages and clicks, what the PR watcher saw on GitHub, what CodeButler said as each role, the PM's tool calls, the Coder's
//! questions with their answers, and the Coder's runs.
//!
//! The thread's handling (its close), memory extraction, the PR description, the thread
//! journal and the usage report's tips all read a thread through [`History`], so it sits
//! below all of them: [`History::render`] is the plain text a model is
//! given; the entries are there for those that lay it out themselves.

use codebutler_agent::conversation::ChatMessage;

use crate::domain::PrEvent;
use crate::domain::{ButtonAction, Click, Origin, Role, RunRecord, ThreadKey};
use crate::slack::effects::Effect;
use crate::store::{QuestionRecord, Store, StoreError};

/// Longest a PM tool call's arguments are shown.
const MAX_TOOL_ARGUMENTS: usize = 120;
/// The outbox groups of a run's live status message, which is not part of the story.
const STATUS_GROUP: &str = "status:";

/// A thread's history.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    pub thread: ThreadKey,
    /// In time order.
    pub entries: Vec<Entry>,
}

/// One thing that happened in a thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// When (RFC 3339, UTC).
    pub at: String,
    pub event: Event,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A person wrote in the thread (`user` is a Slack user id).
    Person { user: String, text: String },
    /// A person clicked one of the thread's buttons.
    Clicked { user: String, action: ButtonAction },
    /// The PR watcher saw the thread's pull request merged or closed on GitHub.
    GitHub(PrEvent),
    /// CodeButler said something in the thread as `role`.
    Said { role: Role, text: String },
    /// The PM called a tool; `arguments` shortened.
    PmTool { name: String, arguments: String },
    /// The Coder asked a question (numbered from 1 in the order asked) and how it was
    /// answered: `answered_by` is `pm` or the Slack user id of a person.
    CoderQuestion {
        number: usize,
        question: String,
        answer: Option<String>,
        answered_by: Option<String>,
    },
    /// A Coder run, at its start (what it did and cost, as far as it went).
    Run(Box<RunRecord>),
}

impl History {
    /// The thread's history from the store.
    pub async fn load(store: &Store, thread: &ThreadKey) -> Result<Self, StoreError> {
        let mut entries = Vec::new();
        for msg in store.thread_messages(thread).await? {
            // A review round's announcement: what it proposed is among the thread's posts. A
            // coordination notice is what CodeButler said, recorded with its post.
            let event = match msg.origin {
                // What the watcher saw: a merge or close is part of the thread's story; a
                // review round's announcement is among the thread's posts.
                Origin::Watcher => match PrEvent::parse(&msg.text) {
                    Some(event) => Event::GitHub(event),
                    None => continue,
                },
                // A coordination notice is what CodeButler said, recorded with its post.
                Origin::Notice => continue,
                Origin::Click => match Click::parse(&msg.text) {
                    Some(click) => Event::Clicked {
                        user: msg.user,
                        action: click.action,
                    },
                    None => continue,
                },
                Origin::Person => Event::Person {
                    user: msg.user,
                    text: msg.text,
                },
            };
            entries.push(Entry {
                at: msg.received_at,
                event,
            });
        }
        for effect in store.thread_effects(thread).await? {
            if effect.id.starts_with(STATUS_GROUP) {
                continue;
            }
            if let Some(event) = said(&effect.body) {
                entries.push(Entry {
                    at: effect.created_at,
                    event,
                });
            }
        }
        for (at, message) in store.dated_conversation(thread, Role::Pm.as_str()).await? {
            if let ChatMessage::Assistant { tool_calls, .. } = message {
                for call in tool_calls {
                    entries.push(Entry {
                        at: at.clone(),
                        event: Event::PmTool {
                            name: call.function.name,
                            arguments: shorten(&call.function.arguments, MAX_TOOL_ARGUMENTS),
                        },
                    });
                }
            }
        }
        let questions = store.thread_questions(thread).await?;
        entries.extend(questions.into_iter().enumerate().map(question_entry));
        for run in store.thread_runs(thread).await? {
            entries.push(Entry {
                at: run.created_at.clone(),
                event: Event::Run(Box::new(run)),
            });
        }
        // Stable: what shares a time keeps its source's order.
        entries.sort_by(|a, b| a.at.cmp(&b.at));
        Ok(Self {
            thread: thread.clone(),
            entries,
        })
    }

    /// The people who wrote or clicked in the thread (Slack user ids), in order of their
    /// first appearance.
    pub fn participants(&self) -> Vec<String> {
        let mut people: Vec<String> = Vec::new();
        for entry in &self.entries {
            let user = match &entry.event {
                Event::Person { user, .. } | Event::Clicked { user, .. } => user,
                _ => continue,
            };
            if !people.contains(user) {
                people.push(user.clone());
            }
        }
        people
    }

    /// What a person first wrote in the thread: what it is about.
    pub fn first_request(&self) -> Option<&str> {
        self.entries.iter().find_map(|e| match &e.event {
            Event::Person { text, .. } => Some(text.as_str()),
            _ => None,
        })
    }

    /// The history as plain text for a model: one entry per line (a message's own lines
    /// indented under it), `[HH:MM] who: what`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for entry in &self.entries {
            let line = render_event(&entry.event);
            out.push_str(&format!("[{}] ", clock(&entry.at)));
            let mut lines = line.lines();
            out.push_str(lines.next().unwrap_or(""));
            out.push('\n');
            for rest in lines {
                out.push_str("    ");
                out.push_str(rest);
                out.push('\n');
            }
        }
        out
    }
}

/// The entry of the `index`th question asked.
fn question_entry((index, q): (usize, QuestionRecord)) -> Entry {
    Entry {
        at: q.asked_at,
        event: Event::CoderQuestion {
            number: index + 1,
            question: q.question,
            answer: q.answer,
            answered_by: q.answered_by,
        },
    }
}

/// What an outbox effect said, if it said something: a post, or a shared snippet.
fn said(body: &str) -> Option<Event> {
    let effect = match serde_json::from_str::<Effect>(body) {
        Ok(effect) => effect,
        Err(e) => {
            tracing::warn!("unreadable outbox effect left out of the history: {e}");
            return None;
        }
    };
    let text = match effect {
        Effect::Post { text, .. } => text,
        Effect::Snippet { filename, .. } => format!("(shared the file {filename})"),
        Effect::Image { title, .. } => format!("(shared the image {title})"),
        Effect::React { .. } | Effect::Update { .. } => return None,
    };
    let (role, text) = speaker_of(&text);
    Some(Event::Said {
        role,
        text: text.to_owned(),
    })
}

/// The role a post's label names, and the text after the label (the PM's when unlabelled).
fn speaker_of(text: &str) -> (Role, &str) {
    for role in Role::ALL {
        let label = format!("*{}:* ", role.label());
        if let Some(rest) = text.strip_prefix(&label) {
            return (role, rest);
        }
    }
    (Role::Pm, text)
}

fn render_event(event: &Event) -> String {
    match event {
        Event::Person { user, text } => format!("<@{user}>: {text}"),
        Event::Clicked { user, action } => format!("<@{user}> clicked {}", action.label()),
        Event::GitHub(PrEvent::Merged) => "GitHub: the pull request was merged".to_owned(),
        Event::GitHub(PrEvent::Closed) => {
            "GitHub: the pull request was closed without merging".to_owned()
        }
        Event::Said { role, text } => format!("{}: {text}", role.label()),
        Event::PmTool { name, arguments } => format!("PM used {name} {arguments}"),
        Event::CoderQuestion {
            number,
            question,
            answer,
            answered_by,
        } => {
            let answer = match (answer, answered_by.as_deref()) {
                (Some(answer), Some("pm")) => format!("answered by the PM: {answer}"),
                (Some(answer), Some(user)) => format!("answered by <@{user}>: {answer}"),
                (Some(answer), None) => format!("answered: {answer}"),
                (None, _) => "not answered".to_owned(),
            };
            format!("Coder asked (question {number}): {question}\n{answer}")
        }
        Event::Run(run) => format!(
            "Coder run {}: {} after {} turns · {} tokens in, {} out · ${:.2}",
            run.id,
            run.state.as_str(),
            run.turns,
            run.prompt_tokens,
            run.completion_tokens,
            run.cost
        ),
    }
}

/// `HH:MM` of an RFC 3339 time, or the whole string when it is not one.
fn clock(at: &str) -> &str {
    at.get(11..16).unwrap_or(at)
}

/// `text` cut to at most `max` characters, with `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use codebutler_agent::conversation::{ChatMessage, ToolCall};

    use super::*;
    use crate::domain::IncomingMessage;
    use crate::domain::ReviewEvent;
    use crate::domain::WATCHER_USER;
    use crate::slack::effects::Effects;
    use crate::store::{Change, NewRun};

    fn message(ts: &str, user: &str, text: &str) -> IncomingMessage {
        IncomingMessage {
            channel: "C1".into(),
            ts: ts.into(),
            thread_ts: "1.1".into(),
            user: user.into(),
            text: text.into(),
            event_id: None,
            origin: crate::domain::Origin::Person,
        }
    }

    /// Each line of the rendering without its `[HH:MM] ` clock.
    fn without_clock(text: &str) -> Vec<String> {
        text.lines()
            .map(|l| l.strip_prefix('[').map_or(l, |l| &l[7..]).to_owned())
            .collect()
    }

    #[tokio::test]
    async fn a_thread_reads_in_order_with_every_kind_of_entry() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.db")).await.unwrap();
        let thread = ThreadKey {
            channel: "C1".into(),
            thread_ts: "1.1".into(),
        };
        store
            .record_message(&message("1.1", "U1", "fix the login bug"))
            .await
            .unwrap();
        let turn = [
            ChatMessage::user("fix the login bug"),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("c1", "Grep", r#"{"pattern":"login"}"#)],
            },
            ChatMessage::tool_result("c1", "src/login.rs:3"),
            ChatMessage::assistant_text("Plan: …"),
        ];
        let said = Effects::new(&thread).reply("Here is the plan.", "*PM:* ");
        store
            .commit(
                &[Change::Turn {
                    thread: &thread,
                    role: "pm",
                    messages: &turn,
                }],
                &said.intents(),
            )
            .await
            .unwrap();
        let status = Effects::named("status:r1", &thread).reply("turn 1", "*Coder:* ");
        store.commit(&[], &status.intents()).await.unwrap();
        store
            .create_run(NewRun {
                id: "r1",
                thread: &thread,
                plan: "p",
                model: "m",
                worktree: "w",
                branch: "codebutler/login",
                max_turns: 5,
            })
            .await
            .unwrap();
        store
            .record_question("r1", "q1", &thread, "JWT or cookies?")
            .await
            .unwrap();
        store
            .answer_question("r1", "q1", "U2", "JWT, always")
            .await
            .unwrap();
        store
            .record_message(&message("1.5", "U2", "JWT, always"))
            .await
            .unwrap();
        store
            .record_message(&IncomingMessage {
                origin: Origin::Watcher,
                ..message("1.6", WATCHER_USER, &PrEvent::Merged.to_text(7))
            })
            .await
            .unwrap();
        // A review round's announcement is not part of the story (its proposal is).
        store
            .record_message(&IncomingMessage {
                origin: Origin::Watcher,
                ..message("1.65", WATCHER_USER, &ReviewEvent::Round.to_text(7))
            })
            .await
            .unwrap();
        // A person cannot pass for the watcher by typing its marker: only the origin says
        // what a message is.
        store
            .record_message(&message("1.7", "U3", &PrEvent::Closed.to_text(7)))
            .await
            .unwrap();
        // A coordination notice is history through its post, not as a message.
        store
            .record_message(&crate::domain::notice_message(
                &thread,
                "1.8",
                "⚠️ both change it",
            ))
            .await
            .unwrap();

        let history = History::load(&store, &thread).await.unwrap();
        assert_eq!(
            without_clock(&history.render()),
            vec![
                "<@U1>: fix the login bug",
                r#"PM used Grep {"pattern":"login"}"#,
                "PM: Here is the plan.",
                "Coder run r1: queued after 0 turns · 0 tokens in, 0 out · $0.00",
                "Coder asked (question 1): JWT or cookies?",
                "    answered by <@U2>: JWT, always",
                "<@U2>: JWT, always",
                "GitHub: the pull request was merged",
                "<@U3>: <codebutler:pr-watch closed #7>",
            ]
        );
        assert_eq!(history.participants(), vec!["U1", "U2", "U3"]);
    }

    #[test]
    fn long_tool_arguments_are_shortened_on_a_character_boundary() {
        assert_eq!(shorten("ééé", 2), "éé…");
        assert_eq!(shorten("abc", 3), "abc");
    }
}
