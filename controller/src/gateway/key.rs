//! The model key checked at start: OpenRouter's `GET /key` answers with the key's details,
//! or 401 for a key it does not know. One cheap call, so a refused key stops the start with
//! a line saying which setting holds it, instead of failing the first question in a thread.
//! A provider behind `openrouter.baseUrl` that has no such endpoint (404), an error of the
//! provider's own or no answer says nothing about the key: the start goes on, logging it.

use std::time::Duration;

use crate::config::OpenRouterConfig;

/// How long the check may take.
const KEY_CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// What the provider said of the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCheck {
    /// It knows the key.
    Accepted,
    /// It refused the key (HTTP 401 or 403).
    Refused { status: u16 },
    /// Nothing certain: the endpoint is missing, the provider failed or could not be
    /// reached (why, in a few words).
    Unknown(String),
}

/// Asks `GET {baseUrl}/key` with the configured key.
pub async fn check_key(config: &OpenRouterConfig) -> KeyCheck {
    crate::tls::ensure_provider();
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("codebutler/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(client) => client,
        Err(e) => return KeyCheck::Unknown(e.without_url().to_string()),
    };
    let answer = client
        .get(format!("{}/key", config.base_url))
        .bearer_auth(config.api_key.expose())
        .timeout(KEY_CHECK_TIMEOUT)
        .send()
        .await;
    match answer {
        Ok(response) => match response.status().as_u16() {
            200..=299 => KeyCheck::Accepted,
            status @ (401 | 403) => KeyCheck::Refused { status },
            status => KeyCheck::Unknown(format!("HTTP {status}")),
        },
        // reqwest's message names the URL, which holds no secret; the key is in a header.
        Err(e) => KeyCheck::Unknown(e.without_url().to_string()),
    }
}
