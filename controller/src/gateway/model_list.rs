//! The provider's model list (`GET /models` in OpenRouter's shape): which model ids it
//! carries, and their prices. Read once at start, where every model id the configuration
//! names is checked against it (a mistyped id stops the start instead of failing the first
//! approved plan's run), then kept by the gateway for the prices of a plan's estimate.
//!
//! OpenRouter answers `GET /models` with text models only unless asked for
//! `output_modalities=all`; the list is asked for every modality, so an image model (the
//! Artist's, on OpenRouter) is in it too.
//!
//! An id the list lacks comes with the closest ids it has ([`ModelList::lookup`]): up to
//! [`MAX_CLOSEST`], the provider's prefix typed (`anthropic/`) first, by edit distance —
//! so Anthropic's own `claude-opus-4-6` finds OpenRouter's `anthropic/claude-opus-4.6`.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde::Deserialize;

use crate::config::OpenRouterConfig;
use crate::gateway::pricing::Pricing;

/// The most close ids suggested for one the list lacks.
pub const MAX_CLOSEST: usize = 3;

/// The list's path under the provider's base URL: every model, whatever it outputs.
const MODELS_PATH: &str = "/models?output_modalities=all";

/// The model ids a provider carries, and the prices of those it prices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelList {
    ids: BTreeSet<String>,
    prices: HashMap<String, Pricing>,
    /// The ids whose `architecture.input_modalities` lists `image`.
    see_images: BTreeSet<String>,
}

/// What the list says of one id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The provider carries it.
    Known,
    /// The provider does not carry it; these are the closest ids it does (perhaps none).
    Unknown { closest: Vec<String> },
}

/// Why the list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ModelListError {
    #[error("the provider answered HTTP {0}")]
    Http(u16),
    #[error("the provider could not be reached: {0}")]
    Transport(String),
    #[error("its answer is not a model list: {0}")]
    Decode(String),
}

#[derive(Deserialize)]
struct RawList {
    data: Vec<RawEntry>,
}

#[derive(Deserialize)]
struct RawEntry {
    id: String,
    pricing: Option<RawPricing>,
    architecture: Option<RawArchitecture>,
}

#[derive(Deserialize)]
struct RawArchitecture {
    #[serde(default)]
    input_modalities: Vec<String>,
}

#[derive(Deserialize)]
struct RawPricing {
    prompt: Option<String>,
    completion: Option<String>,
    input_cache_read: Option<String>,
}

impl ModelList {
    /// A `/models` answer read. Every entry's id is kept; prices only where the prompt and
    /// completion prices read as non-negative numbers (OpenRouter writes `-1` for "varies").
    pub fn parse(body: &str) -> Result<ModelList, serde_json::Error> {
        let list: RawList = serde_json::from_str(body)?;
        let price = |text: &Option<String>| {
            text.as_deref()
                .and_then(|t| t.trim().parse::<f64>().ok())
                .filter(|p| p.is_finite() && *p >= 0.0)
        };
        let mut models = ModelList::default();
        for entry in list.data {
            let pricing = entry.pricing.and_then(|p| {
                Some(Pricing {
                    prompt: price(&p.prompt)?,
                    completion: price(&p.completion)?,
                    cache_read: price(&p.input_cache_read),
                })
            });
            if let Some(pricing) = pricing {
                models.prices.insert(entry.id.clone(), pricing);
            }
            if entry
                .architecture
                .is_some_and(|a| a.input_modalities.iter().any(|m| m == "image"))
            {
                models.see_images.insert(entry.id.clone());
            }
            models.ids.insert(entry.id);
        }
        Ok(models)
    }

    /// Whether the provider listed no model at all (which says nothing of any id).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether the provider says `model` takes images as input
    /// (`architecture.input_modalities`).
    pub fn sees_images(&self, model: &str) -> bool {
        self.see_images.contains(model)
    }

    /// `model`'s prices, when the list prices it.
    pub fn pricing(&self, model: &str) -> Option<Pricing> {
        self.prices.get(model).copied()
    }

    /// Whether the provider carries `id` (exactly, as a request names it), and if not, the
    /// closest ids it does.
    pub fn lookup(&self, id: &str) -> Lookup {
        if self.ids.contains(id) {
            Lookup::Known
        } else {
            Lookup::Unknown {
                closest: self.closest(id),
            }
        }
    }

    /// Up to [`MAX_CLOSEST`] ids close to `id` (within a third of the longer one's length in
    /// edit distance, case ignored): those of the provider `id` names (`anthropic/…`) first,
    /// then by distance. An `id` without a provider is compared with the ids' model names.
    fn closest(&self, id: &str) -> Vec<String> {
        let wanted = id.trim().to_lowercase();
        let (wanted_provider, wanted_name) = split(&wanted);
        let mut close: Vec<(bool, usize, &str)> = self
            .ids
            .iter()
            .filter_map(|known| {
                let lower = known.to_lowercase();
                let (provider, name) = split(&lower);
                let (a, b) = match wanted_provider {
                    Some(_) => (wanted.as_str(), lower.as_str()),
                    None => (wanted_name, name),
                };
                let (len_a, len_b) = (a.chars().count(), b.chars().count());
                let longer = len_a.max(len_b);
                // The distance is at least the difference in length: skip what cannot pass.
                if len_a.abs_diff(len_b) * 3 > longer {
                    return None;
                }
                let distance = strsim::levenshtein(a, b);
                let other_provider = wanted_provider.is_some() && provider != wanted_provider;
                (distance * 3 <= longer).then_some((other_provider, distance, known.as_str()))
            })
            .collect();
        close.sort_unstable();
        close
            .into_iter()
            .take(MAX_CLOSEST)
            .map(|(_, _, id)| id.to_owned())
            .collect()
    }
}

/// `provider/name` split at its first `/`; an id without one is all name.
fn split(id: &str) -> (Option<&str>, &str) {
    match id.split_once('/') {
        Some((provider, name)) => (Some(provider), name),
        None => (None, id),
    }
}

/// Reads the list with `http`, within `timeout`.
pub async fn fetch_with(
    http: &reqwest::Client,
    config: &OpenRouterConfig,
    timeout: Duration,
) -> Result<ModelList, ModelListError> {
    // reqwest's message names the URL, which holds no secret; the key is in a header.
    let transport = |e: reqwest::Error| ModelListError::Transport(e.without_url().to_string());
    let response = http
        .get(format!("{}{MODELS_PATH}", config.base_url))
        .bearer_auth(config.api_key.expose())
        .timeout(timeout)
        .send()
        .await
        .map_err(transport)?;
    let status = response.status();
    if !status.is_success() {
        return Err(ModelListError::Http(status.as_u16()));
    }
    let body = response.text().await.map_err(transport)?;
    ModelList::parse(&body).map_err(|e| ModelListError::Decode(e.to_string()))
}

/// Reads the list with a client of its own (the start's checks, before the gateway exists).
pub async fn fetch(
    config: &OpenRouterConfig,
    timeout: Duration,
) -> Result<ModelList, ModelListError> {
    crate::tls::ensure_provider();
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ModelListError::Transport(e.without_url().to_string()))?;
    fetch_with(&http, config, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(ids: &[&str]) -> ModelList {
        let data: Vec<_> = ids.iter().map(|id| serde_json::json!({"id": id})).collect();
        ModelList::parse(&serde_json::json!({ "data": data }).to_string()).unwrap()
    }

    /// Ids as OpenRouter writes them (dots in Anthropic's versions).
    fn openrouter() -> ModelList {
        list(&[
            "anthropic/claude-opus-4.6",
            "anthropic/claude-opus-4.6-fast",
            "anthropic/claude-opus-4.5",
            "anthropic/claude-sonnet-4.5",
            "anthropic/claude-haiku-4.5",
            "moonshotai/kimi-k2",
            "moonshotai/kimi-k2-0905",
            "openai/gpt-5",
            "openai/gpt-4o-mini",
            "google/gemini-2.5-flash-image",
        ])
    }

    fn closest(id: &str) -> Vec<String> {
        match openrouter().lookup(id) {
            Lookup::Known => panic!("{id} is listed"),
            Lookup::Unknown { closest } => closest,
        }
    }

    #[test]
    fn every_id_is_kept_and_only_readable_prices() {
        let body = r#"{"data": [
            {"id": "anthropic/claude-opus-4.6", "name": "Claude",
             "pricing": {"prompt": "0.000015", "completion": "0.000075", "request": "0",
                         "image": "0", "input_cache_read": "0.0000015", "input_cache_write": "0.00001875"}},
            {"id": "openai/gpt-5", "pricing": {"prompt": "0.00000125", "completion": "0.00001"}},
            {"id": "openrouter/auto", "pricing": {"prompt": "-1", "completion": "-1"}},
            {"id": "no/pricing"}
        ]}"#;
        let models = ModelList::parse(body).unwrap();
        assert_eq!(
            models.pricing("anthropic/claude-opus-4.6"),
            Some(Pricing {
                prompt: 0.000015,
                completion: 0.000075,
                cache_read: Some(0.0000015)
            })
        );
        assert_eq!(models.pricing("openai/gpt-5").unwrap().cache_read, None);
        assert_eq!(models.pricing("openrouter/auto"), None);
        assert_eq!(models.pricing("no/pricing"), None);
        for id in [
            "anthropic/claude-opus-4.6",
            "openai/gpt-5",
            "openrouter/auto",
            "no/pricing",
        ] {
            assert_eq!(models.lookup(id), Lookup::Known, "{id}");
        }
        assert!(ModelList::parse("not json").is_err());
        assert!(ModelList::parse(r#"{"data": [{"name": "no id"}]}"#).is_err());
        assert!(ModelList::parse(r#"{"data": []}"#).unwrap().is_empty());
    }

    #[test]
    fn anthropics_own_naming_finds_openrouters_dotted_ids() {
        assert_eq!(
            closest("anthropic/claude-opus-4-6"),
            [
                "anthropic/claude-opus-4.6",
                "anthropic/claude-opus-4.5",
                "anthropic/claude-opus-4.6-fast"
            ]
        );
        // Without the provider's prefix, as Anthropic's API names it.
        assert_eq!(
            closest("claude-sonnet-4-5"),
            ["anthropic/claude-sonnet-4.5"]
        );
        assert_eq!(
            closest("anthropic/claude-opus-4-7-typo"),
            [
                "anthropic/claude-opus-4.6-fast",
                "anthropic/claude-opus-4.5",
                "anthropic/claude-opus-4.6"
            ]
        );
    }

    #[test]
    fn the_typed_provider_comes_first_and_far_ids_are_not_suggested() {
        // Another provider's id nearer in edit distance comes after the typed provider's.
        assert_eq!(
            list(&["acmx/model-12", "acme/model-1234"]).lookup("acme/model-12"),
            Lookup::Unknown {
                closest: vec!["acme/model-1234".into(), "acmx/model-12".into()]
            }
        );
        assert_eq!(
            closest("moonshotai/kimi-k3"),
            ["moonshotai/kimi-k2", "moonshotai/kimi-k2-0905"]
        );
        assert_eq!(closest("OpenAI/GPT-5"), ["openai/gpt-5"]);
        assert!(closest("mistralai/codestral-2508").is_empty());
        assert!(closest("").is_empty());
        // Case matters to the provider: a request names the id exactly.
        assert_ne!(openrouter().lookup("OpenAI/GPT-5"), Lookup::Known);
    }

    #[test]
    fn at_most_three_are_suggested() {
        let many = list(&["a/m-1", "a/m-2", "a/m-3", "a/m-4", "a/m-5"]);
        assert_eq!(
            many.lookup("a/m-0"),
            Lookup::Unknown {
                closest: vec!["a/m-1".into(), "a/m-2".into(), "a/m-3".into()]
            }
        );
    }
}
