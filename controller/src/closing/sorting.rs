//! The PM sorting a batch of review comments: one model call without tools, the prompt
//! `prompts/review-comments.md` as the system message and the comments as JSON in the user
//! message — what the round gives of them ([`review_input::Batch`]: the comments of people
//! who may steer, visible text only, bounded, with markers saying what was cut or left
//! out). Each comment given becomes a change asked, a question, or discussion left alone. The
//! answer must be the JSON the prompt asks for, naming every comment once; anything else is a
//! [`SortError`] the caller reports without proposing anything — never a guess, never a
//! crash. The call's usage is recorded like the PM's other calls (role `pm`).

use codebutler_agent::conversation::ChatMessage;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::closing::review_input::{self, Batch};
use crate::domain::ThreadKey;
use crate::gateway::{CallContext, GatewayError};
use crate::pm::Pm;

/// The sorting prompt (the system message).
pub const PROMPT: &str = include_str!("../../../prompts/review-comments.md");
/// Longest summary kept (characters).
const SUMMARY_CHARS: usize = 80;

/// What a comment asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A change to the code.
    Change,
    /// A question to answer.
    Question,
    /// Discussion: left alone.
    Discussion,
}

impl Kind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Change => "change",
            Self::Question => "question",
            Self::Discussion => "discussion",
        }
    }

    /// The kind a stored name says.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Change, Self::Question, Self::Discussion]
            .into_iter()
            .find(|k| k.as_str() == name)
    }
}

/// One comment, sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sorted {
    pub kind: Kind,
    /// What it asks, in a few words.
    pub summary: String,
}

/// Why a batch could not be sorted.
#[derive(Debug, thiserror::Error)]
pub enum SortError {
    #[error("the pm model call failed: {0}")]
    Model(#[from] GatewayError),
    #[error("the pm answered no text")]
    Empty,
    #[error("the pm's answer is not the json asked for: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("the pm's answer does not name each of the {expected} comments once")]
    Incomplete { expected: usize },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    comments: Vec<AnswerItem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerItem {
    id: usize,
    kind: Kind,
    summary: String,
}

/// The user message: the pull request and the comments `batch` gives as JSON (ids from 1,
/// in order), after a line saying how many more were left out, if any.
pub fn request(pr_number: u64, batch: &Batch<'_>) -> String {
    let items: Vec<serde_json::Value> = batch
        .shown
        .iter()
        .enumerate()
        .map(|(i, shown)| {
            let c = shown.comment;
            serde_json::json!({
                "id": i + 1,
                "author": review_input::login(&c.author),
                "file": c.path.as_deref().map(review_input::path),
                "line": c.line,
                "text": shown.text,
            })
        })
        .collect();
    let list = serde_json::Value::Array(items);
    let left_out = if batch.not_shown > 0 {
        format!("\n{}", review_input::not_shown_marker(batch.not_shown))
    } else {
        String::new()
    };
    format!(
        "Pull request #{pr_number} got these comments, in the order they were written:{left_out}\n\n{list:#}"
    )
}

/// Parses the answer for `count` comments: one [`Sorted`] per comment, in their order.
pub fn parse(answer: &str, count: usize) -> Result<Vec<Sorted>, SortError> {
    let parsed: Answer = serde_json::from_str(answer.trim())?;
    let mut sorted: Vec<Option<Sorted>> = vec![None; count];
    for item in parsed.comments {
        let slot = item
            .id
            .checked_sub(1)
            .and_then(|i| sorted.get_mut(i))
            .ok_or(SortError::Incomplete { expected: count })?;
        if slot.is_some() {
            return Err(SortError::Incomplete { expected: count });
        }
        let summary: String = item.summary.trim().chars().take(SUMMARY_CHARS).collect();
        *slot = Some(Sorted {
            kind: item.kind,
            summary,
        });
    }
    sorted
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or(SortError::Incomplete { expected: count })
}

/// Asks the PM to sort the comments `batch` gives of pull request `pr_number`: one
/// [`Sorted`] per comment given, in order.
pub async fn sort(
    pm: &Pm,
    thread: &ThreadKey,
    pr_number: u64,
    batch: &Batch<'_>,
    cancel: &CancellationToken,
) -> Result<Vec<Sorted>, SortError> {
    let ctx = CallContext {
        thread: thread.clone(),
        role: "pm",
        model: pm.model.clone(),
    };
    let messages = [
        ChatMessage::system(PROMPT),
        ChatMessage::user(request(pr_number, batch)),
    ];
    let completion = pm.gateway.complete(&ctx, &messages, &[], cancel).await?;
    let answer = completion.reply.content.ok_or(SortError::Empty)?;
    parse(&answer, batch.shown.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::reviews::StoredComment;

    fn comment(author: &str, path: Option<&str>, line: Option<i64>, body: &str) -> StoredComment {
        StoredComment {
            key: "k".into(),
            author: author.into(),
            path: path.map(str::to_owned),
            line,
            body: body.into(),
            url: "u".into(),
            reply_to: None,
            sorted: None,
            reply: None,
        }
    }

    #[test]
    fn the_prompt_as_the_model_reads_it() {
        let comments = [
            comment(
                "alice",
                Some("src/a.rs"),
                Some(3),
                "Rename this to `parse_all`.",
            ),
            comment("bob", None, None, "Why a loop here?"),
        ];
        insta::assert_snapshot!(
            "review_sorting_prompt",
            format!(
                "{PROMPT}\n---\n{}",
                request(7, &review_input::batch(&comments))
            )
        );
    }

    #[test]
    fn a_flood_is_sorted_within_the_bounds_saying_what_was_left_out() {
        let flood: Vec<StoredComment> = (0..300)
            .map(|i| {
                comment(
                    "mallory\n\"}",
                    Some(&"d/".repeat(500)),
                    Some(i),
                    &"x".repeat(6_000),
                )
            })
            .collect();
        let batch = review_input::batch(&flood);
        let text = request(7, &batch);
        let limit = review_input::MAX_ROUND_CHARS + review_input::MAX_ROUND_COMMENTS * 500 + 200;
        assert!(text.chars().count() < limit, "{}", text.chars().count());
        assert!(text.contains("characters cut]"), "each comment is cut");
        let (head, list) = text.split_once("\n\n").unwrap();
        assert_eq!(
            head,
            format!(
                "Pull request #7 got these comments, in the order they were written:\n[{} more comments not shown]",
                batch.not_shown
            )
        );
        let items: Vec<serde_json::Value> = serde_json::from_str(list).unwrap();
        assert_eq!(items.len(), batch.shown.len());
        assert_eq!(items[0]["author"], "mallory");
    }

    #[test]
    fn answers_are_checked_against_the_batch() {
        let answer = r#"{"comments":[{"id":2,"kind":"question","summary":" Why a loop? "},{"id":1,"kind":"change","summary":"rename"}]}"#;
        assert_eq!(
            parse(answer, 2).unwrap(),
            [
                Sorted {
                    kind: Kind::Change,
                    summary: "rename".into()
                },
                Sorted {
                    kind: Kind::Question,
                    summary: "Why a loop?".into()
                },
            ]
        );
        let long = format!(
            r#"{{"comments":[{{"id":1,"kind":"discussion","summary":"{}"}}]}}"#,
            "x".repeat(200)
        );
        assert_eq!(
            parse(&long, 1).unwrap()[0].summary.chars().count(),
            SUMMARY_CHARS
        );
        for bad in [
            "I think the first one is a change.",
            r#"```json
{"comments":[]}
```"#,
            r#"{"comments":[{"id":1,"kind":"nitpick","summary":"x"}]}"#,
            r#"{"comments":[{"id":1,"kind":"change"}]}"#,
            r#"{"comments":[{"id":1,"kind":"change","summary":"x","extra":1}]}"#,
            r#"{"comments":"all changes"}"#,
        ] {
            assert!(
                matches!(parse(bad, 1), Err(SortError::Malformed(_))),
                "{bad}"
            );
        }
        for bad in [
            r#"{"comments":[]}"#,
            r#"{"comments":[{"id":1,"kind":"change","summary":"x"},{"id":1,"kind":"change","summary":"x"}]}"#,
            r#"{"comments":[{"id":0,"kind":"change","summary":"x"}]}"#,
            r#"{"comments":[{"id":3,"kind":"change","summary":"x"}]}"#,
        ] {
            assert!(
                matches!(parse(bad, 1), Err(SortError::Incomplete { expected: 1 })),
                "{bad}"
            );
        }
        assert_eq!(Kind::parse("question"), Some(Kind::Question));
        assert_eq!(Kind::parse("other"), None);
    }
}
