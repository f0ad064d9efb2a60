//! Every model id the configuration names for the model provider, with the field that names
//! it, so the start can check each against the provider's model list and name the field to
//! fix. One line per field: a role or a fallback added later is one more line here.
//!
//! `productManager.default` and `.memoryExtraction` name keys of the PM's pool, so the
//! pool's entries cover them. The Artist's model is the provider's only when
//! `artist.provider` is `openrouter`; with `openai` (the default) it is an id of OpenAI's own
//! images API, which OpenRouter's list does not hold.

use super::Config;

/// `artist.provider` when the Artist's images come through OpenRouter.
pub const OPENROUTER_PROVIDER: &str = "openrouter";

/// A model id and the configuration field it is written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelField {
    /// The field's path, as the configuration files spell it (`coder.model`).
    pub field: String,
    /// The model id, as requests name it.
    pub id: String,
}

impl ModelField {
    fn new(field: impl Into<String>, id: &str) -> Self {
        Self {
            field: field.into(),
            id: id.to_owned(),
        }
    }
}

impl Config {
    /// The model ids requests to the model provider (`openrouter`) name, in a fixed order:
    /// the PM's pool and fallback, the Coder and its fallback, the researcher (when not the
    /// PM's) and its fallback, the reviewer and its fallback, then the Artist when it draws
    /// through OpenRouter.
    pub fn provider_model_ids(&self) -> Vec<ModelField> {
        let mut fields: Vec<ModelField> = self
            .product_manager
            .models
            .iter()
            .map(|(key, choice)| {
                ModelField::new(format!("productManager.models.{key}.model"), &choice.model)
            })
            .collect();
        if let Some(fallback) = &self.product_manager.fallback {
            fields.push(ModelField::new("productManager.fallback", fallback));
        }
        fields.push(ModelField::new("coder.model", &self.coder.model));
        if let Some(fallback) = &self.coder.fallback {
            fields.push(ModelField::new("coder.fallback", fallback));
        }
        if self.researcher.model != self.product_manager.default_model() {
            fields.push(ModelField::new("researcher.model", &self.researcher.model));
        }
        if let Some(fallback) = &self.researcher.fallback {
            fields.push(ModelField::new("researcher.fallback", fallback));
        }
        if let Some(reviewer) = &self.reviewer {
            fields.push(ModelField::new("reviewer.model", &reviewer.model));
            if let Some(fallback) = &reviewer.fallback {
                fields.push(ModelField::new("reviewer.fallback", fallback));
            }
        }
        if self
            .artist
            .provider
            .eq_ignore_ascii_case(OPENROUTER_PROVIDER)
        {
            fields.push(ModelField::new("artist.model", &self.artist.model));
        }
        fields
    }
}
