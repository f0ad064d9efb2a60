//! The PM: a cheap model with read-only tools that answers questions about the repository
//! and proposes plans. Its conversation per thread lives in the store, so it resumes after
//! a restart; its system prompt is assembled from the repository's prompt files and its memory
//! (the default branch's, [`crate::memory::source`]) on every message, so edits take effect
//! at once. In a closed thread it answers questions about the closed work read-only
//! ([`Pm::answer_read_only`]): without ProposePlan it cannot start work, and its prompt says
//! the thread is closed. Links in a message to other threads, pull requests or issues are
//! read for it first ([`references`]). The researcher's `fetch_url` is here too ([`web`]):
//! a read-only tool like the PM's. A request for an image is handed to the Artist by the
//! PM's `ask_artist` ([`artist_handoff`]), offered when the Artist can draw.

pub mod activity;
pub mod artist_handoff;
pub mod attachments;
pub mod pdf;
pub mod questions;
pub mod references;
pub mod tools;
pub mod voice;
pub mod web;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool::{DEFAULT_MAX_TOOL_OUTPUT, ToolRegistry};
use codebutler_agent::tool_loop::{
    Arrivals, LoopError, LoopLimits, NoArrivals, run_tool_loop_with,
};
use codebutler_agent::tools::path::RepoRoot;
use codebutler_agent::tools::repository_tools;
use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, Plan, ThreadKey};
use crate::gateway::{CallContext, Gateway, GatewayError, RoleModel};
use crate::layout::Layout;
use crate::memory::source::DefaultBranchMemory;
use crate::store::{Store, StoreError};
use crate::workspace::write_access::WriteAccess;
use activity::{Activity, Watched, Writes};
use artist_handoff::{AskArtist, Handoff};

/// Model calls that may use tools before the PM must answer.
pub const MAX_ITERATIONS: usize = 15;
/// The role name used for conversations and usage.
pub const ROLE: &str = "pm";

/// What the PM produced for one message.
#[derive(Clone, Debug)]
pub struct PmTurn {
    /// The answer (Markdown).
    pub answer: String,
    /// A plan, if the PM proposed one during this turn.
    pub plan: Option<Plan>,
    /// Messages to append to the stored conversation.
    pub new_messages: Vec<ChatMessage>,
    /// Tool calls made.
    pub tool_calls: usize,
    /// The fallback model that answered while the PM's own model failed, if one did.
    pub fallback: Option<String>,
}

/// Why the PM could not answer.
#[derive(Debug, thiserror::Error)]
pub enum PmError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] GatewayError),
    #[error(transparent)]
    Attachment(#[from] attachments::AttachmentError),
    #[error("cancelled")]
    Cancelled,
}

impl From<LoopError<GatewayError>> for PmError {
    fn from(e: LoopError<GatewayError>) -> Self {
        match e {
            LoopError::Model(e) => Self::Model(e),
            LoopError::Cancelled => Self::Cancelled,
        }
    }
}

/// The PM of one repository.
#[derive(Clone, Debug)]
pub struct Pm {
    pub layout: Layout,
    pub root: Arc<RepoRoot>,
    pub store: Store,
    pub gateway: Arc<Gateway>,
    pub model: String,
    /// The model that answers while a daily spending cap is reached
    /// (`productManager.overBudget`); `None`: `model` answers regardless.
    pub over_budget: Option<String>,
    pub gh: PathBuf,
    /// The PM's memory, from the default branch's latest commit.
    pub memory: DefaultBranchMemory,
    /// Whose comments GHStatus shows (`github.reviewFrom`); shared with the PR watcher.
    pub write_access: WriteAccess,
    /// Files shared on messages: fetched, stored, and given to the model with them.
    pub attachments: attachments::Attachments,
}

impl Pm {
    /// The tools the PM's model may call in `thread`: the [read-only ones](Self::read_only_tools),
    /// then ProposePlan, which also leaves the plan it records in `proposed`, and, with a
    /// `handoff`, `ask_artist`, which leaves its request there.
    pub fn tools(
        &self,
        thread: &ThreadKey,
        proposed: Arc<Mutex<Option<Plan>>>,
        handoff: Option<&Handoff>,
    ) -> ToolRegistry {
        let mut registry = self.read_only_tools();
        registry.register(Arc::new(tools::ProposePlan::new(
            self.store.clone(),
            thread.clone(),
            proposed,
        )));
        if let Some(handoff) = handoff {
            registry.register(Arc::new(AskArtist::new(handoff.clone())));
        }
        registry
    }

    /// The tools that change nothing, all the PM has in a closed thread: the repository
    /// tools, then the controller's ReadMemory, ListThreads and GHStatus.
    pub fn read_only_tools(&self) -> ToolRegistry {
        let mut registry = ToolRegistry::new(DEFAULT_MAX_TOOL_OUTPUT);
        for tool in repository_tools(self.root.clone()) {
            registry.register(tool);
        }
        registry
            .register(Arc::new(tools::ReadMemory::new(self.memory.clone())))
            .register(Arc::new(tools::ListThreads::new(self.store.clone())))
            .register(Arc::new(tools::GhStatus::new(
                self.gh.clone(),
                self.layout.repo.clone(),
                self.write_access.clone(),
            )));
        registry
    }

    /// Runs the PM on one user message: restores the thread's conversation, adds the
    /// message, and runs the tool loop, which takes the thread's messages that `arrivals`
    /// gives meanwhile into the conversation (before each model call and before it
    /// answers), so one answer addresses them all. With a `handoff` it may hand the message
    /// to the Artist (`ask_artist`), which leaves the request there. Nothing is stored here;
    /// the caller stores the turn together with the answer's outbox effects, before anything
    /// is posted.
    pub async fn answer(
        &self,
        msg: &IncomingMessage,
        arrivals: &dyn Arrivals,
        activity: &dyn Activity,
        cancel: &CancellationToken,
        handoff: Option<&Handoff>,
    ) -> Result<PmTurn, PmError> {
        let proposed = Arc::new(Mutex::new(None));
        let registry = self.tools(&msg.thread(), proposed.clone(), handoff);
        // As last fetched: an answer never waits on the network.
        let memory = self.memory.pm(false).await;
        let system = crate::prompts::pm_system_prompt(&self.layout, &memory).await;
        let tools = Tools {
            registry: &registry,
            proposed: &proposed,
        };
        self.turn(msg, arrivals, activity, cancel, tools, &system)
            .await
    }

    /// Runs the PM on a question in a closed thread, as [`Self::answer`] does but with the
    /// [read-only tools](Self::read_only_tools) and the system prompt of a closed thread
    /// ([`closed_thread_prompt`]): it answers, and can propose nothing.
    pub async fn answer_read_only(
        &self,
        msg: &IncomingMessage,
        activity: &dyn Activity,
        cancel: &CancellationToken,
    ) -> Result<PmTurn, PmError> {
        let memory = self.memory.pm(false).await;
        let system =
            closed_thread_prompt(&crate::prompts::pm_system_prompt(&self.layout, &memory).await);
        self.read_only_turn(msg, activity, cancel, &system).await
    }

    /// Runs the PM on a message of a conversation outside the repository's channel (a
    /// direct message, a mention elsewhere), as [`Self::answer_read_only`] does but with the
    /// system prompt of such a conversation ([`conversation_prompt`]), which names `channel`,
    /// where work starts.
    pub async fn answer_in_conversation(
        &self,
        msg: &IncomingMessage,
        activity: &dyn Activity,
        cancel: &CancellationToken,
        channel: &str,
    ) -> Result<PmTurn, PmError> {
        let memory = self.memory.pm(false).await;
        let system = conversation_prompt(
            &crate::prompts::pm_system_prompt(&self.layout, &memory).await,
            channel,
        );
        self.read_only_turn(msg, activity, cancel, &system).await
    }

    /// One turn with the read-only tools and `system`: it answers, and can propose nothing.
    async fn read_only_turn(
        &self,
        msg: &IncomingMessage,
        activity: &dyn Activity,
        cancel: &CancellationToken,
        system: &str,
    ) -> Result<PmTurn, PmError> {
        let registry = self.read_only_tools();
        let nothing = Arc::new(Mutex::new(None));
        let tools = Tools {
            registry: &registry,
            proposed: &nothing,
        };
        self.turn(msg, &NoArrivals, activity, cancel, tools, system)
            .await
    }

    /// One turn of the PM with `tools` and `system`, its tool calls told to `activity`.
    async fn turn(
        &self,
        msg: &IncomingMessage,
        arrivals: &dyn Arrivals,
        activity: &dyn Activity,
        cancel: &CancellationToken,
        tools: Tools<'_>,
        system: &str,
    ) -> Result<PmTurn, PmError> {
        let Tools { registry, proposed } = tools;
        let thread = msg.thread();
        let mut history = self.store.conversation(&thread, ROLE).await?;
        let sees_images = self.gateway.sees_images(&self.model).await;
        let said = self.attachments.said(&self.store, msg, sees_images).await?;
        history.push(said.request);
        let writes = Writes(activity);
        let mut model = RoleModel::new(
            &self.gateway,
            CallContext {
                thread,
                role: ROLE,
                model: self.model.clone(),
            },
            cancel.clone(),
        );
        if activity.watches_text() {
            model = model.streaming_to(&writes);
        }
        let limits = LoopLimits {
            max_iterations: MAX_ITERATIONS,
        };
        let watched = Watched {
            model: &model,
            activity,
        };
        let outcome = run_tool_loop_with(
            &watched, registry, system, &history, limits, arrivals, cancel,
        )
        .await?;
        let mut new_messages = vec![said.kept];
        new_messages.extend(outcome.new_messages);
        // A poisoned slot still holds the plan the tool recorded; losing it would drop a plan
        // that is already stored.
        let plan = match proposed.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        Ok(PmTurn {
            answer: outcome.answer,
            plan,
            new_messages,
            tool_calls: outcome.tool_calls,
            fallback: model.fallback_answered(),
        })
    }
}

/// The tools of one turn, and where its ProposePlan, if it has one, leaves a plan.
#[derive(Clone, Copy)]
struct Tools<'a> {
    registry: &'a ToolRegistry,
    proposed: &'a Mutex<Option<Plan>>,
}

/// A person's message as the PM's conversation holds it: `<@user>: text`.
pub fn said(msg: &IncomingMessage) -> ChatMessage {
    ChatMessage::user(format!("<@{}>: {}", msg.user, msg.text))
}

/// What the PM is told in a closed thread (`prompts/closed-thread.md`), after its system
/// prompt.
const CLOSED_THREAD: &str = include_str!("../../../prompts/closed-thread.md");

/// What the PM is told in a conversation outside the repository's channel
/// (`prompts/conversation.md`), after its system prompt; `{channel}` names the channel.
const CONVERSATION: &str = include_str!("../../../prompts/conversation.md");

/// The PM's system prompt `system` for a conversation outside the repository's channel: that
/// conversation's instructions after it, naming `channel` (a channel id) where work starts.
pub fn conversation_prompt(system: &str, channel: &str) -> String {
    let note = CONVERSATION
        .trim_end()
        .replace("{channel}", &format!("<#{channel}>"));
    format!("{system}\n\n{note}")
}

/// The PM's system prompt `system` for a question in a closed thread: the closed thread's
/// instructions after it.
pub fn closed_thread_prompt(system: &str) -> String {
    format!("{system}\n\n{}", CLOSED_THREAD.trim_end())
}
