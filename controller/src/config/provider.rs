//! The model providers: OpenRouter, which every chat completion goes through (its key is
//! required), and OpenAI, used directly only for images (its key is optional).

use serde::Deserialize;

use super::secrets::Secrets;
use super::{ConfigError, ENV_OPENAI_API_KEY, ENV_OPENROUTER_API_KEY, base_url};
use crate::secret::Secret;

/// The model provider every chat completion goes through.
#[derive(Clone, Debug)]
pub struct OpenRouterConfig {
    pub api_key: Secret,
    /// Base URL without a trailing slash (`…/chat/completions` is appended).
    pub base_url: String,
    /// Timeout of one model call, in seconds.
    pub timeout_secs: u64,
    /// Retries after the first attempt on 429, 5xx and timeouts.
    pub max_retries: u32,
    /// Failures of a model in a row (5xx, timeouts) after which it is skipped for the
    /// cool-down and the role's fallback answers; 0 turns the breaker off.
    pub breaker_failures: u32,
    /// How long a model the breaker opened for is skipped, in seconds.
    pub breaker_cool_down_secs: u64,
}

/// OpenAI, used directly only for images.
#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    pub api_key: Option<Secret>,
    pub base_url: String,
}

/// What a file may say in `openrouter`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OpenRouterFile {
    api_key: Option<Secret>,
    base_url: Option<String>,
    timeout_seconds: Option<u64>,
    max_retries: Option<u32>,
    breaker_failures: Option<u32>,
    breaker_cool_down_secs: Option<u64>,
}

impl OpenRouterFile {
    /// The section with its defaults (the breaker opens after 3 failures in a row for 5
    /// minutes, as the spec says), the key from the environment first.
    pub fn resolve(self, secrets: &Secrets) -> Result<OpenRouterConfig, ConfigError> {
        Ok(OpenRouterConfig {
            api_key: secrets.required(
                self.api_key,
                ENV_OPENROUTER_API_KEY,
                "openrouter.apiKey",
                r#""openrouter": {"apiKey": "sk-or-…"}"#,
            )?,
            base_url: base_url(self.base_url, "https://openrouter.ai/api/v1"),
            timeout_secs: self.timeout_seconds.unwrap_or(120),
            max_retries: self.max_retries.unwrap_or(5),
            breaker_failures: self.breaker_failures.unwrap_or(3),
            breaker_cool_down_secs: self.breaker_cool_down_secs.unwrap_or(300),
        })
    }
}

/// What a file may say in `openai`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct OpenAiFile {
    api_key: Option<Secret>,
    base_url: Option<String>,
}

impl OpenAiFile {
    /// The section with its defaults, the key from the environment first.
    pub fn resolve(self, secrets: &Secrets) -> OpenAiConfig {
        OpenAiConfig {
            api_key: secrets.optional(self.api_key, ENV_OPENAI_API_KEY),
            base_url: base_url(self.base_url, "https://api.openai.com/v1"),
        }
    }
}
