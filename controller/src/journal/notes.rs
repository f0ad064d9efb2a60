//! What the PM writes about a finished thread in one model call without tools: the pull
//! request's Summary and Decisions (`prompts/pr-summary.md`) and the usage report's tips
//! (`prompts/tips.md`). Each answer must be the JSON its prompt asks for; anything else is
//! a clear, logged failure, and the caller writes its text without that part — never a
//! guess, never a crash.

use codebutler_agent::conversation::ChatMessage;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::domain::ThreadKey;
use crate::gateway::{CallContext, GatewayError};
use crate::pm::Pm;

/// The PR summary prompt (the system message); `{history}` is the thread.
pub const SUMMARY_PROMPT: &str = include_str!("../../../prompts/pr-summary.md");
/// The user message that asks for the summary.
pub const SUMMARY_REQUEST: &str = "Write the pull request's summary and decisions now.";
/// The tips prompt (the system message); `{usage}` is what each role used, `{history}`
/// the thread.
pub const TIPS_PROMPT: &str = include_str!("../../../prompts/tips.md");
/// The user message that asks for the tips.
pub const TIPS_REQUEST: &str = "Write the tips for next time now.";
/// Most tips the report shows.
pub const MAX_TIPS: usize = 3;
/// The role these calls are recorded under: they are the PM's.
const ROLE: &str = "pm";

/// Why the PM's note is missing.
#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error("the pm model call failed: {0}")]
    Model(#[from] GatewayError),
    #[error("the pm answered no text")]
    Empty,
    #[error("the pm's answer is not the json asked for: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// The Summary and Decisions of a pull request.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PrSummary {
    pub summary: String,
    #[serde(default)]
    pub decisions: Vec<String>,
    /// How the change was tested, as the thread shows it (the Coder's test runs); empty
    /// when the thread does not say.
    #[serde(default)]
    pub tested: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TipsAnswer {
    tips: Vec<String>,
}

/// Parses the summary answer: the JSON object, alone or in a code fence; an empty summary
/// is no summary.
pub fn parse_summary(answer: &str) -> Result<PrSummary, NoteError> {
    let mut parsed: PrSummary = serde_json::from_str(json_of(answer))?;
    if parsed.summary.trim().is_empty() {
        return Err(NoteError::Empty);
    }
    parsed.decisions.retain(|d| !d.trim().is_empty());
    Ok(parsed)
}

/// Parses the tips answer: at most [`MAX_TIPS`] non-empty tips (an empty list: the thread
/// was efficient).
pub fn parse_tips(answer: &str) -> Result<Vec<String>, NoteError> {
    let parsed: TipsAnswer = serde_json::from_str(json_of(answer))?;
    Ok(parsed
        .tips
        .into_iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .take(MAX_TIPS)
        .collect())
}

/// The JSON in an answer: the text itself, or the inside of a ```json fence around it.
fn json_of(answer: &str) -> &str {
    let text = answer.trim();
    text.strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .map(str::trim)
        .unwrap_or(text)
}

/// Asks the PM for the pull request's Summary and Decisions from the thread's `history`.
pub async fn summary(
    pm: &Pm,
    thread: &ThreadKey,
    history: &str,
    cancel: &CancellationToken,
) -> Result<PrSummary, NoteError> {
    let prompt = SUMMARY_PROMPT.replace("{history}", history);
    parse_summary(&ask(pm, thread, prompt, SUMMARY_REQUEST, cancel).await?)
}

/// Asks the PM for tips from the thread's `history` and what each role used (`usage`).
pub async fn tips(
    pm: &Pm,
    thread: &ThreadKey,
    usage: &str,
    history: &str,
    cancel: &CancellationToken,
) -> Result<Vec<String>, NoteError> {
    let prompt = TIPS_PROMPT
        .replace("{usage}", usage)
        .replace("{history}", history);
    parse_tips(&ask(pm, thread, prompt, TIPS_REQUEST, cancel).await?)
}

/// One call to the PM's model, no tools: `prompt` as the system message, then `request`.
async fn ask(
    pm: &Pm,
    thread: &ThreadKey,
    prompt: String,
    request: &str,
    cancel: &CancellationToken,
) -> Result<String, NoteError> {
    let ctx = CallContext {
        thread: thread.clone(),
        role: ROLE,
        model: pm.model.clone(),
    };
    let completion = pm
        .gateway
        .complete(
            &ctx,
            &[ChatMessage::system(prompt), ChatMessage::user(request)],
            &[],
            cancel,
        )
        .await?;
    completion.reply.content.ok_or(NoteError::Empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_read_from_json_alone_or_fenced() {
        let plain = r#"{"summary":"Fixes expiry.","decisions":["JWT (the PM)",""]}"#;
        assert_eq!(
            parse_summary(plain).unwrap(),
            PrSummary {
                tested: String::new(),
                summary: "Fixes expiry.".into(),
                decisions: vec!["JWT (the PM)".into()]
            }
        );
        let fenced = format!("```json\n{plain}\n```");
        assert_eq!(parse_summary(&fenced).unwrap().summary, "Fixes expiry.");
        for bad in [
            "Here is the summary: it fixes expiry.",
            r#"{"summary":"x","decisions":"none"}"#,
            r#"{"summary":"x","extra":1}"#,
            r#"{"decisions":[]}"#,
        ] {
            assert!(
                matches!(parse_summary(bad), Err(NoteError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_summary(r#"{"summary":"  "}"#),
            Err(NoteError::Empty)
        ));
    }

    #[test]
    fn tips_are_at_most_three_and_none_means_efficient() {
        assert_eq!(parse_tips(r#"{"tips":[]}"#).unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_tips(r#"{"tips":["a","  ","b","c","d"]}"#).unwrap(),
            ["a", "b", "c"]
        );
        for bad in ["no tips", r#"{"tips":"a"}"#, r#"{"hints":[]}"#] {
            assert!(
                matches!(parse_tips(bad), Err(NoteError::Malformed(_))),
                "{bad}"
            );
        }
    }
}
