//! The Slack Web API side: building the slack-morphism client (any base URL, http or https,
//! so a fake on 127.0.0.1 works), learning the bot's identity with `auth.test`, and a sender
//! that posts into threads, reacts and uploads snippets while respecting Slack's limits: a
//! per-channel pace for `chat.postMessage` and a wait of `Retry-After` on HTTP 429.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::secret::Secret;
use crate::slack::format::Outgoing;

/// The HTTP connector type of our client.
pub type Connector = SlackClientHyperConnector<HttpsConnector<HttpConnector>>;
/// Our slack-morphism client.
pub type Client = SlackClient<Connector>;

/// How many times a call refused with 429 is retried.
const MAX_RATE_LIMIT_RETRIES: u32 = 5;

/// A Slack call that failed.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    #[error("set up Slack client: {0}")]
    Setup(String),
    #[error("slack {method}: {source}")]
    Api {
        method: &'static str,
        source: SlackClientError,
    },
}

/// Builds the client for the Web API at `api_url` (no trailing slash).
pub fn build_client(api_url: &str) -> Result<Arc<Client>, SlackError> {
    crate::tls::ensure_provider();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| SlackError::Setup(format!("load system TLS roots: {e}")))?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .build();
    let connector = Connector::with_connector(https).with_slack_api_url(api_url);
    Ok(Arc::new(SlackClient::new(connector)))
}

/// The bot's identity.
#[derive(Clone, Debug)]
pub struct BotIdentity {
    pub user_id: String,
    pub team_id: String,
}

/// Calls `auth.test` to learn the bot's user id (to ignore its own messages).
pub async fn auth_test(client: &Client, bot_token: &Secret) -> Result<BotIdentity, SlackError> {
    let token = SlackApiToken::new(bot_token.expose().into());
    let response = client
        .open_session(&token)
        .auth_test()
        .await
        .map_err(|source| SlackError::Api {
            method: "auth.test",
            source,
        })?;
    Ok(BotIdentity {
        user_id: response.user_id.0,
        team_id: response.team_id.0,
    })
}

/// Posts, reacts and uploads on the bot's behalf. Cheap to clone.
#[derive(Clone)]
pub struct Sender {
    client: Arc<Client>,
    token: SlackApiToken,
    pace: Arc<Pace>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl Sender {
    /// A sender with the bot token, posting at most `messages_per_second` per channel.
    pub fn new(client: Arc<Client>, bot_token: &Secret, messages_per_second: f64) -> Self {
        Self {
            client,
            token: SlackApiToken::new(bot_token.expose().into()),
            pace: Arc::new(Pace::new(messages_per_second)),
        }
    }

    /// Posts `text` into the thread; returns the new message's ts.
    pub async fn post(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
    ) -> Result<String, SlackError> {
        self.post_content(
            channel,
            thread_ts,
            SlackMessageContent::new().with_text(text.into()),
        )
        .await
    }

    /// Posts a message made of Block Kit `blocks`, with `text` as its notification and
    /// accessibility fallback; returns the new message's ts.
    pub async fn post_blocks(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
        blocks: Vec<SlackBlock>,
    ) -> Result<String, SlackError> {
        self.post_content(
            channel,
            thread_ts,
            SlackMessageContent::new()
                .with_text(text.into())
                .with_blocks(blocks),
        )
        .await
    }

    /// Posts `content` into the thread, paced; returns the new message's ts.
    async fn post_content(
        &self,
        channel: &str,
        thread_ts: &str,
        content: SlackMessageContent,
    ) -> Result<String, SlackError> {
        self.pace.wait(channel).await;
        let request = SlackApiChatPostMessageRequest::new(channel.into(), content)
            .with_thread_ts(thread_ts.into())
            .with_unfurl_links(false);
        let response = self
            .retrying("chat.postMessage", || async {
                self.client
                    .open_session(&self.token)
                    .chat_post_message(&request)
                    .await
            })
            .await?;
        Ok(response.ts.0)
    }

    /// Sends a rendered reply whose last text message carries the blocks `blocks_for` makes
    /// of its text (buttons under a plan); returns that message's ts.
    pub async fn send_with_blocks(
        &self,
        channel: &str,
        thread_ts: &str,
        parts: &[Outgoing],
        blocks_for: impl Fn(&str) -> Vec<SlackBlock>,
    ) -> Result<String, SlackError> {
        let last_text = parts
            .iter()
            .rposition(|p| matches!(p, Outgoing::Text(_)))
            .unwrap_or(parts.len());
        let (before, rest) = parts.split_at(last_text.min(parts.len()));
        self.send(channel, thread_ts, before).await?;
        let Some((Outgoing::Text(text), after)) = rest.split_first() else {
            // No text at all: post the blocks on their own line.
            let text = "(see above)";
            return self
                .post_blocks(channel, thread_ts, text, blocks_for(text))
                .await;
        };
        let ts = self
            .post_blocks(channel, thread_ts, text, blocks_for(text))
            .await?;
        self.send(channel, thread_ts, after).await?;
        Ok(ts)
    }

    /// Replaces the text of a message the bot posted.
    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<(), SlackError> {
        self.update_content(
            channel,
            ts,
            SlackMessageContent::new().with_text(text.into()),
        )
        .await
    }

    /// Replaces a message the bot posted with `blocks` and the fallback `text`; an empty
    /// `blocks` removes the message's blocks (and so its buttons).
    pub async fn update_blocks(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        blocks: Vec<SlackBlock>,
    ) -> Result<(), SlackError> {
        self.update_content(
            channel,
            ts,
            SlackMessageContent::new()
                .with_text(text.into())
                .with_blocks(blocks),
        )
        .await
    }

    async fn update_content(
        &self,
        channel: &str,
        ts: &str,
        content: SlackMessageContent,
    ) -> Result<(), SlackError> {
        let request = SlackApiChatUpdateRequest::new(channel.into(), content, ts.into());
        self.retrying("chat.update", || async {
            self.client
                .open_session(&self.token)
                .chat_update(&request)
                .await
        })
        .await?;
        Ok(())
    }

    /// Adds a reaction; one that is already there is fine.
    pub async fn react(&self, channel: &str, ts: &str, name: &str) -> Result<(), SlackError> {
        let request = SlackApiReactionsAddRequest::new(channel.into(), name.into(), ts.into());
        let result = self
            .retrying("reactions.add", || async {
                self.client
                    .open_session(&self.token)
                    .reactions_add(&request)
                    .await
            })
            .await;
        match result {
            Err(SlackError::Api {
                source: SlackClientError::ApiError(ref e),
                ..
            }) if e.code == "already_reacted" => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// Uploads `content` as a snippet file into the thread (files upload v2).
    pub async fn upload_snippet(
        &self,
        channel: &str,
        thread_ts: &str,
        filename: &str,
        filetype: &str,
        content: &str,
    ) -> Result<(), SlackError> {
        let url_request =
            SlackApiFilesGetUploadUrlExternalRequest::new(filename.into(), content.len())
                .with_snippet_type(SlackFileSnippetType(filetype.into()));
        let target = self
            .retrying("files.getUploadURLExternal", || async {
                self.client
                    .open_session(&self.token)
                    .get_upload_url_external(&url_request)
                    .await
            })
            .await?;
        let upload = SlackApiFilesUploadViaUrlRequest::new(
            target.upload_url.clone(),
            content.as_bytes().to_vec(),
            "text/plain".into(),
        );
        self.retrying("files upload", || async {
            self.client
                .open_session(&self.token)
                .files_upload_via_url(&upload)
                .await
        })
        .await?;
        let complete = SlackApiFilesCompleteUploadExternalRequest::new(vec![
            SlackApiFilesComplete::new(target.file_id.clone()).with_title(filename.into()),
        ])
        .with_channel_id(channel.into())
        .with_thread_ts(thread_ts.into());
        self.retrying("files.completeUploadExternal", || async {
            self.client
                .open_session(&self.token)
                .files_complete_upload_external(&complete)
                .await
        })
        .await?;
        Ok(())
    }

    /// Sends a rendered reply into a thread, in order.
    pub async fn send(
        &self,
        channel: &str,
        thread_ts: &str,
        parts: &[Outgoing],
    ) -> Result<(), SlackError> {
        for part in parts {
            match part {
                Outgoing::Text(text) => {
                    self.post(channel, thread_ts, text).await?;
                }
                Outgoing::Snippet {
                    filename,
                    filetype,
                    content,
                } => {
                    self.upload_snippet(channel, thread_ts, filename, filetype, content)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// Runs `call`, waiting out HTTP 429 answers as long as their `Retry-After` says.
    async fn retrying<T, F, Fut>(&self, method: &'static str, call: F) -> Result<T, SlackError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = ClientResult<T>>,
    {
        let mut attempt = 0;
        loop {
            match call().await {
                Err(SlackClientError::RateLimitError(e)) if attempt < MAX_RATE_LIMIT_RETRIES => {
                    let wait = e.retry_after.unwrap_or(Duration::from_secs(1));
                    tracing::warn!(
                        "slack {method} rate limited; retrying in {}s",
                        wait.as_secs_f64()
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(source) => return Err(SlackError::Api { method, source }),
                Ok(v) => return Ok(v),
            }
        }
    }
}

/// Spaces out posts per channel (Slack allows about one message per second per channel).
#[derive(Debug)]
struct Pace {
    interval: Duration,
    next: Mutex<HashMap<String, Instant>>,
}

impl Pace {
    fn new(per_second: f64) -> Self {
        let interval = if per_second > 0.0 && per_second.is_finite() {
            Duration::from_secs_f64(1.0 / per_second)
        } else {
            Duration::ZERO
        };
        Self {
            interval,
            next: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for this channel's next slot, reserving it.
    async fn wait(&self, channel: &str) {
        if self.interval.is_zero() {
            return;
        }
        let slot = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let slot = next
                .get(channel)
                .copied()
                .filter(|s| *s > now)
                .unwrap_or(now);
            next.insert(channel.to_owned(), slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pace_spaces_posts_per_channel() {
        let pace = Pace::new(1.0);
        let start = Instant::now();
        pace.wait("C1").await;
        pace.wait("C2").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        pace.wait("C1").await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        pace.wait("C1").await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
