//! What a speculative preparation would say in its thread, held until the plan is approved:
//! a [`Relay`] records the preparation's progress (a base warning, the init's lines, its
//! failure) while nobody has approved anything, and at the approval hands it over to be
//! said in the thread, then forwards what follows as it comes. A preparation that is
//! discarded unapproved says nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use tokio::sync::{mpsc, watch};

use crate::workspace::worktree::Progress;

/// One thing a preparation said.
#[derive(Clone, Debug, PartialEq)]
pub enum Said {
    /// A line; later updates name it by `line`.
    Post {
        line: usize,
        text: String,
    },
    Update {
        line: usize,
        text: String,
    },
    Markdown(String),
    Failed,
}

#[derive(Debug, Default)]
struct State {
    lines: usize,
    held: Vec<Said>,
    live: Option<mpsc::UnboundedSender<Said>>,
}

/// A preparation's progress, held until the approval (see the module's documentation).
#[derive(Clone, Debug)]
pub struct Relay {
    state: Arc<Mutex<State>>,
    /// Whether the init (the step that may take minutes) began.
    init: Arc<watch::Sender<bool>>,
}

impl Default for Relay {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            init: Arc::new(watch::Sender::new(false)),
        }
    }
}

impl Relay {
    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn say(&self, said: Said) {
        let mut state = self.lock();
        let held = match &state.live {
            Some(live) => live.send(said).err().map(|e| e.0),
            None => Some(said),
        };
        // Nobody follows any more (the approval gave up): keep it, it is dropped with us.
        if let Some(said) = held {
            state.held.push(said);
        }
    }

    /// Whether the preparation's init began (see [`Progress::init_began`]).
    pub fn init(&self) -> watch::Receiver<bool> {
        self.init.subscribe()
    }

    /// At the approval: what was said so far, and a receiver of what follows.
    pub fn attach(&self) -> (Vec<Said>, mpsc::UnboundedReceiver<Said>) {
        let (live, follow) = mpsc::unbounded_channel();
        let mut state = self.lock();
        state.live = Some(live);
        (std::mem::take(&mut state.held), follow)
    }
}

#[async_trait]
impl Progress for Relay {
    async fn post(&self, text: &str) -> Option<String> {
        let line = {
            let mut state = self.lock();
            state.lines += 1;
            state.lines
        };
        self.say(Said::Post {
            line,
            text: text.to_owned(),
        });
        Some(line.to_string())
    }

    async fn update(&self, handle: &str, text: &str) {
        match handle.parse() {
            Ok(line) => self.say(Said::Update {
                line,
                text: text.to_owned(),
            }),
            Err(e) => {
                tracing::warn!("a preparation updated a line it never posted ({handle}): {e}")
            }
        }
    }

    async fn markdown(&self, markdown: &str) {
        self.say(Said::Markdown(markdown.to_owned()));
    }

    async fn failed(&self) {
        self.say(Said::Failed);
    }

    fn init_began(&self) {
        self.init.send_replace(true);
    }
}

/// Says what a preparation said through `progress`, the thread's; `posted` maps the
/// preparation's lines to the thread's messages, for their updates.
pub async fn replay(said: Said, progress: &dyn Progress, posted: &mut HashMap<usize, String>) {
    match said {
        Said::Post { line, text } => {
            if let Some(handle) = progress.post(&text).await {
                posted.insert(line, handle);
            }
        }
        Said::Update { line, text } => match posted.get(&line) {
            Some(handle) => progress.update(handle, &text).await,
            // The line could not be posted: the update is said on its own.
            None => {
                progress.post(&text).await;
            }
        },
        Said::Markdown(markdown) => progress.markdown(&markdown).await,
        Said::Failed => progress.failed().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_is_said_before_the_approval_is_held_and_what_follows_forwarded() {
        let relay = Relay::default();
        let init = relay.init();
        relay.init_began();
        assert!(*init.borrow(), "the init's start is seen");
        let line = relay.post("preparing…").await.unwrap();
        relay.update(&line, "still preparing").await;
        let (held, mut follow) = relay.attach();
        assert_eq!(
            held,
            vec![
                Said::Post {
                    line: 1,
                    text: "preparing…".into()
                },
                Said::Update {
                    line: 1,
                    text: "still preparing".into()
                }
            ]
        );
        relay.update(&line, "prepared").await;
        relay.failed().await;
        assert_eq!(
            follow.recv().await,
            Some(Said::Update {
                line: 1,
                text: "prepared".into()
            })
        );
        assert_eq!(follow.recv().await, Some(Said::Failed));
    }
}
