//! Cross-thread references: a person's message that links another Slack thread of this
//! channel, or one of this repository's pull requests or issues (`#42`, a GitHub address),
//! gives the PM that thread's or item's text as read-only background for its turn.
//!
//! [`detect`] finds the references (pure); [`read`] resolves and fetches them — a thread
//! with `conversations.replies`, a pull request with `gh pr view` and `gh pr diff`, an
//! issue with `gh issue view` (`#42` tries the pull request, then the issue) — all reads,
//! nothing of the other thread or item is changed; [`render`] turns what was read into the
//! block the PM reads and the one line the thread gets. The isolation rules are here, in
//! [`read`]: only threads of this repository's channel and items of this repository are
//! read (a link elsewhere is named in the line as not read, and why); a link to the current
//! thread is ignored. A fetch that fails is said in the line and the PM answers anyway.
//! Each message's references are read once (`thread/pm_turn.rs` records them with the line).

pub mod detect;
pub mod github;
pub mod render;

use std::path::Path;
use std::time::Duration;

use crate::domain::ThreadKey;
use crate::slack::api::Sender;

pub use detect::{Detected, GitHubKind, MAX_REFERENCES, Reference, detect};
pub use render::{CONTEXT_HEADER, Rendered, coder_background, render};

/// Longest reading one reference may take; past it, it is reported as failed.
pub const READ_TIMEOUT: Duration = Duration::from_secs(45);
/// Pages of `conversations.replies` read of one thread at most.
const MAX_THREAD_PAGES: usize = 10;

/// Where references are read from.
#[derive(Clone, Copy, Debug)]
pub struct Sources<'a> {
    /// Slack, for threads.
    pub slack: &'a Sender,
    /// The `gh` executable.
    pub gh: &'a Path,
    /// The main repository, where `gh` runs.
    pub repo: &'a Path,
}

/// What became of one reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Read: `text` is its content for the PM (not yet capped).
    Read {
        /// How the thread line names it (Markdown).
        label: String,
        /// Its heading in the PM's context block.
        heading: String,
        /// What was read, as plain text.
        text: String,
        /// A count for the thread line ("12 messages"), if any.
        count: Option<String>,
    },
    /// Not read, on purpose (another channel, another repository).
    NotRead { label: String, why: String },
    /// Reading it failed.
    Failed { label: String, why: String },
}

/// What is to be read, once references that name the same thing are merged.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// A thread of this channel.
    Thread { url: String, thread_ts: String },
    /// A pull request or issue of this repository; `kind` unknown for `#N`.
    Item {
        number: u64,
        kind: Option<GitHubKind>,
    },
}

/// Reads the references `detected` in a message of `here` from `sources`, in order;
/// references to `here` itself are left out.
pub async fn read(detected: &Detected, here: &ThreadKey, sources: Sources<'_>) -> Vec<Outcome> {
    let (targets, mut outcomes) = resolve(detected, here, sources).await;
    let reads = targets.iter().map(|target| async move {
        match tokio::time::timeout(READ_TIMEOUT, read_target(target, here, sources)).await {
            Ok(outcome) => outcome,
            Err(_) => Outcome::Failed {
                label: target_label(target),
                why: format!("no answer within {} s", READ_TIMEOUT.as_secs()),
            },
        }
    });
    let mut read = futures::future::join_all(reads).await;
    read.append(&mut outcomes);
    read
}

/// The targets to read, and the outcomes of references that are not to be read.
async fn resolve(
    detected: &Detected,
    here: &ThreadKey,
    sources: Sources<'_>,
) -> (Vec<Target>, Vec<Outcome>) {
    let mut targets: Vec<Target> = Vec::new();
    let mut outcomes = Vec::new();
    let needs_repository = detected
        .references
        .iter()
        .any(|r| matches!(r, Reference::GitHub { .. }));
    let repository = if needs_repository {
        let repository = github::repository(sources.gh, sources.repo).await;
        if let Err(e) = &repository {
            tracing::warn!("read a GitHub reference: {e}");
        }
        Some(repository)
    } else {
        None
    };
    for reference in &detected.references {
        let target = match reference {
            Reference::SlackThread {
                url,
                channel,
                thread_ts,
            } => {
                if *channel != here.channel {
                    outcomes.push(Outcome::NotRead {
                        label: format!("[a thread in another channel]({url})"),
                        why: "I only read threads of this repository's channel".into(),
                    });
                    continue;
                }
                if *thread_ts == here.thread_ts {
                    continue;
                }
                Target::Thread {
                    url: url.clone(),
                    thread_ts: thread_ts.clone(),
                }
            }
            Reference::GitHub {
                owner,
                repo,
                kind,
                number,
            } => {
                let name = format!("{owner}/{repo}");
                let label = format!("{name}#{number}");
                match &repository {
                    Some(Ok(ours)) if ours.eq_ignore_ascii_case(&name) => Target::Item {
                        number: *number,
                        kind: Some(*kind),
                    },
                    Some(Ok(ours)) => {
                        outcomes.push(Outcome::NotRead {
                            label: format!("`{label}`"),
                            why: format!("another repository's; I only read `{ours}`'s"),
                        });
                        continue;
                    }
                    Some(Err(_)) | None => {
                        outcomes.push(Outcome::Failed {
                            label: format!("`{label}`"),
                            why:
                                "I could not tell which repository this is (`gh repo view` failed)"
                                    .into(),
                        });
                        continue;
                    }
                }
            }
            Reference::Number(number) => Target::Item {
                number: *number,
                kind: None,
            },
        };
        let same = |t: &Target| match (t, &target) {
            (Target::Thread { thread_ts: a, .. }, Target::Thread { thread_ts: b, .. }) => a == b,
            (Target::Item { number: a, .. }, Target::Item { number: b, .. }) => a == b,
            _ => false,
        };
        if !targets.iter().any(same) {
            targets.push(target);
        }
    }
    (targets, outcomes)
}

/// How the thread line names `target`.
fn target_label(target: &Target) -> String {
    match target {
        Target::Thread { url, .. } => format!("[thread]({url})"),
        Target::Item {
            number,
            kind: Some(GitHubKind::PullRequest),
        } => format!("PR #{number}"),
        Target::Item {
            number,
            kind: Some(GitHubKind::Issue),
        } => format!("issue #{number}"),
        Target::Item { number, kind: None } => format!("#{number}"),
    }
}

/// Reads one target.
async fn read_target(target: &Target, here: &ThreadKey, sources: Sources<'_>) -> Outcome {
    let label = target_label(target);
    match target {
        Target::Thread { url, thread_ts } => {
            match sources
                .slack
                .thread_messages(&here.channel, thread_ts, MAX_THREAD_PAGES)
                .await
            {
                Ok(read) => {
                    let count = read.messages.len();
                    let more = if read.complete { "" } else { "+" };
                    Outcome::Read {
                        label,
                        heading: format!("Slack thread {url} ({count}{more} messages)"),
                        text: render::thread_text(&read.messages, read.complete),
                        count: Some(format!(
                            "{count}{more} message{}",
                            if count == 1 { "" } else { "s" }
                        )),
                    }
                }
                Err(e) => {
                    tracing::warn!(thread = %here, "read the linked thread {thread_ts}: {e}");
                    Outcome::Failed {
                        label,
                        why: slack_reason(&e),
                    }
                }
            }
        }
        Target::Item { number, kind } => read_item(*number, *kind, label, sources, here).await,
    }
}

/// Reads pull request or issue `number`: as `kind` says, or (`#N`) the pull request and,
/// if there is none, the issue.
async fn read_item(
    number: u64,
    kind: Option<GitHubKind>,
    label: String,
    sources: Sources<'_>,
    here: &ThreadKey,
) -> Outcome {
    let (gh, repo) = (sources.gh, sources.repo);
    let failed = |e: github::GhReadError| {
        let why = if e.not_found() {
            "not found".to_owned()
        } else {
            tracing::warn!(thread = %here, "read #{number} with gh: {e}");
            "`gh` failed; the log says why".to_owned()
        };
        Outcome::Failed {
            label: label.clone(),
            why,
        }
    };
    if kind != Some(GitHubKind::Issue) {
        match github::pull_request(gh, repo, number).await {
            Ok(pr) => {
                let diff = match github::pull_request_diff(gh, repo, number).await {
                    Ok(diff) => Some(diff),
                    Err(e) => {
                        tracing::warn!(thread = %here, "gh pr diff {number}: {e}");
                        None
                    }
                };
                return Outcome::Read {
                    label: format!("PR #{number}"),
                    heading: format!("PR #{number}: {}", pr.title),
                    text: render::item_text(&pr, diff.as_deref()),
                    count: None,
                };
            }
            // `#N` that is no pull request may be an issue; any other failure is said.
            Err(e) if kind.is_some() || !e.not_found() => return failed(e),
            Err(_) => {}
        }
    }
    match github::issue(gh, repo, number).await {
        Ok(issue) => Outcome::Read {
            label: format!("issue #{number}"),
            heading: format!("issue #{number}: {}", issue.title),
            text: render::item_text(&issue, None),
            count: None,
        },
        Err(e) => failed(e),
    }
}

/// A short reason for a failed Slack read, for the thread line.
fn slack_reason(e: &crate::slack::api::SlackError) -> String {
    use slack_morphism::errors::SlackClientError;
    match e {
        crate::slack::api::SlackError::Api {
            source: SlackClientError::ApiError(api),
            ..
        } => match api.code.as_str() {
            "thread_not_found" => "Slack has no such thread".into(),
            "not_in_channel" | "channel_not_found" => "I cannot read that channel".into(),
            code => format!("Slack answered `{code}`"),
        },
        crate::slack::api::SlackError::Api {
            source: SlackClientError::RateLimitError(_),
            ..
        } => "Slack rate-limited the read".into(),
        _ => "Slack could not be reached".into(),
    }
}
