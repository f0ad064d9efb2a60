//! Where the store lives (`store`): `url` is `sqlite` (the default: one SQLite file per
//! repository, `.codebutler/store.db`) or a `postgres://…` URL, the server every repository
//! and every host shares, each repository in a schema of its own. The URL can hold a
//! password, so it is read as a secret (also from `CODEBUTLER_STORE_URL`, which wins) and
//! never shown. It belongs in the global file only: the repositories of one service share
//! one store server, so a repository's file saying otherwise is an error.

use serde::Deserialize;

use super::origin::Origin;
use super::secrets::Secrets;
use super::{ConfigError, ENV_STORE_URL};
use crate::secret::Secret;
use crate::store::StoreUrl;

/// What a file may say in `store`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoreFile {
    url: Option<Secret>,
}

impl StoreFile {
    /// The store's URL: the environment's, else the global file's, else SQLite.
    pub fn resolve(self, origin: &Origin, secrets: &Secrets) -> Result<StoreUrl, ConfigError> {
        if origin.repo.pointer("/store/url").is_some() {
            return Err(origin.field_error(
                "store.url",
                "belongs in the global config: every repository of a service shares one store"
                    .to_owned(),
            ));
        }
        let from_env = (secrets.env)(ENV_STORE_URL).is_some_and(|v| !v.trim().is_empty());
        match secrets.optional(self.url, ENV_STORE_URL) {
            None => Ok(StoreUrl::Sqlite),
            Some(url) => StoreUrl::parse(url.expose()).map_err(|e| {
                if from_env {
                    ConfigError::Env {
                        var: ENV_STORE_URL.to_owned(),
                        message: e.to_string(),
                    }
                } else {
                    origin.field_error("store.url", e.to_string())
                }
            }),
        }
    }
}
