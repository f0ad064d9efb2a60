//! Model prices from OpenRouter's model list (`GET /models`, read by [`super::model_list`]),
//! for the cost estimate on a plan when the repository has no earlier run to go by.
//!
//! OpenRouter gives prices as strings of US dollars per token, e.g.
//! `"pricing": {"prompt": "0.000015", "completion": "0.000075", "input_cache_read": "0.0000015"}`.
//!
//! Images drawn through OpenAI's own images API are priced per image by quality and size,
//! from OpenAI's published table ([`image_price`]); the API's answer carries no cost.

/// One model's prices, in USD per token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pricing {
    pub prompt: f64,
    pub completion: f64,
    /// The price of a prompt token read from the provider's cache, when it caches.
    pub cache_read: Option<f64>,
}

/// The shape of a typical Coder run, for an estimate from prices alone: turns, the first
/// prompt (system prompt, tool definitions and plan), what each turn adds to the
/// conversation, and what the model writes per turn. Deliberately middle-of-the-road; once
/// a repository has finished runs, their median replaces this.
const TYPICAL_TURNS: f64 = 15.0;
const FIRST_PROMPT_TOKENS: f64 = 6_000.0;
const GROWTH_PER_TURN: f64 = 1_500.0;
const COMPLETION_PER_TURN: f64 = 400.0;

/// What a typical Coder run costs at `pricing`. Every turn re-sends the conversation so far;
/// with a cache price, what an earlier turn already sent is read from the cache.
pub fn typical_run_cost(pricing: &Pricing) -> f64 {
    let turns = TYPICAL_TURNS;
    let prompt_total = turns * FIRST_PROMPT_TOKENS + GROWTH_PER_TURN * turns * (turns - 1.0) / 2.0;
    let completion = turns * COMPLETION_PER_TURN * pricing.completion;
    match pricing.cache_read {
        Some(cache_read) => {
            let fresh = FIRST_PROMPT_TOKENS + GROWTH_PER_TURN * (turns - 1.0);
            fresh * pricing.prompt + (prompt_total - fresh) * cache_read + completion
        }
        None => prompt_total * pricing.prompt + completion,
    }
}

/// OpenAI's published price of one `gpt-image-1` image (USD), by quality then size:
/// `(quality, size, price)`.
const GPT_IMAGE_1: [(&str, &str, f64); 9] = [
    ("low", "1024x1024", 0.011),
    ("low", "1024x1536", 0.016),
    ("low", "1536x1024", 0.016),
    ("medium", "1024x1024", 0.042),
    ("medium", "1024x1536", 0.063),
    ("medium", "1536x1024", 0.063),
    ("high", "1024x1024", 0.167),
    ("high", "1024x1536", 0.25),
    ("high", "1536x1024", 0.25),
];

/// The sizes an image may be drawn at (those OpenAI prices for `gpt-image-1`).
pub const IMAGE_SIZES: [&str; 3] = ["1024x1024", "1024x1536", "1536x1024"];

/// The price of one image of `model` at `quality` and `size` through OpenAI's images API,
/// when its table has it (`gpt-image-1` only; another model's price is not known).
pub fn image_price(model: &str, quality: &str, size: &str) -> Option<f64> {
    if model != "gpt-image-1" {
        return None;
    }
    GPT_IMAGE_1
        .iter()
        .find(|(q, s, _)| *q == quality && *s == size)
        .map(|(_, _, price)| *price)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt_image_1_is_priced_per_image_by_quality_and_size() {
        assert_eq!(
            image_price("gpt-image-1", "medium", "1024x1024"),
            Some(0.042)
        );
        assert_eq!(image_price("gpt-image-1", "high", "1536x1024"), Some(0.25));
        assert_eq!(image_price("gpt-image-1", "medium", "512x512"), None);
        assert_eq!(image_price("dall-e-3", "medium", "1024x1024"), None);
        for size in IMAGE_SIZES {
            assert!(image_price("gpt-image-1", "low", size).is_some());
        }
    }

    #[test]
    fn a_typical_run_costs_less_with_a_prompt_cache() {
        let opus = Pricing {
            prompt: 0.000015,
            completion: 0.000075,
            cache_read: None,
        };
        // 15 turns: 90,000 + 157,500 prompt tokens, 6,000 completion tokens.
        let plain = typical_run_cost(&opus);
        assert!((plain - (247_500.0 * 0.000015 + 6_000.0 * 0.000075)).abs() < 1e-9);
        let cached = typical_run_cost(&Pricing {
            cache_read: Some(0.0000015),
            ..opus
        });
        // 27,000 fresh tokens, 220,500 read from the cache.
        let expected = 27_000.0 * 0.000015 + 220_500.0 * 0.0000015 + 6_000.0 * 0.000075;
        assert!((cached - expected).abs() < 1e-9, "{cached}");
        assert!(cached < plain / 3.0);
    }
}
