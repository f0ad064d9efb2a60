//! One process-wide TLS provider (ring) for both HTTP stacks: reqwest (the model gateway,
//! web fetches) and Slack's hyper client. Every client constructor calls [`ensure_provider`]
//! first, so no code path can build a client before a provider exists.

/// Installs the ring provider unless one is installed already.
pub fn ensure_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_some() {
        return;
    }
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        // Another thread installed one in between, which is just as good.
        tracing::debug!("tls provider installed concurrently");
    }
}
