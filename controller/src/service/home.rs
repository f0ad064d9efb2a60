//! App Home: what a person sees on CodeButler's Home tab, published (`views.publish`) each
//! time they open it (`app_home_opened`): for every repository the service serves, their
//! open threads with each one's state, pull request and cost, the Coder's runs and queue,
//! and the day's spend, theirs and the team's.
//!
//! Opening the tab is an event of the person's conversation with the app, not of a
//! repository's channel, so it is handled here, where every repository's store is known,
//! rather than by one repository's sink. The view is read and published in a task of its
//! own, so the event is acknowledged at once; a failed publish is logged, and the next
//! opening publishes again (a view replaces the last, so nothing is duplicated). Whoever
//! opened it gets it published again when one of their threads changes
//! ([`super::home_refresh`]). Only the threads of each repository's channel are listed, not
//! read-only conversations elsewhere. The view is made by a pure function of the figures
//! ([`home_blocks`]), tested by equality.

use std::fmt::Write as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use slack_morphism::prelude::*;

use crate::domain::{RunState, ThreadOverview, thread_title};
use crate::slack::api::{Sender, SlackError};
use crate::slack::format::escape_text;
use crate::store::{Store, StoreError};

/// Threads read back per repository (a person's open ones are found among them).
const READ_THREADS: i64 = 200;
/// Active runs read back per repository.
const READ_RUNS: i64 = 100;
/// At most this many of a person's open threads are listed per repository.
const LISTED_THREADS: usize = 15;

/// A repository as the Home tab shows it: its channel and its store.
#[derive(Clone, Debug)]
pub struct HomeRepo {
    pub channel: String,
    pub store: Store,
}

/// Publishes people's Home tabs.
#[derive(Debug)]
pub struct AppHome {
    pub repos: Vec<HomeRepo>,
    pub sender: Sender,
}

/// Why a Home tab could not be published.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("read the store of <#{channel}>: {source}")]
    Store {
        channel: String,
        #[source]
        source: StoreError,
    },
    #[error(transparent)]
    Slack(#[from] SlackError),
}

/// What one repository's section of a person's Home tab shows.
#[derive(Clone, Debug, PartialEq)]
pub struct RepoFigures {
    pub channel: String,
    /// The person's open threads, most recently changed first.
    pub threads: Vec<ThreadOverview>,
    pub running: usize,
    pub queued: usize,
    /// Every model call of the repository today (UTC), USD.
    pub team_today: f64,
    /// The Coder runs the person started today, USD.
    pub yours_today: f64,
}

impl AppHome {
    /// Publishes `user`'s Home tab in a task of its own, and remembers that they opened it
    /// (so it is published again when one of their threads changes,
    /// [`super::home_refresh`]).
    pub fn publish_for(self: &Arc<Self>, user: String) {
        let home = self.clone();
        tokio::spawn(async move {
            if let Some(first) = home.repos.first()
                && let Err(e) = first.store.record_home_viewer(&user).await
            {
                tracing::warn!("remember that {user} opened the app home: {e}");
            }
            if let Err(e) = home.publish(&user, Utc::now()).await {
                tracing::warn!("publish the app home of {user}: {e}");
            }
        });
    }

    /// Whether `user` opened the Home tab (remembered in the first repository's store); a
    /// store that cannot be read says no.
    pub async fn opened_by(&self, user: &str) -> bool {
        let Some(first) = self.repos.first() else {
            return false;
        };
        match first.store.is_home_viewer(user).await {
            Ok(opened) => opened,
            Err(e) => {
                tracing::warn!("read who opened the app home: {e}");
                false
            }
        }
    }

    /// Reads every repository's figures for `user` and publishes their Home tab.
    pub async fn publish(&self, user: &str, now: DateTime<Utc>) -> Result<(), HomeError> {
        let day = now
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap_or_default()
            .and_utc()
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let mut figures = Vec::with_capacity(self.repos.len());
        for repo in &self.repos {
            figures.push(repo_figures(repo, user, &day).await.map_err(|source| {
                HomeError::Store {
                    channel: repo.channel.clone(),
                    source,
                }
            })?);
        }
        self.sender
            .publish_home(user, home_blocks(&figures))
            .await?;
        Ok(())
    }
}

async fn repo_figures(repo: &HomeRepo, user: &str, day: &str) -> Result<RepoFigures, StoreError> {
    let threads = repo
        .store
        .thread_overviews(READ_THREADS)
        .await?
        .into_iter()
        .filter(|t| {
            t.key.channel == repo.channel
                && !t.stage.is_closed()
                && t.started_by.as_deref() == Some(user)
        })
        .collect();
    let runs = repo.store.list_runs(true, READ_RUNS).await?;
    Ok(RepoFigures {
        channel: repo.channel.clone(),
        threads,
        running: runs.iter().filter(|r| r.state == RunState::Running).count(),
        queued: runs.iter().filter(|r| r.state == RunState::Queued).count(),
        team_today: repo.store.spend_since(day).await?,
        yours_today: repo.store.person_spend_since(user, day).await?,
    })
}

/// The Home tab: a header, then one section per repository.
pub fn home_blocks(repos: &[RepoFigures]) -> Vec<SlackBlock> {
    let mut blocks = vec![SlackBlock::Header(SlackHeaderBlock::new(pt!(
        "CodeButler: your threads"
    )))];
    for repo in repos {
        blocks.push(SlackBlock::Section(
            SlackSectionBlock::new().with_text(md!(repo_text(repo))),
        ));
    }
    if repos.is_empty() {
        blocks.push(SlackBlock::Section(
            SlackSectionBlock::new().with_text(md!("No repository is served.")),
        ));
    }
    blocks
}

/// One repository's section, in mrkdwn.
pub fn repo_text(repo: &RepoFigures) -> String {
    let mut text = format!("*<#{}>*\n", repo.channel);
    if repo.threads.is_empty() {
        text.push_str("No open threads of yours.\n");
    }
    for thread in repo.threads.iter().take(LISTED_THREADS) {
        let title = thread_title(thread.first_message.as_deref());
        let _ = write!(
            text,
            "• “{}”: {}",
            escape_text(&title),
            thread.stage.lifecycle()
        );
        if let Some(pr) = &thread.pull_request {
            let _ = write!(text, ", <{}|PR #{}>", pr.url, pr.number);
        }
        let _ = writeln!(text, ", ${:.2}", thread.cost);
    }
    if repo.threads.len() > LISTED_THREADS {
        let _ = writeln!(text, "…and {} more", repo.threads.len() - LISTED_THREADS);
    }
    let _ = write!(
        text,
        "Coder runs: {} running, {} queued · Today (UTC): yours ${:.2}, the team's ${:.2}",
        repo.running, repo.queued, repo.yours_today, repo.team_today
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{PullRequestRef, Stage, ThreadKey};

    #[test]
    fn a_repository_section_lists_the_persons_threads_and_the_day() {
        let thread = ThreadOverview {
            key: ThreadKey {
                channel: "C1".into(),
                thread_ts: "1.0".into(),
            },
            stage: Stage::PrOpened,
            started_by: Some("U1".into()),
            first_message: Some("fix <login>\nmore".into()),
            pull_request: Some(PullRequestRef {
                number: 4,
                url: "https://github.com/o/r/pull/4".into(),
            }),
            cost: 1.234,
            created_at: String::new(),
            updated_at: String::new(),
        };
        let repo = RepoFigures {
            channel: "C1".into(),
            threads: vec![thread],
            running: 1,
            queued: 2,
            team_today: 3.0,
            yours_today: 0.5,
        };
        assert_eq!(
            repo_text(&repo),
            "*<#C1>*\n• “fix &lt;login&gt;”: pr_opened, <https://github.com/o/r/pull/4|PR #4>, $1.23\n\
             Coder runs: 1 running, 2 queued · Today (UTC): yours $0.50, the team's $3.00"
        );
        let empty = RepoFigures {
            threads: Vec::new(),
            ..repo
        };
        assert!(repo_text(&empty).starts_with("*<#C1>*\nNo open threads of yours.\n"));
        assert_eq!(home_blocks(&[empty.clone(), empty]).len(), 3);
    }
}
