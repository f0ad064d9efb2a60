//! Voice notes (`voice`): which provider and model transcribe an audio or video clip that
//! Slack has no transcript of, and what a minute of it costs (the usage report and the
//! daily caps count it). The provider's key is the controller's (`openai.apiKey` or
//! `openrouter.apiKey`); it never appears here.

use serde::Deserialize;

use super::ConfigError;
use super::origin::Origin;

/// The default `voice.model`.
pub const DEFAULT_MODEL: &str = "whisper-1";
/// The default `voice.dollarsPerMinute`: OpenAI's price of `whisper-1`.
pub const DEFAULT_DOLLARS_PER_MINUTE: f64 = 0.006;

/// Which provider's `/audio/transcriptions` endpoint transcribes clips.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VoiceProvider {
    /// OpenAI directly (`openai.baseUrl`, `openai.apiKey`): the default.
    OpenAi,
    /// OpenRouter's OpenAI-compatible equivalent (`openrouter.baseUrl`, `openrouter.apiKey`).
    OpenRouter,
}

/// Transcription of voice notes.
#[derive(Clone, Debug, PartialEq)]
pub struct VoiceConfig {
    pub provider: VoiceProvider,
    /// The transcription model (`whisper-1`).
    pub model: String,
    /// What one minute of audio costs, in USD.
    pub dollars_per_minute: f64,
}

impl Default for VoiceConfig {
    fn default() -> Self {
        Self {
            provider: VoiceProvider::OpenAi,
            model: DEFAULT_MODEL.into(),
            dollars_per_minute: DEFAULT_DOLLARS_PER_MINUTE,
        }
    }
}

/// What a file may say in `voice`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct VoiceFile {
    provider: Option<VoiceProvider>,
    model: Option<String>,
    dollars_per_minute: Option<f64>,
}

impl VoiceFile {
    /// The section with its defaults; a blank model or a price that is negative or not a
    /// number is an error.
    pub fn resolve(self, origin: &Origin) -> Result<VoiceConfig, ConfigError> {
        let defaults = VoiceConfig::default();
        let model = match self.model {
            Some(model) if model.trim().is_empty() => {
                return Err(origin.field_error("voice.model", "must name a model".into()));
            }
            Some(model) => model.trim().to_owned(),
            None => defaults.model,
        };
        let dollars_per_minute = self
            .dollars_per_minute
            .unwrap_or(defaults.dollars_per_minute);
        if !dollars_per_minute.is_finite() || dollars_per_minute < 0.0 {
            return Err(origin.field_error(
                "voice.dollarsPerMinute",
                format!("must be a price of 0 or more, not {dollars_per_minute}"),
            ));
        }
        Ok(VoiceConfig {
            provider: self.provider.unwrap_or(defaults.provider),
            model,
            dollars_per_minute,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voice_defaults_to_whisper_at_openai_and_refuses_bad_prices() {
        let sources = crate::config::ConfigSources {
            global: "/g/config.json".into(),
            repo: "/r/config.json".into(),
        };
        let repo = serde_json::json!({});
        let origin = Origin {
            sources: &sources,
            repo: &repo,
        };
        let read: VoiceFile = serde_json::from_str("{}").unwrap();
        assert_eq!(read.resolve(&origin).unwrap(), VoiceConfig::default());
        let read: VoiceFile =
            serde_json::from_str(r#"{"provider": "openrouter", "model": "openai/whisper"}"#)
                .unwrap();
        let voice = read.resolve(&origin).unwrap();
        assert_eq!(
            (voice.provider, voice.model.as_str()),
            (VoiceProvider::OpenRouter, "openai/whisper")
        );
        let read: VoiceFile = serde_json::from_str(r#"{"dollarsPerMinute": -1}"#).unwrap();
        assert!(read.resolve(&origin).is_err());
        assert!(serde_json::from_str::<VoiceFile>(r#"{"provider": "azure"}"#).is_err());
    }
}
