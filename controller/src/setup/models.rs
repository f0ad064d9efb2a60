//! The model ids the answers leave in the configuration, checked by `codebutler init` the
//! way the service's start checks them ([`preflight::model_ids`]: each id looked up in the
//! provider's model list). An id the list lacks is named with the closest ids it holds; in a
//! terminal the operator types another (the closest is the default) and it is written where
//! the old one was, without a terminal the set-up ends with that line and writes nothing.

use serde_json::json;

use super::InitError;
use super::prompt::Asker;
use crate::config::Config;
use crate::config::edit::Document;
use crate::service::preflight::{self, SetupMistake};

/// What the check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelCheck {
    /// Every id is listed, or the list could not be read (said): go on.
    Done,
    /// An id was replaced in one of the documents: load the configuration again and check
    /// anew.
    Changed,
}

/// Checks the model ids of `config` (merged from `global` and `repo`), asking for a
/// replacement of one the provider lacks.
pub async fn check(
    asker: &mut dyn Asker,
    config: &Config,
    global: &mut Document,
    repo: &mut Document,
) -> Result<ModelCheck, InitError> {
    let url = config.openrouter.base_url.trim_end_matches('/').to_owned();
    match preflight::model_ids(config).await {
        Ok(Some(_)) => {
            asker.say(&format!(
                "  [ok] model ids: the provider at {url} lists each the configuration names"
            ));
            Ok(ModelCheck::Done)
        }
        Ok(None) => {
            asker.say(&format!(
                "  [..] model ids not checked: the provider at {url} gave no model list \
                 (GET {url}/models)"
            ));
            Ok(ModelCheck::Done)
        }
        Err(mistake @ SetupMistake::UnknownModel { .. }) if asker.interactive() => {
            asker.say(&format!("  [!!] {mistake}"));
            let SetupMistake::UnknownModel {
                field, id, closest, ..
            } = &mistake
            else {
                return Err(mistake.into());
            };
            let default = closest.first().unwrap_or(id);
            let answer = asker.text(&format!("Model id for {field}"), default)?;
            let path = field_path(field);
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            // Written where it came from: the repository's file wins over the global one.
            let target = if repo.get(&path).is_some() || global.get(&path).is_none() {
                repo
            } else {
                global
            };
            target.set(&path, json!(answer));
            Ok(ModelCheck::Changed)
        }
        Err(mistake) => Err(mistake.into()),
    }
}

/// The JSON path of a model field as [`Config::provider_model_ids`] names it: a PM pool
/// entry's key may hold dots, so `productManager.models.<key>.model` keeps it whole.
fn field_path(field: &str) -> Vec<String> {
    if let Some(key) = field
        .strip_prefix("productManager.models.")
        .and_then(|rest| rest.strip_suffix(".model"))
    {
        return ["productManager", "models", key, "model"]
            .map(str::to_owned)
            .to_vec();
    }
    field.split('.').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_key_with_dots_stays_one_key() {
        assert_eq!(field_path("coder.model"), ["coder", "model"]);
        assert_eq!(
            field_path("productManager.models.kimi.k2.model"),
            ["productManager", "models", "kimi.k2", "model"]
        );
        assert_eq!(field_path("artist.model"), ["artist", "model"]);
    }
}
