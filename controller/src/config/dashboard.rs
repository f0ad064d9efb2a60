//! The dashboard (`dashboard`): where its HTTP server listens (`listen`) and the token a
//! browser or a Prometheus scraper must show (`token`). Off unless the global file has the
//! section.
//!
//! Only the global file may set it: a repository's `.codebutler/config.json` can be
//! committed by anyone who can push to the repository, and the dashboard shows every
//! repository the service serves, so a repository must not be able to open it on another
//! address or pick its token. A token is a secret like the others (from
//! `CODEBUTLER_DASHBOARD_TOKEN` first, never shown); an address other than the loopback
//! without one is refused, since anyone on the network could then read it.

use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;
use super::secrets::Secrets;
use crate::secret::Secret;

/// The dashboard's default address: the loopback only, on a port outside the ones
/// development servers and Prometheus exporters usually take (3000, 5000, 8000, 8080,
/// 9090–9100).
pub const DEFAULT_DASHBOARD_LISTEN: &str = "127.0.0.1:8741";

/// The environment variable that may hold the dashboard's token instead of the file.
pub const ENV_DASHBOARD_TOKEN: &str = "CODEBUTLER_DASHBOARD_TOKEN";

/// The fewest characters a token may have: a shorter one is guessed too easily.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The dashboard's settings, when it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DashboardConfig {
    /// The address its server listens on.
    pub listen: SocketAddr,
    /// What a request must show (`Authorization: Bearer`, its cookie or `?token=`); `None`
    /// only on a loopback address.
    pub token: Option<Secret>,
}

/// What the global file may say in `dashboard`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DashboardFile {
    listen: Option<String>,
    token: Option<Secret>,
}

/// The section as the global file at `path` holds it (`None`: absent or `null`, the
/// dashboard off), typed and checked.
pub(super) fn resolve(
    value: Option<Value>,
    path: &Path,
    secrets: &Secrets,
) -> Result<Option<DashboardConfig>, ConfigError> {
    let field_error = |field: &str, message: String| ConfigError::Field {
        path: path.to_owned(),
        field: format!("dashboard{field}"),
        message,
    };
    let file: DashboardFile = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => serde_path_to_error::deserialize(value).map_err(|e| {
            let inner = e.path().to_string();
            let field = if inner == "." {
                String::new()
            } else {
                format!(".{inner}")
            };
            field_error(&field, e.inner().to_string())
        })?,
    };
    let listen_text = file.listen.as_deref().unwrap_or(DEFAULT_DASHBOARD_LISTEN);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        field_error(
            ".listen",
            format!(
                "{listen_text:?} is not an address and port such as {DEFAULT_DASHBOARD_LISTEN}"
            ),
        )
    })?;
    let token = secrets.optional(file.token, ENV_DASHBOARD_TOKEN);
    if let Some(token) = &token
        && token.expose().chars().count() < MIN_TOKEN_CHARS
    {
        return Err(field_error(
            ".token",
            format!(
                "the token is shorter than {MIN_TOKEN_CHARS} characters: use a long random one \
                 (e.g. `openssl rand -hex 32`)"
            ),
        ));
    }
    if token.is_none() && !listen.ip().is_loopback() {
        return Err(field_error(
            ".token",
            format!(
                "the dashboard listens on {listen}, outside this host's loopback, so it needs a \
                 token: set dashboard.token or {ENV_DASHBOARD_TOKEN}, or listen on 127.0.0.1"
            ),
        ));
    }
    Ok(Some(DashboardConfig { listen, token }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigSources;
    use serde_json::json;

    fn resolve_with(
        value: Option<Value>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<DashboardConfig>, ConfigError> {
        let sources = ConfigSources {
            global: "/home/config.json".into(),
            repo: "/repo/.codebutler/config.json".into(),
        };
        let secrets = Secrets {
            env,
            sources: &sources,
        };
        resolve(value, &sources.global, &secrets)
    }

    const TOKEN: &str = "0123456789abcdef0123";

    #[test]
    fn off_unless_the_section_is_there() {
        assert_eq!(resolve_with(None, &|_| None).unwrap(), None);
        assert_eq!(resolve_with(Some(Value::Null), &|_| None).unwrap(), None);
    }

    #[test]
    fn an_empty_section_listens_on_the_loopback_default() {
        let config = resolve_with(Some(json!({})), &|_| None).unwrap().unwrap();
        assert_eq!(config.listen.to_string(), DEFAULT_DASHBOARD_LISTEN);
        assert_eq!(config.token, None);
    }

    #[test]
    fn a_public_address_without_a_token_is_refused() {
        let e = resolve_with(Some(json!({"listen": "0.0.0.0:8741"})), &|_| None).unwrap_err();
        assert!(e.to_string().contains("dashboard.token"), "{e}");
        let ok = resolve_with(
            Some(json!({"listen": "0.0.0.0:8741", "token": TOKEN})),
            &|_| None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(ok.token.as_ref().map(Secret::expose), Some(TOKEN));
    }

    #[test]
    fn the_environment_token_wins_and_is_never_shown() {
        let env =
            |k: &str| (k == ENV_DASHBOARD_TOKEN).then(|| "from-the-env-0123456789".to_owned());
        let config = resolve_with(Some(json!({"token": TOKEN})), &env)
            .unwrap()
            .unwrap();
        assert_eq!(
            config.token.as_ref().map(Secret::expose),
            Some("from-the-env-0123456789")
        );
        assert!(!format!("{config:?}").contains("from-the-env"));
    }

    #[test]
    fn a_short_token_and_a_bad_address_are_refused_without_showing_the_token() {
        let e = resolve_with(Some(json!({"token": "short-secret"})), &|_| None).unwrap_err();
        assert!(e.to_string().contains("shorter than 16"), "{e}");
        assert!(!e.to_string().contains("short-secret"), "{e}");
        let e = resolve_with(Some(json!({"listen": "localhost"})), &|_| None).unwrap_err();
        assert!(e.to_string().contains("dashboard.listen"), "{e}");
        let e = resolve_with(Some(json!({"port": 1})), &|_| None).unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
