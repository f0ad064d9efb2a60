//! The PM: a cheap model with read-only tools that answers questions about the repository
//! and proposes plans. Its conversation per thread lives in the store, so it resumes after
//! a restart; its system prompt is assembled from the repository's prompt files and its memory
//! (the default branch's, [`crate::memory::source`]) on every message, so edits take effect
//! at once.

pub mod questions;
pub mod tools;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool::{DEFAULT_MAX_TOOL_OUTPUT, ToolRegistry};
use codebutler_agent::tool_loop::{LoopError, LoopLimits, run_tool_loop};
use codebutler_agent::tools::path::RepoRoot;
use codebutler_agent::tools::repository_tools;
use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, Plan, ThreadKey};
use crate::gateway::{CallContext, Gateway, GatewayError, RoleModel};
use crate::layout::Layout;
use crate::memory::source::DefaultBranchMemory;
use crate::store::{Store, StoreError};

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
}

/// Why the PM could not answer.
#[derive(Debug, thiserror::Error)]
pub enum PmError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] GatewayError),
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
    pub gh: PathBuf,
    /// The PM's memory, from the default branch's latest commit.
    pub memory: DefaultBranchMemory,
}

impl Pm {
    /// The tools the PM's model may call in `thread`: the repository tools, then the
    /// controller's ReadMemory, ListThreads, GHStatus and ProposePlan. ProposePlan also leaves
    /// the plan it records in `proposed`.
    pub fn tools(&self, thread: &ThreadKey, proposed: Arc<Mutex<Option<Plan>>>) -> ToolRegistry {
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
            )))
            .register(Arc::new(tools::ProposePlan::new(
                self.store.clone(),
                thread.clone(),
                proposed,
            )));
        registry
    }

    /// Runs the PM on one user message: restores the thread's conversation, adds the
    /// message, and runs the tool loop. Nothing is stored here; the caller stores the turn
    /// together with the answer's outbox effects, before anything is posted.
    pub async fn answer(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Result<PmTurn, PmError> {
        let thread = msg.thread();
        let mut history = self.store.conversation(&thread, ROLE).await?;
        // As last fetched: an answer never waits on the network.
        let memory = self.memory.pm(false).await;
        let user_message = ChatMessage::user(format!("<@{}>: {}", msg.user, msg.text));
        history.push(user_message.clone());

        let proposed = Arc::new(Mutex::new(None));
        let registry = self.tools(&thread, proposed.clone());

        let system = crate::prompts::pm_system_prompt(&self.layout, &memory);
        let model = RoleModel {
            gateway: &self.gateway,
            ctx: CallContext {
                thread,
                role: ROLE,
                model: self.model.clone(),
            },
            cancel: cancel.clone(),
        };
        let limits = LoopLimits {
            max_iterations: MAX_ITERATIONS,
        };
        let outcome = run_tool_loop(&model, &registry, &system, &history, limits, cancel).await?;
        let mut new_messages = vec![user_message];
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
        })
    }
}
