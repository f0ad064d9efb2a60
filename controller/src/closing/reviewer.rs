//! The reviewer (`reviewer.model`): a model that reads a pull request's diff and the plan the
//! team approved, with read-only tools over the repository at the pull request's head
//! ([`super::reviewer_tools`]), and answers with a review in a JSON shape of ours
//! ([`parse`]). What it answers is data: an answer that is not that shape is refused whole
//! ([`ReviewerError::Malformed`]) and nothing is posted; comments on lines GitHub's diff does
//! not show (which GitHub refuses with HTTP 422) are dropped before posting ([`keep_shown`]).
//!
//! The review is posted as a `COMMENT` review ([`review_json`]), never `APPROVE` nor
//! `REQUEST_CHANGES`, so it never counts as an approval and never blocks a merge. Its calls
//! are usage rows of the role [`ROLE`], so they count in the daily caps, the thread's budget
//! and its usage report; one review stops calling the model once it spent
//! `reviewer.maxCostPerReview` ([`CappedModel`]).

use std::sync::Mutex;

use async_trait::async_trait;
use codebutler_agent::conversation::{ChatMessage, ToolSpec};
use codebutler_agent::tool::ToolRegistry;
use codebutler_agent::tool_loop::{
    AssistantReply, ChatModel, LoopError, LoopLimits, NoArrivals, run_tool_loop_with,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::closing::review_input;
use crate::gateway::{CallContext, FallbackSeen, Gateway, GatewayError};
use crate::workspace::pr_diff::PrDiff;

/// The role the reviewer's calls are recorded under.
pub const ROLE: &str = "reviewer";
/// The reviewer's instructions (the system message).
pub const PROMPT: &str = include_str!("../../../prompts/reviewer.md");
/// Most characters of the diff given to the model.
pub const MAX_DIFF_CHARS: usize = 60_000;
/// Most characters of the plan given to the model.
const MAX_PLAN_CHARS: usize = 8_000;
/// Most model calls of one review that may use tools before it must answer.
const MAX_ITERATIONS: usize = 8;
/// Most line comments one review posts.
pub const MAX_COMMENTS: usize = 20;
/// Most characters of one comment's text.
const MAX_COMMENT_CHARS: usize = 2_000;
/// Most characters of the summary.
const MAX_SUMMARY_CHARS: usize = 1_000;

/// The hidden line a reviewer's review body ends with, naming the head it reviewed (for
/// whoever reads GitHub's data; the controller tells its reviews by the ids it stored, never
/// by this text, which anyone can type).
pub fn marker(head: &str) -> String {
    format!("<!-- codebutler reviewer head:{head} -->")
}

/// Why a review could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReviewerError {
    #[error("the reviewer model call failed: {0}")]
    Model(#[from] GatewayError),
    #[error("the review reached reviewer.maxCostPerReview (${cap:.2})")]
    OverCost { cap: f64 },
    #[error("cancelled")]
    Cancelled,
    #[error("the reviewer's answer is not the json asked for: {0}")]
    Malformed(String),
}

/// One line comment of a review.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineNote {
    pub path: String,
    pub line: u32,
    pub body: String,
}

/// The reviewer's answer.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub summary: String,
    pub comments: Vec<LineNote>,
}

/// The user message: the pull request, the plan (bounded) and the diff (bounded by
/// [`crate::workspace::pr_diff::read`]).
pub fn request(pr_number: u64, plan: Option<&str>, diff: &PrDiff) -> String {
    let plan = match plan.map(str::trim).filter(|p| !p.is_empty()) {
        Some(plan) => review_input::cut(plan, MAX_PLAN_CHARS).0,
        None => "(no plan was recorded for this thread)".to_owned(),
    };
    format!(
        "Pull request #{pr_number}, head {head}, base {base}.\n\n## The plan\n\n{plan}\n\n## The diff\n\n```diff\n{diff}```\n",
        head = diff.head,
        base = diff.base,
        diff = diff.text,
    )
}

/// Parses the model's `answer` (JSON only; one code fence around it is tolerated), bounding
/// what it may put on GitHub: at most [`MAX_COMMENTS`] comments, each text and the summary
/// cut. Empty comment texts and paths are refused.
pub fn parse(answer: &str) -> Result<Review, ReviewerError> {
    let text = answer.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    let mut review: Review =
        serde_json::from_str(text).map_err(|e| ReviewerError::Malformed(e.to_string()))?;
    if review.comments.len() > MAX_COMMENTS {
        return Err(ReviewerError::Malformed(format!(
            "{} comments, more than {MAX_COMMENTS}",
            review.comments.len()
        )));
    }
    for note in &mut review.comments {
        if note.path.trim().is_empty() || note.body.trim().is_empty() || note.line == 0 {
            return Err(ReviewerError::Malformed(
                "a comment without its path, line or text".into(),
            ));
        }
        note.body = review_input::cut(note.body.trim(), MAX_COMMENT_CHARS).0;
    }
    review.summary = review_input::cut(review.summary.trim(), MAX_SUMMARY_CHARS).0;
    Ok(review)
}

/// The comments of `review` on lines `diff` shows, and how many were dropped.
pub fn keep_shown(review: &Review, diff: &PrDiff) -> (Vec<LineNote>, usize) {
    let (kept, dropped): (Vec<LineNote>, Vec<LineNote>) = review
        .comments
        .iter()
        .cloned()
        .partition(|n| diff.shows(&n.path, n.line));
    (kept, dropped.len())
}

/// The review as GitHub's API takes it: a `COMMENT` review of `head`, the summary and the
/// hidden marker as its body, one comment per note on the new side.
pub fn review_json(head: &str, summary: &str, notes: &[LineNote]) -> serde_json::Value {
    let comments: Vec<serde_json::Value> = notes
        .iter()
        .map(|n| {
            serde_json::json!({
                "path": n.path,
                "line": n.line,
                "side": "RIGHT",
                "body": n.body,
            })
        })
        .collect();
    let summary = if summary.is_empty() {
        "CodeButler's reviewer looked at this head."
    } else {
        summary
    };
    serde_json::json!({
        "commit_id": head,
        "event": "COMMENT",
        "body": format!("🔎 {summary}\n\n{}", marker(head)),
        "comments": comments,
    })
}

/// The thread's line once the review of `pr_url` is posted with `count` comments.
pub fn posted_line(count: usize, pr_url: &str) -> String {
    match count {
        0 => format!("🔎 Reviewer: no problems found on {pr_url}"),
        1 => format!("🔎 Reviewer: 1 comment on {pr_url}"),
        n => format!("🔎 Reviewer: {n} comments on {pr_url}"),
    }
}

/// The thread's line when the review of `head` was not posted, and why.
pub fn not_posted_line(head: &str, why: &str) -> String {
    let short: String = head.chars().take(7).collect();
    format!("🔎 Reviewer: no review of `{short}`: {why}")
}

/// A model that stops one review's calls once they cost `cap` (USD) or more.
pub struct CappedModel<'a> {
    gateway: &'a Gateway,
    ctx: CallContext,
    cancel: CancellationToken,
    cap: Option<f64>,
    spent: Mutex<f64>,
    /// The model other than `ctx.model` that answered a call (the fallback), if one did.
    fallback_answered: FallbackSeen,
}

impl std::fmt::Debug for CappedModel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CappedModel")
            .field("ctx", &self.ctx)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl<'a> CappedModel<'a> {
    /// The reviewer's calls on `gateway` as `ctx` says, stopped at `cap` (`None`: no cap).
    pub fn new(
        gateway: &'a Gateway,
        ctx: CallContext,
        cancel: CancellationToken,
        cap: Option<f64>,
    ) -> Self {
        Self {
            gateway,
            ctx,
            cancel,
            cap,
            spent: Mutex::new(0.0),
            fallback_answered: FallbackSeen::default(),
        }
    }

    fn spent(&self) -> f64 {
        *self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fallback model that answered one of its calls, if one did.
    pub fn fallback_answered(&self) -> Option<String> {
        self.fallback_answered.get()
    }
}

#[async_trait]
impl ChatModel for CappedModel<'_> {
    type Error = ReviewerError;

    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<AssistantReply, ReviewerError> {
        if let Some(cap) = self.cap
            && self.spent() >= cap
        {
            return Err(ReviewerError::OverCost { cap });
        }
        let completion = self
            .gateway
            .complete(&self.ctx, messages, tools, &self.cancel)
            .await?;
        *self.spent.lock().unwrap_or_else(|e| e.into_inner()) +=
            completion.usage.cost.unwrap_or(0.0);
        self.fallback_answered
            .note(&self.ctx.model, &completion.usage.model);
        Ok(completion.reply)
    }
}

/// Runs the reviewer on `request` with `tools`; its parsed answer.
pub async fn review(
    model: &CappedModel<'_>,
    tools: &ToolRegistry,
    request: String,
    cancel: &CancellationToken,
) -> Result<Review, ReviewerError> {
    let history = [ChatMessage::user(request)];
    let limits = LoopLimits {
        max_iterations: MAX_ITERATIONS,
    };
    let outcome = run_tool_loop_with(model, tools, PROMPT, &history, limits, &NoArrivals, cancel)
        .await
        .map_err(|e| match e {
            LoopError::Model(e) => e,
            LoopError::Cancelled => ReviewerError::Cancelled,
        })?;
    parse(&outcome.answer)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn diff() -> PrDiff {
        PrDiff {
            base: "b".repeat(40),
            head: "h".repeat(40),
            text: "diff --git a/a.txt b/a.txt\n+x\n".into(),
            commentable: BTreeMap::from([("a.txt".to_owned(), BTreeSet::from([1, 2, 3]))]),
        }
    }

    #[test]
    fn an_answer_is_read_bounded_and_garbage_refused() {
        let review = parse(
            r#"```json
{"summary": "One bug.", "comments": [{"path": "a.txt", "line": 2, "body": "Off by one."}, {"path": "a.txt", "line": 40, "body": "Far away."}]}
```"#,
        )
        .unwrap();
        assert_eq!(review.summary, "One bug.");
        let (kept, dropped) = keep_shown(&review, &diff());
        assert_eq!(
            kept,
            [LineNote {
                path: "a.txt".into(),
                line: 2,
                body: "Off by one.".into()
            }]
        );
        assert_eq!(dropped, 1);
        for bad in [
            "Looks good to me!",
            r#"{"summary": "x"}"#,
            r#"{"summary": "x", "comments": [], "approve": true}"#,
            r#"{"summary": "x", "comments": [{"path": "", "line": 1, "body": "b"}]}"#,
            r#"{"summary": "x", "comments": [{"path": "a", "line": 0, "body": "b"}]}"#,
            r#"{"summary": "x", "comments": [{"path": "a", "line": -3, "body": "b"}]}"#,
        ] {
            assert!(
                matches!(parse(bad), Err(ReviewerError::Malformed(_))),
                "{bad}"
            );
        }
        let many: Vec<serde_json::Value> = (1..=21)
            .map(|n| serde_json::json!({"path": "a.txt", "line": n, "body": "b"}))
            .collect();
        let many = serde_json::json!({"summary": "s", "comments": many}).to_string();
        assert!(matches!(parse(&many), Err(ReviewerError::Malformed(_))));
    }

    #[test]
    fn the_review_is_a_comment_never_an_approval() {
        let notes = [LineNote {
            path: "a.txt".into(),
            line: 2,
            body: "Off by one.".into(),
        }];
        let json = review_json("abc", "One bug.", &notes);
        assert_eq!(
            json,
            serde_json::json!({
                "commit_id": "abc",
                "event": "COMMENT",
                "body": "🔎 One bug.\n\n<!-- codebutler reviewer head:abc -->",
                "comments": [{"path": "a.txt", "line": 2, "side": "RIGHT", "body": "Off by one."}],
            })
        );
        assert_eq!(
            posted_line(2, "https://github.com/acme/app/pull/7"),
            "🔎 Reviewer: 2 comments on https://github.com/acme/app/pull/7"
        );
        assert_eq!(posted_line(0, "u"), "🔎 Reviewer: no problems found on u");
    }

    #[test]
    fn the_request_carries_the_plan_and_the_diff() {
        let text = request(7, Some("Add the notes."), &diff());
        assert!(text.contains("## The plan\n\nAdd the notes."), "{text}");
        assert!(text.contains("+x\n```"), "{text}");
        assert!(request(7, None, &diff()).contains("(no plan was recorded"));
    }
}
