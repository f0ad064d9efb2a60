//! Unit tests: the fakes driven by plain HTTP/websocket clients and by slack-morphism itself.

mod gh;
mod git;
mod model;
mod slack_history;
mod slack_morphism_client;
mod slack_raw;

use std::sync::Once;

/// reqwest is built with `rustls-no-provider`: install ring once.
pub(crate) fn http() -> reqwest::Client {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::new()
}
