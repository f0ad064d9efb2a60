//! The memory extraction: one model call (`productManager.memoryExtraction`, through the
//! gateway, its usage recorded as [`ROLE`]) that reads the thread's whole history and the
//! memory as it is where the lines will be committed, and answers with the operations of
//! [`super::ops`]. The prompt is `prompts/memory-extraction.md` (seeded into
//! `.codebutler/prompts/`, yours to edit) with `{memory}`, `{coder_notes}`,
//! `{artist_style}` and `{history}` filled in.

use codebutler_agent::conversation::ChatMessage;
use tokio_util::sync::CancellationToken;

use crate::domain::ThreadKey;
use crate::gateway::{CallContext, Gateway, GatewayError};

/// The role the extraction's usage is recorded as (the usage report's "Memory extraction").
pub const ROLE: &str = "memory-extraction";

/// What the prompt's placeholders are filled with.
#[derive(Clone, Copy, Debug)]
pub struct Filled<'a> {
    /// `{memory}`: the PM's memory where the lines will be committed.
    pub memory: &'a str,
    /// `{coder_notes}`: the notes the Coder's prompt already has ("Notes from the team").
    pub coder_notes: &'a str,
    /// `{artist_style}`: the Artist's memory's "Visual Style" lines.
    pub artist_style: &'a str,
    /// `{history}`: the thread.
    pub history: &'a str,
}

/// The prompt sent: `template` with `{memory}`, `{coder_notes}`, `{artist_style}` and
/// `{history}` replaced in one pass, so text in the memory or the thread that looks like a
/// placeholder stays as written. Empty notes read "(none yet)".
pub fn prompt(template: &str, filled: &Filled<'_>) -> String {
    let values = [
        ("{memory}", filled.memory),
        ("{coder_notes}", or_none(filled.coder_notes)),
        ("{artist_style}", or_none(filled.artist_style)),
        ("{history}", filled.history),
    ];
    let mut out =
        String::with_capacity(template.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    loop {
        let next = values
            .into_iter()
            .filter_map(|(name, value)| rest.find(name).map(|at| (at, name, value)))
            .min_by_key(|(at, _, _)| *at);
        let Some((at, name, value)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        out.push_str(value.trim_end());
        rest = &rest[at + name.len()..];
    }
}

/// `text`, or "(none yet)" when it is blank.
fn or_none(text: &str) -> &str {
    if text.trim().is_empty() {
        "(none yet)"
    } else {
        text
    }
}

/// The messages of the call: the prompt as the one user message.
pub fn messages(prompt: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::user(prompt.to_owned())]
}

/// Asks `model` for the operations; returns its answer's text (parse it with
/// [`crate::domain::memory_ops::parse`]).
pub async fn extract(
    gateway: &Gateway,
    thread: &ThreadKey,
    model: &str,
    prompt: &str,
    cancel: &CancellationToken,
) -> Result<String, GatewayError> {
    let ctx = CallContext {
        thread: thread.clone(),
        role: ROLE,
        model: model.to_owned(),
    };
    let completion = gateway
        .complete(&ctx, &messages(prompt), &[], cancel)
        .await?;
    Ok(completion.reply.content.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::DEFAULT_PROMPTS;

    fn template() -> &'static str {
        DEFAULT_PROMPTS
            .iter()
            .find(|(name, _)| *name == "memory-extraction.md")
            .map(|(_, text)| *text)
            .unwrap()
    }

    #[test]
    fn placeholders_are_filled_once() {
        let filled = Filled {
            memory: "{history}",
            coder_notes: "{memory}",
            artist_style: "",
            history: "{coder_notes}\n",
        };
        assert_eq!(
            prompt("M={memory} C={coder_notes} H={history} M", &filled),
            "M={history} C={memory} H={coder_notes} M"
        );
        let none = Filled {
            coder_notes: " \n",
            ..filled
        };
        assert_eq!(prompt("C={coder_notes}", &none), "C=(none yet)");
    }

    #[test]
    fn the_prompt_as_sent() {
        let history = "[10:00] <@U0ALICE>: registration should return a JWT\n\
                       [10:01] PM: 📋 Plan: add POST /register\n\
                       [10:05] Coder question 1: auth/login.go uses JWT but auth/session.go uses cookies. Which one?\n    \
                       answered by <@U0ALICE>: JWT, always JWT\n";
        let memory = crate::memory::seed::PM_DEFAULT;
        let sent = prompt(
            template(),
            &Filled {
                memory,
                coder_notes: "- Run `cargo fmt` before committing\n",
                artist_style: "",
                history,
            },
        );
        assert_eq!(messages(&sent), vec![ChatMessage::user(sent.clone())]);
        insta::assert_snapshot!(sent);
    }
}
