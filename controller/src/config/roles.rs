//! The roles' sections: the PM's model pool (its default and memory-extraction models must
//! be in it), the Coder's model, limits and budget, the Artist, and the reviewer (off unless
//! its model is set) and the researcher.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::mcp::{self, McpServerFile, McpServers};
use super::origin::Origin;
use super::{ConfigError, Secrets, minutes};

/// `coder.maxCostPerThread` when the config does not say (USD).
pub const DEFAULT_MAX_COST_PER_THREAD: f64 = 10.0;

/// The PM's model when the pool is not configured: Moonshot's Kimi K2 as OpenRouter names
/// it.
pub const DEFAULT_PM_MODEL: &str = "moonshotai/kimi-k2";

/// `coder.model` when the config does not say: Claude Opus 4.6 as OpenRouter names it (a
/// dot in the version, where Anthropic's own API writes `claude-opus-4-6`).
pub const DEFAULT_CODER_MODEL: &str = "anthropic/claude-opus-4.6";

/// The Coder role.
#[derive(Clone, Debug, PartialEq)]
pub struct CoderConfig {
    pub model: String,
    pub max_turns: u32,
    /// Minutes (fractions allowed).
    pub timeout_mins: f64,
    /// The model's context window in tokens (compaction starts at 80 % of it).
    pub context_window: u64,
    /// What a thread's Coder may spend, in USD, unless the thread sets its own budget
    /// ("budget $N"); 0 means no cap.
    pub max_cost_per_thread: f64,
    /// The model (an OpenRouter id) that answers the Coder's calls while `model`'s breaker
    /// is open or it fails.
    pub fallback: Option<String>,
    /// The MCP servers whose tools the Coder gets (`coder.mcpServers`).
    pub mcp_servers: McpServers,
}

/// The PM role's model pool.
#[derive(Clone, Debug, PartialEq)]
pub struct ProductManagerConfig {
    /// Key into `models` of the model used by default.
    pub default: String,
    /// Key into `models` of the model used for memory extraction.
    pub memory_extraction: String,
    pub models: BTreeMap<String, ModelChoice>,
    /// The OpenRouter model id `default` names, looked up once when loading (where a
    /// `default` outside the pool is refused), so it cannot be missing later.
    default_model: String,
    /// The model (an OpenRouter id) that answers the PM's calls while its model's breaker is
    /// open or it fails.
    pub fallback: Option<String>,
    /// The model (an OpenRouter id, from `productManager.overBudget`, a key into `models`)
    /// that answers the PM while a daily spending cap is reached; `None`: the PM keeps its
    /// model (the caps then hold Coder runs only).
    pub over_budget: Option<String>,
}

impl ProductManagerConfig {
    /// The OpenRouter model id of the default PM model.
    pub fn default_model(&self) -> &str {
        &self.default_model
    }
}

/// One entry of a model pool.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelChoice {
    pub model: String,
    #[serde(default)]
    pub label: Option<String>,
}

/// The Artist role.
#[derive(Clone, Debug, PartialEq)]
pub struct ArtistConfig {
    /// `openai` or `openrouter`, lower-case.
    pub provider: String,
    pub model: String,
    /// `artist.dollarsPerImage`: what one image through OpenRouter costs, shown in the
    /// proposal and recorded when OpenRouter's answer reports no cost; `None`: the last
    /// image's reported cost is shown instead.
    pub dollars_per_image: Option<f64>,
}

/// What a file may say in `productManager`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ProductManagerFile {
    default: Option<String>,
    memory_extraction: Option<String>,
    #[serde(default)]
    models: BTreeMap<String, ModelChoice>,
    fallback: Option<String>,
    over_budget: Option<String>,
}

/// The key of the pool used when the configuration names none.
const BUILT_IN_KEY: &str = "kimi";

impl ProductManagerFile {
    /// The pool (the built-in one if empty) and the models chosen from it, which must be
    /// in it.
    pub fn resolve(self, origin: &Origin) -> Result<ProductManagerConfig, ConfigError> {
        let models = if self.models.is_empty() {
            BTreeMap::from([(
                BUILT_IN_KEY.to_owned(),
                ModelChoice {
                    model: DEFAULT_PM_MODEL.into(),
                    label: Some("Kimi".into()),
                },
            )])
        } else {
            self.models
        };
        // The pool is not empty here, so its first key always exists.
        let first = models.keys().next().map_or(BUILT_IN_KEY, String::as_str);
        let default = self.default.unwrap_or_else(|| first.to_owned());
        let memory_extraction = self.memory_extraction.unwrap_or_else(|| default.clone());
        let pick = |field: &str, key: &str| {
            models.get(key).map(|m| m.model.clone()).ok_or_else(|| {
                origin.field_error(
                    field,
                    format!(
                        "names model `{key}`, which is not in productManager.models (known: {})",
                        models.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )
            })
        };
        let default_model = pick("productManager.default", &default)?;
        pick("productManager.memoryExtraction", &memory_extraction)?;
        let over_budget = match &self.over_budget {
            Some(key) => Some(pick("productManager.overBudget", key)?),
            None => None,
        };
        Ok(ProductManagerConfig {
            default,
            memory_extraction,
            models,
            default_model,
            fallback: self.fallback,
            over_budget,
        })
    }
}

/// What a file may say in `coder`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct CoderFile {
    model: Option<String>,
    max_turns: Option<u32>,
    timeout: Option<f64>,
    context_window: Option<u64>,
    max_cost_per_thread: Option<f64>,
    fallback: Option<String>,
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServerFile>,
}

impl CoderFile {
    /// The section with its defaults; the time limit, the budget and the MCP servers
    /// checked (their tokens taken from the environment).
    pub fn resolve(self, origin: &Origin, secrets: &Secrets) -> Result<CoderConfig, ConfigError> {
        let timeout_mins = minutes(origin, "coder.timeout", self.timeout, 30.0)?;
        let max_cost_per_thread = match self.max_cost_per_thread {
            None => DEFAULT_MAX_COST_PER_THREAD,
            Some(c) if c.is_finite() && c >= 0.0 => c,
            Some(c) => {
                return Err(origin.field_error(
                    "coder.maxCostPerThread",
                    format!("{c} is not an amount of US dollars (0 or more; 0 means no cap)"),
                ));
            }
        };
        Ok(CoderConfig {
            model: self.model.unwrap_or_else(|| DEFAULT_CODER_MODEL.into()),
            max_turns: self.max_turns.unwrap_or(25),
            timeout_mins,
            context_window: self.context_window.unwrap_or(200_000).max(1_000),
            max_cost_per_thread,
            fallback: self.fallback,
            mcp_servers: mcp::resolve(self.mcp_servers, origin, secrets)?,
        })
    }
}

/// What a file may say in `artist`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ArtistFile {
    provider: Option<String>,
    model: Option<String>,
    dollars_per_image: Option<f64>,
}

impl ArtistFile {
    /// The section with its defaults; a provider other than `openai` and `openrouter`, or a
    /// price that is negative or not a number, is an error.
    pub fn resolve(self, origin: &Origin) -> Result<ArtistConfig, ConfigError> {
        let provider = self
            .provider
            .map_or_else(|| "openai".to_owned(), |p| p.trim().to_lowercase());
        if provider != "openai" && provider != super::model_fields::OPENROUTER_PROVIDER {
            return Err(origin.field_error(
                "artist.provider",
                format!("must be \"openai\" or \"openrouter\", not {provider:?}"),
            ));
        }
        if let Some(price) = self.dollars_per_image
            && (!price.is_finite() || price < 0.0)
        {
            return Err(origin.field_error(
                "artist.dollarsPerImage",
                format!("must be a price of 0 or more, not {price}"),
            ));
        }
        Ok(ArtistConfig {
            provider,
            model: self.model.unwrap_or_else(|| "gpt-image-1".into()),
            dollars_per_image: self.dollars_per_image,
        })
    }
}

/// The reviewer: a model that reviews each head of a thread's pull request (`reviewer`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReviewerConfig {
    /// The model (an OpenRouter id); the section is absent (and the reviewer off) without it.
    pub model: String,
    /// What one review may cost, in USD (`reviewer.maxCostPerReview`); `None`: no cap of its
    /// own (the daily caps and the thread's budget still hold).
    pub max_cost_per_review: Option<f64>,
    /// The model that reviews while `model` fails or its breaker is open
    /// (`reviewer.fallback`); `None`: the PM's fallback, as for every other call.
    pub fallback: Option<String>,
}

/// What a file may say in `reviewer`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ReviewerFile {
    model: Option<String>,
    max_cost_per_review: Option<f64>,
    fallback: Option<String>,
}

impl ReviewerFile {
    /// The reviewer, or `None` (off) when no model is set; the cap checked.
    pub fn resolve(self, origin: &Origin) -> Result<Option<ReviewerConfig>, ConfigError> {
        let max_cost_per_review = match self.max_cost_per_review {
            None => None,
            Some(c) if c.is_finite() && c > 0.0 => Some(c),
            Some(c) => {
                return Err(origin.field_error(
                    "reviewer.maxCostPerReview",
                    format!("{c} is not an amount of US dollars (more than 0)"),
                ));
            }
        };
        let fallback = model_id(self.fallback);
        let Some(model) = model_id(self.model) else {
            for (field, set) in [
                ("reviewer.maxCostPerReview", max_cost_per_review.is_some()),
                ("reviewer.fallback", fallback.is_some()),
            ] {
                if set {
                    return Err(origin.field_error(
                        field,
                        "is set but reviewer.model is not: set the reviewer's model to turn it on"
                            .to_owned(),
                    ));
                }
            }
            return Ok(None);
        };
        Ok(Some(ReviewerConfig {
            model,
            max_cost_per_review,
            fallback,
        }))
    }
}

/// What a file may say in `researcher`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ResearcherFile {
    model: Option<String>,
    fallback: Option<String>,
}

/// The researcher's models.
#[derive(Clone, Debug, PartialEq)]
pub struct ResearcherConfig {
    /// Its model (an OpenRouter id): `researcher.model`, else the PM's default model.
    pub model: String,
    /// The model that answers while `model` fails or its breaker is open
    /// (`researcher.fallback`); `None`: the PM's fallback, as for every other call.
    pub fallback: Option<String>,
}

impl ResearcherFile {
    /// The researcher's models, its own defaulting to the PM's default model `pm_default`.
    pub fn resolve(self, pm_default: &str) -> ResearcherConfig {
        ResearcherConfig {
            model: model_id(self.model).unwrap_or_else(|| pm_default.to_owned()),
            fallback: model_id(self.fallback),
        }
    }
}

/// A model id as written, trimmed; `None` when absent or blank.
fn model_id(written: Option<String>) -> Option<String> {
    written
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
}
