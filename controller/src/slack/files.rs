//! Fetching a file people shared (`url_private_download`) with the bot token.
//!
//! The token goes only to Slack: a URL whose origin is not `https://files.slack.com` (or
//! the origin of the configured Web API base, which tests and proxies move) is refused
//! before any request, and redirects are not followed. Slack answers a request it does not
//! authorise with 200 and an HTML sign-in page, so an HTML answer is refused, never taken
//! for the file. The body is read in chunks and dropped the moment it passes the size
//! limit (a `Content-Length` past it is refused before reading), so an oversized file is
//! never held whole.
//!
//! A voice note's transcript and length are read with `files.info` ([`FileFetcher::clip`])
//! when its thread handles it, not from the message event: Slack transcribes a clip after
//! it is shared, so the event rarely carries a finished transcript, and the event's
//! parsed form keeps neither field.

use std::time::Duration;

use crate::secret::Secret;

/// Where Slack serves shared files.
pub const SLACK_FILES_ORIGIN: &str = "https://files.slack.com";

/// How long one file's download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a shared file was not fetched; the text is what the thread is told.
#[derive(Debug, thiserror::Error)]
pub enum FetchRefused {
    #[error("it is not served by Slack ({origin}), and the bot token goes only to Slack")]
    NotSlack { origin: String },
    #[error("it is larger than the {max_mb} MB limit (`attachments.maxMB`)")]
    TooLarge { max_mb: u64 },
    #[error(
        "Slack answered a sign-in page instead of the file (the app needs the `files:read` scope)"
    )]
    SignInPage,
    #[error("Slack answered HTTP {0}")]
    Http(u16),
    #[error("Slack could not be reached: {0}")]
    Transport(String),
    #[error("Slack refused to describe it ({0})")]
    Api(String),
}

/// Fetches shared files with the bot token. Cheap to clone; `Debug` shows no token.
#[derive(Clone)]
pub struct FileFetcher {
    http: reqwest::Client,
    token: Secret,
    /// Origins the token may be sent to.
    origins: Vec<String>,
    /// The Web API base (`files.info` is under it).
    api_url: String,
}

/// What Slack says of a voice note (`files.info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClipInfo {
    /// Slack's transcript, when it has finished one and holds it whole.
    pub transcript: Option<String>,
    /// The clip's length, when Slack says it.
    pub duration_ms: Option<u64>,
}

impl std::fmt::Debug for FileFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileFetcher")
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

impl FileFetcher {
    /// A fetcher sending `bot_token` to Slack's file host and to the origin of `api_url`
    /// (the configured Web API base).
    pub fn new(bot_token: &Secret, api_url: &str) -> Result<Self, FetchRefused> {
        crate::tls::ensure_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(DOWNLOAD_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| FetchRefused::Transport(e.to_string()))?;
        let mut origins = vec![SLACK_FILES_ORIGIN.to_owned()];
        if let Some(origin) = origin_of(api_url) {
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        Ok(Self {
            http,
            token: bot_token.clone(),
            origins,
            api_url: api_url.trim_end_matches('/').to_owned(),
        })
    }

    /// What Slack says of the voice note `file_id` (`files.info`): its transcript, if
    /// finished and whole, and its length.
    pub async fn clip(&self, file_id: &str) -> Result<ClipInfo, FetchRefused> {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/files.info", self.api_url),
            [("file", file_id)],
        )
        .map_err(|e| FetchRefused::Transport(e.to_string()))?;
        let response = self.get(url).await?;
        let body: serde_json::Value = response
            .json()
            .await
            .map_err(|e| FetchRefused::Transport(e.without_url().to_string()))?;
        if body["ok"].as_bool() != Some(true) {
            let error = body["error"].as_str().unwrap_or("unknown error");
            return Err(FetchRefused::Api(error.chars().take(60).collect()));
        }
        Ok(clip_info(&body["file"]))
    }

    /// `GET url` with the bot token (the callers check where it goes first); an answer other
    /// than a success is refused with its status.
    async fn get(&self, url: impl reqwest::IntoUrl) -> Result<reqwest::Response, FetchRefused> {
        let response = self
            .http
            .get(url)
            .bearer_auth(self.token.expose())
            .send()
            .await
            .map_err(|e| FetchRefused::Transport(e.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(FetchRefused::Http(status.as_u16()));
        }
        Ok(response)
    }

    /// The file at `url`, at most `max_bytes` long.
    pub async fn fetch(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, FetchRefused> {
        let origin = origin_of(url).unwrap_or_else(|| "an unreadable address".to_owned());
        if !self.origins.contains(&origin) {
            return Err(FetchRefused::NotSlack { origin });
        }
        let max_mb = max_bytes >> 20;
        let mut response = self.get(url).await?;
        let html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("text/html"));
        if html {
            return Err(FetchRefused::SignInPage);
        }
        if response.content_length().is_some_and(|len| len > max_bytes) {
            return Err(FetchRefused::TooLarge { max_mb });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| FetchRefused::Transport(e.without_url().to_string()))?
        {
            if (bytes.len() + chunk.len()) as u64 > max_bytes {
                return Err(FetchRefused::TooLarge { max_mb });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// A `files.info` file object's transcript (only a `complete` one not cut short:
/// `preview.has_more` false) and length; anything missing or odd is `None`.
fn clip_info(file: &serde_json::Value) -> ClipInfo {
    let transcription = &file["transcription"];
    let preview = &transcription["preview"];
    let transcript = (transcription["status"].as_str() == Some("complete")
        && preview["has_more"].as_bool() != Some(true))
    .then(|| preview["content"].as_str())
    .flatten()
    .map(str::trim)
    .filter(|t| !t.is_empty())
    .map(str::to_owned);
    ClipInfo {
        transcript,
        duration_ms: file["duration_ms"].as_u64(),
    }
}

/// `scheme://host[:port]` of `url`, lower-cased, or `None` when it is not an http(s) URL.
fn origin_of(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    let origin = parsed.origin();
    origin
        .is_tuple()
        .then(|| origin.ascii_serialization().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_complete_whole_transcript_is_taken() {
        let file = |status: &str, has_more: bool| {
            serde_json::json!({"duration_ms": 4200, "transcription": {"status": status,
                "preview": {"content": " fix the login ", "has_more": has_more}}})
        };
        assert_eq!(
            clip_info(&file("complete", false)),
            ClipInfo {
                transcript: Some("fix the login".into()),
                duration_ms: Some(4200)
            }
        );
        assert_eq!(clip_info(&file("processing", false)).transcript, None);
        assert_eq!(clip_info(&file("complete", true)).transcript, None);
        assert_eq!(clip_info(&serde_json::json!({})), ClipInfo::default());
    }

    #[test]
    fn origins_are_compared_whole() {
        assert_eq!(
            origin_of("https://files.slack.com/files-pri/T1-F1/download/a.png").as_deref(),
            Some(SLACK_FILES_ORIGIN)
        );
        assert_eq!(
            origin_of("https://files.slack.com.evil.example/x").as_deref(),
            Some("https://files.slack.com.evil.example")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:4000/api").as_deref(),
            Some("http://127.0.0.1:4000")
        );
        assert_eq!(origin_of("file:///etc/passwd"), None);
        assert_eq!(origin_of("not a url"), None);
    }

    #[tokio::test]
    async fn the_token_goes_to_no_other_host() {
        let token = Secret::new("xoxb-secret");
        let fetcher = FileFetcher::new(&token, "https://slack.com/api").unwrap();
        for url in [
            "https://files.slack.com.evil.example/f",
            "http://files.slack.com/f",
            "https://evil.example/f",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(
                    fetcher.fetch(url, 1 << 20).await,
                    Err(FetchRefused::NotSlack { .. })
                ),
                "{url}"
            );
        }
        assert!(!format!("{fetcher:?}").contains("xoxb"));
    }
}
