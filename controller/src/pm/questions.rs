//! Questions from a running Coder (its AskUser tool): the PM answers first, the people in
//! the thread only when the PM cannot.
//!
//! A `Question` event starts [`handle_question`]. The PM gets one short, read-only tool loop
//! (the repository tools and its memory, at most [`PM_QUESTION_ITERATIONS`] calls) with the
//! approved plan and its memory in the system prompt, and must reply `ANSWER: …` or
//! `ESCALATE: …`. Anything else counts as an escalation: a guess is worse than a question to
//! a person. An answer goes back to the runner at once and is shown in the thread as the
//! exchange it was; an escalation posts the question as `*Coder:*` and makes the thread's next
//! reply the answer ([`answer_from_thread`]). Every question, its answer and who gave it are
//! kept in the store (`coder_questions`), so the behind-the-scenes exchanges stay visible
//! after the run.

use std::sync::Arc;
use std::time::Duration;

use codebutler_agent::conversation::ChatMessage;
use codebutler_agent::tool::{DEFAULT_MAX_TOOL_OUTPUT, ToolRegistry};
use codebutler_agent::tool_loop::{LoopLimits, run_tool_loop};
use codebutler_agent::tools::repository_tools;
use codebutler_proto::runner::v1::Question;
use tokio_util::sync::CancellationToken;

use crate::domain::{IncomingMessage, ThreadKey};
use crate::gateway::{CallContext, RoleModel};
use crate::pm::{Pm, PmError, ROLE};
use crate::runners::supervisor::Supervisor;
use crate::slack::effects::Effects;
use crate::slack::outbox::Outbox;
use crate::store::Store;

/// Model calls that may use tools before the PM must give its verdict.
pub const PM_QUESTION_ITERATIONS: usize = 6;
/// How long the PM may take before the question goes to the thread.
pub const PM_QUESTION_TIMEOUT: Duration = Duration::from_secs(180);
/// How the Coder's question is shown when it goes to the people in the thread.
pub const CODER_PREFIX: &str = "*Coder:* ";
/// How the Coder's question is shown when the PM answered it.
pub const CODER_TO_PM: &str = "*Coder → PM:* ";
/// How the PM's answer to the Coder is shown.
pub const PM_TO_CODER: &str = "**PM → Coder:**";

/// What answering a running Coder's questions needs: the PM, the runs (to pass an answer
/// on or wait for the thread's), the store (the questions' record) and the outbox (what is
/// shown in the thread). The Coder's side hands each question here; this side knows
/// nothing of how a run is started or followed.
#[derive(Clone)]
pub struct QuestionDesk {
    pub pm: Pm,
    pub supervisor: Supervisor,
    pub store: Store,
    pub outbox: Outbox,
}

impl std::fmt::Debug for QuestionDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuestionDesk").finish_non_exhaustive()
    }
}

/// What the PM made of a question.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The plan, the memory or the repository settle it: the answer.
    Answer(String),
    /// People must decide: why.
    Escalate(String),
}

/// Reads the PM's reply: `ANSWER: …` or `ESCALATE: …` (any case, Markdown emphasis around
/// the keyword tolerated). Anything else, or an empty answer, is an escalation.
pub fn parse_verdict(reply: &str) -> Verdict {
    let text = reply.trim();
    let bare = text.trim_start_matches(['*', '_', '`', ' ']);
    let keyword = |word: &str| -> Option<String> {
        let head = bare.get(..word.len())?;
        if !head.eq_ignore_ascii_case(word) {
            return None;
        }
        let rest = bare[word.len()..].trim_start_matches(['*', '_', '`']);
        let rest = rest.strip_prefix(':')?;
        Some(rest.trim_start_matches(['*', '_', '`']).trim().to_owned())
    };
    if let Some(answer) = keyword("ANSWER") {
        if answer.is_empty() {
            return Verdict::Escalate("the PM gave an empty answer".into());
        }
        return Verdict::Answer(answer);
    }
    if let Some(reason) = keyword("ESCALATE") {
        return Verdict::Escalate(if reason.is_empty() {
            "the PM could not settle it".into()
        } else {
            reason
        });
    }
    Verdict::Escalate("the PM's reply was neither ANSWER nor ESCALATE".into())
}

/// The template of the PM's system prompt for a Coder question (`prompts/coder-question.md`):
/// the rules, then `{plan}` and `{memory}`.
const QUESTION_PROMPT: &str = include_str!("../../../prompts/coder-question.md");

/// The PM's system prompt for a Coder question: the rules, the plan and the memory.
pub fn question_prompt(plan: &str, memory: &str) -> String {
    let memory = if memory.trim().is_empty() {
        "(no memory yet)"
    } else {
        memory.trim()
    };
    // One pass over the template, so a plan that mentions `{memory}` stays as written.
    let template = QUESTION_PROMPT.trim_end_matches('\n');
    let mut prompt = String::with_capacity(template.len() + plan.len() + memory.len());
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        prompt.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("{plan}") {
            prompt.push_str(plan.trim());
            rest = after;
        } else if let Some(after) = rest.strip_prefix("{memory}") {
            prompt.push_str(memory);
            rest = after;
        } else {
            prompt.push('{');
            rest = &rest[1..];
        }
    }
    prompt.push_str(rest);
    prompt
}

/// Asks the PM to settle a Coder question, with its read-only repository tools and its
/// memory. Usage is recorded against the thread as the PM's.
pub async fn ask_pm(
    pm: &Pm,
    thread: &ThreadKey,
    plan: &str,
    question: &str,
    cancel: &CancellationToken,
) -> Result<Verdict, PmError> {
    let memory = pm.memory.pm(false).await;
    let mut registry = ToolRegistry::new(DEFAULT_MAX_TOOL_OUTPUT);
    for tool in repository_tools(pm.root.clone()) {
        registry.register(tool);
    }
    registry.register(Arc::new(crate::pm::tools::ReadMemory::new(
        pm.memory.clone(),
    )));
    let model = RoleModel::new(
        &pm.gateway,
        CallContext {
            thread: thread.clone(),
            role: ROLE,
            model: pm.model.clone(),
        },
        cancel.clone(),
    );
    let history = [ChatMessage::user(format!("The Coder asks: {question}"))];
    let limits = LoopLimits {
        max_iterations: PM_QUESTION_ITERATIONS,
    };
    let system = question_prompt(plan, &memory);
    let outcome = run_tool_loop(&model, &registry, &system, &history, limits, cancel).await?;
    Ok(parse_verdict(&outcome.answer))
}

/// Handles one question of a Slack thread's run: the PM first, then the thread.
pub async fn handle_question(
    desk: QuestionDesk,
    run_id: String,
    approval: IncomingMessage,
    question: Question,
) {
    let thread = approval.thread();
    let store = &desk.store;
    let id = question.question_id.as_str();
    tracing::info!(
        tag = "CLD",
        "thread {thread} → coder asks {id}: {:?}",
        question.text
    );
    if let Err(e) = store
        .record_question(&run_id, id, &thread, &question.text)
        .await
    {
        tracing::error!(thread = %thread, "record question {id}: {e}");
    }
    let plan = match store.run(&run_id).await {
        Ok(Some(run)) => run.plan,
        Ok(None) => String::new(),
        Err(e) => {
            tracing::warn!(thread = %thread, "read the plan of run {run_id}: {e}");
            String::new()
        }
    };
    let cancel = CancellationToken::new();
    let asked = ask_pm(&desk.pm, &thread, &plan, &question.text, &cancel);
    let verdict = match tokio::time::timeout(PM_QUESTION_TIMEOUT, asked).await {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(e)) => Verdict::Escalate(format!("the PM could not be asked: {e}")),
        Err(_) => {
            cancel.cancel();
            Verdict::Escalate("the PM took too long".into())
        }
    };
    match verdict {
        Verdict::Answer(answer) => {
            tracing::info!(
                tag = "PM",
                "thread {thread} → pm answered coder question {id}"
            );
            if let Err(e) = store.answer_question(&run_id, id, ROLE, &answer).await {
                tracing::error!(thread = %thread, "record the answer to {id}: {e}");
            }
            let text = format!("The PM answered: {answer}");
            if !desk.supervisor.answer(&thread.thread_ts, id, &text).await {
                tracing::warn!(thread = %thread, "the run ended before the PM's answer to {id} reached it");
                return;
            }
            let shown = format!("{}\n\n{PM_TO_CODER} {answer}", question.text);
            post(&desk, &approval, &shown, CODER_TO_PM).await;
        }
        Verdict::Escalate(why) => {
            tracing::info!(
                tag = "PM",
                "thread {thread} → coder question {id} goes to the thread: {why}"
            );
            if let Err(e) = store.escalate_question(&run_id, id, &why).await {
                tracing::error!(thread = %thread, "record the escalation of {id}: {e}");
            }
            // Open before posting: a reply to the post must find the question waiting.
            if !desk
                .supervisor
                .open_question(&thread.thread_ts, &run_id, id)
            {
                tracing::warn!(thread = %thread, "the run ended before its question {id} was posted");
                return;
            }
            post(&desk, &approval, &question.text, CODER_PREFIX).await;
        }
    }
}

async fn post(desk: &QuestionDesk, approval: &IncomingMessage, markdown: &str, prefix: &str) {
    let effects = Effects::new(&approval.thread()).reply(markdown, prefix);
    if let Err(e) = desk.outbox.send(&effects).await {
        tracing::warn!(thread = %approval.thread(), "record the coder's question: {e}");
    }
}

/// A reply in a thread whose run waits for people to answer its question: the reply is the
/// answer. `None` when no question waits (the reply is an ordinary message); otherwise
/// whether the run took the answer.
pub async fn answer_from_thread(
    supervisor: &Supervisor,
    store: &Store,
    msg: &IncomingMessage,
) -> Option<bool> {
    let open = supervisor.take_open_question(&msg.thread_ts)?;
    let text = format!("<@{}> answered: {}", msg.user, msg.text);
    let passed = supervisor
        .answer(&msg.thread_ts, &open.question_id, &text)
        .await;
    if passed {
        tracing::info!(
            tag = "CLD",
            "thread {} → {} answered coder question {}",
            msg.thread_ts,
            msg.user,
            open.question_id
        );
        if let Err(e) = store
            .answer_question(&open.run_id, &open.question_id, &msg.user, &msg.text)
            .await
        {
            tracing::error!(thread = %msg.thread(), "record the answer to {}: {e}", open.question_id);
        }
    }
    Some(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prompt from `prompts/` is, byte for byte, the one the code used to write out.
    #[test]
    fn the_question_prompt_from_prompts_is_the_one_it_was() {
        let (plan, memory) = ("  Add JWT to {memory} login  ", "- we use axum\n");
        let was = {
            let memory = memory.trim();
            format!(
                "You are the PM of an AI development team. The Coder is implementing the approved plan \
below and asks you a question before asking the people in the thread.\n\n\
Answer only when the plan, the project memory or the repository (read it with your tools) \
really settle the question. Never guess, and never decide what the plan leaves open about \
scope or product: those questions go to the people.\n\n\
Reply in exactly one of two forms, nothing before it:\n\
ANSWER: <the answer, short and concrete, naming what settles it (a file, a memory entry, \
the plan)>\n\
ESCALATE: <one line: why the people in the thread must decide>\n\n\
# Approved plan\n\n{}\n\n# Project memory\n\n{memory}",
                plan.trim()
            )
        };
        assert_eq!(question_prompt(plan, memory), was);
        assert!(question_prompt("p", "  ").ends_with("# Project memory\n\n(no memory yet)"));
    }

    #[test]
    fn verdicts_are_answers_only_when_they_say_so() {
        assert_eq!(
            parse_verdict("ANSWER: Use JWT, as auth/login.rs does."),
            Verdict::Answer("Use JWT, as auth/login.rs does.".into())
        );
        assert_eq!(
            parse_verdict("  **Answer:** spaces\nper memory"),
            Verdict::Answer("spaces\nper memory".into())
        );
        assert_eq!(
            parse_verdict("ESCALATE: the plan does not say"),
            Verdict::Escalate("the plan does not say".into())
        );
        assert!(matches!(parse_verdict("ANSWER:   "), Verdict::Escalate(_)));
        assert!(matches!(parse_verdict("escalate:"), Verdict::Escalate(_)));
        // A reply in another form is never taken as an answer.
        for other in [
            "I think JWT",
            "",
            "ANSWERS: x",
            "The answer: JWT",
            "ANSWER JWT",
        ] {
            assert!(
                matches!(parse_verdict(other), Verdict::Escalate(_)),
                "{other:?}"
            );
        }
    }

    #[test]
    fn the_prompt_holds_the_rules_the_plan_and_the_memory() {
        let prompt = question_prompt("📋 Plan: add login\n", "- Always JWT.\n");
        assert!(prompt.contains("ANSWER: <the answer"));
        assert!(prompt.contains("ESCALATE: <one line"));
        assert!(prompt.contains("Never guess"));
        assert!(prompt.ends_with(
            "# Approved plan\n\n📋 Plan: add login\n\n# Project memory\n\n- Always JWT."
        ));
        assert!(question_prompt("p", "  ").ends_with("# Project memory\n\n(no memory yet)"));
    }
}
