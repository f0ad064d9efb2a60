//! The researcher (`@codebutler.researcher`): answers a question that needs the web in its
//! own voice, with its own conversation per thread (role `researcher`), its model
//! `researcher.model` (the PM's default model unless set), and tools: `fetch_url` through
//! the controller's web fetches and their host rules ([`crate::pm::web`]) and the PM's
//! read-only repository tools. The answer ends with "Sources:" and the pages it fetched with
//! a success status — what the controller fetched, not what the model says it read. Its
//! calls are usage rows of the role `researcher`.

use std::sync::Arc;

use codebutler_agent::tool::{DEFAULT_MAX_TOOL_OUTPUT, ToolRegistry};
use codebutler_agent::tool_loop::{LoopLimits, NoArrivals, run_tool_loop_with};
use codebutler_agent::tools::repository_tools;
use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, Role};
use crate::gateway::{CallContext, RoleModel};
use crate::pm::web::FetchUrl;
use crate::slack::effects::Effects;
use crate::store::Change;
use crate::thread::handler::{Settle, ThreadHandler, speaker};
use crate::thread::replies::answered_by_fallback;

/// The researcher's instructions (the system message).
pub const PROMPT: &str = include_str!("../../../prompts/researcher.md");
/// Model calls that may use tools before the researcher must answer.
const MAX_ITERATIONS: usize = 10;

/// The answer `answer` with the "Sources:" line naming `fetched`, when it fetched any.
pub fn with_sources(answer: &str, fetched: &[String]) -> String {
    let answer = answer.trim_end();
    if fetched.is_empty() {
        return answer.to_owned();
    }
    let list: Vec<String> = fetched.iter().map(|u| format!("<{u}>")).collect();
    format!("{answer}\n\nSources: {}", list.join(", "))
}

impl ThreadHandler {
    /// The researcher answers `msg`.
    pub(super) async fn ask_researcher(
        &self,
        msg: &IncomingMessage,
        cancel: &CancellationToken,
    ) -> Settle {
        let thread = msg.thread();
        let role = Role::Researcher.as_str();
        let mut history = match self.store.conversation(&thread, role).await {
            Ok(history) => history,
            Err(e) => {
                tracing::error!(thread = %thread, "read the researcher's conversation: {e}");
                return Settle::Failed;
            }
        };
        let said = crate::pm::said(msg);
        history.push(said.clone());
        let fetch = Arc::new(FetchUrl::new(self.fetch.clone()));
        let mut tools = ToolRegistry::new(DEFAULT_MAX_TOOL_OUTPUT);
        tools.register(fetch.clone());
        for tool in repository_tools(self.pm.root.clone()) {
            tools.register(tool);
        }
        let model = RoleModel::new(
            &self.pm.gateway,
            CallContext {
                thread: thread.clone(),
                role: Role::Researcher.as_str(),
                model: self.researcher_model.clone(),
            },
            cancel.clone(),
        );
        let limits = LoopLimits {
            max_iterations: MAX_ITERATIONS,
        };
        let outcome = run_tool_loop_with(
            &model,
            &tools,
            PROMPT,
            &history,
            limits,
            &NoArrivals,
            cancel,
        )
        .await;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::warn!(thread = %thread, "researcher: {e}");
                let reply = format!(
                    "I couldn't research that ({e}). Your message is saved; ask again in a moment."
                );
                return self
                    .reply(msg, Role::Researcher, &reply, &[Change::Processed(msg)])
                    .await;
            }
        };
        let fetched = fetch.fetched();
        tracing::info!(
            tag = "PM",
            "thread {thread} → researcher answered after {} tool call(s), {} page(s) read",
            outcome.tool_calls,
            fetched.len()
        );
        let mut messages = vec![said];
        messages.extend(outcome.new_messages);
        let changes = [
            Change::Turn {
                thread: &thread,
                role,
                messages: &messages,
            },
            Change::Processed(msg),
        ];
        let mut answer = with_sources(&outcome.answer, &fetched);
        if let Some(fallback) = model.fallback_answered() {
            answer = format!(
                "{}\n\n{}",
                answer.trim_end(),
                answered_by_fallback(&fallback, &self.researcher_model)
            );
        }
        let effects = Effects::new(&thread)
            .reply(&answer, &speaker(Role::Researcher))
            .react(&msg.ts, "white_check_mark");
        self.record(msg, &changes, &effects).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_name_the_pages_fetched() {
        assert_eq!(
            with_sources("It is `from_str`.\n", &[]),
            "It is `from_str`."
        );
        assert_eq!(
            with_sources(
                "It is `from_str`.",
                &["https://docs.rs/a".into(), "https://b.example/c".into()]
            ),
            "It is `from_str`.\n\nSources: <https://docs.rs/a>, <https://b.example/c>"
        );
    }
}
