//! The semantic level of overlap: one PM call without tools (`prompts/overlap.md`) about a
//! new plan and the active threads that share no file or directory with it. The answer must
//! be the JSON the prompt asks for, naming only threads it was shown; anything else is
//! logged and treated as "nothing found" — never a crash, never a guess.

use std::collections::BTreeSet;

use codebutler_agent::conversation::ChatMessage;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::domain::{Plan, ThreadKey};
use crate::gateway::{CallContext, GatewayError};
use crate::pm::Pm;

/// The prompt (the system message); `{plan}` is the new plan, `{threads}` the others.
pub const PROMPT: &str = include_str!("../../../prompts/overlap.md");
/// The user message that asks for the judgement.
pub const REQUEST: &str = "Judge which of the other threads may interact with the new plan.";
/// The role the call is recorded under: it is the PM's.
const ROLE: &str = "pm";

/// Another active thread, as the PM is shown it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Its plan's summary (or "no plan summary").
    pub summary: String,
    /// The files it changes or will change.
    pub files: Vec<String>,
}

/// A thread the PM says may interact with the plan: its index among the candidates, and
/// the PM's one-sentence reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interaction {
    pub candidate: usize,
    pub reason: String,
}

/// Why the PM's judgement is missing.
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    #[error("the pm model call failed: {0}")]
    Model(#[from] GatewayError),
    #[error("the pm answered no text")]
    Empty,
    #[error("the pm's answer is not the json asked for: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("the pm's answer names {0:?}, which is not one of the threads it was shown")]
    UnknownThread(String),
    #[error("the pm's answer gives no reason for {0}")]
    NoReason(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    overlaps: Vec<Item>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    thread: String,
    reason: String,
}

/// The id a candidate is shown under: `T1`, `T2`…
fn id(index: usize) -> String {
    format!("T{}", index + 1)
}

/// The prompt as the model reads it.
pub fn prompt(plan: &Plan, candidates: &[Candidate]) -> String {
    let files = |files: &[String]| {
        if files.is_empty() {
            "(none known yet)".to_owned()
        } else {
            files.join(", ")
        }
    };
    let plan_text = format!(
        "Summary: {}\nSteps:\n{}\nFiles: {}",
        plan.summary,
        plan.steps
            .iter()
            .map(|s| format!("- {s}"))
            .collect::<Vec<_>>()
            .join("\n"),
        files(&plan.files)
    );
    let threads = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}: {}\nFiles: {}", id(i), c.summary, files(&c.files)))
        .collect::<Vec<_>>()
        .join("\n\n");
    PROMPT
        .replace("{plan}", &plan_text)
        .replace("{threads}", &threads)
}

/// Reads the answer: the JSON object, alone or in a ```json fence, naming only shown
/// threads, each once with a reason.
pub fn parse(answer: &str, shown: usize) -> Result<Vec<Interaction>, SemanticError> {
    let text = answer.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .map(str::trim)
        .unwrap_or(text);
    let parsed: Answer = serde_json::from_str(text)?;
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for item in parsed.overlaps {
        let candidate = (0..shown)
            .find(|i| id(*i) == item.thread.trim())
            .ok_or_else(|| SemanticError::UnknownThread(item.thread.clone()))?;
        let reason = item.reason.trim();
        if reason.is_empty() {
            return Err(SemanticError::NoReason(item.thread));
        }
        if seen.insert(candidate) {
            found.push(Interaction {
                candidate,
                reason: reason.to_owned(),
            });
        }
    }
    Ok(found)
}

/// Asks the PM which `candidates` may interact with `plan`: one call, no tools. A failed
/// call or a malformed answer is logged and found nothing.
pub async fn judge(
    pm: &Pm,
    thread: &ThreadKey,
    plan: &Plan,
    candidates: &[Candidate],
    cancel: &CancellationToken,
) -> Vec<Interaction> {
    if candidates.is_empty() {
        return Vec::new();
    }
    match ask(pm, thread, plan, candidates, cancel).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(thread = %thread, "semantic overlap: {e}; nothing found");
            Vec::new()
        }
    }
}

async fn ask(
    pm: &Pm,
    thread: &ThreadKey,
    plan: &Plan,
    candidates: &[Candidate],
    cancel: &CancellationToken,
) -> Result<Vec<Interaction>, SemanticError> {
    let ctx = CallContext {
        thread: thread.clone(),
        role: ROLE,
        model: pm.model.clone(),
    };
    let completion = pm
        .gateway
        .complete(
            &ctx,
            &[
                ChatMessage::system(prompt(plan, candidates)),
                ChatMessage::user(REQUEST),
            ],
            &[],
            cancel,
        )
        .await?;
    let answer = completion.reply.content.ok_or(SemanticError::Empty)?;
    parse(&answer, candidates.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            summary: "Raise bcrypt rounds".into(),
            steps: vec!["Change `auth/hash.go`".into(), "Add a test".into()],
            files: vec!["auth/hash.go".into()],
        }
    }

    #[test]
    fn the_prompt_as_the_model_reads_it() {
        let candidates = [
            Candidate {
                summary: "Add a password policy".into(),
                files: vec!["config/security.go".into()],
            },
            Candidate {
                summary: "Fix the docs".into(),
                files: vec![],
            },
        ];
        insta::assert_snapshot!(prompt(&plan(), &candidates));
    }

    #[test]
    fn answers_name_shown_threads_with_a_reason() {
        let answer = r#"{"overlaps":[{"thread":"T2","reason":"Both change password checks."}]}"#;
        assert_eq!(
            parse(answer, 2).unwrap(),
            [Interaction {
                candidate: 1,
                reason: "Both change password checks.".into()
            }]
        );
        let fenced = format!("```json\n{answer}\n```");
        assert_eq!(parse(&fenced, 2).unwrap().len(), 1);
        assert!(parse(r#"{"overlaps":[]}"#, 2).unwrap().is_empty());
    }

    #[test]
    fn malformed_answers_are_errors_never_guesses() {
        for (bad, kind) in [
            ("They might interact.", "malformed"),
            (r#"{"overlaps":"T1"}"#, "malformed"),
            (r#"{"overlaps":[{"thread":"T1"}]}"#, "malformed"),
            (r#"{"overlaps":[],"extra":1}"#, "malformed"),
            (r#"{"overlaps":[{"thread":"T3","reason":"x"}]}"#, "unknown"),
            (r#"{"overlaps":[{"thread":"T1","reason":" "}]}"#, "reason"),
        ] {
            let got = parse(bad, 2);
            let matches = match kind {
                "malformed" => matches!(got, Err(SemanticError::Malformed(_))),
                "unknown" => matches!(got, Err(SemanticError::UnknownThread(_))),
                _ => matches!(got, Err(SemanticError::NoReason(_))),
            };
            assert!(matches, "{bad}: {got:?}");
        }
    }
}
