//! Transcribing a voice note Slack has no transcript of: the clip is posted to the
//! OpenAI-compatible `/audio/transcriptions` endpoint of the configured provider
//! (`voice.provider`, `voice.model`, default `whisper-1`) as a multipart form, and the
//! call's cost (its minutes at `voice.dollarsPerMinute`) is recorded as a usage row of the
//! role [`ROLE`], which the usage report shows as its Whisper line and the daily caps count.
//!
//! The provider's key travels only in the `Authorization` header. An error says the status
//! or the failure, never the provider's own words (a provider may echo part of a key).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{OpenAiConfig, OpenRouterConfig, VoiceConfig, VoiceProvider};
use crate::domain::{ThreadKey, UsageRecord};
use crate::secret::Secret;
use crate::store::Store;

/// The role transcriptions are recorded under (the usage report's "Whisper").
pub const ROLE: &str = "whisper";

/// Why a clip was not transcribed; the text is what the thread is told.
#[derive(Debug, thiserror::Error)]
pub enum TranscribeError {
    #[error("no key for {provider} (`{field}`), which `voice.provider` names")]
    NoKey {
        provider: &'static str,
        field: &'static str,
    },
    #[error("the transcription service answered HTTP {0}")]
    Http(u16),
    #[error("the transcription service could not be reached: {0}")]
    Transport(String),
    #[error("the transcription service took longer than {0:?}")]
    Timeout(Duration),
    #[error("the transcription service answered no text")]
    NoText,
    #[error("cancelled")]
    Cancelled,
}

/// A voice note to transcribe.
#[derive(Clone, Debug)]
pub struct Clip {
    /// The file name sent with it (the controller's, with the clip's extension).
    pub name: String,
    pub mimetype: String,
    pub bytes: Vec<u8>,
    /// Its length as Slack says it, which prices it; else the provider's figure does.
    pub duration_ms: Option<u64>,
}

/// Posts clips to the provider's transcription endpoint. `Debug` shows no key.
#[derive(Clone)]
pub struct Transcriber {
    http: reqwest::Client,
    url: String,
    key: Result<Secret, (&'static str, &'static str)>,
    model: String,
    dollars_per_minute: f64,
    timeout: Duration,
    store: Store,
}

impl std::fmt::Debug for Transcriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcriber")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What the endpoint answers (`json` or `verbose_json`).
#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    text: String,
    /// Seconds (`verbose_json` only).
    duration: Option<f64>,
}

impl Transcriber {
    /// A transcriber for `voice` at its provider (`openai` or `openrouter`), recording
    /// usage in `store`.
    pub fn new(
        voice: &VoiceConfig,
        openrouter: &OpenRouterConfig,
        openai: &OpenAiConfig,
        store: Store,
    ) -> Result<Self, TranscribeError> {
        crate::tls::ensure_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| TranscribeError::Transport(e.without_url().to_string()))?;
        let (base, key) = match voice.provider {
            VoiceProvider::OpenAi => (
                &openai.base_url,
                openai.api_key.clone().ok_or(("OpenAI", "openai.apiKey")),
            ),
            VoiceProvider::OpenRouter => (&openrouter.base_url, Ok(openrouter.api_key.clone())),
        };
        Ok(Self {
            http,
            url: format!("{}/audio/transcriptions", base.trim_end_matches('/')),
            key,
            model: voice.model.clone(),
            dollars_per_minute: voice.dollars_per_minute,
            timeout: Duration::from_secs(openrouter.timeout_secs),
            store,
        })
    }

    /// The transcription model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `clip`'s transcript; the call's cost is recorded against `thread` and `person`, who
    /// sent it (their daily cap counts it).
    pub async fn transcribe(
        &self,
        thread: &ThreadKey,
        person: &str,
        clip: Clip,
        cancel: &CancellationToken,
    ) -> Result<String, TranscribeError> {
        let key = self
            .key
            .as_ref()
            .map_err(|&(provider, field)| TranscribeError::NoKey { provider, field })?;
        let part = reqwest::multipart::Part::bytes(clip.bytes)
            .file_name(clip.name)
            .mime_str(&clip.mimetype)
            .map_err(|e| TranscribeError::Transport(e.without_url().to_string()))?;
        let form = reqwest::multipart::Form::new()
            .text("model", self.model.clone())
            .text("response_format", response_format(&self.model))
            .part("file", part);
        let started = std::time::Instant::now();
        let call = async {
            let response = self
                .http
                .post(&self.url)
                .bearer_auth(key.expose())
                .multipart(form)
                .send()
                .await
                .map_err(|e| TranscribeError::Transport(e.without_url().to_string()))?;
            let status = response.status();
            if !status.is_success() {
                return Err(TranscribeError::Http(status.as_u16()));
            }
            response
                .json::<Answer>()
                .await
                .map_err(|e| TranscribeError::Transport(e.without_url().to_string()))
        };
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(TranscribeError::Cancelled),
            answer = tokio::time::timeout(self.timeout, call) => {
                answer.map_err(|_| TranscribeError::Timeout(self.timeout))??
            }
        };
        let seconds = clip
            .duration_ms
            .map(|ms| ms as f64 / 1000.0)
            .or(answer.duration)
            .filter(|s| s.is_finite() && *s >= 0.0);
        self.record(thread, person, seconds, started.elapsed())
            .await;
        let text = answer.text.trim();
        if text.is_empty() {
            return Err(TranscribeError::NoText);
        }
        Ok(text.to_owned())
    }

    /// Records the call: `seconds` of audio at the configured price (no cost when the
    /// length is unknown).
    async fn record(&self, thread: &ThreadKey, person: &str, seconds: Option<f64>, took: Duration) {
        let cost = seconds.map(|s| s / 60.0 * self.dollars_per_minute);
        if seconds.is_none() {
            tracing::warn!(thread = %thread, "a transcription without a known length is recorded at no cost");
        }
        let record = UsageRecord {
            thread: thread.clone(),
            role: ROLE.to_owned(),
            model: self.model.clone(),
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            cost,
            duration_ms: i64::try_from(took.as_millis()).unwrap_or(i64::MAX),
        };
        crate::metrics::metrics().model_call(ROLE, &self.model, 0, 0, 0, cost);
        if let Err(e) = self.store.record_usage_for(&record, person).await {
            tracing::warn!(thread = %thread, "could not record a transcription's usage: {e}");
        }
    }
}

/// `verbose_json` (which says the clip's length) for Whisper models, which take it; plain
/// `json` for the others.
fn response_format(model: &str) -> &'static str {
    if model.to_ascii_lowercase().contains("whisper") {
        "verbose_json"
    } else {
        "json"
    }
}
